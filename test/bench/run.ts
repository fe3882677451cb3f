/**
 * `bun run bench`: builds dist/latchkey, runs it against a PostgreSQL
 * database seeded with N users, drives it with autocannon from separate
 * processes, and sets every figure beside a limit measured in the same run.
 * Prints a table and writes the same figures as JSON to test-artifacts/.
 *
 *   bun run bench [--users 1000000] [--seconds 10] [--connections 50] [--reseed]
 *                 [--memory-requests 100000] [--memory-round 50000] [--logout-pool 300] [--skip-build]
 *                 [--server postgres://postgres@127.0.0.1:5432/postgres] [--database latchkey_bench]
 *                 [--mail-count 2000] [--only login-read|mail|mfa|oidc|webhooks|provider|organizations|memory|import] [--memory-speed 0]
 *                 [--binary dist/latchkey]
 *
 * `--binary` runs another build (say, of the code before a change, with --skip-build) against the same scenarios.
 *
 * `--only login-read` runs the first two scenarios alone (login against the hashing limit, the
 * authenticated read against the bare handlers): the two figures a change must keep, in two minutes
 * rather than ten, so that the code before and after can be alternated.
 *
 * `--only import` imports a file of `--users` users (1,000,000 by default) with the binary's `latchkey import` into a
 * fresh database and exports them again (test/bench/import.ts); it needs no seeded database.
 *
 * `--only memory` measures the binary's memory at rest on both databases (test/bench/memory.ts) and, with
 * `--memory-speed <seconds>`, the login and read rates on the embedded database; it needs no seeded database.
 * `--only mail` runs the mail section alone (test/bench/mail.ts), `--only mfa` the second-factor one
 * (test/bench/mfa.ts), `--only oidc` the identity-provider one (test/bench/oidc.ts), `--only webhooks` the
 * webhook one (test/bench/webhooks.ts), `--only provider` the OpenID Provider one (test/bench/provider.ts:
 * single sign-on, code exchange, refresh, userinfo, the sign-in page, its own start-up), `--only organizations` the
 * organization one (test/bench/organizations.ts: 100,000 organizations seeded beside the users, one of 100,000
 * members, the list pages of a big and a small one side by side), `--only console` the admin console's (test/bench/console.ts:
 * its users page in Chromium against the API's time for the same list), with no other start-up, hashing or other scenario.
 *
 * Speed goals live here and only here; `bun test` never times anything.
 */
import { mkdirSync, openSync } from 'node:fs'
import os from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import postgres from 'postgres'
import { BENCH_DATA_ENCRYPTION_KEY as DATA_ENCRYPTION_KEY, BENCH_JWT_SECRET as JWT_SECRET, benchServiceEnv } from './service-env'
import { prepareDatabase, rowNearEnd, SEED_PASSWORD } from './database'
import { cpuSeconds, rssMiB, RssWatch } from './proc'
import { describeMail, mailSection, type MailFigures } from './mail'
import { describeMfa, mfaSection, type MfaFigures } from './mfa'
import { describeOidc, oidcSection, type OidcFigures } from './oidc'
import { describeProvider, providerSection, type ProviderFigures } from './provider'
import { describeWebhooks, webhookSection, type WebhookFigures } from './webhooks'
import { describeOrganizations, organizationSection, type OrganizationFigures } from './organizations'
import { consoleSection, describeConsole, type ConsoleFigures } from './console'
import { measureStartups, type StartupFigures } from './startup'
import { describeMemory, measureMemory, type MemoryFigures } from './memory'
import { describeImport, measureImport } from './import'
import { runLoadGenerator, type BenchSession, type LoadResult, type LoadSpec, type Workload } from './workload'
import { freePort } from '../support/ports'

const ROOT = join(import.meta.dir, '..', '..')
const ARTIFACTS = join(ROOT, 'test-artifacts')
const ADMIN = { email: 'bench-admin@example.test', password: 'bench admin password 2026' }
// The service's defaults (src/config/env.ts); the hashing limit must be measured at the cost the service uses.
const HASH = { memoryCost: 65536, timeCost: 2 }
const POOL_MAX = 10

const { values: args } = parseArgs({
	args: Bun.argv.slice(2),
	options: {
		users: { type: 'string', default: '1000000' },
		seconds: { type: 'string', default: '10' },
		connections: { type: 'string', default: '50' },
		'login-connections': { type: 'string', default: '16' },
		'memory-requests': { type: 'string', default: '100000' },
		'memory-round': { type: 'string' },
		'logout-pool': { type: 'string', default: '300' },
		reseed: { type: 'boolean', default: false },
		'skip-build': { type: 'boolean', default: false },
		server: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
		database: { type: 'string', default: 'latchkey_bench' },
		'log-level': { type: 'string', default: 'info' },
		'mail-count': { type: 'string', default: '2000' },
		only: { type: 'string' },
		'memory-speed': { type: 'string', default: '0' },
		binary: { type: 'string', default: join(ROOT, 'dist', 'latchkey') },
	},
})
const BINARY = resolve(args.binary)

