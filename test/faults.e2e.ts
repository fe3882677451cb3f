/**
 * Faults, against the compiled binary (issue #7, point 3): PostgreSQL stopped
 * while requests flow, SIGKILL in the middle of writes to the embedded
 * database, SIGTERM under sustained load. Run with `bun test ./test/faults.e2e.ts`
 * after `bun run build`; the PostgreSQL part needs TEST_DATABASE_URL and the
 * PostgreSQL server binaries (it starts its own throwaway cluster, never
 * touching the shared one).
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { binaryFolder, jsonPost, startBinary, type BinaryFolder, type RunningBinary } from './support/binary'
import { TEST_DATABASE_URL } from './support/database'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(120_000)

const PASSWORD = 'correct horse battery staple'
const ADMIN = { email: 'faults-admin@example.test', password: PASSWORD }
/** Cheap hashing and no rate limits: the load is many sign-ups from one address. */
// Limits, lockout and the session cap off: the load logs one account in from many loops at once (more checks in flight
// than the lockout allows) and thousands of times (the cap would revoke the session whose token the readers use).
const LOAD_ENV = {
	PASSWORD_HASH_MEMORY_KIB: '1024',
	PASSWORD_HASH_TIME_COST: '1',
	RATE_LIMIT_MAX: '0',
	AUTH_RATE_LIMIT_MAX: '0',
	LOCKOUT_THRESHOLD: '0',
	SESSIONS_PER_USER_MAX: '0',
}
/** Every request must be answered within this (a hang check, not a speed assertion). */
const ANSWER_WITHIN_MS = 15_000

const folders: BinaryFolder[] = []
const processes: RunningBinary[] = []
const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
	for (const server of processes) server.process.kill('SIGKILL')
	await Promise.all(processes.map((server) => server.process.exited))
	for (const cleanup of cleanups.reverse()) await cleanup()
	for (const at of folders) at.remove()
})

const launch = async (at: BinaryFolder, env: Record<string, string>) => {
	const server = await startBinary(at, env)
	processes.push(server)
	return server
}
const folder = (label: string) => {
	const at = binaryFolder(label)
	folders.push(at)
	return at
}

let emailCounter = 0
const uniqueEmail = (label: string) => `${label}-${Date.now().toString(36)}-${(emailCounter++).toString(36)}@example.test`

/** One request's outcome, as a client saw it. */
interface Outcome {
	kind: 'write' | 'read' | 'login'
	email?: string
	startedAt: number
	endedAt: number
	status?: number
	contentType?: string
	retryAfter?: string | null
	body?: unknown
	/** A connection error, or 'hang' when no answer came within ANSWER_WITHIN_MS. */
	failure?: string
}

async function timed(kind: Outcome['kind'], url: string, init: RequestInit, email?: string): Promise<Outcome> {
	const startedAt = Date.now()
	try {
		const res = await fetch(url, { ...init, signal: AbortSignal.timeout(ANSWER_WITHIN_MS) })
		const text = await res.text()
		let body: unknown = text
		try {
			body = JSON.parse(text)
		} catch {}
		return {
			kind,
			email,
			startedAt,
			endedAt: Date.now(),
			status: res.status,
			contentType: res.headers.get('content-type') ?? undefined,
			retryAfter: res.headers.get('retry-after'),
			body,
		}
	} catch (error) {
		const name = (error as Error).name
		const failure = name === 'TimeoutError' || name === 'AbortError' ? 'hang' : `${name}: ${(error as Error).message}`
		return { kind, email, startedAt, endedAt: Date.now(), failure }
	}
}

const signUp = (base: string, email: string) => timed('write', `${base}/api/users`, jsonPost({ email, password: PASSWORD }), email)

async function loginToken(base: string, account: { email: string; password: string }): Promise<string> {
	const res = await fetch(`${base}/api/auth/login`, jsonPost(account))
	expect(res.status).toBe(200)
	return ((await res.json()) as { data: { accessToken: string } }).data.accessToken
}

