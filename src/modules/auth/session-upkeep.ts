import { Elysia } from 'elysia'
import { loggableError, type Database } from '../../db/client'
import type { Metrics } from '../../http/metrics'
import type { Logger } from '../../log'
import { countActiveSessions, purgeEndedSessionsStep } from './sessions'

export interface SessionUpkeepOptions {
	db: Database
	log: Logger
	/** SESSION_RETENTION_SECONDS: how long an ended session is kept. */
	retentionSeconds: number
	/** Where the count of live sessions goes; unset when metrics are off, and then nothing is counted. */
	metrics?: Metrics
	/** Deletes the other leftovers of signing in (expired MFA tokens, WebAuthn challenges, provider flows and codes); returns how many went. */
	purgeSignInLeftovers?: () => Promise<number>
	purgeIntervalSeconds?: number
	gaugeIntervalSeconds?: number
}

/**
 * Background work on the sessions table, started when the server starts and stopped with it:
 * purging ended sessions past their retention, and counting live sessions for the metrics gauge,
 * so that a scrape reads a number instead of counting a table. Each loop waits for its round to
 * finish before scheduling the next (rounds never overlap), holds no timer that keeps the process
 * alive, and never throws: a failed round is logged and the next one tries again.
 */
export class SessionUpkeep {
	private readonly timers = new Set<Timer>()
	private readonly rounds = new Set<Promise<unknown>>()
	private started = false
	private stopRequested = false
	/** Bumped by each start, so that a round left over from before a stop schedules nothing. */
	private generation = 0

	constructor(private readonly options: SessionUpkeepOptions) {}

	start() {
		if (this.started) return
		this.started = true
		this.stopRequested = false
		this.generation++
		const { purgeIntervalSeconds = 600, gaugeIntervalSeconds = 30, metrics } = this.options
		this.loop('session purge', purgeIntervalSeconds, () => this.purge())
		if (metrics) this.loop('active-session count', gaugeIntervalSeconds, () => this.refreshGauge())
	}

	/**
	 * Stops scheduling at once; resolves when a round in progress has ended (a purge ends after its
	 * current step). Elysia does not await stop hooks, so a round may still meet a closed database:
	 * that is not logged as a failure.
	 */
	async stop() {
		this.started = false
		this.stopRequested = true
		for (const timer of this.timers) clearTimeout(timer)
		this.timers.clear()
		await Promise.allSettled([...this.rounds])
	}

	/** One purge round: bounded steps until nothing that can go is left, or a stop. Returns what went. */
	async purge(): Promise<{ sessions: number; refreshTokens: number }> {
		const total = { sessions: 0, refreshTokens: 0 }
		for (;;) {
			const step = await purgeEndedSessionsStep(this.options.db, this.options.retentionSeconds)
			total.sessions += step.sessions
			total.refreshTokens += step.refreshTokens
			if ((step.sessions === 0 && step.refreshTokens === 0) || this.stopRequested) break
		}
		if (total.sessions > 0 || total.refreshTokens > 0) this.options.log.info(total, 'purged ended sessions past their retention')
		const leftovers = (await this.options.purgeSignInLeftovers?.()) ?? 0
		if (leftovers > 0) this.options.log.info({ expired: leftovers }, 'purged expired sign-in leftovers (MFA tokens, challenges, provider flows and codes)')
		return total
	}

	/** Counts live sessions into the gauge; a scrape serves the last count. */
	async refreshGauge(): Promise<void> {
		const { metrics, db } = this.options
		if (metrics) metrics.setActiveSessions(await countActiveSessions(db))
	}

	/** Runs `task` now, then again `seconds` after each round ends. */
	private loop(name: string, seconds: number, task: () => Promise<unknown>) {
		const generation = this.generation
		const round = async () => {
			const run = task().catch((error: unknown) => {
				if (!this.stopRequested) this.options.log.warn({ error: loggableError(error) }, `${name} failed; retrying next round`)
			})
			this.rounds.add(run)
			await run
			this.rounds.delete(run)
			if (this.stopRequested || generation !== this.generation) return
			const timer = setTimeout(() => {
				this.timers.delete(timer)
				void round()
			}, seconds * 1000)
			timer.unref()
			this.timers.add(timer)
		}
		void round()
	}
}

/**
 * The upkeep as a plugin: started and stopped with the server (`listen`, `stop`), and reachable as
 * `app.decorator.sessionUpkeep` so that tests can run a round at a moment of their choosing.
 */
export const sessionUpkeep = (options: SessionUpkeepOptions) => {
	const upkeep = new SessionUpkeep(options)
	return new Elysia({ name: 'session-upkeep' })
		.decorate('sessionUpkeep', upkeep)
		.onStart(() => upkeep.start())
		.onStop(() => upkeep.stop())
}
