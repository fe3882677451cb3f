/**
 * The mail section of `bun run bench` (run.ts calls `mailSection`; `bun run bench -- --only mail` runs
 * it alone). Three questions, each answered beside a limit measured in the same run:
 *
 * 1. Does POST /api/auth/recovery-requests wait for SMTP? Its rate and p99 with known addresses (every
 *    request makes a mail: MAIL_RESEND_SECONDS=0) while the SMTP server takes 2 s per mail, beside a
 *    bare Bun.serve handler doing the one thing the route must do before its 202 (INSERT the request
 *    into `jobs`), and beside the same route with an SMTP server that answers at once.
 * 2. Does the route's time tell known addresses from unknown ones? Both at once, from two load
 *    generators with half the connections each, so both see the same machine and the same background work.
 * 3. How fast does the outbox send? N mail jobs inserted into `jobs`, sent by the service's JobWorker
 *    to an SMTP sink that answers at once, from the first mail received to the last — beside nodemailer
 *    sending the same N mails directly (same pool settings, as many at once as the worker runs) to the same sink.
 *
 * The SMTP sink (test/support/mail.ts) runs in the bench process: its CPU (it parses every mail) is
 * shared with the bench's own timers, and, in 3, with the nodemailer limit that runs here too.
 *
 * This file is also two helper processes of the section, as load.ts and bare-server.ts are for the others:
 *   bun test/bench/mail.ts load <spec.json>   autocannon on the recovery route (a MailLoadSpec in, a LoadResult out)
 *   bun test/bench/mail.ts bare               the bare handler (env DATABASE_URL, DATABASE_POOL_MAX); prints {"port":…}
 */
import { join } from 'node:path'
import nodemailer from 'nodemailer'
import postgres from 'postgres'
import { MailTemplates } from '../../src/mail/templates'
import { MAIL_QUEUE } from '../../src/modules/email/service'
import { mailThrottleKey } from '../../src/modules/email/tokens'
import { SmtpSink } from '../support/mail'
import { loadResult, runLoadGenerator, type LoadResult, type LoadSpec } from './workload'

const ROUTE = '/api/auth/recovery-requests'
/** What the SMTP sink takes per mail in 1 and 2. */
const SLOW_SMTP_MS = 2000
/** The binary's settings for this section (added to run.ts's, which turn the rate limits and lockout off). */
const APP_URL = 'https://app.example.test'
/** The bare handler's rows: a queue no worker serves, deleted after its run. */
const BARE_QUEUE = 'bench-bare-mail-request'
/** As in src/mail/mailer.ts: the service's pool, and the worker's default concurrency (src/jobs/worker.ts). */
const POOL = { pool: true, maxConnections: 4, connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 30_000, logger: false } as const
const WORKER_CONCURRENCY = 4

/** Addresses of seeded accounts (test/support/seed.ts), or addresses of no account of the same length. */
export interface MailWorkload {
	kind: 'recovery'
	addresses: 'known' | 'unknown'
	users: number
}
export type MailLoadSpec = Omit<LoadSpec, 'workload'> & { workload: MailWorkload }

/** A process the section measures (run.ts's `Running`). */
export interface MailTarget {
	pid: number
	url: string
	readyAfterMs: number
	stop(): Promise<void>
}

/** What run.ts lends the section: its options, and its own ways of starting, measuring and reporting. */
export interface MailBench<M extends LoadResult, R> {
	databaseUrl: string
	artifacts: string
	users: number
	seconds: number
	connections: number
	poolMax: number
	/** Mails for the outbox scenario (3). */
	mails: number
	log(message: string): void
	/** dist/latchkey as run.ts starts it, with these settings added; `name` names its log file. */
	startService(env: Record<string, string>, name: string): Promise<MailTarget>
	measure(target: MailTarget, run: () => Promise<LoadResult>): Promise<M>
	row(id: string, scenario: string, m: M, limit: { name: string; perSecond: number | null }, goal?: string, met?: boolean | null): R
}

