import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq, sql } from 'drizzle-orm'
import { oidcFlows, signInCodes, users } from '../src/db/schema'
import { startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { enrollTotp, loginWithTotp } from './support/factors'
import { jwtPayload, login, PASSWORD, signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'
import { FlowBrowser, pkcePair, TestOpenIdProvider } from './support/oidc-provider'

setDefaultTimeout(30_000)

const FRONTEND = 'http://frontend.test'
const CALLBACK_PAGE = `${FRONTEND}/auth/callback`

let database: TestDatabase
let alpha: TestOpenIdProvider
let beta: TestOpenIdProvider
let t: TestApp

beforeAll(async () => {
	database = await createTestDatabase()
	alpha = await TestOpenIdProvider.start(['http://localhost/api/auth/providers/alpha/callback'])
	beta = await TestOpenIdProvider.start(['http://localhost/api/auth/providers/beta/callback'])
	t = await startTestApp({ APP_URL: FRONTEND, OIDC_PROVIDERS: 'alpha,beta', ...alpha.settings('alpha'), ...beta.settings('beta'), OIDC_BETA_LABEL: 'Beta Corp' }, database)
})
afterAll(async () => {
	await t.close()
	await alpha.stop()
	await beta.stop()
	await database.drop()
})

/** A sign-in at `provider` as `identity`, through to tokens (or the exchange's answer). */
async function signInWith(provider: TestOpenIdProvider, name: string, identity: { sub: string; email?: string; email_verified?: boolean }) {
	provider.signInAs = identity
	const { verifier, challenge } = pkcePair()
	const landed = await new FlowBrowser(t.app).follow(
		`/api/auth/providers/${name}/authorization?${new URLSearchParams({ redirectTo: CALLBACK_PAGE, codeChallenge: challenge, codeChallengeMethod: 'S256' })}`,
		provider.issuer,
	)
	return { landed, exchange: () => t.call('POST', '/api/auth/sessions', { json: { code: landed.searchParams.get('code') ?? '', codeVerifier: verifier } }) }
}

/** A signed-in user links `identity` at `provider`: the URL from the API, the provider, the exchange. */
async function link(account: Account, provider: TestOpenIdProvider, name: string, identity: { sub: string; email?: string; email_verified?: boolean }) {
	provider.signInAs = identity
	const { verifier, challenge } = pkcePair()
	const started = await t.call('POST', '/api/users/me/identities', { json: { provider: name, redirectTo: CALLBACK_PAGE, codeChallenge: challenge }, token: account.accessToken })
	if (started.status !== 200) return { started, landed: undefined, exchanged: undefined }
	const landed = await new FlowBrowser(t.app).follow(started.body.data.authorizationUrl, provider.issuer)
	const exchanged = landed.searchParams.get('code') ? await t.call('POST', '/api/auth/sessions', { json: { code: landed.searchParams.get('code'), codeVerifier: verifier } }) : undefined
	return { started, landed, exchanged }
}

describe('two providers at once', () => {
	test('both are listed, and each signs in its own identities to their own accounts', async () => {
		expect((await t.call('GET', '/api/auth/providers')).body.data.items).toEqual([
			{ id: 'alpha', label: 'Alpha' },
			{ id: 'beta', label: 'Beta Corp' },
		])
		const a = await signInWith(alpha, 'alpha', { sub: 'same-sub', email: uniqueEmail('alpha'), email_verified: true })
		const b = await signInWith(beta, 'beta', { sub: 'same-sub', email: uniqueEmail('beta'), email_verified: true })
		const [ta, tb] = [await a.exchange(), await b.exchange()]
		expect(ta.status).toBe(200)
		expect(tb.status).toBe(200)
		// The same `sub` at two providers is two identities, two accounts.
		expect(ta.body.data.user.id).not.toBe(tb.body.data.user.id)
	})
})

describe('linking a provider to a signed-in account', () => {
	test('the identity is linked when the frontend exchanges the code, then signs in to this account', async () => {
		const account = await signUp(t)
		const sub = `linked-${account.id}`
		const { started, landed, exchanged } = await link(account, alpha, 'alpha', { sub, email: uniqueEmail('elsewhere'), email_verified: false })
		expect(new URL(started.body.data.authorizationUrl).origin).toBe(alpha.issuer)
		expect(landed?.searchParams.get('error')).toBeNull()
		expect(exchanged?.status).toBe(200)
		expect(exchanged?.body.data.user.id).toBe(account.id)
		const listed = await t.call('GET', '/api/users/me/identities', { token: account.accessToken })
		expect(listed.body.data.items).toEqual([expect.objectContaining({ provider: 'alpha', subject: sub })])
		// From now on the identity signs in to this account.
		const again = await signInWith(alpha, 'alpha', { sub })
		expect((await again.exchange()).body.data.user.id).toBe(account.id)
	})

	test('an identity that already signs in to another account is refused (identity-in-use)', async () => {
		const owner = await signInWith(beta, 'beta', { sub: 'taken-sub', email: uniqueEmail('owner'), email_verified: true })
		expect((await owner.exchange()).status).toBe(200)
		const other = await signUp(t)
		const { landed } = await link(other, beta, 'beta', { sub: 'taken-sub' })
		expect(landed?.searchParams.get('error')).toBe('identity-in-use')
	})

	test('a code of a link flow is useless without its verifier: the identity is not linked', async () => {
		const account = await signUp(t)
		alpha.signInAs = { sub: `stolen-${account.id}` }
		const started = await t.call('POST', '/api/users/me/identities', { json: { provider: 'alpha', redirectTo: CALLBACK_PAGE, codeChallenge: pkcePair().challenge }, token: account.accessToken })
		const landed = await new FlowBrowser(t.app).follow(started.body.data.authorizationUrl, alpha.issuer)
		const res = await t.call('POST', '/api/auth/sessions', { json: { code: landed.searchParams.get('code'), codeVerifier: pkcePair().verifier } })
		expect(res.status).toBe(400)
		expect((await t.call('GET', '/api/users/me/identities', { token: account.accessToken })).body.data.items).toEqual([])
	})

	test('with a second factor, linking needs aal2', async () => {
		const account = await signUp(t)
		const before = await login(t, account.email)
		const { secret } = await enrollTotp(t, account)
		const refused = await t.call('POST', '/api/users/me/identities', { json: { provider: 'alpha', redirectTo: CALLBACK_PAGE, codeChallenge: pkcePair().challenge }, token: before.accessToken })
		expect(refused.status).toBe(403)
		expect(refused.body.type).toEndWith('/mfa-required')
		const aal2 = await loginWithTotp(t, account, secret)
		expect((await link(aal2, alpha, 'alpha', { sub: `mfa-${account.id}` })).started.status).toBe(200)
	})

	test('a redirectTo outside REDIRECT_URLS and an unknown provider are refused', async () => {
		const account = await signUp(t)
		const bad = await t.call('POST', '/api/users/me/identities', { json: { provider: 'alpha', redirectTo: 'https://evil.example/cb', codeChallenge: pkcePair().challenge }, token: account.accessToken })
		expect(bad.body.type).toEndWith('/redirect-not-allowed')
		expect((await t.call('POST', '/api/users/me/identities', { json: { provider: 'nope', redirectTo: CALLBACK_PAGE, codeChallenge: pkcePair().challenge }, token: account.accessToken })).status).toBe(404)
		expect((await t.call('POST', '/api/users/me/identities', { json: { provider: 'alpha', redirectTo: CALLBACK_PAGE, codeChallenge: pkcePair().challenge } })).status).toBe(401)
	})
})

describe('unlinking', () => {
	test('never the last way in: an account made by a provider keeps its only identity until it has a password', async () => {
		const made = await signInWith(alpha, 'alpha', { sub: `only-${crypto.randomUUID()}`, email: uniqueEmail('only'), email_verified: true })
		const session = (await made.exchange()).body.data
		const [identity] = (await t.call('GET', '/api/users/me/identities', { token: session.accessToken })).body.data.items
		const refused = await t.call('DELETE', `/api/users/me/identities/${identity.id}`, { token: session.accessToken })
		expect(refused.status).toBe(409)
		expect(refused.body.detail).toContain('last way to sign in')
		// A second identity, then the first can go.
		const linked = await link({ ...session, id: session.user.id, email: session.user.email, password: '', sessionId: '' }, beta, 'beta', { sub: `second-${crypto.randomUUID()}` })
		expect(linked.exchanged?.status).toBe(200)
		expect((await t.call('DELETE', `/api/users/me/identities/${identity.id}`, { token: session.accessToken })).status).toBe(200)
	})

	test('two unlinks of the last two identities at once: one goes, the other is refused', async () => {
		const made = await signInWith(alpha, 'alpha', { sub: `race-${crypto.randomUUID()}`, email: uniqueEmail('race'), email_verified: true })
		const session = (await made.exchange()).body.data
		await link({ ...session, id: session.user.id, email: session.user.email, password: '', sessionId: '' }, beta, 'beta', { sub: `race-b-${crypto.randomUUID()}` })
		const items = (await t.call('GET', '/api/users/me/identities', { token: session.accessToken })).body.data.items as Array<{ id: string }>
		expect(items).toHaveLength(2)
		const answers = await Promise.all(items.map((item) => t.call('DELETE', `/api/users/me/identities/${item.id}`, { token: session.accessToken })))
		expect(answers.map((res) => res.status).sort()).toEqual([200, 409])
	})

	test('another user’s identities can be neither listed nor unlinked; an admin may do both', async () => {
		const made = await signInWith(alpha, 'alpha', { sub: `admin-${crypto.randomUUID()}`, email: uniqueEmail('adm'), email_verified: true })
		const session = (await made.exchange()).body.data
		// A password of its own (as recovery by email would set): the identity is no longer the only way in.
		await t.database.handle.db.update(users).set({ passwordHash: await Bun.password.hash('a password of their own') }).where(eq(users.id, session.user.id))
		const stranger = await signUp(t)
		expect((await t.call('GET', `/api/users/${session.user.id}/identities`, { token: stranger.accessToken })).status).toBe(403)
		const admin = await signUpAdmin(t)
		const [identity] = (await t.call('GET', `/api/users/${session.user.id}/identities`, { token: admin.accessToken })).body.data.items
		expect((await t.call('DELETE', `/api/users/${session.user.id}/identities/${identity.id}`, { token: stranger.accessToken })).status).toBe(403)
		expect((await t.call('DELETE', `/api/users/${session.user.id}/identities/${identity.id}`, { token: admin.accessToken })).status).toBe(200)
		const audit = await t.call('GET', `/api/audit-events?userId=${session.user.id}&type=identity.unlinked`, { token: admin.accessToken })
		expect(audit.body.data.items).toEqual([expect.objectContaining({ actorId: admin.id, details: { provider: 'alpha' } })])
	})
})

describe('leftovers', () => {
	test('expired flows and codes are purged with ended sessions', async () => {
		const before = await signInWith(alpha, 'alpha', { sub: `purge-${crypto.randomUUID()}`, email: uniqueEmail('purge'), email_verified: true })
		expect(before.landed.searchParams.get('code')).toBeString()
		await t.database.handle.db.update(oidcFlows).set({ expiresAt: sql`now() - interval '1 second'` })
		await t.database.handle.db.update(signInCodes).set({ expiresAt: sql`now() - interval '1 second'` })
		await t.app.decorator.sessionUpkeep.purge()
		expect(await t.database.handle.db.select().from(oidcFlows)).toEqual([])
		expect(await t.database.handle.db.select().from(signInCodes)).toEqual([])
		// The expired code no longer signs in.
		expect((await before.exchange()).status).toBe(400)
		expect(jwtPayload((await login(t, (await signUp(t)).email, PASSWORD)).accessToken).aal).toBe('aal1')
	})
})

describe('claims that sign-up would refuse', () => {
	test('linking an identity whose address is not a valid email ends with invalid-email, and links nothing', async () => {
		const account = await signUp(t)
		const sub = `bad-address-${account.id}`
		const { landed, exchanged } = await link(account, alpha, 'alpha', { sub, email: 'x@localhost', email_verified: true })
		expect(Object.fromEntries(landed?.searchParams ?? [])).toEqual({
			error: 'invalid-email',
			error_description: 'The provider gave an address that is not a valid email; use another way to sign in',
		})
		expect(exchanged).toBeUndefined()
		expect((await t.call('GET', '/api/users/me/identities', { token: account.accessToken })).body.data.items).toEqual([])
	})
})