const whole = (name: keyof typeof args, min: number) => {
	const value = Number(args[name])
	if (!Number.isInteger(value) || value < min) throw new Error(`--${name} must be a whole number ≥ ${min}`)
	return value
}
const USERS = whole('users', 1000)
const SECONDS = whole('seconds', 1)
const CONNECTIONS = whole('connections', 1)
const LOGIN_CONNECTIONS = whole('login-connections', 1)
const MEMORY_REQUESTS = whole('memory-requests', 1000)
// Four equal rounds after the first MEMORY_REQUESTS; half as long by default to keep the run short.
const MEMORY_ROUND = args['memory-round'] === undefined ? Math.ceil(MEMORY_REQUESTS / 2) : whole('memory-round', 1000)
const LOGOUT_POOL = whole('logout-pool', 10)
/** Mails the outbox scenario queues at once. */
const MAIL_COUNT = whole('mail-count', 10)
const SECTIONS = ['mail', 'mfa', 'oidc', 'webhooks', 'provider', 'organizations', 'console'] as const
type Section = (typeof SECTIONS)[number]
const isSection = (value: string | undefined): value is Section => SECTIONS.includes(value as Section)
const loginReadOnly = args.only === 'login-read'
if (args.only !== undefined && !isSection(args.only) && args.only !== 'memory' && args.only !== 'import' && !loginReadOnly)
	throw new Error(`--only takes: ${['login-read', ...SECTIONS, 'memory', 'import'].join(', ')}`)
const MEMORY_SPEED = Number(args['memory-speed'])
const CORES = navigator.hardwareConcurrency
/** Sessions for the reads: more than connections, so that requests spread over users and pages. */
const READ_POOL = Math.max(64, CONNECTIONS)
/** Rotation chains for the refresh scenario: more than connections, so one is always free. */
const REFRESH_POOL = CONNECTIONS * 2

const log = (message: string) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}`)

// ── processes ────────────────────────────────────────────────────────────

interface Running {
	pid: number
	url: string
	/** From spawn to the first 200 from the readiness probe. */
	readyAfterMs: number
	stop(): Promise<void>
}

/** Polls until `url` answers 2xx (or, with `anyAnswer`, answers at all). */
async function waitUntilReady(url: string, child: Bun.Subprocess, what: string, anyAnswer = false) {
	const deadline = Date.now() + 180_000
	while (Date.now() < deadline) {
		if (child.exitCode !== null) throw new Error(`${what} exited with ${child.exitCode} before it was ready; see test-artifacts/bench-*.log`)
		const ok = await fetch(url).then(
			(response) => anyAnswer || response.ok,
			() => false,
		)
		if (ok) return
		await Bun.sleep(50)
	}
	throw new Error(`${what} was not ready within 180 s`)
}

async function stopChild(child: Bun.Subprocess) {
	child.kill('SIGTERM')
	const exited = await Promise.race([child.exited, Bun.sleep(15_000).then(() => undefined)])
	if (exited === undefined) child.kill('SIGKILL')
}

/**
 * The compiled service, configured as in production but with limits off (they would refuse the load);
 * `extra` adds settings (the mail section's SMTP_URL…), names its log file, and may choose the port (to know the URL beforehand).
 */
async function startService(databaseUrl: string, workers: '1' | 'auto', extra: { env?: Record<string, string>; name?: string; port?: number } = {}): Promise<Running> {
	const port = extra.port ?? (await freePort())
	const logFile = openSync(join(ARTIFACTS, `bench-service-${extra.name ?? `workers-${workers}`}.log`), 'w')
	const spawnedAt = performance.now()
	const child = Bun.spawn([BINARY], {
		// Not the repository: Bun would read a developer's .env there.
		cwd: ARTIFACTS,
		env: {
			...benchServiceEnv({ home: ARTIFACTS, port, databaseUrl, logLevel: args['log-level'] }),
			PUBLIC_URL: `http://127.0.0.1:${port}`,
			DATABASE_POOL_MAX: String(POOL_MAX),
			WORKERS: workers,
			LATCHKEY_ADMIN_EMAIL: ADMIN.email,
			LATCHKEY_ADMIN_PASSWORD: ADMIN.password,
			...extra.env,
		},
		// The request log is written (its cost is part of the service) but not kept: a million lines.
		stdout: 'ignore',
		stderr: logFile,
	})
	const url = `http://127.0.0.1:${port}`
	await waitUntilReady(`${url}/api/health/ready`, child, 'dist/latchkey').catch(async (error: unknown) => {
		await stopChild(child)
		throw error
	})
	return { pid: child.pid, url, readyAfterMs: performance.now() - spawnedAt, stop: () => stopChild(child) }
}

async function startBare(databaseUrl: string, mode: 'lookup' | 'same-work'): Promise<Running> {
	const port = await freePort()
	const child = Bun.spawn([process.execPath, join(import.meta.dir, 'bare-server.ts')], {
		env: { PATH: process.env.PATH, DATABASE_URL: databaseUrl, PORT: String(port), DATABASE_POOL_MAX: String(POOL_MAX), BARE_MODE: mode, JWT_SECRET },
		stdout: 'ignore',
		stderr: openSync(join(ARTIFACTS, `bench-bare-${mode}.log`), 'w'),
	})
	const url = `http://127.0.0.1:${port}`
	const spawnedAt = performance.now()
	// It has no health route: any answer (a 404 here) means it listens.
	await waitUntilReady(`${url}/`, child, 'bare server', true).catch(async (error: unknown) => {
		await stopChild(child)
		throw error
	})
	return { pid: child.pid, url, readyAfterMs: performance.now() - spawnedAt, stop: () => stopChild(child) }
}

// ── load ─────────────────────────────────────────────────────────────────

