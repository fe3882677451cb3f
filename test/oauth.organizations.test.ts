import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { and, eq } from 'drizzle-orm'
import * as oauth from 'oauth4webapi'
import { organizationMembers, organizations } from '../src/db/schema'
import { UserinfoShortcut } from '../src/modules/oauth/userinfo'
import { startTestApp, type TestApp } from './support/app'
import { signUp, type Account } from './support/fixtures'
import { authorizationRequest, Browser, browserCookie, discover, ISSUER, REDIRECT_URI, registerClient, through, type RegisteredClient } from './support/oauth'
import { seedOrganization, type SeededOrganization } from './support/organization-seed'
import { PageBrowser, type PageResult } from './support/pages'

// The provider's organization scopes, as a relying party (oauth4webapi) sees them: `organizations` lists the
// account's memberships in the ID token and userinfo; `organization:{id}` asks for tokens of one organization,
// whose `org` claim is the membership as it is at each issuance (API.md, Organizations, "Tokens").

setDefaultTimeout(30_000)

let t: TestApp
let as: oauth.AuthorizationServer
let app: RegisteredClient
let account: Account
let cookie: string
let acme: SeededOrganization
let beta: SeededOrganization

const db = () => t.database.handle.db
const ALL_SCOPES = ['openid', 'profile', 'email', 'offline_access', 'organizations']

beforeAll(async () => {
	t = await startTestApp()
	as = await discover(t)
	app = await registerClient(t, { type: 'confidential', firstParty: true, scopes: ALL_SCOPES })
	account = await signUp(t)
	cookie = await browserCookie(t, account)
	acme = await seedOrganization(db(), [{ userId: account.id, roles: ['admin'] }], { name: 'Acme' })
	beta = await seedOrganization(db(), [{ userId: account.id, roles: ['owner', 'member'] }], { name: 'Beta' })
})
afterAll(() => t.close())

async function authorize(client: RegisteredClient, params: Record<string, string>, who = cookie) {
	const request = await authorizationRequest(as, client.clientId, params)
	const { url } = await new Browser(t, who).visit(request.url.href)
	return { ...request, callback: url }
}

async function exchange(client: RegisteredClient, params: Record<string, string>, who = cookie) {
	const { callback, verifier, nonce, state } = await authorize(client, params, who)
	const parameters = oauth.validateAuthResponse(as, client.client, callback, state)
	const response = await oauth.authorizationCodeGrantRequest(as, client.client, client.auth, parameters, REDIRECT_URI, verifier, through(t))
	return oauth.processAuthorizationCodeResponse(as, client.client, response, { expectedNonce: nonce, requireIdToken: true })
}

const userinfo = async (token: string) => {
	const response = await oauth.userInfoRequest(as, app.client, token, through(t))
	return oauth.processUserInfoResponse(as, app.client, account.id, response)
}

const payloadOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString()) as Record<string, unknown>

const membership = (organizationId: string, userId = account.id) => and(eq(organizationMembers.organizationId, organizationId), eq(organizationMembers.userId, userId))

describe('discovery', () => {
	test('scopes_supported lists organizations; claims_supported lists organizations and org', async () => {
		const document = await t.call('GET', '/.well-known/openid-configuration')
		expect(document.body.scopes_supported).toContain('organizations')
		expect(document.body.claims_supported).toEqual(expect.arrayContaining(['organizations', 'org']))
	})
})

