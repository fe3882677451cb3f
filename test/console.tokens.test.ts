/**
 * The one bridge between the console and the API (docs/console.md): the API's guard takes the provider's RFC 9068
 * access token only when it is the console's (`client_id` latchkey-console), for the API (`aud` {PUBLIC_URL}/api),
 * signed by the provider's key, unexpired, and its `sid` names a live session of an active account. Every refusal
 * is a 401 `invalid-token` (or a 403 saying why, for an account that may not do it), through HTTP, no mocks.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { generateKeyPair, SignJWT } from 'jose'
import { startTestApp, type TestApp } from './support/app'
import { API_RESOURCE, CONSOLE_CLIENT, consoleToken, consoleTokens } from './support/console'
import { eq } from 'drizzle-orm'
import { sessions } from '../src/db/schema'
import { enrollTotp } from './support/factors'
import { jwtHeader, jwtPayload, signUp, signUpAdmin, type Account } from './support/fixtures'
import { ISSUER, REDIRECT_URI, registerClient } from './support/oauth'

let t: TestApp
let admin: Account

beforeAll(async () => {
	t = await startTestApp()
	admin = await signUpAdmin(t)
})
afterAll(() => t.close())

const refused = (response: { status: number; body: any; headers: Headers }) => {
	expect(response.status).toBe(401)
	expect(response.body.type).toEndWith('/invalid-token')
	expect(response.headers.get('www-authenticate')).toContain('error="invalid_token"')
}

/** A token shaped as the console's, signed by `key` (the provider's unless a test brings another). */
const forged = (claims: Record<string, unknown>, key: CryptoKey = t.oauthKey.signingKey, kid = t.oauthKey.kid) => {
	const now = Math.floor(Date.now() / 1000)
	return new SignJWT({ iss: ISSUER, aud: API_RESOURCE, sub: admin.id, iat: now, exp: now + 300, client_id: CONSOLE_CLIENT, sid: admin.sessionId, jti: crypto.randomUUID(), ...claims })
		.setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid })
		.sign(key)
}

describe("the console's token", () => {
	test('is an RFC 9068 JWT of the provider for the API, naming the Latchkey session, and the API takes it', async () => {
		const tokens = await consoleTokens(t, admin)
		expect(jwtHeader(tokens.access_token)).toMatchObject({ alg: 'RS256', typ: 'at+jwt', kid: t.oauthKey.kid })
		expect(jwtPayload(tokens.access_token)).toMatchObject({ iss: ISSUER, aud: API_RESOURCE, client_id: CONSOLE_CLIENT, sub: admin.id, sid: admin.sessionId })
		const list = await t.call('GET', '/api/users?count=estimated', { token: tokens.access_token })
		expect(list.status).toBe(200)
		expect(list.body.data.total).toBeGreaterThanOrEqual(1)
		const me = await t.call('GET', '/api/users/me', { token: tokens.access_token })
		expect(me.body.data).toMatchObject({ id: admin.id, role: 'admin' })
		// The session it stands for is the caller's current one.
		const sessions = await t.call('GET', '/api/users/me/sessions', { token: tokens.access_token })
		expect(sessions.body.data.items.find((session: { id: string }) => session.id === admin.sessionId)?.current).toBe(true)
	})

	test("another client's token for the API is refused, first-party and public as the console is", async () => {
		const other = await registerClient(t, { type: 'public', firstParty: true })
		const token = await consoleToken(t, admin, { clientId: other.clientId, redirectUri: REDIRECT_URI })
		expect(jwtPayload(token)).toMatchObject({ aud: API_RESOURCE, client_id: other.clientId })
		refused(await t.call('GET', '/api/users/me', { token }))
	})

	test('a console token for another audience, or with none (opaque), is refused', async () => {
		const elsewhere = await consoleToken(t, admin, { resource: 'https://api.example.test/' })
		expect(jwtPayload(elsewhere).aud).toBe('https://api.example.test/')
		refused(await t.call('GET', '/api/users/me', { token: elsewhere }))
		const opaque = await consoleToken(t, admin, { resource: null })
		refused(await t.call('GET', '/api/users/me', { token: opaque }))
	})

	test('an expired token, one signed by another key, one without sid or of another issuer are refused', async () => {
		// The control: the same shape, signed by the provider's key, is taken (the test app's key is the provider's).
		expect((await t.call('GET', '/api/users/me', { token: await forged({}) })).status).toBe(200)
		const past = Math.floor(Date.now() / 1000) - 3600
		refused(await t.call('GET', '/api/users/me', { token: await forged({ iat: past - 900, exp: past }) }))
		const { privateKey } = await generateKeyPair('RS256')
		refused(await t.call('GET', '/api/users/me', { token: await forged({}, privateKey) }))
		refused(await t.call('GET', '/api/users/me', { token: await forged({ sid: undefined }) }))
		refused(await t.call('GET', '/api/users/me', { token: await forged({ iss: 'https://elsewhere.example' }) }))
		refused(await t.call('GET', '/api/users/me', { token: await forged({ client_id: 'someone-else' }) }))
	})

	test('revoking its session ends it at the next request', async () => {
		const someone = await signUpAdmin(t)
		const token = await consoleToken(t, someone)
		expect((await t.call('GET', '/api/users', { token })).status).toBe(200)
		const revoked = await t.call('DELETE', `/api/users/${someone.id}/sessions/${someone.sessionId}`, { token: admin.accessToken })
		expect(revoked.status).toBe(200)
		refused(await t.call('GET', '/api/users', { token }))
	})

	test("deactivating the account ends it at the next request, and reactivating does not bring it back", async () => {
		const someone = await signUpAdmin(t)
		const token = await consoleToken(t, someone)
		expect((await t.call('GET', '/api/users', { token })).status).toBe(200)
		expect((await t.call('DELETE', `/api/users/${someone.id}`, { token: admin.accessToken })).status).toBe(200)
		refused(await t.call('GET', '/api/users', { token }))
		const back = await t.call('PUT', `/api/users/${someone.id}`, { token: admin.accessToken, json: { email: someone.email, name: '', status: 'active' } })
		expect(back.status).toBe(200)
		refused(await t.call('GET', '/api/users', { token }))
	})

	test("a non-admin's console token reads its own account but is 403 at the admin routes", async () => {
		const user = await signUp(t)
		const token = await consoleToken(t, user)
		expect((await t.call('GET', '/api/users/me', { token })).body.data.role).toBe('user')
		const list = await t.call('GET', '/api/users', { token })
		expect(list.status).toBe(403)
		expect(list.body.type).toEndWith('/forbidden')
		expect(list.body.detail).toBe('This requires an admin')
		expect((await t.call('GET', `/api/users/${admin.id}`, { token })).status).toBe(403)
	})
})