/** One autocannon run in its own process. */
async function load(url: string, workload: Workload, options: { seconds?: number; amount?: number; connections?: number } = {}) {
	const spec: LoadSpec = {
		url,
		connections: options.connections ?? CONNECTIONS,
		duration: options.seconds ?? SECONDS,
		amount: options.amount,
		workload,
	}
	return runLoadGenerator([process.execPath, join(import.meta.dir, 'load.ts')], spec, ARTIFACTS)
}

interface Measured extends LoadResult {
	peakRssMiB: number
	/** CPU cores the measured process tree used on average. */
	serviceCores: number
	/** Share of the whole machine's CPU that was busy (service, PostgreSQL, load generator, and anyone else). */
	machineBusy: number
}

/**
 * Waits until the target is idle: when a load generator stops, requests it
 * abandoned (queued logins above all) still run, and would be charged to the next scenario.
 */
async function settle(target: Running) {
	const deadline = Date.now() + 20_000
	while (Date.now() < deadline) {
		const before = cpuSeconds(target.pid)
		await Bun.sleep(300)
		if ((cpuSeconds(target.pid) - before) / 0.3 < 0.05) return
	}
}

/** A load run while the target's memory and CPU are watched. */
async function measure(target: Running, run: () => Promise<LoadResult>): Promise<Measured> {
	await settle(target)
	const watch = new RssWatch(target.pid)
	const result = await run()
	return { ...result, ...watch.stop() }
}

const warmUp = (url: string, workload: Workload) => load(url, workload, { seconds: Math.min(2, SECONDS) })

// ── limits measured in this process ───────────────────────────────────────

/** Time of one Bun.password.verify at the service's cost, and what that allows on every core. */
async function hashingLimit() {
	const hash = await Bun.password.hash(SEED_PASSWORD, { algorithm: 'argon2id', ...HASH })
	const times: number[] = []
	for (let i = 0; i < 12; i++) {
		const started = performance.now()
		await Bun.password.verify(SEED_PASSWORD, hash)
		if (i >= 2) times.push(performance.now() - started) // the first two warm the allocator
	}
	times.sort((a, b) => a - b)
	const verifyMs = times[Math.floor(times.length / 2)] as number
	// Cross-check: verifications on every core at once for ~2 s (memory bandwidth may not scale with cores).
	let done = 0
	const until = performance.now() + 2000
	const started = performance.now()
	await Promise.all(
		Array.from({ length: CORES }, async () => {
			while (performance.now() < until) {
				await Bun.password.verify(SEED_PASSWORD, hash)
				done++
			}
		}),
	)
	const parallelPerSecond = done / ((performance.now() - started) / 1000)
	return { verifyMs, cores: CORES, limitPerSecond: CORES / (verifyMs / 1000), parallelPerSecond }
}

// ── sessions the scenarios need ────────────────────────────────────────────

async function login(url: string, email: string, password: string): Promise<BenchSession> {
	const response = await fetch(`${url}/api/auth/login`, {
		method: 'POST',
		headers: { 'content-type': 'application/json' },
		body: JSON.stringify({ email, password }),
	})
	if (!response.ok) throw new Error(`login as ${email} failed: ${response.status} ${await response.text()}`)
	const { data } = (await response.json()) as { data: { accessToken: string; refreshToken: string; user: { id: string } } }
	return { userId: data.user.id, accessToken: data.accessToken, refreshToken: data.refreshToken }
}

/** Logs `count` seeded users in at full speed (argon2 bounds it), through the load generator. */
async function loginMany(url: string, count: number): Promise<BenchSession[]> {
	const sessions: BenchSession[] = []
	while (sessions.length < count) {
		const result = await load(
			url,
			{ kind: 'login', users: USERS, password: SEED_PASSWORD, captureSessions: true },
			{ amount: count - sessions.length, connections: Math.min(LOGIN_CONNECTIONS, count - sessions.length) },
		)
		if (result.captured.length === 0) throw new Error(`logins fail: ${JSON.stringify(result.statusCodes)}`)
		sessions.push(...result.captured)
	}
	return sessions
}

// ── scenarios ─────────────────────────────────────────────────────────────

interface Row {
	id: string
	scenario: string
	reqPerSecond: number
	p50Ms: number
	p99Ms: number
	peakRssMiB: number
	limitName: string
	limitPerSecond: number | null
	/** reqPerSecond ÷ limit, or the figure the goal is about. */
	ratio: number | null
	goal: string
	met: boolean | null
	serviceCores: number
	machineBusy: number
	non2xx: number
	errors: number
	requests: number
}

function row(id: string, scenario: string, m: Measured, limit: { name: string; perSecond: number | null }, goal = '', met: boolean | null = null): Row {
	return {
		id,
		scenario,
		reqPerSecond: m.okPerSecond,
		p50Ms: m.p50,
		p99Ms: m.p99,
		peakRssMiB: m.peakRssMiB,
		limitName: limit.name,
		limitPerSecond: limit.perSecond,
		ratio: limit.perSecond ? m.okPerSecond / limit.perSecond : null,
		goal,
		met,
		serviceCores: m.serviceCores,
		machineBusy: m.machineBusy,
		non2xx: m.non2xx,
		errors: m.errors + m.timeouts,
		requests: m.requests,
	}
}

/** A list cursor for a row deep in the default sort (-createdAt): see encodeCursor in src/modules/users/service.ts. */
const cursorFor = (target: { id: string; createdAt: Date }) =>
	Buffer.from(JSON.stringify({ s: '-createdAt', k: target.createdAt.toISOString(), i: target.id })).toString('base64url')

