import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { and, eq, sql } from 'drizzle-orm'
import * as oauth from 'oauth4webapi'
import { oauthArtifacts, oauthClients, sessions, users } from '../src/db/schema'
import { startTestApp, type TestApp } from './support/app'
import { OAUTH_CLIENTS_CHANNEL } from '../src/modules/oauth/clients'
import { enrollTotp, loginWithTotp } from './support/factors'
import { signUp, signUpAdmin, type Account } from './support/fixtures'
import { authorizationRequest, Browser, browserCookie, discover, ISSUER, REDIRECT_URI, registerClient, through, type RegisteredClient } from './support/oauth'

/*
 * Single sign-on's plain case answered without the library (src/modules/oauth/single-sign-on.ts): the same answer as
 * the library's for the same browser, and every other case left to the library.
 */

let t: TestApp
let as: oauth.AuthorizationServer
let app: RegisteredClient
let spa: RegisteredClient

beforeAll(async () => {
	t = await startTestApp()
	as = await discover(t)
	app = await registerClient(t, { type: 'confidential', firstParty: true })
	spa = await registerClient(t, { type: 'public', firstParty: true })
})
afterAll(() => t.close())

const shortcut = () => t.app.decorator.singleSignOn

/** A browser signed in to Latchkey and, through the library, to `client` once. */
async function signedInBrowser(client: RegisteredClient = app, account?: Account) {
	const owner = account ?? (await signUp(t))
	const browser = new Browser(t, await browserCookie(t, owner))
	const first = await browser.visit((await authorizationRequest(as, client.clientId)).url.href)
	expect(first.url.href.startsWith(REDIRECT_URI)).toBe(true)
	expect(first.url.searchParams.get('code')).toBeTruthy()
	return { browser, account: owner }
}

const ask = (url: URL | string, cookie: string, headers: Record<string, string> = {}) => shortcut().answer(new Request(String(url), { headers: { cookie, ...headers } }))

/** A code's stored record (what the library exchanges it by). */
async function storedCode(code: string) {
	const [row] = await t.database.handle.db.select({ payload: oauthArtifacts.payload }).from(oauthArtifacts).where(and(eq(oauthArtifacts.model, 'AuthorizationCode'), eq(oauthArtifacts.id, code)))
	return row?.payload
}

async function exchange(client: RegisteredClient, location: string, request: { verifier: string; nonce: string; state: string }) {
	const parameters = oauth.validateAuthResponse(as, client.client, new URL(location), request.state)
	const response = await oauth.authorizationCodeGrantRequest(as, client.client, client.auth, parameters, REDIRECT_URI, request.verifier, through(t))
	return oauth.processAuthorizationCodeResponse(as, client.client, response, { expectedNonce: request.nonce, requireIdToken: true })
}

/** Set-Cookie lines without their expiry, and the expiries apart. */
const cookiesOf = (response: Response) => {
	const lines = response.headers.getSetCookie()
	return { lines: lines.map((line) => line.replace(/; expires=[^;]*/g, '')), expires: lines.map((line) => Date.parse(/; expires=([^;]*)/.exec(line)?.[1] ?? '')) }
}

