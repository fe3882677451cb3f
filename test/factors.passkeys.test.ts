import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { factors, webauthnChallenges } from '../src/db/schema'
import { problem, startTestApp, type TestApp } from './support/app'
import { jwtPayload, PASSWORD, signUp, type Account } from './support/fixtures'
import { SoftAuthenticator } from './support/soft-authenticator'

setDefaultTimeout(30_000)

const ORIGIN = 'https://app.example.test'
const RP_ID = 'app.example.test'

let t: TestApp
beforeAll(async () => {
	t = await startTestApp({ WEBAUTHN_RP_ID: RP_ID, WEBAUTHN_ORIGINS: `${ORIGIN},https://other.example.test` })
})
afterAll(() => t.close())

/** An account with an active passkey on a software authenticator. */
async function accountWithPasskey(): Promise<{ account: Account; authenticator: SoftAuthenticator; factorId: string; recoveryCodes: string[] }> {
	const account = await signUp(t)
	const authenticator = new SoftAuthenticator(ORIGIN, RP_ID)
	const created = await t.call('POST', '/api/users/me/factors', { json: { type: 'webauthn', name: 'Laptop' }, token: account.accessToken })
	expect(created.status).toBe(201)
	const { factor, options } = created.body.data
	const activated = await t.call('POST', `/api/users/me/factors/${factor.id}/activation`, { json: { response: authenticator.register(options) }, token: account.accessToken })
	expect(activated.status).toBe(200)
	return { account, authenticator, factorId: factor.id, recoveryCodes: activated.body.data.recoveryCodes }
}

const passkeyOptions = async () => (await t.call('POST', '/api/auth/passkey/challenges')).body.data

describe('registering a passkey', () => {
	test('options ask for a discoverable credential with user verification, for this RP and user', async () => {
		const account = await signUp(t)
		const res = await t.call('POST', '/api/users/me/factors', { json: { type: 'webauthn' }, token: account.accessToken })
		expect(res.status).toBe(201)
		expect(res.body.data.factor).toMatchObject({ type: 'webauthn', name: 'Passkey', status: 'pending' })
		expect(res.body.data.options).toMatchObject({
			rp: { id: RP_ID, name: 'Latchkey' },
			user: { name: account.email },
			authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
			attestation: 'none',
			timeout: 300_000,
		})
	})

	test('the attestation activates the factor with 10 recovery codes; a second registration excludes the credential', async () => {
		const { account, authenticator, recoveryCodes } = await accountWithPasskey()
		expect(recoveryCodes).toHaveLength(10)
		const [row] = await t.database.handle.db.select().from(factors).where(eq(factors.userId, account.id))
		expect(row).toMatchObject({ status: 'active', signCount: 0, transports: ['internal'] })
		// A second registration by the same session (now aal2) excludes the credential it holds.
		const again = await t.call('POST', '/api/users/me/factors', { json: { type: 'webauthn' }, token: account.accessToken })
		expect(again.body.data.options.excludeCredentials).toEqual([{ id: authenticator.credentials[0]?.id.toString('base64url'), type: 'public-key', transports: ['internal'] }])
	})

	test('a response for another challenge, origin or RP is refused and the factor stays pending', async () => {
		const account = await signUp(t)
		const authenticator = new SoftAuthenticator('https://evil.example.test', RP_ID)
		const created = await t.call('POST', '/api/users/me/factors', { json: { type: 'webauthn' }, token: account.accessToken })
		const path = `/api/users/me/factors/${created.body.data.factor.id}/activation`
		const res = await t.call('POST', path, { json: { response: authenticator.register(created.body.data.options) }, token: account.accessToken })
		expect(res.body).toEqual(problem('invalid-code', 400, path, 'The passkey response does not prove this factor; try again'))
		// The challenge was spent by that attempt.
		const honest = new SoftAuthenticator(ORIGIN, RP_ID)
		const retry = await t.call('POST', path, { json: { response: honest.register(created.body.data.options) }, token: account.accessToken })
		expect(retry.status).toBe(400)
		expect((await t.call('GET', '/api/users/me/factors', { token: account.accessToken })).body.data.items[0].status).toBe('pending')
	})
})