describe('MFA_REQUIRED=admins', () => {
	let strict: TestApp
	beforeAll(async () => {
		strict = await startTestApp({ MFA_REQUIRED: 'admins' })
	})
	afterAll(() => strict.close())

	test('an admin without a second factor is held to enrolment: 403 mfa-enrollment-required at the admin routes', async () => {
		const unenrolled = await signUpAdmin(strict)
		const token = await consoleToken(strict, unenrolled)
		const list = await strict.call('GET', '/api/users', { token })
		expect(list.status).toBe(403)
		expect(list.body.type).toEndWith('/mfa-enrollment-required')
	})

	test("the assurance is the session's, read at each request: an admin with a factor is served once the session is aal2", async () => {
		// An admin with an active factor whose session used only the password (aal1): held to enrolment.
		const session = await signUpAdmin(strict)
		await enrollTotp(strict, session)
		await strict.database.handle.db.update(sessions).set({ aal: 'aal1', amr: ['pwd'] }).where(eq(sessions.id, session.sessionId))
		const token = await consoleToken(strict, session)
		expect((await strict.call('GET', '/api/users', { token })).body.type).toEndWith('/mfa-enrollment-required')
		// As a second factor at the sign-in would have made it: the same token is then served.
		await strict.database.handle.db.update(sessions).set({ aal: 'aal2', amr: ['pwd', 'otp'] }).where(eq(sessions.id, session.sessionId))
		expect((await strict.call('GET', '/api/users', { token })).status).toBe(200)
	})
})

describe('CONSOLE_ENABLED=false', () => {
	let off: TestApp
	beforeAll(async () => {
		off = await startTestApp({ CONSOLE_ENABLED: 'false' })
	})
	afterAll(() => off.close())

	test("the API takes no console token at all (the provider still issues one; the API refuses it)", async () => {
		const someone = await signUpAdmin(off)
		const token = await consoleToken(off, someone)
		refused(await off.call('GET', '/api/users/me', { token }))
		// The API's own tokens are unaffected.
		expect((await off.call('GET', '/api/users/me', { token: someone.accessToken })).status).toBe(200)
	})
})
