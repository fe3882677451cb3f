import { Elysia } from 'elysia'
import { rateLimit, type Context } from 'elysia-rate-limit'
import type { Config } from '../config/env'
import { clientOf } from './client-ip'
import type { CounterStore } from '../db/counters'
import { problemBody, type PageProblemRenderer } from './problem-catalogue'
import { bodyRead } from './body-read'

/** Probes count against no budget. */
export const PROBES = new Set(['/api/health', '/api/health/', '/api/health/ready'])
const AUTH_PREFIX = '/api/auth/'
/** The OpenID Provider's endpoints that check a client's or a device's credentials count as /auth does (API.md). */
const PROTOCOL_AUTH_PATHS = new Set(['/oauth2/token', '/oauth2/introspection', '/oauth2/revocation', '/oauth2/device-authorization'])
// What the plugin answers when a budget is spent (it adds the RateLimit-* and
// Retry-After headers to it); turned into a problem+json response below.
const REFUSED_MARKER = 'x-latchkey-rate-limited'
type Budget = 'general' | 'auth' | 'client'
const refused = (budget: Budget) => new Response(null, { status: 429, headers: { [REFUSED_MARKER]: budget } })

const pathOf = (request: Request) => new URL(request.url).pathname

const hashing = new WeakSet<Request>()

/**
 * Charges a request to the stricter /auth budget although its path is not
 * under /auth: anything that computes a password hash (sign-up, a PUT that
 * sets or checks a password). Call it before the route's handler runs
 * (a transform hook), so a refused request never reaches the hash.
 */
export const chargeAuthBudget = (request: Request) => void hashing.add(request)

/** Form bodies of the protocol's credential endpoints are small; a larger one is not read to find its client. */
const FORM_BODY_LIMIT = 8192

/**
 * The form body of a request to the provider's credential endpoints, as the parse hook read it (the rate limits run
 * after it, when the body itself is spent), or from a copy when nothing parsed it yet; undefined when there is none
 * or it is too large to be one of theirs.
 */
async function formOf(request: Request): Promise<URLSearchParams | undefined> {
	const read = bodyRead(request)
	const length = read ? read.byteLength : Number(request.headers.get('content-length') ?? Number.NaN)
	if (!(length > 0 && length <= FORM_BODY_LIMIT)) return undefined
	if (!read && request.bodyUsed) return undefined
	return new URLSearchParams(read ? new TextDecoder().decode(read) : await request.clone().text())
}

/** The OAuth client a request to the provider's credential endpoints names: in HTTP Basic authentication, else the form's `client_id`. */
export async function oauthClientOf(request: Request): Promise<string> {
	const authorization = request.headers.get('authorization') ?? ''
	if (/^basic /i.test(authorization)) {
		const decoded = Buffer.from(authorization.slice(6).trim(), 'base64').toString()
		const colon = decoded.indexOf(':')
		if (colon > 0) return `id:${safeDecode(decoded.slice(0, colon))}`
	}
	const clientId = (await formOf(request))?.get('client_id')
	return clientId ? `id:${clientId}` : 'unnamed'
}

const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code'

/**
 * A refusal at the provider's credential endpoints, in the protocol's own error format (RFC 6749 §5.2; API.md:
 * their errors are not problem+json), so that an OAuth client library reads it as an error rather than failing on
 * the content type. A device polling for its token is told `slow_down` (RFC 8628 §3.5), on which clients wait
 * five seconds more between polls and go on; anything else is told to come back later.
 */
function protocolRefusal(request: Request, retryAfterSeconds: string): { error: string; error_description: string } {
	// The body as the parse hook read it (a refusal comes after parsing; a body that did not parse is no device's poll).
	const read = bodyRead(request)
	const devicePoll = pathOf(request) === '/oauth2/token' && read !== undefined && new URLSearchParams(new TextDecoder().decode(read)).get('grant_type') === DEVICE_CODE_GRANT
	return { error: devicePoll ? 'slow_down' : 'temporarily_unavailable', error_description: `Too many requests; try again in ${retryAfterSeconds} seconds` }
}

const safeDecode = (value: string) => {
	try {
		return decodeURIComponent(value.replaceAll('+', ' '))
	} catch {
		return value
	}
}

/** elysia-rate-limit's store interface over our shared counters (memory or Redis). */
class CounterContext implements Context {
	constructor(
		private readonly store: CounterStore,
		private readonly budget: string,
	) {}
	init() {}
	async increment(key: string, duration = 60_000) {
		const { count, resetAt } = await this.store.increment(`rate:${this.budget}:${key}`, duration)
		return { count, nextReset: new Date(resetAt), start: resetAt - duration }
	}
	// Failed requests count too (countFailedRequest), so nothing is ever refunded.
	async decrement() {}
	async reset(key?: string) {
		if (key !== undefined) await this.store.delete(`rate:${this.budget}:${key}`)
	}
	kill() {}
}

/**
 * The IETF draft's structured fields, beside the classic RateLimit-* headers
 * the plugin writes (draft-ietf-httpapi-ratelimit-headers).
 */
export function addDraftFields(headers: Record<string, unknown>, windowSeconds: number) {
	const limit = headers['RateLimit-Limit']
	if (limit === undefined) return
	headers['RateLimit-Policy'] = `"default";q=${limit};w=${windowSeconds}`
	headers.RateLimit = `"default";r=${headers['RateLimit-Remaining']};t=${headers['RateLimit-Reset']}`
}

