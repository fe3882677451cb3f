import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { eq, inArray, sql } from 'drizzle-orm'
import * as oauth from 'oauth4webapi'
import { oauthArtifacts } from '../src/db/schema'
import { OAUTH_CLIENTS_CHANNEL } from '../src/modules/oauth/clients'
import { ANONYMOUS_SESSION_SECONDS } from '../src/modules/oauth/provider'
import { logOutEndedSessionsStep } from '../src/modules/oauth/logout'
import { UserinfoShortcut } from '../src/modules/oauth/userinfo'
import { startTestApp, type TestApp } from './support/app'
import { login, signUp, signUpAdmin, type Account } from './support/fixtures'
import { recoverByMail } from './support/ways-in'
import { authorizationRequest, Browser, browserCookie, discover, formPost, hiddenFields, ISSUER, logoutReceiver, REDIRECT_URI, registerClient, through, type RegisteredClient } from './support/oauth'

let t: TestApp
let as: oauth.AuthorizationServer
let app: RegisteredClient
let spa: RegisteredClient
let account: Account
let cookie: string

beforeAll(async () => {
	// The clients' back-channel logout receivers listen on loopback (oauth.outgoing.test.ts: where they may not).
	t = await startTestApp({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' })
	as = await discover(t)
	app = await registerClient(t, { type: 'confidential', firstParty: true })
	spa = await registerClient(t, { type: 'public', firstParty: true })
	account = await signUp(t)
	cookie = await browserCookie(t, account)
})
afterAll(() => t.close())

/** A signed-in browser's authorization request, ended at the client's redirect URI. */
async function authorize(client: RegisteredClient, params: Record<string, string> = {}, browser = new Browser(t, cookie)) {
	const request = await authorizationRequest(as, client.clientId, params)
	const { url } = await browser.visit(request.url.href)
	return { ...request, callback: url }
}

async function exchange(client: RegisteredClient, params: Record<string, string> = {}) {
	const { callback, verifier, nonce, state } = await authorize(client, params)
	const parameters = oauth.validateAuthResponse(as, client.client, callback, state)
	const response = await oauth.authorizationCodeGrantRequest(as, client.client, client.auth, parameters, REDIRECT_URI, verifier, through(t))
	return { tokens: await oauth.processAuthorizationCodeResponse(as, client.client, response, { expectedNonce: nonce, requireIdToken: true }), parameters, verifier }
}

describe('discovery', () => {
	test('both well-known documents are the same, name the issuer and only the code flow with S256', async () => {
		const oidc = await t.call('GET', '/.well-known/openid-configuration')
		const rfc8414 = await t.call('GET', '/.well-known/oauth-authorization-server')
		expect(oidc.status).toBe(200)
		expect(rfc8414.body).toEqual(oidc.body)
		expect(oidc.body).toMatchObject({
			issuer: ISSUER,
			authorization_endpoint: `${ISSUER}/oauth2/authorization`,
			token_endpoint: `${ISSUER}/oauth2/token`,
			userinfo_endpoint: `${ISSUER}/oauth2/userinfo`,
			jwks_uri: `${ISSUER}/.well-known/jwks.json`,
			revocation_endpoint: `${ISSUER}/oauth2/revocation`,
			introspection_endpoint: `${ISSUER}/oauth2/introspection`,
			end_session_endpoint: `${ISSUER}/oauth2/logout`,
			device_authorization_endpoint: `${ISSUER}/oauth2/device-authorization`,
			response_types_supported: ['code'],
			code_challenge_methods_supported: ['S256'],
			authorization_response_iss_parameter_supported: true,
		})
		expect(oidc.body.registration_endpoint).toBeUndefined()
		expect(oidc.body.grant_types_supported).not.toContain('implicit')
		expect(oidc.body.grant_types_supported).not.toContain('password')
	})
})

describe('authorization code with PKCE', () => {
	test('a signed-in browser gets a code with iss (RFC 9207) and the ID token names the Latchkey session', async () => {
		const { tokens, parameters } = await exchange(app)
		expect(parameters.get('iss')).toBe(ISSUER)
		const claims = oauth.getValidatedIdTokenClaims(tokens)
		expect(claims).toMatchObject({ iss: ISSUER, sub: account.id, aud: app.clientId, sid: account.sessionId, acr: 'aal1', amr: ['pwd'] })
		expect(typeof claims?.auth_time).toBe('number')
		expect(tokens.refresh_token).toBeUndefined()
	})

	test('the ID token is RS256 and verifies with a key of the JWKS', async () => {
		const { tokens } = await exchange(app)
		const [header] = (tokens.id_token ?? '').split('.')
		const { alg, kid } = JSON.parse(Buffer.from(header ?? '', 'base64url').toString())
		expect(alg).toBe('RS256')
		const jwks = await t.call('GET', '/.well-known/jwks.json')
		expect(jwks.body.keys.map((key: { kid: string }) => key.kid)).toContain(kid)
	})

	test('userinfo gives the claims of the scopes granted', async () => {
		const { tokens } = await exchange(app)
		const response = await oauth.userInfoRequest(as, app.client, tokens.access_token, through(t))
		const userinfo = await oauth.processUserInfoResponse(as, app.client, account.id, response)
		expect(userinfo).toMatchObject({ sub: account.id, email: account.email, email_verified: false, name: 'Test User' })
	})

	test('userinfo answers a plain GET (without the library) as the library answers a POST, scope by scope', async () => {
		const shortcut = new UserinfoShortcut({ db: t.database.handle.db, findActiveClient: (clientId) => t.app.decorator.oauthClients.findActive(clientId) })
		for (const scope of ['openid', 'openid email', 'openid profile', 'openid email profile', 'openid profile email offline_access']) {
			const { tokens } = await exchange(app, scope.includes('offline_access') ? { scope, prompt: 'consent' } : { scope })
			const byGet = await t.call('GET', '/oauth2/userinfo', { token: tokens.access_token })
			const byPost = await t.call('POST', '/oauth2/userinfo', { body: `access_token=${tokens.access_token}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } })
			expect(byGet.status).toBe(200)
			expect(byGet.text).toBe(byPost.text)
			for (const name of ['content-type', 'cache-control', 'vary']) expect(byGet.headers.get(name)).toBe(byPost.headers.get(name))
			expect(byGet.body.sub).toBe(account.id)
			const answered = await shortcut.answer(new Request(`${ISSUER}/oauth2/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } }))
			expect(await answered?.text()).toBe(byPost.text)
		}
	})

	test('userinfo is answered without the library only in the plain case', async () => {
		const shortcut = new UserinfoShortcut({ db: t.database.handle.db, findActiveClient: (clientId) => t.app.decorator.oauthClients.findActive(clientId) })
		const get = (token: string, headers: Record<string, string> = {}, query = '') =>
			shortcut.answer(new Request(`${ISSUER}/oauth2/userinfo${query}`, { headers: { authorization: `Bearer ${token}`, ...headers } }))
		const { tokens } = await exchange(app)
		expect(await (await get(tokens.access_token))?.json()).toEqual({ sub: account.id, email: account.email, email_verified: false, name: 'Test User', updated_at: expect.any(Number) })
		// Left to the library: a browser's cross-origin request, DPoP, a token in the query, an unknown token, a token asking for claims.
		expect(await get(tokens.access_token, { origin: 'https://app.example.test' })).toBeUndefined()
		expect(await get(tokens.access_token, { dpop: 'x' })).toBeUndefined()
		expect(await get(tokens.access_token, {}, '?scope=openid')).toBeUndefined()
		// Its last character changed (to another one: a token may end in x already).
		expect(await get(`${tokens.access_token.slice(0, -1)}${tokens.access_token.endsWith('x') ? 'y' : 'x'}`)).toBeUndefined()
		const claimed = await exchange(app, { claims: JSON.stringify({ userinfo: { email: null } }) })
		expect(await get(claimed.tokens.access_token)).toBeUndefined()
	})

	test('a public client signs in the same way with PKCE and no secret', async () => {
		const { tokens } = await exchange(spa)
		expect(oauth.getValidatedIdTokenClaims(tokens)?.aud).toBe(spa.clientId)
	})

	test('a request without PKCE is refused at the redirect, with iss', async () => {
		const request = await authorizationRequest(as, spa.clientId)
		request.url.searchParams.delete('code_challenge')
		request.url.searchParams.delete('code_challenge_method')
		const { url } = await new Browser(t, cookie).visit(request.url.href)
		expect(url.origin + url.pathname).toBe(REDIRECT_URI)
		expect(url.searchParams.get('error')).toBe('invalid_request')
		expect(url.searchParams.get('iss')).toBe(ISSUER)
	})

	test('plain PKCE is refused (S256 only)', async () => {
		const request = await authorizationRequest(as, spa.clientId, { code_challenge_method: 'plain' })
		const { url } = await new Browser(t, cookie).visit(request.url.href)
		expect(url.searchParams.get('error')).toBe('invalid_request')
	})

	test('a code with the wrong verifier is refused', async () => {
		const { callback, state } = await authorize(app)
		const parameters = oauth.validateAuthResponse(as, app.client, callback, state)
		const response = await oauth.authorizationCodeGrantRequest(as, app.client, app.auth, parameters, REDIRECT_URI, oauth.generateRandomCodeVerifier(), through(t))
		expect(response.status).toBe(400)
		expect(((await response.json()) as { error: string }).error).toBe('invalid_grant')
	})

	test('a code used twice is refused, and what its first use issued is revoked', async () => {
		const { tokens, parameters, verifier } = await exchange(app, { scope: 'openid offline_access', prompt: 'consent' })
		const replay = await oauth.authorizationCodeGrantRequest(as, app.client, app.auth, parameters, REDIRECT_URI, verifier, through(t))
		expect(replay.status).toBe(400)
		expect(((await replay.json()) as { error: string }).error).toBe('invalid_grant')
		const userinfo = await oauth.userInfoRequest(as, app.client, tokens.access_token, through(t))
		expect(userinfo.status).toBe(401)
	})

	test('a code sent twice at once is exchanged once: the other is refused, and the grant ends', async () => {
		for (let attempt = 0; attempt < 5; attempt++) {
			const { callback, verifier, state } = await authorize(app)
			const parameters = oauth.validateAuthResponse(as, app.client, callback, state)
			const both = await Promise.all([0, 1].map(() => oauth.authorizationCodeGrantRequest(as, app.client, app.auth, parameters, REDIRECT_URI, verifier, through(t))))
			const statuses = both.map((response) => response.status).sort()
			expect(statuses).toEqual([200, 400])
			const refused = both.find((response) => response.status === 400)
			expect(((await refused?.json()) as { error: string }).error).toBe('invalid_grant')
			const issued = (await both.find((response) => response.status === 200)?.json()) as { access_token: string }
			// What the first issued goes with the grant, or is refused for the grant being gone.
			const userinfo = await t.call('GET', '/oauth2/userinfo', { headers: { authorization: `Bearer ${issued.access_token}` } })
			expect(userinfo.status).toBe(401)
		}
	})

	test('a code issued to one client is refused to another (token substitution)', async () => {
		const { callback, state, verifier } = await authorize(app)
		const parameters = oauth.validateAuthResponse(as, app.client, callback, state)
		const other = await registerClient(t, { type: 'confidential', firstParty: true })
		const response = await oauth.authorizationCodeGrantRequest(as, other.client, other.auth, parameters, REDIRECT_URI, verifier, through(t))
		expect(response.status).toBe(400)
		expect(((await response.json()) as { error: string }).error).toBe('invalid_grant')
	})

	test('a wrong client secret is refused with invalid_client', async () => {
		const { callback, state, verifier } = await authorize(app)
		const parameters = oauth.validateAuthResponse(as, app.client, callback, state)
		const response = await oauth.authorizationCodeGrantRequest(as, app.client, oauth.ClientSecretBasic('wrong'), parameters, REDIRECT_URI, verifier, through(t))
		expect(response.status).toBe(401)
		expect(((await response.json()) as { error: string }).error).toBe('invalid_client')
	})
})