export interface MailFigures {
	smtpDelayMs: number
	/** 1: what the job worker got done during the measured runs, and the outbox right after them. */
	slowRun: RouteRunFigures
	fastRun: RouteRunFigures
	/** 2: the two classes' latency, side by side. */
	knownVsUnknown: { known: Latency; unknown: Latency }
	/** 3: first to last mail received, for the outbox and for nodemailer directly. */
	outbox: { mails: number; spanSeconds: number; perSecond: number; firstAfterMs: number; jobs: JobCounts }
	direct: { mails: number; spanSeconds: number; perSecond: number; concurrency: number }
}
interface RouteRunFigures {
	/** Mails the sink accepted during the run. */
	mailsReceived: number
	/** mail-request jobs the worker finished during the run. */
	requestJobsDone: number
	seconds: number
	jobsAfter: JobCounts
}
type Latency = { reqPerSecond: number; p50Ms: number; p99Ms: number; mean: number; max: number }
/** Rows of `jobs` by queue: done, failed, still waiting. */
type JobCounts = Record<string, { done: number; failed: number; pending: number }>

// ── helper processes (spawned by the section) ───────────────────────────────

/** Seeded users n % 50 === 49 are deactivated (test/support/seed.ts): they get no mail, so never pick one as known. */
const randomActiveUser = (users: number) => {
	for (;;) {
		const n = Math.floor(Math.random() * users)
		if (n % 50 !== 49) return n
	}
}

/** `unknown.test` is as long as `example.test`: the bodies of both classes have the same lengths. */
const addressFor = (workload: MailWorkload) =>
	workload.addresses === 'known' ? `user${randomActiveUser(workload.users)}@example.test` : `user${randomActiveUser(workload.users)}@unknown.test`

async function loadProcess(specPath: string) {
	const { default: autocannon } = await import('autocannon')
	const spec = (await Bun.file(specPath).json()) as MailLoadSpec
	const started = performance.now()
	const result = await autocannon({
		url: spec.url,
		connections: spec.connections,
		duration: spec.duration,
		amount: spec.amount,
		timeout: 30,
		requests: [
			{
				method: 'POST',
				path: ROUTE,
				headers: { 'content-type': 'application/json' },
				setupRequest: (request) => ({ ...request, body: JSON.stringify({ email: addressFor(spec.workload) }) }),
			},
		],
	})
	// As load.ts: the wall clock, not autocannon's whole seconds.
	const seconds = (performance.now() - started) / 1000
	process.stdout.write(`${JSON.stringify(loadResult(result, seconds))}\n`)
}

/**
 * The yardstick of 1: the least the route must do before answering 202 — read the body, normalise the
 * address, INSERT the request into `jobs` (durable before the answer) — with postgres.js and no framework.
 */
function bareProcess() {
	const url = process.env.DATABASE_URL
	if (!url) throw new Error('DATABASE_URL is required')
	const sql = postgres(url, { max: Number(process.env.DATABASE_POOL_MAX ?? 10), onnotice: () => {} })
	const server = Bun.serve({
		port: 0,
		hostname: '127.0.0.1',
		async fetch(request, server) {
			if (request.method !== 'POST' || new URL(request.url).pathname !== ROUTE) return Response.json({ title: 'Not Found' }, { status: 404 })
			const body = (await request.json().catch(() => undefined)) as { email?: unknown } | undefined
			if (typeof body?.email !== 'string') return Response.json({ title: 'Unprocessable' }, { status: 422 })
			const client = { ip: server.requestIP(request)?.address ?? null, userAgent: request.headers.get('user-agent'), requestId: null }
			const payload = { purpose: 'recovery', email: body.email.trim().toLowerCase(), client }
			await sql`insert into jobs (id, queue, payload) values (${Bun.randomUUIDv7()}, ${BARE_QUEUE}, ${sql.json(payload)})`
			return Response.json({ data: null, message: 'If an account can use it, a mail is on its way', errors: [] }, { status: 202 })
		},
	})
	console.log(JSON.stringify({ port: server.port }))
}

