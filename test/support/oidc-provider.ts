/**
 * A real OpenID Provider for the tests: panva's oidc-provider on a loopback port, with one client
 * registered for Latchkey and an interaction that signs in whoever the test says (`signInAs`), with no
 * page to fill. Stopped and restarted to play a provider that is down.
 */
import { decodeJwt, exportJWK, generateKeyPair, SignJWT, type JWTPayload } from 'jose'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import Provider from 'oidc-provider'

export interface TestIdentity {
	sub: string
	email?: string
	email_verified?: boolean
	name?: string
}

/** A PKCE pair as a frontend makes it (RFC 7636, S256). */
export function pkcePair() {
	const verifier = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64url')
	return { verifier, challenge: new Bun.CryptoHasher('sha256').update(verifier).digest('base64url') }
}

export const CLIENT_ID = 'latchkey'
export const CLIENT_SECRET = 'a-client-secret-for-the-tests-only'

/** How a misbehaving provider rewrites the ID token it returns: new claims (signed with its own key), or a broken signature. */
export type IdTokenRewrite = ((claims: JWTPayload) => JWTPayload) | 'break-signature'

export class TestOpenIdProvider {
	/** Who the next interaction signs in. */
	signInAs: TestIdentity = { sub: 'nobody' }
	/** While set, every ID token from the token endpoint is rewritten so (a provider that misbehaves, or an attacker in its place). */
	rewriteIdToken: IdTokenRewrite | undefined
	/** Requests seen, by path (`/.well-known/openid-configuration`, `/jwks`, `/token`…). */
	readonly requests = new Map<string, number>()
	/** Told when each request starts, by path; what it returns is called when the answer is sent (the benchmark times the provider so). */
	onRequest: ((path: string) => () => void) | undefined
	/** A key the provider starts signing with after a rotation: published at /jwks beside the first once `rotate` is called. */
	private rotated: { key: CryptoKey; jwk: Record<string, unknown> } | undefined
	private server: http.Server | undefined
	private constructor(
		private readonly provider: Provider,
		readonly port: number,
		private readonly signingKey: CryptoKey,
		private readonly kid: string,
	) {}

	get issuer() {
		return `http://127.0.0.1:${this.port}`
	}

	/** The settings that configure Latchkey for this provider, as OIDC_<NAME>_* variables. */
	settings(name: string): Record<string, string> {
		const prefix = `OIDC_${name.toUpperCase()}_`
		return { [`${prefix}ISSUER`]: this.issuer, [`${prefix}CLIENT_ID`]: CLIENT_ID, [`${prefix}CLIENT_SECRET`]: CLIENT_SECRET }
	}

	static async start(redirectUris: string[], port = 0): Promise<TestOpenIdProvider> {
		const identities = new Map<string, TestIdentity>()
		// The port is needed for the issuer before the provider exists: take one, then listen on it.
		const probe = http.createServer()
		await new Promise<void>((resolve) => probe.listen(port, '127.0.0.1', resolve))
		const chosen = (probe.address() as AddressInfo).port
		await new Promise<void>((resolve) => probe.close(() => resolve()))
		// Keys of our own, so that a test can sign ID tokens the provider's clients will take as genuine.
		const { privateKey } = await generateKeyPair('RS256', { extractable: true })
		const kid = `test-${chosen}`
		const jwk = { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' }
		const provider = new Provider(`http://127.0.0.1:${chosen}`, {
			jwks: { keys: [jwk as never] },
			clients: [{ client_id: CLIENT_ID, client_secret: CLIENT_SECRET, redirect_uris: redirectUris, grant_types: ['authorization_code'], response_types: ['code'] }],
			pkce: { required: () => true },
			// Only `sub` in the ID token: the email comes from userinfo, as with several real providers.
			claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
			findAccount: async (_ctx: unknown, id: string) => ({
				accountId: id,
				claims: async () => {
					const { sub: _sub, ...rest } = identities.get(id) ?? {}
					return { sub: id, ...rest }
				},
			}),
			features: { devInteractions: { enabled: false } },
			interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
			ttl: { Interaction: 600, Grant: 600, Session: 600, AccessToken: 600, IdToken: 600, AuthorizationCode: 60 },
		})
		const instance = new TestOpenIdProvider(provider, chosen, privateKey, kid)
		const callback = provider.callback()
		const handler: http.RequestListener = async (req, res) => {
			const path = (req.url ?? '').split('?')[0] ?? ''
			instance.requests.set(path, (instance.requests.get(path) ?? 0) + 1)
			const answered = instance.onRequest?.(path)
			if (answered) res.on('finish', answered)
			if (req.method === 'GET' && path === '/jwks' && instance.rotated) instance.interceptJwks(res)
			if (req.method === 'POST' && path === '/token' && instance.rewriteIdToken) instance.interceptTokenResponse(res)
			if (req.url?.startsWith('/interaction/')) {
				const identity = instance.signInAs
				identities.set(identity.sub, identity)
				const details = await provider.interactionDetails(req, res)
				const grant = new provider.Grant({ accountId: identity.sub, clientId: String(details.params.client_id) })
				grant.addOIDCScope(String(details.params.scope))
				const grantId = await grant.save()
				return provider.interactionFinished(req, res, { login: { accountId: identity.sub }, consent: { grantId } }, { mergeWithLastSubmission: false })
			}
			return callback(req, res)
		}
		instance.handler = handler
		await instance.listen()
		return instance
	}

	private handler: http.RequestListener | undefined

	/**
	 * A key rotation: a new signing key, published at /jwks beside the old one, and used for every ID token
	 * from now on (a client that cached the old key set meets an unknown `kid`).
	 */
	async rotate() {
		const { privateKey } = await generateKeyPair('RS256', { extractable: true })
		const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...publicJwk } = await exportJWK(privateKey)
		const kid = `rotated-${this.port}`
		this.rotated = { key: privateKey, jwk: { ...publicJwk, kid, alg: 'RS256', use: 'sig' } }
		this.rewriteIdToken = (claims) => claims
	}

