import { Elysia } from 'elysia'
import { Counter, Gauge, Histogram, Registry } from 'prom-client'
import { sameSecret } from '../crypto/opaque-tokens'
import { AppError } from './problem'

/**
 * Prometheus metrics with prom-client: request counts and latency by route
 * and status, login outcomes, rate-limit refusals, the live sessions as last
 * counted in the background, and the database pool size.
 */
/** What became of one attempt of a background job. */
export type JobOutcome = 'done' | 'retry' | 'failed'

export class Metrics {
	readonly registry = new Registry()
	private readonly requests = new Counter({
		name: 'latchkey_http_requests_total',
		help: 'HTTP requests by method, route pattern and status',
		labelNames: ['method', 'route', 'status'] as const,
		registers: [this.registry],
	})
	private readonly latency = new Histogram({
		name: 'latchkey_http_request_duration_seconds',
		help: 'HTTP request latency by method, route pattern and status',
		labelNames: ['method', 'route', 'status'] as const,
		buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
		registers: [this.registry],
	})
	private readonly logins = new Counter({
		name: 'latchkey_logins_total',
		help: 'Login attempts by outcome (succeeded, failed, locked)',
		labelNames: ['outcome'] as const,
		registers: [this.registry],
	})
	private readonly refusals = new Counter({
		name: 'latchkey_rate_limit_refusals_total',
		help: 'Requests refused by a rate limit, by budget',
		labelNames: ['budget'] as const,
		registers: [this.registry],
	})
	private readonly jobs = new Counter({
		name: 'latchkey_jobs_total',
		help: 'Background job attempts (mail, webhook) by queue and outcome: done, retry (failed, tried again later), failed (given up)',
		labelNames: ['queue', 'outcome'] as const,
		registers: [this.registry],
	})
	private readonly disabledEndpoints = new Counter({
		name: 'latchkey_webhook_endpoints_disabled_total',
		help: 'Webhook endpoints turned off because every attempt failed for WEBHOOK_DISABLE_AFTER_SECONDS',
		registers: [this.registry],
	})

	// Set by a background count (SessionUpkeep), never by a scrape: a scrape must not count a table.
	private readonly activeSessions = new Gauge({
		name: 'latchkey_active_sessions',
		help: 'Sessions neither revoked nor expired, as of the last background count (every 30 s)',
		registers: [this.registry],
	})

	constructor(gauges: { poolMax: number; poolInUse?: () => number }) {
		new Gauge({
			name: 'latchkey_db_pool_max_connections',
			help: 'Configured database connections per instance (1 for the embedded database)',
			registers: [this.registry],
			collect() {
				this.set(gauges.poolMax)
			},
		})
	}

	observeRequest = ({ method, route, status, seconds }: { method: string; route: string; status: number; seconds: number }) => {
		const labels = { method, route, status: String(status) }
		this.requests.inc(labels)
		this.latency.observe(labels, seconds)
	}

	login(outcome: 'succeeded' | 'failed' | 'locked') {
		this.logins.inc({ outcome })
	}

	job(queue: string, outcome: JobOutcome) {
		this.jobs.inc({ queue, outcome })
	}

	webhookEndpointDisabled() {
		this.disabledEndpoints.inc()
	}

	refused(budget: 'general' | 'auth' | 'client') {
		this.refusals.inc({ budget })
	}

	setActiveSessions(count: number) {
		this.activeSessions.set(count)
	}
}

/** Whether an Authorization header carries the metrics token, compared in constant time. */
export function hasMetricsToken(authorization: string | null | undefined, token: string): boolean {
	const offered = /^Bearer (.+)$/.exec(authorization ?? '')?.[1] ?? ''
	return sameSecret(offered, token)
}

/**
 * GET /metrics (Prometheus text format), outside /api. Served only when
 * enabled; with METRICS_TOKEN it requires `Authorization: Bearer <token>`,
 * compared in constant time.
 */
export const metricsRoute = (metrics: Metrics, token: string | undefined) =>
	new Elysia({ name: 'metrics' }).get(
		'/metrics',
		async ({ headers, set }) => {
			if (token !== undefined) {
				if (!hasMetricsToken(headers.authorization, token))
					throw new AppError('unauthorized', 'Send the metrics token: Authorization: Bearer <token>', {
						headers: { 'www-authenticate': 'Bearer realm="latchkey-metrics"' },
					})
			}
			set.headers['content-type'] = metrics.registry.contentType
			return metrics.registry.metrics()
		},
		{ detail: { hide: true } },
	)