if (import.meta.main) {
	const [mode, specPath] = Bun.argv.slice(2)
	if (mode === 'load' && specPath) await loadProcess(specPath)
	else if (mode === 'bare') bareProcess()
	else throw new Error('usage: bun test/bench/mail.ts load <spec.json> | bare')
}

// ── the section ─────────────────────────────────────────────────────────────

/** One autocannon run on the recovery route in its own process (as run.ts's `load`). */
async function load(artifacts: string, spec: MailLoadSpec): Promise<LoadResult> {
	return runLoadGenerator([process.execPath, import.meta.path, 'load'], spec, artifacts)
}

async function startBare(b: { databaseUrl: string; poolMax: number; artifacts: string }): Promise<MailTarget> {
	const spawnedAt = performance.now()
	const child = Bun.spawn([process.execPath, import.meta.path, 'bare'], {
		env: { PATH: process.env.PATH, DATABASE_URL: b.databaseUrl, DATABASE_POOL_MAX: String(b.poolMax) },
		stdout: 'pipe',
		stderr: Bun.file(join(b.artifacts, 'bench-bare-mail.log')),
	})
	const stop = async () => {
		child.kill('SIGTERM')
		await child.exited
	}
	// It prints its port once it listens.
	const reader = child.stdout.getReader()
	let text = ''
	while (!text.includes('\n')) {
		const { value, done } = await reader.read()
		if (done) throw new Error(`the bare mail handler exited with ${await child.exited}; see test-artifacts/bench-bare-mail.log`)
		text += new TextDecoder().decode(value)
	}
	reader.releaseLock()
	const { port } = JSON.parse(text.slice(0, text.indexOf('\n'))) as { port: number }
	return { pid: child.pid, url: `http://127.0.0.1:${port}`, readyAfterMs: performance.now() - spawnedAt, stop }
}

async function jobCounts(sql: postgres.Sql): Promise<JobCounts> {
	const rows = await sql<{ queue: string; done: number; failed: number; pending: number }[]>`
		select queue,
			count(*) filter (where outcome = 'done')::int as done,
			count(*) filter (where outcome = 'failed')::int as failed,
			count(*) filter (where finished_at is null)::int as pending
		from jobs group by queue order by queue`
	return Object.fromEntries(rows.map(({ queue, ...counts }) => [queue, counts]))
}

/** Polls (every 2 ms) until the sink holds `count` mails; returns that moment. */
async function receivedAt(sink: SmtpSink, count: number, deadline: number): Promise<number> {
	while (sink.mails.length < count) {
		if (Date.now() > deadline) throw new Error(`the SMTP sink has ${sink.mails.length} mails, expected ${count}`)
		await Bun.sleep(2)
	}
	return performance.now()
}

const latency = (m: LoadResult): Latency => ({ reqPerSecond: m.okPerSecond, p50Ms: m.p50, p99Ms: m.p99, mean: m.mean, max: m.max })

