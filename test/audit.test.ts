import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { problem, startTestApp, type TestApp } from './support/app'
import { createTestDatabase } from './support/database'
import { PASSWORD, signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

let t: TestApp
let admin: Account
beforeAll(async () => {
	t = await startTestApp({ REFRESH_REUSE_GRACE_SECONDS: '0', LOCKOUT_THRESHOLD: '2', TRUST_PROXY: '10.0.0.0/8' })
	admin = await signUpAdmin(t)
})
afterAll(() => t.close())

const eventsOf = async (userId: string) => {
	const res = await t.call('GET', `/api/audit-events?userId=${userId}&limit=100`, { token: admin.accessToken })
	expect(res.status).toBe(200)
	return res.body.data.items as Array<Record<string, any>>
}

describe('the audit trail', () => {
	test('records the security events of an account, newest first, with actor, subject, IP, user agent and request id', async () => {
		const headers = { 'user-agent': 'audit-test/1.0', 'x-forwarded-for': '203.0.113.7', 'x-request-id': 'audit-req-1' }
		const email = uniqueEmail('audited')
		const created = await t.call('POST', '/api/users', { json: { email, password: PASSWORD }, headers })
		const userId = created.body.data.id
		await t.call('POST', '/api/auth/login', { json: { email, password: 'not the password' }, headers })
		const login = await t.call('POST', '/api/auth/login', { json: { email, password: PASSWORD }, headers })
		const { accessToken, refreshToken } = login.body.data
		const refreshed = await t.call('POST', '/api/auth/refresh', { json: { refreshToken }, headers })
		await t.call('POST', '/api/auth/refresh', { json: { refreshToken }, headers }) // reuse: session revoked
		const again = await t.call('POST', '/api/auth/login', { json: { email, password: PASSWORD }, headers })
		const token = again.body.data.accessToken
		await t.call('PUT', '/api/users/me', {
			json: { email, name: 'New Name', password: 'a brand new passphrase', currentPassword: PASSWORD },
			token,
			headers,
		})
		await t.call('PUT', `/api/users/${userId}`, { json: { email, name: 'New Name', role: 'admin' }, token: admin.accessToken })
		await t.call('POST', '/api/auth/logout', { json: { scope: 'global' }, token, headers })
		await t.call('DELETE', `/api/users/${userId}`, { token: admin.accessToken })

		const events = await eventsOf(userId)
		expect(events.map((event) => event.type)).toEqual([
			'user.deactivated',
			'logout',
			'role.changed',
			'password.changed',
			'login.succeeded',
			'token.reuse-detected',
			'token.refreshed',
			'login.succeeded',
			'login.failed',
			'user.signed-up',
		])
		const failed = events.find((event) => event.type === 'login.failed')
		expect(failed).toMatchObject({
			actorId: null,
			subjectId: userId,
			ip: '203.0.113.7',
			userAgent: 'audit-test/1.0',
			requestId: 'audit-req-1',
			details: { email, reason: 'wrong-password' },
		})
		expect(events.find((event) => event.type === 'role.changed')).toMatchObject({
			actorId: admin.id,
			subjectId: userId,
			details: { from: 'user', to: 'admin' },
		})
		const everything = JSON.stringify(events)
		for (const secret of [PASSWORD, 'a brand new passphrase', accessToken, refreshToken, refreshed.body.data.refreshToken, '$argon2'])
			expect(everything).not.toContain(secret)
	})

	test('records lockouts and failures for unknown emails, without the text that was typed (it may be a password)', async () => {
		const email = uniqueEmail('ghost')
		const requestIds = [0, 1, 2].map((i) => `ghost-${Bun.randomUUIDv7()}-${i}`)
		for (const requestId of requestIds) await t.call('POST', '/api/auth/login', { json: { email, password: 'whatever it is' }, headers: { 'x-request-id': requestId } })
		const ours = (items: Array<{ requestId: string | null }>) => items.filter((event) => event.requestId !== null && requestIds.includes(event.requestId))
		const locks = await t.call('GET', '/api/audit-events?type=login.locked&limit=100', { token: admin.accessToken })
		expect(ours(locks.body.data.items)).toEqual([expect.objectContaining({ type: 'login.locked', actorId: null, subjectId: null, details: {}, requestId: requestIds[1] })])
		const failures = await t.call('GET', '/api/audit-events?type=login.failed&limit=100', { token: admin.accessToken })
		expect(ours(failures.body.data.items).map((event) => [event.requestId, (event as unknown as { details: unknown }).details])).toEqual([
			[requestIds[2], { reason: 'locked' }],
			[requestIds[1], { reason: 'unknown-email' }],
			[requestIds[0], { reason: 'unknown-email' }],
		])
		expect(JSON.stringify([locks.body, failures.body])).not.toContain(email)
	})

	test('pages with a cursor and a Link header, and filters by time', async () => {
		const first = await t.call('GET', '/api/audit-events?limit=2', { token: admin.accessToken })
		expect(first.body.data.items).toHaveLength(2)
		expect(first.headers.get('link')).toContain('rel="next"')
		const second = await t.call('GET', `/api/audit-events?limit=2&cursor=${first.body.data.nextCursor}`, { token: admin.accessToken })
		expect(second.body.data.items[0].id < first.body.data.items[1].id).toBe(true)
		const future = await t.call('GET', '/api/audit-events?occurredAfter=2999-01-01T00:00:00Z', { token: admin.accessToken })
		expect(future.body.data).toEqual({ items: [], nextCursor: null, limit: 50 })
		const bad = await t.call('GET', '/api/audit-events?cursor=nope', { token: admin.accessToken })
		expect(bad.status).toBe(400)
		const unknown = await t.call('GET', '/api/audit-events?types=x', { token: admin.accessToken })
		expect(unknown.status).toBe(422)
	})

	test('a limit in anything but plain decimal digits is 422, and a repeated parameter 400, naming it', async () => {
		for (const limit of ['0x2', '1e0', '%202', '+2', '02']) {
			const res = await t.call('GET', `/api/audit-events?limit=${limit}`, { token: admin.accessToken })
			expect(res.status).toBe(422)
			expect(res.body).toEqual(
				problem('validation-error', 422, '/api/audit-events', '1 field is invalid', [
					{ pointer: '#/limit', code: 'type', detail: 'must be a whole number from 1 to 100' },
				]),
			)
		}
		for (const [query, name] of [
			['limit=1&limit=2', 'limit'],
			[`type=login.failed&type=login.locked`, 'type'],
		] as const) {
			const res = await t.call('GET', `/api/audit-events?${query}`, { token: admin.accessToken })
			expect(res.status).toBe(400)
			expect(res.body).toEqual(
				problem('bad-request', 400, '/api/audit-events', 'A query parameter is given more than once', [
					{ pointer: `#/${name}`, code: 'duplicate', detail: 'must be given at most once' },
				]),
			)
		}
	})

	test('is for admins only', async () => {
		const user = await signUp(t)
		expect((await t.call('GET', '/api/audit-events', { token: user.accessToken })).status).toBe(403)
		expect((await t.call('GET', '/api/audit-events')).status).toBe(401)
	})

	test('is append-only in the database itself', async () => {
		await expect(t.database.handle.db.execute(sql`update audit_events set type = 'x'`).then(() => 'updated')).rejects.toThrow()
		await expect(t.database.handle.db.execute(sql`delete from audit_events`).then(() => 'deleted')).rejects.toThrow()
	})

	test('a failure to write an event never fails the request it belongs to', async () => {
		const broken = await createTestDatabase()
		try {
			await broken.handle.db.execute(sql`drop table audit_events`)
			const app = await startTestApp({}, broken)
			const email = uniqueEmail()
			expect((await app.call('POST', '/api/users', { json: { email, password: PASSWORD } })).status).toBe(201)
			expect((await app.call('POST', '/api/auth/login', { json: { email, password: PASSWORD } })).status).toBe(200)
			expect(app.logs.some((line) => line.includes('audit event not written'))).toBe(true)
		} finally {
			await broken.drop()
		}
	})
})
