/**
 * After PASSWORD_HASH_* changes, accounts keep their old hashes until their
 * next successful login. A failed login must not tell them from unknown
 * emails by time (API.md), so every login check does one argon2
 * verification at each parameter set in use, whatever the account
 * (PasswordHasher.verifyForLogin). Tests see that work, not its duration,
 * through observeHashingJobs: the parameter sets of the verifications a
 * request hands to the hashing pool.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { users } from '../src/db/schema'
import { hashParameters, MAX_LEGACY_PARAMETER_SETS, observeHashingJobs, PasswordHasher } from '../src/modules/auth/password'
import { sampleLegacyHashes } from '../src/modules/auth/stored-hashes'
import { problem, startTestApp, TEST_ENV, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { PASSWORD, signUp, uniqueEmail } from './support/fixtures'

setDefaultTimeout(30_000)

const BAD_CREDENTIALS = 'The email or password is incorrect'
const WRONG = 'a wrong passphrase'
const CHEAP = { PASSWORD_HASH_MEMORY_KIB: '1024', PASSWORD_HASH_TIME_COST: '1' }
const COSTLIER = { PASSWORD_HASH_MEMORY_KIB: '2048', PASSWORD_HASH_TIME_COST: '2' }
const set = (env: typeof CHEAP) => `m=${env.PASSWORD_HASH_MEMORY_KIB},t=${env.PASSWORD_HASH_TIME_COST}`

/** The parameter sets of the argon2 verifications `action` hands to the hashing pool, sorted. */
async function verificationsDuring<T>(action: () => Promise<T>): Promise<{ result: T; sets: string[] }> {
	const sets: string[] = []
	const stop = observeHashingJobs((job) => {
		if (job.op === 'verify') sets.push(job.parameters ? `m=${job.parameters.memoryCost},t=${job.parameters.timeCost}` : (job.costClass ?? 'unreadable'))
	})
	try {
		const result = await action()
		return { result, sets: sets.sort() }
	} finally {
		stop()
	}
}

const attempt = (t: TestApp, email: string, password = WRONG) => t.call('POST', '/api/auth/login', { json: { email, password } })

async function storedHash(database: TestDatabase, email: string): Promise<string> {
	const [row] = await database.handle.db.select({ hash: users.passwordHash }).from(users).where(eq(users.email, email))
	if (!row?.hash) throw new Error(`no account ${email} with a password`)
	return row.hash
}

for (const [direction, before, after] of [
	['raised', CHEAP, COSTLIER],
	['lowered', COSTLIER, CHEAP],
] as const) {
	describe(`after the hashing settings are ${direction} (${set(before)} → ${set(after)})`, () => {
		let database: TestDatabase
		let oldApp: TestApp
		let oldEmail: string
		let oldEmail2: string
		beforeAll(async () => {
			database = await createTestDatabase()
			oldApp = await startTestApp(before, database)
			oldEmail = (await signUp(oldApp)).email
			oldEmail2 = (await signUp(oldApp)).email
		})
		afterAll(() => database.drop())

		test("a fresh app's first check, for an unknown email, already does the work of an old-settings account's check", async () => {
			const t = await startTestApp(after, database)
			const unknown = await verificationsDuring(() => attempt(t, uniqueEmail('nobody')))
			const old = await verificationsDuring(() => attempt(t, oldEmail))
			expect(unknown.result.status).toBe(401)
			expect(old.result.status).toBe(401)
			expect(unknown.sets).toEqual([set(before), set(after)].sort())
			expect(old.sets).toEqual(unknown.sets)
		})

		test('an old-settings account, an unknown email, a current account and a deactivated one: the same argon2 work and the same 401; the old account still logs in', async () => {
			expect(await storedHash(database, oldEmail2)).toStartWith(`$argon2id$v=19$${set(before)},p=1$`)
			const t = await startTestApp(after, database)
			const current = await signUp(t)
			const deactivated = await signUp(t)
			expect((await t.call('DELETE', '/api/users/me', { token: deactivated.accessToken })).status).toBe(200)
			const checks = {
				old: await verificationsDuring(() => attempt(t, oldEmail2)),
				unknown: await verificationsDuring(() => attempt(t, uniqueEmail('nobody'))),
				current: await verificationsDuring(() => attempt(t, current.email)),
				deactivated: await verificationsDuring(() => attempt(t, deactivated.email, PASSWORD)),
			}
			const expected = [set(before), set(after)].sort()
			for (const check of Object.values(checks)) {
				expect(check.result.status).toBe(401)
				expect(check.result.headers.get('www-authenticate')).toBe(checks.unknown.result.headers.get('www-authenticate'))
				expect(check.result.body).toEqual(problem('invalid-credentials', 401, '/api/auth/login', BAD_CREDENTIALS))
				expect(check.sets).toEqual(expected)
			}
			const right = await attempt(t, oldEmail2, PASSWORD)
			expect(right.status).toBe(200)
			expect(right.body.data.user.email).toBe(oldEmail2)
		})
	})
}

