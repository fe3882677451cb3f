/**
 * The OpenID Provider's own requests to its clients (a client's `jwks_uri` for private_key_jwt, back-channel
 * logout) go where webhooks may go (API.md): through the same checks, to the address checked, never to a
 * loopback or private one unless WEBHOOK_ALLOW_PRIVATE_NETWORKS=true, and never followed past a limit.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { and, eq, sql } from 'drizzle-orm'
import * as oauth from 'oauth4webapi'
import { jobs } from '../src/db/schema'
import type { ResolveHost } from '../src/http/destination'
import { logOutEndedSessionsStep } from '../src/modules/oauth/logout'
import { startTestApp, type TestApp } from './support/app'
import { signUp, signUpAdmin, type Account } from './support/fixtures'
import { authorizationRequest, Browser, browserCookie, discover, logoutReceiver, REDIRECT_URI, registerClient, through } from './support/oauth'

setDefaultTimeout(60_000)

/** What a client's name resolves to when the admin saves it: a public address, as a real client's would. */
const PUBLIC = { address: '93.184.215.14', family: 4 }
const LOOPBACK = { address: '127.0.0.1', family: 4 }
const REFUSED = 'the host resolves to a loopback, private or link-local address'

/** A client's JWKS on loopback, as a client would serve it: every request it got, and what it answers. */
class JwksServer {
	readonly requests: string[] = []
	private readonly server: ReturnType<typeof Bun.serve>
	/** How long an answer it gives: within the provider's limit (64 KiB), or past it with or without a Content-Length. */
	answer: 'keys' | 'too long' | 'too long, chunked' = 'keys'

	constructor(readonly keys: Array<Record<string, unknown>>) {
		this.server = Bun.serve({
			hostname: '127.0.0.1',
			port: 0,
			fetch: (request) => {
				this.requests.push(`${request.method} ${new URL(request.url).pathname}`)
				if (this.answer === 'keys') return Response.json({ keys: this.keys })
				const body = JSON.stringify({ keys: this.keys, padding: 'x'.repeat(70 * 1024) })
				if (this.answer === 'too long') return new Response(body, { headers: { 'content-type': 'application/json' } })
				// In pieces, its length unsaid: only counting what arrives can stop it.
				const bytes = new TextEncoder().encode(body)
				return new Response(
					new ReadableStream({
						start(controller) {
							for (let at = 0; at < bytes.length; at += 8192) controller.enqueue(bytes.subarray(at, at + 8192))
							controller.close()
						},
					}),
					{ headers: { 'content-type': 'application/json' } },
				)
			},
		})
	}

	get port() {
		return this.server.port as number
	}

	stop() {
		this.server.stop(true)
	}
}

