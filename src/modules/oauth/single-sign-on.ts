import Keygrip from 'keygrip'
import type Provider from 'oidc-provider'
import type { Database } from '../../db/client'
import { LATCHKEY_SESSION, prepareSignedInRead, SESSION_SLIDE_SECONDS } from './adapter'
import { CLIENT_ID_PATTERN } from './model'
import { PROVIDER_SESSION_COOKIE, SCOPES } from './provider'

/*
 * Single sign-on in its plain case — a browser signed in to Latchkey and already signed in to this client, back
 * for a new code with `prompt=none` — answered here in one read and one write, without handing the request to the
 * library: its forty middleware, Koa and the bridge cost several times the read and the write (docs/performance.md,
 * "SSO without the library"). It only ever answers a success, and only when every check the library makes holds on the
 * same rows, with the same result: the code is the library's own model, saved by its own adapter, and the library
 * exchanges it. Anything else — another parameter (`max_age`, `acr_values`, `claims`, `resource`, a request
 * object, `response_mode`…), another prompt, a scope the session's grant does not hold, a native client, a
 * provider session cookie signed with an older key, a session whose expiry should be written again, the browser
 * signed in as someone else or not at all — returns undefined, and the library answers as always (its sign-in and
 * consent pages, its errors at the redirect URI, its error pages). test/oauth.single-sign-on.test.ts holds both
 * answers to be the same, and every case above to be left to the library.
 */

/** The parameters of the plain case: each exactly once, nothing else. */
const PLAIN = new Set(['client_id', 'redirect_uri', 'response_type', 'scope', 'state', 'nonce', 'code_challenge', 'code_challenge_method', 'prompt'])
const REQUIRED = ['client_id', 'redirect_uri', 'response_type', 'scope', 'code_challenge', 'code_challenge_method', 'prompt'] as const
/** A S256 challenge: the base64url of a SHA-256 digest (RFC 7636 §4.2). */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/
/**
 * The scopes of the plain case. `offline_access` asks for consent each time (the library drops it otherwise), the
 * organization scopes are read as the memberships are now (provider.ts): theirs is the library's answer.
 */
const PLAIN_SCOPES = new Set(SCOPES.filter((scope) => scope !== 'offline_access' && scope !== 'organizations'))
/** The most of a value the plain case takes (the library takes longer ones; they are its to answer). */
const LONGEST_VALUE = 2048

/** A client id as clients are named (model.ts); anything else is the library's to refuse. */
const CLIENT_ID = new RegExp(CLIENT_ID_PATTERN)

export interface SingleSignOnDeps {
	db: Database
	issuer: string
	/** The provider (loaded by the first request that needs it): its client, its code model. */
	provider(): Promise<Provider>
	/** The keys of the library's signed cookies, newest first (provider.ts: `cookies.keys`). */
	cookieKeys: string[]
	/** The provider session's lifetime for a signed-in account (provider.ts: `ttl.Session`). */
	sessionTtlSeconds: number
	/** The digest of the request's browser cookie (pages/browser-sessions.ts), undefined without a well-formed one. */
	browserDigestOf(request: Request): string | undefined
	/** Whether a Latchkey session is held to enrolment (MFA_REQUIRED): the library's policy then answers (provider.ts). */
	heldToEnrolment(sessionId: string): Promise<boolean>
}

type Payload = Record<string, unknown>

/** A provider session's stored payload, as far as the checks read it. */
type SessionPayload = Payload & {
	accountId?: unknown
	loginTs?: unknown
	uid?: unknown
	acr?: unknown
	amr?: unknown
	authorizations?: Record<string, { grantId?: unknown; sid?: unknown } | undefined>
}

/** The plain case's parameters, those it requires present. */
type PlainParams = Record<(typeof REQUIRED)[number], string> & Partial<Record<'state' | 'nonce', string>>

export class SingleSignOn {
	private read: ReturnType<typeof prepareSignedInRead> | undefined
	private readonly keys: Keygrip
	private readonly secure: boolean

	constructor(private readonly deps: SingleSignOnDeps) {
		this.keys = new Keygrip(deps.cookieKeys)
		this.secure = new URL(deps.issuer).protocol === 'https:'
	}

