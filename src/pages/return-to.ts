/*
 * Where a page goes after signing in: `return_to`, a path on this server only (an authorization request
 * at /oauth2/authorize, /account…), never another site — no open redirect.
 */

export const DEFAULT_RETURN_TO = '/account'
const BASE = 'http://latchkey.invalid'

/**
 * `value` when it is a local path: it starts with one `/` (not `//` nor `/\`, which browsers read as another
 * host), has no control character or space, and resolves to this server. Anything else: undefined.
 */
export function localPath(value: unknown): string | undefined {
	if (typeof value !== 'string' || value.length === 0 || value.length > 4096) return undefined
	if (!value.startsWith('/') || value.startsWith('//') || value.startsWith('/\\')) return undefined
	// Browsers drop tabs and line breaks from URLs and read `\` as `/`: none may hide a second slash.
	if (/[\u0000-\u0020\u007f\\]/.test(value)) return undefined
	try {
		const url = new URL(value, BASE)
		return url.origin === BASE ? value : undefined
	} catch {
		return undefined
	}
}

/** The `client_id` of an authorization request that `returnTo` goes back to, if it names one. */
export function clientIdOf(returnTo: string): string | undefined {
	const clientId = new URL(returnTo, BASE).searchParams.get('client_id')
	return clientId && clientId.length <= 255 ? clientId : undefined
}

/** Whether `returnTo` asks for a new sign-in whatever session the browser has (`prompt=login`). */
export function asksForLogin(returnTo: string): boolean {
	const prompt = new URL(returnTo, BASE).searchParams.get('prompt')
	return prompt !== null && prompt.split(' ').includes('login')
}
