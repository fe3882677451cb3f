// /pages/passkeys.js: the pages' passkeys, one script for all (the pages' policy runs no inline script).
// Without script or without WebAuthn the passkey parts stay hidden and the pages' other ways work as they are.
// - /sign-in's "Sign in with a passkey" and the second factor's "Use your passkey": options from
//   POST /api/auth/passkey/challenges (or /api/auth/mfa/challenges with the form's mfaToken); the answer
//   (AuthenticationResponseJSON) is posted with the form's token to /sign-in/passkey or /sign-in.
// - /account/security/passkey: the page carries the registration options (as POST /api/users/me/factors
//   answers them); the answer (RegistrationResponseJSON) goes to /account/security/passkey/activation.
// - "Confirm it's you": the page carries this session's challenge (as POST /api/auth/reauthentication/challenges
//   answers it); the answer (AuthenticationResponseJSON) is posted with the action's fields.
;(() => {
	if (!window.PublicKeyCredential || !navigator.credentials) return
	const byId = (id) => document.getElementById(id)

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

	/** Signs `options` (PublicKeyCredentialRequestOptionsJSON) with a passkey of this site: sign-in, second factor, confirm. */
	const sign = async (options) => {
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
	}

	/** Shows `box`, and on its form's submit asks the browser (`ask(form)`), puts the answer in `field` and posts the form. */
	const wire = (box, status, field, ask) => {
		const form = box && box.querySelector('form')
		if (!form || !status) return false
		box.hidden = false
		let busy = false
		form.addEventListener('submit', async (event) => {
			event.preventDefault()
			if (busy) return
			busy = true
			status.textContent = ''
			try {
				form.elements[field].value = await ask(form)
				form.submit()
			} catch (error) {
				// Cancelled, timed out or refused by the browser: said in the live region, and the button works again.
				status.textContent = error && error.name === 'NotAllowedError' ? form.dataset.cancelled : form.dataset.failed
				busy = false
			}
		})
		return true
	}
	/** The options the page carries (enrolment, confirm). */
	const carried = (form) => JSON.parse(form.dataset.options)

	// Sign-in and second factor: the options are asked of the API when the button is pressed.
	const signIn = wire(byId('passkey'), byId('passkey-status'), 'response', async (form) => {
		// A second factor owed (the form carries its mfaToken) signs that sign-in's challenge; else any passkey of this site.
		const mfaToken = form.elements.mfaToken ? form.elements.mfaToken.value : undefined
		const answer = await fetch(mfaToken ? '/api/auth/mfa/challenges' : '/api/auth/passkey/challenges', {
			method: 'POST',
			headers: { accept: 'application/json', 'content-type': 'application/json' },
			body: mfaToken ? JSON.stringify({ mfaToken }) : undefined,
		})
		if (!answer.ok) throw new Error('no options')
		return sign((await answer.json()).data)
	})
	if (signIn) byId('other-ways').hidden = false

	// Enrolment: the browser creates the passkey with the page's registration options.
	const create = byId('passkey-create')
	if (create) {
		byId('passkey-unsupported').hidden = true
		wire(create, byId('passkey-status'), 'response', async (form) => {
			const options = carried(form)
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

	// "Confirm it's you": this session's challenge, signed.
	wire(byId('passkey-confirm'), byId('passkey-confirm-status'), 'confirmResponse', (form) => sign(carried(form)))
})()
