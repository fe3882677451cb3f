import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { createLogger } from '../src/log'
import { RedisCounterStore } from '../src/http/counters'
import { problem, startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { PASSWORD, uniqueEmail } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

/** Set (CI sets it) to also prove that two instances share one budget through Redis. */
const TEST_REDIS_URL = process.env.TEST_REDIS_URL?.trim() || undefined

// Under app.handle there is no socket: with a trusted proxy the client is read from X-Forwarded-For.
const from = (ip: string) => ({ headers: { 'x-forwarded-for': ip } })

let database: TestDatabase
beforeAll(async () => {
	database = await createTestDatabase()
})
afterAll(() => database.drop())

describe('the general budget', () => {
	let t: TestApp
	beforeAll(async () => {
		t = await startTestApp({ RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW_SECONDS: '60', TRUST_PROXY: '10.0.0.0/8' }, database)
	})

	test('counts every request of a client, with RateLimit headers, then refuses with 429 problem+json and Retry-After', async () => {
		const seen = []
		for (let i = 0; i < 3; i++) {
			const res = await t.call('GET', '/api/users/me', from('203.0.113.1'))
			seen.push([res.status, res.headers.get('ratelimit-limit'), res.headers.get('ratelimit-remaining')])
			expect(Number(res.headers.get('ratelimit-reset'))).toBeGreaterThan(0)
			expect(res.headers.get('ratelimit-policy')).toBe('"default";q=3;w=60')
		}
		expect(seen).toEqual([
			[401, '3', '2'],
			[401, '3', '1'],
			[401, '3', '0'],
		])
		const refused = await t.call('GET', '/api/users/me', from('203.0.113.1'))
		expect(refused.status).toBe(429)
		expect(refused.headers.get('content-type')).toBe('application/problem+json')
		const retryAfter = refused.headers.get('retry-after')
		expect(Number(retryAfter)).toBeGreaterThan(0)
		expect(Number(retryAfter)).toBeLessThanOrEqual(60)
		expect(refused.body).toEqual(problem('rate-limited', 429, '/api/users/me', `Too many requests; try again in ${retryAfter} seconds`))
		expect(refused.headers.get('x-request-id')).toBeTruthy()
		expect(refused.headers.get('ratelimit')).toMatch(/^"default";r=0;t=\d+$/)
	})

	test('is per client address: another client is not affected', async () => {
		const other = await t.call('GET', '/api/users/me', from('203.0.113.2'))
		expect(other.status).toBe(401)
		expect(other.headers.get('ratelimit-remaining')).toBe('2')
	})

	test('uses the rightmost untrusted X-Forwarded-For address, so a client cannot pick its own key', async () => {
		for (let i = 0; i < 3; i++) await t.call('GET', '/api/users/me', from(`198.51.100.${i}, 203.0.113.9`))
		const spoofed = await t.call('GET', '/api/users/me', from('198.51.100.77, 203.0.113.9, 10.1.2.3'))
		expect(spoofed.status).toBe(429)
	})

	test('does not count the health probes', async () => {
		for (let i = 0; i < 5; i++) {
			const res = await t.call('GET', '/api/health/ready', from('203.0.113.1'))
			expect(res.status).toBe(200)
			expect(res.headers.get('ratelimit-limit')).toBeNull()
		}
		expect((await t.call('GET', '/api/health', from('203.0.113.1'))).status).toBe(200)
	})
})

describe('X-Forwarded-For without TRUST_PROXY', () => {
	test('is ignored: every app.handle caller shares the one unknown key', async () => {
		const t = await startTestApp({ RATE_LIMIT_MAX: '2' }, database)
		await t.call('GET', '/api/users/me', from('203.0.113.1'))
		await t.call('GET', '/api/users/me', from('203.0.113.2'))
		expect((await t.call('GET', '/api/users/me', from('203.0.113.3'))).status).toBe(429)
	})
})

describe('the /auth budget', () => {
	test('is stricter than the general one and applies only to /api/auth/*', async () => {
		const t = await startTestApp({ RATE_LIMIT_MAX: '100', AUTH_RATE_LIMIT_MAX: '2', TRUST_PROXY: '10.0.0.0/8' }, database)
		const login = () => t.call('POST', '/api/auth/login', { json: { email: uniqueEmail(), password: PASSWORD }, ...from('192.0.2.5') })
		expect((await login()).headers.get('ratelimit-limit')).toBe('2')
		expect((await login()).status).toBe(401)
		const refused = await login()
		expect(refused.status).toBe(429)
		expect(refused.body.type).toBe('https://latchkey.dev/problems/rate-limited')
		// The refusing budget's figures alone, not joined with the general budget's ("100, 2").
		expect(refused.headers.get('ratelimit-limit')).toBe('2')
		expect(refused.headers.get('ratelimit-remaining')).toBe('0')
		expect(refused.headers.get('ratelimit-policy')).toBe('"default";q=2;w=60')
		expect(refused.headers.get('ratelimit')).toMatch(/^"default";r=0;t=\d+$/)
		const elsewhere = await t.call('GET', '/api/users/me', from('192.0.2.5'))
		expect(elsewhere.status).toBe(401)
		expect(elsewhere.headers.get('ratelimit-limit')).toBe('100')
	})

	test('0 turns the limits off', async () => {
		const t = await startTestApp({ RATE_LIMIT_MAX: '0', AUTH_RATE_LIMIT_MAX: '0' }, database)
		for (let i = 0; i < 15; i++) {
			const res = await t.call('POST', '/api/auth/login', { json: { email: uniqueEmail(), password: PASSWORD } })
			expect(res.status).toBe(401)
			expect(res.headers.get('ratelimit-limit')).toBeNull()
		}
	})
})

describe('with Redis as the counter store', () => {
	test('an unreachable Redis fails open: requests are served and a warning is logged', async () => {
		const logs: string[] = []
		const log = createLogger('warn', { write: (line: string) => void logs.push(line) })
		const counters = new RedisCounterStore('redis://127.0.0.1:1', log)
		const t = await startTestApp({ RATE_LIMIT_MAX: '1', AUTH_RATE_LIMIT_MAX: '1', LOCKOUT_THRESHOLD: '1' }, database, { counters })
		for (let i = 0; i < 3; i++) expect((await t.call('GET', '/api/users/me')).status).toBe(401)
		expect((await t.call('POST', '/api/auth/login', { json: { email: 'x@example.test', password: PASSWORD } })).status).toBe(401)
		expect(logs.some((line) => line.includes('Redis unreachable'))).toBe(true)
		await counters.close()
	})

	if (TEST_REDIS_URL) {
		test('two instances share one budget', async () => {
			const prefix = `latchkey-test-${crypto.randomUUID()}:`
			const log = createLogger('silent')
			const first = new RedisCounterStore(TEST_REDIS_URL, log, prefix)
			const second = new RedisCounterStore(TEST_REDIS_URL, log, prefix)
			const env = { RATE_LIMIT_MAX: '4', TRUST_PROXY: '10.0.0.0/8' }
			const a = await startTestApp(env, database, { counters: first })
			const b = await startTestApp(env, database, { counters: second })
			const statuses = []
			for (const app of [a, b, a, b, a]) statuses.push((await app.call('GET', '/api/users/me', from('203.0.113.50'))).status)
			expect(statuses).toEqual([401, 401, 401, 401, 429])
			await first.close()
			await second.close()
		})
	}
})
