/**
 * The compiled binary's resident memory on each database, side by side: idle after start, and after one
 * sign-up and login, on the embedded database (a fresh DATA_DIR) and on PostgreSQL (a fresh database).
 * Each figure is the median of `runs` fresh processes, each read `settle` ms after the step (the
 * collector and PGlite's first checkpoint run meanwhile). With `speed` seconds, also the login and read
 * rates on the embedded database (autocannon, as run.ts does on PostgreSQL), to hold PGlite settings
 * against. Part of `bun run bench`; alone (after `bun run build`):
 *
 *   bun test/bench/memory.ts [--runs 3] [--settle 3000] [--speed 0] [--server postgres://postgres@127.0.0.1:5432/postgres] [--binary dist/latchkey]
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import postgres from 'postgres'
import { rssMiB } from './proc'
import { runLoadGenerator, type BenchSession, type LoadResult, type Workload } from './workload'

const ROOT = join(import.meta.dir, '..', '..')
/** `--binary` measures another build (an earlier one kept aside, to compare). */
let binary = join(ROOT, 'dist', 'latchkey')
const PASSWORD = 'bench memory password 2026'

export interface MemoryFigures {
	runs: number
	settleMs: number
	/** MiB, medians of `runs`. */
	pglite: { idleMiB: number; afterLoginMiB: number }
	postgres: { idleMiB: number; afterLoginMiB: number }
	/** Login and read rates on the embedded database, when asked for. */
	pgliteSpeed?: { seconds: number; login: LoadResult; read: LoadResult }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN

interface Started {
	child: Bun.Subprocess
	url: string
}

/** The binary as an operator starts it: the few settings it needs, nothing from the repository's .env. */
async function start(env: Record<string, string>, port: number, home: string): Promise<Started> {
	const child = Bun.spawn([binary], {
		cwd: home,
		env: {
			PATH: process.env.PATH ?? '/usr/bin:/bin',
			HOME: home,
			HOST: '127.0.0.1',
			PORT: String(port),
			LOG_LEVEL: 'warn',
			// Limits off: the speed runs sign up and log in faster than a person would.
			RATE_LIMIT_MAX: '0',
			AUTH_RATE_LIMIT_MAX: '0',
			LOCKOUT_THRESHOLD: '0',
			...env,
		},
		stdout: 'ignore',
		stderr: 'ignore',
	})
	const url = `http://127.0.0.1:${port}`
	const started = performance.now()
	for (;;) {
		if (child.exitCode !== null) throw new Error(`dist/latchkey exited with ${child.exitCode} before it was ready`)
		if (await fetch(`${url}/api/health/ready`).then((response) => response.ok, () => false)) return { child, url }
		if (performance.now() - started > 120_000) {
			child.kill('SIGKILL')
			throw new Error('dist/latchkey was not ready within 120 s')
		}
		await Bun.sleep(20)
	}
}

async function stop({ child }: Started) {
	child.kill('SIGTERM')
	const exited = await Promise.race([child.exited, Bun.sleep(15_000).then(() => undefined)])
	if (exited === undefined) child.kill('SIGKILL')
}

async function post(url: string, path: string, body: unknown): Promise<Response> {
	const response = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
	if (!response.ok) throw new Error(`POST ${path}: ${response.status} ${await response.text()}`)
	return response
}

/** One account signed up, logged in, and reading itself: what a first user does. */
async function signUpAndLogIn(url: string, email: string): Promise<BenchSession> {
	await post(url, '/api/users', { email, password: PASSWORD })
	const { data } = (await (await post(url, '/api/auth/login', { email, password: PASSWORD })).json()) as {
		data: { accessToken: string; refreshToken: string; user: { id: string } }
	}
	const me = await fetch(`${url}/api/users/me`, { headers: { authorization: `Bearer ${data.accessToken}` } })
	if (!me.ok) throw new Error(`GET /api/users/me: ${me.status}`)
	return { userId: data.user.id, accessToken: data.accessToken, refreshToken: data.refreshToken }
}

/** RSS idle after start and after one sign-up and login, in one fresh process. */
async function oneRun(env: Record<string, string>, port: number, home: string, settleMs: number) {
	const service = await start(env, port, home)
	try {
		await Bun.sleep(settleMs)
		const idle = rssMiB(service.child.pid)
		await signUpAndLogIn(service.url, 'first@example.test')
		await Bun.sleep(settleMs)
		return { idle, afterLogin: rssMiB(service.child.pid) }
	} finally {
		await stop(service)
	}
}

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`

/** A database of its own, created empty (the binary migrates it) and dropped afterwards. */
async function withFreshDatabase<T>(serverUrl: string, use: (url: string) => Promise<T>): Promise<T> {
	const name = `latchkey_bench_memory_${process.pid}`
	const admin = postgres(serverUrl, { max: 1, onnotice: () => {} })
	try {
		await admin.unsafe(`drop database if exists ${quoteIdent(name)} with (force)`)
		await admin.unsafe(`create database ${quoteIdent(name)}`)
		const url = new URL(serverUrl)
		url.pathname = `/${name}`
		return await use(url.toString())
	} finally {
		await admin.unsafe(`drop database if exists ${quoteIdent(name)} with (force)`).catch(() => {})
		await admin.end()
	}
}

/** A fresh folder for one start: its HOME, and DATA_DIR in it (apart, so that nothing written to HOME makes DATA_DIR look used). */
function withFreshFolder<T>(use: (folder: string) => Promise<T>): Promise<T> {
	const folder = mkdtempSync(join(tmpdir(), 'latchkey-bench-memory-'))
	return use(folder).finally(() => rmSync(folder, { recursive: true, force: true }))
}

/**
 * Login and read rates on the embedded database: 49 accounts signed up (the login workload's
 * `user<n>@example.test`), then `seconds` of logins and of reads of one's own account.
 */
async function pgliteSpeed(port: number, seconds: number, artifacts: string) {
	return withFreshFolder(async (folder) => {
		const service = await start({ DATA_DIR: join(folder, 'data') }, port, folder)
		try {
			const sessions: BenchSession[] = []
			for (let n = 0; n < 49; n++) sessions.push(await signUpAndLogIn(service.url, `user${n}@example.test`))
			const run = (workload: Workload, connections: number) =>
				runLoadGenerator([process.execPath, join(import.meta.dir, 'load.ts')], { url: service.url, connections, duration: seconds, workload }, artifacts)
			const login = await run({ kind: 'login', users: 49, password: PASSWORD }, 16)
			const read = await run({ kind: 'read', sessions }, 50)
			return { seconds, login, read }
		} finally {
			await stop(service)
		}
	})
}

export async function measureMemory(options: { serverUrl: string; port: number; runs: number; settleMs: number; speedSeconds?: number; artifacts: string }): Promise<MemoryFigures> {
	const { serverUrl, port, runs, settleMs, artifacts } = options
	mkdirSync(artifacts, { recursive: true })
	const embedded: { idle: number; afterLogin: number }[] = []
	const server: { idle: number; afterLogin: number }[] = []
	// Alternated, so that a busy moment of a shared machine does not fall on one database only.
	for (let run = 0; run < runs; run++) {
		embedded.push(await withFreshFolder((folder) => oneRun({ DATA_DIR: join(folder, 'data') }, port, folder, settleMs)))
		server.push(await withFreshFolder((home) => withFreshDatabase(serverUrl, (url) => oneRun({ DATABASE_URL: url }, port, home, settleMs))))
	}
	const summary = (values: { idle: number; afterLogin: number }[]) => ({
		idleMiB: Math.round(median(values.map((value) => value.idle))),
		afterLoginMiB: Math.round(median(values.map((value) => value.afterLogin))),
	})
	const figures: MemoryFigures = { runs, settleMs, pglite: summary(embedded), postgres: summary(server) }
	if (options.speedSeconds) figures.pgliteSpeed = await pgliteSpeed(port, options.speedSeconds, artifacts)
	return figures
}

export function describeMemory(figures: MemoryFigures): string[] {
	const lines = [
		`memory of dist/latchkey (median of ${figures.runs} fresh starts, read ${figures.settleMs} ms after each step): ` +
			`embedded (PGlite) idle ${figures.pglite.idleMiB} MiB, after one sign-up and login ${figures.pglite.afterLoginMiB} MiB · ` +
			`PostgreSQL idle ${figures.postgres.idleMiB} MiB, after one sign-up and login ${figures.postgres.afterLoginMiB} MiB`,
	]
	const speed = figures.pgliteSpeed
	if (speed)
		lines.push(
			`embedded (PGlite), ${speed.seconds} s each: login ${speed.login.okPerSecond.toFixed(1)}/s (p50 ${speed.login.p50} ms, p99 ${speed.login.p99} ms, non-2xx ${speed.login.non2xx}) · ` +
				`read GET /users/{id} ${speed.read.okPerSecond.toFixed(0)}/s (p50 ${speed.read.p50} ms, p99 ${speed.read.p99} ms, non-2xx ${speed.read.non2xx})`,
		)
	return lines
}

if (import.meta.main) {
	const { values } = parseArgs({
		args: Bun.argv.slice(2),
		options: {
			runs: { type: 'string', default: '3' },
			settle: { type: 'string', default: '3000' },
			speed: { type: 'string', default: '0' },
			port: { type: 'string', default: '39118' },
			server: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
			binary: { type: 'string' },
		},
	})
	if (values.binary) binary = resolve(values.binary)
	const figures = await measureMemory({
		serverUrl: values.server,
		port: Number(values.port),
		runs: Number(values.runs),
		settleMs: Number(values.settle),
		speedSeconds: Number(values.speed),
		artifacts: join(ROOT, 'test-artifacts'),
	})
	for (const line of describeMemory(figures)) console.log(line)
	console.log(JSON.stringify(figures))
}
