/**
 * OAuth clients as an admin resource (API.md "Latchkey as an OpenID Provider", "Clients, admin API"): secrets
 * shown once and stored hashed, rotation with a day's overlap, disabling, the rules a client must follow, the
 * console's built-in client, who may call what, and the events and audit rows each change writes.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { createHash } from 'node:crypto'
import { and, eq, sql } from 'drizzle-orm'
import { oauthArtifacts, oauthClients, oauthClientSecrets } from '../src/db/schema'
import { ensureConsoleClient } from '../src/modules/oauth/clients'
import { problem, startTestApp, type CallResult, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { signUp, signUpAdmin, type Account } from './support/fixtures'
import { WebhookReceiver } from './support/webhook-receiver'

setDefaultTimeout(60_000)

let database: TestDatabase
let receiver: WebhookReceiver
let t: TestApp
let admin: Account
let user: Account
let webhookSecret: string

beforeAll(async () => {
	database = await createTestDatabase()
	receiver = await WebhookReceiver.start()
	t = await startTestApp({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, database)
	admin = await signUpAdmin(t)
	user = await signUp(t)
	const hook = await t.call('POST', '/api/webhooks', { token: admin.accessToken, json: { url: receiver.url, events: ['oauth-client.created', 'oauth-client.updated'] } })
	expect(hook.status).toBe(201)
	webhookSecret = hook.body.data.secret
})
afterAll(async () => {
	await t.close()
	await receiver.stop()
	await database.drop()
})

const ISO = expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
const CLIENT_ID = expect.stringMatching(/^[A-Za-z0-9_-]{22}$/)
const SECRET = expect.stringMatching(/^[A-Za-z0-9_-]{43}$/)
const UNKNOWN = '01939c3e-0000-7000-8000-000000000000'

const create = (body: unknown, token = admin.accessToken) => t.call('POST', '/api/oauth-clients', { token, json: body })
const clients = () => t.app.decorator.oauthClients
const db = () => t.database.handle.db
const sha256 = (value: string) => createHash('sha256').update(value).digest('hex')

const WEB_APP = { name: 'Acme Dashboard', type: 'confidential', redirectUris: ['https://app.example.com/callback'] }
const SPA = { name: 'Acme SPA', type: 'public', redirectUris: ['https://spa.example.com/callback'] }

async function createdClient(body: Record<string, unknown> = WEB_APP) {
	const res = await create(body)
	expect(res.status).toBe(201)
	return res.body.data as { id: string; clientId: string; clientSecret?: string } & Record<string, unknown>
}

async function secretsOf(id: string) {
	return db().select().from(oauthClientSecrets).where(eq(oauthClientSecrets.clientId, id)).orderBy(oauthClientSecrets.createdAt, oauthClientSecrets.id)
}

/** The deliveries of `type` about one client, verified and checked against the documented payload. */
const eventsOf = (type: string, clientId: string, count: number) => receiver.documentedEvents(type, (data) => data.client?.clientId === clientId, count, webhookSecret)

