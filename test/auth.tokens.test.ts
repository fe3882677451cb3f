import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { SignJWT, type JWTPayload } from 'jose'
import { users } from '../src/db/schema'
import { problem, startTestApp, type CallResult, type TestApp } from './support/app'
import { jwtHeader, jwtPayload, signUp, type Account } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const INVALID_TOKEN_CHALLENGE = 'Bearer realm="latchkey", error="invalid_token"'
const REFUSED = problem('invalid-token', 401, '/api/users/me', 'The access token is invalid, expired or revoked')

let t: TestApp
/** One account whose session stays live for the whole file. */
let account: Account
beforeAll(async () => {
	t = await startTestApp()
	account = await signUp(t)
})
afterAll(() => t.close())

const now = () => Math.floor(Date.now() / 1000)
const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
const secretKey = () => new TextEncoder().encode(t.config.jwt.secret)

/** The claims the service itself would put in an access token for `who`. */
const claimsOf = (who: Account): JWTPayload => ({
	iss: 'latchkey',
	aud: 'latchkey',
	sub: who.id,
	sid: who.sessionId,
	role: 'user',
	jti: crypto.randomUUID(),
	iat: now(),
	exp: now() + 900,
})

/** Signs an access token by hand: by default exactly what the service signs, with the test app's secret. */
async function sign(
	overrides: { claims?: JWTPayload; header?: Record<string, unknown>; key?: Uint8Array; alg?: string } = {},
): Promise<string> {
	const alg = overrides.alg ?? 'HS256'
	return new SignJWT({ ...claimsOf(account), ...overrides.claims })
		.setProtectedHeader({ alg, typ: 'at+jwt', kid: t.keys.kid, ...overrides.header })
		.sign(overrides.key ?? secretKey())
}

const me = (token: string) => t.call('GET', '/api/users/me', { token })

function expectRefused(res: CallResult) {
	expect(res.status).toBe(401)
	expect(res.headers.get('content-type')).toBe('application/problem+json')
	expect(res.headers.get('www-authenticate')).toBe(INVALID_TOKEN_CHALLENGE)
	expect(res.body).toEqual(REFUSED)
}

describe('a hand-signed token', () => {
	test('signed exactly as the service signs, it is accepted (the control for every refusal below)', async () => {
		const res = await me(await sign())
		expect(res.status).toBe(200)
		expect(res.body.data.id).toBe(account.id)
	})

	test('a token issued by the service is accepted', async () => {
		const res = await me(account.accessToken)
		expect(res.status).toBe(200)
		expect(res.body.data.email).toBe(account.email)
	})
})

