import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { problem, startTestApp, type CallResult, type TestApp } from './support/app'
import { jwtPayload, login, signUp, type Account, tokenEnvelope } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const REFUSED_REFRESH = 'The refresh token is invalid, expired or revoked'
const REFUSED_ACCESS = 'The access token is invalid, expired or revoked'
const INVALID_TOKEN_CHALLENGE = 'Bearer realm="latchkey", error="invalid_token"'
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/

/** The default app: a 10 s grace interval for refresh retries. */
let t: TestApp
/** The same service and database with no grace interval. */
let strict: TestApp
beforeAll(async () => {
	t = await startTestApp()
	strict = await startTestApp({ REFRESH_REUSE_GRACE_SECONDS: '0' }, t.database)
})
afterAll(async () => {
	await strict?.close()
	await t?.close()
})

const refresh = (app: TestApp, refreshToken: unknown) => app.call('POST', '/api/auth/refresh', { json: { refreshToken } })
const me = (app: TestApp, token: string) => app.call('GET', '/api/users/me', { token })

function expectRefusedRefresh(res: CallResult) {
	expect(res.status).toBe(401)
	expect(res.headers.get('www-authenticate')).toBe(INVALID_TOKEN_CHALLENGE)
	expect(res.body).toEqual(problem('invalid-token', 401, '/api/auth/refresh', REFUSED_REFRESH))
}

function expectRefusedAccess(res: CallResult) {
	expect(res.status).toBe(401)
	expect(res.headers.get('www-authenticate')).toBe(INVALID_TOKEN_CHALLENGE)
	expect(res.body).toEqual(problem('invalid-token', 401, '/api/users/me', REFUSED_ACCESS))
}

describe('rotation', () => {
	test('a refresh returns a new pair of the same shape as login, for the same session', async () => {
		const account = await signUp(t)
		const res = await refresh(t, account.refreshToken)
		expect(res.status).toBe(200)
		expect(res.headers.get('cache-control')).toBe('no-store')
		expect(res.headers.get('content-type')).toStartWith('application/json')
		expect(res.body).toEqual(tokenEnvelope({ ...account, name: 'Test User' }, 'Tokens refreshed'))

		const { accessToken, refreshToken } = res.body.data
		expect(refreshToken).not.toBe(account.refreshToken)
		expect(accessToken).not.toBe(account.accessToken)
		expect(refreshToken).toMatch(/^[A-Za-z0-9_-]{43,}$/)
		const claims = jwtPayload(accessToken)
		const before = jwtPayload(account.accessToken)
		expect(claims.sid).toBe(account.sessionId)
		expect(claims.sub).toBe(account.id)
		expect(claims.jti).not.toBe(before.jti)
		expect(claims.exp).toBe((claims.iat as number) + 900)

		const self = await me(t, accessToken)
		expect(self.status).toBe(200)
		expect(self.body.data.id).toBe(account.id)
	})

	test('a rotated refresh token is refused with error="invalid_token"', async () => {
		const account = await signUp(strict)
		const first = await refresh(strict, account.refreshToken)
		expect(first.status).toBe(200)
		expectRefusedRefresh(await refresh(strict, account.refreshToken))
	})

	test('the newest refresh token keeps working, one rotation after another', async () => {
		const account = await signUp(t)
		let current = account.refreshToken
		const seen = new Set([current])
		for (let i = 0; i < 3; i++) {
			const res = await refresh(t, current)
			expect(res.status).toBe(200)
			expect(jwtPayload(res.body.data.accessToken).sid).toBe(account.sessionId)
			current = res.body.data.refreshToken
			expect(seen.has(current)).toBe(false)
			seen.add(current)
		}
		// Two rotations back is never a retry: refused, whatever the grace interval.
		expectRefusedRefresh(await refresh(t, account.refreshToken))
	})
})

describe('reuse detection', () => {
	test('presenting a rotated refresh token after the grace interval revokes the whole session', async () => {
		const account = await signUp(strict)
		const rotated = await refresh(strict, account.refreshToken)
		expect(rotated.status).toBe(200)
		const newest = rotated.body.data as { accessToken: string; refreshToken: string }
		expect((await me(strict, newest.accessToken)).status).toBe(200)

		// The replay: refused …
		expectRefusedRefresh(await refresh(strict, account.refreshToken))
		// … and every token of the session with it.
		expectRefusedRefresh(await refresh(strict, newest.refreshToken))
		expectRefusedAccess(await me(strict, newest.accessToken))
		expectRefusedAccess(await me(strict, account.accessToken))
	})

	test("reuse revokes only the session it belongs to, not the user's other sessions", async () => {
		const account = await signUp(strict)
		const other = await login(strict, account.email)
		expect((await refresh(strict, account.refreshToken)).status).toBe(200)
		expectRefusedRefresh(await refresh(strict, account.refreshToken))

		expect((await me(strict, other.accessToken)).status).toBe(200)
		expect((await refresh(strict, other.refreshToken)).status).toBe(200)
	})

	test('within the grace interval a retry gets a new pair for the same session, and the pair issued just before is refused', async () => {
		const account = await signUp(t)
		const first = await refresh(t, account.refreshToken)
		expect(first.status).toBe(200)
		const superseded = first.body.data as { accessToken: string; refreshToken: string }
		expect((await me(t, superseded.accessToken)).status).toBe(200)

		// The client retries with the token it already exchanged (say, the first answer was lost).
		const retry = await refresh(t, account.refreshToken)
		expect(retry.status).toBe(200)
		expect(retry.body).toEqual(tokenEnvelope({ ...account, name: 'Test User' }, 'Tokens refreshed'))
		const fresh = retry.body.data as { accessToken: string; refreshToken: string }
		expect(jwtPayload(fresh.accessToken).sid).toBe(account.sessionId)
		expect(fresh.refreshToken).not.toBe(superseded.refreshToken)
		expect(fresh.accessToken).not.toBe(superseded.accessToken)

		// The pair issued just before is refused; the new one works.
		expectRefusedAccess(await me(t, superseded.accessToken))
		const self = await me(t, fresh.accessToken)
		expect(self.status).toBe(200)
		expect(self.body.data.id).toBe(account.id)
		const next = await refresh(t, fresh.refreshToken)
		expect(next.status).toBe(200)
		expect(jwtPayload(next.body.data.accessToken).sid).toBe(account.sessionId)
		expectRefusedRefresh(await refresh(t, superseded.refreshToken))
	})
})