describe('creating clients', () => {
	test('a confidential client gets its secret once: reads and lists never show it, and the database holds only its SHA-256 digest', async () => {
		const res = await create({ ...WEB_APP, backchannelLogoutUri: 'http://127.0.0.1:9/backchannel-logout', logoUri: 'https://app.example.com/logo.png' })
		expect(res.status).toBe(201)
		expect(res.body).toEqual({
			data: {
				id: expect.any(String),
				clientId: CLIENT_ID,
				name: 'Acme Dashboard',
				type: 'confidential',
				redirectUris: ['https://app.example.com/callback'],
				postLogoutRedirectUris: [],
				backchannelLogoutUri: 'http://127.0.0.1:9/backchannel-logout',
				grantTypes: ['authorization_code', 'refresh_token'],
				scopes: ['openid', 'profile', 'email', 'offline_access'],
				tokenEndpointAuthMethod: 'client_secret_basic',
				firstParty: false,
				logoUri: 'https://app.example.com/logo.png',
				status: 'active',
				createdAt: ISO,
				clientSecret: SECRET,
			},
			message: 'OAuth client created; keep the secret, it is not shown again',
			errors: [],
		})
		const { clientSecret, ...shown } = res.body.data
		expect(res.headers.get('location')).toBe(`/api/oauth-clients/${shown.id}`)
		expect(res.headers.get('cache-control')).toBe('no-store')

		const read = await t.call('GET', `/api/oauth-clients/${shown.id}`, { token: admin.accessToken })
		expect(read.body).toEqual({ data: shown, message: 'OAuth client', errors: [] })
		expect(read.text).not.toContain(clientSecret)
		const listed = await t.call('GET', '/api/oauth-clients?limit=100', { token: admin.accessToken })
		expect(listed.body.data.items).toContainEqual(shown)
		expect(listed.text).not.toContain(clientSecret)
		expect(listed.text).not.toContain('clientSecret')

		const stored = await secretsOf(shown.id)
		expect(stored).toEqual([{ id: expect.any(String), clientId: shown.id, secretHash: sha256(clientSecret), createdAt: expect.any(Date), expiresAt: null }])
		const dump = JSON.stringify([await db().select().from(oauthClients), await db().select().from(oauthClientSecrets)])
		expect(dump).toContain(sha256(clientSecret))
		expect(dump).not.toContain(clientSecret)

		expect(await clients().verifySecret(shown.clientId, clientSecret)).toBe(true)
		expect(await clients().verifySecret(shown.clientId, `${clientSecret.slice(0, -1)}${clientSecret.endsWith('x') ? 'y' : 'x'}`)).toBe(false)
		expect(await clients().verifySecret('no-such-client', clientSecret)).toBe(false)
		expect((await clients().findActive(shown.clientId))?.id).toBe(shown.id)
		expect(await clients().findActive('no-such-client')).toBeUndefined()
	})

	test('a public client has no secret and authenticates with none; loopback http and a private-use scheme are accepted', async () => {
		const redirectUris = ['com.example.app:/callback', 'http://127.0.0.1/callback', 'http://[::1]:8080/callback', 'http://localhost/callback']
		const res = await create({ ...SPA, redirectUris, grantTypes: ['authorization_code', 'urn:ietf:params:oauth:grant-type:device_code'], scopes: ['openid'], idTokenSignedResponseAlg: 'ES256' })
		expect(res.status).toBe(201)
		expect(res.body.message).toBe('OAuth client created')
		expect(res.body.data).toEqual({
			id: expect.any(String),
			clientId: CLIENT_ID,
			name: 'Acme SPA',
			type: 'public',
			redirectUris,
			postLogoutRedirectUris: [],
			grantTypes: ['authorization_code', 'urn:ietf:params:oauth:grant-type:device_code'],
			scopes: ['openid'],
			tokenEndpointAuthMethod: 'none',
			firstParty: false,
			idTokenSignedResponseAlg: 'ES256',
			status: 'active',
			createdAt: ISO,
		})
		const { id, clientId } = res.body.data
		expect(await secretsOf(id)).toEqual([])
		expect(await clients().verifySecret(clientId, '')).toBe(false)
		const rotated = await t.call('POST', `/api/oauth-clients/${id}/secrets`, { token: admin.accessToken })
		expect(rotated.body).toEqual(problem('conflict', 409, `/api/oauth-clients/${id}/secrets`, 'A public client has no secret: it proves itself with PKCE alone'))
		expect(await secretsOf(id)).toEqual([])
	})

	test('bad input is a 422 naming each field, and nothing is stored', async () => {
		const before = (await db().select({ id: oauthClients.id }).from(oauthClients)).length
		const cases: Array<[Record<string, unknown>, string[]]> = [
			[{ ...WEB_APP, redirectUris: ['/relative/callback'] }, ['#/redirectUris/0']],
			[{ ...WEB_APP, redirectUris: ['https://app.example.com/callback#fragment'] }, ['#/redirectUris/0']],
			[{ ...WEB_APP, redirectUris: ['https://app.example.com/callback#'] }, ['#/redirectUris/0']],
			[{ ...WEB_APP, redirectUris: ['http://app.example.com/callback'] }, ['#/redirectUris/0']],
			[{ ...WEB_APP, redirectUris: ['https://user:pass@app.example.com/callback'] }, ['#/redirectUris/0']],
			[{ ...WEB_APP, redirectUris: ['https://app.example.com/ok', 'javascript:alert(1)'] }, ['#/redirectUris/1']],
			// A private-use scheme is for native (public) clients only, and must be a reverse domain.
			[{ ...WEB_APP, redirectUris: ['com.example.app:/callback'] }, ['#/redirectUris/0']],
			[{ ...SPA, redirectUris: ['myapp:/callback'] }, ['#/redirectUris/0']],
			[{ ...SPA, redirectUris: ['data:text/html,hi'] }, ['#/redirectUris/0']],
			// Beside an https redirect URI the client is a web one (the provider's application_type): no private-use scheme then.
			[{ ...SPA, redirectUris: ['https://app.example.com/callback', 'com.example.app:/callback'] }, ['#/redirectUris/1']],
			[{ ...SPA, redirectUris: ['https://app.example.com/callback'], postLogoutRedirectUris: ['com.example.app:/signed-out'] }, ['#/postLogoutRedirectUris/0']],
			[{ ...WEB_APP, postLogoutRedirectUris: ['http://evil.example/after'] }, ['#/postLogoutRedirectUris/0']],
			[{ ...WEB_APP, redirectUris: ['https://app.example.com/cb', 'https://app.example.com/cb'] }, ['#/redirectUris']],
			[{ ...WEB_APP, redirectUris: [] }, ['#/redirectUris']],
			[{ ...SPA, tokenEndpointAuthMethod: 'client_secret_basic' }, ['#/tokenEndpointAuthMethod']],
			[{ ...WEB_APP, tokenEndpointAuthMethod: 'none' }, ['#/tokenEndpointAuthMethod']],
			[{ ...WEB_APP, tokenEndpointAuthMethod: 'private_key_jwt' }, ['#/jwksUri']],
			[{ ...SPA, grantTypes: ['client_credentials'] }, ['#/grantTypes']],
			[{ ...WEB_APP, grantTypes: ['password'] }, ['#/grantTypes/0']],
			[{ ...WEB_APP, grantTypes: ['implicit'] }, ['#/grantTypes/0']],
			[{ ...WEB_APP, grantTypes: [] }, ['#/grantTypes']],
			[{ ...WEB_APP, scopes: ['openid', 'admin'] }, ['#/scopes/1']],
			[{ ...WEB_APP, idTokenSignedResponseAlg: 'none' }, ['#/idTokenSignedResponseAlg']],
			[{ ...WEB_APP, idTokenSignedResponseAlg: 'HS256' }, ['#/idTokenSignedResponseAlg']],
			[{ ...WEB_APP, backchannelLogoutUri: 'http://169.254.169.254/latest/meta-data' }, ['#/backchannelLogoutUri']],
			[{ ...WEB_APP, backchannelLogoutUri: 'ftp://app.example.com/logout' }, ['#/backchannelLogoutUri']],
			[{ ...WEB_APP, tokenEndpointAuthMethod: 'private_key_jwt', jwksUri: 'http://[::ffff:169.254.169.254]/jwks' }, ['#/jwksUri']],
			[{ ...WEB_APP, logoUri: 'http://app.example.com/logo.png' }, ['#/logoUri']],
			[{ ...WEB_APP, type: 'hybrid' }, ['#/type']],
			[{ ...WEB_APP, name: '' }, ['#/name']],
			[{ ...WEB_APP, name: 'two\nlines' }, ['#/name']],
			[{ ...WEB_APP, clientId: 'chosen-by-me' }, ['#/clientId']],
			[{ ...WEB_APP, clientSecret: 'mine' }, ['#/clientSecret']],
			[{ ...WEB_APP, status: 'disabled' }, ['#/status']],
			[{ type: 'public' }, ['#/name']],
			// Every rule broken at once is reported at once.
			[{ ...SPA, redirectUris: ['http://evil.example/cb'], tokenEndpointAuthMethod: 'client_secret_post', grantTypes: ['client_credentials', 'authorization_code'] }, ['#/redirectUris/0', '#/tokenEndpointAuthMethod', '#/grantTypes']],
		]
		for (const [body, pointers] of cases) {
			const res = await create(body)
			expect({ body, status: res.status, type: res.body.type }).toEqual({ body, status: 422, type: 'https://latchkey.dev/problems/validation-error' })
			const named = (res.body.errors as Array<{ pointer: string; detail: string }>).map((error) => error.pointer)
			for (const pointer of pointers) expect({ body, named }).toEqual({ body, named: expect.arrayContaining([pointer]) })
			for (const error of res.body.errors) expect(error.detail).toEqual(expect.any(String))
		}
		expect(await db().select({ id: oauthClients.id }).from(oauthClients)).toHaveLength(before)
		const wrongType = await create({ ...WEB_APP, tokenEndpointAuthMethod: 'none' })
		expect(wrongType.body).toEqual(
			problem('validation-error', 422, '/api/oauth-clients', '1 field is invalid', [
				{ pointer: '#/tokenEndpointAuthMethod', code: 'confidential-client', detail: 'a confidential client must authenticate: client_secret_basic, client_secret_post or private_key_jwt' },
			]),
		)
	})
})