/** The three scenarios; returns their rows (run.ts's) and the figures that are not rows. */
export async function mailSection<M extends LoadResult, R>(b: MailBench<M, R>): Promise<{ rows: R[]; figures: MailFigures }> {
	// In this process: the sink's CPU (it parses every mail) is shared with the bench's timers and, in 3, with the direct nodemailer limit.
	const sink = await SmtpSink.start()
	const sql = postgres(b.databaseUrl, { max: 2, onnotice: () => {} })
	const settings = { SMTP_URL: sink.url, APP_URL, MAIL_RESEND_SECONDS: '0', JOB_POLL_SECONDS: '1' }
	const half = Math.max(1, Math.floor(b.connections / 2))
	const spec = (url: string, addresses: MailWorkload['addresses'], options: { seconds?: number; connections?: number } = {}): MailLoadSpec => ({
		url,
		connections: options.connections ?? b.connections,
		duration: options.seconds ?? b.seconds,
		workload: { kind: 'recovery', addresses, users: b.users },
	})
	// Warm-ups use unknown addresses: they leave no mail behind to be sent during the measured run.
	const warmUp = (url: string) => load(b.artifacts, spec(url, 'unknown', { seconds: Math.min(2, b.seconds) }))
	// Each scenario starts from an empty outbox: a backlog left by the one before would be worked off during it.
	const reset = () => sql`truncate jobs, email_tokens, audit_events`
	/** The binary with a fresh outbox, for the length of `run`. */
	const withService = async <T>(name: string, run: (service: MailTarget) => Promise<T>): Promise<T> => {
		await reset()
		const service = await b.startService(settings, name)
		try {
			return await run(service)
		} finally {
			await service.stop()
		}
	}
	const rows: R[] = []
	try {
		// 1. The route while SMTP takes 2 s per mail, beside the bare INSERT and beside SMTP at no delay.
		b.log('8a. recovery requests: bare INSERT, then the service with SMTP at once and at 2 s per mail')
		await reset()
		const bare = await startBare(b)
		let bareRun: M
		try {
			await warmUp(bare.url)
			bareRun = await b.measure(bare, () => load(b.artifacts, spec(bare.url, 'known')))
		} finally {
			await bare.stop()
			await sql`delete from jobs where queue = ${BARE_QUEUE}`
		}
		/** The route with known addresses, and what the job worker got done meanwhile. */
		const routeRun = (name: string, delayMs: number) => {
			sink.delayMs = delayMs
			return withService(name, async (service) => {
				await warmUp(service.url)
				let before: { mails: number; jobs: JobCounts } = { mails: 0, jobs: {} }
				const run = await b.measure(service, async () => {
					before = { mails: sink.mails.length, jobs: await jobCounts(sql) }
					return load(b.artifacts, spec(service.url, 'known'))
				})
				const jobs = await jobCounts(sql)
				const handled = (jobs['mail-request']?.done ?? 0) - (before.jobs['mail-request']?.done ?? 0)
				const figures: RouteRunFigures = { mailsReceived: sink.mails.length - before.mails, requestJobsDone: handled, seconds: run.durationSeconds, jobsAfter: jobs }
				return { run, figures }
			})
		}
		const fast = await routeRun('mail-fast-smtp', 0)
		const slow = await routeRun('mail-slow-smtp', SLOW_SMTP_MS)
		const bareLimit = { name: 'bare Bun.serve + INSERT into jobs', perSecond: bareRun.okPerSecond }
		const p99Goal = SLOW_SMTP_MS / 10
		rows.push(
			b.row('recovery-slow-smtp', `POST /auth/recovery-requests, SMTP ${SLOW_SMTP_MS / 1000} s/mail`, slow.run, bareLimit, `p99 < ${p99Goal} ms`, slow.run.p99 < p99Goal),
			// Mails go out meanwhile, on the same cores: this one is no ceiling for the row above.
			b.row('recovery-fast-smtp', '  same, SMTP answering at once', fast.run, bareLimit),
			b.row('mail-bare', '  bare: INSERT into jobs, 202', bareRun, { name: '(the limit above)', perSecond: null }),
		)

		// 2. Known and unknown addresses at the same time, SMTP still slow.
		b.log('8b. recovery requests: known and unknown addresses at once')
		const both = await withService('mail-known-unknown', async (service) => {
			await warmUp(service.url)
			let unknown: LoadResult | undefined
			const known = await b.measure(service, async () => {
				const [knownResult, unknownResult] = await Promise.all([
					load(b.artifacts, spec(service.url, 'known', { connections: half })),
					load(b.artifacts, spec(service.url, 'unknown', { connections: half })),
				])
				unknown = unknownResult
				return knownResult
			})
			return { known, unknown: unknown as LoadResult }
		})
		const { known, unknown } = both
		const near = (a: number, b: number, slack: number) => Math.abs(a - b) <= Math.max(slack, 0.25 * b)
		const alike = near(unknown.p50, known.p50, 1) && near(unknown.p99, known.p99, 2)
		// The unknown half is a LoadResult of its own process; the service's RSS and CPU are the known half's (one run).
		const unknownMeasured = { ...known, ...unknown } as M
		rows.push(
			b.row('recovery-known', `  known addresses (${half} conn)`, known, { name: '(reference for the row below)', perSecond: null }),
			b.row('recovery-unknown', `  unknown addresses (${half} conn, same time)`, unknownMeasured, { name: 'known addresses', perSecond: known.okPerSecond }, 'p50, p99 within 25% of known', alike),
		)

		// 3. The outbox against nodemailer alone, to the same sink answering at once.
		b.log(`8c. outbox: ${b.mails} mail jobs through the job worker, then nodemailer directly`)
		sink.delayMs = 0
		const templates = new MailTemplates()
		const mails = Array.from({ length: b.mails }, (_, n) => {
			const to = `user${n}@example.test`
			const view = { appName: 'Latchkey', email: to, name: `Seeded User ${n}`, link: `${APP_URL}/reset-password#token=${'x'.repeat(43)}`, code: '123456', validFor: '1 hour' }
			return { kind: 'recovery' as const, to, ...templates.render('recovery', view) }
		})
		const timeoutMs = 60_000 + b.mails * 50
		const outbox = await withService('mail-outbox', async (service) => {
			let figures = { spanSeconds: 0, perSecond: 0, firstAfterMs: 0 }
			const run = await b.measure(service, async () => {
				const offset = sink.mails.length
				const started = performance.now()
				// As the service queues them (src/modules/email/service.ts queueMail), in batches; the worker finds them at its next poll.
				for (let i = 0; i < mails.length; i += 1000) {
					const batch = mails.slice(i, i + 1000).map((mail) => ({ id: Bun.randomUUIDv7(), queue: MAIL_QUEUE, payload: sql.json(mail), throttle_key: mailThrottleKey(mail.kind, mail.to) }))
					await sql`insert into jobs ${sql(batch)}`
				}
				const deadline = Date.now() + timeoutMs
				const first = await receivedAt(sink, offset + 1, deadline)
				const last = await receivedAt(sink, offset + mails.length, deadline)
				const spanSeconds = (last - first) / 1000
				figures = { spanSeconds, perSecond: (mails.length - 1) / spanSeconds, firstAfterMs: first - started }
				return { ...noLatency(mails.length, (last - started) / 1000), okPerSecond: figures.perSecond }
			})
			// The last mail is received before its job is marked done.
			const deadline = Date.now() + 10_000
			let jobs = await jobCounts(sql)
			while ((jobs[MAIL_QUEUE]?.done ?? 0) < mails.length && Date.now() < deadline) {
				await Bun.sleep(50)
				jobs = await jobCounts(sql)
			}
			return { run, jobs, ...figures }
		})

		// The limit: the same mails, the same pool settings, as many sends at once as the worker runs, from this process.
		const self: MailTarget = { pid: process.pid, url: sink.url, readyAfterMs: 0, stop: async () => {} }
		const transport = nodemailer.createTransport({ url: sink.url, ...POOL, requireTLS: false }, { from: `"Latchkey" <no-reply@${new URL(APP_URL).hostname}>` })
		let direct = { spanSeconds: 0, perSecond: 0 }
		let directRun: M
		try {
			directRun = await b.measure(self, async () => {
				const offset = sink.mails.length
				const started = performance.now()
				let next = 0
				const sending = Array.from({ length: WORKER_CONCURRENCY }, async () => {
					while (next < mails.length) {
						const { to, subject, text, html } = mails[next++] as (typeof mails)[number]
						await transport.sendMail({ to, subject, text, html })
					}
				})
				const deadline = Date.now() + timeoutMs
				const first = await receivedAt(sink, offset + 1, deadline)
				const last = await receivedAt(sink, offset + mails.length, deadline)
				await Promise.all(sending)
				const spanSeconds = (last - first) / 1000
				direct = { spanSeconds, perSecond: (mails.length - 1) / spanSeconds }
				return { ...noLatency(mails.length, (last - started) / 1000), okPerSecond: direct.perSecond }
			})
		} finally {
			transport.close()
		}
		rows.push(
			b.row('outbox', `outbox: ${b.mails} mail jobs → SMTP sink (mails/s)`, outbox.run, { name: 'nodemailer direct, same pool', perSecond: directRun.okPerSecond }),
			b.row('mail-direct', `  nodemailer direct, ${WORKER_CONCURRENCY} at once (bench process + sink)`, directRun, { name: '(the limit above)', perSecond: null }),
		)

		return {
			rows,
			figures: {
				smtpDelayMs: SLOW_SMTP_MS,
				slowRun: slow.figures,
				fastRun: fast.figures,
				knownVsUnknown: { known: latency(known), unknown: latency(unknown) },
				outbox: { mails: b.mails, spanSeconds: outbox.spanSeconds, perSecond: outbox.perSecond, firstAfterMs: outbox.firstAfterMs, jobs: outbox.jobs },
				direct: { mails: b.mails, ...direct, concurrency: WORKER_CONCURRENCY },
			},
		}
	} finally {
		// No backlog is left for a later run's service (without SMTP_URL its mail jobs would be retried in the background).
		await reset().catch(() => {})
		await sink.stop()
		await sql.end()
	}
}

