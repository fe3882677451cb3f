import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { RedisCounterStore } from '../src/db/counters'
import { createLogger } from '../src/log'
import { problem, startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { awayFromStepBoundary, completeWithTotp, enrollTotp, passwordStep, totpCode } from './support/factors'
import { jwtPayload, login, PASSWORD, signUp, signUpAdmin } from './support/fixtures'

setDefaultTimeout(30_000)

// One database; each describe runs its own app on it with the settings it is about.
let database: TestDatabase
beforeAll(async () => {
	database = await createTestDatabase()
})
afterAll(() => database.drop())

describe('the second-factor lockout (LOCKOUT_THRESHOLD=3)', () => {
	let t: TestApp
	beforeAll(async () => {
		t = await startTestApp({ LOCKOUT_THRESHOLD: '3', LOCKOUT_WINDOW_SECONDS: '900', LOCKOUT_SECONDS: '600' }, database)
	})
	afterAll(() => t.close())

	test('three wrong codes lock /auth/mfa for the account, right code or not, with Retry-After; password logins are not locked', async () => {
		const account = await signUp(t)
		const { secret } = await enrollTotp(t, account)
		for (let i = 0; i < 3; i++) expect((await completeWithTotp(t, await passwordStep(t, account.email), '000000')).status).toBe(401)
		// The password is still fine: its own lockout counted nothing.
		const mfaToken = await passwordStep(t, account.email)
		await awayFromStepBoundary()
		const locked = await completeWithTotp(t, mfaToken, totpCode(secret, 1))
		expect(locked.status).toBe(429)
		expect(locked.body).toEqual(problem('login-locked', 429, '/api/auth/mfa', 'Too many failed logins for this account; try again later'))
		expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(590)
	})

	test('wrong passwords do not lock the second factor, and wrong codes of one account do not lock another', async () => {
		const victim = await signUp(t)
		const other = await signUp(t)
		const { secret } = await enrollTotp(t, victim)
		const otherFactor = await enrollTotp(t, other)
		for (let i = 0; i < 2; i++) expect((await t.call('POST', '/api/auth/login', { json: { email: victim.email, password: 'wrong password!' } })).status).toBe(401)
		for (let i = 0; i < 3; i++) await completeWithTotp(t, await passwordStep(t, other.email), '000000')
		await awayFromStepBoundary()
		expect((await completeWithTotp(t, await passwordStep(t, victim.email), totpCode(secret, 1))).status).toBe(200)
		expect((await completeWithTotp(t, await passwordStep(t, other.email), totpCode(otherFactor.secret, 1))).status).toBe(429)
	})

	test('twenty wrong codes at once over twenty mfaTokens: no more than three are looked at, the rest locked', async () => {
		const account = await signUp(t)
		await enrollTotp(t, account)
		// The password steps one by one (parallel password checks beyond the threshold are locked by design).
		const tokens: string[] = []
		for (let i = 0; i < 20; i++) tokens.push(await passwordStep(t, account.email))
		const results = await Promise.all(tokens.map((mfaToken) => completeWithTotp(t, mfaToken, '000002')))
		expect(results.filter((res) => res.status === 401)).toHaveLength(3)
		expect(results.filter((res) => res.status === 429)).toHaveLength(17)
	})
})

const TEST_REDIS_URL = process.env.TEST_REDIS_URL?.trim() || undefined
if (TEST_REDIS_URL)
	describe('the second-factor lockout in Redis', () => {
		test('two instances share it: wrong codes at one lock /auth/mfa at the other', async () => {
			const prefix = `latchkey-test-${crypto.randomUUID()}:`
			const stores = [0, 1].map(() => new RedisCounterStore(TEST_REDIS_URL, createLogger('silent'), prefix))
			const env = { LOCKOUT_THRESHOLD: '3' }
			const [a, b] = [await startTestApp(env, database, { counters: stores[0] }), await startTestApp(env, database, { counters: stores[1] })] as [TestApp, TestApp]
			try {
				const account = await signUp(a)
				const { secret } = await enrollTotp(a, account)
				for (const instance of [a, b, a]) expect((await completeWithTotp(instance, await passwordStep(instance, account.email), '000000')).status).toBe(401)
				await awayFromStepBoundary()
				const locked = await completeWithTotp(b, await passwordStep(b, account.email), totpCode(secret, 1))
				expect(locked.status).toBe(429)
				expect(locked.body.type).toEndWith('/login-locked')
			} finally {
				await a.close()
				await b.close()
				for (const store of stores) await store.close()
			}
		})
	})

describe('MFA_REQUIRED=admins', () => {
	let t: TestApp
	beforeAll(async () => {
		t = await startTestApp({ MFA_REQUIRED: 'admins' }, database)
	})
	afterAll(() => t.close())

	test('an admin without a factor gets an enrolment-only session: enrolment, GET /users/me and logout work, the rest is 403', async () => {
		const admin = await signUpAdmin(t)
		expect(jwtPayload(admin.accessToken)).toMatchObject({ aal: 'aal1', amr: ['pwd'] })
		const refused = await t.call('GET', '/api/users', { token: admin.accessToken })
		expect(refused.body).toEqual(problem('mfa-enrollment-required', 403, '/api/users', 'Enrol a second factor first: this session serves only enrolment'))
		expect((await t.call('GET', '/api/audit-events', { token: admin.accessToken })).status).toBe(403)
		expect((await t.call('PUT', '/api/users/me', { json: { email: admin.email, name: 'x' }, token: admin.accessToken })).status).toBe(403)
		expect((await t.call('GET', '/api/users/me', { token: admin.accessToken })).status).toBe(200)
		expect((await t.call('GET', '/api/users/me/factors', { token: admin.accessToken })).status).toBe(200)

		// Enrolling and activating a factor lifts the restriction for this session (it just used the factor).
		const { secret } = await enrollTotp(t, admin)
		expect((await t.call('GET', '/api/users', { token: admin.accessToken })).status).toBe(200)
		// The next login asks for the factor and gets a full session.
		const mfaToken = await passwordStep(t, admin.email)
		await awayFromStepBoundary()
		const full = await completeWithTotp(t, mfaToken, totpCode(secret, 1))
		expect(jwtPayload(full.body.data.accessToken)).toMatchObject({ aal: 'aal2' })
		expect((await t.call('GET', '/api/users', { token: full.body.data.accessToken })).status).toBe(200)
		expect((await t.call('POST', '/api/auth/logout', { token: full.body.data.accessToken })).status).toBe(200)
	})

	test('a user who is not an admin is not restricted', async () => {
		const user = await signUp(t)
		expect((await t.call('GET', '/api/users/me/sessions', { token: user.accessToken })).status).toBe(200)
	})

	test('an enrolment-only session can log out, and its refresh keeps it enrolment-only', async () => {
		const admin = await signUpAdmin(t)
		const refreshed = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: admin.refreshToken } })
		expect((await t.call('GET', '/api/users', { token: refreshed.body.data.accessToken })).status).toBe(403)
		expect((await t.call('POST', '/api/auth/logout', { token: refreshed.body.data.accessToken })).status).toBe(200)
	})
})

describe('MFA_REQUIRED=all', () => {
	test('every account without a factor is enrolment-only', async () => {
		const t = await startTestApp({ MFA_REQUIRED: 'all' }, database)
		try {
			const user = await signUp(t)
			expect((await t.call('GET', '/api/users/me/sessions', { token: user.accessToken })).body.type).toEndWith('/mfa-enrollment-required')
			expect((await login(t, user.email, PASSWORD)).accessToken).toBeString()
		} finally {
			await t.close()
		}
	})
})
