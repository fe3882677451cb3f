import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import * as oauth from 'oauth4webapi'
import { startTestApp, type TestApp } from './support/app'
import { signUp } from './support/fixtures'
import { authorizationRequest, Browser, browserCookie, discover, ISSUER, REDIRECT_URI, registerClient, through, type RegisteredClient } from './support/oauth'

/*
 * The provider attacked as an attacker would: redirect URIs that are almost the registered one, unknown
 * clients, consent-less silent requests, and the issuer that every answer must name (mix-up, RFC 9207).
 */

let t: TestApp
let as: oauth.AuthorizationServer
let app: RegisteredClient
let thirdParty: RegisteredClient
let cookie: string

beforeAll(async () => {
	t = await startTestApp()
	as = await discover(t)
	app = await registerClient(t, { type: 'confidential', firstParty: true })
	thirdParty = await registerClient(t, { type: 'public', firstParty: false })
	cookie = await browserCookie(t, await signUp(t))
})
afterAll(() => t.close())

/** Visits an authorization request with `redirect_uri` replaced; where the browser ended up. */
async function withRedirect(client: RegisteredClient, redirectUri: string) {
	const request = await authorizationRequest(as, client.clientId)
	request.url.searchParams.set('redirect_uri', redirectUri)
	return new Browser(t, cookie).visit(request.url.href)
}

describe('redirect URIs match exactly', () => {
	const almost = [
		['a longer path', `${REDIRECT_URI}/more`],
		['a prefix of the path', REDIRECT_URI.slice(0, -1)],
		['another case in the path', REDIRECT_URI.replace('callback', 'Callback')],
		['an encoded slash and dot segments', `${REDIRECT_URI}%2F..%2F..%2Fevil`],
		['user information before the host', REDIRECT_URI.replace('https://', 'https://attacker@')],
		['a fragment', `${REDIRECT_URI}#fragment`],
		['a query added', `${REDIRECT_URI}?next=https://evil.example/`],
		['a longer host', REDIRECT_URI.replace('app.example.test', 'app.example.test.evil.example')],
		['http instead of https', REDIRECT_URI.replace('https://', 'http://')],
		['another port', REDIRECT_URI.replace('app.example.test', 'app.example.test:8443')],
	] as const
	for (const [what, uri] of almost)
		test(`${what} is an error page at the issuer, never a redirect`, async () => {
			const { response, url } = await withRedirect(app, uri)
			expect(url.origin).toBe(ISSUER)
			expect(response.status).toBe(400)
			expect(response.headers.get('location')).toBeNull()
			const page = await response.text()
			expect(page).not.toContain('evil.example')
			expect(page).not.toContain('<script')
		})

	test('an unknown client is an error page, never a redirect to the URI it names', async () => {
		const request = await authorizationRequest(as, 'no-such-client')
		const { response, url } = await new Browser(t, cookie).visit(request.url.href)
		expect(url.origin).toBe(ISSUER)
		expect(response.status).toBe(400)
		expect(response.headers.get('location')).toBeNull()
	})

	test('a native public client may use any port of its loopback URI (RFC 8252 §7.3), a web client may not', async () => {
		const native = await registerClient(t, { type: 'public', firstParty: true, redirectUris: ['http://127.0.0.1/callback'] })
		const request = await authorizationRequest(as, native.clientId)
		request.url.searchParams.set('redirect_uri', 'http://127.0.0.1:53124/callback')
		const { url } = await new Browser(t, cookie).visit(request.url.href)
		expect(url.origin + url.pathname).toBe('http://127.0.0.1:53124/callback')
		expect(url.searchParams.get('code')).toBeString()

		const web = await registerClient(t, { type: 'confidential', firstParty: true, redirectUris: ['http://127.0.0.1:8080/callback'] })
		const { response, url: stopped } = await withRedirect(web, 'http://127.0.0.1:53124/callback')
		expect(stopped.origin).toBe(ISSUER)
		expect(response.status).toBe(400)
	})
})

