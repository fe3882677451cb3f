import { and, eq, inArray, lt, notExists, sql } from 'drizzle-orm'
import { UnreadableSecret, type DataKeys } from '../../crypto/data-keys'
import type { Database } from '../../db/client'
import { webhookAttempts, webhookDeliveries, webhookEndpoints, webhookEvents, type WebhookEndpointRow } from '../../db/schema'
import { GroupCommit } from '../../jobs/group-commit'
import { JOB_FINISHED, JobDeferred, JobFailure, type JobHandler } from '../../jobs/handler'
import { finishJobs } from '../../jobs/queue'
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
	/**
	 * A slow endpoint (its last attempt took half the timeout or more) gets at most this many attempts in
	 * flight in this instance; its other jobs wait a timeout's length, uncounted. Healthy endpoints have no cap.
	 */
	slowEndpointInFlight: number
	/** WEBHOOK_TIMEOUT_SECONDS. */
	timeoutSeconds: number
}

/** How long an endpoint counts as slow after an attempt that was. */
const SLOW_FOR_MS = 60_000

/** One attempt's outcome, to be written with others in one transaction. */
interface AttemptRecord {
	jobId: string
	/** The job's claim: the job is finished only while it still holds it. */
	claimId: string
	deliveryId: string
	endpointId: string
	outcome: AttemptOutcome
	/** Seconds to the next attempt; undefined after a success or the last retry. */
	retryIn: number | undefined
}

/** What became of an attempt's record. */
interface RecordedAttempt {
	/** Its endpoint was turned off by this batch (true for one record of it). */
	disabledNow: boolean
	/** The delivery was deleted meanwhile, with its endpoint: nothing to record, nothing to retry. */
	gone: boolean
}

/** What a delivery job needs, read with those of the other jobs claimed with it. */
interface DeliveryToMake {
	status: 'pending' | 'succeeded' | 'failed'
	endpoint: WebhookEndpointRow
	eventId: string
	body: string
}

/**
 * The job that makes one attempt at a delivery: sign, POST, record the attempt, and either finish or hand
 * the job back to the worker for the next retry of `retrySchedule`. An endpoint's health is kept here: a
 * success clears `failing_since`; failures for `disableAfterSeconds` turn it off.
 *
 * The jobs a worker claims together read their deliveries in one query, and attempts that end while
 * others are being written are written together in one transaction (GroupCommit): a handful of statements
 * per batch rather than per delivery, which is what lets one instance deliver over a thousand a second.
 */
export class WebhookDelivery {
	private readonly loads = new GroupCommit<string, DeliveryToMake | undefined>((ids) => this.loadDeliveries(ids), 500, 2)
	private readonly records = new GroupCommit<AttemptRecord, RecordedAttempt>((batch) => this.recordAttempts(batch), 500, 2)
	/** Attempts in flight by endpoint, in this instance. */
	private readonly inFlight = new Map<string, number>()
	/** Endpoints whose last attempt was slow, until when they count as slow. */
	private readonly slowUntil = new Map<string, number>()

	constructor(private readonly deps: WebhookDeliveryDeps) {}

	/** The delay before the attempt after `attempts` failed ones; none after the schedule's last. */
	retryDelay = (attempts: number): number | undefined => this.deps.retrySchedule[attempts - 1]

	readonly handle: JobHandler = async (payload, job) => {
		const deliveryId = String(payload.deliveryId)
		const found = await this.loads.submit(deliveryId)
		// The endpoint was deleted, or another job of a redelivery got there first.
		if (!found || found.status !== 'pending') return
		if (!found.endpoint.enabled) {
			await this.deps.db.update(webhookDeliveries).set({ status: 'failed', nextAttemptAt: null }).where(eq(webhookDeliveries.id, deliveryId))
			return
		}
		const secrets = await this.signingSecrets(found.endpoint).catch((error: unknown) => {
			if (error instanceof UnreadableSecret) return undefined
			throw error
		})
		const endpointId = found.endpoint.id
		const busy = this.inFlight.get(endpointId) ?? 0
		// A slow receiver already has its share of the slots: this one waits its turn, uncounted, and the other
		// endpoints' deliveries keep the rest of the worker.
		if (busy >= this.deps.slowEndpointInFlight && (this.slowUntil.get(endpointId) ?? 0) > Date.now()) throw new JobDeferred(this.deps.timeoutSeconds)
		this.inFlight.set(endpointId, busy + 1)
		let outcome: AttemptOutcome
		try {
			// Nothing is sent unsigned: the attempt fails, visibly, until the key is back or the secret rotated.
			outcome = secrets ? await this.deps.sender.send(found.endpoint.url, { id: found.eventId, body: found.body, secrets }) : UNREADABLE_SECRET
		} finally {
			const left = (this.inFlight.get(endpointId) ?? 1) - 1
			if (left > 0) this.inFlight.set(endpointId, left)
			else this.inFlight.delete(endpointId)
		}
		if (outcome.durationMs >= (this.deps.timeoutSeconds * 1000) / 2) this.slowUntil.set(endpointId, Date.now() + SLOW_FOR_MS)
		else this.slowUntil.delete(endpointId)
		const retryIn = outcome.succeeded ? undefined : this.retryDelay(job.attempts)
		const recorded = await this.records.submit({ jobId: job.id, claimId: job.claimId, deliveryId, endpointId: found.endpoint.id, outcome, retryIn })
		if (recorded.disabledNow) await this.endpointDisabled(found.endpoint.id)
		if (!outcome.succeeded && !recorded.gone) throw new JobFailure(outcome.error ?? 'failed')
		return JOB_FINISHED
	}