/** A key pair for private_key_jwt: the private key signs the client's assertions, the public one is in its JWKS. */
async function clientKey() {
	const pair = (await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify'])) as CryptoKeyPair
	const kid = crypto.randomUUID()
	const jwk = { ...(await crypto.subtle.exportKey('jwk', pair.publicKey)), kid, alg: 'ES256', use: 'sig' }
	return { auth: oauth.PrivateKeyJwt({ key: pair.privateKey, kid }), jwk }
}

type ClientKey = Awaited<ReturnType<typeof clientKey>>

/** An app with an admin, and one client key pair whose JWKS a server on loopback serves. */
async function keyedApp(env: Record<string, string>, resolveHost: ResolveHost) {
	const t = await startTestApp(env, undefined, { resolveHost })
	const key = await clientKey()
	const jwks = new JwksServer([key.jwk])
	const close = async () => {
		jwks.stop()
		await t.close()
	}
	return { t, admin: await signUpAdmin(t), key, jwks, close }
}

/** A confidential client authenticating with private_key_jwt whose keys are at `jwksUri`, saved through the admin API. */
async function createClient(t: TestApp, admin: Account, fields: Record<string, unknown>) {
	const res = await t.call('POST', '/api/oauth-clients', {
		token: admin.accessToken,
		json: { name: 'Keyed app', type: 'confidential', grantTypes: ['client_credentials'], tokenEndpointAuthMethod: 'private_key_jwt', ...fields },
	})
	expect(res.status).toBe(201)
	return res.body.data.clientId as string
}

async function clientCredentials(t: TestApp, clientId: string, auth: oauth.ClientAuth) {
	const as = await discover(t)
	return oauth.clientCredentialsGrantRequest(as, { client_id: clientId }, auth, { scope: '' }, through(t))
}

const REFUSED_AUTH = { error: 'invalid_client', error_description: 'client authentication failed' }

describe('private addresses not allowed (the default)', () => {
	// The name every client uses resolves to whatever this says at the time (DNS rebinding, played).
	let answer = PUBLIC
	let t: TestApp, admin: Account, jwks: JwksServer, key: ClientKey, close: () => Promise<void>
	beforeAll(async () => void ({ t, admin, jwks, key, close } = await keyedApp({}, async () => [answer])))
	afterAll(() => close())

	test('a jwks_uri that resolved to a public address when saved and to loopback at the token endpoint is refused there, and never connected to', async () => {
		answer = PUBLIC
		const clientId = await createClient(t, admin, { jwksUri: `http://keys.client.test:${jwks.port}/jwks` })
		answer = LOOPBACK
		const response = await clientCredentials(t, clientId, key.auth)
		expect(response.status).toBe(401)
		expect(await response.json()).toEqual(REFUSED_AUTH)
		expect(jwks.requests).toEqual([])
		// The operator learns why, from the host alone (never the path, never the address).
		const line = t.logs.map((text) => JSON.parse(text)).findLast((entry) => entry.msg === 'OpenID Provider request refused')
		expect(line).toMatchObject({ level: 'warn', host: `keys.client.test:${jwks.port}`, reason: REFUSED })
	})

	test('a jwks_uri naming a loopback address (saved when private addresses were allowed) is refused at the token endpoint', async () => {
		const client = await registerClient(t, {
			type: 'confidential',
			grantTypes: ['client_credentials'],
			tokenEndpointAuthMethod: 'private_key_jwt',
			jwksUri: `http://127.0.0.1:${jwks.port}/jwks`,
		})
		const response = await clientCredentials(t, client.clientId, key.auth)
		expect(response.status).toBe(401)
		expect(await response.json()).toEqual(REFUSED_AUTH)
		expect(jwks.requests).toEqual([])
	})

	test('a back-channel logout URI that resolves to loopback when the logout is sent is refused: the job says so, the receiver hears nothing', async () => {
		const receiver = logoutReceiver()
		try {
			answer = PUBLIC
			const port = new URL(receiver.url).port
			const clientId = await createClient(t, admin, {
				grantTypes: ['authorization_code'],
				tokenEndpointAuthMethod: 'client_secret_basic',
				redirectUris: [REDIRECT_URI],
				firstParty: true,
				backchannelLogoutUri: `http://logout.client.test:${port}/logout`,
			})
			answer = LOOPBACK
			const account = await signUp(t)
			const { url } = await new Browser(t, await browserCookie(t, account)).visit((await authorizationRequest(await discover(t), clientId)).url.href)
			expect(url.searchParams.get('code')).toBeString()
			expect((await t.call('DELETE', `/api/users/me/sessions/${account.sessionId}`, { token: account.accessToken })).status).toBe(200)
			expect(await logOutEndedSessionsStep(t.database.handle.db)).toBe(1)
			t.app.decorator.webhookJobs.wake()
			await t.app.decorator.webhookJobs.idle()
			const [job] = await t.database.handle.db
				.select({ lastError: jobs.lastError })
				.from(jobs)
				.where(and(eq(jobs.queue, 'oauth-backchannel-logout'), sql`${jobs.createdAt} > now() - interval '1 minute'`))
			expect(job?.lastError).toBe(`back-channel logout destination refused: ${REFUSED}`)
			expect(receiver.received).toEqual([])
		} finally {
			receiver.stop()
		}
	})
})

describe('private addresses allowed (WEBHOOK_ALLOW_PRIVATE_NETWORKS=true)', () => {
	// The name resolves only here: the request can reach the JWKS only at the address Latchkey checked.
	let t: TestApp, admin: Account, jwks: JwksServer, key: ClientKey, close: () => Promise<void>
	beforeAll(async () => void ({ t, admin, jwks, key, close } = await keyedApp({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, async () => [LOOPBACK])))
	afterAll(() => close())

	test("a client's assertion is verified with the keys fetched from its jwks_uri, at the address checked", async () => {
		jwks.answer = 'keys'
		const clientId = await createClient(t, admin, { jwksUri: `http://keys.client.test:${jwks.port}/jwks` })
		const response = await clientCredentials(t, clientId, key.auth)
		expect(response.status).toBe(200)
		const tokens = await oauth.processClientCredentialsResponse(await discover(t), { client_id: clientId }, response)
		expect(tokens.access_token).toBeString()
		expect(jwks.requests).toEqual(['GET /jwks'])
	})

	test.each(['too long', 'too long, chunked'] as const)('a JWKS longer than 64 KiB (%s) is not read to its end: the client is refused', async (answer) => {
		jwks.answer = answer
		const requestsBefore = jwks.requests.length
		const clientId = await createClient(t, admin, { jwksUri: `http://keys.client.test:${jwks.port}/jwks` })
		const response = await clientCredentials(t, clientId, key.auth)
		expect(response.status).toBe(401)
		expect(await response.json()).toEqual(REFUSED_AUTH)
		expect(jwks.requests.length).toBe(requestsBefore + 1)
	})
})
