import { and, asc, desc, eq, inArray, lt, sql } from 'drizzle-orm'
import { retryingDeadlocks, type Database } from '../../db/client'
import { webhookAttempts, webhookDeliveries, webhookEndpoints, webhookEvents, type WebhookEndpointRow } from '../../db/schema'
import type { DataKeys } from '../../crypto/data-keys'
import { decodeIdCursor, encodeIdCursor } from '../../http/pagination'
import { Conflict, NotFound, ValidationFailed } from '../../http/problem'
import { enqueue, runWaitingJobNow } from '../../jobs/queue'
import type { AuditLog, ClientInfo } from '../audit/service'
import type { Caller, Queryable } from '../auth/sessions'
import { checkUrlForm, DestinationRefused, permittedAddresses, type DestinationPolicy } from '../../http/destination'
import type { CreateWebhookInput, DeliveriesQuery, ReplaceWebhookInput, WebhookDeliveryResource, WebhookEndpointResource } from './model'
import { PING_EVENT, WEBHOOK_QUEUE } from './outbox'

/** How long the secret before a rotation keeps signing, so receivers can switch without losing a delivery. */
export const PREVIOUS_SECRET_SECONDS = 24 * 3600

export interface WebhookServiceDeps {
	db: Database
	audit: AuditLog
	dataKeys: DataKeys
	destinations: DestinationPolicy
}

/** The AES-GCM context of an endpoint's secrets: a sealed secret opens only on its own row. */
export const secretContext = (endpointId: string) => `webhook-secret:${endpointId}`

/** A Standard Webhooks secret: `whsec_` and 32 random bytes in base64. */
const newSecret = () => `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64')}`

/** Admins' side of webhooks: endpoints, their secrets, pings, and the delivery log. */
export class WebhookService {
	constructor(private readonly deps: WebhookServiceDeps) {}

	async create(input: CreateWebhookInput, caller: Caller, client: ClientInfo) {
		const url = await this.checkDestination(input.url)
		const id = Bun.randomUUIDv7()
		const secret = newSecret()
		const [row] = await this.deps.db
			.insert(webhookEndpoints)
			.values({ id, url, events: input.events, description: input.description ?? '', secret: await this.deps.dataKeys.seal(secret, secretContext(id)) })
			.returning()
		if (!row) throw new Error('endpoint insert returned no row')
		await this.deps.audit.record('webhook.created', client, { actorId: caller.user.id, details: { endpointId: id, events: input.events.join(' ') } })
		return { ...toEndpointResource(row), secret }
	}

	async list(): Promise<WebhookEndpointResource[]> {
		const rows = await this.deps.db.select().from(webhookEndpoints).orderBy(asc(webhookEndpoints.id))
		return rows.map(toEndpointResource)
	}

	async get(id: string): Promise<WebhookEndpointResource> {
		return toEndpointResource(await this.find(this.deps.db, id))
	}

	async replace(id: string, input: ReplaceWebhookInput, caller: Caller, client: ClientInfo): Promise<WebhookEndpointResource> {
		const url = await this.checkDestination(input.url)
		const [row] = await this.deps.db
			.update(webhookEndpoints)
			.set({
				url,
				events: input.events,
				description: input.description ?? '',
				...(input.enabled === undefined
					? {}
					: // Turned back on, it starts afresh: the failures that turned it off are no longer counted.
						{ enabled: input.enabled, disabledReason: input.enabled ? null : 'admin', failingSince: null }),
				updatedAt: new Date(),
			})
			.where(eq(webhookEndpoints.id, id))
			.returning()
		if (!row) throw notFound()
		await this.deps.audit.record('webhook.updated', client, { actorId: caller.user.id, details: { endpointId: id, enabled: row.enabled } })
		return toEndpointResource(row)
	}