describe('signing in with a passkey alone', () => {
	test('a discoverable assertion gives tokens at aal2 with amr hwk + mfa', async () => {
		const { account, authenticator } = await accountWithPasskey()
		const res = await t.call('POST', '/api/auth/passkey', { json: { response: authenticator.authenticate(await passkeyOptions()) } })
		expect(res.status).toBe(200)
		expect(res.body.data.user.id).toBe(account.id)
		expect(jwtPayload(res.body.data.accessToken)).toMatchObject({ sub: account.id, amr: ['hwk', 'mfa'], aal: 'aal2' })
	})

	test('a challenge is single use: the same assertion twice, and two assertions racing for one challenge, succeed once', async () => {
		const { authenticator } = await accountWithPasskey()
		const options = await passkeyOptions()
		const first = authenticator.authenticate(options)
		expect((await t.call('POST', '/api/auth/passkey', { json: { response: first } })).status).toBe(200)
		const replay = await t.call('POST', '/api/auth/passkey', { json: { response: first } })
		expect(replay.body).toEqual(problem('invalid-credentials', 401, '/api/auth/passkey', 'The passkey was not accepted'))
		const racing = await passkeyOptions()
		const results = await Promise.all(Array.from({ length: 6 }, () => t.call('POST', '/api/auth/passkey', { json: { response: authenticator.authenticate(racing) } })))
		expect(results.filter((res) => res.status === 200)).toHaveLength(1)
	})

	test('an assertion signed for an origin not in WEBAUTHN_ORIGINS, or with a counter that went back (a clone), is refused', async () => {
		const { authenticator } = await accountWithPasskey()
		const phished = authenticator.authenticate(await passkeyOptions(), { origin: 'https://app.example.test.evil.example' })
		expect((await t.call('POST', '/api/auth/passkey', { json: { response: phished } })).status).toBe(401)
		// Another listed origin is fine.
		const listed = authenticator.authenticate(await passkeyOptions(), { origin: 'https://other.example.test' })
		expect((await t.call('POST', '/api/auth/passkey', { json: { response: listed } })).status).toBe(200)
		const counted = authenticator.authenticate(await passkeyOptions(), { signCount: 10 })
		expect((await t.call('POST', '/api/auth/passkey', { json: { response: counted } })).status).toBe(200)
		const clone = authenticator.authenticate(await passkeyOptions(), { signCount: 5 })
		expect((await t.call('POST', '/api/auth/passkey', { json: { response: clone } })).status).toBe(401)
	})

	test('a challenge older than 5 minutes signs nobody in', async () => {
		const { authenticator } = await accountWithPasskey()
		const options = await passkeyOptions()
		await t.database.handle.db
			.update(webauthnChallenges)
			.set({ expiresAt: new Date(Date.now() - 1000) })
			.where(eq(webauthnChallenges.challenge, options.challenge))
		expect((await t.call('POST', '/api/auth/passkey', { json: { response: authenticator.authenticate(options) } })).status).toBe(401)
	})

	test('a removed passkey, a deactivated account and an unknown challenge sign nobody in', async () => {
		const { account, authenticator, factorId } = await accountWithPasskey()
		const unknown = authenticator.authenticate({ challenge: Buffer.from('made up by the client').toString('base64url'), rpId: RP_ID })
		expect((await t.call('POST', '/api/auth/passkey', { json: { response: unknown } })).status).toBe(401)
		expect((await t.call('DELETE', `/api/users/me/factors/${factorId}`, { token: account.accessToken })).status).toBe(200)
		expect((await t.call('POST', '/api/auth/passkey', { json: { response: authenticator.authenticate(await passkeyOptions()) } })).status).toBe(401)

		const other = await accountWithPasskey()
		expect((await t.call('DELETE', '/api/users/me', { token: other.account.accessToken })).status).toBe(200)
		expect((await t.call('POST', '/api/auth/passkey', { json: { response: other.authenticator.authenticate(await passkeyOptions()) } })).status).toBe(401)
	})
})

describe('a passkey as the second factor after a password', () => {
	test('login owes webauthn; the challenge for the mfaToken lists the account’s credentials; the assertion completes it', async () => {
		const { account, authenticator } = await accountWithPasskey()
		const login = await t.call('POST', '/api/auth/login', { json: { email: account.email, password: PASSWORD } })
		expect(login.body.data).toMatchObject({ mfaRequired: true, methods: ['webauthn', 'recovery-code'] })
		const { mfaToken } = login.body.data
		const options = (await t.call('POST', '/api/auth/mfa/challenges', { json: { mfaToken } })).body.data
		expect(options.allowCredentials).toEqual([expect.objectContaining({ id: authenticator.credentials[0]?.id.toString('base64url') })])
		const res = await t.call('POST', '/api/auth/mfa', { json: { mfaToken, method: 'webauthn', response: authenticator.authenticate(options) } })
		expect(res.status).toBe(200)
		expect(jwtPayload(res.body.data.accessToken)).toMatchObject({ amr: ['pwd', 'hwk', 'mfa'], aal: 'aal2' })
	})

	test('another account’s passkey does not complete this login', async () => {
		const victim = await accountWithPasskey()
		const attacker = await accountWithPasskey()
		const { mfaToken } = (await t.call('POST', '/api/auth/login', { json: { email: victim.account.email, password: PASSWORD } })).body.data
		const options = (await t.call('POST', '/api/auth/mfa/challenges', { json: { mfaToken } })).body.data
		const forged = attacker.authenticator.authenticate({ ...options, allowCredentials: [] })
		const res = await t.call('POST', '/api/auth/mfa', { json: { mfaToken, method: 'webauthn', response: forged } })
		expect(res.body).toEqual(problem('invalid-second-factor', 401, '/api/auth/mfa', 'The code or passkey was not accepted'))
	})

	test('an account with only TOTP has no passkey challenge (409)', async () => {
		const { enrollTotp } = await import('./support/factors')
		const account = await signUp(t)
		await enrollTotp(t, account)
		const { mfaToken } = (await t.call('POST', '/api/auth/login', { json: { email: account.email, password: PASSWORD } })).body.data
		expect((await t.call('POST', '/api/auth/mfa/challenges', { json: { mfaToken } })).status).toBe(409)
	})
})
