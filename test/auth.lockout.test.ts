import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { MemoryCounterStore, type Count } from '../src/db/counters'
import { problem, startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { PASSWORD, signUp, signUpAdmin, uniqueEmail } from './support/fixtures'

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

describe('guesses sent in parallel', () => {
	const statuses = (results: Array<{ status: number }>) => results.map((res) => res.status)
	const evaluated = (results: Array<{ status: number }>) => results.filter((res) => res.status !== 429).length

	test('of twenty wrong guesses fired together, no more than the threshold are evaluated; the rest are login-locked', async () => {
		const { email } = await signUp(t)
		const results = await Promise.all(Array.from({ length: 20 }, (_, i) => attempt(t, email, `wrong guess number ${i}`, `198.51.100.${i}`)))
		expect(evaluated(results)).toBeLessThanOrEqual(3)
		expect(statuses(results).filter((status) => status === 401)).toHaveLength(evaluated(results))
		for (const res of results.filter((res) => res.status === 429)) expect(res.body).toEqual(locked)
		expect((await attempt(t, email, PASSWORD)).status).toBe(429)
	})

	test('the right password hidden among parallel wrong guesses is evaluated only if it is among the first threshold', async () => {
		const { email } = await signUp(t)
		const guesses = Array.from({ length: 19 }, (_, i) => `wrong guess number ${i}`)
		guesses.splice(10, 0, PASSWORD)
		const results = await Promise.all(guesses.map((guess) => attempt(t, email, guess)))
		// Before the fix every guess was checked, so the right one always logged in.
		expect(evaluated(results)).toBeLessThanOrEqual(3)
		expect(results.filter((res) => res.status === 200).length).toBeLessThanOrEqual(1)
	})

	test('a wrong currentPassword counts as a failed login of that account: the threshold locks PUT and login alike', async () => {
		const user = await signUp(t)
		const change = (currentPassword: string) =>
			t.call('PUT', `/api/users/${user.id}`, {
				json: { email: user.email, name: '', password: 'a brand new passphrase 1', currentPassword },
				token: user.accessToken,
			})
		const results = await Promise.all(Array.from({ length: 12 }, (_, i) => change(`not my password ${i}`)))
		expect(evaluated(results)).toBeLessThanOrEqual(3)
		for (const res of results.filter((res) => res.status !== 429))
			expect(res.body.errors).toEqual([{ pointer: '#/currentPassword', code: 'mismatch', detail: 'is not your current password' }])
		for (const res of results.filter((res) => res.status === 429))
			expect(res.body).toEqual({ ...locked, instance: `/api/users/${user.id}` })
		// The right current password is refused too while the account is locked, and so is a login.
		expect((await change(PASSWORD)).status).toBe(429)
		expect((await attempt(t, user.email, PASSWORD)).status).toBe(429)
		const admin = await signUpAdmin(t)
		const audit = await t.call('GET', `/api/audit-events?userId=${user.id}&type=login.failed&limit=100`, { token: admin.accessToken })
		const reasons = (audit.body.data.items as Array<{ details: { reason: string } }>).map((event) => event.details.reason)
		expect(reasons.filter((reason) => reason === 'wrong-current-password')).toHaveLength(evaluated(results))
		const locks = await t.call('GET', `/api/audit-events?userId=${user.id}&type=login.locked`, { token: admin.accessToken })
		expect(locks.body.data.items).toHaveLength(1)
	})
})

/** Real in-memory counters whose next lockout count can be held back: a guess caught between its lock check and its count. */
class HeldCounterStore extends MemoryCounterStore {
	private hold: { reached: () => void; go: Promise<void> } | undefined

	/** The next count of a failed-login key waits for the returned release; `reached` resolves once it waits. */
	holdNextFailureCount(): { reached: Promise<void>; release: () => void } {
		let reached!: () => void
		let release!: () => void
		const whenReached = new Promise<void>((resolve) => (reached = resolve))
		this.hold = { reached, go: new Promise<void>((resolve) => (release = resolve)) }
		return { reached: whenReached, release }
	}

	override async increment(key: string, windowMs: number): Promise<Count> {
		const hold = key.startsWith('lockout:fail:') ? this.hold : undefined
		if (hold) {
			this.hold = undefined
			hold.reached()
			await hold.go
		}
		return super.increment(key, windowMs)
	}
}

describe('a guess that passed the lock check before the lock was set', () => {
	const counters = new HeldCounterStore()
	let held: TestApp
	beforeAll(async () => {
		held = await startTestApp({ LOCKOUT_THRESHOLD: '3', LOCKOUT_WINDOW_SECONDS: '900', LOCKOUT_SECONDS: '900' }, database, { counters })
	})
	afterAll(() => held.close())

	test('is refused once the threshold\'s failures locked the account, not judged as the first of a new count', async () => {
		const { email } = await signUp(held)
		const { reached, release } = counters.holdNextFailureCount()
		// This guess finds no lock, then waits before it is counted.
		const late = attempt(held, email, 'a late wrong guess')
		await reached
		// Meanwhile three wrong guesses lock the account (and start its count afresh).
		for (let i = 0; i < 3; i++) expect((await attempt(held, email, `wrong guess ${i}`)).status).toBe(401)
		release()
		const answer = await late
		expect(answer.status).toBe(429)
		expect(answer.body).toEqual(locked)
		expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(890)
		// Nothing was counted for it: the lock holds, and after it the count starts from zero.
		expect((await attempt(held, email, PASSWORD)).status).toBe(429)
	})
})