	/** Deletes the endpoint with its delivery log; deliveries still owed to it are dropped. */
	async remove(id: string, caller: Caller, client: ClientInfo): Promise<WebhookEndpointResource> {
		const [row] = await this.deps.db.delete(webhookEndpoints).where(eq(webhookEndpoints.id, id)).returning()
		if (!row) throw notFound()
		await this.deps.audit.record('webhook.deleted', client, { actorId: caller.user.id, details: { endpointId: id } })
		return toEndpointResource(row)
	}

	/** A new secret; the one it replaces keeps signing beside it for PREVIOUS_SECRET_SECONDS. */
	async rotateSecret(id: string, caller: Caller, client: ClientInfo): Promise<{ secret: string }> {
		const secret = newSecret()
		const sealed = await this.deps.dataKeys.seal(secret, secretContext(id))
		const [row] = await this.deps.db
			.update(webhookEndpoints)
			.set({
				previousSecret: sql`${webhookEndpoints.secret}`,
				previousSecretExpiresAt: sql`now() + make_interval(secs => ${PREVIOUS_SECRET_SECONDS})`,
				secret: sealed,
				updatedAt: new Date(),
			})
			.where(eq(webhookEndpoints.id, id))
			.returning({ id: webhookEndpoints.id })
		if (!row) throw notFound()
		await this.deps.audit.record('webhook.secret-rotated', client, { actorId: caller.user.id, details: { endpointId: id } })
		return { secret }
	}

	/** Queues a `webhook.ping` to this endpoint alone. */
	async ping(id: string): Promise<{ deliveryId: string; eventId: string }> {
		return this.deps.db.transaction(async (tx) => {
			// Held until commit: a concurrent delete waits rather than leaving the delivery without its endpoint.
			const endpoint = await this.find(tx, id, 'lock')
			assertEnabled(endpoint)
			const eventId = Bun.randomUUIDv7()
			const deliveryId = Bun.randomUUIDv7()
			const body = JSON.stringify({ type: PING_EVENT, timestamp: new Date().toISOString(), data: { endpointId: id } })
			await tx.insert(webhookEvents).values({ id: eventId, type: PING_EVENT, body })
			await tx.insert(webhookDeliveries).values({ id: deliveryId, endpointId: id, eventId, nextAttemptAt: new Date() })
			await queueDeliveryJob(tx, deliveryId)
			return { deliveryId, eventId }
		})
	}

	/** Newest first (keyset on the time-ordered event id), each with its attempts. */
	async deliveries(endpointId: string, query: DeliveriesQuery) {
		await this.find(this.deps.db, endpointId)
		const limit = query.limit ?? 20
		const before = query.cursor === undefined ? undefined : decodeIdCursor(query.cursor)
		const rows = await this.deps.db
			.select({ delivery: webhookDeliveries, eventType: webhookEvents.type, body: webhookEvents.body })
			.from(webhookDeliveries)
			.innerJoin(webhookEvents, eq(webhookEvents.id, webhookDeliveries.eventId))
			.where(
				and(
					eq(webhookDeliveries.endpointId, endpointId),
					query.status === undefined ? undefined : eq(webhookDeliveries.status, query.status),
					before === undefined ? undefined : lt(webhookDeliveries.eventId, before),
				),
			)
			.orderBy(desc(webhookDeliveries.eventId))
			.limit(limit + 1)
		const page = rows.slice(0, limit)
		const attempts = page.length === 0 ? [] : await this.deps.db
			.select()
			.from(webhookAttempts)
			.where(inArray(webhookAttempts.deliveryId, page.map((row) => row.delivery.id)))
			.orderBy(asc(webhookAttempts.attemptedAt), asc(webhookAttempts.id))
		const last = page.at(-1)
		return {
			items: page.map(({ delivery, eventType, body }): WebhookDeliveryResource => ({
				id: delivery.id,
				eventId: delivery.eventId,
				eventType,
				status: delivery.status,
				createdAt: delivery.createdAt.toISOString(),
				nextAttemptAt: delivery.nextAttemptAt?.toISOString() ?? null,
				payload: JSON.parse(body),
				attempts: attempts
					.filter((attempt) => attempt.deliveryId === delivery.id)
					.map((attempt) => ({
						attemptedAt: attempt.attemptedAt.toISOString(),
						durationMs: attempt.durationMs,
						statusCode: attempt.statusCode,
						succeeded: attempt.succeeded,
						error: attempt.error,
					})),
			})),
			nextCursor: rows.length > limit && last ? encodeIdCursor(last.delivery.eventId) : null,
			limit,
		}
	}