describe('changing clients', () => {
	test('PUT replaces the settings, members left out take their defaults, and the type stays', async () => {
		const made = await createdClient({ ...WEB_APP, scopes: ['openid', 'organizations'], firstParty: true })
		const replaced = await t.call('PUT', `/api/oauth-clients/${made.id}`, {
			token: admin.accessToken,
			json: { name: 'Acme Dashboard v2', redirectUris: ['https://app.example.com/v2/callback'], grantTypes: ['authorization_code', 'client_credentials'], tokenEndpointAuthMethod: 'client_secret_post' },
		})
		expect(replaced.status).toBe(200)
		expect(replaced.body).toEqual({
			data: {
				id: made.id,
				clientId: made.clientId,
				name: 'Acme Dashboard v2',
				type: 'confidential',
				redirectUris: ['https://app.example.com/v2/callback'],
				postLogoutRedirectUris: [],
				grantTypes: ['authorization_code', 'client_credentials'],
				scopes: ['openid', 'profile', 'email', 'offline_access'],
				tokenEndpointAuthMethod: 'client_secret_post',
				firstParty: false,
				status: 'active',
				createdAt: made.createdAt,
			},
			message: 'OAuth client updated',
			errors: [],
		})
		// The secret is untouched by a PUT.
		expect(await clients().verifySecret(made.clientId, made.clientSecret ?? '')).toBe(true)
		// The type cannot change: a public client would have to lose its secret.
		const retyped = await t.call('PUT', `/api/oauth-clients/${made.id}`, { token: admin.accessToken, json: { name: 'x', type: 'public', redirectUris: ['https://a.example/cb'] } })
		expect(retyped.status).toBe(422)
		expect(retyped.body.errors.map((error: { pointer: string }) => error.pointer)).toContain('#/type')
		// A rule broken in a PUT changes nothing.
		const refused = await t.call('PUT', `/api/oauth-clients/${made.id}`, { token: admin.accessToken, json: { name: 'x', redirectUris: ['http://app.example.com/cb'] } })
		expect(refused.status).toBe(422)
		expect((await t.call('GET', `/api/oauth-clients/${made.id}`, { token: admin.accessToken })).body.data).toEqual(replaced.body.data)
		expect((await t.call('PUT', `/api/oauth-clients/${UNKNOWN}`, { token: admin.accessToken, json: { name: 'x', redirectUris: ['https://a.example/cb'] } })).body).toEqual(
			problem('not-found', 404, `/api/oauth-clients/${UNKNOWN}`, 'No OAuth client with this id'),
		)
	})

	test('a new secret works at once and the previous one for 24 hours more; one from an earlier rotation stops', async () => {
		const made = await createdClient()
		const first = made.clientSecret ?? ''
		const rotated = await t.call('POST', `/api/oauth-clients/${made.id}/secrets`, { token: admin.accessToken })
		expect(rotated.status).toBe(201)
		expect(rotated.headers.get('location')).toBe(`/api/oauth-clients/${made.id}`)
		expect(rotated.headers.get('cache-control')).toBe('no-store')
		expect(rotated.body).toEqual({ data: { clientSecret: SECRET }, message: 'New client secret; the previous one works for 24 hours more', errors: [] })
		const second = rotated.body.data.clientSecret as string
		expect(second).not.toBe(first)
		expect(await clients().verifySecret(made.clientId, first)).toBe(true)
		expect(await clients().verifySecret(made.clientId, second)).toBe(true)

		const stored = await secretsOf(made.id)
		expect(stored.map((row) => row.secretHash)).toEqual([sha256(first), sha256(second)])
		// Both written in one transaction, on its clock: the previous secret ends exactly 24 hours after the new one began.
		expect(stored[0]?.expiresAt?.getTime()).toBe((stored[1]?.createdAt.getTime() ?? 0) + 24 * 3600_000)
		expect(stored[1]?.expiresAt).toBeNull()
		// The secret itself is never shown again.
		expect((await t.call('GET', `/api/oauth-clients/${made.id}`, { token: admin.accessToken })).text).not.toContain(second)

		// Once its day is over, the previous secret is refused.
		await db().update(oauthClientSecrets).set({ expiresAt: sql`now() - interval '1 second'` }).where(eq(oauthClientSecrets.secretHash, sha256(first)))
		expect(await clients().verifySecret(made.clientId, first)).toBe(false)
		expect(await clients().verifySecret(made.clientId, second)).toBe(true)

		const third = (await t.call('POST', `/api/oauth-clients/${made.id}/secrets`, { token: admin.accessToken })).body.data.clientSecret as string
		expect(await clients().verifySecret(made.clientId, first)).toBe(false)
		expect(await clients().verifySecret(made.clientId, second)).toBe(true)
		expect(await clients().verifySecret(made.clientId, third)).toBe(true)
		const fourth = (await t.call('POST', `/api/oauth-clients/${made.id}/secrets`, { token: admin.accessToken })).body.data.clientSecret as string
		expect(await clients().verifySecret(made.clientId, second)).toBe(false)
		expect(await clients().verifySecret(made.clientId, third)).toBe(true)
		expect(await clients().verifySecret(made.clientId, fourth)).toBe(true)
		expect((await secretsOf(made.id)).map((row) => row.secretHash)).toEqual([sha256(third), sha256(fourth)])
		expect((await t.call('POST', `/api/oauth-clients/${UNKNOWN}/secrets`, { token: admin.accessToken })).status).toBe(404)
	})

	test('DELETE disables: the client stays, its secrets are void, its tokens deleted; repeating it answers the same; PUT enables it again', async () => {
		const made = await createdClient()
		const other = await createdClient()
		const artifact = (id: string, clientId: string, model = 'RefreshToken') => ({ model, id, payload: { clientId, accountId: user.id, kind: model } })
		await db()
			.insert(oauthArtifacts)
			.values([
				artifact(`rt-${made.id}`, made.clientId),
				artifact(`at-${made.id}`, made.clientId, 'AccessToken'),
				artifact(`g-${made.id}`, made.clientId, 'Grant'),
				artifact(`rt-${other.id}`, other.clientId),
				artifact(`s-${made.id}`, made.clientId, 'Session'),
			])

		const disabled = await t.call('DELETE', `/api/oauth-clients/${made.id}`, { token: admin.accessToken })
		expect(disabled.status).toBe(200)
		const { clientSecret: _, ...shown } = made
		expect(disabled.body).toEqual({ data: { ...shown, status: 'disabled' }, message: 'OAuth client disabled', errors: [] })
		expect(await clients().verifySecret(made.clientId, made.clientSecret ?? '')).toBe(false)
		expect(await secretsOf(made.id)).toEqual([])
		expect(await clients().findActive(made.clientId)).toBeUndefined()
		const left = await db().select({ id: oauthArtifacts.id }).from(oauthArtifacts).orderBy(oauthArtifacts.id)
		expect(left.map((row) => row.id)).toEqual(expect.arrayContaining([`rt-${other.id}`, `s-${made.id}`]))
		expect(left.map((row) => row.id)).not.toEqual(expect.arrayContaining([`rt-${made.id}`]))
		expect(left.map((row) => row.id).filter((id) => id.endsWith(made.id))).toEqual([`s-${made.id}`])
		expect(await clients().verifySecret(other.clientId, other.clientSecret ?? '')).toBe(true)

		const again = await t.call('DELETE', `/api/oauth-clients/${made.id}`, { token: admin.accessToken })
		expect(again.body.data).toEqual(disabled.body.data)
		const listed = await t.call('GET', '/api/oauth-clients?status=disabled&limit=100', { token: admin.accessToken })
		expect(listed.body.data.items).toContainEqual(disabled.body.data)
		expect(listed.body.data.items.every((item: { status: string }) => item.status === 'disabled')).toBe(true)

		const enabled = await t.call('PUT', `/api/oauth-clients/${made.id}`, { token: admin.accessToken, json: { name: made.name, redirectUris: made.redirectUris, status: 'active' } })
		expect(enabled.body.data.status).toBe('active')
		// Its secret stays void: enabled again, it needs a new one.
		expect(await clients().verifySecret(made.clientId, made.clientSecret ?? '')).toBe(false)
		const renewed = (await t.call('POST', `/api/oauth-clients/${made.id}/secrets`, { token: admin.accessToken })).body.data.clientSecret as string
		expect(await clients().verifySecret(made.clientId, renewed)).toBe(true)
		expect((await t.call('DELETE', `/api/oauth-clients/${UNKNOWN}`, { token: admin.accessToken })).body).toEqual(problem('not-found', 404, `/api/oauth-clients/${UNKNOWN}`, 'No OAuth client with this id'))
	})
})

