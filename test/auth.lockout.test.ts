import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { problem, startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { PASSWORD, signUp, uniqueEmail } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

let database: TestDatabase
let t: TestApp
beforeAll(async () => {
	database = await createTestDatabase()
	t = await startTestApp({ LOCKOUT_THRESHOLD: '3', LOCKOUT_WINDOW_SECONDS: '900', LOCKOUT_SECONDS: '900', TRUST_PROXY: '10.0.0.0/8' }, database)
})
afterAll(() => database.drop())

const attempt = (app: TestApp, email: string, password: string, ip = '203.0.113.10') =>
	app.call('POST', '/api/auth/login', { json: { email, password }, headers: { 'x-forwarded-for': ip } })

const locked = problem('login-locked', 429, '/api/auth/login', 'Too many failed logins for this account; try again later')

describe('per-account lockout', () => {
	test('after the threshold of failures the email is locked, right password or not, from any address', async () => {
		const { email } = await signUp(t)
		for (let i = 0; i < 3; i++) expect((await attempt(t, email, 'wrong password here', `198.51.100.${i}`)).status).toBe(401)

		const right = await attempt(t, email, PASSWORD, '192.0.2.200')
		const wrong = await attempt(t, email, 'wrong password here', '192.0.2.201')
		for (const res of [right, wrong]) {
			expect(res.status).toBe(429)
			expect(res.body).toEqual(locked)
			expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(890)
		}
		expect(right.text).toBe(wrong.text)
	})

	test('unknown emails are locked alike, so a lock reveals nothing', async () => {
		const email = uniqueEmail('nobody')
		for (let i = 0; i < 3; i++) expect((await attempt(t, email, 'whatever password')).status).toBe(401)
		expect((await attempt(t, email, 'whatever password')).body).toEqual(locked)
	})

	test('the email is matched as normalised: case and spaces do not escape the count', async () => {
		const { email } = await signUp(t)
		await attempt(t, email.toUpperCase(), 'wrong password here')
		await attempt(t, ` ${email} `, 'wrong password here')
		await attempt(t, email, 'wrong password here')
		expect((await attempt(t, email, PASSWORD)).status).toBe(429)
	})

	test('a successful login resets the count of failures', async () => {
		const { email } = await signUp(t)
		await attempt(t, email, 'wrong password here')
		await attempt(t, email, 'wrong password here')
		expect((await attempt(t, email, PASSWORD)).status).toBe(200)
		await attempt(t, email, 'wrong password here')
		await attempt(t, email, 'wrong password here')
		expect((await attempt(t, email, PASSWORD)).status).toBe(200)
	})

	test('other accounts are not affected', async () => {
		const victim = await signUp(t)
		for (let i = 0; i < 3; i++) await attempt(t, victim.email, 'wrong password here')
		const bystander = await signUp(t)
		expect((await attempt(t, bystander.email, PASSWORD)).status).toBe(200)
	})

	test('the lock ends after LOCKOUT_SECONDS', async () => {
		const short = await startTestApp({ LOCKOUT_THRESHOLD: '2', LOCKOUT_SECONDS: '1' }, database)
		const { email } = await signUp(short)
		await attempt(short, email, 'wrong password here')
		await attempt(short, email, 'wrong password here')
		expect((await attempt(short, email, PASSWORD)).status).toBe(429)
		await Bun.sleep(1100)
		expect((await attempt(short, email, PASSWORD)).status).toBe(200)
	})

	test('LOCKOUT_THRESHOLD=0 turns the lockout off', async () => {
		const off = await startTestApp({ LOCKOUT_THRESHOLD: '0' }, database)
		const { email } = await signUp(off)
		for (let i = 0; i < 8; i++) expect((await attempt(off, email, 'wrong password here')).status).toBe(401)
		expect((await attempt(off, email, PASSWORD)).status).toBe(200)
	})
})
