/** What every view shares: the page's regions, navigation, the live region and problems as sentences. */
import { kindOf, problemOf, sentenceOf, SIGNED_OUT_KINDS } from './api'
import { h } from './dom'
import { forgetTokens, signIn } from './session'

export const main = document.getElementById('main') as HTMLElement
const announcer = document.getElementById('announce') as HTMLElement

let renderView: () => Promise<void> = async () => {}
export const onNavigate = (render: () => Promise<void>) => (renderView = render)

/** Says `text` to screen readers (and shows it in the page's status line). */
export function announce(text: string) {
	announcer.textContent = ''
	// Set on the next frame, so that the same sentence twice is read twice.
	requestAnimationFrame(() => (announcer.textContent = text))
}

/** Goes to a console path (a new entry of the tab's history, with `state`) and shows it. */
export function navigate(path: string, state: unknown = null) {
	history.pushState(state, '', path)
	return renderView()
}

/** A refusal of the API shown as a sentence at the top of `container`; a sign-in that ended signs in again. */
export function showProblem(container: HTMLElement, error: { status: number; value: unknown } | null | undefined) {
	const refused = problemOf(error) ?? { status: 0, problem: undefined }
	if (SIGNED_OUT_KINDS.has(kindOf(refused.problem))) {
		forgetTokens()
		void signIn(location.pathname + location.search)
		return
	}
	container.querySelector(':scope > .alert')?.remove()
	const kind = kindOf(refused.problem)
	// Where the sentence says what to do, the way there: the account's security page (the pages', not the console's).
	const next = kind === 'mfa-enrollment-required' || kind === 'mfa-required' ? h('a', { href: '/account/security' }, 'Go to your account’s security page') : undefined
	const alert = h('p', { class: 'alert', role: 'alert', tabindex: '-1' }, sentenceOf(refused.status, refused.problem), next ? ' ' : '', next)
	const heading = container.querySelector(':scope > h1')
	if (heading) heading.after(alert)
	else container.prepend(alert)
	alert.focus()
}

/** Focus on the view's heading after a change of view, so that a screen reader starts there. */
export function focusHeading() {
	const heading = main.querySelector('h1')
	if (!heading) return
	heading.setAttribute('tabindex', '-1')
	heading.focus()
}