/** How PostgreSQL runs the q-filtered page: the likely bound of that scenario. */
async function explainSearch(databaseUrl: string, q: string) {
	const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
	try {
		const pattern = `%${q}%`
		const plan = await sql.unsafe<{ 'QUERY PLAN': string }[]>(
			`explain (analyze, buffers off) select * from users where (email ilike $1 or name ilike $1)
			 order by created_at desc, id desc limit 21`,
			[pattern],
		)
		return plan.map((line) => line['QUERY PLAN'])
	} finally {
		await sql.end()
	}
}

async function machineNotes() {
	const cpu = (await Bun.file('/proc/cpuinfo').text()).match(/model name\s*:\s*(.+)/)?.[1] ?? os.arch()
	const sql = postgres(args.server, { max: 1, onnotice: () => {} })
	const [pg] = await sql<{ version: string }[]>`select version()`
	await sql.end()
	return {
		cpu,
		cores: CORES,
		memoryGiB: Math.round(os.totalmem() / 2 ** 30),
		kernel: os.release(),
		bun: Bun.version,
		postgres: pg?.version.split(',')[0] ?? 'unknown',
		loadAverageAtStart: os.loadavg().map((value) => Number(value.toFixed(2))),
		// Everything runs on this one machine: service, PostgreSQL and load generator share the cores.
		sameMachine: true,
	}
}

