import { Elysia } from 'elysia'
import type { Logger } from '../log'

/** Observes every finished request: one log line, and whatever else wants the figures (metrics). */
export type RequestObserver = (request: { method: string; route: string; status: number; seconds: number }) => void

const started = new WeakMap<Request, number>()

/**
 * One JSON line per request: time, level, request id, method, route (the
 * pattern, not the raw path, so ids and tokens in URLs never reach the log),
 * status, duration and the caller's user id when known. No headers, no bodies.
 */
export const requestLogging = (log: Logger, observe?: RequestObserver) =>
	new Elysia({ name: 'request-logging' })
		.onRequest(({ request }) => {
			started.set(request, performance.now())
		})
		.onAfterResponse({ as: 'global' }, (context) => {
			const { request, set, route } = context
			const begin = started.get(request)
			const seconds = begin === undefined ? 0 : (performance.now() - begin) / 1000
			// A route that answers with a Response of its own (the OpenID Provider's) sets its status there, not in `set`.
			const answered = (context as { responseValue?: unknown }).responseValue
			const status = answered instanceof Response ? answered.status : typeof set.status === 'number' ? set.status : 200
			const pattern = route || 'unmatched'
			const caller = (context as { caller?: { user?: { id?: string } } | null }).caller
			const line = {
				requestId: set.headers['x-request-id'],
				method: request.method,
				route: pattern,
				status,
				durationMs: Math.round(seconds * 100_000) / 100,
				userId: caller?.user?.id,
			}
			if (status >= 500) log.error(line, 'request')
			else log.info(line, 'request')
			observe?.({ method: request.method, route: pattern, status, seconds })
		})