describe('refresh tokens', () => {
	test('offline_access gives a refresh token that rotates; a rotated one used again ends the grant', async () => {
		const { tokens } = await exchange(app, { scope: 'openid offline_access', prompt: 'consent' })
		expect(tokens.refresh_token).toBeString()
		const first = await oauth.processRefreshTokenResponse(as, app.client, await oauth.refreshTokenGrantRequest(as, app.client, app.auth, tokens.refresh_token ?? '', through(t)))
		expect(first.refresh_token).not.toBe(tokens.refresh_token)
		const reuse = await oauth.refreshTokenGrantRequest(as, app.client, app.auth, tokens.refresh_token ?? '', through(t))
		expect(reuse.status).toBe(400)
		expect(((await reuse.json()) as { error: string }).error).toBe('invalid_grant')
		// The newest one dies with the grant too: whoever replayed may hold it.
		const after = await oauth.refreshTokenGrantRequest(as, app.client, app.auth, first.refresh_token ?? '', through(t))
		expect(after.status).toBe(400)
	})

	test('codes and tokens are stored without waiting for the flush, and that setting ends with their statement', async () => {
		const { tokens } = await exchange(app, { scope: 'openid offline_access', prompt: 'consent' })
		await oauth.processRefreshTokenResponse(as, app.client, await oauth.refreshTokenGrantRequest(as, app.client, app.auth, tokens.refresh_token ?? '', through(t)))
		const stored = await t.database.handle.db
			.select({ model: oauthArtifacts.model })
			.from(oauthArtifacts)
			.where(inArray(oauthArtifacts.model, ['AuthorizationCode', 'AccessToken', 'RefreshToken']))
		expect(new Set(stored.map((row) => row.model))).toEqual(new Set(['AuthorizationCode', 'AccessToken', 'RefreshToken']))
		// On PGlite this is the connection that stored them: what it commits next waits for the flush again.
		const rows = await t.database.handle.db.execute(sql`select current_setting('synchronous_commit') as setting`)
		const [row] = ((rows as unknown as { rows?: Array<{ setting: string }> }).rows ?? (rows as unknown as Array<{ setting: string }>)) as Array<{ setting: string }>
		expect(row?.setting).toBe('on')
	})
})