describe('listing', () => {
	test('pages come newest first, by keyset, with a Link to the next one while there is one', async () => {
		for (let i = 0; i < 3; i++) await createdClient({ ...SPA, name: `Paged ${i}` })
		const seen: string[] = []
		let path: string | undefined = '/api/oauth-clients?limit=2'
		let pages = 0
		while (path) {
			const res: CallResult = await t.call('GET', path, { token: admin.accessToken })
			expect(res.status).toBe(200)
			const page = res.body.data
			expect(page.limit).toBe(2)
			expect(page.items.length).toBeLessThanOrEqual(2)
			seen.push(...page.items.map((item: { id: string }) => item.id))
			const link: string | null = res.headers.get('link')
			if (page.nextCursor) expect(link).toBe(`</api/oauth-clients?limit=2&cursor=${page.nextCursor}>; rel="next"`)
			else expect(link).toBeNull()
			path = link ? /^<([^>]+)>/.exec(link)?.[1] : undefined
			pages++
		}
		const all = await db().select({ id: oauthClients.id }).from(oauthClients)
		expect(seen).toHaveLength(all.length)
		expect(new Set(seen).size).toBe(seen.length)
		expect(seen).toEqual([...seen].sort().reverse())
		expect(pages).toBe(Math.ceil(all.length / 2))
		const first = await t.call('GET', '/api/oauth-clients?limit=1', { token: admin.accessToken })
		expect(first.body.data.items[0].name).toBe('Paged 2')
	})

	test('bad query values and ids are refused, not ignored; an id in upper case names the same client', async () => {
		expect((await t.call('GET', '/api/oauth-clients?limit=0', { token: admin.accessToken })).status).toBe(422)
		expect((await t.call('GET', '/api/oauth-clients?limit=101', { token: admin.accessToken })).status).toBe(422)
		expect((await t.call('GET', '/api/oauth-clients?status=gone', { token: admin.accessToken })).status).toBe(422)
		expect((await t.call('GET', '/api/oauth-clients?sort=name', { token: admin.accessToken })).status).toBe(422)
		const badCursor = await t.call('GET', '/api/oauth-clients?cursor=nonsense', { token: admin.accessToken })
		expect(badCursor.body).toEqual(problem('bad-request', 400, '/api/oauth-clients', 'The cursor is not valid for this query', [{ pointer: '#/cursor', code: 'invalid', detail: 'use nextCursor from a previous page' }]))
		expect((await t.call('GET', '/api/oauth-clients/not-a-uuid', { token: admin.accessToken })).status).toBe(422)
		const made = await createdClient(SPA)
		expect((await t.call('GET', `/api/oauth-clients/${made.id.toUpperCase()}`, { token: admin.accessToken })).body.data).toEqual(made)
		expect((await t.call('GET', `/api/oauth-clients/${UNKNOWN}`, { token: admin.accessToken })).body).toEqual(problem('not-found', 404, `/api/oauth-clients/${UNKNOWN}`, 'No OAuth client with this id'))
	})
})