async function main() {
	mkdirSync(ARTIFACTS, { recursive: true })
	const startedAt = new Date()
	const machine = await machineNotes()
	log(`machine: ${machine.cores} cores, ${machine.memoryGiB} GiB, load ${machine.loadAverageAtStart.join(' ')}`)

	if (!args['skip-build']) {
		log('building dist/latchkey')
		const build = Bun.spawnSync([process.execPath, 'run', 'build'], { cwd: ROOT, stdout: 'ignore', stderr: 'pipe' })
		if (build.exitCode !== 0) throw new Error(`build failed: ${build.stderr.toString()}`)
	}
	if (isSection(args.only)) return sectionOnly(args.only, startedAt, machine)
	if (args.only === 'memory') return memoryOnly(startedAt, machine)
	if (args.only === 'import') return importOnly(startedAt, machine)

	const extra: Record<string, unknown> = {}
	if (!loginReadOnly) {
		log('measuring start-up on the embedded database')
		const embeddedStartup = await measureStartups(5, await freePort())
		log(`binary: first start ${embeddedStartup.binaryFirstMs} ms, restart ${embeddedStartup.binaryRestartMs} ms`)
		extra.embeddedStartup = embeddedStartup
		extra.memoryAtRest = await memoryAtRestOnBothDatabases()
	}

	log(`preparing database ${args.database} with ${USERS} users`)
	const database = await prepareDatabase(args.server, args.database, USERS, args.reseed)
	log(database.seeded === 'created' ? `seeded in ${database.seedSeconds.toFixed(0)} s` : 'reused the existing seed')

	log('measuring the hashing limit')
	const hashing = await hashingLimit()
	log(`one verify ${hashing.verifyMs.toFixed(1)} ms → limit ${hashing.limitPerSecond.toFixed(1)} logins/s`)

	const rows: Row[] = []
	// Sessions live in PostgreSQL and tokens are signed with one fixed secret, so they outlast a restart.
	let readSessions: BenchSession[] = []
	const service = await startService(database.url, '1')
	// What an operator waits for on a deploy or a restart (schema already migrated, as after the first start).
	extra.startupMs = Math.round(service.readyAfterMs)
	log(`service ready ${extra.startupMs} ms after spawn`)
	try {
		const admin = await login(service.url, ADMIN.email, ADMIN.password)

		// 1. Login against the hashing limit; its sessions feed the later scenarios.
		log('1. login')
		const loginRun = await measure(service, () =>
			load(service.url, { kind: 'login', users: USERS, password: SEED_PASSWORD, captureSessions: true }, { connections: LOGIN_CONNECTIONS }),
		)
		rows.push(
			row('login', 'POST /auth/login', loginRun, { name: `hashing: ${CORES} cores ÷ ${hashing.verifyMs.toFixed(0)} ms`, perSecond: hashing.limitPerSecond }, '≥ 90%', loginRun.okPerSecond >= 0.9 * hashing.limitPerSecond),
		)
		const pool = [...loginRun.captured]
		const needed = READ_POOL + REFRESH_POOL + LOGOUT_POOL
		if (pool.length < needed) {
			log(`logging in ${needed - pool.length} more sessions for the pools`)
			pool.push(...(await loginMany(service.url, needed - pool.length)))
		}
		readSessions = pool.splice(0, READ_POOL)
		const refreshSessions = pool.splice(0, REFRESH_POOL)
		const logoutSessions = pool

		// 2. The authenticated read against a bare handler doing the same lookup.
		log('2. authenticated read: service, then bare handlers')
		const readWorkload: Workload = { kind: 'read', sessions: readSessions }
		await warmUp(service.url, readWorkload)
		const read = await measure(service, () => load(service.url, readWorkload))
		const bareRuns: Record<string, Measured> = {}
		for (const mode of ['lookup', 'same-work'] as const) {
			const bare = await startBare(database.url, mode)
			try {
				await warmUp(bare.url, readWorkload)
				bareRuns[mode] = await measure(bare, () => load(bare.url, readWorkload))
			} finally {
				await bare.stop()
			}
		}
		const bareLookup = bareRuns.lookup as Measured
		const bareSameWork = bareRuns['same-work'] as Measured
		rows.push(
			row('read', 'GET /users/{id} (WORKERS=1)', read, { name: 'bare Bun.serve PK lookup', perSecond: bareLookup.okPerSecond }, '≥ 70%', read.okPerSecond >= 0.7 * bareLookup.okPerSecond),
			row('bare-lookup', '  bare: PK lookup only', bareLookup, { name: '(the limit above)', perSecond: null }),
			row('bare-same-work', '  bare: + JWT + session join', bareSameWork, { name: 'bare PK lookup', perSecond: bareLookup.okPerSecond }),
		)
		if (loginReadOnly) return await finish({ startedAt, machine, database, hashing, rows, extra })

		// 3. Keyset pagination: page 1, a page near the end, and a substring search.
		log('3. list pages')
		const deep = cursorFor(await rowNearEnd(database.url, 40))
		const q = String(Math.floor(USERS / 2)).slice(0, 4)
		const pages = {
			first: '/api/users?limit=20',
			deep: `/api/users?limit=20&cursor=${deep}`,
			search: `/api/users?limit=20&q=user${q}`,
		}
		const listRuns: Record<string, Measured> = {}
		for (const [name, path] of Object.entries(pages)) {
			const workload: Workload = { kind: 'get', path, token: admin.accessToken }
			await warmUp(service.url, workload)
			listRuns[name] = await measure(service, () => load(service.url, workload))
		}
		const first = listRuns.first as Measured
		const deepRun = listRuns.deep as Measured
		const search = listRuns.search as Measured
		rows.push(
			row('list-first', 'GET /users page 1', first, { name: '(reference for the two below)', perSecond: null }),
			row('list-deep', 'GET /users near the end', deepRun, { name: 'page 1', perSecond: first.okPerSecond }, '≥ 1/1.5 of page 1', deepRun.okPerSecond >= first.okPerSecond / 1.5),
			row('list-search', `GET /users?q=user${q}`, search, { name: 'page 1', perSecond: first.okPerSecond }),
		)
		extra.searchPlan = await explainSearch(database.url, `user${q}`)

		// 5. The read while a second generator saturates login: hashing must not starve it.
		log('5. authenticated read while login is saturated')
		let loginDuringRead: LoadResult | undefined
		const readUnderLogin = await measure(service, async () => {
			const [readResult, loginResult] = await Promise.all([
				load(service.url, readWorkload),
				load(service.url, { kind: 'login', users: USERS, password: SEED_PASSWORD, captureSessions: true }, { connections: LOGIN_CONNECTIONS }),
			])
			loginDuringRead = loginResult
			return readResult
		})
		logoutSessions.push(...(loginDuringRead?.captured ?? []))
		rows.push(
			row('read-under-login', 'GET /users/{id} + login flood', readUnderLogin, { name: 'unloaded read', perSecond: read.okPerSecond }, '≥ 25%, p99 < 50 ms', readUnderLogin.okPerSecond >= 0.25 * read.okPerSecond && readUnderLogin.p99 < 50),
		)
		extra.loginDuringRead = { reqPerSecond: loginDuringRead?.okPerSecond, p99Ms: loginDuringRead?.p99 }

		// 4. Refresh (rotation chains) and logout (one session per request).
		log('4. refresh and logout')
		const refresh = await measure(service, () => load(service.url, { kind: 'refresh', sessions: refreshSessions }))
		rows.push(row('refresh', 'POST /auth/refresh', refresh, { name: 'authenticated read', perSecond: read.okPerSecond }))
		// Each connection builds one request it never sends when the run ends, so keep that many aside.
		// Sessions cost a login (argon2) each, so the pool is small: fewer connections, so that
		// each makes ~25 requests and the figure is not one TCP handshake per logout.
		const logoutConnections = Math.max(1, Math.min(CONNECTIONS, Math.floor(logoutSessions.length / 25)))
		const logoutAmount = Math.max(1, logoutSessions.length - logoutConnections)
		const logout = await measure(service, () =>
			load(service.url, { kind: 'logout', sessions: logoutSessions }, { amount: logoutAmount, connections: logoutConnections }),
		)
		rows.push(row('logout', `POST /auth/logout (${logoutAmount} req, ${logoutConnections} conn)`, logout, { name: 'authenticated read', perSecond: read.okPerSecond }))
	} finally {
		await service.stop()
	}

	// 6. One worker per core.
	log('6. authenticated read with WORKERS=auto')
	const scaled = await startService(database.url, 'auto')
	try {
		const workload: Workload = { kind: 'read', sessions: readSessions }
		await warmUp(scaled.url, workload)
		const run = await measure(scaled, () => load(scaled.url, workload))
		const single = rows.find((r) => r.id === 'read') as Row
		rows.push(row('read-workers-auto', `GET /users/{id} (WORKERS=auto: ${CORES})`, run, { name: 'WORKERS=1', perSecond: single.reqPerSecond }))
	} finally {
		await scaled.stop()
	}

	// 7. Memory: a fresh process, idle, after N requests, then four equal rounds (first two against last two).
	log(`7. memory: idle, after ${MEMORY_REQUESTS} requests, four more equal rounds`)
	const fresh = await startService(database.url, '1')
	let memory: Record<string, number | boolean | number[]>
	try {
		await Bun.sleep(2000)
		const idle = rssMiB(fresh.pid)
		const adminToken = (await login(fresh.url, ADMIN.email, ADMIN.password)).accessToken
		const workload: Workload = { kind: 'mixed', sessions: readSessions, adminToken }
		const rounds: Measured[] = []
		const after: number[] = []
		// Four equal rounds after the first: RSS after one round moves by tens of MiB with the collector's
		// timing, so the first two rounds are compared with the last two (means), not one with the next.
		for (const amount of [MEMORY_REQUESTS, MEMORY_ROUND, MEMORY_ROUND, MEMORY_ROUND, MEMORY_ROUND]) {
			rounds.push(await measure(fresh, () => load(fresh.url, workload, { amount })))
			await Bun.sleep(2000) // let the collector run between rounds
			after.push(rssMiB(fresh.pid))
		}
		const [afterFirst, ...afterRounds] = after as [number, number, number, number, number]
		const early = ((afterRounds[0] as number) + (afterRounds[1] as number)) / 2
		const late = ((afterRounds[2] as number) + (afterRounds[3] as number)) / 2
		const growth = late - early
		// Allocators keep some slack; a leak shows as steady growth well beyond it.
		const leakFree = growth <= Math.max(8, early * 0.05)
		memory = { firstRequests: MEMORY_REQUESTS, roundRequests: MEMORY_ROUND, idleMiB: idle, afterFirstMiB: afterFirst, afterRoundsMiB: afterRounds.map((mib) => Math.round(mib)), earlyMeanMiB: early, lateMeanMiB: late, growthMiB: growth, leakFree }
		const lastRound = rounds.at(-1) as Measured
		rows.push(
			row('memory', `mixed (¼ 401/404 by design), ${MEMORY_REQUESTS} + 4 × ${MEMORY_ROUND}`, lastRound, { name: `idle RSS ${idle.toFixed(0)} MiB`, perSecond: null }, 'rounds 3–4 − rounds 1–2 ≤ max(8 MiB, 5%)', leakFree),
		)
	} finally {
		await fresh.stop()
	}

	await runMail(database.url, rows, extra)
	await runMfa(database.url, rows, extra)
	await runOidc(database.url, rows, extra)
	await runWebhooks(database.url, rows, extra)
	await runProvider(database.url, rows, extra)
	await runOrganizations(database.url, rows, extra)
	await runConsole(database.url, rows, extra)
	await finish({ startedAt, machine, database, hashing, memory, rows, extra })
}