describe('sessions', () => {
	test('prompt=none answers with a code for a signed-in browser and login_required for a signed-out one', async () => {
		const signedIn = await authorize(app, { prompt: 'none' })
		expect(signedIn.callback.searchParams.get('code')).toBeString()
		const signedOut = await authorize(app, { prompt: 'none' }, new Browser(t))
		expect(signedOut.callback.searchParams.get('error')).toBe('login_required')
	})

	test('a browser already signed in to a client signs in to it again through its provider session, for the same account and session', async () => {
		const browser = new Browser(t, cookie)
		for (let round = 0; round < 3; round++) {
			const { callback, state, verifier, nonce } = await authorize(app, { prompt: 'none' }, browser)
			expect(browser.cookie).toContain('latchkey-op-session=')
			const parameters = oauth.validateAuthResponse(as, app.client, callback, state)
			const response = await oauth.authorizationCodeGrantRequest(as, app.client, app.auth, parameters, REDIRECT_URI, verifier, through(t))
			const tokens = await oauth.processAuthorizationCodeResponse(as, app.client, response, { expectedNonce: nonce, requireIdToken: true })
			expect(oauth.getValidatedIdTokenClaims(tokens)).toMatchObject({ sub: account.id, sid: account.sessionId })
			const userinfo = await oauth.userInfoRequest(as, app.client, tokens.access_token, through(t))
			expect(await oauth.processUserInfoResponse(as, app.client, account.id, userinfo)).toMatchObject({ sub: account.id, email: account.email })
		}
	})

	/** A browser signed in as `account` signs in to a client through the provider: the provider session's cookies it then holds. */
	async function signedInProviderCookies(account: Account) {
		const browser = new Browser(t, await browserCookie(t, account))
		expect((await authorize(app, { prompt: 'none' }, browser)).callback.searchParams.get('code')).toBeString()
		const providerCookies = browser.cookie
			.split('; ')
			.filter((pair) => pair.startsWith('latchkey-op-session'))
			.join('; ')
		expect(providerCookies).toContain('latchkey-op-session=')
		return providerCookies
	}

	test('the Latchkey session read with the provider session is the one the browser cookie names now: signed in again after the first ended, the browser signs in as its new session', async () => {
		const owner = await signUp(t)
		const providerCookies = await signedInProviderCookies(owner)
		// The first session ends; the same browser, its provider session cookie kept, signs in again (as the sign-in page would).
		expect((await t.call('DELETE', `/api/users/me/sessions/${owner.sessionId}`, { token: owner.accessToken })).status).toBe(200)
		const again = await login(t, owner.email)
		const signedInAgain = new Browser(t, `${await browserCookie(t, again)}; ${providerCookies}`)
		const { callback, state, verifier, nonce } = await authorize(app, { prompt: 'none' }, signedInAgain)
		const parameters = oauth.validateAuthResponse(as, app.client, callback, state)
		const response = await oauth.authorizationCodeGrantRequest(as, app.client, app.auth, parameters, REDIRECT_URI, verifier, through(t))
		const tokens = await oauth.processAuthorizationCodeResponse(as, app.client, response, { expectedNonce: nonce, requireIdToken: true })
		expect(oauth.getValidatedIdTokenClaims(tokens)).toMatchObject({ sub: owner.id, sid: again.sessionId })
	})

	test("a browser whose cookie now names another account's session signs in as that account — the first account's session still live, its provider session cookie kept — and the provider session takes a new id", async () => {
		const first = await signUp(t)
		const providerCookies = await signedInProviderCookies(first)
		// Someone else signs in on the same browser (the sign-in page's cookie changes); the first account's session lives on.
		const second = await signUp(t)
		const switched = new Browser(t, `${await browserCookie(t, second)}; ${providerCookies}`)
		const { callback, state, verifier, nonce } = await authorize(app, { prompt: 'none' }, switched)
		const parameters = oauth.validateAuthResponse(as, app.client, callback, state)
		const response = await oauth.authorizationCodeGrantRequest(as, app.client, app.auth, parameters, REDIRECT_URI, verifier, through(t))
		const tokens = await oauth.processAuthorizationCodeResponse(as, app.client, response, { expectedNonce: nonce, requireIdToken: true })
		expect(oauth.getValidatedIdTokenClaims(tokens)).toMatchObject({ sub: second.id, sid: second.sessionId })
		// Not the first account's provider session carried on: its id changed with the account.
		// The last one the browser holds: the one the provider set last.
		const providerSessionId = (cookies: string) => cookies.split('; ').filter((pair) => pair.startsWith('latchkey-op-session=')).at(-1)
		expect(providerSessionId(switched.cookie)).toBeString()
		expect(providerSessionId(switched.cookie)).not.toBe(providerSessionId(providerCookies))
		expect((await t.call('GET', '/api/users/me', { token: first.accessToken })).status).toBe(200)
	})

	test('a provider session signed in to two clients finds the grant of each, among every other grant', async () => {
		// Another account's grants first, so that the session's are among others.
		const someoneElse = new Browser(t, await browserCookie(t, await signUp(t)))
		for (const client of [app, spa]) expect((await authorize(client, { prompt: 'none' }, someoneElse)).callback.searchParams.get('code')).toBeString()
		const owner = await signUp(t)
		const browser = new Browser(t, await browserCookie(t, owner))
		for (const client of [spa, app, spa, app]) {
			const { callback, state, verifier, nonce } = await authorize(client, { prompt: 'none' }, browser)
			const parameters = oauth.validateAuthResponse(as, client.client, callback, state)
			const response = await oauth.authorizationCodeGrantRequest(as, client.client, client.auth, parameters, REDIRECT_URI, verifier, through(t))
			const tokens = await oauth.processAuthorizationCodeResponse(as, client.client, response, { expectedNonce: nonce, requireIdToken: true })
			expect(oauth.getValidatedIdTokenClaims(tokens)).toMatchObject({ sub: owner.id, aud: client.clientId })
		}
		const grants = await t.database.handle.db.select({ payload: oauthArtifacts.payload }).from(oauthArtifacts).where(eq(oauthArtifacts.model, 'Grant'))
		const ofThisAccount = grants.filter(({ payload }) => payload.accountId === owner.id)
		// One grant per client, reused at every sign-in: each was found again through the provider session.
		expect(ofThisAccount.map(({ payload }) => payload.clientId).sort()).toEqual([app.clientId, spa.clientId].sort())
		expect(grants.length).toBeGreaterThan(ofThisAccount.length)
	})

	test('a signed-out browser is sent to the sign-in page with its way back', async () => {
		const request = await authorizationRequest(as, app.clientId, { login_hint: 'someone@example.test' })
		const { url, response } = await new Browser(t).visit(request.url.href)
		expect(response.status).toBe(200)
		expect(url.pathname).toBe('/sign-in')
		expect(await response.text()).toContain('value="someone@example.test"')
		expect(url.searchParams.get('return_to')).toStartWith('/oauth2/interaction/')
		expect(url.searchParams.get('login_hint')).toBe('someone@example.test')
	})

	test('one authorization in progress per browser: a second one started meanwhile takes the place of the first, which its client must start again', async () => {
		const browser = new Browser(t)
		const first = await browser.visit((await authorizationRequest(as, app.clientId)).url.href)
		const second = await browser.visit((await authorizationRequest(as, spa.clientId)).url.href)
		expect([first.url.pathname, second.url.pathname]).toEqual(['/sign-in', '/sign-in'])
		// Signed in (as the sign-in page would), the browser goes back to each in turn.
		const other = await signUp(t)
		const signedIn = new Browser(t, `${browser.cookie}; ${await browserCookie(t, other)}`)
		const backToFirst = await signedIn.visit(first.url.searchParams.get('return_to') ?? '')
		expect(backToFirst.url.origin).toBe(ISSUER)
		expect(backToFirst.url.searchParams.get('code')).toBeNull()
		const backToSecond = await signedIn.visit(second.url.searchParams.get('return_to') ?? '')
		expect(backToSecond.url.origin + backToSecond.url.pathname).toBe(REDIRECT_URI)
		expect(backToSecond.url.searchParams.get('code')).toBeString()
	})

	test('revoking the Latchkey session through the API ends the single sign-on', async () => {
		const other = await signUp(t)
		const browser = new Browser(t, await browserCookie(t, other))
		const before = await authorize(app, { prompt: 'none' }, browser)
		expect(before.callback.searchParams.get('code')).toBeString()
		const revoked = await t.call('DELETE', `/api/users/me/sessions/${other.sessionId}`, { token: other.accessToken })
		expect(revoked.status).toBe(200)
		const after = await authorize(app, { prompt: 'none' }, browser)
		expect(after.callback.searchParams.get('error')).toBe('login_required')
	})
})

