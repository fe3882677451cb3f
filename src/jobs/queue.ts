import { and, asc, desc, eq, gt, inArray, isNull, lt, lte, or, sql } from 'drizzle-orm'
import type { Database } from '../db/client'
import { jobs, type JobRow } from '../db/schema'
import type { Queryable } from '../modules/auth/sessions'

export interface NewJob {
	queue: string
	payload: Record<string, unknown>
	/** Jobs that must not repeat within an interval share a key (see `queuedSince`). */
	throttleKey?: string
	/** Due jobs are claimed highest priority first, then oldest first (default 0). */
	priority?: number
}

/** Adds a job; written with the caller's transaction, so it exists exactly when the change that asked for it does. */
export async function enqueue(db: Queryable, job: NewJob): Promise<string> {
	const id = Bun.randomUUIDv7()
	await db.insert(jobs).values({ id, queue: job.queue, payload: job.payload, throttleKey: job.throttleKey ?? null, priority: job.priority ?? 0 })
	return id
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

export type ClaimedJob = Pick<JobRow, 'id' | 'queue' | 'payload' | 'attempts' | 'createdAt'>

/**
 * Claims up to `limit` due jobs for `leaseSeconds`: FOR UPDATE SKIP LOCKED lets every instance claim at
 * once without waiting on each other or taking the same job. The lease is what makes a claim survive
 * the transaction: until it ends, no one else claims the job; if the claimant dies, it ends and the
 * job is claimed again (at least once, never lost).
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
		.set({ lockedUntil: sql`now() + make_interval(secs => ${leaseSeconds})`, attempts: sql`${jobs.attempts} + 1` })
		.where(inArray(jobs.id, due))
		.returning({ id: jobs.id, queue: jobs.queue, payload: jobs.payload, attempts: jobs.attempts, createdAt: jobs.createdAt })
}

/** A job done: its payload goes (a mail's holds its link), its row stays a while as a record. `db` may be the handler's transaction. */
export async function finishJob(db: Queryable, id: string) {
	await db
		.update(jobs)
		.set({ finishedAt: sql`now()`, outcome: 'done', payload: null, lockedUntil: null, lastError: null })
		.where(eq(jobs.id, id))
}

/** A failed attempt: run again after `delaySeconds`, or give up (`failed`, payload gone) when there is none. */
export async function failJob(db: Database, id: string, error: string, delaySeconds: number | undefined) {
	await db
		.update(jobs)
		.set(
			delaySeconds === undefined
				? { finishedAt: sql`now()`, outcome: 'failed', payload: null, lockedUntil: null, lastError: error }
				: { runAt: sql`now() + make_interval(secs => ${delaySeconds})`, lockedUntil: null, lastError: error },
		)
		.where(eq(jobs.id, id))
}

/** A job put back for later without counting an attempt (it was not tried: its turn is not yet). */
export async function deferJob(db: Database, id: string, delaySeconds: number) {
	await db
		.update(jobs)
		.set({ runAt: sql`now() + make_interval(secs => ${delaySeconds})`, lockedUntil: null, attempts: sql`greatest(${jobs.attempts} - 1, 0)` })
		.where(eq(jobs.id, id))
}

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
