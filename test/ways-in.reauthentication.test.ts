/**
 * A stolen 15-minute access token adds no way in (API.md "Ways in"): a session not checked within
 * REAUTHENTICATION_SECONDS is refused until POST /auth/reauthentication proves its owner again, by password,
 * TOTP or recovery code, passkey, or a code by mail; wrong answers count toward the lockouts.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq, sql } from 'drizzle-orm'
import { refreshTokens, users } from '../src/db/schema'
import { problem, reauthenticationRequired, startTestApp, type TestApp } from './support/app'
import { awayFromStepBoundary, enrollTotp, totpCode } from './support/factors'
import { ageSession, jwtPayload, login, PASSWORD, signUp, tokenEnvelope, type Account } from './support/fixtures'
import { TestOpenIdProvider } from './support/oidc-provider'
import { SoftAuthenticator } from './support/soft-authenticator'
import { accountOf, addPasskey, CALLBACK_PAGE, waitForMails } from './support/ways-in'
import { pkcePair } from './support/oidc-provider'

setDefaultTimeout(60_000)

const ORIGIN = 'https://app.example.test'
const RP_ID = 'app.example.test'
const REAUTH = '/api/auth/reauthentication'

let alpha: TestOpenIdProvider
let t: TestApp
beforeAll(async () => {
	alpha = await TestOpenIdProvider.start(['http://localhost/api/auth/providers/alpha/callback'])
	t = await startTestApp({
		APP_URL: 'http://frontend.test',
		OIDC_PROVIDERS: 'alpha',
		...alpha.settings('alpha'),
		WEBAUTHN_RP_ID: RP_ID,
		WEBAUTHN_ORIGINS: ORIGIN,
		LOCKOUT_THRESHOLD: '3',
		LOCKOUT_WINDOW_SECONDS: '900',
		LOCKOUT_SECONDS: '600',
	})
})
afterAll(async () => {
	await t.close()
	await alpha.stop()
})

const reauthenticate = (account: Pick<Account, 'accessToken'>, json: Record<string, unknown>) => t.call('POST', REAUTH, { token: account.accessToken, json })

/** Every way to add or change a way in, as a stolen token of a stale session would try it; each answer. */
async function addWaysIn(account: Account, pendingTotpId: string) {
	const name = 'Test User'
	return {
		totp: await t.call('POST', '/api/users/me/factors', { token: account.accessToken, json: { type: 'totp' } }),
		webauthn: await t.call('POST', '/api/users/me/factors', { token: account.accessToken, json: { type: 'webauthn' } }),
		activation: await t.call('POST', `/api/users/me/factors/${pendingTotpId}/activation`, { token: account.accessToken, json: { code: '000000' } }),
		identity: await t.call('POST', '/api/users/me/identities', { token: account.accessToken, json: { provider: 'alpha', redirectTo: CALLBACK_PAGE, codeChallenge: pkcePair().challenge } }),
		password: await t.call('PUT', '/api/users/me', { token: account.accessToken, json: { email: account.email, name, password: 'the thief’s passphrase' } }),
		email: await t.call('PUT', '/api/users/me', { token: account.accessToken, json: { email: `thief-${account.id}@example.test`, name } }),
	}
}