	/**
	 * Tries a delivery again now, whatever became of it, with a fresh retry schedule. A job waiting for its
	 * retry is moved forward (not queued twice); one being run now is left to finish, and a new one queued:
	 * it may have recorded its outcome already, which must not swallow this request.
	 */
	async redeliver(endpointId: string, deliveryId: string): Promise<void> {
		// A worker recording this delivery's attempt holds its job and waits for the delivery, which this holds
		// while it moves the job: one of the two is a deadlock's victim, and this one is run again.
		await retryingDeadlocks(() => this.deps.db.transaction(async (tx) => {
			assertEnabled(await this.find(tx, endpointId, 'lock'))
			const [delivery] = await tx
				.update(webhookDeliveries)
				.set({ status: 'pending', nextAttemptAt: sql`now()` })
				.where(and(eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.endpointId, endpointId)))
				.returning({ id: webhookDeliveries.id })
			if (!delivery) throw new NotFound('No such delivery of this endpoint')
			if (!(await runWaitingJobNow(tx, WEBHOOK_QUEUE, 'deliveryId', deliveryId))) await queueDeliveryJob(tx, deliveryId)
		}))
	}

	/**
	 * The URL as it will be stored, refused when it can never receive: a wrong scheme, or a host that
	 * resolves to a forbidden address now. A host that does not resolve yet is accepted (its attempts fail
	 * until it does); every attempt checks again.
	 */
	private async checkDestination(raw: string): Promise<string> {
		try {
			const url = checkUrlForm(raw, this.deps.destinations)
			await permittedAddresses(url, this.deps.destinations).catch((error: unknown) => {
				if (error instanceof DestinationRefused) throw error
			})
			return url.href
		} catch (error) {
			if (!(error instanceof DestinationRefused)) throw error
			throw new ValidationFailed([{ pointer: '#/url', code: 'refused', detail: error.message }])
		}
	}

	private async find(db: Queryable, id: string, lock?: 'lock'): Promise<WebhookEndpointRow> {
		const query = db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, id))
		const [row] = await (lock ? query.for('key share') : query)
		if (!row) throw notFound()
		return row
	}
}

/** A job for a delivery, which a worker on any instance takes once the transaction commits. */
async function queueDeliveryJob(tx: Queryable, deliveryId: string) {
	await enqueue(tx, { queue: WEBHOOK_QUEUE, payload: { deliveryId } })
}

const notFound = () => new NotFound('No webhook endpoint with this id')

function assertEnabled(endpoint: WebhookEndpointRow) {
	if (!endpoint.enabled) throw new Conflict('conflict', 'The endpoint is disabled; enable it (PUT with "enabled": true) first')
}

export function toEndpointResource(row: WebhookEndpointRow): WebhookEndpointResource {
	return {
		id: row.id,
		url: row.url,
		description: row.description,
		events: row.events,
		enabled: row.enabled,
		disabledReason: row.disabledReason as WebhookEndpointResource['disabledReason'],
		failingSince: row.failingSince?.toISOString() ?? null,
		secretRotatedAt: row.previousSecretExpiresAt ? new Date(row.previousSecretExpiresAt.getTime() - PREVIOUS_SECRET_SECONDS * 1000).toISOString() : null,
		createdAt: row.createdAt.toISOString(),
		updatedAt: row.updatedAt.toISOString(),
	}
}
