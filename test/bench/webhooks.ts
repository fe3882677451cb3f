/**
 * The webhook section of `bench` (run.ts calls `webhookSection`; `bun run bench -- --only webhooks`):
 *
 * 1. The limit: bare POSTs from this process to the receiver (a process of its own that answers 204), 64 at
 *    once — what the receiver and loopback allow without Latchkey.
 * 2. A burst: events committed to the outbox as fast as transactions of 100 go (recordWebhookEvents, the
 *    function the services call), then delivered by the service to the receiver: deliveries per second from
 *    the first commit to the last receipt, and each event's time from its commit to its receipt.
 * 3. A steady stream of 500 events a second for `seconds`: p50/p99 from commit to receipt when not saturated.
 * 4. What the outbox adds to a sign-up: sign-ups one at a time with no endpoint subscribed (nothing is
 *    written) and with one subscribed to every event (the event, its delivery and job in the transaction),
 *    in alternating blocks; and the outbox statement alone, in transactions from this process that write a
 *    row with and without an event beside it.
 *
 * The events are `login.locked` events whose `email` numbers them; the receiver keeps each one's arrival time
 * (the same machine's clock). The service runs with NODE_ENV=test and WEBHOOK_ALLOW_PRIVATE_NETWORKS=true: its
 * receiver is on loopback, over http.
 */
import { sql } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import type { Database } from '../../src/db/client'
import * as schema from '../../src/db/schema'
import { recordWebhookEvents } from '../../src/modules/webhooks/outbox'
import { measuredLoad, type LoadResult } from './workload'

type Target = { pid: number; url: string; readyAfterMs: number; stop(): Promise<void> }

export interface WebhookBench<M extends LoadResult, R> {
	databaseUrl: string
	seconds: number
	admin: { email: string; password: string }
	log(message: string): void
	startService(env: Record<string, string>, name: string): Promise<Target>
	measure(target: Target, run: () => Promise<LoadResult>): Promise<M>
	row(id: string, scenario: string, m: M, limit: { name: string; perSecond: number | null }, goal?: string, met?: boolean | null): R
}

interface Latencies {
	p50Ms: number
	p99Ms: number
	maxMs: number
}

export interface WebhookFigures {
	/** Bare POSTs to the receiver per second, 64 at once, from this process. */
	receiverLimitPerSecond: number
	burst: { events: number; committedPerSecond: number; deliveredPerSecond: number; duplicates: number } & Latencies
	steady: { ratePerSecond: number; events: number; duplicates: number } & Latencies
	signUp: { each: number; without: Latencies & { meanMs: number }; with: Latencies & { meanMs: number } }
	/** The outbox's own statement, from this process: a transaction writing a row and one event, beside one writing the row alone. */
	outboxWrite: { each: number; empty: Latencies; withEvent: Latencies }
}

const BATCH = 100
/** The rows of the baseline transactions of 11f (deleted after). */
const BASELINE_QUEUE = 'bench-baseline'
const STEADY_RATE = 500
const SIGN_UPS = 120

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0
const latencies = (values: number[]): Latencies => {
	const sorted = [...values].sort((a, b) => a - b)
	return { p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99), maxMs: sorted.at(-1) ?? 0 }
}

class Receiver {
	private read = 0
	/** Arrival time (epoch ms) of each event by its email, and how many came more than once. */
	readonly arrivals = new Map<string, number>()
	duplicates = 0

	private constructor(
		readonly url: string,
		private readonly child: ReturnType<typeof Bun.spawn>,
	) {}

	static async start(): Promise<Receiver> {
		const child = Bun.spawn([process.execPath, `${import.meta.dir}/webhook-receiver.ts`], { stdout: 'pipe', stderr: 'inherit' })
		const reader = (child.stdout as ReadableStream<Uint8Array>).getReader()
		const { value } = await reader.read()
		reader.releaseLock()
		const { port } = JSON.parse(new TextDecoder().decode(value)) as { port: number }
		return new Receiver(`http://127.0.0.1:${port}/hooks`, child)
	}

