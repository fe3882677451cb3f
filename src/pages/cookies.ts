/**
 * The pages' cookies: `__Host-` names (Secure, Path=/, no Domain: no other host, not even a subdomain, can
 * set or read them), HttpOnly, SameSite=Lax. Browsers keep Secure cookies on loopback over http too.
 */

/** A cookie of the request, or undefined. */
export function readCookie(request: Request, name: string): string | undefined {
	const header = request.headers.get('cookie')
	if (!header) return undefined
	for (const pair of header.split(';')) {
		const equals = pair.indexOf('=')
		if (equals === -1) continue
		if (pair.slice(0, equals).trim() === name) return pair.slice(equals + 1).trim()
	}
	return undefined
}

/** The Set-Cookie value of one of the pages' cookies; `maxAgeSeconds` 0 removes it. */
export const cookie = (name: string, value: string, maxAgeSeconds: number) =>
	`${name}=${value}; Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}; Path=/; Secure; HttpOnly; SameSite=Lax`
