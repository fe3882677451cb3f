import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { problem, startTestApp, TEST_PEER, type TestApp } from './support/app'
import { jwtPayload, PASSWORD, signUp, signUpAdmin, type Account } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
/** The proxy in front of the app: with it trusted, X-Forwarded-For names the client (app.handle has no socket). */
const PROXY = '10.0.0.0/8'

let t: TestApp
beforeAll(async () => {
	t = await startTestApp({ TRUST_PROXY: PROXY })
})
afterAll(() => t.close())

interface Session {
	id: string
	createdAt: string
	lastUsedAt: string
	expiresAt: string
	revokedAt: string | null
	ip: string | null
	userAgent: string | null
	current: boolean
}

/** Logs in from a given client, the way a browser behind the proxy would. */
async function loginFrom(email: string, client: { ip: string; userAgent: string }): Promise<Account> {
	const res = await t.call('POST', '/api/auth/login', {
		json: { email, password: PASSWORD },
		headers: { 'user-agent': client.userAgent, 'x-forwarded-for': `${client.ip}, 10.1.2.3` },
	})
	expect(res.status).toBe(200)
	const { accessToken, refreshToken, user } = res.body.data
	return { id: user.id, email, password: PASSWORD, accessToken, refreshToken, sessionId: String(jwtPayload(accessToken).sid) }
}

const sessionsOf = (target: string, caller: Account) => t.call('GET', `/api/users/${target}/sessions`, { token: caller.accessToken })
const revoke = (target: string, sessionId: string, caller: Account) =>
	t.call('DELETE', `/api/users/${target}/sessions/${sessionId}`, { token: caller.accessToken })
const me = (caller: Account) => t.call('GET', '/api/users/me', { token: caller.accessToken })

describe('GET /users/{id}/sessions', () => {
	test("lists the caller's active sessions with ip and user agent and the current one marked", async () => {
		const user = await signUp(t)
		const laptop = await loginFrom(user.email, { ip: '203.0.113.7', userAgent: 'SessionsTest/1.0 (laptop)' })
		const phone = await loginFrom(user.email, { ip: '2001:db8::42', userAgent: 'SessionsTest/1.0 (phone)' })

		const res = await sessionsOf('me', laptop)
		expect(res.status).toBe(200)
		expect(res.headers.get('cache-control')).toBe('no-store')
		const session = (id: string, ip: string | null, userAgent: string | null, current: boolean) => ({
			id,
			createdAt: expect.stringMatching(ISO_UTC),
			lastUsedAt: expect.stringMatching(ISO_UTC),
			expiresAt: expect.stringMatching(ISO_UTC),
			revokedAt: null,
			ip,
			userAgent,
			current,
		})
		expect(res.body).toEqual({ data: { items: expect.any(Array) }, message: 'Sessions', errors: [] })
		// API.md promises no order; compare by id.
		const byId = (a: { id: string }, b: { id: string }) => a.id.localeCompare(b.id)
		expect([...res.body.data.items].sort(byId)).toEqual(
			[
				session(phone.sessionId, '2001:db8::42', 'SessionsTest/1.0 (phone)', false),
				session(laptop.sessionId, '203.0.113.7', 'SessionsTest/1.0 (laptop)', true),
				// Signed up with no X-Forwarded-For: the peer itself, the proxy, is the client.
				session(user.sessionId, TEST_PEER, null, false),
			].sort(byId),
		)
		for (const item of res.body.data.items as Session[])
			expect(Date.parse(item.expiresAt) - Date.parse(item.createdAt)).toBe(t.config.jwt.refreshTtlSeconds * 1000)
	})

	test('by id and by `me` it is the same list, with the current session seen from the caller', async () => {
		const user = await signUp(t)
		const byMe = await sessionsOf('me', user)
		const byId = await sessionsOf(user.id, user)
		expect(byId.status).toBe(200)
		expect(byId.body).toEqual(byMe.body)
		expect(byMe.body.data.items).toEqual([expect.objectContaining({ id: user.sessionId, current: true })])
	})

	test("an admin sees another user's sessions, none of them current", async () => {
		const user = await signUp(t)
		const admin = await signUpAdmin(t)
		const res = await sessionsOf(user.id, admin)
		expect(res.status).toBe(200)
		expect(res.body.data.items).toEqual([expect.objectContaining({ id: user.sessionId, current: false })])
	})

	test('sessions ended by logout are not listed', async () => {
		const user = await signUp(t)
		const other = await loginFrom(user.email, { ip: '198.51.100.1', userAgent: 'SessionsTest/1.0' })
		expect((await t.call('POST', '/api/auth/logout', { token: other.accessToken })).status).toBe(200)
		const res = await sessionsOf('me', user)
		expect(res.body.data.items.map((item: Session) => item.id)).toEqual([user.sessionId])
	})

	test('an admin listing the sessions of an id that does not exist gets 404', async () => {
		const admin = await signUpAdmin(t)
		const id = Bun.randomUUIDv7()
		const res = await sessionsOf(id, admin)
		expect(res.status).toBe(404)
		expect(res.body).toEqual(problem('not-found', 404, `/api/users/${id}/sessions`, 'No user with this id'))
	})
})