describe('a session not checked within REAUTHENTICATION_SECONDS', () => {
	test('adds no factor, activation, identity, password or email, until a password check renews it', async () => {
		const account = await signUp(t)
		const pending = await t.call('POST', '/api/users/me/factors', { token: account.accessToken, json: { type: 'totp' } })
		await ageSession(t, account)
		const refused = await addWaysIn(account, pending.body.data.factor.id)
		expect(refused.totp.body).toEqual(reauthenticationRequired('/api/users/me/factors'))
		expect(refused.webauthn.body).toEqual(reauthenticationRequired('/api/users/me/factors'))
		expect(refused.activation.body).toEqual(reauthenticationRequired(`/api/users/me/factors/${pending.body.data.factor.id}/activation`))
		expect(refused.identity.body).toEqual(reauthenticationRequired('/api/users/me/identities'))
		expect(refused.password.body).toEqual(reauthenticationRequired('/api/users/me'))
		expect(refused.email.body).toEqual(reauthenticationRequired('/api/users/me'))

		const checked = await reauthenticate(account, { password: PASSWORD })
		expect(checked.status).toBe(200)
		expect(checked.body).toEqual(tokenEnvelope({ id: account.id, email: account.email, name: 'Test User' }, 'It is you: this session may add or change a way in for the next minutes'))
		const claims = jwtPayload(checked.body.data.accessToken)
		expect(claims.sid).toBe(account.sessionId)
		// The check is this token's auth_time: signed in the same second as the token itself, or the one before.
		expect(Number(claims.iat) - Number(claims.auth_time)).toBeGreaterThanOrEqual(0)
		expect(Number(claims.iat) - Number(claims.auth_time)).toBeLessThanOrEqual(1)
		expect(checked.body.data.refreshToken).not.toBe(account.refreshToken)

		const renewed = accountOf(checked.body.data, PASSWORD)
		const allowed = await addWaysIn(renewed, pending.body.data.factor.id)
		expect(allowed.totp.status).toBe(201)
		expect(allowed.webauthn.status).toBe(201)
		// Past the check, the activation is judged on its code.
		expect(allowed.activation.body.type).toEndWith('/invalid-code')
		expect(allowed.identity.status).toBe(200)
		expect(allowed.password.status).toBe(200)
	})

	test('a token stolen before the owner’s check stays refused after it: the check is the new token’s, not the session’s', async () => {
		const owner = await signUp(t)
		await ageSession(t, owner)
		// The token a thief takes: issued by a refresh of the (old) session, so its auth_time is old too.
		const refreshed = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: owner.refreshToken } })
		const stolen = accountOf(refreshed.body.data, PASSWORD)
		expect(Number(jwtPayload(stolen.accessToken).auth_time)).toBeLessThan(Date.now() / 1000 - 3000)
		const checked = await reauthenticate(owner, { password: PASSWORD })
		expect(checked.status).toBe(200)
		const res = await t.call('POST', '/api/users/me/factors', { token: stolen.accessToken, json: { type: 'webauthn' } })
		expect(res.body).toEqual(reauthenticationRequired('/api/users/me/factors'))
		expect((await t.call('POST', '/api/users/me/factors', { token: checked.body.data.accessToken, json: { type: 'webauthn' } })).status).toBe(201)
	})

	test('the refresh token the check replaced is rotated: presented past the grace interval it is reuse, and the session ends', async () => {
		const account = await signUp(t)
		const checked = await reauthenticate(account, { password: PASSWORD })
		expect(checked.status).toBe(200)
		await t.database.handle.db
			.update(refreshTokens)
			.set({ rotatedAt: sql`now() - interval '1 hour'` })
			.where(sql`${refreshTokens.sessionId} = ${account.sessionId} and ${refreshTokens.rotatedAt} is not null`)
		const reused = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: account.refreshToken } })
		expect(reused.body).toEqual(problem('invalid-token', 401, '/api/auth/refresh', 'The refresh token is invalid, expired or revoked'))
		expect((await t.call('GET', '/api/users/me', { token: checked.body.data.accessToken })).status).toBe(401)
	})
})

describe('a password check', () => {
	const WRONG = problem('invalid-credentials', 401, REAUTH, 'The email or password is incorrect')
	const LOCKED = problem('login-locked', 429, REAUTH, 'Too many failed logins for this account; try again later')

	test('a wrong password is 401 and counts toward the login lockout (LOCKOUT_THRESHOLD=3)', async () => {
		const account = await signUp(t)
		for (let i = 0; i < 3; i++) expect((await reauthenticate(account, { password: 'not the password' })).body).toEqual(WRONG)
		const locked = await reauthenticate(account, { password: PASSWORD })
		expect(locked.body).toEqual(LOCKED)
		expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0)
		expect((await t.call('POST', '/api/auth/login', { json: { email: account.email, password: PASSWORD } })).status).toBe(429)
	})

	test('twenty wrong passwords at once: at most the threshold are looked at, the rest locked', async () => {
		const account = await signUp(t)
		const results = await Promise.all(Array.from({ length: 20 }, () => reauthenticate(account, { password: 'not the password' })))
		const wrong = results.filter((res) => res.status === 401)
		expect(wrong.length).toBeLessThanOrEqual(3)
		for (const res of wrong) expect(res.body).toEqual(WRONG)
		for (const res of results.filter((res) => res.status !== 401)) expect(res.body).toEqual(LOCKED)
	})
})

