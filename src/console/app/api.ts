/**
 * The public API through the typed client (Eden Treaty over the server's own route types): the console does
 * nothing the API cannot. Every refusal becomes a sentence saying why and, where there is one, what to do.
 */
import { createClient } from '../../client'
import { accessToken } from './session'

export const api = createClient(location.origin, {
	headers: () => {
		const token = accessToken()
		return token ? { authorization: `Bearer ${token}` } : undefined
	},
}).api

export interface Problem {
	type?: string
	title?: string
	status?: number
	detail?: string
	errors?: Array<{ pointer?: string; detail?: string; code?: string }>
}

/** The problem kind: the last segment of its `type` URI. */
export const kindOf = (problem: Problem | undefined) => (problem?.type ?? '').split('/').pop() ?? ''

/** Refusals that mean the console's sign-in no longer holds: it signs in again. */
export const SIGNED_OUT_KINDS = new Set(['unauthorized', 'invalid-token'])

/** A problem+json answer as a sentence an operator reads. */
export function sentenceOf(status: number, problem: Problem | undefined): string {
	const kind = kindOf(problem)
	switch (kind) {
		case 'forbidden':
			return /admin/i.test(problem?.detail ?? '') && !/own account/i.test(problem?.detail ?? '')
				? 'This account is not an administrator: the console is for administrators. Sign in with an administrator’s account, or ask one to make you an administrator.'
				: `Not allowed: ${problem?.detail ?? 'the API refused this action.'}`
		case 'mfa-enrollment-required':
			return 'This server requires administrators to use a second factor: add a second factor (an authenticator app or a passkey) on your account page, then sign in to the console again.'
		case 'mfa-required':
			return 'This needs a session that used a second factor: sign in again with your second factor.'
		case 'reauthentication-required':
			return 'Confirm it is you first: sign in again, then retry within a few minutes.'
		case 'invalid-token':
		case 'unauthorized':
			return 'Your sign-in has ended (it expired, was revoked, or the account was deactivated). Sign in again.'
		case 'last-admin':
			return 'This is the last active administrator: it can be neither deactivated nor made a plain user. Make another account an administrator first.'
		case 'last-owner':
			return 'This is the organization’s last owner: it can be neither removed nor given roles without owner. Make another member an owner first.'
		case 'slug-taken':
			return 'Another organization has this slug (a deactivated one too): choose another.'
		case 'mail-unavailable':
			return 'This server cannot send mail now (no SMTP server is configured), so no invitation can go out. Add the person as a member instead if they have an account.'
		case 'not-found':
			return 'Not found: it no longer exists, or the address is wrong.'
		case 'rate-limited':
			return 'Too many requests from this address: wait a minute, then retry.'
		case 'validation-error': {
			// A webhook's URL that can never receive (its scheme, or where its host resolves): said as such.
			const refusedUrl = problem?.errors?.find((error) => error.code === 'refused' && error.pointer === '#/url')
			const why = refusedUrl?.detail ?? ''
			if (refusedUrl && /metadata/.test(why)) return `This URL cannot receive webhooks: ${why}, which is always refused.`
			if (refusedUrl && /private|loopback|link-local/.test(why))
				return `This URL cannot receive webhooks: ${why}. Deliveries go only to public addresses, unless the server is started with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true.`
			if (refusedUrl) return `This URL cannot receive webhooks: ${why.startsWith('must') ? `it ${why}` : why || 'it is refused'}.`
			return `Some values are not valid: ${(problem?.errors ?? []).map((error) => `${(error.pointer ?? '').replace(/^#\//, '')} ${error.detail ?? ''}`.trim()).join('; ') || problem?.detail || ''}`
		}
		case 'email-taken':
			return `This conflicts with the account as it is now: ${problem?.detail ?? 'read it again and retry.'}`
		case 'conflict':
			if (/endpoint is disabled/i.test(problem?.detail ?? '')) return 'This webhook endpoint is turned off: turn it on first, then retry.'
			return `This conflicts with how things are now: ${problem?.detail ?? 'read the page again and retry.'}`
		case 'service-unavailable':
			return 'The database is not answering: try again in a moment.'
		case 'internal-error':
			return `The server failed to do this (${problem?.detail ?? 'an internal error'}).`
		default:
			if (status === 0) return 'The server could not be reached: check the connection and retry.'
			return problem?.detail ? `${problem.title ?? 'Refused'}: ${problem.detail}` : `The request failed with status ${status}.`
	}
}

/** An API answer's error as { status, problem } (Eden's error value is the parsed body). */
export function problemOf(error: { status: number; value: unknown } | null | undefined): { status: number; problem: Problem | undefined } | undefined {
	if (!error) return undefined
	const value = error.value
	return { status: error.status, problem: typeof value === 'object' && value !== null ? (value as Problem) : undefined }
}
