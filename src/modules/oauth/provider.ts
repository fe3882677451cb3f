import { and, eq, sql } from 'drizzle-orm'
import type Provider from 'oidc-provider'
import type { Configuration, KoaContextWithOIDC } from 'oidc-provider'
import type { Database } from '../../db/client'
import { organizationMembers, organizations, users } from '../../db/schema'
import { appClaimsOf } from '../auth/app-claims'
import { organizationClaimOf, type OrganizationClaim } from '../auth/organization-claim'
import { DestinationRefused, type DestinationPolicy } from '../../http/destination'
import { guardedFetch } from '../../http/outgoing'
import type { Logger } from '../../log'
import {
	accountKey,
	appClaimsColumn,
	browserSessionKey,
	databaseAdapter,
	LATCHKEY_SESSION,
	ReadAhead,
	type AccountRecord,
	type BrowserSessionRecord,
	type ClientMetadataSource,
} from './adapter'
import { queueBackchannelLogouts } from './logout'
import { CONSOLE_CLIENT_ID } from './model'

/*
 * Latchkey as an OpenID Provider: panva's oidc-provider (OpenID Certified for the Basic, Config, Dynamic and
 * FAPI profiles) does the protocol; Latchkey gives it its storage (adapter.ts), its clients, its accounts,
 * and its sign-in: the browser session the pages made (`BrowserSessions`). The library's own session follows
 * that one — adopted without a page when the browser is signed in, refused once it has ended — so single
 * sign-on, `prompt=none` and logout all rest on Latchkey's sessions.
 */

/** A browser's Latchkey session, as the pages' cookie proves it. */
export interface BrowserSession {
	sessionId: string
	userId: string
	amr: string[]
	aal: 'aal1' | 'aal2'
	authenticatedAt: Date
	/** The account as the session's lookup read it (active): its claims need no other read in the same request. */
	account?: AccountRecord
}

/** What the provider asks of the pages: the browser session a request carries, if it is live. */
export interface BrowserSessions {
	current(request: Request): Promise<BrowserSession | undefined>
	/**
	 * The digest of the request's browser cookie (`sessions.browser_token_hash`), undefined without a well-formed
	 * one: the provider reads the session by it together with its own (adapter.ts), and asks `current` otherwise.
	 */
	sessionDigestOf(request: Request): string | undefined
}

/** Whether the account has a second factor it could step up with (`acr_values=aal2`). */
export interface StepUpCheck {
	hasSecondFactor(userId: string): Promise<boolean>
	/**
	 * Whether a Latchkey session is held to enrolment (MFA_REQUIRED names its account and it has not used a factor):
	 * such a session may add a factor at the account pages and sign in to nothing (API.md, the API's guard alike).
	 */
	heldToEnrolment(sessionId: string): Promise<boolean>
}

/** The scopes a user allowed a client before (remembered consent), and whether the client needs no consent. */
export interface ConsentMemory {
	remembered(userId: string, clientId: string): Promise<string[]>
}

export interface ProviderSettings {
	issuer: string
	/** The private RSA key (JWK with kid) that signs ID tokens and access tokens. */
	signingKey: Record<string, unknown>
	/** Keys of the library's signed cookies, newest first. */
	cookieKeys: string[]
	accessTokenTtlSeconds: number
	refreshTokenTtlSeconds: number
	dynamicRegistration: boolean
	/** RFC 8628's `interval`, sent with each device authorization: how long a device waits between two polls. */
	devicePollSeconds: number
}

/** The pages the library itself shows (its sign-out question, its sign-out answer, its errors), as HTML. */
export interface ProviderPages {
	/**
	 * Asks whether to sign out of everything: a form posted to /oauth2/logout/confirm with `xsrf` (the library's
	 * anti-forgery value) and `logout=yes` to sign out, without it to stay. The library's own forms are not used:
	 * they carry inline script and handlers, which the pages' CSP forbids.
	 */
	signOut(request: Request, form: { xsrf: string }, clientName: string | undefined): Promise<string> | string
	signedOut(request: Request, clientName: string | undefined): Promise<string> | string
	/** A request the provider cannot send back to the client (an unknown client, a bad redirect URI). */
	error(request: Request, error: string, description: string | undefined): Promise<string> | string
	/**
	 * RFC 8628: asks for the code a device shows (a form posted to /device with `xsrf` and `user_code`, filled in
	 * with `userCode` when the device's link carried it); `problem` says what went wrong with the last one.
	 */
	deviceCode(request: Request, form: { xsrf: string; userCode?: string }, problem: 'wrong-code' | 'interrupted' | 'failed' | undefined): Promise<string> | string
	/** Asks to allow the device: a form posted to /device with `xsrf`, `user_code`, and `confirm=yes` to allow or `abort=yes` to deny. */
	deviceConfirm(request: Request, form: { xsrf: string }, clientName: string | undefined, userCode: string): Promise<string> | string
	deviceDone(request: Request, clientName: string | undefined): Promise<string> | string
}

