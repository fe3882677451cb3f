/**
 * The frontend of the passkey browser tests, bundled for Chromium by test/support/passkey-page/server.ts:
 * what a real sign-in page does with @simplewebauthn/browser and fetch against the API.
 */
import { startAuthentication, startRegistration } from '@simplewebauthn/browser'

type Json = Record<string, any>

async function api(base: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: Json }> {
	const response = await fetch(`${base}${path}`, {
		method: 'POST',
		headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
		body: body === undefined ? undefined : JSON.stringify(body),
	})
	return { status: response.status, body: (await response.json()) as Json }
}

const page = {
	/** Enrols a passkey for the signed-in user: options, the authenticator, activation. */
	async registerPasskey(base: string, accessToken: string) {
		const created = await api(base, '/api/users/me/factors', { type: 'webauthn', name: 'Virtual authenticator' }, accessToken)
		const response = await startRegistration({ optionsJSON: created.body.data.options })
		return api(base, `/api/users/me/factors/${created.body.data.factor.id}/activation`, { response }, accessToken)
	},
	/** "Sign in with a passkey": no email, no password. */
	async signInWithPasskey(base: string) {
		const options = await api(base, '/api/auth/passkey/challenges')
		const response = await startAuthentication({ optionsJSON: options.body.data })
		return api(base, '/api/auth/passkey', { response })
	},
	/** The second step of a login that owes a factor. */
	async completeWithPasskey(base: string, mfaToken: string) {
		const options = await api(base, '/api/auth/mfa/challenges', { mfaToken })
		const response = await startAuthentication({ optionsJSON: options.body.data })
		return api(base, '/api/auth/mfa', { mfaToken, method: 'webauthn', response })
	},
	/** Only the authenticator's answer to given options (for a page the API does not serve). */
	assert(optionsJSON: Json) {
		return startAuthentication({ optionsJSON: optionsJSON as never })
	},
}

Object.assign(globalThis, { latchkeyPage: page })
export type PasskeyPage = typeof page
