/**
 * Can the time of `POST /auth/password-resets { email, code, password }` with a wrong code tell an
 * address that has an account (and a live recovery code) from one that has none? (issue 22, point 7f)
 *
 * Signs up N accounts, asks a recovery mail for each (so each has a live code), then sends one wrong
 * code per account and one per unknown address, alternating, through `app.handle` in this process
 * (no sockets: only the service's own work is timed). Each address is tried once, so no code is voided
 * and the 10-a-day limit is never reached. Reports each group's median and p90, and how separable the
 * two groups are:
 *
 *   AUC = P(an existing-account request takes longer than an unknown-address one)
 *         (the Mann-Whitney U statistic ÷ n₁n₂; ties count ½)
 *
 * 0.5 means time tells nothing; 1.0 (or 0.0) means every pair is told apart.
 *
 *   bun test/bench/reset-timing.ts [--samples 200] [--warmup 20]
 *   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres bun test/bench/reset-timing.ts
 *
 * PGlite by default; with TEST_DATABASE_URL a fresh database on that server, dropped afterwards.
 * Run it on a quiet machine: other work on the cores adds noise to both groups alike.
 */
import { parseArgs } from 'node:util'
import { count, isNull } from 'drizzle-orm'
import { emailTokens } from '../../src/db/schema'
import { startTestApp, type TestApp } from '../support/app'
import { TEST_DATABASE_URL } from '../support/database'

const { values: args } = parseArgs({
	args: Bun.argv.slice(2),
	options: { samples: { type: 'string', default: '200' }, warmup: { type: 'string', default: '20' } },
})
const SAMPLES = Number(args.samples)
const WARMUP = Number(args.warmup)
if (!Number.isInteger(SAMPLES) || SAMPLES < 10 || !Number.isInteger(WARMUP) || WARMUP < 0) throw new Error('--samples ≥ 10 and --warmup ≥ 0, whole numbers')

const PASSWORD = 'reset timing passphrase 2026'
const NEW_PASSWORD = 'a brand new passphrase'
const log = (message: string) => console.error(`[reset-timing ${new Date().toISOString().slice(11, 19)}] ${message}`)

export interface TimingGroup {
	n: number
	medianMs: number
	p90Ms: number
}

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number
const group = (samples: number[]): TimingGroup => {
	const sorted = [...samples].sort((a, b) => a - b)
	return { n: sorted.length, medianMs: Number(quantile(sorted, 0.5).toFixed(3)), p90Ms: Number(quantile(sorted, 0.9).toFixed(3)) }
}

/** P(a > b) over every pair, ties ½. */
function auc(a: number[], b: number[]): number {
	let wins = 0
	for (const x of a) for (const y of b) wins += x > y ? 1 : x === y ? 0.5 : 0
	return wins / (a.length * b.length)
}

async function timed(t: TestApp, email: string): Promise<{ ms: number; status: number }> {
	const request = new Request('http://localhost/api/auth/password-resets', {
		method: 'POST',
		headers: { 'content-type': 'application/json' },
		body: JSON.stringify({ email, code: '000000', password: NEW_PASSWORD }),
	})
	const started = performance.now()
	const response = await t.app.handle(request)
	await response.arrayBuffer()
	return { ms: performance.now() - started, status: response.status }
}

async function main() {
	const t = await startTestApp({ LOG_LEVEL: 'warn', EMAIL_VERIFICATION: 'off', MAIL_RESEND_SECONDS: '0' })
	try {
		const total = SAMPLES + WARMUP
		const run = Bun.randomUUIDv7().slice(-8)
		const known = Array.from({ length: total }, (_, i) => `reset-timing-${run}-${i}@example.test`)
		const unknown = Array.from({ length: total }, (_, i) => `nobody-${run}-${i}@example.test`)
		log(`${TEST_DATABASE_URL ? 'PostgreSQL' : 'PGlite'}: signing up ${total} accounts and asking a recovery mail for each`)
		for (const email of known) {
			const created = await t.call('POST', '/api/users', { json: { email, password: PASSWORD, name: 'Timing' } })
			if (created.status !== 201) throw new Error(`sign-up: ${created.status}`)
			if ((await t.call('POST', '/api/auth/recovery-requests', { json: { email } })).status !== 202) throw new Error('recovery request refused')
		}
		// Each account's code exists once the job worker has handled its request.
		for (const deadline = Date.now() + 120_000; ; ) {
			const [live] = await t.database.handle.db.select({ n: count() }).from(emailTokens).where(isNull(emailTokens.usedAt))
			if ((live?.n ?? 0) >= total) break
			if (Date.now() > deadline) throw new Error(`only ${live?.n} recovery codes after 120 s`)
			await Bun.sleep(100)
		}
		// Done with the background work: nothing else competes with the timed requests.
		await t.app.decorator.backgroundJobs.stop()
		const times = { known: [] as number[], unknown: [] as number[] }
		for (let i = 0; i < total; i++) {
			// Alternate which goes first, so neither group always follows the other.
			const order = i % 2 === 0 ? (['known', 'unknown'] as const) : (['unknown', 'known'] as const)
			for (const which of order) {
				const { ms, status } = await timed(t, (which === 'known' ? known : unknown)[i] as string)
				if (status !== 400) throw new Error(`expected 400 invalid-code, got ${status}`)
				if (i >= WARMUP) times[which].push(ms)
			}
		}
		const figures = { database: TEST_DATABASE_URL ? 'postgres' : 'pglite', known: group(times.known), unknown: group(times.unknown), auc: Number(auc(times.known, times.unknown).toFixed(3)) }
		console.log(
			`password-resets, wrong code (${figures.database}, ${SAMPLES} each): existing account median ${figures.known.medianMs} ms p90 ${figures.known.p90Ms} ms · ` +
				`unknown address median ${figures.unknown.medianMs} ms p90 ${figures.unknown.p90Ms} ms · AUC ${figures.auc}`,
		)
		console.log(JSON.stringify(figures))
	} finally {
		await t.close()
	}
}

await main()