/** The library's anti-forgery value, out of the form it made. */
const xsrfOf = (form: string) => /name="xsrf" value="([^"]*)"/.exec(form)?.[1] ?? ''

/** The code a device's link carried (GET /device?user_code=…), handed on by protocol.ts. */
export const PREFILLED_USER_CODE = 'x-latchkey-user-code'

export interface ProviderDeps {
	pages: ProviderPages
	db: Database
	log: Logger
	settings: ProviderSettings
	clients: ClientMetadataSource & { isFirstParty(clientId: string): Promise<boolean> }
	browserSessions: BrowserSessions
	stepUp: StepUpCheck
	consents: ConsentMemory
	/** Checks a confidential client's secret (only its hash is stored). */
	verifySecret(clientId: string, secret: string): Promise<boolean>
	/** Where the library's own requests to clients may go (back-channel logout, `jwks_uri`): where webhooks may. */
	destinations: DestinationPolicy & { timeoutSeconds: number }
	/** Ends the Latchkey session of a browser that signed out through a client (RP-initiated logout). */
	endSession(sessionId: string, userId: string, request: { ip: string | null; userAgent: string | null; requestId: string }): Promise<void>
}

/** The browser cookie that holds the pages' session, cleared when the browser signs out through a client. */
const CLEARED_BROWSER_SESSION = '__Host-latchkey-session=; Max-Age=0; Path=/; Secure; HttpOnly; SameSite=Lax'

export const SCOPES = ['openid', 'profile', 'email', 'offline_access', 'organizations']

/**
 * The claims each scope gives (the library's `claims`, and userinfo.ts's). `org` and `organizations` go with
 * `openid`, the claims an ID token carries beside an access token (the library's conformIdTokenClaims: the other
 * scopes' claims are userinfo's): the account's claims hold them only when the scope asks for them —
 * `organizations`, and `organization:{id}`, which is no fixed name (API.md puts both in the ID token and userinfo).
 */
export const CLAIMS_BY_SCOPE: Record<string, string[]> = {
	openid: ['sub', 'acr', 'amr', 'auth_time', 'org', 'organizations'],
	email: ['email', 'email_verified'],
	profile: ['name', 'updated_at'],
}

/** `organization:{id}`: a token of that organization (its `org` claim), for an account that is a member of it. */
const ORGANIZATION_SCOPE = /^organization:(.*)$/

/** The organization ids a scope string asks tokens of (`organization:{id}`), as written. */
export const organizationScopes = (scope: unknown): string[] =>
	String(scope ?? '')
		.split(' ')
		.flatMap((name) => ORGANIZATION_SCOPE.exec(name)?.[1] ?? [])

/**
 * The scopes the provider knows: the fixed ones, listed (discovery's `scopes_supported`), and `organization:{id}`,
 * accepted but not listed. The library asks the set's own `has` which scopes of a request to keep (the patch on
 * its oidc_context.js); a plain Set would drop `organization:{id}` as unknown.
 */
class KnownScopes extends Set<string> {
	override has(scope: string) {
		return super.has(scope) || ORGANIZATION_SCOPE.test(scope)
	}
}

/** Whether a scope string asks for organization claims at all: what userinfo.ts leaves to the library. */
export const asksForOrganizations = (scope: string) => scope.split(' ').some((name) => name === 'organizations' || ORGANIZATION_SCOPE.test(name))

/** Every claim an account has, before the scopes choose among them. */
export const accountClaims = (user: AccountRecord): { sub: string } & Record<string, unknown> => ({
	sub: user.id,
	email: user.email,
	email_verified: user.emailVerifiedAt !== null,
	name: user.name ?? undefined,
	updated_at: Math.floor(user.updatedAt.getTime() / 1000),
})