describe('concurrent refreshes of one token', () => {
	test('with no grace interval at most one of 20 succeeds, none fails with 5xx, and afterwards no returned token works', async () => {
		const account = await signUp(strict)
		const responses = await Promise.all(Array.from({ length: 20 }, () => refresh(strict, account.refreshToken)))

		const statuses = responses.map((res) => res.status)
		expect(statuses.filter((status) => status >= 500)).toEqual([])
		for (const res of responses) expect([200, 401]).toContain(res.status)
		const succeeded = responses.filter((res) => res.status === 200)
		expect(succeeded.length).toBeLessThanOrEqual(1)
		for (const res of responses.filter((res) => res.status === 401)) expectRefusedRefresh(res)

		// The replays were reuse: the session is gone, with whatever was issued to it.
		for (const res of succeeded) {
			expectRefusedRefresh(await refresh(strict, res.body.data.refreshToken))
			expectRefusedAccess(await me(strict, res.body.data.accessToken))
		}
		expectRefusedRefresh(await refresh(strict, account.refreshToken))
		expectRefusedAccess(await me(strict, account.accessToken))
	})

	test('with the grace interval none of 20 fails with 5xx, and exactly one returned refresh token still works', async () => {
		const account = await signUp(t)
		const responses = await Promise.all(Array.from({ length: 20 }, () => refresh(t, account.refreshToken)))

		expect(responses.map((res) => res.status).filter((status) => status >= 500)).toEqual([])
		for (const res of responses) expect([200, 401]).toContain(res.status)
		for (const res of responses.filter((res) => res.status === 401)) expectRefusedRefresh(res)
		const pairs = responses
			.filter((res) => res.status === 200)
			.map((res) => res.body.data as { accessToken: string; refreshToken: string })
		expect(pairs.length).toBeGreaterThanOrEqual(1)
		for (const pair of pairs) expect(jwtPayload(pair.accessToken).sid).toBe(account.sessionId)
		expect(new Set(pairs.map((pair) => pair.refreshToken)).size).toBe(pairs.length)

		// Reading is harmless, so find the surviving pair by its access token first:
		// every pair but one was superseded by a later retry.
		const live: typeof pairs = []
		for (const pair of pairs) if ((await me(t, pair.accessToken)).status === 200) live.push(pair)
		expect(live.length).toBe(1)
		const survivor = live[0]!

		// Its refresh token works; every other returned refresh token is refused.
		const renewed = await refresh(t, survivor.refreshToken)
		expect(renewed.status).toBe(200)
		expect(jwtPayload(renewed.body.data.accessToken).sid).toBe(account.sessionId)
		for (const pair of pairs.filter((pair) => pair !== survivor)) expectRefusedRefresh(await refresh(t, pair.refreshToken))
	})
})

describe('refresh tokens that are not refresh tokens', () => {
	test('a garbage refresh token is 401', async () => {
		expectRefusedRefresh(await refresh(t, 'not-a-refresh-token'))
		expectRefusedRefresh(await refresh(t, 'A'.repeat(43)))
	})

	test('an empty refresh token is 422 pointing at #/refreshToken', async () => {
		const res = await refresh(t, '')
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			problem('validation-error', 422, '/api/auth/refresh', '1 field is invalid', [
				{ pointer: '#/refreshToken', code: 'minLength', detail: 'must be at least 1 characters' },
			]),
		)
	})

	test('a missing refresh token is 422 pointing at #/refreshToken', async () => {
		const res = await t.call('POST', '/api/auth/refresh', { json: {} })
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			problem('validation-error', 422, '/api/auth/refresh', '1 field is invalid', [
				{ pointer: '#/refreshToken', code: 'required', detail: 'is required' },
			]),
		)
	})

	test('a refresh token that is not a string is 422', async () => {
		const res = await refresh(t, 12345)
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			problem('validation-error', 422, '/api/auth/refresh', '1 field is invalid', [
				{ pointer: '#/refreshToken', code: 'type', detail: 'must be a string' },
			]),
		)
	})

	test('a refresh token used as a Bearer access token is 401', async () => {
		const account = await signUp(t)
		expectRefusedAccess(await me(t, account.refreshToken))
		// And the refresh token itself is untouched by the attempt.
		expect((await refresh(t, account.refreshToken)).status).toBe(200)
	})

	test('an access token used as a refresh token is 401', async () => {
		const account = await signUp(t)
		expectRefusedRefresh(await refresh(t, account.accessToken))
		// The session is not harmed by the attempt.
		expect((await me(t, account.accessToken)).status).toBe(200)
	})
})