/** 8. Mail (test/bench/mail.ts): the recovery route with a slow SMTP server, known vs unknown addresses, the outbox. */
async function runMail(databaseUrl: string, rows: Row[], extra: Record<string, unknown>) {
	log('8. mail')
	const mail = await mailSection<Measured, Row>({
		databaseUrl,
		artifacts: ARTIFACTS,
		users: USERS,
		seconds: SECONDS,
		connections: CONNECTIONS,
		poolMax: POOL_MAX,
		mails: MAIL_COUNT,
		log,
		measure,
		row,
		startService: (env, name) => startService(databaseUrl, '1', { env, name }),
	})
	rows.push(...mail.rows)
	extra.mail = mail.figures
}

/** 9. Second factors (test/bench/mfa.ts): what POST /auth/mfa with TOTP adds to a login beyond the password hash. */
async function runMfa(databaseUrl: string, rows: Row[], extra: Record<string, unknown>) {
	log('9. second factors')
	const mfa = await mfaSection<Measured, Row>({
		databaseUrl,
		artifacts: ARTIFACTS,
		users: USERS,
		seconds: SECONDS,
		connections: LOGIN_CONNECTIONS,
		password: SEED_PASSWORD,
		dataEncryptionKey: DATA_ENCRYPTION_KEY,
		log,
		measure,
		row,
		startService: (env, name) => startService(databaseUrl, '1', { env, name }),
	})
	rows.push(...mfa.rows)
	extra.mfa = mfa.figures
}

/** 10. Identity providers (test/bench/oidc.ts): the whole provider sign-in per second, the provider's own time apart. */
async function runOidc(databaseUrl: string, rows: Row[], extra: Record<string, unknown>) {
	log('10. identity providers')
	const oidc = await oidcSection<Measured, Row>({
		seconds: SECONDS,
		log,
		measure,
		row,
		startService: (env, name) => startService(databaseUrl, '1', { env, name }),
	})
	rows.push(...oidc.rows)
	extra.oidc = oidc.figures
}

/** 11. Webhooks (test/bench/webhooks.ts): deliveries per second, commit → receipt, what the outbox adds to a sign-up. */
async function runWebhooks(databaseUrl: string, rows: Row[], extra: Record<string, unknown>) {
	log('11. webhooks')
	const webhooks = await webhookSection<Measured, Row>({
		databaseUrl,
		seconds: SECONDS,
		admin: ADMIN,
		log,
		measure,
		row,
		startService: (env, name) => startService(databaseUrl, '1', { env, name }),
	})
	rows.push(...webhooks.rows)
	extra.webhooks = webhooks.figures
}

