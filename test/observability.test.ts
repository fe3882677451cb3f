import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { Metrics } from '../src/http/metrics'
import { createLogger } from '../src/log'
import { SessionUpkeep } from '../src/modules/auth/session-upkeep'
import { problem, startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { PASSWORD, signUp, signUpAdmin, uniqueEmail } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const METRICS_TOKEN = 'metrics-token-for-tests-0123456789'
let database: TestDatabase
let t: TestApp
beforeAll(async () => {
	database = await createTestDatabase()
	t = await startTestApp({ METRICS_TOKEN, LOCKOUT_THRESHOLD: '2', AUTH_RATE_LIMIT_MAX: '50', TRUST_PROXY: '10.0.0.0/8' }, database)
})
afterAll(() => database.drop())

// Request lines are written after the response is sent (onAfterResponse): let them land.
const settle = () => Bun.sleep(50)
const logLines = (app: TestApp) => app.logs.map((line) => JSON.parse(line) as Record<string, unknown>)

describe('request logs', () => {
	test('a full flow writes one JSON line per request, and never a password, token or hash', async () => {
		const email = uniqueEmail('logged')
		const newPassword = 'another long passphrase'
		const before = t.logs.length
		const created = await t.call('POST', '/api/users', { json: { email, password: PASSWORD }, headers: { 'x-request-id': 'log-1' } })
		const login = await t.call('POST', '/api/auth/login', { json: { email, password: PASSWORD } })
		const { accessToken, refreshToken } = login.body.data
		await t.call('PUT', '/api/users/me', { json: { email, name: 'L', password: newPassword, currentPassword: PASSWORD }, token: accessToken })
		const refreshed = await t.call('POST', '/api/auth/refresh', { json: { refreshToken } })
		await t.call('POST', '/api/auth/login', { json: { email, password: 'wrong password here' } })
		await t.call('POST', '/api/auth/logout', { token: refreshed.body.data.accessToken })
		await t.call('GET', `/api/users/${created.body.data.id}`, { token: 'not-a-token' })

		await settle()
		const lines = logLines(t).slice(before).filter((line) => line.msg === 'request')
		expect(lines).toHaveLength(7)
		expect(lines[0]).toMatchObject({ level: 'info', requestId: 'log-1', method: 'POST', route: '/api/users', status: 201 })
		expect(typeof lines[0]?.durationMs).toBe('number')
		expect(typeof lines[0]?.time).toBe('string')
		expect(lines[2]).toMatchObject({ method: 'PUT', route: '/api/users/:id', status: 200, userId: created.body.data.id })
		expect(lines[6]).toMatchObject({ route: '/api/users/:id', status: 401 })

		const everything = t.logs.join('\n')
		for (const secret of [PASSWORD, newPassword, accessToken, refreshToken, refreshed.body.data.refreshToken, refreshed.body.data.accessToken, '$argon2'])
			expect(everything).not.toContain(secret)
	})

	test('a secret passed to the logger by mistake is redacted where such values travel', () => {
		const lines: string[] = []
		const log = createLogger('info', { write: (line: string) => void lines.push(line) })
		log.info(
			{
				password: 'p1',
				accessToken: 'a1',
				refreshToken: 'r1',
				authorization: 'Bearer t1',
				body: { password: 'p2', currentPassword: 'p3', refreshToken: 'r2' },
				headers: { authorization: 'Bearer t2', cookie: 'c1' },
				req: { headers: { authorization: 'Bearer t3', cookie: 'c2' } },
			},
			'mistake',
		)
		const [line] = lines.map((text) => JSON.parse(text))
		expect(line).toMatchObject({
			password: '[redacted]',
			accessToken: '[redacted]',
			refreshToken: '[redacted]',
			authorization: '[redacted]',
			body: { password: '[redacted]', currentPassword: '[redacted]', refreshToken: '[redacted]' },
			headers: { authorization: '[redacted]', cookie: '[redacted]' },
			req: { headers: { authorization: '[redacted]', cookie: '[redacted]' } },
		})
		for (const secret of ['p1', 'p2', 'p3', 'a1', 'r1', 'r2', 't1', 't2', 't3', 'c1', 'c2']) expect(lines[0]).not.toContain(`"${secret}"`)
	})

	test('LOG_LEVEL=warn leaves out the per-request lines', async () => {
		const quiet = await startTestApp({ LOG_LEVEL: 'warn' }, database)
		await quiet.call('GET', '/api/health')
		await settle()
		expect(quiet.logs).toEqual([])
	})
})

describe('GET /metrics', () => {
	test('needs the metrics token, compared as a whole', async () => {
		const none = await t.call('GET', '/metrics')
		expect(none.status).toBe(401)
		expect(none.body).toEqual(problem('unauthorized', 401, '/metrics', 'Send the metrics token: Authorization: Bearer <token>'))
		expect((await t.call('GET', '/metrics', { token: `${METRICS_TOKEN}x` })).status).toBe(401)
		expect((await t.call('GET', '/metrics', { token: METRICS_TOKEN.slice(0, -1) })).status).toBe(401)
	})

	test('reports requests by route and status, latency, login outcomes, active sessions, refusals, the pool and background jobs', async () => {
		const admin = await signUpAdmin(t)
		const email = uniqueEmail('metered')
		await t.call('POST', '/api/users', { json: { email, password: PASSWORD } })
		await t.call('POST', '/api/auth/login', { json: { email, password: 'wrong password here' } })
		await t.call('POST', '/api/auth/login', { json: { email, password: 'wrong password here' } })
		await t.call('POST', '/api/auth/login', { json: { email, password: PASSWORD } })
		await t.call('GET', '/api/users/me', { token: admin.accessToken })
		await t.app.decorator.sessionUpkeep.refreshGauge()
		// The sign-up's verification mail (written to the log: no SMTP_URL in tests).
		await t.app.decorator.jobs.idle()

		await settle()
		const res = await t.call('GET', '/metrics', { token: METRICS_TOKEN, headers: { accept: 'text/plain;version=0.0.4' } })
		expect(res.status).toBe(200)
		expect(res.headers.get('content-type')).toStartWith('text/plain')
		const text = res.text
		expect(text).toMatch(/latchkey_http_requests_total\{method="GET",route="\/api\/users\/:id",status="200"\} \d+/)
		expect(text).toMatch(/latchkey_http_request_duration_seconds_bucket\{le="0.005",method="POST",route="\/api\/auth\/login",status="401"\} \d+/)
		expect(text).toMatch(/latchkey_logins_total\{outcome="succeeded"\} [1-9]/)
		expect(text).toMatch(/latchkey_logins_total\{outcome="failed"\} [1-9]/)
		expect(text).toMatch(/latchkey_logins_total\{outcome="locked"\} [1-9]/)
		expect(text).toMatch(/latchkey_active_sessions [1-9]/)
		expect(text).toContain('latchkey_db_pool_max_connections')
		expect(text).toContain('latchkey_rate_limit_refusals_total')
		expect(text).toMatch(/latchkey_jobs_total\{queue="mail",outcome="done"\} [1-9]/)
	})

	test('counts rate-limit refusals, and the refused request as a 429 in the request counter', async () => {
		const limited = await startTestApp({ METRICS_TOKEN, RATE_LIMIT_MAX: '1' }, database)
		await limited.call('GET', '/api/users/me')
		expect((await limited.call('GET', '/api/users/me')).status).toBe(429)
		await settle()
		const text = (await limited.call('GET', '/metrics', { token: METRICS_TOKEN })).text
		expect(text).toMatch(/latchkey_rate_limit_refusals_total\{budget="general"\} 1/)
		expect(text).toMatch(/latchkey_http_requests_total\{method="GET",route="\/api\/users\/:id",status="429"\} 1/)
		expect(text).not.toMatch(/latchkey_http_requests_total\{method="GET",route="\/api\/users\/:id",status="200"\}/)
		expect(limited.logs.some((line) => line.includes('"status":429') && line.includes('"route":"/api/users/:id"'))).toBe(true)
	})

	test('a scrape without the metrics token counts against the general budget; one with it does not', async () => {
		const limited = await startTestApp({ METRICS_TOKEN, RATE_LIMIT_MAX: '2' }, database)
		for (let i = 0; i < 5; i++) expect((await limited.call('GET', '/metrics', { token: METRICS_TOKEN })).status).toBe(200)
		expect((await limited.call('GET', '/metrics')).status).toBe(401)
		expect((await limited.call('GET', '/metrics', { token: 'not-the-metrics-token' })).status).toBe(401)
		expect((await limited.call('GET', '/metrics')).status).toBe(429)
	})

	test('is off unless enabled', async () => {
		const off = await startTestApp({}, database)
		expect((await off.call('GET', '/metrics')).status).toBe(404)
	})
})

describe('latchkey_active_sessions', () => {
	const scrape = async (app: TestApp) => {
		const res = await app.call('GET', '/metrics', { token: METRICS_TOKEN })
		expect(res.status).toBe(200)
		const value = /^latchkey_active_sessions (\d+)$/m.exec(res.text)?.[1]
		if (value === undefined) throw new Error('no latchkey_active_sessions sample')
		return Number(value)
	}
	const liveSessions = async (db: TestDatabase) => {
		const result = await db.handle.db.execute(sql`select count(*)::int as n from sessions where revoked_at is null and expires_at > now()`)
		const rows = ((result as { rows?: unknown[] }).rows ?? (result as unknown[])) as Array<{ n: number }>
		return Number(rows[0]?.n)
	}

	test('is the last background count: scrapes between two counts report the same value', async () => {
		const upkeep = t.app.decorator.sessionUpkeep
		await upkeep.refreshGauge()
		const counted = await scrape(t)
		expect(counted).toBe(await liveSessions(database))

		await signUp(t)
		await signUp(t)
		for (let i = 0; i < 3; i++) expect(await scrape(t)).toBe(counted)

		await upkeep.refreshGauge()
		expect(await scrape(t)).toBe(counted + 2)
	})

	test('a scrape reads no table: it answers from the last count with the database gone, while failed counts are logged and retried', async () => {
		const own = await createTestDatabase()
		const app = await startTestApp({ METRICS_TOKEN }, own)
		await signUp(app)
		await app.app.decorator.sessionUpkeep.refreshGauge()
		await own.drop()
		expect(await scrape(app)).toBe(1)

		// The background loops on the dead database, quickly: every round fails, none escapes, each is retried.
		const lines: string[] = []
		const metrics = new Metrics({ poolMax: 1 })
		metrics.setActiveSessions(7)
		const upkeep = new SessionUpkeep({
			db: own.handle.db,
			log: createLogger('info', { write: (line: string) => void lines.push(line) }),
			retentionSeconds: 0,
			metrics,
			purgeIntervalSeconds: 0.01,
			gaugeIntervalSeconds: 0.01,
		})
		const failures = (name: string) => lines.filter((line) => line.includes(`"${name} failed; retrying next round"`)).length
		upkeep.start()
		for (let i = 0; i < 400 && (failures('session purge') < 2 || failures('active-session count') < 2); i++) await Bun.sleep(25)
		await upkeep.stop()
		expect(failures('session purge')).toBeGreaterThanOrEqual(2)
		expect(failures('active-session count')).toBeGreaterThanOrEqual(2)
		expect(JSON.parse(lines[0] ?? '{}')).toMatchObject({ level: 'warn', error: { name: expect.any(String) } })
		for (const line of lines) expect(line).not.toMatch(/Failed query|select |delete from|refresh_tokens|params/i)
		expect((await metrics.registry.getSingleMetricAsString('latchkey_active_sessions')).split('\n')).toContain('latchkey_active_sessions 7')
	}, 120_000) // a fresh embedded database takes seconds to create

	test('the count starts with the server, and stops with it', async () => {
		const app = await startTestApp({ METRICS_TOKEN }, database)
		await signUp(app)
		// Never counted yet: a scrape does not count.
		expect(await scrape(app)).toBe(0)
		const expected = await liveSessions(database)
		app.app.listen({ port: 0, hostname: '127.0.0.1' })
		try {
			let reported = await scrape(app)
			for (let i = 0; i < 400 && reported !== expected; i++) {
				await Bun.sleep(25)
				reported = await scrape(app)
			}
			expect(reported).toBe(expected)
		} finally {
			await app.app.stop()
		}
	})
})
