// /pages/account.js: the account pages' passkeys (the pages' policy runs no inline script). On
// /account/security/passkey the page carries the registration options the factors' service gave (as
// POST /api/users/me/factors answers them): the browser creates the credential, and its answer
// (RegistrationResponseJSON) is posted with the form's token to /account/security/passkey/activation. On
// "confirm it's you" the page carries this session's challenge (as POST /api/auth/reauthentication/challenges
// answers it): the browser signs it, and the answer (AuthenticationResponseJSON) is posted with the action's
// fields. Without script or without WebAuthn these stay hidden and the pages' other ways work as they are.
;(() => {
	if (!window.PublicKeyCredential || !navigator.credentials) return

	const toBytes = (text) => {
		const base64 = text.replace(/-/g, '+').replace(/_/g, '/')
		return Uint8Array.from(atob(base64.padEnd(Math.ceil(base64.length / 4) * 4, '=')), (c) => c.charCodeAt(0))
	}
	const toText = (buffer) => {
		let binary = ''
		for (const byte of new Uint8Array(buffer)) binary += String.fromCharCode(byte)
		return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
	}
	const credentialJson = (credential, response) =>
		JSON.stringify({
			id: credential.id,
			rawId: toText(credential.rawId),
			type: credential.type,
			authenticatorAttachment: credential.authenticatorAttachment || undefined,
			clientExtensionResults: credential.getClientExtensionResults(),
			response,
		})

	/** Shows `box`, and on its form's submit asks the browser (`ask`), puts the answer in `field` and posts the form. */
	const wire = (box, status, field, ask) => {
		const form = box && box.querySelector('form')
		if (!form || !status) return
		box.hidden = false
		let busy = false
		form.addEventListener('submit', async (event) => {
			event.preventDefault()
			if (busy) return
			busy = true
			status.textContent = ''
			try {
				form.elements[field].value = await ask(JSON.parse(form.dataset.options))
				form.submit()
			} catch (error) {
				// Cancelled, timed out or refused by the browser: said in the live region, and the button works again.
				status.textContent = error && error.name === 'NotAllowedError' ? form.dataset.cancelled : form.dataset.failed
				busy = false
			}
		})
	}

	const create = document.getElementById('passkey-create')
	if (create) {
		document.getElementById('passkey-unsupported').hidden = true
		wire(create, document.getElementById('passkey-status'), 'response', async (options) => {
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
			return credentialJson(credential, {
				clientDataJSON: toText(made.clientDataJSON),
				attestationObject: toText(made.attestationObject),
				authenticatorData: typeof made.getAuthenticatorData === 'function' ? toText(made.getAuthenticatorData()) : undefined,
				transports: typeof made.getTransports === 'function' ? made.getTransports() : undefined,
				publicKeyAlgorithm: typeof made.getPublicKeyAlgorithm === 'function' ? made.getPublicKeyAlgorithm() : undefined,
				publicKey: publicKey ? toText(publicKey) : undefined,
			})
		})
	}

	wire(document.getElementById('passkey-confirm'), document.getElementById('passkey-confirm-status'), 'confirmResponse', async (options) => {
		const credential = await navigator.credentials.get({
			publicKey: {
				...options,
				challenge: toBytes(options.challenge),
				allowCredentials: (options.allowCredentials || []).map((allowed) => ({ ...allowed, id: toBytes(allowed.id) })),
			},
		})
		const signed = credential.response
		return credentialJson(credential, {
			clientDataJSON: toText(signed.clientDataJSON),
			authenticatorData: toText(signed.authenticatorData),
			signature: toText(signed.signature),
			userHandle: signed.userHandle ? toText(signed.userHandle) : undefined,
		})
	})
})()
