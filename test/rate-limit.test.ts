import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { createLogger } from '../src/log'
import { RedisCounterStore } from '../src/db/counters'
import { problem, startTestApp, type TestApp } from './support/app'
import { TcpProxy } from './support/tcp-proxy'
import { createTestDatabase, type TestDatabase } from './support/database'
import { PASSWORD, signUp, uniqueEmail } from './support/fixtures'

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

describe('every request counts, whatever its answer', () => {
	test('invalid logins (422), malformed JSON (400) and unknown routes (404) spend the budgets like any other request', async () => {
		const t = await startTestApp({ RATE_LIMIT_MAX: '100', AUTH_RATE_LIMIT_MAX: '3', TRUST_PROXY: '10.0.0.0/8' }, database)
		const who = from('192.0.2.61')
		const invalid = await t.call('POST', '/api/auth/login', { json: { email: 'x@example.test' }, ...who })
		expect(invalid.status).toBe(422)
		expect(invalid.headers.get('ratelimit-remaining')).toBe('2')
		const malformed = await t.call('POST', '/api/auth/login', { body: '{"email":', headers: { 'content-type': 'application/json', ...who.headers } })
		expect(malformed.status).toBe(400)
		expect(malformed.headers.get('ratelimit-remaining')).toBe('1')
		expect((await t.call('POST', '/api/auth/nowhere', { json: {}, ...who })).status).toBe(404)
		const refused = await t.call('POST', '/api/auth/login', { json: { email: 'x@example.test' }, ...who })
		expect(refused.status).toBe(429)
		expect(refused.body.type).toBe('https://latchkey.dev/problems/rate-limited')
	})

	test('refusals at the door (406, 415, 413, a repeated or NUL query parameter) count too, and keep their own answer', async () => {
		const t = await startTestApp({ RATE_LIMIT_MAX: '5', AUTH_RATE_LIMIT_MAX: '100', BODY_LIMIT_BYTES: '64', TRUST_PROXY: '10.0.0.0/8' }, database)
		const headers = { 'x-forwarded-for': '192.0.2.63' }
		const refusals = [
			await t.call('GET', '/api/users?limit=1', { headers: { ...headers, accept: 'text/html' } }),
			await t.call('POST', '/api/users', { body: 'email=x', headers: { ...headers, 'content-type': 'text/plain' } }),
			await t.call('POST', '/api/users', { json: { email: 'x'.repeat(100), password: 'y' }, headers }),
			await t.call('GET', '/api/users?limit=1&limit=2', { headers }),
			await t.call('GET', '/api/users?q=a%00b', { headers }),
		]
		expect(refusals.map((res) => [res.status, res.body.type.split('/').pop(), res.headers.get('ratelimit-remaining')])).toEqual([
			[406, 'not-acceptable', '4'],
			[415, 'unsupported-media-type', '3'],
			[413, 'payload-too-large', '2'],
			[400, 'bad-request', '1'],
			[400, 'bad-request', '0'],
		])
		expect((await t.call('GET', '/api/users', { headers: { ...headers, accept: 'text/html' } })).status).toBe(429)
	})

	test('404 and 405 answers count against the general budget', async () => {
		const t = await startTestApp({ RATE_LIMIT_MAX: '2', TRUST_PROXY: '10.0.0.0/8' }, database)
		const who = from('192.0.2.62')
		expect((await t.call('GET', '/api/no-such-route', who)).status).toBe(404)
		expect((await t.call('DELETE', '/api/users', who)).status).toBe(405)
		const refused = await t.call('GET', '/api/no-such-route', who)
		expect(refused.status).toBe(429)
		expect(refused.body).toEqual(problem('rate-limited', 429, '/api/no-such-route', expect.stringMatching(/^Too many requests/)))
	})
})