describe('scope organizations', () => {
	test('the ID token and userinfo list the active memberships with their roles', async () => {
		const deactivated = await seedOrganization(db(), [{ userId: account.id, roles: ['owner'] }], { name: 'Gone' })
		await db().update(organizations).set({ status: 'deactivated', deactivatedAt: new Date() }).where(eq(organizations.id, deactivated.id))
		const someoneElses = await seedOrganization(db(), [{ userId: (await signUp(t)).id, roles: ['owner'] }])
		const tokens = await exchange(app, { scope: 'openid organizations' })
		const expected = [
			{ id: acme.id, slug: acme.slug, roles: ['admin'] },
			{ id: beta.id, slug: beta.slug, roles: ['member', 'owner'] },
		]
		const claims = oauth.getValidatedIdTokenClaims(tokens)
		expect(claims?.organizations).toEqual(expected)
		expect(claims?.org).toBeUndefined()
		const info = await userinfo(tokens.access_token)
		expect(info.organizations).toEqual(expected)
		expect(JSON.stringify(info)).not.toContain(someoneElses.id)
		expect(JSON.stringify(info)).not.toContain(deactivated.id)
	})

	test('without the scope there is no organizations claim', async () => {
		const tokens = await exchange(app, { scope: 'openid email' })
		expect(oauth.getValidatedIdTokenClaims(tokens)?.organizations).toBeUndefined()
		expect((await userinfo(tokens.access_token)).organizations).toBeUndefined()
	})

	test('userinfo reads the memberships as they are now, by GET (left to the library) and POST alike', async () => {
		const tokens = await exchange(app, { scope: 'openid organizations' })
		const extra = await seedOrganization(db(), [{ userId: account.id, roles: ['member'] }], { name: 'Later' })
		const byGet = await t.call('GET', '/oauth2/userinfo', { token: tokens.access_token })
		const byPost = await t.call('POST', '/oauth2/userinfo', { body: `access_token=${tokens.access_token}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } })
		expect(byGet.status).toBe(200)
		expect(byGet.text).toBe(byPost.text)
		expect(byGet.body.organizations).toContainEqual({ id: extra.id, slug: extra.slug, roles: ['member'] })
		// The shortcut answers no token of these scopes: the library does, with the memberships read now.
		const shortcut = new UserinfoShortcut({ db: db(), findActiveClient: (clientId) => t.app.decorator.oauthClients.findActive(clientId) })
		expect(await shortcut.answer(new Request(`${ISSUER}/oauth2/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } }))).toBeUndefined()
		await db().delete(organizationMembers).where(membership(extra.id))
		expect((await userinfo(tokens.access_token)).organizations).not.toContainEqual(expect.objectContaining({ id: extra.id }))
	})

	test('a client not allowed the scope does not get it', async () => {
		const plain = await registerClient(t, { type: 'confidential', firstParty: true })
		const { callback, state } = await authorize(plain, { scope: 'openid organizations' })
		expect(() => oauth.validateAuthResponse(as, plain.client, callback, state)).toThrow()
		expect(callback.searchParams.get('error')).toBe('invalid_scope')
	})
})

describe('scope organization:{id}', () => {
	test('a member gets an ID token, an access token (a JWT for a resource) and userinfo with org', async () => {
		const org = { id: acme.id, slug: acme.slug, roles: ['admin'], permissions: ['invitations:manage', 'members:manage'] }
		const tokens = await exchange(app, { scope: `openid organization:${acme.id}` })
		expect(oauth.getValidatedIdTokenClaims(tokens)?.org).toEqual(org)
		expect((await userinfo(tokens.access_token)).org).toEqual(org)
		// Opaque: a resource server introspects it, and sees org.
		const introspected = await oauth.processIntrospectionResponse(as, app.client, await oauth.introspectionRequest(as, app.client, app.auth, tokens.access_token, through(t)))
		expect(introspected).toMatchObject({ active: true, sub: account.id, org })
		// For a resource: an RFC 9068 JWT carrying org.
		const jwt = await exchange(app, { scope: `openid organization:${beta.id}`, resource: 'https://api.example.test/' })
		expect(payloadOf(jwt.access_token)).toMatchObject({ aud: 'https://api.example.test/', sub: account.id, org: { id: beta.id, slug: beta.slug, roles: ['member', 'owner'], permissions: ['*'] } })
	})

	test('refused for a non-member, an unknown or a deactivated organization: access_denied at the redirect URI', async () => {
		const stranger = await seedOrganization(db(), [{ userId: (await signUp(t)).id, roles: ['owner'] }])
		const deactivated = await seedOrganization(db(), [{ userId: account.id, roles: ['owner'] }])
		await db().update(organizations).set({ status: 'deactivated', deactivatedAt: new Date() }).where(eq(organizations.id, deactivated.id))
		for (const id of [stranger.id, Bun.randomUUIDv7(), deactivated.id]) {
			const { callback, state } = await authorize(app, { scope: `openid organization:${id}` })
			expect(`${callback.origin}${callback.pathname}`).toBe(REDIRECT_URI)
			expect(callback.searchParams.get('error')).toBe('access_denied')
			expect(callback.searchParams.get('state')).toBe(state)
			expect(callback.searchParams.get('code')).toBeNull()
		}
	})

	test('a malformed id, two organizations, or a client not allowed organizations: invalid_scope', async () => {
		const plain = await registerClient(t, { type: 'confidential', firstParty: true })
		for (const [client, scope] of [
			[app, 'openid organization:acme'],
			[app, `openid organization:${acme.id} organization:${beta.id}`],
			[plain, `openid organization:${acme.id}`],
		] as const) {
			const { callback } = await authorize(client, { scope })
			expect(callback.searchParams.get('error')).toBe('invalid_scope')
			expect(callback.searchParams.get('code')).toBeNull()
		}
	})

	test('the claim follows the membership: userinfo at once, the tokens of the next refresh', async () => {
		const member = await signUp(t)
		const team = await seedOrganization(db(), [{ userId: member.id, roles: ['admin'] }])
		const memberCookie = await browserCookie(t, member)
		const tokens = await exchange(app, { scope: `openid offline_access organization:${team.id}`, prompt: 'consent' }, memberCookie)
		expect(oauth.getValidatedIdTokenClaims(tokens)?.org).toMatchObject({ id: team.id, roles: ['admin'] })
		const refresh = async (refreshToken: string) =>
			oauth.processRefreshTokenResponse(as, app.client, await oauth.refreshTokenGrantRequest(as, app.client, app.auth, refreshToken, through(t)))
		const info = async (token: string) => oauth.processUserInfoResponse(as, app.client, member.id, await oauth.userInfoRequest(as, app.client, token, through(t)))

		// A role changed: userinfo shows it now; the next refresh's ID token carries it.
		await db().update(organizationMembers).set({ roles: ['member'] }).where(membership(team.id, member.id))
		expect((await info(tokens.access_token)).org).toEqual({ id: team.id, slug: team.slug, roles: ['member'], permissions: [] })
		const changed = await refresh(tokens.refresh_token ?? '')
		expect(oauth.getValidatedIdTokenClaims(changed)?.org).toEqual({ id: team.id, slug: team.slug, roles: ['member'], permissions: [] })

		// Removed: no org anywhere, from the next request and the next refresh on (the refresh itself still works).
		await db().delete(organizationMembers).where(membership(team.id, member.id))
		expect((await info(changed.access_token)).org).toBeUndefined()
		const dropped = await refresh(changed.refresh_token ?? '')
		expect(oauth.getValidatedIdTokenClaims(dropped)?.org).toBeUndefined()
		const introspected = await oauth.processIntrospectionResponse(as, app.client, await oauth.introspectionRequest(as, app.client, app.auth, dropped.access_token, through(t)))
		expect(introspected.org).toBeUndefined()
	})
})