describe('a signed-in browser back for a new code (prompt=none)', () => {
	test('is answered without the library, as the library answers it: the redirect, the cookies, the code and its tokens', async () => {
		for (const client of [app, spa]) {
			const { browser, account } = await signedInBrowser(client)
			const plain = await authorizationRequest(as, client.clientId, { prompt: 'none' })
			const answered = await ask(plain.url, browser.cookie)
			expect(answered?.status).toBe(303)
			// The library's answer to the same browser: `response_mode=query` (its default, said) leaves it the request.
			const library = await authorizationRequest(as, client.clientId, { prompt: 'none', response_mode: 'query' })
			expect(await ask(library.url, browser.cookie)).toBeUndefined()
			const expected = await t.app.handle(new Request(library.url.href, { headers: { cookie: browser.cookie }, redirect: 'manual' }))
			expect(expected.status).toBe(303)

			const ours = new URL(answered?.headers.get('location') ?? '')
			const theirs = new URL(expected.headers.get('location') ?? '')
			expect(`${ours.origin}${ours.pathname}`).toBe(REDIRECT_URI)
			expect([...ours.searchParams.keys()]).toEqual([...theirs.searchParams.keys()])
			expect([...ours.searchParams.keys()]).toEqual(['code', 'state', 'iss'])
			expect(ours.searchParams.get('state')).toBe(plain.state)
			expect(ours.searchParams.get('iss')).toBe(theirs.searchParams.get('iss') ?? '')
			expect(answered?.headers.get('cache-control')).toBe(expected.headers.get('cache-control'))
			const ourCookies = cookiesOf(answered as Response)
			const theirCookies = cookiesOf(expected)
			expect(ourCookies.lines).toEqual(theirCookies.lines)
			expect(ourCookies.lines).toHaveLength(2)
			for (const [i, at] of ourCookies.expires.entries()) expect(Math.abs(at - (theirCookies.expires[i] ?? 0))).toBeLessThanOrEqual(2000)

			// The codes as stored: the same record but for what is the request's own (its id, times, nonce, challenge).
			const ourCode = ours.searchParams.get('code') ?? ''
			const theirCode = theirs.searchParams.get('code') ?? ''
			const own = ['jti', 'iat', 'exp', 'nonce', 'codeChallenge']
			const strip = (payload: Record<string, unknown> | undefined) => Object.fromEntries(Object.entries(payload ?? {}).filter(([key]) => !own.includes(key)))
			const [ourRecord, theirRecord] = [await storedCode(ourCode), await storedCode(theirCode)]
			expect(ourRecord?.nonce).toBe(plain.nonce)
			expect(strip(ourRecord)).toEqual(strip(theirRecord))
			expect(strip(ourRecord)).toMatchObject({ accountId: account.id, sid: account.sessionId, scope: 'openid email profile', expiresWithSession: true, codeChallengeMethod: 'S256' })

			// Both codes exchanged by a certified relying party: the same ID token but for its own members.
			const ourTokens = await exchange(client, ours.href, plain)
			const theirTokens = await exchange(client, theirs.href, library)
			const claims = (tokens: oauth.TokenEndpointResponse) => {
				const { iat: _iat, exp: _exp, nonce: _nonce, at_hash: _hash, jti: _jti, ...rest } = (oauth.getValidatedIdTokenClaims(tokens) ?? {}) as Record<string, unknown>
				return rest
			}
			expect(claims(ourTokens)).toEqual(claims(theirTokens))
			expect(claims(ourTokens)).toMatchObject({ iss: ISSUER, sub: account.id, aud: client.clientId, sid: account.sessionId })
			expect(ourTokens.scope).toBe(theirTokens.scope ?? '')
			const userinfo = async (tokens: oauth.TokenEndpointResponse) =>
				oauth.processUserInfoResponse(as, client.client, account.id, await oauth.userInfoRequest(as, client.client, tokens.access_token, through(t)))
			expect(await userinfo(ourTokens)).toEqual(await userinfo(theirTokens))
			// A code is good once, as any code.
			const again = await oauth.authorizationCodeGrantRequest(as, client.client, client.auth, oauth.validateAuthResponse(as, client.client, ours, plain.state), REDIRECT_URI, plain.verifier, through(t))
			expect(again.status).toBe(400)
		}
	})

	test('through the service, the plain request gets a code that a certified client exchanges', async () => {
		const { browser, account } = await signedInBrowser()
		const plain = await authorizationRequest(as, app.clientId, { prompt: 'none', scope: 'openid email' })
		const { url } = await browser.visit(plain.url.href)
		const tokens = await exchange(app, url.href, plain)
		expect(oauth.getValidatedIdTokenClaims(tokens)?.sub).toBe(account.id)
		expect(tokens.scope).toBe('openid email')
	})

	test('sixteen at once for the same browser get sixteen codes, each good once; the session revoked, the next is the library\'s login_required', async () => {
		const { browser, account } = await signedInBrowser()
		const requests = await Promise.all(Array.from({ length: 16 }, () => authorizationRequest(as, app.clientId, { prompt: 'none' })))
		const answers = await Promise.all(requests.map((request) => ask(request.url, browser.cookie)))
		const codes = answers.map((answer) => new URL(answer?.headers.get('location') ?? '').searchParams.get('code'))
		expect(new Set(codes).size).toBe(16)
		const exchanged = await Promise.all(requests.map((request, i) => exchange(app, answers[i]?.headers.get('location') ?? '', request)))
		expect(exchanged.every((tokens) => oauth.getValidatedIdTokenClaims(tokens)?.sub === account.id)).toBe(true)

		await t.call('DELETE', `/api/users/me/sessions/${account.sessionId}`, { token: account.accessToken })
		const after = await authorizationRequest(as, app.clientId, { prompt: 'none' })
		expect(await ask(after.url, browser.cookie)).toBeUndefined()
		const { url } = await browser.visit(after.url.href)
		expect(url.searchParams.get('error')).toBe('login_required')
		expect(url.searchParams.get('code')).toBeNull()
	})
})