/** Loops that keep requests flowing until stopped; every outcome is kept. */
function driveLoad(
	base: string,
	options: { writers: number; readers: number; logins?: number; account?: { email: string; password: string }; token?: string; label: string },
) {
	const outcomes: Outcome[] = []
	let running = true
	let inFlight = 0
	const loop = async (request: () => Promise<Outcome>) => {
		while (running) {
			inFlight++
			const outcome = await request()
			inFlight--
			outcomes.push(outcome)
			// A refused connection or a 503 answers at once; do not spin on it.
			if (outcome.failure || outcome.status === 503) await Bun.sleep(20)
		}
	}
	const loops = [
		...Array.from({ length: options.writers }, () => loop(() => signUp(base, uniqueEmail(options.label)))),
		...Array.from({ length: options.readers }, () =>
			loop(() => timed('read', `${base}/api/users/me`, { headers: { authorization: `Bearer ${options.token}` } })),
		),
		// A login writes its session in a transaction.
		...Array.from({ length: options.logins ?? 0 }, () => loop(() => timed('login', `${base}/api/auth/login`, jsonPost(options.account)))),
	]
	return {
		outcomes,
		inFlight: () => inFlight,
		stop: async () => {
			running = false
			await Promise.all(loops)
			return outcomes
		},
	}
}

const isSuccess = (outcome: Outcome) => outcome.status !== undefined && outcome.status >= 200 && outcome.status < 300

/** The service's own 503: problem+json, the service-unavailable type, a Retry-After. */
function isServiceUnavailable(outcome: Outcome): boolean {
	const body = outcome.body as Record<string, unknown> | undefined
	return (
		outcome.status === 503 &&
		(outcome.contentType ?? '').startsWith('application/problem+json') &&
		typeof body === 'object' &&
		body !== null &&
		String(body.type).endsWith('/problems/service-unavailable') &&
		body.status === 503 &&
		body.data === null &&
		Array.isArray(body.errors) &&
		/^\d+$/.test(outcome.retryAfter ?? '')
	)
}

/** Outcomes that are neither a success nor the service's 503, described for the failure message. */
const unexpected = (outcomes: Outcome[]) =>
	outcomes
		.filter((outcome) => !isSuccess(outcome) && !isServiceUnavailable(outcome))
		.map(({ kind, status, failure, body, retryAfter }) => ({ kind, status, failure, retryAfter, body }))

async function waitFor(condition: () => Promise<boolean>, what: string, withinMs = 30_000) {
	const deadline = Date.now() + withinMs
	while (Date.now() < deadline) {
		if (await condition()) return
		await Bun.sleep(100)
	}
	throw new Error(`timed out waiting for ${what}`)
}

/** Fails with the process's last words if it has exited. */
async function stillRunning(server: RunningBinary) {
	if (server.process.exitCode === null && server.process.signalCode === null) return
	const stderr = await new Response(server.process.stderr as ReadableStream).text()
	throw new Error(`the service exited (${server.process.exitCode ?? server.process.signalCode}): ${stderr.slice(-2000)} ${server.output().slice(-2000)}`)
}

const readyStatus = async (base: string) =>
	(await fetch(`${base}/api/health/ready`, { signal: AbortSignal.timeout(ANSWER_WITHIN_MS) })).status

// ---------------------------------------------------------------------------------------------
// A private PostgreSQL cluster, started and stopped at will.

function postgresBin(): string | undefined {
	const root = '/usr/lib/postgresql'
	if (!existsSync(root)) return undefined
	const versions = readdirSync(root)
		.filter((version) => existsSync(join(root, version, 'bin', 'pg_ctl')) && existsSync(join(root, version, 'bin', 'initdb')))
		.sort((a, b) => Number(b) - Number(a))
	const chosen = versions.includes('15') ? '15' : versions[0]
	return chosen ? join(root, chosen, 'bin') : undefined
}

/** A TCP port nothing listens on right now. */
function freePort(): number {
	const listener = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
	const { port } = listener
	listener.stop(true)
	return port
}

class PrivateCluster {
	readonly dir: string
	readonly data: string
	readonly port = freePort()
	private readonly asRoot = process.getuid?.() === 0

	constructor(private readonly bin: string) {
		this.dir = mkdtempSync(join(tmpdir(), 'latchkey-faults-cluster-'))
		this.data = join(this.dir, 'data')
		if (this.asRoot) {
			// initdb and the server refuse to run as root: they run as the postgres OS user.
			const uid = Number(Bun.spawnSync(['id', '-u', 'postgres']).stdout.toString().trim())
			const gid = Number(Bun.spawnSync(['id', '-g', 'postgres']).stdout.toString().trim())
			chownSync(this.dir, uid, gid)
		}
	}

	get url() {
		return `postgres://postgres@127.0.0.1:${this.port}/postgres`
	}