describe('what ends the single sign-on', () => {
	/** A fresh account signed in at a browser, its single sign-on working, and a token bound to that browser's session. */
	async function signedInBrowser() {
		const owner = await signUp(t)
		const browser = new Browser(t, await browserCookie(t, owner))
		const request = await authorizationRequest(as, app.clientId, { prompt: 'none' })
		const { url } = await browser.visit(request.url.href)
		const parameters = oauth.validateAuthResponse(as, app.client, url, request.state)
		const response = await oauth.authorizationCodeGrantRequest(as, app.client, app.auth, parameters, REDIRECT_URI, request.verifier, through(t))
		const tokens = await oauth.processAuthorizationCodeResponse(as, app.client, response, { expectedNonce: request.nonce, requireIdToken: true })
		expect((await oauth.userInfoRequest(as, app.client, tokens.access_token, through(t))).status).toBe(200)
		return { owner, browser, tokens }
	}

	/** The browser asks again without a page: `login_required`, and the token its session carried is refused. */
	async function expectEnded({ browser, tokens }: Awaited<ReturnType<typeof signedInBrowser>>) {
		const again = await authorize(app, { prompt: 'none' }, browser)
		expect(again.callback.searchParams.get('error')).toBe('login_required')
		expect((await oauth.userInfoRequest(as, app.client, tokens.access_token, through(t))).status).toBe(401)
	}

	test('a password change through the API from another session ends it (it revokes the other sessions)', async () => {
		const signedIn = await signedInBrowser()
		const { owner } = signedIn
		// The change comes from another session of the account (an app's, say): the browser's is one of the others.
		const elsewhere = await login(t, owner.email)
		const changed = await t.call('PUT', '/api/users/me', { token: elsewhere.accessToken, json: { email: owner.email, name: 'Renamed', password: 'a new passphrase for sso', currentPassword: owner.password } })
		expect(changed.status).toBe(200)
		await expectEnded(signedIn)
	})

	test('a recovery by mail ends it (a password reset revokes every session)', async () => {
		const signedIn = await signedInBrowser()
		expect((await recoverByMail(t, signedIn.owner.email)).status).toBe(200)
		await expectEnded(signedIn)
	})

	test('deactivating the account ends it', async () => {
		const signedIn = await signedInBrowser()
		expect((await t.call('DELETE', '/api/users/me', { token: signedIn.owner.accessToken })).status).toBe(200)
		await expectEnded(signedIn)
	})
})