describe('a third-party client', () => {
	/** Follows redirects on the issuer with a page browser; stops at a page or outside. */
	async function follow(browser: PageBrowser, first: PageResult): Promise<{ page: PageResult; at: URL }> {
		let page = first
		let at = new URL(`${ISSUER}/`)
		for (let hop = 0; hop < 10 && page.location; hop++) {
			at = new URL(page.location, at)
			if (at.origin !== ISSUER) return { page, at }
			page = await browser.get(at.pathname + at.search)
		}
		return { page, at }
	}

	test('asks consent for organization:{id}, then its tokens carry org; a non-member is refused before any page', async () => {
		const notes = await registerClient(t, { type: 'confidential', firstParty: false, name: 'Acme Notes', scopes: ALL_SCOPES })
		const browser = new PageBrowser(t)
		expect((await browser.signIn(account.email)).status).toBe(303)
		const request = await authorizationRequest(as, notes.clientId, { scope: `openid organization:${acme.id}` })
		const { page, at } = await follow(browser, await browser.get(request.url.pathname + request.url.search))
		expect(at.pathname).toBe('/consent')
		expect(PageBrowser.decoded(page.html)).toContain(`Act for the organization ${acme.id} with your roles in it`)
		const answered = await browser.post('/consent', { csrf: PageBrowser.field(page.html, 'csrf'), interaction: PageBrowser.field(page.html, 'interaction'), decision: 'allow' })
		const back = await follow(browser, answered)
		const parameters = oauth.validateAuthResponse(as, notes.client, back.at, request.state)
		const response = await oauth.authorizationCodeGrantRequest(as, notes.client, notes.auth, parameters, REDIRECT_URI, request.verifier, through(t))
		const tokens = await oauth.processAuthorizationCodeResponse(as, notes.client, response, { expectedNonce: request.nonce, requireIdToken: true })
		expect(oauth.getValidatedIdTokenClaims(tokens)?.org).toMatchObject({ id: acme.id, roles: ['admin'] })

		const stranger = await seedOrganization(db(), [{ userId: (await signUp(t)).id, roles: ['owner'] }])
		const refused = await authorizationRequest(as, notes.clientId, { scope: `openid organization:${stranger.id}` })
		const denied = await follow(browser, await browser.get(refused.url.pathname + refused.url.search))
		expect(denied.at.origin + denied.at.pathname).toBe(REDIRECT_URI)
		expect(denied.at.searchParams.get('error')).toBe('access_denied')
	})
})