describe('the console’s own client', () => {
	const CONSOLE = {
		id: expect.any(String),
		clientId: 'latchkey-console',
		name: 'Latchkey console',
		type: 'public',
		redirectUris: ['http://localhost/console/callback'],
		postLogoutRedirectUris: ['http://localhost/console'],
		grantTypes: ['authorization_code', 'refresh_token'],
		scopes: ['openid', 'profile', 'email', 'offline_access'],
		tokenEndpointAuthMethod: 'none',
		firstParty: true,
		status: 'active',
		createdAt: ISO,
	}

	test('is there from the start, listed, first-party and public, and can be neither changed nor disabled', async () => {
		const listed = await t.call('GET', '/api/oauth-clients?limit=100', { token: admin.accessToken })
		const consoleClient = listed.body.data.items.find((item: { clientId: string }) => item.clientId === 'latchkey-console')
		expect(consoleClient).toEqual(CONSOLE)
		const path = `/api/oauth-clients/${consoleClient.id}`
		const builtIn = "latchkey-console is the console's own client: it is built in and can be neither changed nor disabled"
		expect((await t.call('DELETE', path, { token: admin.accessToken })).body).toEqual(problem('forbidden', 403, path, builtIn))
		expect((await t.call('PUT', path, { token: admin.accessToken, json: { name: 'Mine now', redirectUris: ['https://evil.example/cb'] } })).body).toEqual(problem('forbidden', 403, path, builtIn))
		expect((await t.call('POST', `${path}/secrets`, { token: admin.accessToken })).status).toBe(409)
		expect((await t.call('GET', path, { token: admin.accessToken })).body.data).toEqual(consoleClient)
		expect((await clients().findActive('latchkey-console'))?.id).toBe(consoleClient.id)
	})

	test('ensuring it is idempotent, safe from instances starting at once, and follows PUBLIC_URL', async () => {
		const [before] = await db().select().from(oauthClients).where(eq(oauthClients.clientId, 'latchkey-console'))
		await Promise.all([ensureConsoleClient(db(), 'http://localhost'), ensureConsoleClient(db(), 'http://localhost')])
		const [same] = await db().select().from(oauthClients).where(eq(oauthClients.clientId, 'latchkey-console'))
		// Nothing differed, so nothing was written.
		expect(same).toEqual(before)

		// A second instance on its own database connection, started at once with a new PUBLIC_URL.
		const second = await startTestApp({ PUBLIC_URL: 'https://auth.example.com' }, database)
		try {
			const rows = await db().select().from(oauthClients).where(eq(oauthClients.clientId, 'latchkey-console'))
			expect(rows).toHaveLength(1)
			expect(rows[0]?.id).toBe(before?.id)
			expect(rows[0]?.redirectUris).toEqual(['https://auth.example.com/console/callback'])
		} finally {
			await second.close()
			await ensureConsoleClient(db(), 'http://localhost')
		}
		// Instances starting at once on a database that has none yet make exactly one.
		await db().delete(oauthClients).where(eq(oauthClients.clientId, 'latchkey-console'))
		await Promise.all(Array.from({ length: 4 }, () => ensureConsoleClient(db(), 'http://localhost')))
		expect(await db().select().from(oauthClients).where(eq(oauthClients.clientId, 'latchkey-console'))).toHaveLength(1)
		// Changed behind the API's back (say, disabled in SQL): start-up makes it as it must be again.
		await db().update(oauthClients).set({ status: 'disabled' }).where(eq(oauthClients.clientId, 'latchkey-console'))
		await ensureConsoleClient(db(), 'http://localhost')
		const [restored] = await db().select().from(oauthClients).where(and(eq(oauthClients.clientId, 'latchkey-console'), eq(oauthClients.status, 'active')))
		expect(restored?.redirectUris).toEqual(['http://localhost/console/callback'])
	})
})

