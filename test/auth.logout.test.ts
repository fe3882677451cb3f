import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { problem, startTestApp, type CallOptions, type TestApp } from './support/app'
import { login, signUp, type Account } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const INVALID_TOKEN_CHALLENGE = 'Bearer realm="latchkey", error="invalid_token"'
const LOGGED_OUT = { data: null, message: 'Logged out', errors: [] }

let t: TestApp
beforeAll(async () => {
	t = await startTestApp()
})
afterAll(() => t.close())

/** One user with three sessions (three logins), and a bystander with a session of their own. */
async function threeSessions(): Promise<{ sessions: [Account, Account, Account]; bystander: Account }> {
	const first = await signUp(t)
	const second = await login(t, first.email)
	const third = await login(t, first.email)
	const bystander = await signUp(t)
	expect(new Set([first.sessionId, second.sessionId, third.sessionId]).size).toBe(3)
	return { sessions: [first, second, third], bystander }
}

/** Whether a session's access token and its refresh token are still accepted (checks access first: refresh rotates). */
async function accepted(account: Account): Promise<{ access: boolean; refresh: boolean }> {
	const me = await t.call('GET', '/api/users/me', { token: account.accessToken })
	const refreshed = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: account.refreshToken } })
	for (const [res, path] of [
		[me, '/api/users/me'],
		[refreshed, '/api/auth/refresh'],
	] as const) {
		if (res.status === 200) continue
		expect(res.status).toBe(401)
		expect(res.headers.get('www-authenticate')).toBe(INVALID_TOKEN_CHALLENGE)
		expect(res.body).toEqual(
			problem(
				'invalid-token',
				401,
				path,
				path === '/api/users/me'
					? 'The access token is invalid, expired or revoked'
					: 'The refresh token is invalid, expired or revoked',
			),
		)
	}
	return { access: me.status === 200, refresh: refreshed.status === 200 }
}

const LIVE = { access: true, refresh: true }
const REVOKED = { access: false, refresh: false }

async function logout(account: Account, options: CallOptions = {}) {
	const res = await t.call('POST', '/api/auth/logout', { token: account.accessToken, ...options })
	expect(res.status).toBe(200)
	expect(res.headers.get('content-type')).toStartWith('application/json')
	expect(res.body).toEqual(LOGGED_OUT)
	return res
}

describe('POST /api/auth/logout scopes', () => {
	test('with no body at all it logs out this session only', async () => {
		const { sessions, bystander } = await threeSessions()
		await logout(sessions[0])
		expect(await accepted(sessions[0])).toEqual(REVOKED)
		expect(await accepted(sessions[1])).toEqual(LIVE)
		expect(await accepted(sessions[2])).toEqual(LIVE)
		expect(await accepted(bystander)).toEqual(LIVE)
	})

	test('with an empty object it logs out this session only', async () => {
		const { sessions, bystander } = await threeSessions()
		await logout(sessions[1], { json: {} })
		expect(await accepted(sessions[1])).toEqual(REVOKED)
		expect(await accepted(sessions[0])).toEqual(LIVE)
		expect(await accepted(sessions[2])).toEqual(LIVE)
		expect(await accepted(bystander)).toEqual(LIVE)
	})

	test('scope local logs out this session only', async () => {
		const { sessions, bystander } = await threeSessions()
		await logout(sessions[2], { json: { scope: 'local' } })
		expect(await accepted(sessions[2])).toEqual(REVOKED)
		expect(await accepted(sessions[0])).toEqual(LIVE)
		expect(await accepted(sessions[1])).toEqual(LIVE)
		expect(await accepted(bystander)).toEqual(LIVE)
	})

	test('scope others logs out every other session of the user and keeps this one', async () => {
		const { sessions, bystander } = await threeSessions()
		await logout(sessions[0], { json: { scope: 'others' } })
		expect(await accepted(sessions[1])).toEqual(REVOKED)
		expect(await accepted(sessions[2])).toEqual(REVOKED)
		expect(await accepted(sessions[0])).toEqual(LIVE)
		expect(await accepted(bystander)).toEqual(LIVE)
	})

	test('scope global logs out every session of the user, this one included', async () => {
		const { sessions, bystander } = await threeSessions()
		await logout(sessions[1], { json: { scope: 'global' } })
		for (const session of sessions) expect(await accepted(session)).toEqual(REVOKED)
		expect(await accepted(bystander)).toEqual(LIVE)
	})

	test('a logged-out user can log in again to a new session', async () => {
		const account = await signUp(t)
		await logout(account, { json: { scope: 'global' } })
		const again = await login(t, account.email)
		expect(again.sessionId).not.toBe(account.sessionId)
		expect(await accepted(again)).toEqual(LIVE)
	})

	test('the access token of a logged-out session cannot log out again', async () => {
		const account = await signUp(t)
		await logout(account)
		const res = await t.call('POST', '/api/auth/logout', { token: account.accessToken })
		expect(res.status).toBe(401)
		expect(res.headers.get('www-authenticate')).toBe(INVALID_TOKEN_CHALLENGE)
		expect(res.body).toEqual(
			problem('invalid-token', 401, '/api/auth/logout', 'The access token is invalid, expired or revoked'),
		)
	})
})

describe('POST /api/auth/logout refusals', () => {
	test('without a token it is 401 with a bare Bearer challenge', async () => {
		const res = await t.call('POST', '/api/auth/logout')
		expect(res.status).toBe(401)
		expect(res.headers.get('www-authenticate')).toBe('Bearer realm="latchkey"')
		expect(res.headers.get('content-type')).toBe('application/problem+json')
		expect(res.body).toEqual(
			problem('unauthorized', 401, '/api/auth/logout', 'Send an access token: Authorization: Bearer <token>'),
		)
	})

	test('with an invalid token it is 401 with error="invalid_token"', async () => {
		const res = await t.call('POST', '/api/auth/logout', { token: 'not.a.token', json: { scope: 'global' } })
		expect(res.status).toBe(401)
		expect(res.headers.get('www-authenticate')).toBe(INVALID_TOKEN_CHALLENGE)
		expect(res.body).toEqual(
			problem('invalid-token', 401, '/api/auth/logout', 'The access token is invalid, expired or revoked'),
		)
	})

	test('an unknown scope is 422 pointing at #/scope, and logs nothing out', async () => {
		const { sessions } = await threeSessions()
		const res = await t.call('POST', '/api/auth/logout', { token: sessions[0].accessToken, json: { scope: 'everywhere' } })
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			problem('validation-error', 422, '/api/auth/logout', '1 field is invalid', [
				{ pointer: '#/scope', code: 'enum', detail: 'must be one of "local", "others", "global"' },
			]),
		)
		for (const session of sessions) expect(await accepted(session)).toEqual(LIVE)
	})

	test('a scope that is not a string is 422 pointing at #/scope', async () => {
		const account = await signUp(t)
		const res = await t.call('POST', '/api/auth/logout', { token: account.accessToken, json: { scope: 1 } })
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			problem('validation-error', 422, '/api/auth/logout', '1 field is invalid', [
				{ pointer: '#/scope', code: 'enum', detail: 'must be one of "local", "others", "global"' },
			]),
		)
		expect(await accepted(account)).toEqual(LIVE)
	})
})