describe('every request that computes a password hash pays from the /auth budget', () => {
	test('sign-ups count, taken emails included', async () => {
		const t = await startTestApp({ RATE_LIMIT_MAX: '100', AUTH_RATE_LIMIT_MAX: '3', TRUST_PROXY: '10.0.0.0/8' }, database)
		const email = uniqueEmail('taken')
		const signUp = () => t.call('POST', '/api/users', { json: { email, password: PASSWORD }, ...from('192.0.2.71') })
		expect((await signUp()).status).toBe(201)
		expect((await signUp()).status).toBe(409)
		const third = await signUp()
		expect(third.status).toBe(409)
		expect(third.headers.get('ratelimit-limit')).toBe('3')
		expect((await signUp()).status).toBe(429)
		// Another client is not affected.
		expect((await t.call('POST', '/api/users', { json: { email, password: PASSWORD }, ...from('192.0.2.72') })).status).toBe(409)
	})

	test('a PUT that sets or checks a password counts; one that changes only the name does not', async () => {
		const t = await startTestApp({ RATE_LIMIT_MAX: '100', AUTH_RATE_LIMIT_MAX: '3', TRUST_PROXY: '10.0.0.0/8' }, database)
		const user = await signUp(t)
		const put = (json: Record<string, unknown>) => t.call('PUT', `/api/users/${user.id}`, { json, token: user.accessToken, ...from('192.0.2.73') })
		for (let i = 0; i < 5; i++) {
			const renamed = await put({ email: user.email, name: `name ${i}` })
			expect(renamed.status).toBe(200)
			expect(renamed.headers.get('ratelimit-limit')).toBe('100')
		}
		const wrong = { email: user.email, name: '', password: 'another fine passphrase', currentPassword: 'not the password' }
		expect((await put(wrong)).status).toBe(422)
		expect((await put(wrong)).status).toBe(422)
		expect((await put(wrong)).status).toBe(422)
		expect((await put(wrong)).status).toBe(429)
	})
})

describe('with Redis as the counter store', () => {
	test('with Redis unreachable, limits and lockout keep working in this instance’s memory, and the outage is logged once', async () => {
		const logs: string[] = []
		const log = createLogger('warn', { write: (line: string) => void logs.push(line) })
		const counters = new RedisCounterStore('redis://127.0.0.1:1', log)
		const t = await startTestApp({ RATE_LIMIT_MAX: '3', AUTH_RATE_LIMIT_MAX: '10', LOCKOUT_THRESHOLD: '1' }, database, { counters })
		expect((await t.call('GET', '/api/users/me')).status).toBe(401)
		expect((await t.call('POST', '/api/auth/login', { json: { email: 'x@example.test', password: PASSWORD } })).status).toBe(401)
		const locked = await t.call('POST', '/api/auth/login', { json: { email: 'x@example.test', password: PASSWORD } })
		expect(locked.status).toBe(429)
		expect(locked.body.type).toBe('https://latchkey.dev/problems/login-locked')
		expect((await t.call('GET', '/api/users/me')).status).toBe(429)
		expect(counters.shared).toBe(false)
		expect(logs.filter((line) => line.includes('Redis unreachable'))).toHaveLength(1)
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

		test('when Redis goes away the instances fall back to memory, and share again once it is back', async () => {
			const redis = new URL(TEST_REDIS_URL)
			const proxy = new TcpProxy({ hostname: redis.hostname, port: Number(redis.port || 6379) }).start()
			const logs: string[] = []
			const log = createLogger('info', { write: (line: string) => void logs.push(line) })
			const prefix = `latchkey-test-${crypto.randomUUID()}:`
			const via = `redis://127.0.0.1:${proxy.port}`
			const first = new RedisCounterStore(via, log, prefix)
			const second = new RedisCounterStore(via, log, prefix)
			const env = { RATE_LIMIT_MAX: '4', TRUST_PROXY: '10.0.0.0/8' }
			const a = await startTestApp(env, database, { counters: first })
			const b = await startTestApp(env, database, { counters: second })
			const statusesFrom = async (ip: string, apps: TestApp[]) => {
				const seen = []
				for (const app of apps) seen.push((await app.call('GET', '/api/users/me', from(ip))).status)
				return seen
			}
			expect(await statusesFrom('203.0.113.60', [a, b, a, b, a])).toEqual([401, 401, 401, 401, 429])

			proxy.cut()
			// Each instance counts on its own now: four each for a new client.
			expect(await statusesFrom('203.0.113.61', [a, a, a, a, a, b, b, b, b, b])).toEqual([
				401, 401, 401, 401, 429, 401, 401, 401, 401, 429,
			])
			expect(first.shared || second.shared).toBe(false)
			expect(logs.filter((line) => line.includes('Redis unreachable'))).toHaveLength(2)

			proxy.start()
			for (let waited = 0; !(first.shared && second.shared) && waited < 20_000; waited += 200) await Bun.sleep(200)
			expect(first.shared && second.shared).toBe(true)
			expect(logs.filter((line) => line.includes('Redis is back'))).toHaveLength(2)
			expect(await statusesFrom('203.0.113.62', [a, b, a, b, a])).toEqual([401, 401, 401, 401, 429])
			await first.close()
			await second.close()
			proxy.cut()
		})
	}
})