describe('silent requests and the issuer', () => {
	test('prompt=none never shows a page: consent not given yet is consent_required at the client, with iss', async () => {
		const request = await authorizationRequest(as, thirdParty.clientId, { prompt: 'none' })
		const { url } = await new Browser(t, cookie).visit(request.url.href)
		expect(url.origin + url.pathname).toBe(REDIRECT_URI)
		expect(url.searchParams.get('error')).toBe('consent_required')
		expect(url.searchParams.get('state')).toBe(request.state)
		expect(url.searchParams.get('iss')).toBe(ISSUER)
	})

	test('a third-party client is sent to the consent page, a first-party one is not', async () => {
		const request = await authorizationRequest(as, thirdParty.clientId)
		const { url } = await new Browser(t, cookie).visit(request.url.href)
		expect(url.origin).toBe(ISSUER)
		expect(url.pathname).toBe('/consent')
	})

	test('an error sent back to the client names the issuer (mix-up defence)', async () => {
		const request = await authorizationRequest(as, app.clientId, { scope: 'openid no-such-scope', response_mode: 'query' })
		request.url.searchParams.set('response_type', 'token')
		const { url } = await new Browser(t, cookie).visit(request.url.href)
		expect(url.origin + url.pathname).toBe(REDIRECT_URI)
		expect(url.searchParams.get('error')).toBeString()
		expect(url.searchParams.get('iss')).toBe(ISSUER)
	})

	test('an unknown interaction is never redirected anywhere but the sign-in page', async () => {
		const { response } = await new Browser(t, cookie).visit('/oauth2/interaction/not-a-real-one?return_to=https://evil.example/')
		expect(response.headers.get('location') ?? '').not.toContain('evil')
	})
})

describe('guessing a client secret', () => {
	/** A wrong secret for `clientId` at the token endpoint, from `address` (behind the trusted proxy). */
	const guessSecret = (app: TestApp, clientId: string, address: string) =>
		app.app.handle(
			new Request(`${ISSUER}/oauth2/token`, {
				method: 'POST',
				headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': address, authorization: `Basic ${btoa(`${clientId}:wrong-${address}`)}` },
				body: 'grant_type=client_credentials',
			}),
		)

	test('counts against the /auth budget per client id, whatever the address', async () => {
		const limited = await startTestApp({ AUTH_RATE_LIMIT_MAX: '3', TRUST_PROXY: '10.0.0.0/8' })
		try {
			const target = await registerClient(limited, { type: 'confidential', firstParty: true })
			const other = await registerClient(limited, { type: 'confidential', firstParty: true })
			const guess = (clientId: string, address: string) => guessSecret(limited, clientId, address)
			const statuses = []
			for (const address of ['192.0.2.1', '192.0.2.2', '192.0.2.3', '192.0.2.4']) statuses.push((await guess(target.clientId, address)).status)
			expect(statuses).toEqual([401, 401, 401, 429])
			// Another client's budget is its own.
			expect((await guess(other.clientId, '192.0.2.5')).status).toBe(401)
		} finally {
			await limited.close()
		}
	})

	test('a client named in the form body (client_secret_post, a public client) is counted by its id too, never a 500', async () => {
		const limited = await startTestApp({ AUTH_RATE_LIMIT_MAX: '3', TRUST_PROXY: '10.0.0.0/8' })
		try {
			const target = await registerClient(limited, { type: 'confidential', firstParty: true, tokenEndpointAuthMethod: 'client_secret_post' })
			const other = await registerClient(limited, { type: 'public', firstParty: true })
			// The body is read by the parse hook before the rate limits look for its client_id.
			const post = (body: Record<string, string>, address: string) =>
				limited.app.handle(
					new Request(`${ISSUER}/oauth2/token`, {
						method: 'POST',
						headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': address },
						body: new URLSearchParams(body).toString(),
					}),
				)
			const statuses = []
			for (const address of ['192.0.2.11', '192.0.2.12', '192.0.2.13', '192.0.2.14'])
				statuses.push((await post({ grant_type: 'client_credentials', client_id: target.clientId, client_secret: `wrong-${address}` }, address)).status)
			expect(statuses).toEqual([401, 401, 401, 429])
			// The public client's budget is its own; its request reaches the endpoint, which answers the protocol's error.
			const answer = await post({ grant_type: 'authorization_code', code: 'unknown', code_verifier: 'x'.repeat(43), redirect_uri: REDIRECT_URI, client_id: other.clientId }, '192.0.2.15')
			expect(answer.status).toBe(400)
			expect(((await answer.json()) as { error: string }).error).toBe('invalid_grant')
		} finally {
			await limited.close()
		}
	})

	test('counts against the /auth budget per client address, whatever the client', async () => {
		const limited = await startTestApp({ AUTH_RATE_LIMIT_MAX: '3', TRUST_PROXY: '10.0.0.0/8' })
		try {
			const clients = await Promise.all([1, 2, 3, 4].map(() => registerClient(limited, { type: 'confidential', firstParty: true })))
			const guess = (clientId: string, address: string) => guessSecret(limited, clientId, address)
			const statuses = []
			for (const { clientId } of clients) statuses.push((await guess(clientId, '192.0.2.9')).status)
			expect(statuses).toEqual([401, 401, 401, 429])
		} finally {
			await limited.close()
		}
	})
})

