/**
 * Can login timing tell an account whose hash predates a change of
 * PASSWORD_HASH_* from an unknown email? (issue 11, point 10)
 *
 * For each direction (settings raised, settings lowered) this creates a fresh
 * PostgreSQL database, starts the service with the OLD settings and signs up
 * accounts through the API, restarts it with the NEW settings and signs up a
 * few more, then sends wrong-password logins one at a time, in a shuffled
 * order, for three groups: accounts on the old settings, accounts on the new
 * ones, and unknown emails. It reports each group's median and p90 and how
 * separable the old-settings group is from the unknown emails:
 *
 *   AUC = P(an old-settings login takes longer than an unknown-email login)
 *         (the Mann-Whitney U statistic ÷ n₁n₂; ties count ½)
 *
 * 0.5 means time tells nothing; 1.0 (or 0.0) means every pair is told apart.
 * "best split" is the accuracy of the best single time threshold between the
 * two groups (0.5 = a coin toss).
 *
 *   bun test/bench/hash-settings-timing.ts [--samples 200] [--warmup 10] [--accounts 20]
 *       [--directions raised,lowered,imported-bcrypt,imported-keycloak] [--source <checkout>] [--binary <compiled latchkey>]
 *       [--server postgres://postgres@127.0.0.1:5432/postgres] [--cpus 0]
 *
 * imported-bcrypt and imported-keycloak keep the default settings and give the "old" accounts hashes
 * as an import from GoTrue/Auth0 (bcrypt, cost 10) or Keycloak (PBKDF2-SHA256, 27,500 iterations)
 * writes them (issue 27): can time tell an imported account from an unknown email?
 *
 * --source runs `bun <checkout>/src/index.ts` (default: this checkout); --binary runs a compiled
 * binary instead. --cpus pins the service to those CPUs (`taskset -c`, Linux), e.g. `0` for a
 * one-core host, where the hashing pool has a single thread. The service runs with production settings (one process, NODE_ENV=production),
 * rate limits and lockout off (they would refuse the probes). Run it on a quiet machine: every
 * other process competing for the cores adds noise to both groups alike.
 */
