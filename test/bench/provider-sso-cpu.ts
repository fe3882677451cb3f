/**
 * The CPU one single sign-on costs: the bench's SSO request (test/bench/provider.ts, `provider-sso`: a signed-in
 * browser's `prompt=none` authorization, one GET answered by a 303 with a code) and nothing else, in rounds of a
 * fixed number of sign-ins, with the CPU time the service and its PostgreSQL backends spent per sign-in (from
 * /proc): a figure that other work on the machine moves far less than it moves the rate and the tail.
 *
 *   bun test/bench/provider-sso-cpu.ts [--binary dist/latchkey | --source] [--database latchkey_bench_sso]
 *       [--users 1000000] [--requests 4000] [--rounds 3] [--concurrency 16 | --rate 500] [--warmup 1000] [--statements] [--profile DIR]
 *
 * The service's CPU is given whole and for its main thread alone (the JavaScript thread, where the requests queue);
 * the rest is the JIT's compiler threads, the collector's helpers and the allocator's. The JIT keeps compiling for
 * several thousand sign-ins after the start: `--warmup` (sign-ins after every browser's first) sets how many come
 * before the first round.
 *
 * Each round also reads the service's own request log (its `durationMs`, from the request's arrival to its answer):
 * the latency the service accounts for, beside the one the load generator sees, which also holds the generator's own
 * pauses and the wait for the service's event loop to take the request.
 *
 * `--concurrency` keeps that many sign-ins in flight (a closed loop: the machine saturated, each latency mostly the
 * wait behind the others). `--rate` sends them at a steady pace instead, whatever the answers (an open loop, as
 * browsers arrive), each latency counted from the moment its request was due, so a service that falls behind is
 * charged for the wait it causes.
 *
 * `--statements` logs every statement of the service's connections (`log_statement = all` on the database while it
 * runs, PostgreSQL's own log read back; root only) and prints how many each sign-in made, by name. `--profile`
 * runs the service from source under Bun's CPU profiler (`.cpuprofile` in DIR when it stops).
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdirSync, openSync, readFileSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import postgres from 'postgres'
import { freePort } from '../support/ports'
import { prepareDatabase } from './database'
import { cpuSeconds, threadCpuSeconds } from './proc'
import { benchServiceEnv } from './service-env'

const ROOT = join(import.meta.dir, '..', '..')
const { values: args } = parseArgs({
	args: Bun.argv.slice(2),
	options: {
		binary: { type: 'string', default: join(ROOT, 'dist', 'latchkey') },
		source: { type: 'boolean', default: false },
		server: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
		database: { type: 'string', default: 'latchkey_bench_sso' },
		users: { type: 'string', default: '1000000' },
		requests: { type: 'string', default: '4000' },
		rounds: { type: 'string', default: '3' },
		concurrency: { type: 'string', default: '16' },
		rate: { type: 'string' },
		warmup: { type: 'string', default: '1000' },
		statements: { type: 'boolean', default: false },
		profile: { type: 'string' },
		'postgres-log': { type: 'string', default: '/var/log/postgresql/postgresql-15-main.log' },
	},
})
const BROWSERS = 256
const CLIENT_ID = 'latchkey-bench-provider'
const REDIRECT_URI = 'https://app.bench.example/callback'
const log = (message: string) => console.error(`[sso-cpu ${new Date().toISOString().slice(11, 19)}] ${message}`)
const sha256Hex = (value: string) => createHash('sha256').update(value).digest('hex')
const opaque = () => randomBytes(32).toString('base64url')

const database = await prepareDatabase(args.server, args.database, Number(args.users), false)
const sql = postgres(database.url, { max: 1, onnotice: () => {} })
const admin = postgres(args.server, { max: 1, onnotice: () => {} })
if (args.statements) await admin.unsafe(`alter database "${args.database}" set log_statement = 'all'`)

const artifacts = join(ROOT, 'test-artifacts')
mkdirSync(artifacts, { recursive: true })
const port = await freePort()
const url = `http://127.0.0.1:${port}`
const profiled = args.profile ? resolve(args.profile) : undefined
if (profiled) mkdirSync(profiled, { recursive: true })
const command = profiled
	? [process.execPath, '--cpu-prof', `--cpu-prof-dir=${profiled}`, join(ROOT, 'src', 'index.ts')]
	: args.source
		? [process.execPath, join(ROOT, 'src', 'index.ts')]
		: [resolve(args.binary)]
// As the bench starts the service (run.ts): limits off, the request log written (info) and not kept.
const child = Bun.spawn(command, {
	cwd: artifacts,
	env: { ...benchServiceEnv({ home: artifacts, port, databaseUrl: database.url, logLevel: 'info' }), PUBLIC_URL: url },
	stdout: openSync(join(artifacts, 'bench-service-sso-cpu.requests.log'), 'w'),
	stderr: openSync(join(artifacts, 'bench-service-sso-cpu.log'), 'w'),
})
try {
	for (;;) {
		if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode}`)
		if (await fetch(`${url}/api/health/ready`).then((r) => r.ok, () => false)) break
		await Bun.sleep(50)
	}

	// The client and the browsers, straight in the database (as provider.ts writes them).
	await sql`delete from oauth_clients where client_id = ${CLIENT_ID}`
	const clientRowId = Bun.randomUUIDv7()
	await sql`
		insert into oauth_clients (id, client_id, name, type, redirect_uris, grant_types, scopes, token_endpoint_auth_method, first_party)
		values (${clientRowId}, ${CLIENT_ID}, 'Bench app', 'confidential', ${sql.array([REDIRECT_URI])},
			${sql.array(['authorization_code', 'refresh_token'])}, ${sql.array(['openid', 'profile', 'email', 'offline_access'])}, 'client_secret_basic', true)`
	await sql`insert into oauth_client_secrets (id, client_id, secret_hash) values (${Bun.randomUUIDv7()}, ${clientRowId}, ${sha256Hex(opaque())})`
	const accounts = await sql<{ id: string }[]>`select id from users where email like 'user%@example.test' and status = 'active' order by created_at limit ${BROWSERS}`
	const cookies: Array<Map<string, string>> = []
	for (const account of accounts) {
		const token = opaque()
		await sql`insert into sessions (id, user_id, expires_at, browser_token_hash) values (${Bun.randomUUIDv7()}, ${account.id}, now() + interval '1 day', ${sha256Hex(token)})`
		cookies.push(new Map([['__Host-latchkey-session', token]]))
	}
	const challenge = createHash('sha256').update(opaque()).digest('base64url')
	let turn = 0
	const sso = async () => {
		const jar = cookies[turn++ % cookies.length] as Map<string, string>
		const state = `s${turn}`
		const query = new URLSearchParams({ client_id: CLIENT_ID, redirect_uri: REDIRECT_URI, response_type: 'code', scope: 'openid email profile', code_challenge: challenge, code_challenge_method: 'S256', state, nonce: `n-${state}`, prompt: 'none' })
		const response = await fetch(`${url}/oauth2/authorization?${query}`, { headers: { cookie: [...jar].map(([name, value]) => `${name}=${value}`).join('; ') }, redirect: 'manual' })
		for (const line of response.headers.getSetCookie()) {
			const [pair = ''] = line.split(';')
			const equals = pair.indexOf('=')
			if (equals > 0) jar.set(pair.slice(0, equals), pair.slice(equals + 1))
		}
		await response.arrayBuffer()
		const location = response.headers.get('location') ?? ''
		if (response.status !== 303 || !location.startsWith(`${REDIRECT_URI}?code=`) || !location.includes(`state=${state}&`)) throw new Error(`authorization ${response.status} ${location.slice(0, 120)}`)
	}
	const run = async (count: number, concurrency: number) => {
		let left = count
		const latencies: number[] = []
		await Promise.all(
			Array.from({ length: concurrency }, async () => {
				while (left-- > 0) {
					const at = performance.now()
					await sso()
					latencies.push(performance.now() - at)
				}
			}),
		)
		return latencies.sort((a, b) => a - b)
	}
	/** `count` sign-ins at `perSecond`, each sent when due whether or not the earlier ones were answered. */
	const paced = async (count: number, perSecond: number) => {
		const latencies: number[] = []
		const inFlight: Promise<void>[] = []
		const start = performance.now()
		for (let i = 0; i < count; i++) {
			const due = start + (i * 1000) / perSecond
			const wait = due - performance.now()
			if (wait > 1) await Bun.sleep(wait)
			inFlight.push(sso().then(() => void latencies.push(performance.now() - due)))
		}
		await Promise.all(inFlight)
		return latencies.sort((a, b) => a - b)
	}
	log(`warming up: every browser signs in once, then ${args.warmup} more`)
	await run(BROWSERS, 16)
	await run(Number(args.warmup), 16)

	const backends = async () =>
		(await admin`select pid from pg_stat_activity where datname = ${args.database} and backend_type = 'client backend' and pid <> pg_backend_pid()`).map((row) => row.pid as number)
	const pidCpu = (pid: number) => cpuSeconds(pid)
	const requests = Number(args.requests)
	const concurrency = Number(args.concurrency)
	const rate = args.rate === undefined ? undefined : Number(args.rate)
	if (rate !== undefined && !(rate > 0)) throw new Error('--rate takes sign-ins per second, more than 0')
	const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
	for (let round = 1; round <= Number(args.rounds); round++) {
		const pids = await backends()
		const requestLogStart = statSync(join(artifacts, 'bench-service-sso-cpu.requests.log')).size
		const logStart = args.statements ? statSync(args['postgres-log']).size : 0
		const service0 = cpuSeconds(child.pid)
		const threads0 = threadCpuSeconds(child.pid)
		const postgres0 = pids.map(pidCpu)
		const load0 = loadavg()
		const started = performance.now()
		const latencies = rate === undefined ? await run(requests, concurrency) : await paced(requests, rate)
		const seconds = (performance.now() - started) / 1000
		const serviceUs = ((cpuSeconds(child.pid) - service0) * 1e6) / requests
		const mainUs = ((threadCpuSeconds(child.pid).main - threads0.main) * 1e6) / requests
		const postgresUs = (pids.reduce((sum, pid, i) => sum + pidCpu(pid) - (postgres0[i] ?? 0), 0) * 1e6) / requests
		const at = (p: number) => (latencies[Math.min(latencies.length - 1, Math.floor((latencies.length * p) / 100))] ?? 0).toFixed(1)
		await Bun.sleep(100) // the last lines of the round, written after their answers
		const served = (await Bun.file(join(artifacts, 'bench-service-sso-cpu.requests.log')).slice(requestLogStart).text())
			.split('\n')
			.flatMap((line) => {
				try {
					const entry = JSON.parse(line) as { route?: string; durationMs?: number }
					return entry.route === '/oauth2/authorization' && typeof entry.durationMs === 'number' ? [entry.durationMs] : []
				} catch {
					return []
				}
			})
			.sort((a, b) => a - b)
		const servedAt = (p: number) => (served[Math.min(served.length - 1, Math.floor((served.length * p) / 100))] ?? 0).toFixed(1)
		console.log(
			`round ${round}: ${requests} sign-ins, ${rate === undefined ? `${concurrency} at once` : `sent at ${rate}/s`}: ${(requests / seconds).toFixed(0)}/s, p50 ${at(50)} ms, p99 ${at(99)} ms (in the service: p50 ${servedAt(50)}, p99 ${servedAt(99)} ms of ${served.length}); CPU per sign-in: service ${serviceUs.toFixed(0)} µs (main thread ${mainUs.toFixed(0)} µs), PostgreSQL ${postgresUs.toFixed(0)} µs; load average ${load0} → ${loadavg()}`,
		)
		if (args.statements) {
			await Bun.sleep(200)
			const file = Bun.file(args['postgres-log'])
			const text = await file.slice(logStart).text()
			const pidSet = new Set(pids.map(String))
			const names = new Map<string, number>()
			let total = 0
			for (const line of text.split('\n')) {
				const match = /\[(\d+)\] \S*@(\S+) LOG:\s+(?:execute [^:]*:|statement:) (.{0,90})/.exec(line)
				if (!match || match[2] !== args.database || !pidSet.has(match[1] as string)) continue
				const name = match[3] as string
				names.set(name, (names.get(name) ?? 0) + 1)
				total++
			}
			console.log(`  statements per sign-in: ${(total / requests).toFixed(2)}`)
			for (const [name, n] of [...names].sort((a, b) => b[1] - a[1])) console.log(`    ${(n / requests).toFixed(2)}  ${name}`)
		}
	}
} finally {
	if (args.statements) await admin.unsafe(`alter database "${args.database}" reset log_statement`).catch(() => {})
	child.kill('SIGTERM')
	await child.exited
	await sql.end()
	await admin.end()
}
