/** Webhooks: to be built (issue 28). */
import { h, replace } from './dom'
import { focusHeading } from './shell'

export async function webhooksView(main: HTMLElement, _url: URL) {
	replace(main, h('h1', {}, 'Webhooks'), h('p', {}, 'Not built yet.'))
	focusHeading()
}

export async function webhookView(main: HTMLElement, _url: URL, id: string) {
	replace(main, h('h1', {}, 'Webhooks'), h('p', {}, `Not built yet: ${id}.`))
	focusHeading()
}
