/**
 * The second-factor section of `bench` (run.ts calls `mfaSection`; `bun run bench -- --only mfa` runs it
 * alone): what POST /api/auth/mfa with a TOTP code adds to a login beyond the password hash, beside the
 * same login for accounts without a factor, in one run on one service.
 *
 * 1. Login of accounts without a factor: tokens straight from the password (argon2 bound).
 * 2. The password step of accounts with a TOTP factor: the same hash, answered with an mfaToken.
 * 3. POST /auth/mfa: each request with an mfaToken of its own and the code its account's app shows,
 *    computed in the load generator by otpauth as an app would. One request per account: a code's time
 *    step, once used, is refused (replay), so an account completes at most one login per step. The
 *    password step runs at the hashing limit (a dozen a second here), too slowly to hand out thousands of
 *    tokens; so the tokens are written as the password step writes them (the SHA-256 of 32 random bytes,
 *    bound to the account's credentials version), after 2 has shown that step's own cost.
 *
 * The factors are written straight into the seeded accounts (sealed with the service's
 * DATA_ENCRYPTION_KEY, as enrolment would) and deleted afterwards, so the other sections log in as before.
 */
import { join } from 'node:path'
import postgres from 'postgres'
import { DataKeys } from '../../src/crypto/data-keys'
import { hashMfaToken, newMfaToken } from '../../src/modules/factors/codes'
import { MFA_TOKEN_SECONDS } from '../../src/modules/factors/service'
import { newTotpSecret } from '../../src/modules/factors/totp'
import { runLoadGenerator, type LoadResult, type LoadSpec, type PendingMfa } from './workload'

/** The name the section's factors carry, so that a run cut short is cleaned up by the next. */
const BENCH_FACTOR = 'bench TOTP'

export interface MfaBench<M extends LoadResult, R> {
	databaseUrl: string
	artifacts: string
	users: number
	seconds: number
	/** Connections of the login scenarios (run.ts's LOGIN_CONNECTIONS). */
	connections: number
	/** The seeded users' password, and the key the service seals with. */
	password: string
	dataEncryptionKey: string
	log(message: string): void
	startService(env: Record<string, string>, name: string): Promise<{ pid: number; url: string; readyAfterMs: number; stop(): Promise<void> }>
	measure(target: { pid: number; url: string; readyAfterMs: number; stop(): Promise<void> }, run: () => Promise<LoadResult>): Promise<M>
	row(id: string, scenario: string, m: M, limit: { name: string; perSecond: number | null }, goal?: string, met?: boolean | null): R
}

export interface MfaFigures {
	accountsWithFactor: number
	plainLogin: { perSecond: number; p50: number; p99: number }
	passwordStep: { perSecond: number; p50: number; p99: number }
	mfa: { perSecond: number; p50: number; p99: number; requests: number; non2xx: number }
	/** p50 of the password step plus p50 of /auth/mfa, beside a plain login's p50. */
	twoStepP50Ms: number
}

/** Seeded users 0…users-1; every 50th (n % 50 === 49) is deactivated (test/support/seed.ts). */
const activeUsersFromTheTop = (users: number, count: number) => {
	const chosen: number[] = []
	for (let n = users - 1; n >= 0 && chosen.length < count; n--) if (n % 50 !== 49) chosen.push(n)
	return chosen
}