	/** The redirect to the client with a new code, or undefined when the library must answer. */
	async answer(request: Request): Promise<Response | undefined> {
		const { headers } = request
		if (request.method !== 'GET' || headers.has('content-length') || headers.has('transfer-encoding') || headers.has('dpop')) return undefined
		const params = plainParams(request.url)
		if (!params || params.prompt !== 'none' || params.response_type !== 'code' || params.code_challenge_method !== 'S256' || !S256_CHALLENGE.test(params.code_challenge ?? '')) return undefined
		const scopes = (params.scope ?? '').split(' ')
		if (!scopes.includes('openid') || new Set(scopes).size !== scopes.length || !scopes.every((scope) => PLAIN_SCOPES.has(scope))) return undefined
		const sessionId = this.signedSessionId(headers.get('cookie'))
		const browser = this.deps.browserDigestOf(request)
		if (!sessionId || !browser || !CLIENT_ID.test(params.client_id ?? '')) return undefined
		// Any failure before the code is written (a client the library refuses to load, the database) is the
		// library's to meet and answer, in its own words.
		const checked = await this.check(params as PlainParams, scopes, sessionId, browser).catch(() => undefined)
		if (!checked) return undefined
		const { provider, session, authorization, grantedScopes, exp } = checked

		// The library's own code, as its code handler makes it (its id, its lifetime, its adapter's write).
		const code = new provider.AuthorizationCode({
			accountId: session.accountId,
			acr: session.acr,
			amr: session.amr,
			authTime: session.loginTs,
			clientId: params.client_id,
			codeChallenge: params.code_challenge,
			codeChallengeMethod: 'S256',
			grantId: authorization.grantId,
			nonce: params.nonce,
			redirectUri: params.redirect_uri,
			// The grant's scopes that were asked for, in the grant's order.
			scope: grantedScopes.filter((scope) => scopes.includes(scope)).join(' '),
			sessionUid: session.uid,
			expiresWithSession: true,
			sid: authorization.sid,
		} as never)
		const location = new URL(params.redirect_uri as string)
		location.searchParams.set('code', await code.save())
		if (params.state !== undefined) location.searchParams.set('state', params.state)
		location.searchParams.set('iss', this.deps.issuer)
		// The library sends the session's cookie again at each answer, with the session's new expiry.
		const response = new Response(null, { status: 303, headers: { location: location.href, 'cache-control': 'no-store' } })
		for (const cookie of this.sessionCookies(sessionId, exp)) response.headers.append('set-cookie', cookie)
		return response
	}

