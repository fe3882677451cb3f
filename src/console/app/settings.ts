/** Settings: to be built (issue 28). */
import { h, replace } from './dom'
import { focusHeading } from './shell'

export async function settingsView(main: HTMLElement, _url: URL) {
	replace(main, h('h1', {}, 'Settings'), h('p', {}, 'Not built yet.'))
	focusHeading()
}