/** Where an account's `appMetadata.claims` travel to its ID tokens, out of the library's claims filter's sight. */
const APP_CLAIMS = Symbol('latchkey.appClaims')

/** An account id as Latchkey makes them; any other `sub` names no account (and is never sent to the database). */
/** How long a provider session with no account is kept (ttl.Session). */
export const ANONYMOUS_SESSION_SECONDS = 2 * 3600

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** The most of a client's document (its JWKS, its sector identifier) that is read. */
const CLIENT_DOCUMENT_LIMIT = 64 * 1024

/** The library's cookie naming the browser's provider session (and `.sig`, its signature). */
export const PROVIDER_SESSION_COOKIE = 'latchkey-op-session'

/** The library's cookie naming the browser's interaction in progress. */
export const INTERACTION_COOKIE = 'latchkey-interaction'

/** The interaction policy's reason for a browser session held to enrolment (MFA_REQUIRED, no factor used yet). */
export const ENROLMENT_REQUIRED = 'mfa_enrollment_required'

/** Where the provider sends a browser that must sign in, step up or consent. */
export const INTERACTION_PATH = '/oauth2/interaction'

/** A request's headers, as much of a Koa context as the lookups read. */
type Headed = { get(name: string): string }

const requestOf = (ctx: Headed, issuer: string) => new Request(issuer, { headers: { cookie: ctx.get('cookie'), 'accept-language': ctx.get('accept-language') } })

/** The library's session takes on the browser's: its account, methods, level and time, and which Latchkey session it is. */
function adopt(session: Record<string, unknown> & { loginAccount(details: object): void; resetIdentifier(): void; new?: boolean }, browser: BrowserSession) {
	// Another account, or another sign-in of the same one: what the provider session knew of clients (their grants and
	// `sid`s) was the sign-in before's, and the library refuses a grant of another account (it would be a 500). As its
	// own sign-in does, the session forgets them and takes a new id (no fixation of the id across sign-ins).
	if (typeof session.accountId === 'string' && (session.accountId !== browser.userId || session[LATCHKEY_SESSION] !== browser.sessionId)) {
		session.authorizations = {}
		if (!session.new) session.resetIdentifier()
	}
	session.loginAccount({ accountId: browser.userId, loginTs: Math.floor(browser.authenticatedAt.getTime() / 1000), amr: browser.amr, acr: browser.aal })
	session[LATCHKEY_SESSION] = browser.sessionId
}

/**
 * The browser session each request carries, looked up once per request: as read with the provider session when
 * that read came first (ReadAhead, adapter.ts), else by the pages.
 */
function browserSessionOf(deps: ProviderDeps, ahead: ReadAhead) {
	const found = new WeakMap<object, Promise<BrowserSession | undefined>>()
	const digests = new WeakMap<object, string | undefined>()
	/** The digest of the request's browser cookie, worked out once per request. */
	const digestOf = (ctx: Headed) => {
		if (!digests.has(ctx)) digests.set(ctx, deps.browserSessions.sessionDigestOf(requestOf(ctx, deps.settings.issuer)))
		return digests.get(ctx)
	}
	const lookup = (ctx: Headed) => {
		let session = found.get(ctx)
		if (!session) {
			const digest = digestOf(ctx)
			const known = digest === undefined ? undefined : ahead.take<BrowserSessionRecord>(browserSessionKey(digest))
			session =
				known !== undefined
					? Promise.resolve(known ? { ...known, userId: known.account.id } : undefined)
					: digest === undefined
						? Promise.resolve(undefined)
						: deps.browserSessions.current(requestOf(ctx, deps.settings.issuer))
			found.set(ctx, session)
		}
		return session
	}
	return Object.assign(lookup, { digestOf })
}

const wantsAal2 = (ctx: KoaContextWithOIDC) => String(ctx.oidc.params?.acr_values ?? '').split(' ').includes('aal2')

