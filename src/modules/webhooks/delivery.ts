import { and, eq, inArray, lt, notExists, sql } from 'drizzle-orm'
import { UnreadableSecret, type DataKeys } from '../../crypto/data-keys'
import type { Database } from '../../db/client'
import { webhookAttempts, webhookDeliveries, webhookEndpoints, webhookEvents, type WebhookEndpointRow } from '../../db/schema'
import { JobFailure, type JobHandler } from '../../jobs/worker'
import type { Logger } from '../../log'
import type { AuditLog } from '../audit/service'
import type { AttemptOutcome, WebhookSender } from './sender'
import { secretContext } from './service'

const UNREADABLE_SECRET: AttemptOutcome = {
	statusCode: null,
	succeeded: false,
	error: 'the signing secret cannot be read (DATA_ENCRYPTION_KEY changed without DATA_ENCRYPTION_PREVIOUS_KEYS): rotate the secret',
	durationMs: 0,
}

/** How long events and their delivery log are kept. */
export const LOG_RETENTION_SECONDS = 30 * 86_400

export interface WebhookDeliveryDeps {
	db: Database
	dataKeys: DataKeys
	sender: WebhookSender
	audit: AuditLog
	log: Logger
	/** Seconds before each retry (API.md: about 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h); after the last, `failed`. */
	retrySchedule: number[]
	/** An endpoint whose every attempt failed for this long is turned off. */
	disableAfterSeconds: number
	/** Told when an endpoint is turned off for failing (a metric). */
	onEndpointDisabled?: () => void
}

/**
 * The job that makes one attempt at a delivery: sign, POST, record the attempt, and either finish or hand
 * the job back to the worker for the next retry of `retrySchedule`. An endpoint's health is kept here: a
 * success clears `failing_since`; failures for `disableAfterSeconds` turn it off.
 */
export class WebhookDelivery {
	constructor(private readonly deps: WebhookDeliveryDeps) {}

	/** The delay before the attempt after `attempts` failed ones; none after the schedule's last. */
	retryDelay = (attempts: number): number | undefined => this.deps.retrySchedule[attempts - 1]

	readonly handle: JobHandler = async (payload, job) => {
		const { db } = this.deps
		const deliveryId = String(payload.deliveryId)
		const [found] = await db
			.select({ status: webhookDeliveries.status, endpoint: webhookEndpoints, eventId: webhookEvents.id, body: webhookEvents.body })
			.from(webhookDeliveries)
			.innerJoin(webhookEndpoints, eq(webhookEndpoints.id, webhookDeliveries.endpointId))
			.innerJoin(webhookEvents, eq(webhookEvents.id, webhookDeliveries.eventId))
			.where(eq(webhookDeliveries.id, deliveryId))
		// The endpoint was deleted, or another job of a redelivery got there first.
		if (!found || found.status !== 'pending') return
		if (!found.endpoint.enabled) {
			await db.update(webhookDeliveries).set({ status: 'failed', nextAttemptAt: null }).where(eq(webhookDeliveries.id, deliveryId))
			return
		}
		const secrets = await this.signingSecrets(found.endpoint).catch((error: unknown) => {
			if (error instanceof UnreadableSecret) return undefined
			throw error
		})
		// Nothing is sent unsigned: the attempt fails, visibly, until the key is back or the secret rotated.
		const outcome = secrets ? await this.deps.sender.send(found.endpoint.url, { id: found.eventId, body: found.body, secrets }) : UNREADABLE_SECRET
		const retryIn = outcome.succeeded ? undefined : this.retryDelay(job.attempts)
		const disabled = await this.record(deliveryId, found.endpoint.id, outcome, retryIn)
		if (disabled) await this.endpointDisabled(found.endpoint.id)
		if (!outcome.succeeded) throw new JobFailure(outcome.error ?? 'failed')
	}

	private async record(deliveryId: string, endpointId: string, outcome: AttemptOutcome, retryIn: number | undefined): Promise<boolean> {
		const { disableAfterSeconds } = this.deps
		return this.deps.db.transaction(async (tx) => {
			await tx.insert(webhookAttempts).values({
				id: Bun.randomUUIDv7(),
				deliveryId,
				attemptedAt: new Date(Date.now() - outcome.durationMs),
				durationMs: outcome.durationMs,
				statusCode: outcome.statusCode,
				succeeded: outcome.succeeded,
				error: outcome.error,
			})
			await tx
				.update(webhookDeliveries)
				.set(
					outcome.succeeded
						? { status: 'succeeded', nextAttemptAt: null }
						: retryIn === undefined
							? { status: 'failed', nextAttemptAt: null }
							: { nextAttemptAt: sql`now() + make_interval(secs => ${retryIn})` },
				)
				.where(eq(webhookDeliveries.id, deliveryId))
			if (outcome.succeeded) {
				await tx.update(webhookEndpoints).set({ failingSince: null }).where(and(eq(webhookEndpoints.id, endpointId), sql`${webhookEndpoints.failingSince} is not null`))
				return false
			}
			await tx.update(webhookEndpoints).set({ failingSince: sql`coalesce(${webhookEndpoints.failingSince}, now())` }).where(eq(webhookEndpoints.id, endpointId))
			const turnedOff = await tx
				.update(webhookEndpoints)
				.set({ enabled: false, disabledReason: 'failing', updatedAt: new Date() })
				.where(
					and(
						eq(webhookEndpoints.id, endpointId),
						eq(webhookEndpoints.enabled, true),
						sql`${webhookEndpoints.failingSince} <= now() - make_interval(secs => ${disableAfterSeconds})`,
					),
				)
				.returning({ id: webhookEndpoints.id })
			return turnedOff.length > 0
		})
	}

	private async endpointDisabled(endpointId: string) {
		this.deps.onEndpointDisabled?.()
		this.deps.log.warn({ endpointId }, 'webhook endpoint disabled: every attempt failed for too long')
		await this.deps.audit.record('webhook.disabled', { ip: null, userAgent: null, requestId: null }, { details: { endpointId, reason: 'failing' } })
	}

	/** The current secret, and the previous one while it still signs. */
	private async signingSecrets(endpoint: WebhookEndpointRow): Promise<string[]> {
		const context = secretContext(endpoint.id)
		const secrets = [(await this.deps.dataKeys.open(endpoint.secret, context)).plaintext]
		if (endpoint.previousSecret && endpoint.previousSecretExpiresAt && endpoint.previousSecretExpiresAt > new Date())
			secrets.push((await this.deps.dataKeys.open(endpoint.previousSecret, context)).plaintext)
		return secrets
	}
}

/** Deletes up to 1,000 events past LOG_RETENTION_SECONDS, with their deliveries and attempts (none still owed); returns how many. */
export async function purgeWebhookLogStep(db: Database): Promise<number> {
	const owed = db
		.select({ id: webhookDeliveries.id })
		.from(webhookDeliveries)
		.where(and(eq(webhookDeliveries.eventId, webhookEvents.id), eq(webhookDeliveries.status, 'pending')))
	const old = db
		.select({ id: webhookEvents.id })
		.from(webhookEvents)
		.where(and(lt(webhookEvents.createdAt, sql`now() - make_interval(secs => ${LOG_RETENTION_SECONDS})`), notExists(owed)))
		.limit(1000)
	const purged = await db.delete(webhookEvents).where(inArray(webhookEvents.id, old)).returning({ id: webhookEvents.id })
	return purged.length
}