	/** Takes the arrivals since the last call. */
	async collect() {
		const text = await (await fetch(`${this.url}?from=${this.read}`)).text()
		if (!text) return
		for (const line of text.split('\n')) {
			this.read++
			const [email = '', at] = line.split(' ')
			if (this.arrivals.has(email)) this.duplicates++
			else this.arrivals.set(email, Number(at))
		}
	}

	/** Waits until every one of `emails` has arrived (or `timeoutMs` passed). */
	async waitFor(emails: string[], timeoutMs: number) {
		const deadline = Date.now() + timeoutMs
		while (Date.now() < deadline) {
			await this.collect()
			if (emails.every((email) => this.arrivals.has(email))) return
			await Bun.sleep(50)
		}
		throw new Error(`${emails.filter((email) => !this.arrivals.has(email)).length} of ${emails.length} events did not arrive within ${timeoutMs} ms`)
	}

	stop() {
		this.child.kill()
	}
}

export async function webhookSection<M extends LoadResult, R>(bench: WebhookBench<M, R>): Promise<{ rows: R[]; figures: WebhookFigures }> {
	const client = postgres(bench.databaseUrl, { max: 4, onnotice: () => {} })
	const db = drizzle({ client, schema }) as unknown as Database
	const run = Bun.randomUUIDv7().slice(-8)
	const receiver = await Receiver.start()
	// Left from a run cut short: endpoints (with their deliveries), events, jobs.
	await client`delete from webhook_endpoints`
	await client`delete from webhook_events`
	await client`delete from jobs where queue = 'webhook'`
	// What autovacuum does between the runs of a production server (it is off on some machines: this one's
	// PostgreSQL has autovacuum=off): without it every claim walks the dead versions of the jobs before.
	const vacuum = () => client.unsafe('vacuum analyze jobs, webhook_deliveries, webhook_events, webhook_attempts')
	await vacuum()
	const service = await bench.startService({ NODE_ENV: 'test', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', EMAIL_VERIFICATION: 'off' }, 'webhooks')
	const api = async (method: string, path: string, body?: unknown, token?: string) => {
		const response = await fetch(`${service.url}${path}`, {
			method,
			headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
			body: body === undefined ? undefined : JSON.stringify(body),
		})
		return { status: response.status, body: (await response.json()) as { data: Record<string, any> } }
	}
	try {
		const { accessToken } = (await api('POST', '/api/auth/login', bench.admin)).body.data
		const endpoint = (await api('POST', '/api/webhooks', { url: receiver.url, events: ['*'] }, accessToken)).body.data

		bench.log('11a. the limit: bare POSTs to the receiver, 64 at once')
		let posted = 0
		const limitStarted = performance.now()
		const limitUntil = limitStarted + Math.min(3, bench.seconds) * 1000
		await Promise.all(
			Array.from({ length: 64 }, async () => {
				while (performance.now() < limitUntil) {
					const response = await fetch(receiver.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'bare', data: { email: '' } }) })
					await response.arrayBuffer()
					posted++
				}
			}),
		)
		const receiverLimitPerSecond = posted / ((performance.now() - limitStarted) / 1000)
		await receiver.collect()
		receiver.arrivals.clear()
		receiver.duplicates = 0

		/** Commits `count` numbered events in one transaction; returns their emails and the commit time. */
		const commit = async (label: string, first: number, count: number) => {
			const emails = Array.from({ length: count }, (_, i) => `${label}-${run}-${first + i}@bench.test`)
			await db.transaction((tx) => recordWebhookEvents(tx, emails.map((email) => ({ type: 'login.locked', data: { email, userId: null } }))))
			return { emails, committedAt: Date.now() }
		}

		bench.log('11b. warming up: 500 events')
		const warm = await commit('warm', 0, 500)
		await receiver.waitFor(warm.emails, 30_000)

		await vacuum()
		const burstCount = Math.max(5000, bench.seconds * 1500)
		bench.log(`11c. a burst of ${burstCount} events, committed ${BATCH} to a transaction, delivered`)
		let burst: WebhookFigures['burst'] | undefined
		const burstMeasured = await bench.measure(service, async () => {
			const duplicatesBefore = receiver.duplicates
			const commits: Array<{ emails: string[]; committedAt: number }> = []
			const firstCommitStarted = Date.now()
			for (let first = 0; first < burstCount; first += BATCH) commits.push(await commit('burst', first, Math.min(BATCH, burstCount - first)))
			const committedSeconds = (Date.now() - firstCommitStarted) / 1000
			const emails = commits.flatMap((c) => c.emails)
			await receiver.waitFor(emails, 120_000)
			const lastArrival = Math.max(...emails.map((email) => receiver.arrivals.get(email) as number))
			const seconds = (lastArrival - firstCommitStarted) / 1000
			const measured = latencies(commits.flatMap((c) => c.emails.map((email) => (receiver.arrivals.get(email) as number) - c.committedAt)))
			burst = { events: burstCount, committedPerSecond: burstCount / committedSeconds, deliveredPerSecond: burstCount / seconds, duplicates: receiver.duplicates - duplicatesBefore, ...measured }
			return measuredLoad(burstCount, seconds, measured)
		})

		await vacuum()
		bench.log(`11d. a steady ${STEADY_RATE} events a second for ${bench.seconds} s`)
		let steady: WebhookFigures['steady'] | undefined
		const steadyMeasured = await bench.measure(service, async () => {
			const duplicatesBefore = receiver.duplicates
			const commits: Array<{ emails: string[]; committedAt: number }> = []
			const perTick = STEADY_RATE / 100
			const started = performance.now()
			for (let tick = 0; tick < bench.seconds * 100; tick++) {
				const due = started + tick * 10
				if (performance.now() < due) await Bun.sleep(due - performance.now())
				commits.push(await commit('steady', tick * perTick, perTick))
			}
			const emails = commits.flatMap((c) => c.emails)
			await receiver.waitFor(emails, 60_000)
			const measured = latencies(commits.flatMap((c) => c.emails.map((email) => (receiver.arrivals.get(email) as number) - c.committedAt)))
			const seconds = (performance.now() - started) / 1000
			steady = { ratePerSecond: emails.length / (bench.seconds), events: emails.length, duplicates: receiver.duplicates - duplicatesBefore, ...measured }
			return measuredLoad(emails.length, seconds, measured)
		})

		await vacuum()
		bench.log(`11e. sign-ups one at a time: ${SIGN_UPS} with no endpoint subscribed, ${SIGN_UPS} with one, in alternating blocks`)
		const times = { without: [] as number[], with: [] as number[] }
		const setEnabled = async (enabled: boolean) => {
			const res = await api('PUT', `/api/webhooks/${endpoint.id}`, { url: receiver.url, events: ['*'], enabled }, accessToken)
			if (res.status !== 200) throw new Error(`PUT webhook answered ${res.status}`)
		}
		let n = 0
		for (let block = 0; block < 8; block++) {
			const subscribed = block % 2 === 1
			await setEnabled(subscribed)
			for (let i = 0; i < SIGN_UPS / 4; i++) {
				const at = performance.now()
				const res = await api('POST', '/api/users', { email: `signup-${run}-${n++}@bench.test`, password: 'a bench passphrase of length' })
				if (res.status !== 201) throw new Error(`sign-up answered ${res.status}`)
				;(subscribed ? times.with : times.without).push(performance.now() - at)
			}
		}
		bench.log('11f. the outbox statement alone: transactions that write a row, with and without an event beside it')
		const writes = { empty: [] as number[], withEvent: [] as number[] }
		for (let i = 0; i < 600; i++) {
			const withEvent = i % 2 === 1
			const at = performance.now()
			await db.transaction(async (tx) => {
				// Any change writes a row and waits for its commit's flush; the event is what the outbox adds to it.
				await tx.execute(sql`insert into jobs (id, queue, finished_at, outcome) values (${Bun.randomUUIDv7()}, ${BASELINE_QUEUE}, now(), 'done')`)
				if (withEvent) await recordWebhookEvents(tx, [{ type: 'login.locked', data: { email: `write-${run}-${i}@bench.test`, userId: null } }])
			})
			;(withEvent ? writes.withEvent : writes.empty).push(performance.now() - at)
		}
		await client`delete from jobs where queue = ${BASELINE_QUEUE}`
		const outboxWrite = { each: 300, empty: latencies(writes.empty), withEvent: latencies(writes.withEvent) }
		const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length
		const signUp = {
			each: SIGN_UPS,
			without: { ...latencies(times.without), meanMs: mean(times.without) },
			with: { ...latencies(times.with), meanMs: mean(times.with) },
		}
		if (!burst || !steady) throw new Error('the webhook runs were not measured')
		const figures: WebhookFigures = { receiverLimitPerSecond, burst, steady, signUp, outboxWrite }
		const limit = { name: 'bare POSTs to the receiver', perSecond: receiverLimitPerSecond }
		const signUpSeconds = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / 1000
		return {
			figures,
			rows: [
				bench.row('webhook-burst', `webhooks: a burst of ${burstCount} events → receiver (commit → receipt)`, burstMeasured, limit, '≥ 1,000 deliveries/s', burst.deliveredPerSecond >= 1000),
				bench.row('webhook-steady', `webhooks: ${STEADY_RATE} events/s for ${bench.seconds} s (commit → receipt)`, steadyMeasured, limit, 'p99 < 1 s', steady.p99Ms < 1000),
				bench.row('webhook-signup-without', 'POST /users (sign-up), no endpoint subscribed, 1 at a time', { ...burstMeasured, ...measuredLoad(times.without.length, signUpSeconds(times.without), signUp.without) }, { name: '(reference for the row below)', perSecond: null }),
				bench.row('webhook-signup-with', '  the same with an endpoint subscribed to every event', { ...burstMeasured, ...measuredLoad(times.with.length, signUpSeconds(times.with), signUp.with) }, { name: 'sign-up with no endpoint', perSecond: times.without.length / signUpSeconds(times.without) }),
			],
		}
	} finally {
		await service.stop()
		receiver.stop()
		await client`delete from users where email like ${`signup-${run}-%@bench.test`}`.catch(() => {})
		// Left subscribed, the endpoint would get every event of the next sections (and runs) on this database.
		await client`delete from webhook_endpoints`.catch(() => {})
		await client`delete from jobs where queue = 'webhook'`.catch(() => {})
		await client.end()
	}
}

