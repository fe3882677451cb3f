import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { jwtVerify } from 'jose'
import { users } from '../src/db/schema'
import { problem, startTestApp, type TestApp } from './support/app'
import { jwtHeader, jwtPayload, login, PASSWORD, signUp, uniqueEmail, tokenEnvelope } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/
const BAD_CREDENTIALS = 'The email or password is incorrect'

let t: TestApp
beforeAll(async () => {
	t = await startTestApp()
})
afterAll(() => t.close())

const passwordHashOf = async (app: TestApp, id: string) => {
	const [row] = await app.database.handle.db.select({ hash: users.passwordHash }).from(users).where(eq(users.id, id))
	return row?.hash ?? ''
}

/** The argon2 cost parameters a PHC string was made with. */
const argonParameters = (hash: string) => {
	const match = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=\d+\$/.exec(hash)
	return match ? { memoryKib: Number(match[1]), timeCost: Number(match[2]) } : undefined
}

describe('POST /api/auth/login', () => {
	test('a right email and password get an access token, a refresh token and the user, not to be cached', async () => {
		const email = uniqueEmail('login')
		const created = await t.call('POST', '/api/users', { json: { email, password: PASSWORD, name: 'Ada Lovelace' } })
		expect(created.status).toBe(201)

		const res = await t.call('POST', '/api/auth/login', { json: { email, password: PASSWORD } })
		expect(res.status).toBe(200)
		expect(res.headers.get('content-type')).toStartWith('application/json')
		expect(res.headers.get('cache-control')).toBe('no-store')
		expect(res.body).toEqual(tokenEnvelope({ id: created.body.data.id, email, name: 'Ada Lovelace' }, 'Logged in'))
		// An opaque refresh token of at least 256 bits, not a JWT.
		expect(res.body.data.refreshToken).toMatch(/^[A-Za-z0-9_-]{43,}$/)
	})

	test('the access token is an HS256 at+jwt with a kid and the RFC 9068 claims', async () => {
		const account = await signUp(t)
		const issuedNoEarlierThan = Math.floor(Date.now() / 1000) - 1
		const res = await t.call('POST', '/api/auth/login', { json: { email: account.email, password: PASSWORD } })
		expect(res.status).toBe(200)
		const token: string = res.body.data.accessToken

		expect(jwtHeader(token)).toEqual({ alg: 'HS256', typ: 'at+jwt', kid: expect.any(String) })
		expect(jwtHeader(token).kid).toBe(t.keys.kid)

		const claims = jwtPayload(token)
		expect(claims).toEqual({
			iss: 'latchkey',
			aud: 'latchkey',
			sub: account.id,
			sid: expect.stringMatching(UUID),
			role: 'user',
			amr: ['pwd'],
			aal: 'aal1',
			auth_time: expect.any(Number),
			iat: expect.any(Number),
			exp: expect.any(Number),
			jti: expect.stringMatching(UUID),
		})
		expect(claims.exp).toBe((claims.iat as number) + 900)
		// The sign-in is this session's last check of its owner (OpenID Connect's auth_time).
		expect(Math.abs((claims.auth_time as number) - (claims.iat as number))).toBeLessThanOrEqual(1)
		expect(claims.iat).toBeGreaterThanOrEqual(issuedNoEarlierThan)
		// Each login is a new session with its own token id.
		expect(claims.sid).not.toBe(account.sessionId)
		expect(claims.jti).not.toBe(jwtPayload(account.accessToken).jti)

		// It verifies with the configured secret, pinned to HS256.
		const secret = new TextEncoder().encode(t.config.jwt.secret)
		const verified = await jwtVerify(token, secret, {
			algorithms: ['HS256'],
			issuer: 'latchkey',
			audience: 'latchkey',
			typ: 'at+jwt',
		})
		expect(verified.payload.sub).toBe(account.id)

		// And the service accepts it.
		const me = await t.call('GET', '/api/users/me', { token })
		expect(me.status).toBe(200)
		expect(me.body.data.id).toBe(account.id)
	})

	test('the email is matched without regard to case or surrounding spaces', async () => {
		const account = await signUp(t, { email: uniqueEmail('casey') })
		const res = await t.call('POST', '/api/auth/login', {
			json: { email: `  ${account.email.toUpperCase()}\t `, password: PASSWORD },
		})
		expect(res.status).toBe(200)
		expect(res.body.data.user.id).toBe(account.id)
		expect(res.body.data.user.email).toBe(account.email)
	})

	test('the password is matched exactly: other case is a wrong password', async () => {
		const account = await signUp(t)
		const res = await t.call('POST', '/api/auth/login', { json: { email: account.email, password: PASSWORD.toUpperCase() } })
		expect(res.status).toBe(401)
		expect(res.body).toEqual(problem('invalid-credentials', 401, '/api/auth/login', BAD_CREDENTIALS))
	})

	test('wrong password, unknown email and a deactivated account get the same 401, with WWW-Authenticate', async () => {
		const active = await signUp(t)
		const deactivated = await signUp(t)
		const gone = await t.call('DELETE', '/api/users/me', { token: deactivated.accessToken })
		expect(gone.status).toBe(200)
		expect(gone.body.data.status).toBe('deactivated')

		const attempts = [
			{ email: active.email, password: 'not the right password' },
			{ email: uniqueEmail('nobody'), password: PASSWORD },
			{ email: deactivated.email, password: PASSWORD },
		]
		const responses = []
		for (const json of attempts) responses.push(await t.call('POST', '/api/auth/login', { json }))

		const expected = problem('invalid-credentials', 401, '/api/auth/login', BAD_CREDENTIALS)
		for (const res of responses) {
			expect(res.status).toBe(401)
			expect(res.headers.get('content-type')).toBe('application/problem+json')
			expect(res.headers.get('www-authenticate')).toBe('Bearer realm="latchkey"')
			expect(res.body).toEqual(expected)
		}
		// Whole documents, not only the matched fields: nothing tells the three apart.
		const [first, ...rest] = responses.map((res) => ({ ...res.body, instance: undefined }))
		for (const other of rest) expect(other).toEqual(first)
		const headerSets = responses.map((res) => [res.headers.get('www-authenticate'), res.headers.get('content-type')])
		for (const other of headerSets.slice(1)) expect(other).toEqual(headerSets[0]!)
	})

	test('a deactivated account with the right password gets no session', async () => {
		const account = await signUp(t)
		expect((await t.call('DELETE', '/api/users/me', { token: account.accessToken })).status).toBe(200)
		const res = await t.call('POST', '/api/auth/login', { json: { email: account.email, password: PASSWORD } })
		expect(res.status).toBe(401)
		expect(res.body.data).toBeNull()
		expect(res.text).not.toContain('accessToken')
	})

	test('a body without email or password is 422 naming each missing field', async () => {
		const res = await t.call('POST', '/api/auth/login', { json: {} })
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			problem('validation-error', 422, '/api/auth/login', '2 fields are invalid', [
				{ pointer: '#/email', code: 'required', detail: 'is required' },
				{ pointer: '#/password', code: 'required', detail: 'is required' },
			]),
		)
	})

	test('a body without a password is 422 pointing at #/password', async () => {
		const res = await t.call('POST', '/api/auth/login', { json: { email: uniqueEmail() } })
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			problem('validation-error', 422, '/api/auth/login', '1 field is invalid', [
				{ pointer: '#/password', code: 'required', detail: 'is required' },
			]),
		)
	})

	test('a login without any body is 422', async () => {
		const res = await t.call('POST', '/api/auth/login')
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			problem('validation-error', 422, '/api/auth/login', '1 field is invalid', [
				{ pointer: '#', code: expect.any(String), detail: 'a JSON request body is required' },
			]),
		)
	})

	test('an email that is not a string is 422', async () => {
		const res = await t.call('POST', '/api/auth/login', { json: { email: 42, password: PASSWORD } })
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			problem('validation-error', 422, '/api/auth/login', '1 field is invalid', [
				{ pointer: '#/email', code: 'type', detail: 'must be a string' },
			]),
		)
	})
})

