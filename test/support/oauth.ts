import { eq } from 'drizzle-orm'
import * as oauth from 'oauth4webapi'
import { digestOf, newOpaqueToken } from '../../src/crypto/opaque-tokens'
import { oauthClients, oauthClientSecrets, sessions } from '../../src/db/schema'
import type { TestApp } from './app'
import type { Account } from './fixtures'

/*
 * Latchkey's OpenID Provider as a relying party sees it: oauth4webapi (OpenID Certified) over `app.handle`,
 * and a browser reduced to its cookie jar and redirects.
 */

export const ISSUER = 'http://localhost'
export const REDIRECT_URI = 'https://app.example.test/callback'

export interface RegisteredClient {
	clientId: string
	clientSecret?: string
	client: oauth.Client
	auth: oauth.ClientAuth
}

/** Registers a client straight in the database (the admin API's resource has its own tests). */
export async function registerClient(
	t: Pick<TestApp, 'database'>,
	fields: Partial<typeof oauthClients.$inferInsert> & { type: 'public' | 'confidential' },
): Promise<RegisteredClient> {
	const clientId = `client-${crypto.randomUUID()}`
	const confidential = fields.type === 'confidential'
	const id = Bun.randomUUIDv7()
	await t.database.handle.db.insert(oauthClients).values({
		id,
		clientId,
		name: 'Test app',
		redirectUris: [REDIRECT_URI],
		postLogoutRedirectUris: ['https://app.example.test/signed-out'],
		grantTypes: confidential ? ['authorization_code', 'refresh_token', 'client_credentials'] : ['authorization_code', 'refresh_token'],
		scopes: ['openid', 'profile', 'email', 'offline_access'],
		tokenEndpointAuthMethod: confidential ? 'client_secret_basic' : 'none',
		...fields,
	})
	if (!confidential) return { clientId, client: { client_id: clientId }, auth: oauth.None() }
	const clientSecret = newOpaqueToken()
	await t.database.handle.db.insert(oauthClientSecrets).values({ id: Bun.randomUUIDv7(), clientId: id, secretHash: digestOf(clientSecret) })
	return { clientId, clientSecret, client: { client_id: clientId }, auth: oauth.ClientSecretBasic(clientSecret) }
}

/** Options every oauth4webapi request takes here: through the app, over http (the test issuer). */
export const through = (t: TestApp) => ({
	[oauth.customFetch]: (url: string, init?: RequestInit) => t.app.handle(new Request(url, init)),
	[oauth.allowInsecureRequests]: true,
})

export async function discover(t: TestApp): Promise<oauth.AuthorizationServer> {
	const issuer = new URL(ISSUER)
	return oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, through(t)))
}

/** Gives an API session a browser cookie, as the sign-in page does; returns the Cookie header. */
export async function browserCookie(t: TestApp, account: Pick<Account, 'sessionId'>): Promise<string> {
	const token = newOpaqueToken()
	await t.database.handle.db.update(sessions).set({ browserTokenHash: digestOf(token) }).where(eq(sessions.id, account.sessionId))
	return `__Host-latchkey-session=${token}`
}

/** A browser: follows redirects within the provider, keeps its cookies, stops at the client's redirect URI or a page. */
export class Browser {
	private readonly jar = new Map<string, string>()

	constructor(
		private readonly t: TestApp,
		cookie?: string,
		private readonly issuer = ISSUER,
	) {
		if (cookie) this.set(cookie)
	}

	private set(pair: string) {
		const equals = pair.indexOf('=')
		const name = pair.slice(0, equals)
		const value = pair.slice(equals + 1)
		if (value === '') this.jar.delete(name)
		else this.jar.set(name, value)
	}

	get cookie() {
		return [...this.jar].map(([name, value]) => `${name}=${value}`).join('; ')
	}

	/** Goes to `url` and follows redirects on the issuer; the last response and where it stopped. */
	async visit(url: string, init: RequestInit = {}): Promise<{ response: Response; url: URL }> {
		let next = new URL(url, this.issuer)
		let request: RequestInit = init
		for (let hop = 0; hop < 10; hop++) {
			const headers = new Headers(request.headers)
			if (this.jar.size > 0) headers.set('cookie', this.cookie)
			const response = await this.t.app.handle(new Request(next.href, { ...request, headers, redirect: 'manual' }))
			for (const line of response.headers.getSetCookie()) this.set(line.split(';')[0] ?? '')
			const location = response.headers.get('location')
			if (response.status < 300 || response.status >= 400 || !location) return { response, url: next }
			const target = new URL(location, next)
			if (target.origin !== new URL(this.issuer).origin) return { response, url: target }
			next = target
			request = {}
		}
		throw new Error('too many redirects')
	}
}

export interface AuthorizationRequest {
	url: URL
	verifier: string
	nonce: string
	state: string
}

/** An authorization request with PKCE S256, a nonce and a state. */
export async function authorizationRequest(as: oauth.AuthorizationServer, clientId: string, params: Record<string, string> = {}): Promise<AuthorizationRequest> {
	const verifier = oauth.generateRandomCodeVerifier()
	const nonce = oauth.generateRandomNonce()
	const state = oauth.generateRandomState()
	const url = new URL(as.authorization_endpoint ?? '')
	url.search = new URLSearchParams({
		client_id: clientId,
		redirect_uri: REDIRECT_URI,
		response_type: 'code',
		scope: 'openid email profile',
		code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
		code_challenge_method: 'S256',
		nonce,
		state,
		...params,
	}).toString()
	return { url, verifier, nonce, state }
}

/** The hidden fields of the first form on an HTML page posting to `action` (the anti-forgery value among them). */
export function hiddenFields(html: string, action: string): Record<string, string> {
	const forms = [...html.matchAll(/<form([^>]*)>([\s\S]*?)<\/form>/g)]
	const form = forms.find((match) => match[1]?.includes(`action="${action}"`))?.[2] ?? ''
	const fields: Record<string, string> = {}
	for (const input of form.matchAll(/<input[^>]*>/g)) {
		const name = /name="([^"]*)"/.exec(input[0])?.[1]
		const value = /value="([^"]*)"/.exec(input[0])?.[1]
		if (name && /type="hidden"/.test(input[0])) fields[name] = value ?? ''
	}
	return fields
}

/** POSTs a form as a browser does. */
export const formPost = (fields: Record<string, string>): RequestInit => ({
	method: 'POST',
	headers: { 'content-type': 'application/x-www-form-urlencoded' },
	body: new URLSearchParams(fields).toString(),
})

/** A client's back-channel logout URI on loopback: the logout tokens it was posted, in order. */
export function logoutReceiver() {
	const received: string[] = []
	const server = Bun.serve({
		port: 0,
		hostname: '127.0.0.1',
		fetch: async (request) => {
			received.push(new URLSearchParams(await request.text()).get('logout_token') ?? '')
			return new Response(null, { status: 200 })
		},
	})
	return { received, url: `http://127.0.0.1:${server.port}/logout`, stop: () => server.stop(true) }
}