describe('permissions', () => {
	test('every route refuses a user who is not an admin (403) and a caller without a token (401)', async () => {
		const routes: Array<[string, string, unknown?]> = [
			['POST', '/api/oauth-clients', SPA],
			['GET', '/api/oauth-clients'],
			['GET', `/api/oauth-clients/${UNKNOWN}`],
			['PUT', `/api/oauth-clients/${UNKNOWN}`, { name: 'x', redirectUris: ['https://a.example/cb'] }],
			['DELETE', `/api/oauth-clients/${UNKNOWN}`],
			['POST', `/api/oauth-clients/${UNKNOWN}/secrets`],
		]
		for (const [method, path, json] of routes) {
			const asUser = await t.call(method, path, { token: user.accessToken, json })
			expect({ method, path, body: asUser.body }).toEqual({ method, path, body: problem('forbidden', 403, path, 'This requires an admin') })
			const anonymous = await t.call(method, path, { json })
			expect({ method, path, status: anonymous.status, type: anonymous.body.type }).toEqual({ method, path, status: 401, type: 'https://latchkey.dev/problems/unauthorized' })
			expect(anonymous.headers.get('www-authenticate')).toBe('Bearer realm="latchkey"')
			const badToken = await t.call(method, path, { json, token: `${admin.accessToken}x` })
			expect({ method, path, status: badToken.status, type: badToken.body.type }).toEqual({ method, path, status: 401, type: 'https://latchkey.dev/problems/invalid-token' })
		}
	})

	test('an admin held to enrolment (MFA_REQUIRED=admins, no factor yet) creates, reads and changes no client', async () => {
		const held = await startTestApp({ MFA_REQUIRED: 'admins' }, database)
		try {
			const heldAdmin = await signUpAdmin(held)
			const made = await createdClient()
			const HELD = (instance: string) => problem('mfa-enrollment-required', 403, instance, 'Enrol a second factor first: this session serves only enrolment')
			const routes: Array<[string, string, unknown?]> = [
				['POST', '/api/oauth-clients', SPA],
				['GET', '/api/oauth-clients'],
				['GET', `/api/oauth-clients/${made.id}`],
				['PUT', `/api/oauth-clients/${made.id}`, { name: 'x', redirectUris: ['https://a.example/cb'] }],
				['DELETE', `/api/oauth-clients/${made.id}`],
				['POST', `/api/oauth-clients/${made.id}/secrets`],
			]
			for (const [method, path, json] of routes) {
				const res = await held.call(method, path, { token: heldAdmin.accessToken, json })
				expect({ method, path, body: res.body }).toEqual({ method, path, body: HELD(path) })
			}
			expect(await clients().verifySecret(made.clientId, made.clientSecret ?? '')).toBe(true)
			expect((await t.call('GET', `/api/oauth-clients/${made.id}`, { token: admin.accessToken })).body.data.status).toBe('active')
		} finally {
			await held.close()
		}
	})
})