describe('DELETE /users/{id}/sessions/{sessionId}', () => {
	test('revokes that session, returns it with revokedAt, and its access token gets 401 at once', async () => {
		const user = await signUp(t)
		const other = await loginFrom(user.email, { ip: '192.0.2.10', userAgent: 'SessionsTest/2.0 (tablet)' })

		const res = await revoke('me', other.sessionId, user)
		expect(res.status).toBe(200)
		expect(res.body).toEqual({
			data: {
				id: other.sessionId,
				createdAt: expect.stringMatching(ISO_UTC),
				lastUsedAt: expect.stringMatching(ISO_UTC),
				expiresAt: expect.stringMatching(ISO_UTC),
				revokedAt: expect.stringMatching(ISO_UTC),
				ip: '192.0.2.10',
				userAgent: 'SessionsTest/2.0 (tablet)',
				current: false,
			},
			message: 'Session revoked',
			errors: [],
		})

		const refused = await me(other)
		expect(refused.status).toBe(401)
		expect(refused.headers.get('www-authenticate')).toBe('Bearer realm="latchkey", error="invalid_token"')
		expect(refused.body).toEqual(problem('invalid-token', 401, '/api/users/me', 'The access token is invalid, expired or revoked'))
		const refreshed = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: other.refreshToken } })
		expect(refreshed.status).toBe(401)

		expect((await me(user)).status).toBe(200)
	})

	test('a revoked session is no longer listed', async () => {
		const user = await signUp(t)
		const other = await loginFrom(user.email, { ip: '192.0.2.11', userAgent: 'SessionsTest/2.0' })
		expect((await sessionsOf('me', user)).body.data.items).toHaveLength(2)
		expect((await revoke(user.id, other.sessionId, user)).status).toBe(200)
		const res = await sessionsOf('me', user)
		expect(res.body.data.items.map((item: Session) => item.id)).toEqual([user.sessionId])
	})

	test('revoking the current session logs the caller out', async () => {
		const user = await signUp(t)
		const res = await revoke('me', user.sessionId, user)
		expect(res.status).toBe(200)
		expect(res.body.data).toMatchObject({ id: user.sessionId, current: true, revokedAt: expect.stringMatching(ISO_UTC) })
		expect((await me(user)).status).toBe(401)
	})

	test("another user's session id is 404, and that session lives on", async () => {
		const user = await signUp(t)
		const stranger = await signUp(t)
		const res = await revoke('me', stranger.sessionId, user)
		expect(res.status).toBe(404)
		expect(res.body).toEqual(problem('not-found', 404, `/api/users/me/sessions/${stranger.sessionId}`, 'No such session for this user'))
		expect((await me(stranger)).status).toBe(200)
	})

	test("an admin naming a session under the wrong user gets 404, and that session lives on", async () => {
		const owner = await signUp(t)
		const bystander = await signUp(t)
		const admin = await signUpAdmin(t)
		const res = await revoke(bystander.id, owner.sessionId, admin)
		expect(res.status).toBe(404)
		expect(res.body).toEqual(
			problem('not-found', 404, `/api/users/${bystander.id}/sessions/${owner.sessionId}`, 'No such session for this user'),
		)
		expect((await me(owner)).status).toBe(200)
	})

	test("an admin revokes a user's session", async () => {
		const user = await signUp(t)
		const admin = await signUpAdmin(t)
		const res = await revoke(user.id, user.sessionId, admin)
		expect(res.status).toBe(200)
		expect(res.body.data).toMatchObject({ id: user.sessionId, current: false, revokedAt: expect.stringMatching(ISO_UTC) })
		expect((await me(user)).status).toBe(401)
		expect((await me(admin)).status).toBe(200)
	})

	test('a session id that does not exist is 404', async () => {
		const user = await signUp(t)
		const id = Bun.randomUUIDv7()
		const res = await revoke('me', id, user)
		expect(res.status).toBe(404)
		expect(res.body).toEqual(problem('not-found', 404, `/api/users/me/sessions/${id}`, 'No such session for this user'))
	})

	test('a session id that is not a UUID is 422 at #/sessionId', async () => {
		const user = await signUp(t)
		const res = await revoke('me', 'current', user)
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			problem('validation-error', 422, '/api/users/me/sessions/current', '1 field is invalid', [
				{ pointer: '#/sessionId', code: 'format', detail: 'must be a UUID' },
			]),
		)
	})
})