import { pbkdf2Sync, randomBytes } from 'node:crypto'
import { mkdtempSync, openSync, rmSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import bcrypt from 'bcryptjs'
import postgres from 'postgres'
import { TEST_OAUTH_SIGNING_KEY } from '../support/oauth-key'
import { freePort } from '../support/ports'

const ROOT = join(import.meta.dir, '..', '..')

const { values: args } = parseArgs({
	args: Bun.argv.slice(2),
	options: {
		samples: { type: 'string', default: '200' },
		warmup: { type: 'string', default: '10' },
		accounts: { type: 'string', default: '20' },
		directions: { type: 'string', default: 'raised,lowered' },
		source: { type: 'string', default: ROOT },
		binary: { type: 'string' },
		server: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
		cpus: { type: 'string' },
	},
})
const whole = (name: 'samples' | 'warmup' | 'accounts', min: number) => {
	const value = Number(args[name])
	if (!Number.isInteger(value) || value < min) throw new Error(`--${name} must be a whole number ≥ ${min}`)
	return value
}
const SAMPLES = whole('samples', 10)
const WARMUP = whole('warmup', 0)
const ACCOUNTS = whole('accounts', 1)

interface HashSettings {
	memoryKib: number
	timeCost: number
}
const OWASP_MINIMUM: HashSettings = { memoryKib: 19456, timeCost: 2 }
const DEFAULTS: HashSettings = { memoryKib: 65536, timeCost: 2 } // src/config/env.ts
/** What the old accounts' hashes are replaced with, as an import from another service writes them (hash-schemes.ts). */
const IMPORTED: Record<string, (password: string) => string> = {
	// GoTrue / Auth0: bcrypt at cost 10.
	bcrypt: (password) => bcrypt.hashSync(password, 10),
	// A Keycloak realm export's credential: pbkdf2-sha256, 27,500 iterations, 512-bit key.
	keycloak: (password) => {
		const salt = randomBytes(16)
		return `$pbkdf2-sha256$i=27500$${salt.toString('base64')}$${pbkdf2Sync(password, salt, 27_500, 64, 'sha256').toString('base64')}`
	},
}
const DIRECTIONS: Record<string, { from: HashSettings; to: HashSettings; imported?: (password: string) => string }> = {
	raised: { from: OWASP_MINIMUM, to: DEFAULTS },
	lowered: { from: DEFAULTS, to: OWASP_MINIMUM },
	// Not settings changes: the "old" accounts hold imported hashes (issue 27), the settings stay the defaults.
	'imported-bcrypt': { from: DEFAULTS, to: DEFAULTS, imported: IMPORTED.bcrypt },
	'imported-keycloak': { from: DEFAULTS, to: DEFAULTS, imported: IMPORTED.keycloak },
}
const PASSWORD = 'timing probe passphrase 2026'
const WRONG = 'not the passphrase at all'
const JWT_SECRET = 'latchkey-timing-signing-secret-of-more-than-32-bytes'

const log = (message: string) => console.error(`[timing ${new Date().toISOString().slice(11, 19)}] ${message}`)
const label = (s: HashSettings) => `m=${s.memoryKib},t=${s.timeCost}`

// ── the service ──────────────────────────────────────────────────────────

async function startService(databaseUrl: string, settings: HashSettings, workDir: string, logName: string) {
	const port = await freePort()
	const service = args.binary ? [args.binary] : [process.execPath, join(args.source, 'src', 'index.ts')]
	const command = args.cpus ? ['taskset', '-c', args.cpus, ...service] : service
	const child = Bun.spawn(command, {
		// Not a checkout: Bun would read a developer's .env there.
		cwd: workDir,
		env: {
			PATH: process.env.PATH ?? '/usr/bin:/bin',
			HOME: workDir,
			NODE_ENV: 'production',
			JWT_SECRET,
			OAUTH_SIGNING_KEY: TEST_OAUTH_SIGNING_KEY,
			PUBLIC_URL: `http://127.0.0.1:${port}`,
			DATA_ENCRYPTION_KEY: Buffer.alloc(32, 'latchkey-bench').toString('base64'),
			DATABASE_URL: databaseUrl,
			HOST: '127.0.0.1',
			PORT: String(port),
			WORKERS: '1',
			RATE_LIMIT_MAX: '0',
			AUTH_RATE_LIMIT_MAX: '0',
			LOCKOUT_THRESHOLD: '0',
			LOG_LEVEL: 'warn',
			PASSWORD_HASH_MEMORY_KIB: String(settings.memoryKib),
			PASSWORD_HASH_TIME_COST: String(settings.timeCost),
		},
		stdout: 'ignore',
		stderr: openSync(join(workDir, logName), 'w'),
	})
	const url = `http://127.0.0.1:${port}`
	const deadline = Date.now() + 120_000
	for (;;) {
		if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode}; see ${join(workDir, logName)}`)
		if (await fetch(`${url}/api/health/ready`).then((res) => res.ok, () => false)) break
		if (Date.now() > deadline) throw new Error('the service was not ready within 120 s')
		await Bun.sleep(50)
	}
	return {
		url,
		async stop() {
			child.kill('SIGTERM')
			if ((await Promise.race([child.exited, Bun.sleep(15_000).then(() => 'timeout')])) === 'timeout') child.kill('SIGKILL')
		},
	}
}

const post = (url: string, path: string, body: unknown) =>
	fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })

async function signUp(url: string, email: string) {
	const res = await post(url, '/api/users', { email, password: PASSWORD, name: 'Timing Probe' })
	if (res.status !== 201) throw new Error(`sign-up answered ${res.status}: ${await res.text()}`)
}

/** One wrong-password login; its round-trip time in ms. Every one must be the same 401. */
async function probe(url: string, email: string): Promise<number> {
	const started = performance.now()
	const res = await post(url, '/api/auth/login', { email, password: WRONG })
	await res.arrayBuffer()
	const elapsed = performance.now() - started
	if (res.status !== 401) throw new Error(`a wrong password answered ${res.status}`)
	return elapsed
}

// ── statistics ───────────────────────────────────────────────────────────

const quantile = (sorted: number[], q: number) => {
	const at = (sorted.length - 1) * q
	const low = Math.floor(at)
	return (sorted[low] ?? NaN) + ((sorted[Math.ceil(at)] ?? NaN) - (sorted[low] ?? NaN)) * (at - low)
}

/** P(a > b) over all pairs, ties ½: the Mann-Whitney U of a against b, divided by n₁n₂. */
function auc(a: number[], b: number[]): number {
	let wins = 0
	for (const x of a) for (const y of b) wins += x > y ? 1 : x === y ? 0.5 : 0
	return wins / (a.length * b.length)
}

/** Accuracy of the best threshold classifier "slower than t ⇒ group a" (or its mirror). */
function bestSplit(a: number[], b: number[]): number {
	const all = [...a.map((v) => ({ v, a: 1 })), ...b.map((v) => ({ v, a: 0 }))].sort((x, y) => x.v - y.v)
	// Balanced accuracy, so that unequal group sizes do not flatter a threshold.
	let aBelow = 0
	let bBelow = 0
	let best = 0.5
	for (const point of all) {
		if (point.a) aBelow++
		else bBelow++
		const accuracy = (bBelow / b.length + (a.length - aBelow) / a.length) / 2
		best = Math.max(best, accuracy, 1 - accuracy)
	}
	return best
}

const summary = (times: number[]) => {
	const sorted = [...times].sort((x, y) => x - y)
	return { n: sorted.length, median: quantile(sorted, 0.5), p90: quantile(sorted, 0.9) }
}

// ── one direction ────────────────────────────────────────────────────────

async function measure(direction: string) {
	const spec = DIRECTIONS[direction]
	if (!spec) throw new Error(`unknown direction ${direction}; use ${Object.keys(DIRECTIONS).join(', ')}`)
	const name = `latchkey_timing_${Bun.randomUUIDv7().replaceAll('-', '').slice(-12)}`
	const admin = postgres(args.server, { max: 1, onnotice: () => {} })
	await admin.unsafe(`create database ${name}`)
	const databaseUrl = Object.assign(new URL(args.server), { pathname: `/${name}` }).toString()
	const workDir = mkdtempSync(join(os.tmpdir(), 'latchkey-timing-'))
	try {
		log(`${direction}: accounts made with ${label(spec.from)}, service now on ${label(spec.to)}`)
		const before = await startService(databaseUrl, spec.from, workDir, 'old.log')
		const oldAccounts = Array.from({ length: ACCOUNTS }, (_, i) => `old-${i}@example.test`)
		try {
			for (const email of oldAccounts) await signUp(before.url, email)
		} finally {
			await before.stop()
		}
		if (spec.imported) {
			const db = postgres(databaseUrl, { max: 1, onnotice: () => {} })
			try {
				for (const email of oldAccounts) await db`update users set password_hash = ${spec.imported(PASSWORD)} where email = ${email}`
			} finally {
				await db.end()
			}
		}
		const service = await startService(databaseUrl, spec.to, workDir, 'new.log')
		try {
			const newAccounts = Array.from({ length: ACCOUNTS }, (_, i) => `new-${i}@example.test`)
			for (const email of newAccounts) await signUp(service.url, email)
			let unknown = 0
			const groups = {
				old: (i: number) => oldAccounts[i % ACCOUNTS] ?? '',
				current: (i: number) => newAccounts[i % ACCOUNTS] ?? '',
				unknown: () => `nobody-${unknown++}@example.test`,
			}
			type Group = keyof typeof groups
			const order = (rounds: number) => {
				const list: Group[] = []
				for (let i = 0; i < rounds; i++) list.push('old', 'current', 'unknown')
				for (let i = list.length - 1; i > 0; i--) {
					const j = Math.floor(Math.random() * (i + 1))
					;[list[i], list[j]] = [list[j] as Group, list[i] as Group]
				}
				return list
			}
			// The warm-up is kept apart: it shows what a process that just started does.
			const counts: Record<Group, number> = { old: 0, current: 0, unknown: 0 }
			const warmup: Record<Group, number[]> = { old: [], current: [], unknown: [] }
			for (const group of order(WARMUP)) warmup[group].push(await probe(service.url, groups[group](counts[group]++)))
			const times: Record<Group, number[]> = { old: [], current: [], unknown: [] }
			for (const group of order(SAMPLES)) times[group].push(await probe(service.url, groups[group](counts[group]++)))
			return {
				direction,
				from: label(spec.from),
				to: label(spec.to),
				old: summary(times.old),
				current: summary(times.current),
				unknown: summary(times.unknown),
				aucOldVsUnknown: auc(times.old, times.unknown),
				bestSplitOldVsUnknown: bestSplit(times.old, times.unknown),
				aucCurrentVsUnknown: auc(times.current, times.unknown),
				warmupFirst: { old: warmup.old[0], current: warmup.current[0], unknown: warmup.unknown[0] },
			}
		} finally {
			await service.stop()
		}
	} finally {
		await admin.unsafe(`drop database if exists ${name} with (force)`)
		await admin.end()
		rmSync(workDir, { recursive: true, force: true })
	}
}

const ms = (value: number | undefined) => (value === undefined ? '–' : `${value.toFixed(1)} ms`)
const results = []
for (const direction of args.directions.split(',').map((d) => d.trim()).filter(Boolean)) {
	const result = await measure(direction)
	results.push(result)
	console.log(
		[
			`${result.direction} (${result.from} → ${result.to}), ${SAMPLES} wrong-password logins per group:`,
			`  old-settings accounts  median ${ms(result.old.median)}  p90 ${ms(result.old.p90)}`,
			`  current accounts       median ${ms(result.current.median)}  p90 ${ms(result.current.p90)}`,
			`  unknown emails         median ${ms(result.unknown.median)}  p90 ${ms(result.unknown.p90)}`,
			`  old vs unknown: AUC ${result.aucOldVsUnknown.toFixed(3)} (0.5 = indistinguishable), best split ${(100 * result.bestSplitOldVsUnknown).toFixed(1)}%`,
			`  current vs unknown: AUC ${result.aucCurrentVsUnknown.toFixed(3)}`,
			`  first probe of each group after start: old ${ms(result.warmupFirst.old)}, current ${ms(result.warmupFirst.current)}, unknown ${ms(result.warmupFirst.unknown)}`,
		].join('\n'),
	)
}
console.log(JSON.stringify({ samples: SAMPLES, source: args.binary ?? args.source, cpus: args.cpus ?? 'all', cores: navigator.hardwareConcurrency, results }))