	private async loadDeliveries(ids: string[]): Promise<Array<DeliveryToMake | undefined>> {
		const rows = await this.deps.db
			.select({ id: webhookDeliveries.id, status: webhookDeliveries.status, endpoint: webhookEndpoints, eventId: webhookEvents.id, body: webhookEvents.body })
			.from(webhookDeliveries)
			.innerJoin(webhookEndpoints, eq(webhookEndpoints.id, webhookDeliveries.endpointId))
			.innerJoin(webhookEvents, eq(webhookEvents.id, webhookDeliveries.eventId))
			.where(inArray(webhookDeliveries.id, ids))
		const byId = new Map(rows.map((row) => [row.id, row]))
		return ids.map((id) => byId.get(id))
	}

	/**
	 * The attempts, their deliveries' states, their endpoints' health, and the jobs that succeeded, in one
	 * transaction that does not wait for its WAL flush: a crash may lose its last moments, which only sends
	 * those deliveries again (at least once holds), and delivery rates are not bound by disk flushes.
	 *
	 * An endpoint deleted while its attempt was in flight took the delivery with it: that record is dropped and
	 * its job done. The endpoints are locked FOR KEY SHARE first, before any delivery row, which is the order a
	 * delete takes its locks in (the endpoint, then its deliveries by cascade): a delete either waits for this
	 * transaction or has committed before the rows are read, never a foreign key violation or a deadlock.
	 */
	private async recordAttempts(all: AttemptRecord[]): Promise<RecordedAttempt[]> {
		const { disableAfterSeconds } = this.deps
		const ids = (records: AttemptRecord[], key: 'deliveryId' | 'endpointId') => [...new Set(records.map((record) => record[key]))]
		const { kept, turnedOff } = await this.deps.db.transaction(async (tx) => {
			await tx.execute(sql`set local synchronous_commit = off`)
			await tx.select({ id: webhookEndpoints.id }).from(webhookEndpoints).where(inArray(webhookEndpoints.id, ids(all, 'endpointId'))).for('key share')
			const present = await tx.select({ id: webhookDeliveries.id }).from(webhookDeliveries).where(inArray(webhookDeliveries.id, ids(all, 'deliveryId'))).for('key share')
			const kept = new Set(present.map((row) => row.id))
			const batch = all.filter((record) => kept.has(record.deliveryId))
			const gone = all.filter((record) => !kept.has(record.deliveryId))
			const succeeded = batch.filter((record) => record.outcome.succeeded)
			const failed = batch.filter((record) => !record.outcome.succeeded)
			const finished = [...succeeded, ...gone]
			// A job another claim took meanwhile (this one stalled past its lease) is left to it, and finds the
			// delivery as recorded here.
			await finishJobs(tx, finished.map(({ jobId, claimId }) => ({ id: jobId, claimId })))
			if (batch.length === 0) return { kept, turnedOff: new Set<string>() }
			await tx.insert(webhookAttempts).values(
				batch.map(({ deliveryId, outcome }) => ({
					id: Bun.randomUUIDv7(),
					deliveryId,
					attemptedAt: new Date(Date.now() - outcome.durationMs),
					durationMs: outcome.durationMs,
					statusCode: outcome.statusCode,
					succeeded: outcome.succeeded,
					error: outcome.error,
				})),
			)
			if (succeeded.length > 0) {
				await tx.update(webhookDeliveries).set({ status: 'succeeded', nextAttemptAt: null }).where(inArray(webhookDeliveries.id, ids(succeeded, 'deliveryId')))
				await tx
					.update(webhookEndpoints)
					.set({ failingSince: null })
					.where(and(inArray(webhookEndpoints.id, ids(succeeded, 'endpointId')), sql`${webhookEndpoints.failingSince} is not null`))
			}
			if (failed.length === 0) return { kept, turnedOff: new Set<string>() }
			const gaveUp = failed.filter((record) => record.retryIn === undefined)
			if (gaveUp.length > 0) await tx.update(webhookDeliveries).set({ status: 'failed', nextAttemptAt: null }).where(inArray(webhookDeliveries.id, ids(gaveUp, 'deliveryId')))
			for (const delay of new Set(failed.flatMap((record) => (record.retryIn === undefined ? [] : [record.retryIn])))) {
				const retried = failed.filter((record) => record.retryIn === delay)
				await tx.update(webhookDeliveries).set({ nextAttemptAt: sql`now() + make_interval(secs => ${delay})` }).where(inArray(webhookDeliveries.id, ids(retried, 'deliveryId')))
			}
			// An endpoint that succeeded in this same batch is not failing.
			const failing = ids(failed, 'endpointId').filter((id) => !succeeded.some((record) => record.endpointId === id))
			if (failing.length === 0) return { kept, turnedOff: new Set<string>() }
			await tx.update(webhookEndpoints).set({ failingSince: sql`coalesce(${webhookEndpoints.failingSince}, now())` }).where(inArray(webhookEndpoints.id, failing))
			const off = await tx
				.update(webhookEndpoints)
				.set({ enabled: false, disabledReason: 'failing', updatedAt: new Date() })
				.where(
					and(
						inArray(webhookEndpoints.id, failing),
						eq(webhookEndpoints.enabled, true),
						sql`${webhookEndpoints.failingSince} <= now() - make_interval(secs => ${disableAfterSeconds})`,
					),
				)
				.returning({ id: webhookEndpoints.id })
			return { kept, turnedOff: new Set(off.map((row) => row.id)) }
		})
		return all.map((record) => ({ gone: !kept.has(record.deliveryId), disabledNow: kept.has(record.deliveryId) && turnedOff.delete(record.endpointId) }))
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