export async function mfaSection<M extends LoadResult, R>(bench: MfaBench<M, R>): Promise<{ rows: R[]; figures: MfaFigures }> {
	const count = Math.max(50, Math.min(2000, Math.floor(bench.users / 4)))
	const accounts = activeUsersFromTheTop(bench.users, count)
	const lowest = Math.min(...accounts)
	const sql = postgres(bench.databaseUrl, { max: 4, onnotice: () => {} })
	const secrets = new Map<number, string>()
	try {
		bench.log(`9a. giving ${accounts.length} seeded accounts a TOTP factor`)
		await sql`delete from factors where name = ${BENCH_FACTOR}`
		const keys = DataKeys.from({ current: bench.dataEncryptionKey, previous: [] })
		const ids = await sql<Array<{ id: string; email: string }>>`select id, email from users where email = any(${accounts.map((n) => `user${n}@example.test`)})`
		const rows = []
		for (const { id: userId, email } of ids) {
			const user = Number(/^user(\d+)@/.exec(email)?.[1])
			const factorId = Bun.randomUUIDv7()
			const secret = newTotpSecret()
			secrets.set(user, secret)
			rows.push({ id: factorId, user_id: userId, type: 'totp', name: BENCH_FACTOR, status: 'active', totp_secret: await keys.seal(secret, factorId) })
		}
		for (let i = 0; i < rows.length; i += 500) await sql`insert into factors ${sql(rows.slice(i, i + 500))}`

		const service = await bench.startService({}, 'mfa')
		try {
			const load = (spec: Omit<LoadSpec, 'url'>) => runLoadGenerator([process.execPath, join(import.meta.dir, 'load.ts')], { url: service.url, ...spec }, bench.artifacts)
			bench.log('9b. login of accounts without a factor')
			const plain = await bench.measure(service, () =>
				load({ connections: bench.connections, duration: bench.seconds, workload: { kind: 'login', users: lowest, password: bench.password } }),
			)
			bench.log('9c. the password step of accounts with a factor (mfaRequired)')
			const step = await bench.measure(service, () =>
				load({ connections: bench.connections, duration: bench.seconds, workload: { kind: 'password-step', users: accounts, password: bench.password } }),
			)
			if ((step.pendingMfa ?? []).length === 0) throw new Error('the password step answered no mfaToken')
			const pending = await issueMfaTokens(sql, accounts, secrets)
			const warmUp = pending.splice(0, Math.min(100, Math.floor(pending.length / 10)))
			await load({ connections: bench.connections, duration: bench.seconds, amount: warmUp.length, workload: { kind: 'mfa', pending: warmUp } })
			bench.log(`9d. POST /auth/mfa with TOTP: ${pending.length} logins, one per account`)
			const mfa = await bench.measure(service, () =>
				load({ connections: bench.connections, duration: bench.seconds, amount: pending.length, workload: { kind: 'mfa', pending } }),
			)
			const figures: MfaFigures = {
				accountsWithFactor: accounts.length,
				plainLogin: { perSecond: plain.okPerSecond, p50: plain.p50, p99: plain.p99 },
				passwordStep: { perSecond: step.okPerSecond, p50: step.p50, p99: step.p99 },
				mfa: { perSecond: mfa.okPerSecond, p50: mfa.p50, p99: mfa.p99, requests: mfa.requests, non2xx: mfa.non2xx },
				twoStepP50Ms: step.p50 + mfa.p50,
			}
			const plainLimit = { name: 'login without a factor', perSecond: plain.okPerSecond }
			return {
				figures,
				rows: [
					bench.row('mfa-plain-login', 'POST /auth/login, no factor', plain, { name: '(reference for the rows below)', perSecond: null }),
					bench.row('mfa-password-step', '  password step of a login with TOTP', step, plainLimit),
					bench.row('mfa-totp', '  POST /auth/mfa with a TOTP code', mfa, plainLimit, 'p99 < p99 of a plain login', mfa.p99 < plain.p99),
				],
			}
		} finally {
			await service.stop()
		}
	} finally {
		await sql`delete from mfa_tokens where user_id in (select user_id from factors where name = ${BENCH_FACTOR})`
		await sql`delete from factors where name = ${BENCH_FACTOR}`
		await sql.end()
	}
}

/** An mfaToken for each account, as a right password would have issued it (src/modules/factors/service.ts). */
async function issueMfaTokens(sql: postgres.Sql, accounts: number[], secrets: Map<number, string>): Promise<PendingMfa[]> {
	const users = await sql<Array<{ id: string; email: string; credentials_version: number }>>`
		select id, email, credentials_version from users where email = any(${accounts.map((n) => `user${n}@example.test`)})`
	const pending: PendingMfa[] = []
	const rows = users.map(({ id, email, credentials_version }) => {
		const user = Number(/^user(\d+)@/.exec(email)?.[1])
		const mfaToken = newMfaToken()
		pending.push({ user, mfaToken, secret: secrets.get(user) })
		return { id: Bun.randomUUIDv7(), user_id: id, token_hash: hashMfaToken(mfaToken), credentials_version, expires_at: new Date(Date.now() + MFA_TOKEN_SECONDS * 1000) }
	})
	for (let i = 0; i < rows.length; i += 500) await sql`insert into mfa_tokens ${sql(rows.slice(i, i + 500))}`
	return pending
}

/** Lines for the end of the report. */
export function describeMfa(figures: MfaFigures): string[] {
	const { plainLogin, passwordStep, mfa } = figures
	return [
		`mfa: ${figures.accountsWithFactor} accounts with TOTP; login without a factor ${plainLogin.perSecond.toFixed(0)}/s p50 ${plainLogin.p50} ms p99 ${plainLogin.p99} ms;` +
			` password step ${passwordStep.perSecond.toFixed(0)}/s p50 ${passwordStep.p50} ms p99 ${passwordStep.p99} ms;` +
			` /auth/mfa ${mfa.perSecond.toFixed(0)}/s p50 ${mfa.p50} ms p99 ${mfa.p99} ms (${mfa.requests} requests, ${mfa.non2xx} non-2xx);` +
			` both steps p50 ${figures.twoStepP50Ms} ms vs ${plainLogin.p50} ms`,
	]
}