	private run(command: string, ...args: string[]) {
		const argv = [join(this.bin, command), ...args]
		const run = Bun.spawnSync(this.asRoot ? ['runuser', '-u', 'postgres', '--', ...argv] : argv, { cwd: this.dir })
		if (run.exitCode !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${run.stderr.toString()}${run.stdout.toString()}`)
	}

	init() {
		this.run('initdb', '-D', this.data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--no-sync')
	}

	start() {
		const options = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c max_connections=50`
		this.run('pg_ctl', '-D', this.data, '-l', join(this.dir, 'server.log'), '-o', options, '-w', '-t', '60', 'start')
	}

	stop(mode: 'fast' | 'immediate') {
		this.run('pg_ctl', '-D', this.data, '-m', mode, '-w', '-t', '60', 'stop')
	}

	/** Stops the server if it runs, and removes everything. */
	remove() {
		if (existsSync(join(this.data, 'postmaster.pid'))) {
			try {
				this.stop('immediate')
			} catch {}
		}
		rmSync(this.dir, { recursive: true, force: true })
	}
}

const PG_BIN = postgresBin()

// ---------------------------------------------------------------------------------------------

if (TEST_DATABASE_URL && PG_BIN) {
	describe('PostgreSQL stops while requests flow', () => {
		test('every answer is a success or a 503 problem, readiness follows the database, and no acknowledged sign-up is lost', async () => {
			const cluster = new PrivateCluster(PG_BIN)
			cleanups.push(() => cluster.remove())
			cluster.init()
			cluster.start()

			const server = await launch(folder('faults-pg'), { ...LOAD_ENV, DATABASE_URL: cluster.url })
			const reader = uniqueEmail('reader')
			expect((await signUp(server.base, reader)).status).toBe(201)
			const token = await loginToken(server.base, { email: reader, password: PASSWORD })

			// Readiness, polled throughout: [time, status].
			const readiness: Array<{ at: number; status: number | string }> = []
			let polling = true
			const poller = (async () => {
				while (polling) {
					const outcome = await timed('read', `${server.base}/api/health/ready`, {})
					readiness.push({ at: outcome.endedAt, status: outcome.status ?? outcome.failure ?? '?' })
					await Bun.sleep(100)
				}
			})()

			const load = driveLoad(server.base, {
				writers: 8,
				readers: 2,
				logins: 2,
				account: { email: reader, password: PASSWORD },
				token,
				label: 'pg',
			})
			const outages: Array<{ mode: 'fast' | 'immediate'; from: number; to: number; ready: number }> = []
			for (const mode of ['fast', 'immediate'] as const) {
				await Bun.sleep(2500)
				const from = Date.now()
				cluster.stop(mode)
				await Bun.sleep(3000)
				cluster.start()
				const to = Date.now()
				// Readiness comes back by itself, with no restart of the service.
				await stillRunning(server)
				await waitFor(async () => (await readyStatus(server.base)) === 200, `readiness after the ${mode} stop`)
				outages.push({ mode, from, to, ready: Date.now() })
			}
			await Bun.sleep(4000)
			const outcomes = await load.stop()
			polling = false
			await poller
			await stillRunning(server)

			// Never a 500, never a connection error, never a hang: a success or the service's 503.
			expect(unexpected(outcomes)).toEqual([])
			// The process stayed up throughout.
			expect(server.process.exitCode).toBeNull()
			expect(server.process.signalCode).toBeNull()
			expect(server.output()).not.toContain('"msg":"unhandled error"')

			// Once readiness is back (and a moment for the pool to reconnect), every request succeeds again:
			// those answered before the next stop, and all of those sent in the last seconds of the load.
			for (const [index, { ready }] of outages.entries()) {
				const next = outages[index + 1]?.from
				const recovered = outcomes.filter(
					(outcome) => outcome.startedAt > ready + 1000 && (next === undefined || outcome.endedAt < next),
				)
				expect(recovered.length).toBeGreaterThan(0)
				expect(recovered.filter((outcome) => !isSuccess(outcome)).map(({ kind, status }) => ({ kind, status }))).toEqual([])
			}

			const report: string[] = []
			for (const { mode, from, to } of outages) {
				const during = outcomes.filter((outcome) => outcome.startedAt >= from && outcome.endedAt <= to)
				const unavailable = during.filter((outcome) => outcome.status === 503)
				// The load really met the outage, and readiness saw it.
				expect(unavailable.length).toBeGreaterThan(0)
				const readyDuring = readiness.filter((probe) => probe.at > from && probe.at < to).map((probe) => probe.status)
				expect(readyDuring).toContain(503)
				expect(readyDuring.every((status) => status === 503 || status === 200)).toBe(true)
				report.push(
					`pg_ctl stop -m ${mode}: ${unavailable.length} × 503 (` +
						(['write', 'read', 'login'] as const).map((kind) => `${unavailable.filter((o) => o.kind === kind).length} ${kind}s`).join(', ') +
						`) of ${during.length} requests in ${to - from} ms down`,
				)
			}
			const written = outcomes.filter((outcome) => outcome.kind === 'write' && outcome.status === 201)
			const total503 = outcomes.filter((outcome) => outcome.status === 503).length
			console.log(
				`[faults] ${outcomes.length} requests, ${written.length} sign-ups acknowledged, ${total503} × 503 in all\n[faults] ${report.join('\n[faults] ')}`,
			)

			// After recovery, everything succeeds again, also with more requests at once than the pool has
			// connections, so that every pooled connection is used (a connection left broken by the outage
			// would answer 503 here, after its connect timeout, for as long as the process runs).
			const after: string[] = []
			for (let round = 0; round < 3; round++) {
				const emails = Array.from({ length: 15 }, () => uniqueEmail('after'))
				const burst = await Promise.all([
					...emails.map((email) => signUp(server.base, email)),
					...Array.from({ length: 15 }, () => timed('read', `${server.base}/api/users/me`, { headers: { authorization: `Bearer ${token}` } })),
				])
				expect(burst.filter((outcome) => !isSuccess(outcome)).map(({ kind, status, failure }) => ({ kind, status, failure }))).toEqual([])
				after.push(...emails)
			}
			expect(await readyStatus(server.base)).toBe(200)

			// Every acknowledged sign-up, before, during and after the outages, is in the database.
			const acknowledged = [reader, ...written.map((outcome) => outcome.email ?? ''), ...after]
			const sql = postgres(cluster.url, { max: 1, onnotice: () => {} })
			try {
				const rows = await sql<{ email: string }[]>`select email from users where email = any(${acknowledged})`
				const stored = new Set(rows.map((row) => row.email))
				expect(acknowledged.filter((email) => !stored.has(email))).toEqual([])
			} finally {
				await sql.end()
			}

			server.process.kill('SIGTERM')
			expect(await server.process.exited).toBe(0)
		})
	})
}

// ---------------------------------------------------------------------------------------------

/** Every user's email, as an admin sees them, following the Link header page by page. */
async function listedEmails(base: string): Promise<Set<string>> {
	const token = await loginToken(base, ADMIN)
	const emails = new Set<string>()
	let next: string | null = '/api/users?limit=100&sort=createdAt'
	while (next) {
		const res: Response = await fetch(new URL(next, base), { headers: { authorization: `Bearer ${token}` } })
		expect(res.status).toBe(200)
		const page = (await res.json()) as { data: { items: Array<{ email: string }>; nextCursor: string | null } }
		for (const user of page.data.items) emails.add(user.email)
		next = /<([^>]+)>;\s*rel="next"/.exec(res.headers.get('link') ?? '')?.[1] ?? null
		expect(next === null).toBe(page.data.nextCursor === null)
	}
	return emails
}

describe('SIGKILL in the middle of writes to the embedded database', () => {
	test('the data directory opens again after each kill and every acknowledged sign-up is there', async () => {
		const at = folder('faults-kill')
		const env = { ...LOAD_ENV, LATCHKEY_ADMIN_EMAIL: ADMIN.email, LATCHKEY_ADMIN_PASSWORD: ADMIN.password }
		const acknowledged: string[] = []
		const report: string[] = []
		for (let cycle = 1; cycle <= 3; cycle++) {
			const server = await launch(at, env)
			expect(server.output()).toContain('embedded PostgreSQL (PGlite) in ./data')
			expect(await readyStatus(server.base)).toBe(200)
			const stored = await listedEmails(server.base)
			expect(acknowledged.filter((email) => !stored.has(email))).toEqual([])

			const load = driveLoad(server.base, { writers: 8, readers: 0, label: `kill${cycle}` })
			await Bun.sleep(300 + 250 * cycle)
			const inFlight = load.inFlight()
			server.process.kill('SIGKILL')
			expect(await server.process.exited).not.toBe(0)
			const outcomes = await load.stop()

			// Killed with requests in flight; until then, every answer was a 201.
			expect(inFlight).toBeGreaterThan(0)
			const answered = outcomes.filter((outcome) => outcome.status !== undefined)
			expect(answered.map((outcome) => outcome.status).filter((status) => status !== 201)).toEqual([])
			const created = answered.map((outcome) => outcome.email ?? '')
			expect(created.length).toBeGreaterThan(0)
			acknowledged.push(...created)
			report.push(`cycle ${cycle}: ${created.length} sign-ups acknowledged, ${inFlight} in flight at the kill`)
		}

		// The last restart: it opens, answers, and has every acknowledged sign-up.
		const server = await launch(at, env)
		expect(await readyStatus(server.base)).toBe(200)
		const stored = await listedEmails(server.base)
		expect(acknowledged.filter((email) => !stored.has(email))).toEqual([])
		const email = uniqueEmail('after-kill')
		expect((await signUp(server.base, email)).status).toBe(201)
		console.log(`[faults] ${report.join('; ')}; ${acknowledged.length} in all, all present after restart`)
		server.process.kill('SIGTERM')
		expect(await server.process.exited).toBe(0)
	})
})

// ---------------------------------------------------------------------------------------------

describe('SIGTERM under sustained load', () => {
	test('every request sent before the signal gets its full answer, new connections are refused, and the process exits 0', async () => {
		// Real argon2 cost, so that logins are still queued when the signal arrives.
		const server = await launch(folder('faults-term'), {
			RATE_LIMIT_MAX: '0',
			AUTH_RATE_LIMIT_MAX: '0',
			LOCKOUT_THRESHOLD: '0',
			SESSIONS_PER_USER_MAX: '0',
			SHUTDOWN_TIMEOUT_SECONDS: '120',
		})
		const port = Number(new URL(server.base).port)
		const account = { email: uniqueEmail('term'), password: PASSWORD }
		expect((await signUp(server.base, account.email)).status).toBe(201)
		const token = await loginToken(server.base, account)

		const login = () => timed('write', `${server.base}/api/auth/login`, jsonPost(account))
		const read = () => timed('read', `${server.base}/api/users/me`, { headers: { authorization: `Bearer ${token}` } })

		// Sustained load: reads and slow logins in loops, then a burst so that many requests are in flight.
		const outcomes: Outcome[] = []
		let running = true
		const loop = async (request: () => Promise<Outcome>) => {
			while (running) outcomes.push(await request())
		}
		const loops = [...Array.from({ length: 12 }, () => loop(read)), ...Array.from({ length: 4 }, () => loop(login))]
		await Bun.sleep(1500)
		const burst = [
			...Array.from({ length: 16 }, login),
			...Array.from({ length: 4 }, () => signUp(server.base, uniqueEmail('term-burst'))),
			...Array.from({ length: 24 }, read),
		]
		// Let the burst reach the server: the logins queue behind argon2 for seconds.
		await Bun.sleep(300)
		running = false
		const signalAt = Date.now()
		server.process.kill('SIGTERM')

		// Once the service has taken the signal, the port takes no new connection while the in-flight requests drain.
		await waitFor(async () => server.output().includes('"msg":"shutting down: finishing in-flight requests"'), 'the shutdown to begin')
		const refused = await Bun.connect({ hostname: '127.0.0.1', port, socket: { data() {} } }).then(
			(socket) => {
				socket.end()
				return false
			},
			() => true,
		)

		const burstOutcomes = await Promise.all(burst)
		await Promise.all(loops)
		const exitCode = await server.process.exited

		// Requests sent well before the signal (all of the burst, every loop request but the last few
		// milliseconds' worth, which may race the closing of a keep-alive connection) got a full 2xx answer.
		const sentBefore = [...burstOutcomes, ...outcomes.filter((outcome) => outcome.startedAt < signalAt - 250)]
		const incomplete = sentBefore.filter((outcome) => !isSuccess(outcome) || typeof outcome.body !== 'object')
		expect(incomplete.map(({ kind, status, failure }) => ({ kind, status, failure }))).toEqual([])
		for (const outcome of burstOutcomes) expect((outcome.body as { data: unknown }).data).toBeTruthy()
		// The rest were answered in full or refused at the connection, never a 5xx.
		expect(outcomes.filter((outcome) => outcome.status !== undefined && outcome.status >= 300)).toEqual([])
		// The drain was real: many answers came after the signal.
		const answeredAfter = burstOutcomes.filter((outcome) => outcome.endedAt > signalAt).length
		expect(answeredAfter).toBeGreaterThanOrEqual(10)

		expect(refused).toBe(true)
		expect(exitCode).toBe(0)
		expect(server.output()).toContain('"msg":"shutting down: finishing in-flight requests"')
		expect(server.output()).toContain('"msg":"stopped"')
		expect(server.output()).not.toContain('shutdown timeout')
		// And afterwards nothing listens.
		await expect(fetch(`${server.base}/api/health`, { signal: AbortSignal.timeout(5000) })).rejects.toThrow()
		console.log(
			`[faults] SIGTERM: ${sentBefore.length} requests sent before the signal, all 2xx; ${answeredAfter} answered after it, ` +
				`drained in ${Date.now() - signalAt} ms`,
		)
	})
})