describe('everything but the plain case is left to the library', () => {
	test('another parameter, prompt or scope, a parameter twice, a bad challenge, another client or redirect URI', async () => {
		const { browser } = await signedInBrowser()
		const plain = await authorizationRequest(as, app.clientId, { prompt: 'none' })
		expect((await ask(plain.url, browser.cookie))?.status).toBe(303)
		const variant = (change: (query: URLSearchParams) => void) => {
			const url = new URL(plain.url)
			change(url.searchParams)
			return ask(url, browser.cookie)
		}
		const changes: Array<[string, (query: URLSearchParams) => void]> = [
			['max_age', (q) => q.set('max_age', '3600')],
			['acr_values', (q) => q.set('acr_values', 'aal1')],
			['login_hint', (q) => q.set('login_hint', 'someone@example.test')],
			['claims', (q) => q.set('claims', JSON.stringify({ id_token: { email: null } }))],
			['resource', (q) => q.set('resource', 'https://api.example.test')],
			['response_mode', (q) => q.set('response_mode', 'query')],
			['ui_locales', (q) => q.set('ui_locales', 'en')],
			['request', (q) => q.set('request', 'eyJhbGciOiJub25lIn0.e30.')],
			['id_token_hint', (q) => q.set('id_token_hint', 'x.y.z')],
			['no prompt', (q) => q.delete('prompt')],
			['prompt=login', (q) => q.set('prompt', 'login')],
			['prompt=none consent', (q) => q.set('prompt', 'none consent')],
			['offline_access', (q) => q.set('scope', 'openid offline_access')],
			['organizations', (q) => q.set('scope', 'openid organizations')],
			['an organization', (q) => q.set('scope', `openid organization:${crypto.randomUUID()}`)],
			['no openid', (q) => q.set('scope', 'email')],
			['a scope twice', (q) => q.set('scope', 'openid email email')],
			['an unknown scope', (q) => q.set('scope', 'openid admin')],
			['state twice', (q) => q.append('state', 'other')],
			['an empty state', (q) => q.set('state', '')],
			['plain PKCE', (q) => q.set('code_challenge_method', 'plain')],
			['no challenge', (q) => q.delete('code_challenge')],
			['a short challenge', (q) => q.set('code_challenge', 'abc')],
			['response_type', (q) => q.set('response_type', 'code id_token')],
			['another client', (q) => q.set('client_id', spa.clientId)],
			['an unknown client', (q) => q.set('client_id', 'no-such-client')],
			['a redirect URI with a trailing slash', (q) => q.set('redirect_uri', `${REDIRECT_URI}/`)],
			['a redirect URI in capitals', (q) => q.set('redirect_uri', REDIRECT_URI.toUpperCase())],
			['a redirect URI with userinfo', (q) => q.set('redirect_uri', 'https://evil.test@app.example.test/callback')],
			['a redirect URI with a fragment', (q) => q.set('redirect_uri', `${REDIRECT_URI}#x`)],
			['a redirect URI with encoded slashes', (q) => q.set('redirect_uri', 'https://app.example.test%2Fcallback')],
		]
		for (const [name, change] of changes) expect({ name, answered: (await variant(change))?.status }).toEqual({ name, answered: undefined })
		// A POST, a body, DPoP: the library's.
		expect(await shortcut().answer(new Request(plain.url.href, { method: 'POST', headers: { cookie: browser.cookie } }))).toBeUndefined()
		expect(await ask(plain.url, browser.cookie, { dpop: 'x' })).toBeUndefined()
	})

	test('a browser with no session, a forged or missing provider session cookie, or the cookie of another browser', async () => {
		const { browser } = await signedInBrowser()
		const other = await signedInBrowser()
		const plain = await authorizationRequest(as, app.clientId, { prompt: 'none' })
		const jar = (cookie: string) => Object.fromEntries(cookie.split('; ').map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]))
		const mine = jar(browser.cookie)
		const theirs = jar(other.browser.cookie)
		const cookie = (parts: Record<string, string | undefined>) =>
			Object.entries(parts)
				.filter(([, value]) => value !== undefined)
				.map(([name, value]) => `${name}=${value}`)
				.join('; ')
		expect((await ask(plain.url, cookie(mine)))?.status).toBe(303)
		// The browser's Latchkey session without its provider session, and the other way round.
		expect(await ask(plain.url, cookie({ ...mine, 'latchkey-op-session': undefined, 'latchkey-op-session.sig': undefined }))).toBeUndefined()
		expect(await ask(plain.url, cookie({ ...mine, '__Host-latchkey-session': undefined }))).toBeUndefined()
		// A provider session id without its signature, with another's, with one for another id.
		expect(await ask(plain.url, cookie({ ...mine, 'latchkey-op-session.sig': undefined }))).toBeUndefined()
		expect(await ask(plain.url, cookie({ ...mine, 'latchkey-op-session.sig': 'AAAAAAAAAAAAAAAAAAAAAAAAAAA' }))).toBeUndefined()
		expect(await ask(plain.url, cookie({ ...mine, 'latchkey-op-session.sig': theirs['latchkey-op-session.sig'] }))).toBeUndefined()
		// Another browser's provider session (cookie and signature) with this browser's Latchkey session, and the reverse:
		// the library takes on this browser's session anew (another account: a new provider session), never the other's.
		expect(await ask(plain.url, cookie({ ...mine, 'latchkey-op-session': theirs['latchkey-op-session'], 'latchkey-op-session.sig': theirs['latchkey-op-session.sig'] }))).toBeUndefined()
		expect(await ask(plain.url, cookie({ ...theirs, '__Host-latchkey-session': mine['__Host-latchkey-session'] }))).toBeUndefined()
	})

	test('a native client, a scope the grant does not hold, a session whose expiry is due to be written, a deactivated account', async () => {
		const native = await registerClient(t, { type: 'public', firstParty: true, redirectUris: ['http://127.0.0.1/callback'] })
		const nativeBrowser = new Browser(t, await browserCookie(t, await signUp(t)))
		const nativeRequest = await authorizationRequest(as, native.clientId, { redirect_uri: 'http://127.0.0.1/callback' })
		await nativeBrowser.visit(nativeRequest.url.href)
		expect(await ask((await authorizationRequest(as, native.clientId, { redirect_uri: 'http://127.0.0.1/callback', prompt: 'none' })).url, nativeBrowser.cookie)).toBeUndefined()

		// Signed in with `openid` alone: `email` is not in the grant (the library adds it, as the client is first-party).
		const { browser, account } = await signedInBrowser(app)
		const narrow = await signUp(t)
		const narrowBrowser = new Browser(t, await browserCookie(t, narrow))
		await narrowBrowser.visit((await authorizationRequest(as, spa.clientId, { scope: 'openid' })).url.href)
		expect(await ask((await authorizationRequest(as, spa.clientId, { prompt: 'none', scope: 'openid email' })).url, narrowBrowser.cookie)).toBeUndefined()
		expect((await ask((await authorizationRequest(as, spa.clientId, { prompt: 'none', scope: 'openid' })).url, narrowBrowser.cookie))?.status).toBe(303)

		// The provider session's stored expiry more than an hour behind where a save would put it: the library saves it.
		const plain = await authorizationRequest(as, app.clientId, { prompt: 'none' })
		expect((await ask(plain.url, browser.cookie))?.status).toBe(303)
		const sessionId = /latchkey-op-session=([^;]+)/.exec(browser.cookie)?.[1] ?? ''
		await t.database.handle.db
			.update(oauthArtifacts)
			.set({ payload: sql`jsonb_set(${oauthArtifacts.payload}, '{exp}', to_jsonb((${oauthArtifacts.payload}->>'exp')::bigint - 7200))` })
			.where(and(eq(oauthArtifacts.model, 'Session'), eq(oauthArtifacts.id, sessionId)))
		expect(await ask(plain.url, browser.cookie)).toBeUndefined()
		const { url } = await browser.visit(plain.url.href)
		expect(url.searchParams.get('code')).toBeTruthy()
		// Saved by the library: the plain case again.
		expect((await ask((await authorizationRequest(as, app.clientId, { prompt: 'none' })).url, browser.cookie))?.status).toBe(303)

		await t.database.handle.db.update(users).set({ status: 'deactivated', deactivatedAt: new Date() }).where(eq(users.id, account.id))
		expect(await ask((await authorizationRequest(as, app.clientId, { prompt: 'none' })).url, browser.cookie)).toBeUndefined()
		const refused = await browser.visit((await authorizationRequest(as, app.clientId, { prompt: 'none' })).url.href)
		expect(refused.url.searchParams.get('error')).toBe('login_required')
	})

	test('a client the library would not load (metadata its schema refuses), a disabled client, a client_id no client has', async () => {
		const admin = await signUpAdmin(t)
		const created = await t.call('POST', '/api/oauth-clients', {
			token: admin.accessToken,
			json: { name: 'Changing app', type: 'public', redirectUris: [REDIRECT_URI], firstParty: true, grantTypes: ['authorization_code'] },
		})
		expect(created.status).toBe(201)
		const { id, clientId } = created.body.data as { id: string; clientId: string }
		const client: RegisteredClient = { clientId, client: { client_id: clientId }, auth: oauth.None() }
		const { browser } = await signedInBrowser(client)
		const plain = await authorizationRequest(as, clientId, { prompt: 'none' })
		expect((await ask(plain.url, browser.cookie))?.status).toBe(303)
		/** A change of the client, once the app has heard of it (every instance forgets what it kept of a client then). */
		const heard = async (change: () => Promise<unknown>) => {
			let hear: () => void = () => {}
			const changeHeard = new Promise<void>((resolve) => (hear = resolve))
			const unlisten = await t.database.handle.listen(OAUTH_CLIENTS_CHANNEL, () => hear())
			await change()
			await changeHeard
			await unlisten()
		}
		// A web redirect URI beside a native app's, as a row written before the API refused such a client (it does now:
		// oauth.clients.test.ts): the library refuses to load it (an error page), and so no code goes to either URI,
		// whatever grant the browser holds.
		const redirectUris = async (uris: string[]) =>
			heard(async () => {
				await t.database.handle.db.update(oauthClients).set({ redirectUris: uris }).where(eq(oauthClients.id, id))
				await t.database.handle.db.execute(sql`select pg_notify(${OAUTH_CLIENTS_CHANNEL}, ${clientId})`)
			})
		await redirectUris([REDIRECT_URI, 'com.example.app:/callback'])
		expect(await ask(plain.url, browser.cookie)).toBeUndefined()
		const refused = await browser.visit(plain.url.href)
		expect(refused.response.status).toBe(400)
		expect(refused.url.origin).toBe(ISSUER)
		await redirectUris([REDIRECT_URI])
		expect((await ask(plain.url, browser.cookie))?.status).toBe(303)
		await heard(() => t.call('DELETE', `/api/oauth-clients/${id}`, { token: admin.accessToken }))
		expect(await ask(plain.url, browser.cookie)).toBeUndefined()
		for (const unknown of ['no-such-client', 'a%00b', 'x'.repeat(300)]) {
			const url = new URL(plain.url)
			url.searchParams.set('client_id', decodeURIComponent(unknown))
			expect(await ask(url, browser.cookie)).toBeUndefined()
		}
	})

	test('a browser session expired in the database is not signed in, whatever its cookies say', async () => {
		const { browser, account } = await signedInBrowser()
		await t.database.handle.db.update(sessions).set({ expiresAt: sql`now() - interval '1 second'` }).where(eq(sessions.id, account.sessionId))
		const plain = await authorizationRequest(as, app.clientId, { prompt: 'none' })
		expect(await ask(plain.url, browser.cookie)).toBeUndefined()
		expect((await browser.visit(plain.url.href)).url.searchParams.get('error')).toBe('login_required')
	})
})

