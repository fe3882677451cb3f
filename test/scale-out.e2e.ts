/**
 * Scale-out (issue #7): three copies of the compiled binary, started at the
 * same moment against one fresh, unmigrated PostgreSQL database and one Redis,
 * called in turn as a round-robin load balancer would. Run with
 * `bun test ./test/scale-out.e2e.ts` after `bun run build`; it exists only
 * when TEST_DATABASE_URL and TEST_REDIS_URL are both set.
 *
 * Isolation on a Redis shared with other runs: every request says it comes
 * from its own random address in 2001:db8::/32 (documentation range) through
 * X-Forwarded-For, trusted because TRUST_PROXY is the loopback the test calls
 * from; emails are unique per run. The keys this file made are deleted at the end.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { RedisClient } from 'bun'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'
import { bundledMigrations } from '../src/db/migrate'
import { PROBLEM_TYPE_BASE } from '../src/http/problem-catalogue'
import { binaryFolder, jsonPost, startBinary, type BinaryFolder, type RunningBinary } from './support/binary'
import { createEmptyTestDatabase, TEST_DATABASE_URL } from './support/database'
import { TEST_OAUTH_SIGNING_KEY } from './support/oauth-key'
import type { UserResource } from '../src/modules/users/model'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(60_000)

const TEST_REDIS_URL = process.env.TEST_REDIS_URL?.trim() || undefined

const RATE_LIMIT_MAX = 6
const AUTH_RATE_LIMIT_MAX = 4
const LOCKOUT_THRESHOLD = 3
const PASSWORD = 'a long enough passphrase'
const run = Bun.randomUUIDv7().replaceAll('-', '').slice(-12)
const ADMIN_EMAIL = `scale-admin-${run}@example.test`

type User = UserResource
interface Tokens {
	accessToken: string
	refreshToken: string
	user: User
}
const dataOf = async <T>(response: Response) => ((await response.json()) as { data: T }).data

/** The budget key of an address from freshAddress: IPv6 clients are budgeted per /64, its first four groups. */
const budgetKeyOf = (address: string) => `${address.split(':').slice(0, 4).join(':')}::/64`

/** A random address no other run will use: eight non-zero groups, so its text is already canonical. */
const usedAddresses = new Set<string>()
function freshAddress(): string {
	const groups = Array.from({ length: 6 }, () => (0x1000 + Math.floor(Math.random() * 0xefff)).toString(16))
	const address = ['2001', 'db8', ...groups].join(':')
	usedAddresses.add(address)
	return address
}

/**
 * One request to one instance, as the balancer would forward it: from a new
 * client address unless `from` says which.
 */
function call(
	instance: RunningBinary,
	path: string,
	{ token, from = freshAddress(), body }: { token?: string; from?: string; body?: unknown } = {},
) {
	const headers: Record<string, string> = { 'x-forwarded-for': from }
	if (token) headers.authorization = `Bearer ${token}`
	return fetch(`${instance.base}/api${path}`, body === undefined ? { headers } : jsonPost(body, headers))
}

const emailDigest = (email: string) => new Bun.CryptoHasher('sha256').update(email).digest('hex')

async function stop(instance: RunningBinary) {
	instance.process.kill('SIGTERM')
	const code = await Promise.race([instance.process.exited, Bun.sleep(15_000).then(() => 'timeout' as const)])
	if (code === 'timeout') {
		instance.process.kill('SIGKILL')
		await instance.process.exited
	}
}