describe('tokens refused with 401 and error="invalid_token"', () => {
	test('alg "none" is refused', async () => {
		const token = `${b64({ alg: 'none', typ: 'at+jwt' })}.${b64(claimsOf(account))}.`
		expectRefused(await me(token))
	})

	test('alg "none" is refused even with the real signature left on', async () => {
		const [, payload, signature] = account.accessToken.split('.')
		expectRefused(await me(`${b64({ alg: 'none', typ: 'at+jwt' })}.${payload}.${signature}`))
	})

	test('a token signed with another secret is refused', async () => {
		const key = new TextEncoder().encode(`another-secret-${crypto.randomUUID()}-${crypto.randomUUID()}`)
		expectRefused(await me(await sign({ key })))
	})

	test('a tampered payload (role changed to admin) is refused', async () => {
		const [header, , signature] = account.accessToken.split('.')
		const forged = { ...jwtPayload(account.accessToken), role: 'admin' }
		expectRefused(await me(`${header}.${b64(forged)}.${signature}`))
		// The forged role reaches no admin route either.
		const list = await t.call('GET', '/api/users', { token: `${header}.${b64(forged)}.${signature}` })
		expect(list.status).toBe(401)
	})

	test('a tampered header is refused', async () => {
		const [, payload, signature] = account.accessToken.split('.')
		const header = { ...jwtHeader(account.accessToken), kid: 'someone-else' }
		expectRefused(await me(`${b64(header)}.${payload}.${signature}`))
	})

	test('a truncated token is refused', async () => {
		expectRefused(await me(account.accessToken.slice(0, -8)))
		expectRefused(await me(account.accessToken.split('.').slice(0, 2).join('.')))
	})

	test('garbage is refused', async () => {
		expectRefused(await me('garbage'))
		expectRefused(await me('a.b.c'))
		expectRefused(await me(`${b64({ alg: 'HS256' })}.not-json.${'x'.repeat(43)}`))
	})

	test('an expired token is refused', async () => {
		expectRefused(await me(await sign({ claims: { iat: now() - 1200, exp: now() - 120 } })))
	})

	test('a token accepted while valid is refused once it expires: verified tokens are remembered only until exp', async () => {
		// Valid for 1 to 2 more seconds: 30 s of clock tolerance past an exp 28 s before the current whole second.
		const exp = now() - 28
		const token = await sign({ claims: { iat: now() - 600, exp } })
		expect((await me(token)).status).toBe(200)
		expect((await me(token)).status).toBe(200)
		// Until the whole second in which jose refuses it (exp + 30), and a little more; not a fixed 3 s.
		await Bun.sleep((exp + 30) * 1000 - Date.now() + 100)
		expectRefused(await me(token))
	})

	test('a token not yet valid (nbf in the future) is refused', async () => {
		expectRefused(await me(await sign({ claims: { nbf: now() + 120 } })))
	})

	test('a token issued in the future beyond the clock leeway is refused; within the leeway it is accepted', async () => {
		const future = await sign({ claims: { iat: now() + 300, exp: now() + 1200 } })
		expectRefused(await me(future))
		// And again: the refused token was not remembered as verified.
		expectRefused(await me(future))
		const skewed = await me(await sign({ claims: { iat: now() + 10, exp: now() + 910 } }))
		expect(skewed.status).toBe(200)
		expect(skewed.body.data.id).toBe(account.id)
	})

	test('a token of another issuer is refused', async () => {
		expectRefused(await me(await sign({ claims: { iss: 'https://evil.example' } })))
	})

	test('a token for another audience is refused', async () => {
		expectRefused(await me(await sign({ claims: { aud: 'some-other-api' } })))
	})

	test('typ "JWT" instead of "at+jwt" is refused', async () => {
		expectRefused(await me(await sign({ header: { typ: 'JWT' } })))
	})

	test('a token without typ is refused', async () => {
		expectRefused(await me(await sign({ header: { typ: undefined } })))
	})

	test('HS512 with the right secret is refused: the algorithm is pinned', async () => {
		expectRefused(await me(await sign({ alg: 'HS512' })))
	})

	test('a token without exp is refused', async () => {
		expectRefused(await me(await sign({ claims: { exp: undefined } })))
	})

	test('a token without sid or jti is refused', async () => {
		expectRefused(await me(await sign({ claims: { sid: undefined } })))
		expectRefused(await me(await sign({ claims: { jti: undefined } })))
	})

	test('a token whose sid names no session is refused', async () => {
		expectRefused(await me(await sign({ claims: { sid: Bun.randomUUIDv7() } })))
		expectRefused(await me(await sign({ claims: { sid: 'not-a-uuid' } })))
	})

	test('a token whose sub is another user than the session\u2019s is refused', async () => {
		const other = await signUp(t)
		// The live session of `account`, claimed for `other`, and the other way round.
		expectRefused(await me(await sign({ claims: { sub: other.id } })))
		expectRefused(await me(await sign({ claims: { ...claimsOf(other), sid: account.sessionId } })))
		// Both accounts are still fine with their own tokens.
		expect((await me(other.accessToken)).status).toBe(200)
		expect((await me(account.accessToken)).status).toBe(200)
	})

	test('the token of a deactivated user is refused', async () => {
		const leaving = await signUp(t)
		const gone = await t.call('DELETE', '/api/users/me', { token: leaving.accessToken })
		expect(gone.status).toBe(200)
		expectRefused(await me(leaving.accessToken))
	})

	test('the token of a user whose account is deactivated is refused even while the session row is live', async () => {
		const leaving = await signUp(t)
		expect((await me(leaving.accessToken)).status).toBe(200)
		// Only the account flips, as a direct database change would: the session is left alone.
		await t.database.handle.db
			.update(users)
			.set({ status: 'deactivated', deactivatedAt: new Date() })
			.where(eq(users.id, leaving.id))
		expectRefused(await me(leaving.accessToken))
	})
})

describe('requests without a bearer token', () => {
	test('Authorization: Basic is 401 with a Bearer challenge', async () => {
		const res = await t.call('GET', '/api/users/me', { headers: { authorization: `Basic ${btoa(`${account.email}:secret`)}` } })
		expect(res.status).toBe(401)
		// RFC 6750 §3.1: a request with an unsupported authentication method carries no error code.
		expect(res.headers.get('www-authenticate')).toBe('Bearer realm="latchkey"')
		expect(res.body).toEqual(
			problem('unauthorized', 401, '/api/users/me', 'Send an access token: Authorization: Bearer <token>'),
		)
	})

	test('"Authorization: Bearer" with no token is 401 with a Bearer challenge', async () => {
		const res = await t.call('GET', '/api/users/me', { headers: { authorization: 'Bearer' } })
		expect(res.status).toBe(401)
		// No token was presented, so none was refused: no error="invalid_token".
		expect(res.headers.get('www-authenticate')).toBe('Bearer realm="latchkey"')
		expect(res.body).toEqual(
			problem('unauthorized', 401, '/api/users/me', 'Send an access token: Authorization: Bearer <token>'),
		)
	})

	test('no Authorization header is 401 with a bare Bearer challenge', async () => {
		const res = await t.call('GET', '/api/users/me')
		expect(res.status).toBe(401)
		expect(res.headers.get('www-authenticate')).toBe('Bearer realm="latchkey"')
		expect(res.body).toEqual(
			problem('unauthorized', 401, '/api/users/me', 'Send an access token: Authorization: Bearer <token>'),
		)
	})
})