	/** Every check the library would make of this request, on the same rows; undefined when one does not hold. */
	private async check(params: PlainParams, scopes: string[], sessionId: string, browser: string) {
		const { client_id: clientId, redirect_uri: redirectUri } = params
		// The client as the library loads it (its metadata checked by its schema, a disabled one not found): a web
		// client allowed the code flow, these scopes and this redirect URI exactly. A native client asks for
		// consent each time: the library's.
		const provider = await this.deps.provider()
		const client = await provider.Client.find(clientId)
		if (!client || client.applicationType !== 'web' || !client.responseTypeAllowed('code') || !client.grantTypeAllowed('authorization_code')) return undefined
		if (client.requirePushedAuthorizationRequests || client.requireSignedRequestObject || typeof client.scope !== 'string') return undefined
		const allowed = new Set(client.scope.split(' '))
		if (!scopes.every((scope) => allowed.has(scope)) || !client.redirectUris?.includes(redirectUri) || !client.redirectUriAllowed(redirectUri)) return undefined

		this.read ??= prepareSignedInRead(this.deps.db, 'latchkey_oauth_signed_in')
		const [found] = await this.read.execute({ key: sessionId, browser, client: clientId })
		// The browser's Latchkey session live (its account active), and no other than the one the provider session stands for.
		if (!found || found.consumed || !found.browserSessionId || !found.browserAccountId || !found.grantPayload || found.grantConsumed) return undefined
		const session = found.payload as SessionPayload
		const now = Math.floor(Date.now() / 1000)
		// The provider session is this browser's Latchkey session, signed in (else the library takes it on anew).
		const accountId = session.accountId
		if (session.kind !== 'Session' || session.jti !== sessionId || typeof accountId !== 'string' || session.transient !== undefined || !fresh(session, now)) return undefined
		if (found.browserAccountId !== accountId || found.browserSessionId !== session[LATCHKEY_SESSION] || typeof session.loginTs !== 'number' || typeof session.uid !== 'string') return undefined
		// Saved again, the session's expiry would be written: the library's save.
		const exp = now + this.deps.sessionTtlSeconds
		if (typeof session.exp !== 'number' || exp - session.exp >= SESSION_SLIDE_SECONDS) return undefined
		// The client's grant, named by the session: this account's, unexpired, nothing in it rejected, holding every scope asked.
		const authorization = session.authorizations?.[clientId]
		const grant = found.grantPayload
		if (typeof authorization?.grantId !== 'string' || typeof authorization.sid !== 'string' || grant.jti !== authorization.grantId) return undefined
		if (grant.kind !== 'Grant' || grant.clientId !== clientId || grant.accountId !== accountId || !fresh(grant, now) || grant.rejected !== undefined || grant.resources !== undefined) return undefined
		const granted = (grant.openid as { scope?: unknown } | undefined)?.scope
		if (typeof granted !== 'string') return undefined
		const grantedScopes = granted.split(' ')
		if (!scopes.every((scope) => grantedScopes.includes(scope))) return undefined
		// MFA_REQUIRED: a session held to enrolment signs in to nothing (the library's policy says where to go).
		if (await this.deps.heldToEnrolment(found.browserSessionId)) return undefined
		return { provider, session: { ...session, accountId }, authorization: { grantId: authorization.grantId, sid: authorization.sid }, grantedScopes, exp }
	}

	/** The provider session's id, when its cookie is signed with the newest key (an older one: the library signs it anew). */
	private signedSessionId(header: string | null): string | undefined {
		if (!header) return undefined
		const value = cookieValue(header, PROVIDER_SESSION_COOKIE)
		const signature = cookieValue(header, `${PROVIDER_SESSION_COOKIE}.sig`)
		if (!value || !signature || value.startsWith('"')) return undefined
		return this.keys.index(`${PROVIDER_SESSION_COOKIE}=${value}`, signature) === 0 ? value : undefined
	}

	/** The cookie and its signature as the library writes them (Koa's cookies, then the session's expiry added). */
	private sessionCookies(sessionId: string, exp: number) {
		const attributes = `; path=/; samesite=lax${this.secure ? '; secure' : ''}; httponly; expires=${new Date(exp * 1000).toUTCString()}`
		const value = `${PROVIDER_SESSION_COOKIE}=${sessionId}`
		return [value + attributes, `${PROVIDER_SESSION_COOKIE}.sig=${this.keys.sign(value)}${attributes}`]
	}
}

/** The query's parameters when they are the plain case's, each once and none empty or overlong; else undefined. */
function plainParams(url: string): (Partial<PlainParams> & Record<string, string>) | undefined {
	const query = url.indexOf('?')
	if (query === -1 || url.includes('#')) return undefined
	const params: Record<string, string> = {}
	for (const [name, value] of new URLSearchParams(url.slice(query + 1))) {
		if (!PLAIN.has(name) || name in params || value === '' || value.length > LONGEST_VALUE) return undefined
		params[name] = value
	}
	return REQUIRED.every((name) => name in params) ? params : undefined
}

/** The session's cookie and its signature, found as Koa's cookies find them (the first of each name, untrimmed). */
const COOKIE_PATTERNS = new Map([PROVIDER_SESSION_COOKIE, `${PROVIDER_SESSION_COOKIE}.sig`].map((name) => [name, new RegExp(`(?:^|;) *${name.replaceAll('.', '\\.')}=([^;]*)`)]))

const cookieValue = (header: string, name: string) => COOKIE_PATTERNS.get(name)?.exec(header)?.[1]

const fresh = (record: Payload, now: number) => typeof record.exp !== 'number' || record.exp > now