function policy(interactionPolicy: Library['interactionPolicy'], deps: ProviderDeps, browserSession: ReturnType<typeof browserSessionOf>) {
	const prompts = interactionPolicy.base()
	const login = prompts.get('login')
	if (!login) throw new Error('the interaction policy has no login prompt')
	// The library's session is the browser's Latchkey session, or none: one that ended is not used.
	login.checks.add(
		new interactionPolicy.Check('latchkey_session', 'End-User authentication is required', async (ctx) =>
			ctx.oidc.result?.login || (await browserSession(ctx)) ? interactionPolicy.Check.NO_NEED_TO_PROMPT : interactionPolicy.Check.REQUEST_PROMPT,
		),
	)
	// MFA_REQUIRED: a browser session held to enrolment signs in to no client (interactions.ts sends it to add a
	// factor) but the console, whose tokens the API's guard judges by their session at every request: it gets its
	// token, and says what the API's 403 means (docs/console.md).
	login.checks.add(
		new interactionPolicy.Check(ENROLMENT_REQUIRED, 'A second factor must be added first', 'interaction_required', async (ctx) => {
			if (ctx.oidc.client?.clientId === CONSOLE_CLIENT_ID) return interactionPolicy.Check.NO_NEED_TO_PROMPT
			const browser = await browserSession(ctx)
			return browser && (await deps.stepUp.heldToEnrolment(browser.sessionId)) ? interactionPolicy.Check.REQUEST_PROMPT : interactionPolicy.Check.NO_NEED_TO_PROMPT
		}),
	)
	// `acr_values=aal2`: a second factor, when the account has one and the session has not used it yet.
	login.checks.add(
		new interactionPolicy.Check('aal2_required', 'A second factor is required', async (ctx) => {
			const session = ctx.oidc.session
			if (!wantsAal2(ctx) || !session?.accountId || session.acr === 'aal2') return interactionPolicy.Check.NO_NEED_TO_PROMPT
			return (await deps.stepUp.hasSecondFactor(session.accountId)) ? interactionPolicy.Check.REQUEST_PROMPT : interactionPolicy.Check.NO_NEED_TO_PROMPT
		}),
	)
	return prompts
}

/** The protocol library's module, loaded on first use (loadProvider). */
type Library = typeof import('oidc-provider')

/**
 * The provider, made on the first request that needs it: the library and its Koa app are tens of MiB of
 * memory that a deployment not using Latchkey as a provider never pays for. Later calls share the same one.
 */
export function loadProvider(deps: ProviderDeps): () => Promise<Provider> {
	let loading: Promise<Provider> | undefined
	return () => (loading ??= import('oidc-provider').then((library) => createProvider(library, deps)))
}

