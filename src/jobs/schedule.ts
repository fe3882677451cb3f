import { Elysia } from 'elysia'
import { loggableError } from '../db/client'
import type { Logger } from '../log'

/** A periodic task; `stopping` says when the schedule was asked to stop, so a long round can end early. */
export type UpkeepTask = (stopping: () => boolean) => Promise<unknown>

/**
 * The one scheduler of periodic upkeep (purges past their retention, counts for the metrics), started when the
 * server starts and stopped with it. Each task runs at start, then `seconds` after each of its rounds ends
 * (rounds never overlap), holds no timer that keeps the process alive, and never throws: a failed round is
 * logged and the next one tries again. The queue's workers keep their own poll and lease timers: those are how
 * jobs run, not upkeep.
 */
export class Schedule {
	private readonly tasks: Array<{ name: string; seconds: number; run: UpkeepTask }> = []
	private readonly timers = new Set<Timer>()
	private readonly rounds = new Set<Promise<unknown>>()
	private started = false
	private stopRequested = false
	/** Bumped by each start, so that a round left over from before a stop schedules nothing. */
	private generation = 0

	constructor(private readonly log: Logger) {}

	/** Adds a task (at composition); `name` is what a failed round's log line says. */
	every(name: string, seconds: number, run: UpkeepTask): this {
		this.tasks.push({ name, seconds, run })
		if (this.started) this.loop(name, seconds, run)
		return this
	}

	start() {
		if (this.started) return
		this.started = true
		this.stopRequested = false
		this.generation++
		for (const { name, seconds, run } of this.tasks) this.loop(name, seconds, run)
	}

	/**
	 * Stops scheduling at once; resolves when the rounds in progress have ended (a purge ends after its current
	 * step). Elysia does not await stop hooks, so a round may still meet a closed database: that is not logged as
	 * a failure.
	 */
	async stop() {
		this.started = false
		this.stopRequested = true
		for (const timer of this.timers) clearTimeout(timer)
		this.timers.clear()
		await Promise.allSettled([...this.rounds])
	}

	/** Runs `task` now, then again `seconds` after each round ends. */
	private loop(name: string, seconds: number, task: UpkeepTask) {
		const generation = this.generation
		const stopping = () => this.stopRequested || generation !== this.generation
		const round = async () => {
			const run = task(stopping).catch((error: unknown) => {
				if (!this.stopRequested) this.log.warn({ error: loggableError(error) }, `${name} failed; retrying next round`)
			})
			this.rounds.add(run)
			await run
			this.rounds.delete(run)
			if (stopping()) return
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

/** Runs a bounded step (one that returns how many rows it handled) until it handles none, or the schedule stops; returns the total. */
export async function inSteps(step: () => Promise<number>, stopping: () => boolean): Promise<number> {
	let total = 0
	for (;;) {
		const handled = await step()
		total += handled
		if (handled === 0 || stopping()) return total
	}
}

/** The schedule as a plugin: started and stopped with the server (`listen`, `stop`), `app.decorator.schedule` for shutdown. */
export const scheduled = (schedule: Schedule) =>
	new Elysia({ name: 'schedule' })
		.decorate('schedule', schedule)
		.onStart(() => schedule.start())
		.onStop(() => schedule.stop())
