// /pages/link-token.js: the pages that take a mail link's token (/password-reset, /email-verification; the
// pages' policy runs no inline script). The token is in the address's fragment (#token=…), which a browser
// never sends, so a mail scanner that fetches the link spends nothing. This puts it in the form, hides the
// fields of the mail's 6-digit code (a disabled fieldset is neither checked nor sent) and takes the token out
// of the address bar and history. Without script, or without a token, the code's fields are the way.
;(() => {
	const form = document.querySelector('form[data-link-token]')
	if (!form) return
	const take = () => {
		const found = /(?:^#|&)token=([A-Za-z0-9_-]{1,512})(?:&|$)/.exec(window.location.hash)
		if (!found) return
		form.elements.token.value = found[1]
		const proof = document.getElementById('code-proof')
		proof.disabled = true
		proof.hidden = true
		const resend = document.getElementById('resend')
		if (resend) resend.hidden = true
		document.getElementById('link-ready').hidden = false
		// A problem shown before was the code's: the link replaces it.
		const problem = document.getElementById('error-summary')
		if (problem) problem.hidden = true
		if (form.elements.password) form.elements.password.focus()
		window.history.replaceState(null, '', window.location.pathname + window.location.search)
	}
	take()
	// The link opened over this very page (the same address with a fragment) does not load it again.
	window.addEventListener('hashchange', take)
})()
