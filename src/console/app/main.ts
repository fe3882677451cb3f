/**
 * The admin console: a small browser app (no framework) that signs in through Latchkey's own provider and then
 * calls only the public API. Paths under /console are its views; the server answers each with the same page.
 */
import { api } from './api'
import { h, replace } from './dom'
import { accessToken, finishSignIn, forgetTokens, signIn, signOut, SignInFailed } from './session'
import { focusHeading, main, navigate, onNavigate, showProblem } from './shell'
import { usersView } from './users'
import { userView } from './user'

const who = document.getElementById('who') as HTMLElement
const signOutButton = document.getElementById('sign-out') as HTMLButtonElement
const nav = document.getElementById('nav') as HTMLElement

let me: { id: string; email: string; role: string } | undefined

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
	if (!me) {
		const { data, error } = await api.users({ id: 'me' }).get()
		if (error || !data) {
			replace(main, h('h1', {}, 'Console'))
			return showProblem(main, error)
		}
		me = data.data
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
	const path = url.pathname.replace(/\/+$/, '')
	const userPath = /^\/console\/users\/([0-9a-fA-F-]{36})$/.exec(path)
	if (path === '/console' || path === '/console/users') await usersView(main, url)
	else if (userPath?.[1]) await userView(main, userPath[1])
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