describe('login checks of unusual stored hashes', () => {
	let database: TestDatabase
	let t: TestApp
	beforeAll(async () => {
		database = await createTestDatabase()
		t = await startTestApp({}, database)
	})
	afterAll(() => database.drop())

	test('a stored hash that cannot be read matches no password: the same 401 as an unknown email, not a 500', async () => {
		const account = await signUp(t)
		await database.handle.db.update(users).set({ passwordHash: '$argon2id$v=19$m=1024,t=1,p=1$not-a-salt' }).where(eq(users.id, account.id))
		const broken = await verificationsDuring(() => attempt(t, account.email, PASSWORD))
		const unknown = await verificationsDuring(() => attempt(t, uniqueEmail('nobody')))
		expect(broken.result.status).toBe(401)
		expect(broken.result.body).toEqual(unknown.result.body)
		expect(broken.sets).toEqual(unknown.sets)
	})

	test('a stored hash of another algorithm is a cost class of its own, which every later check covers; the right password still logs in', async () => {
		const account = await signUp(t)
		const bcrypt = await Bun.password.hash(PASSWORD, { algorithm: 'bcrypt', cost: 4 })
		await database.handle.db.update(users).set({ passwordHash: bcrypt }).where(eq(users.id, account.id))
		const wrong = await verificationsDuring(() => attempt(t, account.email))
		const unknown = await verificationsDuring(() => attempt(t, uniqueEmail('nobody')))
		expect(wrong.result.status).toBe(401)
		expect(wrong.sets).toContain('bcrypt:4')
		expect(unknown.sets).toEqual(wrong.sets)
		expect((await attempt(t, account.email, PASSWORD)).status).toBe(200)
	})
})

describe('PasswordHasher: the parameter sets a login check covers', () => {
	const settings = { minLength: 8, niceness: 0, memoryCost: Number(TEST_ENV.PASSWORD_HASH_MEMORY_KIB), timeCost: 1 }
	const hashWith = (memoryCost: number, timeCost: number) => Bun.password.hash(PASSWORD, { algorithm: 'argon2id', memoryCost, timeCost })

	test('hashParameters reads m and t of the hashes Bun writes, and nothing else', async () => {
		expect(hashParameters(await hashWith(2048, 3))).toEqual({ memoryCost: 2048, timeCost: 3 })
		expect(hashParameters('$argon2id$v=19$m=2048,t=3,p=4$c2FsdHNhbHQ$aGFzaA')).toBeUndefined()
		expect(hashParameters(await Bun.password.hash(PASSWORD, { algorithm: 'bcrypt', cost: 4 }))).toBeUndefined()
		expect(hashParameters('')).toBeUndefined()
	})

	test('legacy sets are learnt from stored hashes, up to MAX_LEGACY_PARAMETER_SETS, and the configured set counts once', async () => {
		const hasher = new PasswordHasher(settings)
		expect(hasher.learnParameters(await hashWith(1024, 1))).toBe('m=1024,t=1')
		for (let t = 2; t <= MAX_LEGACY_PARAMETER_SETS + 2; t++) hasher.learnParameters(await hashWith(1024, t))
		expect(hasher.parameterSets().map(([key]) => key)).toEqual(
			Array.from({ length: MAX_LEGACY_PARAMETER_SETS + 1 }, (_, i) => `m=1024,t=${i + 1}`),
		)
		// A set beyond the bound is still verified (on top of the dummies), and the right password still passes.
		const beyond = await hashWith(1024, MAX_LEGACY_PARAMETER_SETS + 2)
		const check = await verificationsDuring(() => hasher.verifyForLogin(PASSWORD, beyond))
		expect(check.result).toBe(true)
		expect(check.sets).toHaveLength(MAX_LEGACY_PARAMETER_SETS + 2)
	})

	test('sampleLegacyHashes finds one stored hash per parameter set other than the current one, and a hasher given it covers them from its first check', async () => {
		const database = await createTestDatabase()
		try {
			const t = await startTestApp({}, database)
			for (const [memoryCost, timeCost] of [[1024, 1], [1536, 1], [2048, 2], [2048, 2], [1024, 1]] as const) {
				const account = await signUp(t)
				const passwordHash = await hashWith(memoryCost, timeCost)
				await database.handle.db.update(users).set({ passwordHash }).where(eq(users.id, account.id))
			}
			const sample = await sampleLegacyHashes(database.handle.db, { memoryCost: 1024, timeCost: 1 })
			expect(sample.map((hash) => hashParameters(hash)).sort((a, b) => (a?.memoryCost ?? 0) - (b?.memoryCost ?? 0))).toEqual([
				{ memoryCost: 1536, timeCost: 1 },
				{ memoryCost: 2048, timeCost: 2 },
			])
			expect(await sampleLegacyHashes(database.handle.db, { memoryCost: 1024, timeCost: 1 }, 1)).toHaveLength(1)

			const hasher = new PasswordHasher(settings, { storedHashSample: () => sampleLegacyHashes(database.handle.db, settings) })
			const first = await verificationsDuring(() => hasher.verifyForLogin(PASSWORD, undefined))
			expect(first.result).toBe(false)
			expect(first.sets).toEqual(['m=1024,t=1', 'm=1536,t=1', 'm=2048,t=2'])
		} finally {
			await database.drop()
		}
	})
})
