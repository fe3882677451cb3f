/** What every view shares: the page's regions, navigation, the live region and problems as sentences. */
import { kindOf, problemOf, sentenceOf, SIGNED_OUT_KINDS } from './api'
import { h, replace } from './dom'
import { forgetTokens, signIn } from './session'

export const main = document.getElementById('main') as HTMLElement
export const nav = document.getElementById('nav') as HTMLElement
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
	const kind = kindOf(refused.problem)
	const sentence = sentenceOf(refused.status, refused.problem)
	// An enrolment-only session may do nothing here but add a factor on the account page: no section is shown, only
	// the way there and back (a new sign-in, which then has the factor).
	if (kind === 'mfa-enrollment-required') {
		nav.hidden = true
		replace(
			main,
			h('h1', {}, 'Add a second factor first'),
			h('p', { class: 'alert', role: 'alert' }, sentence),
			h('p', {}, h('a', { href: '/account/security' }, 'Go to your account’s security page'), ' · ', signInAgain('Sign in to the console again')),
		)
		return focusHeading()
	}
	container.querySelector(':scope > .alert')?.remove()
	// Where the sentence says what to do, the way there: a sign-in that proves more (a second factor, a recent one).
	const next = kind === 'mfa-required' || kind === 'reauthentication-required' ? signInAgain('Sign in again') : undefined
	const alert = h('p', { class: 'alert', role: 'alert', tabindex: '-1' }, sentence, next ? ' ' : '', next)
	const heading = container.querySelector(':scope > h1')
	if (heading) heading.after(alert)
	else container.prepend(alert)
	alert.focus()
}

/** A button that signs in afresh (the provider asks again, with the second factor the account has), back here. */
const signInAgain = (label: string) =>
	h('button', { type: 'button', class: 'secondary small', onclick: () => { forgetTokens(); void signIn(location.pathname + location.search, 'login') } }, label)

/** Focus on the view's heading after a change of view, so that a screen reader starts there. */
export function focusHeading() {
	const heading = main.querySelector('h1')
	if (!heading) return
	heading.setAttribute('tabindex', '-1')
	heading.focus()
}
