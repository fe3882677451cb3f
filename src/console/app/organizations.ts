/** Organizations: to be built (issue 28). */
import { h, replace } from './dom'
import { focusHeading } from './shell'

export async function organizationsView(main: HTMLElement, _url: URL) {
	replace(main, h('h1', {}, 'Organizations'), h('p', {}, 'Not built yet.'))
	focusHeading()
}

export async function organizationView(main: HTMLElement, _url: URL, id: string) {
	replace(main, h('h1', {}, 'Organizations'), h('p', {}, `Not built yet: ${id}.`))
	focusHeading()
}
