import { Elysia } from 'elysia'
import type { Database } from '../../db/client'
import type { Metrics } from '../../http/metrics'
import { Schedule } from '../../jobs/schedule'
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
	/** The app's one schedule of upkeep, which the purge and the count join; without it, one of their own. */
	schedule?: Schedule
}

/**
 * Background work on the sessions table, run on the app's schedule (started with the server, stopped with it):
 * purging ended sessions past their retention, and counting live sessions for the metrics gauge, so that a
 * scrape reads a number instead of counting a table.
 */
export class SessionUpkeep {
	private readonly schedule: Schedule

	constructor(private readonly options: SessionUpkeepOptions) {
		const { purgeIntervalSeconds = 600, gaugeIntervalSeconds = 30, metrics } = options
		this.schedule = options.schedule ?? new Schedule(options.log)
		this.schedule.every('session purge', purgeIntervalSeconds, (stopping) => this.purge(stopping))
		if (metrics) this.schedule.every('active-session count', gaugeIntervalSeconds, () => this.refreshGauge())
	}

	/** Starts the schedule the upkeep runs on (the app's starts with the server). */
	start() {
		this.schedule.start()
	}

	/** Stops that schedule; resolves when a round in progress has ended (a purge ends after its current step). */
	async stop() {
		await this.schedule.stop()
	}

	/** One purge round: bounded steps until nothing that can go is left, or a stop. Returns what went. */
	async purge(stopping: () => boolean = () => false): Promise<{ sessions: number; refreshTokens: number }> {
		const total = { sessions: 0, refreshTokens: 0 }
		for (;;) {
			const step = await purgeEndedSessionsStep(this.options.db, this.options.retentionSeconds)
			total.sessions += step.sessions
			total.refreshTokens += step.refreshTokens
			if ((step.sessions === 0 && step.refreshTokens === 0) || stopping()) break
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
}

/** The upkeep on the app's schedule, reachable as `app.decorator.sessionUpkeep` so that tests can run a round at a moment of their choosing. */
export const sessionUpkeep = (options: SessionUpkeepOptions & { schedule: Schedule }) =>
	new Elysia({ name: 'session-upkeep' }).decorate('sessionUpkeep', new SessionUpkeep(options))