export function describeWebhooks(figures: WebhookFigures): string[] {
	const { burst, steady, signUp } = figures
	const ms = (value: number) => `${value.toFixed(1)} ms`
	return [
		`webhooks: a burst of ${burst.events} events (committed at ${burst.committedPerSecond.toFixed(0)}/s) delivered at ${burst.deliveredPerSecond.toFixed(0)}/s` +
			` (receiver alone: ${figures.receiverLimitPerSecond.toFixed(0)} bare POSTs/s), commit → receipt (a queue draining) p50 ${ms(burst.p50Ms)} p99 ${ms(burst.p99Ms)} max ${ms(burst.maxMs)}, ${burst.duplicates} duplicates;` +
			` steady ${steady.ratePerSecond.toFixed(0)}/s: p50 ${ms(steady.p50Ms)} p99 ${ms(steady.p99Ms)} max ${ms(steady.maxMs)}, ${steady.duplicates} duplicates`,
		`webhooks, sign-up one at a time (${signUp.each} each): no endpoint p50 ${ms(signUp.without.p50Ms)} p99 ${ms(signUp.without.p99Ms)} mean ${ms(signUp.without.meanMs)};` +
			` an endpoint subscribed p50 ${ms(signUp.with.p50Ms)} p99 ${ms(signUp.with.p99Ms)} mean ${ms(signUp.with.meanMs)}: a difference of ${ms(signUp.with.p50Ms - signUp.without.p50Ms)} at p50` +
			' (argon2 dominates a sign-up, and each event is delivered on the same two cores while the next sign-up runs)',
		`webhooks, the outbox statement alone (${figures.outboxWrite.each} transactions each, from the bench process): with one event p50 ${ms(figures.outboxWrite.withEvent.p50Ms)} p99 ${ms(figures.outboxWrite.withEvent.p99Ms)},` +
			` the same transaction without it p50 ${ms(figures.outboxWrite.empty.p50Ms)} p99 ${ms(figures.outboxWrite.empty.p99Ms)}: the event adds ${ms(figures.outboxWrite.withEvent.p50Ms - figures.outboxWrite.empty.p50Ms)} at p50`,
	]
}