describe('a spent /auth budget at the credential endpoints, in the protocol\'s words', () => {
	test('a device polling past it is told slow_down (RFC 8628), which client libraries take as "wait longer"; any other request there is told temporarily_unavailable; JSON with Retry-After, never problem+json', async () => {
		const limited = await startTestApp({ AUTH_RATE_LIMIT_MAX: '3' })
		try {
			const limitedAs = await discover(limited)
			const device = await registerClient(limited, { type: 'public', firstParty: true, grantTypes: ['urn:ietf:params:oauth:grant-type:device_code'], redirectUris: [] })
			// The device authorization and two polls spend the budget (this address's, and this client's).
			const started = await oauth.processDeviceAuthorizationResponse(
				limitedAs,
				device.client,
				await oauth.deviceAuthorizationRequest(limitedAs, device.client, device.auth, new URLSearchParams({ scope: 'openid' }), through(limited)),
			)
			const poll = () => oauth.deviceCodeGrantRequest(limitedAs, device.client, device.auth, started.device_code, through(limited))
			for (const answer of [await poll(), await poll()]) expect(((await answer.json()) as { error: string }).error).toBe('authorization_pending')

			const refused = await poll()
			expect(refused.status).toBe(429)
			expect(refused.headers.get('content-type')).toBe('application/json; charset=utf-8')
			expect(refused.headers.get('cache-control')).toBe('no-store')
			expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
			expect(refused.headers.get('ratelimit-remaining')).toBe('0')
			expect(await refused.clone().json()).toEqual({ error: 'slow_down', error_description: `Too many requests; try again in ${refused.headers.get('retry-after')} seconds` })
			// What oauth4webapi makes of it (and openid-client's polling loop on top of it, which then waits 5 s more and
			// honours Retry-After): the protocol's slow_down — where a problem+json body failed it as "not JSON".
			const read = await oauth.processDeviceCodeResponse(limitedAs, device.client, refused).then(
				() => undefined,
				(error: unknown) => error,
			)
			expect(read).toBeInstanceOf(oauth.ResponseBodyError)
			expect((read as oauth.ResponseBodyError).error).toBe('slow_down')

			// Revoking from the same address: the same budget, spent; said as the protocol says "later".
			const revoked = await oauth.revocationRequest(limitedAs, device.client, device.auth, 'a-token', through(limited))
			expect(revoked.status).toBe(429)
			expect(await revoked.json()).toEqual({ error: 'temporarily_unavailable', error_description: expect.stringMatching(/^Too many requests; try again in \d+ seconds$/) })
		} finally {
			await limited.close()
		}
	})
})
