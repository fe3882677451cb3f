import { and, asc, desc, eq, gt, inArray, isNull, lt, lte, or, sql, type SQL } from 'drizzle-orm'
import type { Database, Queryable } from '../db/client'
import { jobs, type JobRow } from '../db/schema'

export interface NewJob {
	queue: string
	payload: Record<string, unknown>
	/** Jobs that must not repeat within an interval share a key (see `queuedSince`). */
	throttleKey?: string
	/** Due jobs are claimed highest priority first, then oldest first (default 0). */
	priority?: number
}

/** Told at the commit of every transaction that queued jobs, so that a worker on any instance wakes at once (`BackgroundJobs`). */
export const JOBS_CHANNEL = 'latchkey_jobs'

/**
 * The wake-up of the workers of every instance, once per queue of the `source` rows. PostgreSQL delivers a
 * NOTIFY at commit, never on rollback, and folds its repeats within a transaction: the workers wake exactly
 * when the jobs exist, however many a transaction queued.
 */
const wakeUp = (source: SQL) => sql`select pg_notify(${JOBS_CHANNEL}, queue) from (select distinct queue from ${source}) as woken`

/**
 * The one statement that writes new jobs: the caller's own WITH queries (`ctes`) if any, the insert of `rows`
 * (VALUES or a query of id, queue, payload, throttle key and priority), and their wake-up.
 */
const queueing = (rows: SQL, ctes?: SQL) => sql`
	with ${ctes === undefined ? sql.empty() : sql`${ctes},`}
	queued as (
		insert into ${jobs} (id, queue, payload, throttle_key, priority) ${rows}
		returning queue
	)
	${wakeUp(sql`queued`)}`

/**
 * Adds a job; written with the caller's transaction, so it exists exactly when the change that asked for it does,
 * and the workers wake when that commits (on this instance too: there is no other wake-up to call).
 */
export async function enqueue(db: Queryable, job: NewJob): Promise<string> {
	const id = Bun.randomUUIDv7()
	const payload = JSON.stringify(job.payload)
	await db.execute(queueing(sql`values (${id}::uuid, ${job.queue}::text, ${payload}::jsonb, ${job.throttleKey ?? null}::text, ${job.priority ?? 0}::smallint)`))
	return id
}

/**
 * Queues a job of `queue` for each row of `payloads` (a query of one jsonb column, `payload`) over the WITH
 * queries `ctes`, in the same statement: for an outbox whose jobs stand for the rows it writes there (webhook
 * deliveries), one round trip however many, and nothing queued nor woken when the query yields no row.
 */
export async function enqueueEach(db: Queryable, queue: string, { ctes, payloads }: { ctes: SQL; payloads: SQL }): Promise<void> {
	await db.execute(queueing(sql`select gen_random_uuid(), ${queue}::text, payload, null, 0 from (${payloads}) as each_job`, ctes))
}

/**
 * Runs now, with its attempts counted afresh, the waiting job of `queue` whose payload's `key` is `value` (one
 * no live claim holds: a job being run is left to end), and wakes the workers at commit. Returns whether there was one.
 */
export async function runWaitingJobNow(db: Queryable, queue: string, key: string, value: string): Promise<boolean> {
	const moved = await db
		.update(jobs)
		.set({ runAt: sql`now()`, attempts: 0 })
		.where(
			and(
				eq(jobs.queue, queue),
				isNull(jobs.finishedAt),
				or(isNull(jobs.lockedUntil), lt(jobs.lockedUntil, sql`now()`)),
				sql`${jobs.payload}->>${key} = ${value}`,
			),
		)
		.returning({ id: jobs.id })
	if (moved.length === 0) return false
	// Aliased: PostgreSQL before 16 refuses a subquery in FROM without one (PGlite, a 17, does not).
	await db.execute(wakeUp(sql`(select ${queue}::text as queue) as moved`))
	return true
}

/** Whether a job with this key was queued in the last `seconds` (whatever became of it). */
export async function queuedSince(db: Queryable, throttleKey: string, seconds: number): Promise<boolean> {
	if (seconds <= 0) return false
	const [found] = await db
		.select({ id: jobs.id })
		.from(jobs)
		.where(and(eq(jobs.throttleKey, throttleKey), gt(jobs.createdAt, sql`now() - make_interval(secs => ${seconds})`)))
		.limit(1)
	return found !== undefined
}

export type ClaimedJob = Pick<JobRow, 'id' | 'queue' | 'payload' | 'attempts' | 'createdAt'> & {
	/** This claim's own id: what finishes, fails, defers and renews the job, as long as no later claim replaced it. */
	claimId: string
}

/** A claim, as the writes that end or renew it name it. */
export type JobClaim = Pick<ClaimedJob, 'id' | 'claimId'>

/** The job's row while `claim` still holds it. */
const heldBy = (claim: JobClaim) => and(eq(jobs.id, claim.id), eq(jobs.claimId, claim.claimId))

