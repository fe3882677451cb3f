import { Elysia } from 'elysia'
import { rateLimit, type Context } from 'elysia-rate-limit'
import type { Config } from '../config/env'
import type { ClientAddressResolver } from './client-ip'
import type { CounterStore } from './counters'
import { problemBody } from './problem'

/** Probes and the metrics scrape count against no budget. */
const EXEMPT = new Set(['/api/health', '/api/health/', '/api/health/ready', '/metrics'])
const AUTH_PREFIX = '/api/auth/'
// What the plugin answers when a budget is spent (it adds the RateLimit-* and
// Retry-After headers to it); mapped to a problem+json response below.
const REFUSED_MARKER = 'x-latchkey-rate-limited'
const refused = () => new Response(null, { status: 429, headers: { [REFUSED_MARKER]: '1' } })

const pathOf = (request: Request) => new URL(request.url).pathname

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
	clientAddress: ClientAddressResolver
	/** Called for each refused request (metrics). */
	onRefused?: (budget: 'general' | 'auth') => void
}

/**
 * Per-client budgets with elysia-rate-limit: a general one on every route but
 * the probes, and a stricter one on /api/auth/*. The key is the client
 * address (socket peer, or X-Forwarded-For behind a trusted proxy).
 */
export function rateLimits({ config, store, clientAddress, onRefused }: RateLimitDeps) {
	const durationMs = config.windowSeconds * 1000
	const generator = (request: Request, server: Parameters<ClientAddressResolver>[1]) => clientAddress(request, server) ?? 'unknown'
	const app = new Elysia({ name: 'rate-limits', seed: config })
	if (config.max > 0)
		app.use(
			rateLimit({
				duration: durationMs,
				max: config.max,
				scoping: 'global',
				countFailedRequest: true,
				generator,
				context: new CounterContext(store, 'general'),
				skip: (request) => EXEMPT.has(pathOf(request)),
				errorResponse: refused(),
			}),
		)
	if (config.authMax > 0)
		app.use(
			rateLimit({
				duration: durationMs,
				// A function, so the plugin's dedupe seed differs from the general budget's even when the numbers match.
				max: () => config.authMax,
				scoping: 'global',
				countFailedRequest: true,
				generator,
				context: new CounterContext(store, 'auth'),
				skip: (request) => !pathOf(request).startsWith(AUTH_PREFIX),
				errorResponse: refused(),
			}),
		)
	return app.onAfterHandle({ as: 'global' }, ({ responseValue: response, set, path }) => {
			addDraftFields(set.headers, config.windowSeconds)
			if (!(response instanceof Response) || !response.headers.has(REFUSED_MARKER)) return
			onRefused?.(path.startsWith(AUTH_PREFIX) ? 'auth' : 'general')
			// Merged case-insensitively: set.headers still holds the other budget's mixed-case values,
			// which a plain object would keep beside the refusing budget's and Response would join.
			const headers = new Headers(set.headers as Record<string, string>)
			for (const [name, value] of response.headers) if (name !== REFUSED_MARKER) headers.set(name, value)
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
			const body = problemBody('rate-limited', `Too many requests; try again in ${retryAfter} seconds`, path)
			return new Response(JSON.stringify(body), { status: 429, headers })
		})
}