describe('events and audit', () => {
	test('creating, changing, disabling and a new secret each send their event in the change’s transaction, and an audit row; a refused change sends none', async () => {
		const made = await createdClient({ ...WEB_APP, name: 'Evented' })
		const [created] = await eventsOf('oauth-client.created', made.clientId, 1)
		const { clientSecret, ...shown } = made
		expect(created?.data).toEqual({ client: shown })
		expect(JSON.stringify(created)).not.toContain(clientSecret)

		await t.call('PUT', `/api/oauth-clients/${made.id}`, { token: admin.accessToken, json: { name: 'Evented', redirectUris: ['https://app.example.com/callback', 'https://app.example.com/other'] } })
		// Refused: no event, no audit row.
		expect((await t.call('PUT', `/api/oauth-clients/${made.id}`, { token: admin.accessToken, json: { name: 'Evented', redirectUris: ['http://x.example/cb'] } })).status).toBe(422)
		const rotated = (await t.call('POST', `/api/oauth-clients/${made.id}/secrets`, { token: admin.accessToken })).body.data.clientSecret as string
		await t.call('DELETE', `/api/oauth-clients/${made.id}`, { token: admin.accessToken })
		const updates = await eventsOf('oauth-client.updated', made.clientId, 3)
		expect(updates.map((event) => event.data.changed)).toEqual([['redirectUris'], ['clientSecret'], ['status']])
		expect(updates[2]?.data.client).toEqual({ ...shown, redirectUris: ['https://app.example.com/callback', 'https://app.example.com/other'], status: 'disabled' })
		for (const event of updates) expect(JSON.stringify(event)).not.toContain(rotated)

		const audit = await t.call('GET', `/api/audit-events?userId=${admin.id}&limit=100`, { token: admin.accessToken })
		const mine = (audit.body.data.items as Array<{ type: string; details: Record<string, unknown>; actorId: string }>).filter((event) => event.details.clientId === made.clientId)
		expect(mine.map((event) => event.type)).toEqual(['oauth-client.disabled', 'oauth-client.secret-rotated', 'oauth-client.updated', 'oauth-client.created'])
		expect(mine.every((event) => event.actorId === admin.id)).toBe(true)
		expect(mine[2]?.details).toEqual({ clientId: made.clientId, changed: 'redirectUris' })
		expect(JSON.stringify(mine)).not.toContain(rotated)
	})
})
