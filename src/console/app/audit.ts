/** The audit log: to be built (issue 28). */
import { h, replace } from './dom'
import { focusHeading } from './shell'

export async function auditView(main: HTMLElement, _url: URL) {
	replace(main, h('h1', {}, 'The audit log'), h('p', {}, 'Not built yet.'))
	focusHeading()
}
