/**
 * Enrolment-only means enrolment only (API.md "Ways in"): a token held to enrolment (MFA_REQUIRED) is judged
 * as its account's, never as an anonymous request, and serves only the account itself; the hold is decided
 * on every request from the account's role and factors as they are now.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { problem, startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { enrollTotp, loginWithTotp } from './support/factors'
import { jwtPayload, login, PASSWORD, signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'
import { accountOf } from './support/ways-in'

setDefaultTimeout(60_000)

let database: TestDatabase
beforeAll(async () => {
	database = await createTestDatabase()
})
afterAll(() => database.drop())

const HELD = (instance: string) => problem('mfa-enrollment-required', 403, instance, 'Enrol a second factor first: this session serves only enrolment')

/** An admin whose session used a factor: a full admin under MFA_REQUIRED. */
async function fullAdmin(t: TestApp): Promise<Account> {
	const admin = await signUpAdmin(t)
	const { secret } = await enrollTotp(t, admin)
	return loginWithTotp(t, admin, secret)
}

describe('MFA_REQUIRED=admins', () => {
	let t: TestApp
	let admin: Account
	beforeAll(async () => {
		t = await startTestApp({ MFA_REQUIRED: 'admins', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, database)
		admin = await fullAdmin(t)
	})
	afterAll(() => t.close())

	test('an admin’s enrolment-only token creates nothing, assigns no role and reads no one else', async () => {
		const held = await signUpAdmin(t)
		const other = await signUp(t)
		const refused = {
			createAdmin: await t.call('POST', '/api/users', { token: held.accessToken, json: { email: uniqueEmail('made'), password: PASSWORD, role: 'admin' } }),
			createUser: await t.call('POST', '/api/users', { token: held.accessToken, json: { email: uniqueEmail('made'), password: PASSWORD } }),
			list: await t.call('GET', '/api/users', { token: held.accessToken }),
			otherFactors: await t.call('GET', `/api/users/${other.id}/factors`, { token: held.accessToken }),
			otherUser: await t.call('GET', `/api/users/${other.id}`, { token: held.accessToken }),
			webhook: await t.call('POST', '/api/webhooks', { token: held.accessToken, json: { url: 'http://127.0.0.1:9/hook', events: ['*'] } }),
			audit: await t.call('GET', '/api/audit-events', { token: held.accessToken }),
		}
		expect(refused.createAdmin.body).toEqual(HELD('/api/users'))
		// Without a role the sign-up is open to anyone, but a token is never dropped to an anonymous request.
		expect(refused.createUser.body).toEqual(HELD('/api/users'))
		expect(refused.list.body).toEqual(HELD('/api/users'))
		expect(refused.otherFactors.body).toEqual(HELD(`/api/users/${other.id}/factors`))
		expect(refused.otherUser.body).toEqual(HELD(`/api/users/${other.id}`))
		expect(refused.webhook.body).toEqual(HELD('/api/webhooks'))
		expect(refused.audit.body).toEqual(HELD('/api/audit-events'))

		expect((await t.call('GET', '/api/users/me', { token: held.accessToken })).status).toBe(200)
		expect((await t.call('GET', `/api/users/${held.id}`, { token: held.accessToken })).status).toBe(200)
		expect((await t.call('GET', '/api/users/me/factors', { token: held.accessToken })).status).toBe(200)
		expect((await t.call('POST', '/api/auth/reauthentication', { token: held.accessToken, json: { password: PASSWORD } })).status).toBe(200)
		expect((await t.call('POST', '/api/users/me/factors', { token: held.accessToken, json: { type: 'totp' } })).status).toBe(201)
		expect((await t.call('POST', '/api/auth/logout', { token: held.accessToken })).status).toBe(200)
	})

	test('a user promoted while signed in is held to enrolment at the next request, refreshed or not, until a factor is activated', async () => {
		const user = await signUp(t)
		expect((await t.call('GET', '/api/users/me/sessions', { token: user.accessToken })).status).toBe(200)
		const promoted = await t.call('PUT', `/api/users/${user.id}`, { token: admin.accessToken, json: { email: user.email, name: 'Test User', role: 'admin' } })
		expect(promoted.status).toBe(200)

		expect((await t.call('GET', '/api/users', { token: user.accessToken })).body).toEqual(HELD('/api/users'))
		const refreshed = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: user.refreshToken } })
		expect(refreshed.status).toBe(200)
		const session = accountOf(refreshed.body.data, PASSWORD)
		expect(jwtPayload(session.accessToken).role).toBe('admin')
		expect((await t.call('GET', '/api/users', { token: session.accessToken })).body).toEqual(HELD('/api/users'))

		await enrollTotp(t, session)
		expect((await t.call('GET', '/api/users', { token: session.accessToken })).status).toBe(200)
	})
})

describe('MFA_REQUIRED=all', () => {
	let t: TestApp
	let admin: Account
	beforeAll(async () => {
		t = await startTestApp({ MFA_REQUIRED: 'all' }, database)
		admin = await fullAdmin(t)
	})
	afterAll(() => t.close())

	test('an account whose last factor an admin removes is held to enrolment at its next request', async () => {
		const account = await signUp(t)
		const { factorId, secret } = await enrollTotp(t, account)
		const aal2 = await loginWithTotp(t, account, secret)
		const name = { email: account.email, name: 'Renamed' }
		expect((await t.call('PUT', '/api/users/me', { token: aal2.accessToken, json: name })).status).toBe(200)
		expect((await t.call('DELETE', `/api/users/${account.id}/factors/${factorId}`, { token: admin.accessToken })).status).toBe(200)
		expect((await t.call('PUT', '/api/users/me', { token: aal2.accessToken, json: name })).body).toEqual(HELD('/api/users/me'))
		expect((await t.call('GET', '/api/users/me', { token: aal2.accessToken })).status).toBe(200)
		// A new password login is held too.
		const again = await login(t, account.email)
		expect((await t.call('GET', '/api/users/me/sessions', { token: again.accessToken })).body).toEqual(HELD('/api/users/me/sessions'))
	})
})
