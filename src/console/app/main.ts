/**
 * The admin console: a small browser app (no framework) that signs in through Latchkey's own provider and then
 * calls only the public API. Paths under /console are its views; the server answers each with the same page.
 */
import { api } from './api'
import { h, replace } from './dom'
import { accessToken, finishSignIn, forgetTokens, operator, rememberOperator, signIn, signOut, SignInFailed, type Operator } from './session'
import { focusHeading, main, nav, navigate, onNavigate, showProblem } from './shell'
import { auditView } from './audit'
import { oauthClientView, oauthClientsView } from './oauth-clients'
import { organizationView, organizationsView } from './organizations'
import { settingsView } from './settings'
import { usersView } from './users'
import { userView } from './user'
import { webhookView, webhooksView } from './webhooks'

type View = (main: HTMLElement, url: URL, id: string) => Promise<void>
const ID = '([0-9a-fA-F-]{36})'

/** The console's views by path (after /console, no trailing slash); `id` is the first group matched. */
const VIEWS: Array<[RegExp, View]> = [
	[/^(?:\/users)?$/, (main, url) => usersView(main, url)],
	[new RegExp(`^/users/${ID}$`), (main, _url, id) => userView(main, id)],
	[/^\/organizations$/, (main, url) => organizationsView(main, url)],
	[new RegExp(`^/organizations/${ID}$`), (main, url, id) => organizationView(main, url, id)],
	[/^\/oauth-clients$/, (main, url) => oauthClientsView(main, url)],
	// A client's page is named by its client_id (`latchkey-console` is one), as the API names it.
	[/^\/oauth-clients\/([A-Za-z0-9._~-]{1,200})$/, (main, url, id) => oauthClientView(main, url, id)],
	[/^\/webhooks$/, (main, url) => webhooksView(main, url)],
	[new RegExp(`^/webhooks/${ID}$`), (main, url, id) => webhookView(main, url, id)],
	[/^\/audit$/, (main, url) => auditView(main, url)],
	[/^\/settings$/, (main, url) => settingsView(main, url)],
]

const who = document.getElementById('who') as HTMLElement
const signOutButton = document.getElementById('sign-out') as HTMLButtonElement

let me: Operator | undefined

async function render(): Promise<void> {
	const url = new URL(location.href)
	if (url.pathname === '/console/callback') {
		try {
			const next = await finishSignIn(url)
			history.replaceState(null, '', next)
		} catch (error) {
			const sentence = error instanceof SignInFailed ? error.message : 'The sign-in could not be finished. Sign in again.'
			replace(main, h('h1', {}, 'Sign-in failed'), h('p', { class: 'alert', role: 'alert' }, sentence), h('button', { type: 'button', class: 'primary', onclick: () => void signIn('/console') }, 'Sign in'))
			return
		}
		return render()
	}
	if (!accessToken()) {
		me = undefined
		await signIn(url.pathname + url.search)
		return
	}
	me ??= operator()
	if (!me) {
		const { data, error } = await api.users({ id: 'me' }).get()
		if (error || !data) {
			replace(main, h('h1', {}, 'Console'))
			return showProblem(main, error)
		}
		me = data.data
		rememberOperator(me)
	}
	if (!who.textContent) {
		replace(who, h('span', { class: 'muted' }, 'Signed in as '), me.email)
		signOutButton.hidden = false
	}
	if (me.role !== 'admin') {
		nav.hidden = true
		replace(
			main,
			h('h1', {}, 'Not an administrator'),
			h('p', { class: 'alert', role: 'alert' }, 'This account is not an administrator: the console is for administrators. Sign in with an administrator’s account, or ask one to make you an administrator.'),
			h('button', { type: 'button', class: 'primary', onclick: () => { forgetTokens(); void signIn('/console', 'login') } }, 'Sign in with another account'),
		)
		focusHeading()
		return
	}
	nav.hidden = false
	const path = url.pathname.replace(/\/+$/, '').slice('/console'.length)
	const found = VIEWS.map(([pattern, view]) => [pattern.exec(path), view] as const).find(([match]) => match)
	for (const link of nav.querySelectorAll('a')) {
		const section = link.pathname.slice('/console'.length)
		if (section === path || path.startsWith(`${section}/`) || (section === '/users' && path === '')) link.setAttribute('aria-current', 'page')
		else link.removeAttribute('aria-current')
	}
	if (found) await found[1](main, url, found[0]?.[1] ?? '')
	else replace(main, h('h1', {}, 'Not found'), h('p', {}, 'The console has no page at this address. '), h('a', { href: '/console/users', 'data-nav': true }, 'Go to the users'))
	document.title = `${main.querySelector('h1')?.textContent ?? 'Console'} · Console`
}

// Links inside the console change the view without a page load.
document.addEventListener('click', (event) => {
	const link = (event.target as Element | null)?.closest?.('a[data-nav]')
	if (!(link instanceof HTMLAnchorElement) || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return
	event.preventDefault()
	navigate(link.pathname + link.search)
})
onNavigate(render)
window.addEventListener('popstate', () => void render())
signOutButton.addEventListener('click', () => signOut())

void render()