describe('password hash upgrade', () => {
	test('a hash made with weaker argon2 parameters is replaced on the next successful login', async () => {
		// Created under the weak test parameters (1024 KiB, 1 pass) …
		const account = await signUp(t)
		const before = argonParameters(await passwordHashOf(t, account.id))
		expect(before).toEqual({ memoryKib: 1024, timeCost: 1 })

		// … then the service restarts with stronger ones, on the same database.
		const stronger = await startTestApp({ PASSWORD_HASH_MEMORY_KIB: '2048', PASSWORD_HASH_TIME_COST: '2' }, t.database)
		try {
			// A failed login changes nothing.
			const failed = await stronger.call('POST', '/api/auth/login', { json: { email: account.email, password: 'wrong password!' } })
			expect(failed.status).toBe(401)
			expect(argonParameters(await passwordHashOf(t, account.id))).toEqual({ memoryKib: 1024, timeCost: 1 })

			await login(stronger, account.email)
			const after = await passwordHashOf(t, account.id)
			expect(argonParameters(after)).toEqual({ memoryKib: 2048, timeCost: 2 })

			// The upgraded hash still holds the same password, and is not rewritten again.
			await login(stronger, account.email)
			expect(await passwordHashOf(t, account.id)).toBe(after)
			const wrong = await stronger.call('POST', '/api/auth/login', { json: { email: account.email, password: 'wrong password!' } })
			expect(wrong.status).toBe(401)
		} finally {
			await stronger.close()
		}
	})
})