describe('what ends the tokens', () => {
	/** A fresh account signed in at the browser, with its tokens from `client`. */
	async function signedIn(client: RegisteredClient, params: Record<string, string> = {}) {
		const owner = await signUp(t)
		const browser = new Browser(t, await browserCookie(t, owner))
		const request = await authorizationRequest(as, client.clientId, params)
		const { url } = await browser.visit(request.url.href)
		const parameters = oauth.validateAuthResponse(as, client.client, url, request.state)
		const response = await oauth.authorizationCodeGrantRequest(as, client.client, client.auth, parameters, REDIRECT_URI, request.verifier, through(t))
		return { owner, tokens: await oauth.processAuthorizationCodeResponse(as, client.client, response, { expectedNonce: request.nonce, requireIdToken: true }) }
	}

	test('deactivating the account refuses its access and refresh tokens at once', async () => {
		const { owner, tokens } = await signedIn(app, { scope: 'openid email offline_access', prompt: 'consent' })
		expect((await t.call('DELETE', '/api/users/me', { token: owner.accessToken })).status).toBe(200)
		const userinfo = await oauth.userInfoRequest(as, app.client, tokens.access_token, through(t))
		expect(userinfo.status).toBe(401)
		const refresh = await oauth.refreshTokenGrantRequest(as, app.client, app.auth, tokens.refresh_token ?? '', through(t))
		expect(refresh.status).toBe(400)
		expect(((await refresh.json()) as { error: string }).error).toBe('invalid_grant')
	})

	test('userinfo read at once for many tokens (one statement reads several) answers each with its own account, and refuses the revoked one', async () => {
		const shortcut = new UserinfoShortcut({ db: t.database.handle.db, findActiveClient: (clientId) => t.app.decorator.oauthClients.findActive(clientId) })
		const signedInOnes = await Promise.all([0, 1, 2].map(() => signedIn(app)))
		const [revoked] = signedInOnes
		expect((await t.call('DELETE', `/api/users/me/sessions/${revoked?.owner.sessionId}`, { token: revoked?.owner.accessToken })).status).toBe(200)
		// More requests than one statement reads, the same token several times among them.
		const asked = Array.from({ length: 20 }, (_, i) => signedInOnes[i % signedInOnes.length] as (typeof signedInOnes)[number])
		const answers = await Promise.all(asked.map(({ tokens }) => shortcut.answer(new Request(`${ISSUER}/oauth2/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } }))))
		for (const [i, answer] of answers.entries()) {
			const { owner } = asked[i] as (typeof asked)[number]
			if (owner === revoked?.owner) expect(answer).toBeUndefined()
			else expect(((await answer?.json()) as { sub?: string } | undefined)?.sub).toBe(owner.id)
		}
		const throughTheApp = await Promise.all(asked.map(({ tokens }) => t.call('GET', '/oauth2/userinfo', { token: tokens.access_token })))
		for (const [i, response] of throughTheApp.entries()) {
			const { owner } = asked[i] as (typeof asked)[number]
			expect(response.status).toBe(owner === revoked?.owner ? 401 : 200)
			if (response.status === 200) expect(response.body.sub).toBe(owner.id)
		}
	})

	test('revoking the Latchkey session ends the tokens bound to it (no offline_access)', async () => {
		const { owner, tokens } = await signedIn(app)
		expect((await oauth.userInfoRequest(as, app.client, tokens.access_token, through(t))).status).toBe(200)
		expect((await t.call('DELETE', `/api/users/me/sessions/${owner.sessionId}`, { token: owner.accessToken })).status).toBe(200)
		expect((await oauth.userInfoRequest(as, app.client, tokens.access_token, through(t))).status).toBe(401)
	})
})

describe('clients changed through the API', () => {
	/** Once listening: `heard` resolves when every listener on the database has heard the next change of a client (the apps' listen first). */
	async function nextChange() {
		let hear: () => void = () => {}
		const heard = new Promise<void>((resolve) => (hear = resolve))
		const unlisten = await t.database.handle.listen(OAUTH_CLIENTS_CHANNEL, () => hear())
		return { heard: heard.then(unlisten) }
	}

	test('a client changed or disabled through one instance is refused at the next request, by it and by another on the same database', async () => {
		const admin = await signUpAdmin(t)
		const created = await t.call('POST', '/api/oauth-clients', {
			token: admin.accessToken,
			json: { name: 'Changing app', type: 'confidential', redirectUris: [REDIRECT_URI], firstParty: true, grantTypes: ['authorization_code', 'client_credentials'] },
		})
		expect(created.status).toBe(201)
		const { id, clientId, clientSecret } = created.body.data as { id: string; clientId: string; clientSecret: string }
		const client: RegisteredClient = { clientId, clientSecret, client: { client_id: clientId }, auth: oauth.ClientSecretBasic(clientSecret) }
		const other = await startTestApp({}, t.database)
		try {
			const instances = [t, other]
			const signIn = async (instance: TestApp) => {
				const request = await authorizationRequest(as, clientId)
				return new Browser(instance, cookie).visit(request.url.href)
			}
			// Both instances served it twice, so each has it as it was.
			for (const instance of instances)
				for (let i = 0; i < 2; i++) expect((await signIn(instance)).url.searchParams.get('code')).toBeString()

			// Its redirect URI changed: the old one is an error page at the issuer on both, at once.
			let change = await nextChange()
			const changed = await t.call('PUT', `/api/oauth-clients/${id}`, {
				token: admin.accessToken,
				json: { name: 'Changing app', redirectUris: ['https://app.example.test/elsewhere'], firstParty: true, grantTypes: ['authorization_code', 'client_credentials'] },
			})
			expect(changed.status).toBe(200)
			await change.heard
			for (const instance of instances) {
				const { response, url } = await signIn(instance)
				expect(response.status).toBe(400)
				expect(url.origin).toBe(ISSUER)
			}
			const credentials = await oauth.clientCredentialsGrantRequest(as, client.client, client.auth, new URLSearchParams(), through(other))
			expect(credentials.status).toBe(200)

			// Disabled: no authorization, no token, on either.
			change = await nextChange()
			expect((await t.call('DELETE', `/api/oauth-clients/${id}`, { token: admin.accessToken })).status).toBe(200)
			await change.heard
			for (const instance of instances) {
				const request = await authorizationRequest(as, clientId, { redirect_uri: 'https://app.example.test/elsewhere' })
				const { response, url } = await new Browser(instance, cookie).visit(request.url.href)
				expect(response.status).toBe(400)
				expect(url.origin).toBe(ISSUER)
				const refused = await oauth.clientCredentialsGrantRequest(as, client.client, client.auth, new URLSearchParams(), through(instance))
				expect(refused.status).toBe(401)
				expect(((await refused.json()) as { error: string }).error).toBe('invalid_client')
			}
		} finally {
			await other.close()
		}
	})
})

describe('client credentials, introspection and revocation', () => {
	test('a confidential client gets a token for itself', async () => {
		const response = await oauth.clientCredentialsGrantRequest(as, app.client, app.auth, new URLSearchParams(), through(t))
		const tokens = await oauth.processClientCredentialsResponse(as, app.client, response)
		expect(tokens.access_token).toBeString()
		const introspected = await oauth.processIntrospectionResponse(as, app.client, await oauth.introspectionRequest(as, app.client, app.auth, tokens.access_token, through(t)))
		expect(introspected).toMatchObject({ active: true, client_id: app.clientId })
	})

	test('a public client may not introspect (invalid_client) but may revoke its own tokens', async () => {
		const { tokens } = await exchange(spa)
		const introspection = await oauth.introspectionRequest(as, spa.client, spa.auth, tokens.access_token, through(t))
		expect(introspection.status).toBe(401)
		expect(((await introspection.json()) as { error: string }).error).toBe('invalid_client')
		const revocation = await oauth.revocationRequest(as, spa.client, spa.auth, tokens.access_token, through(t))
		await oauth.processRevocationResponse(revocation)
		const userinfo = await oauth.userInfoRequest(as, spa.client, tokens.access_token, through(t))
		expect(userinfo.status).toBe(401)
	})

	test('without a resource indicator an access token is opaque: the resource server introspects it', async () => {
		const { tokens } = await exchange(app)
		expect(tokens.access_token).toMatch(/^[A-Za-z0-9_-]{43}$/)
		const introspected = await oauth.processIntrospectionResponse(as, app.client, await oauth.introspectionRequest(as, app.client, app.auth, tokens.access_token, through(t)))
		expect(introspected).toMatchObject({ active: true, client_id: app.clientId, sub: account.id, token_type: 'Bearer' })
	})

	test('a resource indicator gives an RFC 9068 JWT whose audience is the resource', async () => {
		const response = await oauth.clientCredentialsGrantRequest(as, app.client, app.auth, new URLSearchParams({ resource: 'https://api.example.test/' }), through(t))
		const tokens = await oauth.processClientCredentialsResponse(as, app.client, response)
		const [header, payload] = tokens.access_token.split('.').slice(0, 2).map((part) => JSON.parse(Buffer.from(part, 'base64url').toString()))
		expect(header).toMatchObject({ typ: 'at+jwt', alg: 'RS256' })
		expect(payload).toMatchObject({ iss: ISSUER, aud: 'https://api.example.test/', client_id: app.clientId, sub: app.clientId })
	})
})

describe('logout', () => {
	test('RP-initiated logout ends the Latchkey session and returns to the registered URI with the state', async () => {
		const other = await signUp(t)
		const browser = new Browser(t, await browserCookie(t, other))
		const { tokens } = await (async () => {
			const request = await authorizationRequest(as, app.clientId)
			const { url } = await browser.visit(request.url.href)
			const parameters = oauth.validateAuthResponse(as, app.client, url, request.state)
			const response = await oauth.authorizationCodeGrantRequest(as, app.client, app.auth, parameters, REDIRECT_URI, request.verifier, through(t))
			return { tokens: await oauth.processAuthorizationCodeResponse(as, app.client, response, { expectedNonce: request.nonce, requireIdToken: true }) }
		})()
		const logout = new URL(as.end_session_endpoint ?? '')
		logout.search = new URLSearchParams({ id_token_hint: tokens.id_token ?? '', post_logout_redirect_uri: 'https://app.example.test/signed-out', state: 'bye' }).toString()
		const question = await browser.visit(logout.href)
		expect(question.response.status).toBe(200)
		const page = await question.response.text()
		expect(page).not.toContain('googleapis')
		const answer = await browser.visit('/oauth2/logout/confirm', formPost({ ...hiddenFields(page, '/oauth2/logout/confirm'), logout: 'yes' }))
		expect(answer.url.href).toBe('https://app.example.test/signed-out?state=bye')
		const sessions = await t.call('GET', '/api/users/me/sessions', { token: other.accessToken })
		expect(sessions.status).toBe(401)
		const after = await authorize(app, { prompt: 'none' }, browser)
		expect(after.callback.searchParams.get('error')).toBe('login_required')
	})

	test('a post_logout_redirect_uri that is not registered is never redirected to', async () => {
		const logout = new URL(as.end_session_endpoint ?? '')
		logout.search = new URLSearchParams({ client_id: app.clientId, post_logout_redirect_uri: 'https://evil.example/' }).toString()
		const { response, url } = await new Browser(t, cookie).visit(logout.href)
		expect(url.origin).toBe(ISSUER)
		expect(response.status).toBe(400)
		expect(await response.text()).not.toContain('evil.example')
	})
})

describe('device authorization (RFC 8628)', () => {
	test('a device gets tokens once a signed-in person enters its code and allows it', async () => {
		const device = await registerClient(t, { type: 'public', firstParty: true, grantTypes: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token'], redirectUris: [] })
		const started = await oauth.processDeviceAuthorizationResponse(
			as,
			device.client,
			await oauth.deviceAuthorizationRequest(as, device.client, device.auth, new URLSearchParams({ scope: 'openid email' }), through(t)),
		)
		expect(started.verification_uri).toBe(`${ISSUER}/device`)
		// RFC 8628 §3.2's interval, said rather than left for the device to assume: OAUTH_DEVICE_POLL_SECONDS's default.
		expect(started.interval).toBe(5)
		const pending = await oauth.deviceCodeGrantRequest(as, device.client, device.auth, started.device_code, through(t))
		expect(pending.status).toBe(400)
		expect(((await pending.json()) as { error: string }).error).toBe('authorization_pending')

		const browser = new Browser(t, cookie)
		// The device's link fills the code in; the page asks before anything is allowed.
		const entry = await browser.visit(`/device?user_code=${encodeURIComponent(started.user_code)}`)
		const entryPage = await entry.response.text()
		expect(entryPage).toContain(`value="${started.user_code}"`)
		expect(entryPage).not.toContain('<script')
		const confirm = await browser.visit('/device', formPost({ ...hiddenFields(entryPage, '/device'), user_code: started.user_code }))
		const confirmPage = await confirm.response.text()
		expect(confirmPage).toContain('Allow')
		const done = await browser.visit('/device', formPost({ ...hiddenFields(confirmPage, '/device'), confirm: 'yes' }))
		expect(done.response.status).toBe(200)
		expect(await done.response.text()).toContain('signed in')

		const tokens = await oauth.processDeviceCodeResponse(as, device.client, await oauth.deviceCodeGrantRequest(as, device.client, device.auth, started.device_code, through(t)))
		expect(oauth.getValidatedIdTokenClaims(tokens)?.sub).toBe(account.id)
	})

	test('a visitor who is not signed in gets a provider session for the page form, kept two hours and not as long as a signed-in one', async () => {
		const before = new Set((await t.database.handle.db.select({ id: oauthArtifacts.id }).from(oauthArtifacts).where(eq(oauthArtifacts.model, 'Session'))).map((row) => row.id))
		const { response } = await new Browser(t).visit('/device')
		expect(response.status).toBe(200)
		const made = (
			await t.database.handle.db
				.select({ id: oauthArtifacts.id, payload: oauthArtifacts.payload, expiresAt: oauthArtifacts.expiresAt })
				.from(oauthArtifacts)
				.where(eq(oauthArtifacts.model, 'Session'))
		).filter((row) => !before.has(row.id))
		expect(made).toHaveLength(1)
		expect(made[0]?.payload.accountId).toBeUndefined()
		const left = ((made[0]?.expiresAt?.getTime() ?? 0) - Date.now()) / 1000
		expect(left).toBeGreaterThan(ANONYMOUS_SESSION_SECONDS - 60)
		expect(left).toBeLessThanOrEqual(ANONYMOUS_SESSION_SECONDS + 60)
	})

	test('a wrong code is refused on the page, in words', async () => {
		const browser = new Browser(t, cookie)
		const input = await browser.visit('/device')
		const page = await input.response.text()
		const answer = await browser.visit('/device', formPost({ ...hiddenFields(page, '/device'), user_code: 'BCDF-GHJK' }))
		expect(await answer.response.text()).toContain('did not work')
	})
})

/** A client that registered a back-channel logout URI, and a fresh account's browser signed in to it. */
async function signedInToListeningClient(receiverUrl: string) {
	const listening = await registerClient(t, { type: 'confidential', firstParty: true, backchannelLogoutUri: receiverUrl })
	const other = await signUp(t)
	const browser = new Browser(t, await browserCookie(t, other))
	const request = await authorizationRequest(as, listening.clientId)
	const { url } = await browser.visit(request.url.href)
	return { listening, other, browser, request, url }
}

/** The logout tokens the job queue delivered, claimed now rather than at the NOTIFY's arrival (on PostgreSQL it comes a moment after the commit): their payloads. */
async function deliveredLogoutTokens(received: string[]) {
	t.app.decorator.webhookJobs.wake()
	await t.app.decorator.webhookJobs.idle()
	return received.map((token) => JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()))
}

describe('back-channel logout', () => {
	test('signing out through one client sends a logout token to the clients that registered a URI, through the job queue', async () => {
		const receiver = logoutReceiver()
		const { received } = receiver
		try {
			const { listening, other, browser, request, url } = await signedInToListeningClient(receiver.url)
			const parameters = oauth.validateAuthResponse(as, listening.client, url, request.state)
			const tokens = await oauth.processAuthorizationCodeResponse(
				as,
				listening.client,
				await oauth.authorizationCodeGrantRequest(as, listening.client, listening.auth, parameters, REDIRECT_URI, request.verifier, through(t)),
				{ expectedNonce: request.nonce, requireIdToken: true },
			)
			const logout = new URL(as.end_session_endpoint ?? '')
			logout.search = new URLSearchParams({ id_token_hint: tokens.id_token ?? '' }).toString()
			const page = await (await browser.visit(logout.href)).response.text()
			await browser.visit('/oauth2/logout/confirm', formPost({ ...hiddenFields(page, '/oauth2/logout/confirm'), logout: 'yes' }))
			const payloads = await deliveredLogoutTokens(received)
			expect(payloads).toHaveLength(1)
			expect(payloads[0]).toMatchObject({ iss: ISSUER, aud: listening.clientId, sub: other.id, sid: other.sessionId, events: { 'http://schemas.openid.net/event/backchannel-logout': {} } })
		} finally {
			receiver.stop()
		}
	})
})

describe('back-channel logout when the session ends elsewhere', () => {
	test('a session revoked through the API sends the clients it signed in to their logout token', async () => {
		const receiver = logoutReceiver()
		const { received } = receiver
		try {
			const { listening, other, url } = await signedInToListeningClient(receiver.url)
			expect(url.searchParams.get('code')).toBeString()
			expect((await t.call('DELETE', `/api/users/me/sessions/${other.sessionId}`, { token: other.accessToken })).status).toBe(200)
			// The schedule's step, run now rather than waited for (it runs every 5 s); other tests' ended sessions end too.
			expect(await logOutEndedSessionsStep(t.database.handle.db)).toBeGreaterThanOrEqual(1)
			const payloads = await deliveredLogoutTokens(received)
			expect(payloads).toHaveLength(1)
			expect(payloads[0]).toMatchObject({ aud: listening.clientId, sub: other.id, sid: other.sessionId })
			// Told once: the library's session is gone.
			expect(await logOutEndedSessionsStep(t.database.handle.db)).toBe(0)
		} finally {
			receiver.stop()
		}
	})
})

describe('observability', () => {
	test("the provider's answers are logged with their own status", async () => {
		const response = await t.app.handle(new Request(`${ISSUER}/oauth2/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'grant_type=authorization_code&code=nope&client_id=nobody' }))
		expect(response.status).toBe(401)
		await Bun.sleep(10)
		const line = t.logs.map((text) => JSON.parse(text)).findLast((entry) => entry.msg === 'request' && entry.route === '/oauth2/token')
		expect(line?.status).toBe(401)
	})
})