describe('MFA_REQUIRED: a browser session held to enrolment signs in to no client', () => {
	let strict: TestApp
	let strictAs: oauth.AuthorizationServer
	beforeAll(async () => {
		strict = await startTestApp({ MFA_REQUIRED: 'all' }, t.database)
		strictAs = await oauth.processDiscoveryResponse(new URL(ISSUER), await oauth.discoveryRequest(new URL(ISSUER), through(strict)))
	})
	afterAll(() => strict.close())

	test('no code, by the shortcut or the library: sent to add a factor, or interaction_required with prompt=none; with a factor used, signed in', async () => {
		const client = await registerClient(strict, { type: 'public', firstParty: true })
		const account = await signUp(strict)
		const browser = new Browser(strict, await browserCookie(strict, account))
		const first = await browser.visit((await authorizationRequest(strictAs, client.clientId)).url.href)
		expect(first.url.pathname).toBe('/account/security')
		expect(first.url.searchParams.get('code')).toBeNull()
		const quiet = await authorizationRequest(strictAs, client.clientId, { prompt: 'none' })
		expect(await strict.app.decorator.singleSignOn.answer(new Request(quiet.url.href, { headers: { cookie: browser.cookie } }))).toBeUndefined()
		const answered = await browser.visit(quiet.url.href)
		expect(answered.url.href.startsWith(REDIRECT_URI)).toBe(true)
		expect(answered.url.searchParams.get('error')).toBe('interaction_required')
		expect(answered.url.searchParams.get('code')).toBeNull()

		// A factor added and used (an aal2 session): signed in, and then by the shortcut too.
		const { secret } = await enrollTotp(strict, account)
		const stepped = await loginWithTotp(strict, account, secret)
		const steppedBrowser = new Browser(strict, await browserCookie(strict, stepped))
		const signedIn = await steppedBrowser.visit((await authorizationRequest(strictAs, client.clientId)).url.href)
		expect(signedIn.url.searchParams.get('code')).toBeTruthy()
		const again = await authorizationRequest(strictAs, client.clientId, { prompt: 'none' })
		expect((await strict.app.decorator.singleSignOn.answer(new Request(again.url.href, { headers: { cookie: steppedBrowser.cookie } })))?.status).toBe(303)
		// Its last factor removed, the same session is held again at its next sign-in.
		await strict.database.handle.db.execute(sql`delete from factors where user_id = ${account.id}`)
		expect(await strict.app.decorator.singleSignOn.answer(new Request(again.url.href, { headers: { cookie: steppedBrowser.cookie } }))).toBeUndefined()
		expect((await steppedBrowser.visit((await authorizationRequest(strictAs, client.clientId, { prompt: 'none' })).url.href)).url.searchParams.get('error')).toBe('interaction_required')
	})
})