/** 12. Latchkey as an OpenID Provider (test/bench/provider.ts): SSO with prompt=none, code exchange and refresh against RS256 signing, userinfo against /users/me. */
async function runProvider(databaseUrl: string, rows: Row[], extra: Record<string, unknown>) {
	log('12. OpenID Provider')
	const provider = await providerSection<Measured, Row>({
		databaseUrl,
		seconds: SECONDS,
		password: SEED_PASSWORD,
		cores: CORES,
		log,
		measure,
		row,
		binaryPath: BINARY,
		// The service's own URL is its issuer (PUBLIC_URL), so the port is chosen first.
		startService: async (env, name) => {
			const port = await freePort()
			return startService(databaseUrl, '1', { env: env(`http://127.0.0.1:${port}`), name, port })
		},
	})
	rows.push(...provider.rows)
	extra.provider = provider.figures
}

/** 13. Organizations (test/bench/organizations.ts): 100,000 of them, one of 100,000 members paging beside one of ten. */
async function runOrganizations(databaseUrl: string, rows: Row[], extra: Record<string, unknown>) {
	log('13. organizations')
	const organizations = await organizationSection<Measured, Row>({
		databaseUrl,
		seconds: SECONDS,
		admin: ADMIN,
		password: SEED_PASSWORD,
		log,
		measure,
		row,
		startService: (env, name) => startService(databaseUrl, '1', { env, name }),
	})
	rows.push(...organizations.rows)
	extra.organizations = organizations.figures
}

/** 14. The admin console (test/bench/console.ts): its users page in Chromium against the API's own time for the same list. */
async function runConsole(databaseUrl: string, _rows: Row[], extra: Record<string, unknown>) {
	log('14. admin console')
	extra.console = await consoleSection({
		admin: ADMIN,
		log,
		// startService sets PUBLIC_URL to the service's own address: the console's issuer, where the browser signs in.
		startService: (name) => startService(databaseUrl, '1', { name }),
	})
}

/** The binary's RSS idle and after one sign-up and login, on the embedded database and on PostgreSQL (test/bench/memory.ts). */
async function memoryAtRestOnBothDatabases(): Promise<MemoryFigures> {
	log('measuring memory at rest on the embedded database and on PostgreSQL')
	const figures = await measureMemory({ serverUrl: args.server, port: await freePort(), runs: 3, settleMs: 3000, speedSeconds: MEMORY_SPEED, artifacts: ARTIFACTS })
	log(`idle: embedded ${figures.pglite.idleMiB} MiB, PostgreSQL ${figures.postgres.idleMiB} MiB`)
	return figures
}

/** `--only memory`: memory at rest on both databases, no seeded database. */
async function memoryOnly(startedAt: Date, machine: Awaited<ReturnType<typeof machineNotes>>) {
	const memoryAtRest = await memoryAtRestOnBothDatabases()
	await finish({ startedAt, machine, rows: [], extra: { memoryAtRest } })
}

/** `--only <section>`: the database and that section, nothing else. */
/** `--only import`: a million-line file imported by the binary into a fresh database, then exported (test/bench/import.ts). */
async function importOnly(startedAt: Date, machine: Awaited<ReturnType<typeof machineNotes>>) {
	const figures = await measureImport({ binary: BINARY, server: args.server, artifacts: ARTIFACTS, users: USERS, log })
	await finish({ startedAt, machine, rows: [], extra: { import: figures } })
	console.log(describeImport(figures))
}

async function sectionOnly(section: Section, startedAt: Date, machine: Awaited<ReturnType<typeof machineNotes>>) {
	log(`preparing database ${args.database} with ${USERS} users`)
	const database = await prepareDatabase(args.server, args.database, USERS, args.reseed)
	log(database.seeded === 'created' ? `seeded in ${database.seedSeconds.toFixed(0)} s` : 'reused the existing seed')
	const rows: Row[] = []
	const extra: Record<string, unknown> = {}
	await { mail: runMail, mfa: runMfa, oidc: runOidc, webhooks: runWebhooks, provider: runProvider, organizations: runOrganizations, console: runConsole }[section](database.url, rows, extra)
	await finish({ startedAt, machine, database, rows, extra })
}

async function finish({
	startedAt,
	machine,
	database,
	hashing,
	memory,
	rows,
	extra,
}: {
	startedAt: Date
	machine: Awaited<ReturnType<typeof machineNotes>>
	/** None for `--only memory`, which makes its own databases. */
	database?: Awaited<ReturnType<typeof prepareDatabase>>
	hashing?: Awaited<ReturnType<typeof hashingLimit>>
	memory?: Record<string, number | boolean | number[]>
	rows: Row[]
	extra: Record<string, unknown>
}) {
	const report = {
		startedAt: startedAt.toISOString(),
		finishedAt: new Date().toISOString(),
		options: { users: USERS, seconds: SECONDS, connections: CONNECTIONS, loginConnections: LOGIN_CONNECTIONS, memoryRequests: MEMORY_REQUESTS, poolMax: POOL_MAX, logLevel: args['log-level'], mailCount: MAIL_COUNT, only: args.only ?? null },
		machine: { ...machine, loadAverageAtEnd: os.loadavg().map((value) => Number(value.toFixed(2))) },
		database: database && { name: args.database, seeded: database.seeded, seedSeconds: database.seedSeconds },
		hashing,
		memory,
		rows,
		extra,
	}
	const out = join(ARTIFACTS, `bench-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`)
	await Bun.write(out, `${JSON.stringify(report, null, '\t')}\n`)
	printTable(report)
	console.log(
		`machine load average (1/5/15 min): ${report.machine.loadAverageAtStart.join(' ')} at start, ${report.machine.loadAverageAtEnd.join(' ')} at end` +
			` (above ${CORES} means other work shared the cores)`,
	)
	console.log(`\nJSON: ${out}`)
}

