// /pages/account.js: creates a passkey on /account/security (the pages' policy runs no inline script). The
// page carries the registration options that POST /account/security/passkey got from the factors' service
// (as POST /api/users/me/factors answers them); this lets the browser create the credential and posts its
// answer (RegistrationResponseJSON), with the form's token, to /account/security/passkey/activation.
// Without script or without WebAuthn the form stays hidden and the page says passkeys need them.
;(() => {
	const box = document.getElementById('passkey-create')
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
	document.getElementById('passkey-unsupported').hidden = true
	let busy = false
	form.addEventListener('submit', async (event) => {
		event.preventDefault()
		if (busy) return
		busy = true
		status.textContent = ''
		try {
			const options = JSON.parse(form.dataset.options)
			const credential = await navigator.credentials.create({
				publicKey: {
					...options,
					challenge: toBytes(options.challenge),
					user: { ...options.user, id: toBytes(options.user.id) },
					excludeCredentials: (options.excludeCredentials || []).map((excluded) => ({ ...excluded, id: toBytes(excluded.id) })),
				},
			})
			const made = credential.response
			const publicKey = typeof made.getPublicKey === 'function' ? made.getPublicKey() : null
			form.elements.response.value = JSON.stringify({
				id: credential.id,
				rawId: toText(credential.rawId),
				type: credential.type,
				authenticatorAttachment: credential.authenticatorAttachment || undefined,
				clientExtensionResults: credential.getClientExtensionResults(),
				response: {
					clientDataJSON: toText(made.clientDataJSON),
					attestationObject: toText(made.attestationObject),
					authenticatorData: typeof made.getAuthenticatorData === 'function' ? toText(made.getAuthenticatorData()) : undefined,
					transports: typeof made.getTransports === 'function' ? made.getTransports() : undefined,
					publicKeyAlgorithm: typeof made.getPublicKeyAlgorithm === 'function' ? made.getPublicKeyAlgorithm() : undefined,
					publicKey: publicKey ? toText(publicKey) : undefined,
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