export interface RateLimitDeps {
	config: Config['rateLimit']
	store: CounterStore
	/** Requests that count against no budget beyond the probes (an authenticated metrics scrape). */
	exempt?: (request: Request) => boolean
	/** Called for each refused request (metrics). */
	onRefused?: (budget: Budget) => void
	/** The page a refused request to one of the pages gets instead of problem+json. */
	pageProblem?: PageProblemRenderer
}

/**
 * Per-client budgets with elysia-rate-limit: a general one on every route but
 * the probes, and a stricter one on /api/auth/* and on whatever hashes a
 * password. The key is the client resolved by `clientAddresses` (socket
 * peer, or X-Forwarded-For behind a trusted proxy; IPv6 per /64).
 *
 * Every request counts, whatever its answer: register this before the problem
 * handler, so that the plugin's error hook counts requests refused with
 * 400/422 (parse and validation run before the handler hooks), and let every
 * path be a route (see `unmatchedRoute`) so 404s and 405s count as well.
 */
export function rateLimits({ config, store, exempt = () => false, onRefused, pageProblem }: RateLimitDeps) {
	const durationMs = config.windowSeconds * 1000
	const generator = (request: Request) => clientOf(request).key
	const countsAgainstAuth = (request: Request) => hashing.has(request) || pathOf(request).startsWith(AUTH_PREFIX) || PROTOCOL_AUTH_PATHS.has(pathOf(request))
	const budget = (name: Budget, max: number | (() => number), skip: (request: Request) => boolean) =>
		rateLimit({
			duration: durationMs,
			max,
			scoping: 'global',
			countFailedRequest: true,
			generator,
			context: new CounterContext(store, name),
			skip,
			errorResponse: refused(name),
		})
	const app = new Elysia({ name: 'rate-limits', seed: config })
	if (config.max > 0) app.use(budget('general', config.max, (request) => PROBES.has(pathOf(request)) || exempt(request)))
	// A function as max, so the plugin's dedupe seed differs from the general budget's even when the numbers match.
	if (config.authMax > 0) app.use(budget('auth', () => config.authMax, (request) => !countsAgainstAuth(request)))
	// The same budget per OAuth client as well (API.md): guessing one client's secret from many addresses is
	// held to what one address may try.
	if (config.authMax > 0)
		app.use(
			rateLimit({
				duration: durationMs,
				max: () => config.authMax + 0,
				scoping: 'global',
				countFailedRequest: true,
				generator: oauthClientOf,
				context: new CounterContext(store, 'client'),
				skip: (request) => !PROTOCOL_AUTH_PATHS.has(pathOf(request)),
				errorResponse: refused('client'),
			}),
		)
	// mapResponse, not afterHandle: it also sees what the plugin's error hook answered.
	return app
		.onAfterHandle({ as: 'global' }, ({ set }) => addDraftFields(set.headers, config.windowSeconds))
		// Synchronous: an async hook here would make every route's handler async.
		.mapResponse({ as: 'global' }, ({ responseValue: response, set, request }) => {
			const budget = response instanceof Response ? response.headers.get(REFUSED_MARKER) : null
			// Handed back as it came: returning nothing drops the body of an error raised in onRequest (Elysia 1.4.30).
			// (The hook's type wants a Response; any value handed back is answered as the handler's would be.)
			if (budget === null) return response as Response
			onRefused?.(budget as Budget)
			// Merged case-insensitively: set.headers still holds the other budget's mixed-case values,
			// which a plain object would keep beside the refusing budget's and Response would join.
			const headers = new Headers(set.headers as Record<string, string>)
			for (const [name, value] of (response as Response).headers) if (name !== REFUSED_MARKER) headers.set(name, value)
			headers.set('content-type', 'application/problem+json')
			const limits: Record<string, string | undefined> = {
				'RateLimit-Limit': headers.get('ratelimit-limit') ?? undefined,
				'RateLimit-Remaining': headers.get('ratelimit-remaining') ?? undefined,
				'RateLimit-Reset': headers.get('ratelimit-reset') ?? undefined,
			}
			addDraftFields(limits, config.windowSeconds)
			if (limits['RateLimit-Policy']) headers.set('ratelimit-policy', limits['RateLimit-Policy'])
			if (limits.RateLimit) headers.set('ratelimit', limits.RateLimit)
			const retryAfter = headers.get('retry-after') ?? String(config.windowSeconds)
			// The status the log line and latchkey_http_requests_total read.
			set.status = 429
			if (PROTOCOL_AUTH_PATHS.has(pathOf(request))) {
				headers.set('content-type', 'application/json; charset=utf-8')
				headers.set('cache-control', 'no-store')
				return new Response(JSON.stringify(protocolRefusal(request, retryAfter)), { status: 429, headers })
			}
			const requestId = headers.get('x-request-id') ?? ''
			const page = pageProblem?.(request, { kind: 'rate-limited', status: 429, retryAfterSeconds: Number(retryAfter), requestId })
			if (page) {
				for (const [name, value] of headers) if (name !== 'content-type' && !page.headers.has(name)) page.headers.set(name, value)
				return page
			}
			const body = problemBody('rate-limited', `Too many requests; try again in ${retryAfter} seconds`, pathOf(request))
			return new Response(JSON.stringify(body), { status: 429, headers })
		})
}