function printTable(report: { extra: Record<string, unknown>; options: { users: number; seconds: number; connections: number }; machine: Awaited<ReturnType<typeof machineNotes>>; hashing?: Awaited<ReturnType<typeof hashingLimit>>; memory?: Record<string, number | boolean | number[]>; rows: Row[] }) {
	const { options, machine, hashing, memory, rows } = report
	const f = (value: number | null, digits = 0) => (value === null || Number.isNaN(value) ? '—' : value.toFixed(digits))
	const header = ['scenario', 'req/s', 'p50 ms', 'p99 ms', 'peak RSS MiB', 'limit', 'limit req/s', '% of limit', 'goal', 'met', 'svc cores', 'machine busy', 'non-2xx']
	const lines = rows.map((r) => [
		r.scenario,
		f(r.reqPerSecond),
		f(r.p50Ms, 1),
		f(r.p99Ms, 1),
		f(r.peakRssMiB),
		r.limitName,
		f(r.limitPerSecond),
		r.ratio === null ? '—' : `${(r.ratio * 100).toFixed(0)}%`,
		r.goal || '—',
		r.met === null ? '' : r.met ? 'yes' : 'NO',
		f(r.serviceCores, 2),
		`${(r.machineBusy * 100).toFixed(0)}%`,
		String(r.non2xx + r.errors),
	])
	const widths = header.map((h, i) => Math.max(h.length, ...lines.map((line) => (line[i] as string).length)))
	const format = (cells: string[]) => `| ${cells.map((cell, i) => cell.padEnd(widths[i] as number)).join(' | ')} |`
	console.log(
		`\nLatchkey bench — ${options.users.toLocaleString('en')} users, ${options.seconds} s per scenario, ${options.connections} connections; ` +
			`${machine.cores} × ${machine.cpu}, ${machine.memoryGiB} GiB, ${machine.postgres}, Bun ${machine.bun}; ` +
			`service, PostgreSQL and autocannon on the same machine`,
	)
	// `--only memory` has no scenario rows, only its own lines below.
	if (lines.length) {
		console.log(format(header))
		console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`)
		for (const line of lines) console.log(format(line))
	}
	if (hashing) console.log(
		`\nhashing: one Bun.password.verify (argon2id m=${HASH.memoryCost} KiB t=${HASH.timeCost}) = ${hashing.verifyMs.toFixed(1)} ms → ` +
			`${hashing.limitPerSecond.toFixed(1)}/s on ${hashing.cores} cores (measured on all cores at once: ${hashing.parallelPerSecond.toFixed(1)}/s)`,
	)
	if (memory) console.log(
		`memory: idle ${f(memory.idleMiB as number)} MiB · after ${memory.firstRequests} requests ${f(memory.afterFirstMiB as number)} MiB · ` +
			`after each of 4 rounds of ${memory.roundRequests}: ${(memory.afterRoundsMiB as number[]).join(' / ')} MiB · ` +
			`rounds 3–4 vs 1–2: ${f(memory.growthMiB as number, 1)} MiB (${memory.leakFree ? 'no leak' : 'GROWING'})`,
	)
	if (report.extra.startupMs !== undefined) console.log(`startup: spawn → readiness 200 in ${report.extra.startupMs} ms (PostgreSQL, schema up to date; polled every 50 ms)`)
	const embedded = report.extra.embeddedStartup as StartupFigures | undefined
	if (embedded) console.log(
		`startup on the embedded database (median of ${embedded.runs}; polled every 10 ms): binary first start on an empty DATA_DIR ` +
			`${embedded.binaryFirstMs} ms, restart ${embedded.binaryRestartMs} ms · bun run start: first ${embedded.sourceFirstMs} ms, restart ${embedded.sourceRestartMs} ms`,
	)
	const atRest = report.extra.memoryAtRest as MemoryFigures | undefined
	if (atRest) for (const line of describeMemory(atRest)) console.log(line)
	const plan = report.extra.searchPlan as string[] | undefined
	if (plan) console.log(`q-filtered page plan: ${plan[0]?.trim()} … ${plan.find((line) => /Filter|Scan/.test(line))?.trim()} · ${plan.at(-1)?.trim()}`)
	const mail = report.extra.mail as MailFigures | undefined
	if (mail) for (const line of describeMail(mail)) console.log(line)
	const mfa = report.extra.mfa as MfaFigures | undefined
	if (mfa) for (const line of describeMfa(mfa)) console.log(line)
	const oidc = report.extra.oidc as OidcFigures | undefined
	if (oidc) for (const line of describeOidc(oidc)) console.log(line)
	const webhooks = report.extra.webhooks as WebhookFigures | undefined
	if (webhooks) for (const line of describeWebhooks(webhooks)) console.log(line)
	const provider = report.extra.provider as ProviderFigures | undefined
	if (provider) for (const line of describeProvider(provider)) console.log(line)
	const organizations = report.extra.organizations as OrganizationFigures | undefined
	if (organizations) for (const line of describeOrganizations(organizations)) console.log(line)
	const consoleFigures = report.extra.console as ConsoleFigures | undefined
	if (consoleFigures) for (const line of describeConsole(consoleFigures)) console.log(line)
}

await main()