/**
 * Claims up to `limit` due jobs for `leaseSeconds`: FOR UPDATE SKIP LOCKED lets every instance claim at
 * once without waiting on each other or taking the same job. The lease is what makes a claim survive
 * the transaction: until it ends, no one else claims the job; if the claimant dies, it ends and the
 * job is claimed again (at least once, never lost). A live claimant renews it (`renewLeases`), so the
 * lease is short whatever the job's length. Each claim gets an id of its own: a claimant that lost its
 * lease (it stalled past it) and another claimed the job can no longer finish, fail or release it.
 */
export async function claimDueJobs(db: Database, limit: number, leaseSeconds: number, queues?: string[]): Promise<ClaimedJob[]> {
	const due = db
		.select({ id: jobs.id })
		.from(jobs)
		.where(
			and(
				isNull(jobs.finishedAt),
				lte(jobs.runAt, sql`now()`),
				or(isNull(jobs.lockedUntil), lt(jobs.lockedUntil, sql`now()`)),
				queues === undefined ? undefined : inArray(jobs.queue, queues),
			),
		)
		.orderBy(desc(jobs.priority), asc(jobs.runAt))
		.limit(limit)
		.for('update', { skipLocked: true })
	return db
		.update(jobs)
		.set({ lockedUntil: sql`now() + make_interval(secs => ${leaseSeconds})`, claimId: sql`gen_random_uuid()`, attempts: sql`${jobs.attempts} + 1` })
		.where(inArray(jobs.id, due))
		.returning({ id: jobs.id, queue: jobs.queue, payload: jobs.payload, attempts: jobs.attempts, createdAt: jobs.createdAt, claimId: sql<string>`${jobs.claimId}` })
}

/** Extends the leases of the claims that still hold their jobs by `leaseSeconds` from now; returns those claims' ids. */
export async function renewLeases(db: Database, claims: JobClaim[], leaseSeconds: number): Promise<Set<string>> {
	if (claims.length === 0) return new Set()
	// Claim ids are unique to a job's claim, so the two lists match pairwise.
	const renewed = await db
		.update(jobs)
		.set({ lockedUntil: sql`now() + make_interval(secs => ${leaseSeconds})` })
		.where(and(inArray(jobs.id, claims.map((claim) => claim.id)), inArray(jobs.claimId, claims.map((claim) => claim.claimId)), isNull(jobs.finishedAt)))
		.returning({ claimId: sql<string>`${jobs.claimId}` })
	return new Set(renewed.map((row) => row.claimId))
}

/**
 * Jobs done: their payloads go (a mail's holds its link), their rows stay a while as a record. `db` may be the
 * handler's transaction (one that records the jobs' outcome). A job no longer held by its claim (it stalled
 * past its lease and another claim took it) is left to that claim. Returns how many were finished.
 */
export async function finishJobs(db: Queryable, claims: JobClaim[]): Promise<number> {
	if (claims.length === 0) return 0
	// Claim ids are unique to a job's claim, so the two lists match pairwise.
	const done = await db
		.update(jobs)
		.set({ finishedAt: sql`now()`, outcome: 'done', payload: null, lockedUntil: null, lastError: null })
		.where(and(inArray(jobs.id, claims.map((claim) => claim.id)), inArray(jobs.claimId, claims.map((claim) => claim.claimId))))
		.returning({ id: jobs.id })
	return done.length
}

/** A job done (`finishJobs`); false, changing nothing, when the claim no longer holds the job. */
export async function finishJob(db: Queryable, claim: JobClaim): Promise<boolean> {
	return (await finishJobs(db, [claim])) > 0
}

/** A failed attempt: run again after `delaySeconds`, or give up (`failed`, payload gone) when there is none. Only while the claim holds the job. */
export async function failJob(db: Database, claim: JobClaim, error: string, delaySeconds: number | undefined) {
	await db
		.update(jobs)
		.set(
			delaySeconds === undefined
				? { finishedAt: sql`now()`, outcome: 'failed', payload: null, lockedUntil: null, lastError: error }
				: { runAt: sql`now() + make_interval(secs => ${delaySeconds})`, lockedUntil: null, lastError: error },
		)
		.where(heldBy(claim))
}

/** A job put back for later without counting an attempt (it was not tried: its turn is not yet). Only while the claim holds the job. */
export async function deferJob(db: Database, claim: JobClaim, delaySeconds: number) {
	await db
		.update(jobs)
		.set({ runAt: sql`now() + make_interval(secs => ${delaySeconds})`, lockedUntil: null, attempts: sql`greatest(${jobs.attempts} - 1, 0)` })
		.where(heldBy(claim))
}

/** How long a finished job is kept: it carries the resend limits (`queuedSince`) and is the queue's record. */
export const FINISHED_JOB_RETENTION_SECONDS = 7 * 86_400

/** Deletes finished jobs older than `retentionSeconds`, a bounded batch at a time; returns how many went. */
export async function purgeFinishedJobs(db: Database, retentionSeconds: number, batch = 1000): Promise<number> {
	const old = db
		.select({ id: jobs.id })
		.from(jobs)
		.where(lt(jobs.finishedAt, sql`now() - make_interval(secs => ${retentionSeconds})`))
		.limit(batch)
	const deleted = await db.delete(jobs).where(inArray(jobs.id, old)).returning({ id: jobs.id })
	return deleted.length
}