/** A LoadResult for a run with no request latency to report (p50/p99 NaN, printed as —). */
const noLatency = (count: number, seconds: number): LoadResult => ({
	requests: count,
	okPerSecond: 0,
	p50: Number.NaN,
	p99: Number.NaN,
	mean: Number.NaN,
	max: Number.NaN,
	durationSeconds: seconds,
	non2xx: 0,
	errors: 0,
	timeouts: 0,
	statusCodes: {},
	captured: [],
})

/** The lines run.ts prints under its table. */
export function describeMail(figures: MailFigures): string[] {
	const { knownVsUnknown: kv, outbox, direct } = figures
	const f = (value: number, digits = 1) => (Number.isFinite(value) ? value.toFixed(digits) : '—')
	const during = (name: string, run: RouteRunFigures) => {
		const queue = (q: string) => run.jobsAfter[q] ?? { done: 0, failed: 0, pending: 0 }
		return (
			`mail, ${name}: during the run the worker finished ${run.requestJobsDone} requests (${f(run.requestJobsDone / run.seconds, 0)}/s) and the sink got ${run.mailsReceived} mails; ` +
			`after it ${queue('mail-request').pending} requests and ${queue('mail').pending} mails were waiting`
		)
	}
	return [
		during(`SMTP at ${figures.smtpDelayMs} ms/mail`, figures.slowRun),
		during('SMTP at once', figures.fastRun),
		`mail, known / unknown addresses at once: p50 ${f(kv.known.p50Ms)} / ${f(kv.unknown.p50Ms)} ms, p99 ${f(kv.known.p99Ms)} / ${f(kv.unknown.p99Ms)} ms, ` +
			`mean ${f(kv.known.mean, 2)} / ${f(kv.unknown.mean, 2)} ms, max ${f(kv.known.max)} / ${f(kv.unknown.max)} ms, ${f(kv.known.reqPerSecond, 0)} / ${f(kv.unknown.reqPerSecond, 0)} req/s`,
		`mail, outbox: ${outbox.mails} mails in ${f(outbox.spanSeconds, 2)} s first→last = ${f(outbox.perSecond)} mails/s (first ${f(outbox.firstAfterMs, 0)} ms after the insert began; ` +
			`jobs done ${outbox.jobs.mail?.done ?? 0}, failed ${outbox.jobs.mail?.failed ?? 0}) · nodemailer direct ${f(direct.spanSeconds, 2)} s = ${f(direct.perSecond)} mails/s`,
	]
}
