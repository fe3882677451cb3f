import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import * as oauth from 'oauth4webapi'
import { REGISTERED_CLAIMS } from '../src/modules/auth/app-claims'
import { problem, startTestApp, type TestApp } from './support/app'
import { jwtPayload, login, PASSWORD, signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'
import { WebhookReceiver, type ReceivedDelivery } from './support/webhook-receiver'
import { authorizationRequest, Browser, browserCookie, discover, REDIRECT_URI, registerClient, through } from './support/oauth'

setDefaultTimeout(30_000)

let t: TestApp
let admin: Account
let receiver: WebhookReceiver
let secret: string
beforeAll(async () => {
	receiver = await WebhookReceiver.start()
	t = await startTestApp({ EMAIL_VERIFICATION: 'off', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' })
	admin = await signUpAdmin(t)
	const endpoint = await t.call('POST', '/api/webhooks', { token: admin.accessToken, json: { url: receiver.url, events: ['user.updated'] } })
	expect(endpoint.status).toBe(201)
	secret = endpoint.body.data.secret
})
afterAll(async () => {
	await t.close()
	await receiver.stop()
})

const put = (target: string, json: Record<string, unknown>, caller: Account) => t.call('PUT', `/api/users/${target}`, { json, token: caller.accessToken })
const get = (target: string, caller: Account) => t.call('GET', `/api/users/${target}`, { token: caller.accessToken })
const forbidden = (instance: string, detail: string) => problem('forbidden', 403, instance, detail)
const invalid = (instance: string, errors: Array<{ pointer: string; code: string; detail: string }>) =>
	problem('validation-error', 422, instance, errors.length === 1 ? '1 field is invalid' : `${errors.length} fields are invalid`, errors)

/** An object whose compact JSON is exactly `bytes` UTF-8 bytes, with multi-byte characters in it. */
function objectOfBytes(bytes: number): Record<string, string> {
	// {"k":"…"} is 8 bytes around the value; "é" is 2 bytes, "a" 1.
	const room = bytes - 8
	const value = 'é'.repeat(Math.floor(room / 2)) + 'a'.repeat(room % 2)
	const object = { k: value }
	expect(Buffer.byteLength(JSON.stringify(object))).toBe(bytes)
	return object
}

describe('metadata and appMetadata on the user resource', () => {
	test('a new account has both, empty, in every view of it', async () => {
		const user = await signUp(t)
		const own = await get('me', user)
		expect(own.body.data).toMatchObject({ metadata: {}, appMetadata: {} })
		const listed = await t.call('GET', `/api/users?email=${encodeURIComponent(user.email)}`, { token: admin.accessToken })
		expect(listed.body.data.items).toEqual([own.body.data])
		const signedIn = await t.call('POST', '/api/auth/login', { json: { email: user.email, password: PASSWORD } })
		expect(signedIn.body.data.user).toEqual(own.body.data)
	})

	test('sign-up takes metadata; appMetadata only from an admin (an empty one from anyone)', async () => {
		const email = uniqueEmail()
		const created = await t.call('POST', '/api/users', { json: { email, password: PASSWORD, metadata: { theme: 'dark', n: [1, 2] } } })
		expect(created.status).toBe(201)
		expect(created.body.data).toMatchObject({ metadata: { theme: 'dark', n: [1, 2] }, appMetadata: {} })

		const refused = await t.call('POST', '/api/users', { json: { email: uniqueEmail(), password: PASSWORD, appMetadata: { plan: 'pro' } } })
		expect(refused.status).toBe(403)
		expect(refused.body).toEqual(forbidden('/api/users', 'Only admins may set appMetadata'))

		const empty = await t.call('POST', '/api/users', { json: { email: uniqueEmail(), password: PASSWORD, appMetadata: {} } })
		expect(empty.status).toBe(201)

		const byAdmin = await t.call('POST', '/api/users', { json: { email: uniqueEmail(), password: PASSWORD, appMetadata: { plan: 'pro' } }, token: admin.accessToken })
		expect(byAdmin.status).toBe(201)
		expect(byAdmin.body.data.appMetadata).toEqual({ plan: 'pro' })
	})

	test('a user PUTs their own metadata; omitted, it stays as it is', async () => {
		const user = await signUp(t)
		const res = await put('me', { email: user.email, name: 'Ada', metadata: { theme: 'dark', nested: { a: [1, 'two', null, true] } } }, user)
		expect(res.status).toBe(200)
		expect(res.body.data.metadata).toEqual({ theme: 'dark', nested: { a: [1, 'two', null, true] } })
		const kept = await put('me', { email: user.email, name: 'Ada Lovelace' }, user)
		expect(kept.body.data.metadata).toEqual({ theme: 'dark', nested: { a: [1, 'two', null, true] } })
		expect((await get('me', user)).body.data.metadata).toEqual({ theme: 'dark', nested: { a: [1, 'two', null, true] } })
		const cleared = await put('me', { email: user.email, name: 'Ada Lovelace', metadata: {} }, user)
		expect(cleared.body.data.metadata).toEqual({})
	})

	test('a non-admin sending another appMetadata gets 403; the current one (in any key order) is fine', async () => {
		const user = await signUp(t)
		const set = await put(user.id, { email: user.email, name: 'Test User', appMetadata: { plan: 'pro', limits: { a: 1, b: 2 } } }, admin)
		expect(set.status).toBe(200)
		expect(set.body.data.appMetadata).toEqual({ plan: 'pro', limits: { a: 1, b: 2 } })

		const refused = await put('me', { email: user.email, name: 'Test User', appMetadata: { plan: 'enterprise' } }, user)
		expect(refused.status).toBe(403)
		expect(refused.body).toEqual(forbidden('/api/users/me', 'Only admins may change appMetadata'))
		const emptied = await put('me', { email: user.email, name: 'Test User', appMetadata: {} }, user)
		expect(emptied.status).toBe(403)

		const same = await put('me', { email: user.email, name: 'Test User', metadata: { mine: true }, appMetadata: { limits: { b: 2, a: 1 }, plan: 'pro' } }, user)
		expect(same.status).toBe(200)
		expect(same.body.data).toMatchObject({ metadata: { mine: true }, appMetadata: { plan: 'pro', limits: { a: 1, b: 2 } } })
	})

	test('an admin sets both on another account', async () => {
		const user = await signUp(t)
		const res = await put(user.id, { email: user.email, name: 'Test User', metadata: { by: 'admin' }, appMetadata: { roles: ['editor'] } }, admin)
		expect(res.status).toBe(200)
		expect((await get('me', user)).body.data).toMatchObject({ metadata: { by: 'admin' }, appMetadata: { roles: ['editor'] } })
	})

	test('each holds at most 8 KiB as compact JSON, counted in UTF-8 bytes', async () => {
		const user = await signUp(t)
		const atLimit = objectOfBytes(8192)
		const ok = await put('me', { email: user.email, name: 'Test User', metadata: atLimit }, user)
		expect(ok.status).toBe(200)
		expect(ok.body.data.metadata).toEqual(atLimit)

		const over = await put('me', { email: user.email, name: 'Test User', metadata: objectOfBytes(8193) }, user)
		expect(over.status).toBe(422)
		expect(over.body).toEqual(
			invalid('/api/users/me', [{ pointer: '#/metadata', code: 'maxSize', detail: 'must be at most 8192 bytes as JSON (UTF-8); this is 8193' }]),
		)
		const adminOver = await put(user.id, { email: user.email, name: 'Test User', appMetadata: objectOfBytes(8193) }, admin)
		expect(adminOver.status).toBe(422)
		expect(adminOver.body).toEqual(
			invalid(`/api/users/${user.id}`, [{ pointer: '#/appMetadata', code: 'maxSize', detail: 'must be at most 8192 bytes as JSON (UTF-8); this is 8193' }]),
		)
		const adminAt = await put(user.id, { email: user.email, name: 'Test User', appMetadata: objectOfBytes(8192) }, admin)
		expect(adminAt.status).toBe(200)
		expect((await get('me', user)).body.data.metadata).toEqual(atLimit)

		const signUpOver = await t.call('POST', '/api/users', { json: { email: uniqueEmail(), password: 'short', metadata: objectOfBytes(8193) } })
		expect(signUpOver.status).toBe(422)
		expect(signUpOver.body.errors.map((error: { pointer: string }) => error.pointer).sort()).toEqual(['#/metadata', '#/password'])
	})

	test('nesting deeper than 16 levels is refused', async () => {
		const user = await signUp(t)
		const nest = (levels: number): unknown => (levels === 0 ? 1 : { a: nest(levels - 1) })
		expect((await put('me', { email: user.email, name: 'Test User', metadata: nest(16) as Record<string, unknown> }, user)).status).toBe(200)
		const deep = await put('me', { email: user.email, name: 'Test User', metadata: nest(17) as Record<string, unknown> }, user)
		expect(deep.status).toBe(422)
		expect(deep.body).toEqual(invalid('/api/users/me', [{ pointer: '#/metadata', code: 'maxDepth', detail: 'must nest at most 16 levels deep' }]))
	})

	test('anything but a JSON object is 422', async () => {
		const user = await signUp(t)
		for (const value of [[], [1, 2], 'text', 42, null, true]) {
			const res = await put('me', { email: user.email, name: 'Test User', metadata: value } as Record<string, unknown>, user)
			expect(res.status).toBe(422)
			expect(res.body).toEqual(invalid('/api/users/me', [{ pointer: '#/metadata', code: 'type', detail: 'must be a JSON object' }]))
			const app = await put(user.id, { email: user.email, name: 'Test User', appMetadata: value } as Record<string, unknown>, admin)
			expect(app.status).toBe(422)
			expect(app.body).toEqual(invalid(`/api/users/${user.id}`, [{ pointer: '#/appMetadata', code: 'type', detail: 'must be a JSON object' }]))
		}
		expect((await get('me', user)).body.data).toMatchObject({ metadata: {}, appMetadata: {} })
	})

	test('user.updated reports the change of either', async () => {
		const user = await signUp(t)
		// The `count`th of this account's user.updated events, signed and as the OpenAPI document declares it.
		const delivered = async (count: number) =>
			(await receiver.documentedEvents('user.updated', (data) => data.user?.id === user.id, count, secret))[count - 1] as ReceivedDelivery['event']
		await put('me', { email: user.email, name: 'Test User', metadata: { theme: 'dark' } }, user)
		const own = await delivered(1)
		expect(own.data.changed).toEqual(['metadata'])
		expect(own.data.user).toMatchObject({ id: user.id, metadata: { theme: 'dark' }, appMetadata: {} })

		await put(user.id, { email: user.email, name: 'Test User', metadata: { theme: 'dark' }, appMetadata: { plan: 'pro' } }, admin)
		const app = await delivered(2)
		expect(app.data.changed).toEqual(['appMetadata'])
		expect(app.data.user).toMatchObject({ id: user.id, metadata: { theme: 'dark' }, appMetadata: { plan: 'pro' } })

		// The same values again change nothing: no event (the next one is the name's, alone).
		await put('me', { email: user.email, name: 'Test User', metadata: { theme: 'dark' }, appMetadata: { plan: 'pro' } }, user)
		await put('me', { email: user.email, name: 'Renamed', metadata: { theme: 'dark' } }, user)
		expect((await delivered(3)).data.changed).toEqual(['name'])
	})
})

describe('the audit trail of metadata changes', () => {
	test("names who changed which members, never their values; the same values again add nothing", async () => {
		const user = await signUp(t)
		const trail = async () =>
			(await t.call('GET', `/api/audit-events?userId=${user.id}&limit=100`, { token: admin.accessToken })).body.data.items
				.filter((event: { type: string }) => event.type.endsWith('metadata.changed'))
				.map((event: { type: string; actorId: string; subjectId: string; details: Record<string, unknown> }) => ({ type: event.type, actorId: event.actorId, subjectId: event.subjectId, details: event.details }))
				.reverse()
		await put('me', { email: user.email, name: 'Test User', metadata: { theme: 'dark', secretish: 'value-never-logged' } }, user)
		await put(user.id, { email: user.email, name: 'Test User', appMetadata: { plan: 'pro', claims: { tenant: 'acme' } } }, admin)
		await put(user.id, { email: user.email, name: 'Test User', appMetadata: { plan: 'pro', claims: { tenant: 'other' } } }, admin)
		await put('me', { email: user.email, name: 'Test User', metadata: { theme: 'dark', secretish: 'value-never-logged' } }, user)
		const events = await trail()
		expect(events).toEqual([
			{ type: 'metadata.changed', actorId: user.id, subjectId: user.id, details: { members: 'secretish,theme' } },
			{ type: 'app-metadata.changed', actorId: admin.id, subjectId: user.id, details: { members: 'claims,plan' } },
			{ type: 'app-metadata.changed', actorId: admin.id, subjectId: user.id, details: { members: 'claims' } },
		])
		expect(JSON.stringify(events)).not.toContain('value-never-logged')
	})
})

describe('appMetadata.claims in tokens', () => {
	const ownClaims = { tenant: 'acme', plan: { tier: 2 }, flags: ['beta'] }
	// Every registered name, each with a value that would be wrong if it were copied.
	const hostile = Object.fromEntries([...REGISTERED_CLAIMS].map((name) => [name, `forged-${name}`]))

	test('are copied into the access token at the next issuance (a refresh), never replacing a registered claim', async () => {
		const user = await signUp(t)
		expect(jwtPayload(user.accessToken).tenant).toBeUndefined()
		const res = await put(user.id, { email: user.email, name: 'Test User', appMetadata: { claims: { ...hostile, ...ownClaims }, other: 'not a claim' } }, admin)
		expect(res.status).toBe(200)
		// The token in hand is unchanged: claims are read when a token is issued.
		const refreshed = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: user.refreshToken } })
		expect(refreshed.status).toBe(200)
		const claims = jwtPayload(refreshed.body.data.accessToken)
		expect(claims).toMatchObject(ownClaims)
		expect(claims.other).toBeUndefined()
		for (const name of REGISTERED_CLAIMS) expect(claims[name]).not.toBe(`forged-${name}`)
		expect(claims).toMatchObject({ sub: user.id, role: 'user', aal: 'aal1', amr: ['pwd'] })
		expect(claims.iss).toBe(t.config.jwt.issuer)
		expect(claims.typ).toBeUndefined()
		// The token still works, and a login carries the claims too.
		expect((await t.call('GET', '/api/users/me', { token: refreshed.body.data.accessToken })).status).toBe(200)
		expect(jwtPayload((await login(t, user.email)).accessToken)).toMatchObject(ownClaims)

		// Taken away, they are gone from the next token.
		await put(user.id, { email: user.email, name: 'Test User', appMetadata: {} }, admin)
		const again = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: refreshed.body.data.refreshToken } })
		expect(jwtPayload(again.body.data.accessToken).tenant).toBeUndefined()
	})

	test('a member named __proto__ is refused at any depth, as in every body', async () => {
		const user = await signUp(t)
		const body = `{"email":"${user.email}","name":"Test User","appMetadata":{"claims":{"__proto__":{"role":"admin"},"tenant":"acme"}}}`
		const res = await t.call('PUT', `/api/users/${user.id}`, { body, headers: { 'content-type': 'application/json' }, token: admin.accessToken })
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			invalid(`/api/users/${user.id}`, [{ pointer: '#/appMetadata/claims/__proto__', code: 'additionalProperties', detail: 'is not an allowed member name' }]),
		)
		expect((await get('me', user)).body.data.appMetadata).toEqual({})
	})

	test('claims that are not an object add nothing', async () => {
		const user = await signUp(t)
		await put(user.id, { email: user.email, name: 'Test User', appMetadata: { claims: ['tenant'] } }, admin)
		const token = jwtPayload((await login(t, user.email)).accessToken)
		expect(Object.keys(token).sort()).toEqual(['aal', 'amr', 'aud', 'auth_time', 'exp', 'iat', 'iss', 'jti', 'role', 'sid', 'sub'])
	})

	test("are in the provider's ID and access tokens, never replacing a registered claim, and not in userinfo", async () => {
		const user = await signUp(t)
		await put(user.id, { email: user.email, name: 'Test User', appMetadata: { claims: { ...hostile, ...ownClaims, email: 'forged@example.test' } } }, admin)
		const as = await discover(t)
		const client = await registerClient(t, { type: 'confidential', firstParty: true })
		const browser = new Browser(t, await browserCookie(t, user))
		const request = await authorizationRequest(as, client.clientId, { scope: 'openid email profile offline_access', prompt: 'consent' })
		const { url: callback } = await browser.visit(request.url.href)
		const parameters = oauth.validateAuthResponse(as, client.client, callback, request.state)
		const response = await oauth.authorizationCodeGrantRequest(as, client.client, client.auth, parameters, REDIRECT_URI, request.verifier, through(t))
		// oauth4webapi checks the ID token's iss, aud, exp, iat, nonce and signature: none was replaced.
		const tokens = await oauth.processAuthorizationCodeResponse(as, client.client, response, { expectedNonce: request.nonce, requireIdToken: true })
		const idToken = oauth.getValidatedIdTokenClaims(tokens)
		expect(idToken).toMatchObject({ ...ownClaims, sub: user.id, iss: as.issuer, aud: client.clientId, nonce: request.nonce })
		for (const name of REGISTERED_CLAIMS) expect(idToken?.[name]).not.toBe(`forged-${name}`)
		// A claim of its own name that the ID token does not carry otherwise (conformIdTokenClaims: email is userinfo's).
		expect(idToken?.email).toBe('forged@example.test')

		// The access token (opaque here) carries them too, as introspection shows it.
		const introspected = await oauth.processIntrospectionResponse(
			as,
			client.client,
			await oauth.introspectionRequest(as, client.client, client.auth, tokens.access_token, through(t)),
		)
		expect(introspected).toMatchObject({ active: true, ...ownClaims, sub: user.id, client_id: client.clientId, iss: as.issuer })
		for (const name of REGISTERED_CLAIMS) expect(introspected[name]).not.toBe(`forged-${name}`)

		const userinfo = await oauth.userInfoRequest(as, client.client, tokens.access_token, through(t))
		const info = (await userinfo.json()) as Record<string, unknown>
		expect(info.email).toBe(user.email)
		expect(info.tenant).toBeUndefined()

		// A refresh reads them again.
		await put(user.id, { email: user.email, name: 'Test User', appMetadata: { claims: { tenant: 'globex' } } }, admin)
		const refreshed = await oauth.refreshTokenGrantRequest(as, client.client, client.auth, tokens.refresh_token ?? '', through(t))
		const next = await oauth.processRefreshTokenResponse(as, client.client, refreshed)
		expect(oauth.getValidatedIdTokenClaims(next)).toMatchObject({ tenant: 'globex', sub: user.id })
		expect(oauth.getValidatedIdTokenClaims(next)?.plan).toBeUndefined()
	})
})