	/** Rewrites a JSON answer before it leaves (the provider has set its headers but sent none yet). */
	private interceptJson<T>(res: http.ServerResponse, change: (body: T) => Promise<T>) {
		const end = res.end.bind(res) as (chunk?: unknown) => http.ServerResponse
		res.end = ((chunk?: unknown) => {
			void (async () => {
				const text = JSON.stringify(await change(JSON.parse(String(chunk)) as T))
				res.setHeader('content-length', Buffer.byteLength(text))
				end(text)
			})()
			return res
		}) as typeof res.end
	}

	private interceptJwks(res: http.ServerResponse) {
		const extra = this.rotated?.jwk
		this.interceptJson<{ keys: unknown[] }>(res, async (body) => ({ keys: extra ? [...body.keys, extra] : body.keys }))
	}

	private interceptTokenResponse(res: http.ServerResponse) {
		const rewrite = this.rewriteIdToken
		this.interceptJson<{ id_token?: string }>(res, async (body) => (body.id_token && rewrite ? { ...body, id_token: await this.rewritten(body.id_token, rewrite) } : body))
	}

	private async rewritten(idToken: string, rewrite: IdTokenRewrite): Promise<string> {
		if (rewrite === 'break-signature') {
			const [header, payload, signature = ''] = idToken.split('.')
			return `${header}.${payload}.${signature.slice(0, -4)}${signature.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`
		}
		const { key, kid } = this.rotated ? { key: this.rotated.key, kid: String(this.rotated.jwk.kid) } : { key: this.signingKey, kid: this.kid }
		return new SignJWT(rewrite(decodeJwt(idToken))).setProtectedHeader({ alg: 'RS256', kid, typ: 'JWT' }).sign(key)
	}

	private async listen() {
		this.server = http.createServer(this.handler)
		await new Promise<void>((resolve) => this.server?.listen(this.port, '127.0.0.1', resolve))
	}

	/** Down: nothing listens on the port. */
	async stop() {
		const server = this.server
		this.server = undefined
		server?.closeAllConnections()
		await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()))
	}

	/** Back on the same port, with the same keys and clients. */
	async restart() {
		if (!this.server) await this.listen()
	}
}

/**
 * A browser for the flow: follows redirects by hand between the API (an Elysia app's `handle`, which has
 * no socket) and the provider (real HTTP), keeping each side's cookies, until a URL outside both is
 * reached — the frontend's page, returned.
 */
export class FlowBrowser {
	private readonly cookies = new Map<string, Map<string, string>>()

	constructor(
		private readonly api: { handle(request: Request): Promise<Response> },
		private readonly apiOrigin = 'http://localhost',
	) {}

	/** Starts at `url` and returns the first Location that leaves the API and the provider (or that `until` stops at). */
	async follow(url: string, providerOrigin: string, until?: (url: URL) => boolean): Promise<URL> {
		let next = new URL(url, this.apiOrigin)
		for (let hops = 0; hops < 12; hops++) {
			const atApi = next.origin === this.apiOrigin
			if ((!atApi && next.origin !== providerOrigin) || until?.(next)) return next
			const headers = { cookie: this.cookieHeader(next.origin) }
			const response = atApi ? await this.api.handle(new Request(next.href, { headers })) : await fetch(next, { headers, redirect: 'manual' })
			this.remember(next.origin, response.headers.getSetCookie())
			const location = response.headers.get('location')
			if (!location) throw new Error(`no redirect from ${next.href}: ${response.status} ${await response.text()}`)
			next = new URL(location, next)
		}
		throw new Error('too many redirects')
	}

	/** Cookies this browser holds for an origin (a test may steal them, or leave them out). */
	jar(origin: string) {
		let jar = this.cookies.get(origin)
		if (!jar) this.cookies.set(origin, (jar = new Map()))
		return jar
	}

	private cookieHeader(origin: string) {
		return [...this.jar(origin)].map(([name, value]) => `${name}=${value}`).join('; ')
	}

	private remember(origin: string, setCookies: string[]) {
		for (const line of setCookies) {
			const [pair = ''] = line.split(';')
			const at = pair.indexOf('=')
			if (at > 0) this.jar(origin).set(pair.slice(0, at).trim(), pair.slice(at + 1).trim())
		}
	}
}
