import { Elysia } from 'elysia'
import { loggableError, type Database } from '../db/client'
import type { Logger } from '../log'
import { JobDeferred, JobFailure, JOB_FINISHED, PermanentJobError, type JobHandler } from './handler'
import { claimDueJobs, deferJob, failJob, finishJob, renewLeases, type ClaimedJob } from './queue'

/** What became of an attempt, as the worker tells its observer (the metrics, given at composition). */
export type JobOutcome = 'done' | 'retry' | 'failed'

export interface JobWorkerOptions {
	db: Database
	log: Logger
	/** The job kinds this worker runs, each queue's handler, registered at composition; it claims only these queues. */
	handlers: Record<string, JobHandler>
	/** How often to look for due jobs unwoken: retries coming due, and jobs whose wake-up was missed. */
	pollSeconds: number
	/** The first retry's delay; each next one doubles, up to `maxDelaySeconds`. */
	retrySeconds: number
	/** Jobs run at once by this instance. */
	concurrency?: number
	/**
	 * While jobs run, claim again only once this many slots are free: under load, claims of several jobs at a
	 * time (one query each) rather than one claim per finished job (default 1).
	 */
	claimAtLeast?: number
	/**
	 * How long a claim holds unless renewed (default JOB_LEASE_SECONDS). The worker renews the leases of the jobs
	 * it runs every third of it, so a job may take longer; a job of an instance that died is claimed again
	 * once its lease ends.
	 */
	leaseSeconds?: number
	/** A job keeps being retried until it is this old. */
	retryForSeconds?: number
	maxDelaySeconds?: number
	/** Told of each attempt's outcome: the observer given at composition (the metrics), which the worker knows nothing of. */
	onOutcome?: (queue: string, outcome: JobOutcome) => void
	/** The queues this worker claims (default: those of its handlers). */
	queues?: string[]
	/** A retry schedule of the queues' own, instead of the doubling delays: undefined gives the job up. */
	retryDelay?: (attempts: number, ageSeconds: number) => number | undefined
}

export const RETRY_FOR_SECONDS = 25 * 3600

/**
 * A claim's lease (API.md: a job whose instance died is tried again within 60 s): at most this long after its
 * last renewal, plus a poll, another instance claims the job.
 */
export const JOB_LEASE_SECONDS = 30

/** The delay before the attempt after `attempts` failed ones, or undefined once the job has been tried long enough. */
export function retryDelaySeconds(attempts: number, ageSeconds: number, { retrySeconds, maxDelaySeconds = 3600, retryForSeconds = RETRY_FOR_SECONDS }: Pick<JobWorkerOptions, 'retrySeconds' | 'maxDelaySeconds' | 'retryForSeconds'>) {
	if (ageSeconds >= retryForSeconds) return undefined
	return Math.min(retrySeconds * 2 ** Math.max(0, attempts - 1), maxDelaySeconds)
}

/**
 * Runs the jobs of the queues whose handlers it was given. Every instance runs the same workers; they share the
 * work through `claimDueJobs` (each job is run by one of them at a time). A job is run as soon as the
 * transaction that queued it commits (its NOTIFY wakes every instance: `BackgroundJobs`), or failing that
 * within `pollSeconds`. A failed job is retried at growing delays
 * for `retryForSeconds`; a job whose worker died is claimed again when its lease ends (a live worker renews
 * the leases of the jobs it runs).
 */
export class JobWorker {
	private readonly running = new Set<Promise<void>>()
	/** The claims of the jobs this worker runs now, by claim id: their leases are renewed until they end. */
	private readonly claims = new Map<string, ClaimedJob>()
	private heartbeat: Timer | undefined
	private renewing = false
	private timer: Timer | undefined
	private started = false
	private claiming: Promise<void> | undefined
	private claimAgain = false

	constructor(private readonly options: JobWorkerOptions) {}

	start() {
		if (this.started) return
		this.started = true
		this.schedule()
		this.heartbeat ??= setInterval(() => void this.renew(), (this.leaseSeconds * 1000) / 3)
		this.heartbeat.unref()
		this.wake()
	}

	/** Stops claiming; resolves once the jobs in progress have ended (their leases renewed until then). */
	async stop() {
		this.started = false
		clearTimeout(this.timer)
		await this.claiming
		await Promise.allSettled([...this.running])
		clearInterval(this.heartbeat)
		this.heartbeat = undefined
	}

	private get queues() {
		return this.options.queues ?? Object.keys(this.options.handlers)
	}

	private get leaseSeconds() {
		return this.options.leaseSeconds ?? JOB_LEASE_SECONDS
	}

	/** Extends the leases of the jobs running here; a job whose lease another claim took meanwhile is said once. */
	private async renew() {
		if (this.renewing || this.claims.size === 0) return
		this.renewing = true
		const claims = [...this.claims.values()]
		try {
			const held = await renewLeases(this.options.db, claims, this.leaseSeconds)
			for (const job of claims)
				if (!held.has(job.claimId) && this.claims.delete(job.claimId))
					this.options.log.warn({ jobId: job.id, queue: job.queue }, 'job lease lost while it ran; its outcome is left to the claim that holds it now')
		} catch (error) {
			// The next beat tries again; a lease outlives two missed renewals.
			this.options.log.warn({ error: loggableError(error) }, 'could not renew job leases')
		} finally {
			this.renewing = false
		}
	}

