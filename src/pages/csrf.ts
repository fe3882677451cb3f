import { isOpaqueToken, newOpaqueToken, sameSecret } from '../crypto/opaque-tokens'
import { cookie, readCookie } from './cookies'

/*
 * Forms against cross-site requests, twice over: a double-submit token (the form's `csrf` field must equal
 * the `__Host-latchkey-csrf` cookie, compared in constant time; another site can neither read nor set a
 * `__Host-` cookie), and the browser's own word on where a request comes from (Sec-Fetch-Site, Origin).
 */

export const CSRF_COOKIE = '__Host-latchkey-csrf'
/** The form token lives as long as a browser session may: a form left open overnight still posts. */
const CSRF_MAX_AGE_SECONDS = 24 * 3600

/** The token a page's forms carry: the browser's cookie when it has a well-formed one, else a new one to set. */
export function formToken(request: Request): { token: string; setCookie?: string } {
	const held = readCookie(request, CSRF_COOKIE)
	if (isOpaqueToken(held)) return { token: held }
	const token = newOpaqueToken()
	return { token, setCookie: cookie(CSRF_COOKIE, token, CSRF_MAX_AGE_SECONDS) }
}

/** Whether a posted form carries the browser's token (false when either is missing). */
export function formTokenMatches(request: Request, posted: unknown): boolean {
	const held = readCookie(request, CSRF_COOKIE)
	return isOpaqueToken(held) && typeof posted === 'string' && sameSecret(posted, held)
}

/**
 * Whether the browser says the request comes from another site: `Sec-Fetch-Site` `cross-site` or
 * `same-site` (a sibling subdomain is another site's to run), or an `Origin` that is neither this
 * request's host nor PUBLIC_URL's (`null`, an opaque origin, included). Browsers send both on a form's
 * POST; a request without either (an old browser, a script) is left to the token.
 */
export function isCrossSite(request: Request, publicUrl?: string): boolean {
	const site = request.headers.get('sec-fetch-site')
	if (site === 'cross-site' || site === 'same-site') return true
	const origin = request.headers.get('origin')
	if (origin === null) return false
	if (publicUrl !== undefined && origin === new URL(publicUrl).origin) return false
	try {
		// The host, not the scheme: behind a proxy that ends TLS the request's URL says http.
		return new URL(origin).host !== new URL(request.url).host
	} catch {
		return true
	}
}
