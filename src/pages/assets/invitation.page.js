// /pages/invitation.js: the /invitation page (the pages' policy runs no inline script). An invitation's token is
// in the link's fragment (#token=…), which a browser never sends: this script keeps it in the tab's session
// storage (so that signing in or up first, in this tab, comes back to it), takes it out of the address bar,
// and, signed in, posts it to the page, which shows the organization and its roles with the Accept button.
;(() => {
	const KEY = 'latchkey.invitation'
	const stored = () => {
		try {
			return window.sessionStorage.getItem(KEY)
		} catch {
			return null
		}
	}
	const store = (value) => {
		try {
			if (value === null) window.sessionStorage.removeItem(KEY)
			else window.sessionStorage.setItem(KEY, value)
		} catch {}
	}
	// The invitation was accepted: nothing is kept.
	if (document.querySelector('[data-invitation-done]')) {
		store(null)
		return
	}
	const shown = (id, visible) => {
		const element = document.getElementById(id)
		if (element) element.hidden = !visible
	}
	const take = () => {
		const found = /(?:^#|&)token=([A-Za-z0-9_-]{1,512})(?:&|$)/.exec(window.location.hash)
		if (found) {
			store(found[1])
			window.history.replaceState(null, '', window.location.pathname + window.location.search)
		}
		const token = found ? found[1] : stored()
		shown('invitation-missing', !token)
		shown('invitation-found', !!token)
		const form = document.querySelector('form[data-invitation]')
		if (!token || !form) return
		form.elements.token.value = token
		shown('invitation-continue', true)
		form.requestSubmit()
	}
	// Only the start page takes a token; the invitation shown, or a refusal, is the server's.
	if (!document.querySelector('[data-invitation-start]')) return
	take()
	// The link opened over this very page (the same address with a fragment) does not load it again.
	window.addEventListener('hashchange', take)
})()
