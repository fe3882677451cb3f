import { sql } from 'drizzle-orm'
import type { Queryable } from '../../db/client'
import { enqueueEach } from '../../jobs/queue'

/** Every event a webhook endpoint can subscribe to (API.md, "Webhooks"). */
export const WEBHOOK_EVENT_TYPES = [
	'user.created',
	'user.updated',
	'user.deactivated',
	'user.reactivated',
	'user.email-verified',
	'user.password-changed',
	'session.created',
	'session.revoked',
	'login.locked',
	'factor.added',
	'factor.removed',
	'identity.linked',
	'identity.unlinked',
	'oauth-client.created',
	'oauth-client.updated',
	'consent.granted',
	'consent.revoked',
	'organization.created',
	'organization.updated',
	'organization.deactivated',
	'member.added',
	'member.updated',
	'member.removed',
	'invitation.created',
	'invitation.accepted',
] as const

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number]

/** What an admin's ping sends; not subscribable, it goes to the pinged endpoint only. */
export const PING_EVENT = 'webhook.ping'

/** An event as a change reports it; `data` holds resources as the API shows them, never a secret. */
export interface WebhookEvent {
	type: WebhookEventType
	data: Record<string, unknown>
}

/** The background-job queue of webhook deliveries. */
export const WEBHOOK_QUEUE = 'webhook'

/**
 * The transactional outbox. Written with the caller's transaction: the events exist exactly when the
 * change they report does. One statement stores each event that some enabled endpoint subscribes to, a
 * delivery per such endpoint, and (the queue's `enqueueEach`) a job per delivery with the wake-up of the
 * workers at commit. With no endpoint subscribed it writes nothing.
 *
 * The endpoints are read FOR KEY SHARE (the lock the foreign key check of the deliveries takes anyway, taken
 * at the read instead): an endpoint deleted by a transaction that commits while this statement runs is
 * skipped (READ COMMITTED re-checks a locked row and drops one that is gone) rather than failing the caller's
 * change with a foreign key violation, and one deleted later waits for this transaction, then takes its new
 * deliveries with it (ON DELETE CASCADE). The lock conflicts only with a delete or a change of the id: a PUT,
 * a disable, the health columns and other writers of events never wait on it.
 */
export async function recordWebhookEvents(db: Queryable, events: WebhookEvent[]): Promise<void> {
	if (events.length === 0) return
	const timestamp = new Date().toISOString()
	const rows = events.map(({ type, data }) => ({ id: Bun.randomUUIDv7(), type, body: JSON.stringify({ type, timestamp, data }) }))
	await enqueueEach(db, WEBHOOK_QUEUE, {
		ctes: sql`
			new_events as (
				select (e->>'id')::uuid as id, e->>'type' as type, e->>'body' as body
				from jsonb_array_elements(${JSON.stringify(rows)}::jsonb) as e
			),
			targets as (
				select new_events.id as event_id, endpoint.id as endpoint_id
				from new_events
				join webhook_endpoints as endpoint on endpoint.enabled and endpoint.events && array['*', new_events.type]
				for key share of endpoint
			),
			stored as (
				insert into webhook_events (id, type, body)
				select id, type, body from new_events where id in (select event_id from targets)
			),
			deliveries as (
				insert into webhook_deliveries (id, endpoint_id, event_id, next_attempt_at)
				select gen_random_uuid(), endpoint_id, event_id, now() from targets
				returning id
			)`,
		payloads: sql`select jsonb_build_object('deliveryId', id) as payload from deliveries`,
	})
}