if (TEST_DATABASE_URL && TEST_REDIS_URL) {
	const serverUrl = TEST_DATABASE_URL
	const redisUrl = TEST_REDIS_URL
	describe('three instances behind a balancer, sharing one PostgreSQL and one Redis', () => {
		let at: BinaryFolder | undefined
		let database: { url: string; drop(): Promise<void> } | undefined
		let sql: postgres.Sql | undefined
		let redis: RedisClient | undefined
		const instances: RunningBinary[] = []
		const emails = new Set<string>([ADMIN_EMAIL])
		let a: RunningBinary
		let b: RunningBinary
		let c: RunningBinary

		beforeAll(async () => {
			at = binaryFolder('scale')
			database = await createEmptyTestDatabase(serverUrl)
			sql = postgres(database.url, { max: 1, onnotice: () => {} })
			redis = new RedisClient(redisUrl)
			const env = {
				NODE_ENV: 'production',
				DATABASE_URL: database.url,
				DATABASE_POOL_MAX: '4',
				REDIS_URL: redisUrl,
				// The same key on every instance, as an operator must set it.
				JWT_SECRET: Buffer.from(crypto.getRandomValues(new Uint8Array(48))).toString('base64'),
				DATA_ENCRYPTION_KEY: Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64'),
				OAUTH_SIGNING_KEY: TEST_OAUTH_SIGNING_KEY,
				PUBLIC_URL: 'https://auth.example.test',
				TRUST_PROXY: '127.0.0.1',
				PASSWORD_HASH_MEMORY_KIB: '1024',
				PASSWORD_HASH_TIME_COST: '1',
				RATE_LIMIT_MAX: String(RATE_LIMIT_MAX),
				AUTH_RATE_LIMIT_MAX: String(AUTH_RATE_LIMIT_MAX),
				RATE_LIMIT_WINDOW_SECONDS: '60',
				LOCKOUT_THRESHOLD: String(LOCKOUT_THRESHOLD),
				LATCHKEY_ADMIN_EMAIL: ADMIN_EMAIL,
				LATCHKEY_ADMIN_PASSWORD: PASSWORD,
			}
			const folder = at
			// Together, on a database nobody has migrated: they race for the migration lock and the first admin.
			const started = await Promise.allSettled([0, 1, 2].map(() => startBinary(folder, env)))
			for (const outcome of started) if (outcome.status === 'fulfilled') instances.push(outcome.value)
			const failed = started.find((outcome) => outcome.status === 'rejected')
			if (failed) throw (failed as PromiseRejectedResult).reason
			;[a, b, c] = instances as [RunningBinary, RunningBinary, RunningBinary]
		})

		afterAll(async () => {
			await Promise.allSettled(instances.map(stop))
			await sql?.end().catch(() => {})
			await database?.drop().catch((error: unknown) => console.error('could not drop the test database', error))
			const keys = [
				...[...usedAddresses].map(budgetKeyOf).flatMap((key) => [`latchkey:rate:general:${key}`, `latchkey:rate:auth:${key}`]),
				...[...emails].flatMap((email) => [`latchkey:lockout:fail:${emailDigest(email)}`, `latchkey:lockout:lock:${emailDigest(email)}`]),
			]
			for (let index = 0; index < keys.length; index += 500)
				await redis?.send('DEL', keys.slice(index, index + 500)).catch(() => {})
			redis?.close()
			at?.remove()
		})

		const newUser = async (label: string) => {
			const email = `scale-${label}-${run}@example.test`
			emails.add(email)
			const created = await call(a, '/users', { body: { email, password: PASSWORD, name: `Scale ${label} ${run}` } })
			expect(created.status).toBe(201)
			return dataOf<User>(created)
		}
		const login = async (instance: RunningBinary, email: string) => {
			const response = await call(instance, '/auth/login', { body: { email, password: PASSWORD } })
			expect(response.status).toBe(200)
			return dataOf<Tokens>(response)
		}

		test('all three start together on an unmigrated database, become ready, and the migrations are applied once', async () => {
			expect(new Set(instances.map((instance) => instance.base)).size).toBe(3)
			for (const instance of instances) {
				const ready = await fetch(`${instance.base}/api/health/ready`)
				expect(ready.status).toBe(200)
				expect(await ready.json()).toEqual({ data: { status: 'ok' }, message: 'Database answers', errors: [] })
			}
			const db = sql as postgres.Sql

			const files = readdirSync(join(import.meta.dir, '..', 'drizzle')).filter((name) => name.endsWith('.sql'))
			const recorded = await db<{ hash: string; created_at: string }[]>`
				select hash, created_at from drizzle.__drizzle_migrations order by id`
			expect(recorded.length).toBe(files.length)
			expect(recorded.map((row) => row.hash)).toEqual(bundledMigrations().map((migration) => migration.hash))
			expect(new Set(recorded.map((row) => row.created_at)).size).toBe(recorded.length)

			const tables = await db`select schemaname from pg_tables where tablename = 'users'`
			expect(tables.map((row) => row.schemaname)).toEqual(['public'])
			const extensions = await db`select extname from pg_extension where extname = 'pg_trgm'`
			expect(extensions.length).toBe(1)

			// One instance applied everything under the lock; the others found nothing pending.
			const migrators = instances.filter((instance) => instance.output().includes('"msg":"migrations applied"'))
			expect(migrators.length).toBe(1)
			const applied = /"applied":(\[[^\]]*\])[^\n]*"msg":"migrations applied"/.exec(migrators[0]?.output() ?? '')
			expect(JSON.parse(applied?.[1] ?? 'null')).toEqual(bundledMigrations().map((migration) => migration.tag))

			// The first admin from the environment, raced for by all three, exists once.
			const admins = await db`select email from users where role = 'admin'`
			expect(admins.map((row) => row.email)).toEqual([ADMIN_EMAIL])
			expect(instances.filter((instance) => instance.output().includes('created the first admin')).length).toBe(1)
		})

		test('a user created on one instance is listed by an admin on a second and readable on a third', async () => {
			const user = await newUser('listed')
			const admin = await login(b, ADMIN_EMAIL)

			const listed = await call(b, `/users?q=listed-${run}`, { token: admin.accessToken })
			expect(listed.status).toBe(200)
			const page = await dataOf<{ items: User[] }>(listed)
			expect(page.items).toEqual([user])

			const read = await call(c, `/users/${user.id}`, { token: admin.accessToken })
			expect(read.status).toBe(200)
			expect(await dataOf<User>(read)).toEqual(user)
		})

		test('a session from one instance works on the others, and a logout on one is refused on all at once', async () => {
			const user = await newUser('session')
			const session = await login(a, user.email)
			for (const instance of [a, b, c]) {
				const me = await call(instance, '/users/me', { token: session.accessToken })
				expect(me.status).toBe(200)
				expect((await dataOf<User>(me)).id).toBe(user.id)
			}

			const logout = await call(b, '/auth/logout', { token: session.accessToken, body: { scope: 'local' } })
			expect(logout.status).toBe(200)

			for (const instance of [a, c]) {
				// Allowed up to a second; in fact every request reads the session from PostgreSQL, so the first is refused.
				const deadline = Date.now() + 1000
				let me = await call(instance, '/users/me', { token: session.accessToken })
				let attempts = 1
				while (me.status === 200 && Date.now() < deadline) {
					await Bun.sleep(50)
					me = await call(instance, '/users/me', { token: session.accessToken })
					attempts++
				}
				expect(me.status).toBe(401)
				expect(me.headers.get('www-authenticate')).toContain('error="invalid_token"')
				expect(attempts).toBe(1)
			}
			const refresh = await call(c, '/auth/refresh', { body: { refreshToken: session.refreshToken } })
			expect(refresh.status).toBe(401)
		})

		test('the general and /auth budgets are spent once across all three instances, not once per instance', async () => {
			const user = await newUser('budget')
			const { accessToken } = await login(c, user.email)
			const client = freshAddress()

			const general: Response[] = []
			for (let index = 0; index < RATE_LIMIT_MAX + 3; index++)
				general.push(await call(instances[index % 3] as RunningBinary, '/users/me', { token: accessToken, from: client }))
			expect(general.map((response) => response.status)).toEqual([
				...Array<number>(RATE_LIMIT_MAX).fill(200),
				429,
				429,
				429,
			])
			// One counter: what is left goes down by one per request, whichever instance answers.
			expect(general.slice(0, RATE_LIMIT_MAX).map((response) => response.headers.get('ratelimit-remaining'))).toEqual(
				Array.from({ length: RATE_LIMIT_MAX }, (_, index) => String(RATE_LIMIT_MAX - 1 - index)),
			)
			const refused = general[RATE_LIMIT_MAX] as Response
			expect(refused.headers.get('content-type')).toContain('application/problem+json')
			expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
			expect(await refused.json()).toMatchObject({ type: `${PROBLEM_TYPE_BASE}rate-limited`, status: 429 })
			expect(Number(await redis?.get(`latchkey:rate:general:${budgetKeyOf(client)}`))).toBe(RATE_LIMIT_MAX + 3)

			const authClient = freshAddress()
			const auth: number[] = []
			// No more requests than the general budget allows, so every refusal here is the /auth budget's.
			for (let index = 0; index < RATE_LIMIT_MAX; index++) {
				const response = await call(instances[index % 3] as RunningBinary, '/auth/refresh', {
					body: { refreshToken: 'not-a-refresh-token' },
					from: authClient,
				})
				auth.push(response.status)
			}
			expect(auth).toEqual([
				...Array<number>(AUTH_RATE_LIMIT_MAX).fill(401),
				...Array<number>(RATE_LIMIT_MAX - AUTH_RATE_LIMIT_MAX).fill(429),
			])
			expect(Number(await redis?.get(`latchkey:rate:auth:${budgetKeyOf(authClient)}`))).toBe(RATE_LIMIT_MAX)
		})

		test('a login lockout started by failures spread over the instances holds on every instance', async () => {
			const user = await newUser('lockout')
			const failures: number[] = []
			for (let index = 0; index < LOCKOUT_THRESHOLD; index++) {
				const wrong = await call(instances[index % 3] as RunningBinary, '/auth/login', {
					body: { email: user.email, password: 'not the right passphrase' },
				})
				failures.push(wrong.status)
			}
			expect(failures).toEqual(Array<number>(LOCKOUT_THRESHOLD).fill(401))

			for (const instance of [a, b, c]) {
				const locked = await call(instance, '/auth/login', { body: { email: user.email, password: PASSWORD } })
				expect(locked.status).toBe(429)
				expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0)
				expect(await locked.json()).toMatchObject({ type: `${PROBLEM_TYPE_BASE}login-locked`, status: 429 })
			}
		})
	})
}