function createProvider(library: Library, deps: ProviderDeps): Provider {
	const { Provider, interactionPolicy } = library
	const { settings, db } = deps
	// Per request of the library: the async context it runs each request in.
	const ahead = new ReadAhead(() => Provider.ctx)
	const browserSession = browserSessionOf(deps, ahead)
	const activeUser = db
		.select({ id: users.id, email: users.email, name: users.name, emailVerifiedAt: users.emailVerifiedAt, updatedAt: users.updatedAt, appClaims: appClaimsColumn })
		.from(users)
		.where(and(eq(users.id, sql.placeholder('id')), eq(users.status, 'active')))
		.limit(1)
		.prepare('latchkey_oauth_account')
	const fetchGuarded = guardedFetch({ ...deps.destinations, responseLimitBytes: CLIENT_DOCUMENT_LIMIT })
	const configuration: Configuration = {
		// A library session ended by a sign-out through a client ("Sign out" at RP-initiated logout) ends the
		// Latchkey session it stood for, in the same request, before the browser goes on to the client.
		adapter: databaseAdapter(
			db,
			deps.clients,
			async (payload) => {
				const sessionId = payload[LATCHKEY_SESSION]
				if (typeof sessionId !== 'string' || typeof payload.accountId !== 'string') return
				// Only there: the library also destroys a session's old id when it renames it (at each sign-in).
				const ctx = Provider.ctx
				if (ctx?.oidc?.route !== 'end_session_confirm') return
				await deps.endSession(sessionId, payload.accountId, {
					ip: ctx?.ip ?? null,
					userAgent: ctx?.get('user-agent') || null,
					requestId: ctx?.get('x-request-id') || Bun.randomUUIDv7(),
				})
			},
			ahead,
			() => {
				const ctx = Provider.ctx
				return ctx ? browserSession.digestOf(ctx) : undefined
			},
		),
		jwks: { keys: [settings.signingKey as never] },
		scopes: new KnownScopes(SCOPES) as unknown as string[],
		// How and when the user signed in go with `openid` (every ID token); the others by scope.
		claims: { sid: null, iss: null, ...CLAIMS_BY_SCOPE },
		acrValues: ['aal1', 'aal2'],
		responseTypes: ['code'],
		subjectTypes: ['public'],
		clientAuthMethods: ['none', 'client_secret_basic', 'client_secret_post', 'private_key_jwt'],
		enabledJWA: {
			idTokenSigningAlgValues: ['RS256', 'ES256', 'EdDSA'],
			userinfoSigningAlgValues: ['RS256', 'ES256', 'EdDSA'],
			introspectionSigningAlgValues: ['RS256', 'ES256', 'EdDSA'],
			clientAuthSigningAlgValues: ['RS256', 'PS256', 'ES256', 'EdDSA'],
			requestObjectSigningAlgValues: ['RS256', 'PS256', 'ES256', 'EdDSA'],
		},
		pkce: { required: () => true },
		routes: {
			authorization: '/oauth2/authorization',
			token: '/oauth2/token',
			userinfo: '/oauth2/userinfo',
			jwks: '/.well-known/jwks.json',
			revocation: '/oauth2/revocation',
			introspection: '/oauth2/introspection',
			end_session: '/oauth2/logout',
			device_authorization: '/oauth2/device-authorization',
			code_verification: '/device',
			registration: '/oauth2/registration',
			pushed_authorization_request: '/oauth2/par',
		},
		interactions: {
			policy: policy(interactionPolicy, deps, browserSession),
			url: (_ctx, interaction) => `${INTERACTION_PATH}/${interaction.uid}`,
		},
		cookies: {
			keys: settings.cookieKeys,
			names: { session: PROVIDER_SESSION_COOKIE, interaction: INTERACTION_COOKIE, resume: 'latchkey-interaction-resume' },
			// The interaction's cookie goes to the pages too (/consent, /sign-in and back), not only to its own path.
			short: { path: '/', httpOnly: true, sameSite: 'lax' },
		},
		features: {
			devInteractions: { enabled: false },
			clientCredentials: { enabled: true },
			deviceFlow: {
				enabled: true,
				charset: 'base-20',
				mask: '****-****',
				userCodeInputSource: async (ctx, form, _out, error) => {
					const problem = !error ? undefined : error.name === 'NoCodeError' || 'userCode' in error ? 'wrong-code' : error.name === 'AbortedError' ? 'interrupted' : 'failed'
					ctx.type = 'html'
					ctx.body = await deps.pages.deviceCode(requestOf(ctx, settings.issuer), { xsrf: xsrfOf(form), userCode: ctx.get(PREFILLED_USER_CODE) || undefined }, problem)
				},
				userCodeConfirmSource: async (ctx, form, client, _deviceInfo, userCode) => {
					ctx.type = 'html'
					ctx.body = await deps.pages.deviceConfirm(requestOf(ctx, settings.issuer), { xsrf: xsrfOf(form) }, client.clientName, userCode)
				},
				successSource: async (ctx) => {
					ctx.type = 'html'
					ctx.body = await deps.pages.deviceDone(requestOf(ctx, settings.issuer), ctx.oidc.client?.clientName)
				},
			},
			introspection: {
				enabled: true,
				// RFC 7662: confidential clients and resource servers only; a public client gets `invalid_client`.
				allowedPolicy: async (_ctx, client) => client.clientAuthMethod !== 'none',
			},
			revocation: { enabled: true },
			userinfo: { enabled: true },
			rpInitiatedLogout: {
				enabled: true,
				logoutSource: async (ctx, form) => {
					ctx.type = 'html'
					ctx.body = await deps.pages.signOut(requestOf(ctx, settings.issuer), { xsrf: xsrfOf(form) }, ctx.oidc.client?.clientName)
				},
				postLogoutSuccessSource: async (ctx) => {
					ctx.type = 'html'
					ctx.body = await deps.pages.signedOut(requestOf(ctx, settings.issuer), ctx.oidc.client?.clientName)
				},
			},
			backchannelLogout: { enabled: true },
			claimsParameter: { enabled: true },
			registration: { enabled: settings.dynamicRegistration, initialAccessToken: false },
			resourceIndicators: {
				enabled: true,
				defaultResource: async (_ctx, _client, oneOf) => oneOf,
				useGrantedResource: async () => true,
				// RFC 8707 + RFC 9068: a token for a resource server is a JWT whose audience is that resource.
				getResourceServerInfo: async (_ctx, resourceIndicator) => ({
					scope: '',
					audience: resourceIndicator,
					accessTokenTTL: settings.accessTokenTtlSeconds,
					accessTokenFormat: 'jwt',
					jwt: { sign: { alg: 'RS256' } },
				}),
			},
		},
		ttl: {
			AccessToken: settings.accessTokenTtlSeconds,
			ClientCredentials: settings.accessTokenTtlSeconds,
			// API.md: codes live 60 s.
			AuthorizationCode: 60,
			IdToken: settings.accessTokenTtlSeconds,
			RefreshToken: settings.refreshTokenTtlSeconds,
			Grant: settings.refreshTokenTtlSeconds,
			// A session with no account holds only a form's anti-forgery secret (the device page's, the sign-out
			// question's), and any visitor makes one with a GET: kept two hours, not a signed-in session's lifetime.
			// Two, so that one it is not written again for (its expiry slid by under an hour, adapter.ts) has an hour left.
			Session: (_ctx, session) => (session.accountId ? settings.refreshTokenTtlSeconds : ANONYMOUS_SESSION_SECONDS),
			Interaction: 3600,
			DeviceCode: 600,
		},
		// Every refresh rotates; a rotated token used again ends the grant (reuse detection, as /auth/refresh).
		rotateRefreshToken: true,
		issueRefreshToken: async (_ctx, client, code) => client.grantTypeAllowed('refresh_token') && code.scopes.has('offline_access'),
		findAccount: async (ctx, sub) => {
			if (!UUID.test(sub)) return undefined
			const user = await accountOf(ctx, sub)
			if (!user) return undefined
			// The organization claims are read when asked for, as the memberships are then (ID token, userinfo).
			// `appMetadata.claims` rides along for ID tokens only (API.md: access and ID tokens, not userinfo): the
			// library's claims filter knows no such names, so they go under a symbol the ID token's payload adds back.
			const own = appClaimsOf(user.appClaims)
			return {
				accountId: user.id,
				[APP_CLAIMS]: own,
				claims: async (use, scope) => ({
					...accountClaims(user),
					...(await organizationClaims(user.id, scope)),
					...(use === 'id_token' && own ? { [APP_CLAIMS]: own } : {}),
				}),
			}
		},
		// Access tokens of `organization:{id}` carry `org` (a JWT for a resource server; introspection for an opaque
		// one), read at each issuance: a refresh after the membership ended or changed drops or updates it.
		extraTokenClaims: async (ctx, token) => {
			const { accountId, scope } = token as { accountId?: unknown; scope?: unknown }
			if (typeof accountId !== 'string' || token.kind === 'ClientCredentials') return undefined
			// A token for a resource (RFC 8707) carries the resource's scopes only: the organization asked for is
			// then the one the code, refresh token or device code it comes from was issued with.
			const entities = ctx?.oidc?.entities as Record<string, { scope?: unknown } | undefined> | undefined
			const source = entities?.AuthorizationCode ?? entities?.RefreshToken ?? entities?.DeviceCode
			const asked = organizationScopes(scope).length ? scope : source?.scope
			const org = await tokenOrganization(accountId, asked)
			// `appMetadata.claims` of the account the grant found (the library's ctx.oidc.account: no read of its own).
			const account = ctx?.oidc?.account as { accountId?: unknown; [APP_CLAIMS]?: Record<string, unknown> } | undefined
			const own = account?.accountId === accountId ? account[APP_CLAIMS] : undefined
			// The console's token for the API names its Latchkey session, which the API's guard reads on every request
			// (docs/console.md): revoking the session or deactivating the account ends the token at once.
			const { clientId, sid, resourceServer } = token as { clientId?: unknown; sid?: unknown; resourceServer?: unknown }
			const session = token.kind === 'AccessToken' && clientId === CONSOLE_CLIENT_ID && resourceServer && typeof sid === 'string' ? { sid } : undefined
			return own || org || session ? { ...own, ...(org ? { org } : {}), ...session } : undefined
		},
		// First-party clients and consent remembered for every scope asked get their grant without the consent page.
		loadExistingGrant: async (ctx) => {
			const { oidc } = ctx
			const client = oidc.client
			const accountId = oidc.session?.accountId
			if (client && accountId) await checkOrganizationScopes(oidc.params?.scope, client, accountId)
			const grantId = oidc.result?.consent?.grantId ?? (client ? oidc.session?.grantIdFor(client.clientId) : undefined)
			if (grantId) return oidc.provider.Grant.find(grantId)
			if (!client || !accountId) return undefined
			const asked = String(oidc.params?.scope ?? '').split(' ').filter(Boolean)
			const allowed = (await deps.clients.isFirstParty(client.clientId)) ? asked : await deps.consents.remembered(accountId, client.clientId)
			if (!asked.every((scope) => allowed.includes(scope))) return undefined
			const grant = new oidc.provider.Grant({ accountId, clientId: client.clientId })
			grant.addOIDCScope(asked.join(' '))
			if (oidc.params?.claims) grant.addOIDCClaims(Object.keys(JSON.parse(String(oidc.params.claims)).id_token ?? {}))
			await grant.save()
			oidc.session?.grantIdFor(client.clientId, grant.jti)
			return grant
		},
		// The library's own pages are Latchkey's: nothing fetched from elsewhere, the same look as the sign-in page.
		renderError: async (ctx, out) => {
			ctx.type = 'html'
			ctx.body = await deps.pages.error(requestOf(ctx, settings.issuer), String(out.error), out.error_description === undefined ? undefined : String(out.error_description))
		},
		// Every request the library makes goes through Latchkey's guard (the webhooks' checks and pinned address):
		// its own (an undici dispatcher) does nothing on Bun. A refused one fails as the target being down would.
		fetch: async (input, init) => {
			try {
				return await fetchGuarded(input, init)
			} catch (error) {
				if (error instanceof DestinationRefused) deps.log.warn({ host: hostOf(input), reason: error.message }, 'OpenID Provider request refused')
				throw error
			}
		},
		fetchResponseBodyLimits: { jwks_uri: CLIENT_DOCUMENT_LIMIT, sector_identifier_uri: CLIENT_DOCUMENT_LIMIT },
		clientBasedCORS: (_ctx, origin, client) => client.redirectUris?.some((uri) => safeOrigin(uri) === origin) ?? false,
		extraClientMetadata: { properties: [] },
	}
	/**
	 * `organization:{id}` at authorization, once the account is known (as Logto and Zitadel do, refused rather than
	 * ignored): one at most, a UUID, from a client allowed `organizations`, and of an active organization the account
	 * is a member of — else the client gets `invalid_scope` or `access_denied` at its redirect URI.
	 */
	async function checkOrganizationScopes(scope: unknown, client: { scope?: string }, accountId: string) {
		const asked = organizationScopes(scope)
		if (asked.length === 0) return
		const { errors } = library
		const allowed = new Set(String(client.scope ?? '').split(' '))
		if (!allowed.has('organizations')) throw new errors.InvalidScope('requested scope is not allowed', `organization:${asked[0]}`)
		const [id] = asked
		if (asked.length > 1 || !id || !UUID.test(id)) throw new errors.InvalidScope('organization:{id} takes one organization id (a UUID)', `organization:${id ?? ''}`)
		if (!(await organizationClaimOf(db, accountId, id.toLowerCase()))) throw new errors.AccessDenied('the account is not a member of an active organization with this id')
	}
	/** The `org` claim of the one `organization:{id}` a scope string asks for, if the account's membership holds now. */
	async function tokenOrganization(accountId: string, scope: unknown): Promise<OrganizationClaim | undefined> {
		const [id, ...more] = organizationScopes(scope)
		if (!id || more.length > 0 || !UUID.test(id) || !UUID.test(accountId)) return undefined
		return organizationClaimOf(db, accountId, id.toLowerCase())
	}
	/** The claims the organization scopes give: `organizations` (every active membership) and `org`. */
	async function organizationClaims(accountId: string, scope: string): Promise<Record<string, unknown>> {
		const names = new Set(scope.split(' '))
		const claims: Record<string, unknown> = {}
		if (names.has('organizations')) {
			const rows = await db
				.select({ id: organizations.id, slug: organizations.slug, roles: organizationMembers.roles })
				.from(organizationMembers)
				.innerJoin(organizations, eq(organizations.id, organizationMembers.organizationId))
				.where(and(eq(organizationMembers.userId, accountId), eq(organizations.status, 'active')))
				.orderBy(organizationMembers.joinedAt, organizations.id)
			claims.organizations = rows.map((row) => ({ id: row.id, slug: row.slug, roles: [...row.roles].sort() }))
		}
		const org = await tokenOrganization(accountId, scope)
		if (org) claims.org = org
		return claims
	}
	/**
	 * The active account: read with the request's token (ReadAhead), or as the browser's session found it (single
	 * sign-on), or else read now.
	 */
	async function accountOf(ctx: KoaContextWithOIDC, id: string): Promise<AccountRecord | undefined> {
		const known = ahead.take<AccountRecord>(accountKey(id))
		if (known !== undefined) return known ?? undefined
		const browser = await browserSession(ctx)
		if (browser?.userId === id && browser.account) return browser.account
		const [user] = await activeUser.execute({ id })
		return user
	}
	const provider = new Provider(settings.issuer, configuration)
	queueBackchannelLogouts(provider, db)
	// Behind Latchkey's own HTTP layer, which decided who the client is and whether the request was https.
	provider.proxy = true
	// Secrets are stored hashed: the library's comparison with a clear secret gives way to Latchkey's own.
	provider.Client.prototype.compareClientSecret = async function (this: { clientId: string }, actual: string) {
		return deps.verifySecret(this.clientId, actual)
	}
	// Whenever the library reads its session from the browser, it takes on the browser's Latchkey session first:
	// before the account and the grant are loaded for an authorization request, so single sign-on needs no page.
	const Session = provider.Session
	const getSession = Session.get.bind(Session)
	Session.get = async (ctx) => {
		// The library's session first: its read brings the browser's Latchkey session along (one statement,
		// adapter.ts); without a provider session to read, the browser's is read alone.
		const session = await getSession(ctx)
		const browser = await browserSession(ctx)
		const current = session as unknown as Record<string, unknown>
		if (browser && (session.accountId !== browser.userId || current[LATCHKEY_SESSION] !== browser.sessionId)) {
			adopt(current as never, browser)
			// Changed before the library watches it for changes: marked as its watch would, so that it is saved.
			Object.defineProperty(session, 'touched', { writable: true, value: true })
		}
		return session
	}
	// An ID token carries `appMetadata.claims` (findAccount) beside what the library's claims filter lets through,
	// which always wins: the copy is the base (the registered names are left out of it anyway).
	const IdToken = provider.IdToken
	const idTokenPayload = IdToken.prototype.payload
	IdToken.prototype.payload = async function (this: { available: Record<PropertyKey, unknown> }) {
		const payload = await idTokenPayload.call(this)
		const own = this.available[APP_CLAIMS] as Record<string, unknown> | undefined
		return own ? { ...own, ...payload } : payload
	}
	// Every ID token names its session (`sid`), not only those of clients that asked for back-channel logout.
	provider.Client.prototype.includeSid = () => true
	// The ID token's `sid` is the Latchkey session's id (API.md), not one the library makes up.
	const ensureClientContainer = provider.Session.prototype.ensureClientContainer
	provider.Session.prototype.ensureClientContainer = function (this: InstanceType<typeof provider.Session>, clientId: string) {
		const latchkeySession = (this as unknown as Record<string, unknown>)[LATCHKEY_SESSION]
		if (!this.sidFor(clientId) && typeof latchkeySession === 'string') this.sidFor(clientId, latchkeySession)
		return ensureClientContainer.call(this, clientId)
	}
	const inPayload: string[] = (Session as unknown as { IN_PAYLOAD: string[] }).IN_PAYLOAD
	Object.defineProperty(Session, 'IN_PAYLOAD', { get: () => [...inPayload, LATCHKEY_SESSION] })
	// "Sign out" at RP-initiated logout ended the Latchkey session (the adapter's destroy); the browser's cookie goes too.
	provider.on('end_session.success', (ctx) => {
		if (ctx.oidc.params?.logout) ctx.append('Set-Cookie', CLEARED_BROWSER_SESSION)
	})
	// The library sends no `interval`, which a device then takes to be 5 s; the setting's, said (tests poll at once).
	provider.on('device_authorization.success', (_ctx, body: Record<string, unknown>) => {
		body.interval = settings.devicePollSeconds
	})
	provider.on('server_error', (_ctx, error) => deps.log.error({ error: error instanceof Error ? error.name : 'error' }, 'OpenID Provider error'))
	return provider
}

/** The host a request was for, for the log (never its path or query). */
function hostOf(input: string | URL | Request) {
	try {
		return new URL(input instanceof Request ? input.url : input).host
	} catch {
		return undefined
	}
}

function safeOrigin(uri: string) {
	try {
		return new URL(uri).origin
	} catch {
		return undefined
	}
}

