// /pages/sign-in.js: the sign-in pages' passkey button (the pages' policy runs no inline script): "Sign in
// with a passkey" on /sign-in, "Use your passkey" as a second factor. Without script or without WebAuthn
// the button stays hidden and the page's other ways work as they are. It asks the API for options
// (POST /api/auth/passkey/challenges, or /api/auth/mfa/challenges with the form's mfaToken), lets the
// browser sign, and posts the answer (AuthenticationResponseJSON) in the form, with its token, to the
// page (/sign-in/passkey, or /sign-in), which sets the browser's session.
;(() => {
	const box = document.getElementById('passkey')
	const form = box && box.querySelector('form')
	const status = document.getElementById('passkey-status')
	if (!form || !status || !window.PublicKeyCredential || !navigator.credentials) return

	const toBytes = (text) => {
		const base64 = text.replace(/-/g, '+').replace(/_/g, '/')
		return Uint8Array.from(atob(base64.padEnd(Math.ceil(base64.length / 4) * 4, '=')), (c) => c.charCodeAt(0))
	}
	const toText = (buffer) => {
		let binary = ''
		for (const byte of new Uint8Array(buffer)) binary += String.fromCharCode(byte)
		return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
	}

	box.hidden = false
	document.getElementById('other-ways').hidden = false
	let busy = false
	form.addEventListener('submit', async (event) => {
		event.preventDefault()
		if (busy) return
		busy = true
		status.textContent = ''
		try {
			// A second factor owed (the form carries its mfaToken) signs that sign-in's challenge; else any passkey of this site.
			const mfaToken = form.elements.mfaToken ? form.elements.mfaToken.value : undefined
			const answer = await fetch(mfaToken ? '/api/auth/mfa/challenges' : '/api/auth/passkey/challenges', {
				method: 'POST',
				headers: { accept: 'application/json', 'content-type': 'application/json' },
				body: mfaToken ? JSON.stringify({ mfaToken }) : undefined,
			})
			if (!answer.ok) throw new Error('no options')
			const options = (await answer.json()).data
			const credential = await navigator.credentials.get({
				publicKey: {
					...options,
					challenge: toBytes(options.challenge),
					allowCredentials: (options.allowCredentials || []).map((allowed) => ({ ...allowed, id: toBytes(allowed.id) })),
				},
			})
			const signed = credential.response
			form.elements.response.value = JSON.stringify({
				id: credential.id,
				rawId: toText(credential.rawId),
				type: credential.type,
				authenticatorAttachment: credential.authenticatorAttachment || undefined,
				clientExtensionResults: credential.getClientExtensionResults(),
				response: {
					clientDataJSON: toText(signed.clientDataJSON),
					authenticatorData: toText(signed.authenticatorData),
					signature: toText(signed.signature),
					userHandle: signed.userHandle ? toText(signed.userHandle) : undefined,
				},
			})
			form.submit()
		} catch (error) {
			// Cancelled, timed out or refused by the browser: said in the live region, and the button works again.
			status.textContent = error && error.name === 'NotAllowedError' ? form.dataset.cancelled : form.dataset.failed
			busy = false
		}
	})
})()