	/** Looks for due jobs now (a transaction that queued some committed). Does nothing while stopped. */
	wake() {
		if (!this.started) return
		if (this.claiming) {
			this.claimAgain = true
			return
		}
		this.claiming = this.claimAndRun().finally(() => {
			this.claiming = undefined
			if (this.claimAgain) {
				this.claimAgain = false
				this.wake()
			}
		})
	}

	/** Resolves when no job is due or running (for tests and the benchmark). */
	async idle(timeoutMs = 30_000) {
		const deadline = Date.now() + timeoutMs
		while (this.claiming || this.running.size > 0) {
			if (Date.now() > deadline) throw new Error('jobs still running')
			// Never a settled value in the race: it would spin on microtasks and starve the sockets the jobs wait on.
			const inFlight = this.claiming ? [this.claiming, ...this.running] : [...this.running]
			await Promise.race([...inFlight, Bun.sleep(5)])
		}
	}

	private schedule() {
		this.timer = setTimeout(() => {
			if (!this.started) return
			this.wake()
			this.schedule()
		}, this.options.pollSeconds * 1000)
		this.timer.unref()
	}

	private async claimAndRun() {
		const { db, log, concurrency = 4, claimAtLeast = 1 } = this.options
		try {
			while (this.started) {
				const free = concurrency - this.running.size
				if (free <= 0 || (this.running.size > 0 && free < claimAtLeast)) return
				const claimed = await claimDueJobs(db, free, this.leaseSeconds, this.queues)
				for (const job of claimed) this.track(job)
				if (claimed.length < free) return
			}
		} catch (error) {
			if (this.started) log.warn({ error: loggableError(error) }, 'could not claim jobs; trying again at the next poll')
		}
	}

	private track(job: ClaimedJob) {
		this.claims.set(job.claimId, job)
		const run = this.run(job).finally(() => {
			this.claims.delete(job.claimId)
			this.running.delete(run)
			// A slot is free: there may be more due.
			this.wake()
		})
		this.running.add(run)
	}

	private async run(job: ClaimedJob) {
		const { db, log, handlers } = this.options
		const handler = handlers[job.queue]
		try {
			if (!handler || !job.payload) throw new PermanentJobError(`no handler for queue ${job.queue}`)
			if ((await handler(job.payload, job)) !== JOB_FINISHED && !(await finishJob(db, job)))
				log.warn({ jobId: job.id, queue: job.queue }, 'job ran to its end after its lease was lost; another claim holds it now')
			this.options.onOutcome?.(job.queue, 'done')
			log.debug({ jobId: job.id, queue: job.queue, attempts: job.attempts }, 'job done')
		} catch (error) {
			if (error instanceof JobDeferred) {
				// If this write fails, the lease ends and the job is claimed again.
				await deferJob(db, job, error.seconds).catch(() => {})
				return
			}
			const reason = error instanceof Error && error.name !== 'Error' ? error.name : 'failed'
			const message = error instanceof JobFailure || error instanceof PermanentJobError ? error.message : reason
			const ageSeconds = (Date.now() - job.createdAt.getTime()) / 1000
			const { retryDelay = (attempts, age) => retryDelaySeconds(attempts, age, this.options) } = this.options
			const delay = error instanceof PermanentJobError ? undefined : retryDelay(job.attempts, ageSeconds)
			// A handler's own reading of the failure (`new JobFailure(message, { cause })`) goes to the log line beside it.
			const cause = error instanceof JobFailure && typeof error.cause === 'string' ? { cause: error.cause } : {}
			const fields = { jobId: job.id, queue: job.queue, attempts: job.attempts, error: message, ...cause }
			if (delay === undefined) log.error(fields, 'job failed for good')
			else log.warn({ ...fields, retryInSeconds: delay }, 'job failed; retrying later')
			this.options.onOutcome?.(job.queue, delay === undefined ? 'failed' : 'retry')
			// If this write fails too, the lease ends and the job is claimed again.
			await failJob(db, job, message.slice(0, 200), delay).catch(() => {})
		}
	}
}

/**
 * An instance's workers (one per group of job kinds: webhooks have their own, so that slow receivers never hold
 * up mail), woken on every instance when a transaction that queued jobs commits: `listen` is PostgreSQL's
 * LISTEN/NOTIFY on JOBS_CHANNEL (PGlite has it too), the signal every enqueue sends (`queue.ts`), so no instance,
 * this one included, waits for its next poll.
 */
export class BackgroundJobs {
	private unlisten: (() => Promise<void>) | undefined

	constructor(
		private readonly workers: JobWorker[],
		private readonly listen: (onNotify: () => void) => Promise<() => Promise<void>>,
		private readonly log: Logger,
	) {}

	async start() {
		for (const worker of this.workers) worker.start()
		try {
			this.unlisten ??= await this.listen(() => {
				for (const worker of this.workers) worker.wake()
			})
		} catch (error) {
			// Without the signal, jobs are still found at the next poll.
			this.log.warn({ error: loggableError(error) }, 'could not listen for queued jobs; polling only')
		}
	}

	/** Stops claiming; resolves once the jobs in progress have ended (each is bounded). */
	async stop() {
		const unlisten = this.unlisten
		this.unlisten = undefined
		await unlisten?.().catch(() => {})
		await Promise.all(this.workers.map((worker) => worker.stop()))
	}
}

/** The workers as a plugin: started and stopped with the server; `app.decorator.backgroundJobs` for tests and shutdown. */
export const backgroundJobs = (jobs: BackgroundJobs) =>
	new Elysia({ name: 'background-jobs' })
		.decorate('backgroundJobs', jobs)
		.onStart(() => jobs.start())
		.onStop(() => jobs.stop())
