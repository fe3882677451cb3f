import type { ClaimedJob } from './queue'

/**
 * What a job kind gives the worker and may answer or throw: the whole contract between them, apart from the
 * worker itself, so that a kind (mail, webhooks) depends on it and never on the worker that runs it.
 */

/**
 * Runs a job. It may finish the job itself, in the transaction that records its outcome (one commit instead
 * of two), and then says so by returning `JOB_FINISHED`.
 */
export type JobHandler = (payload: Record<string, unknown>, job: ClaimedJob) => Promise<void | typeof JOB_FINISHED>

export const JOB_FINISHED = Symbol('job finished by its handler')

/** A failure that no retry can mend (a payload this version cannot read): the job is given up at once. */
export class PermanentJobError extends Error {}

/** A handler's failure with a message safe to log and store (no address, no SMTP dialogue). */
export class JobFailure extends Error {}

/** Not now: the job goes back to the queue for `seconds`, its attempt not counted (nothing was tried). */
export class JobDeferred extends Error {
	constructor(readonly seconds: number) {
		super('deferred')
	}
}
