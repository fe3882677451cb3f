import { Elysia, t } from 'elysia'
import type { DatabaseHandle } from '../../db/client'
import { AppError, envelope } from '../../http/problem'
import { Envelope, problemResponses } from '../../http/openapi'

const HealthData = t.Object({ status: t.Literal('ok') })
const Health = Envelope(HealthData)

/** Liveness and readiness probes; they count against no rate limit. */
export const health = (database: DatabaseHandle) =>
	new Elysia({ name: 'health', prefix: '/health', detail: { tags: ['Health'] } })
		.get('', () => envelope({ status: 'ok' as const }, 'Service is up'), {
			response: { 200: Health },
			detail: { operationId: 'health', summary: 'Liveness: the process is up', security: [] },
		})
		.get(
			'/ready',
			async () => {
				try {
					await withTimeout(database.ping(), 2000)
				} catch {
					throw new AppError('service-unavailable', 'The database does not answer', { headers: { 'retry-after': '5' } })
				}
				return envelope({ status: 'ok' as const }, 'Database answers')
			},
			{
				response: { 200: Health, ...problemResponses(503) },
				detail: { operationId: 'ready', summary: 'Readiness: the database answers', security: [] },
			},
		)

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
	let timer: Timer | undefined
	const timeout = new Promise<never>((_, reject) => {
		timer = setTimeout(() => reject(new Error('timed out')), ms)
	})
	return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}