describe('a second factor check', () => {
	const REFUSED = problem('invalid-second-factor', 401, REAUTH, 'The code or passkey was not accepted')

	test('a TOTP code raises an aal1 session to aal2 (amr otp, mfa); the same code again is refused', async () => {
		const account = await signUp(t)
		const aal1 = await login(t, account.email)
		const { secret } = await enrollTotp(t, account)
		await awayFromStepBoundary()
		const code = totpCode(secret, 1)
		const checked = await reauthenticate(aal1, { method: 'totp', code })
		expect(checked.status).toBe(200)
		const claims = jwtPayload(checked.body.data.accessToken)
		expect(claims).toMatchObject({ sid: aal1.sessionId, aal: 'aal2' })
		expect(claims.amr).toEqual(expect.arrayContaining(['pwd', 'otp', 'mfa']))
		expect((await reauthenticate(aal1, { method: 'totp', code })).body).toEqual(REFUSED)
	})

	test('a recovery code works once: ten checks at once with one code, one wins', async () => {
		const account = await signUp(t)
		const aal1 = await login(t, account.email)
		const { recoveryCodes } = await enrollTotp(t, account)
		const code = recoveryCodes[0] as string
		const results = await Promise.all(Array.from({ length: 10 }, () => reauthenticate(aal1, { method: 'recovery-code', code })))
		expect(results.filter((res) => res.status === 200)).toHaveLength(1)
		// The losers are refused, and count toward the lockout as any spent code does (LOCKOUT_THRESHOLD=3).
		const LOCKED = problem('login-locked', 429, REAUTH, 'Too many failed logins for this account; try again later')
		for (const res of results.filter((res) => res.status !== 200)) expect([REFUSED, LOCKED]).toContainEqual(res.body)
	})

	test('a passkey answers its session’s challenge once; another session’s challenge is refused', async () => {
		const account = await signUp(t)
		const other = await login(t, account.email)
		const authenticator = new SoftAuthenticator(ORIGIN, RP_ID)
		await addPasskey(t, account, authenticator)
		const options = await t.call('POST', `${REAUTH}/challenges`, { token: account.accessToken, json: { method: 'webauthn' } })
		expect(options.status).toBe(200)
		const response = authenticator.authenticate(options.body.data)
		// The other session may not spend this session's challenge.
		expect((await reauthenticate(other, { method: 'webauthn', response })).body).toEqual(REFUSED)
		const checked = await reauthenticate(account, { method: 'webauthn', response })
		expect(checked.status).toBe(200)
		expect(jwtPayload(checked.body.data.accessToken).amr).toEqual(expect.arrayContaining(['hwk', 'mfa']))
		expect((await reauthenticate(account, { method: 'webauthn', response })).body).toEqual(REFUSED)
	})
})

describe('a code by mail', () => {
	test('an account with neither password nor factor gets a code and proves itself with it; a wrong code is 400', async () => {
		const account = await signUp(t)
		await t.database.handle.db.update(users).set({ passwordHash: null }).where(eq(users.id, account.id))
		await ageSession(t, account)
		const asked = await t.call('POST', `${REAUTH}/challenges`, { token: account.accessToken, json: { method: 'email' } })
		expect(asked.body).toEqual({ data: null, message: 'A code is on its way to your address', errors: [] })
		const [mail] = await waitForMails(t, account.email, 'reauthentication', 1)
		const code = /\b(\d{6})\b/.exec(mail?.text ?? '')?.[1] as string
		const wrong = code === '000000' ? '000001' : '000000'
		expect((await reauthenticate(account, { method: 'email', code: wrong })).body).toEqual(
			problem('invalid-code', 400, REAUTH, 'The token or code is wrong, used or replaced by a newer one; ask for a new mail'),
		)
		const checked = await reauthenticate(account, { method: 'email', code })
		expect(checked.status).toBe(200)
		expect(jwtPayload(checked.body.data.accessToken).sid).toBe(account.sessionId)
		expect((await t.call('POST', '/api/users/me/factors', { token: checked.body.data.accessToken, json: { type: 'webauthn' } })).status).toBe(201)
		// Spent.
		expect((await reauthenticate(account, { method: 'email', code })).status).toBe(400)
	})

	test('an account with a password is told to use it (409)', async () => {
		const account = await signUp(t)
		const res = await t.call('POST', `${REAUTH}/challenges`, { token: account.accessToken, json: { method: 'email' } })
		expect(res.body).toEqual(
			problem('conflict', 409, `${REAUTH}/challenges`, 'This account proves it is you with its password or second factor; a code by mail is for accounts that have neither'),
		)
	})
})
