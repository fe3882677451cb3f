import { and, count, eq, gt, isNull, lt, ne, or, sql } from 'drizzle-orm'
import * as oidc from 'openid-client'
import type { Config, OidcProviderSettings } from '../../config/env'
import { digestOf, newOpaqueToken, sameDigest } from '../../crypto/opaque-tokens'
import { isDatabaseUnavailable, loggableError, sqlState, type Database } from '../../db/client'
import type { Logger } from '../../log'
import type { WayInNotices } from '../../mail/notices'
import { factors, identities, oidcFlows, sessions, signInCodes, users, type UserRow } from '../../db/schema'
import { AppError, Conflict, NotFound } from '../../http/problem'
import type { AuditLog, ClientInfo } from '../audit/service'
import type { BrowserBinding, IssuedSession, SecondFactorOwed, SignIn, StepUp } from '../auth/sign-in'
import { PROVIDER_ONLY, requireRecentAuthentication, type Caller, type Queryable } from '../auth/sessions'
import { provenanceAal } from '../auth/ways-in'
import { isEmailAddress, NAME_MAX_LENGTH, normalizeEmail } from '../users/model'
import { insertUser, userChangeEvents } from '../users/service'
import { recordWebhookEvents } from '../webhooks/outbox'
import { toIdentityResource } from './model'
import { ProviderUnavailable, type ProviderDirectory } from './providers'
import { isAllowedRedirect, withQuery } from './redirect-urls'

/** A flow may sit at the provider this long (a person typing a password, a second factor there). */
const FLOW_SECONDS = 600
/** The one-time code handed to the frontend lives this long (API.md). */
const CODE_SECONDS = 60

/** Why a flow ends without a code: the `error` the frontend's callback page receives. */
export type ProviderError =
	| 'invalid-state'
	| 'access-denied'
	| 'provider-error'
	| 'provider-unavailable'
	| 'invalid-response'
	| 'email-required'
	| 'invalid-email'
	| 'account-exists'
	| 'account-deactivated'
	| 'signup-disabled'
	| 'identity-in-use'
	| 'server-error'

const DESCRIPTIONS: Record<ProviderError, string> = {
	'invalid-state': 'This sign-in was not started in this browser, or has expired: start again',
	'access-denied': 'The sign-in was cancelled at the provider',
	'provider-error': 'The provider refused the sign-in',
	'provider-unavailable': 'The provider could not be reached; try again later or use another way to sign in',
	'invalid-response': 'The provider’s answer did not pass the checks (signature, issuer, audience, nonce or expiry)',
	'email-required': 'The provider did not share an email address',
	'invalid-email': 'The provider gave an address that is not a valid email; use another way to sign in',
	'account-exists': 'An account with this email exists: sign in to it, then link this provider',
	'account-deactivated': 'This account is deactivated',
	'signup-disabled': 'Sign-up is closed, and no account is linked to this identity',
	'identity-in-use': 'This identity already signs in to another account',
	'server-error': 'The sign-in failed on our side; try again',
}

/**
 * Where a provider sign-in started from Latchkey's own /sign-in page returns (under PUBLIC_URL): the page is a
 * frontend like any other, so it is admitted whatever REDIRECT_URLS lists (which names the app's frontend).
 */
export const PAGES_PROVIDER_RETURN_PATH = '/sign-in/provider/callback'

/** RFC 7636 S256: BASE64URL(SHA-256(verifier)). */
const s256 = (verifier: string) => digestOf(verifier, 'base64url')

const invalidSignInCode = () => new AppError('invalid-code', 'The code is unknown, used, expired, or not for this code verifier: sign in again')

export interface ProviderSignInDeps {
	db: Database
	audit: AuditLog
	directory: ProviderDirectory
	settings: Config['oidc']
	signupEnabled: boolean
	log: Logger
	/** The sign-in road: what a provider's sign-in still owes, and its session. */
	signIn: Pick<SignIn, 'owes' | 'secondFactorOwed' | 'start' | 'succeeded'>
	/** Adding or removing a way in needs aal2 once a second factor is active. */
	stepUp: StepUp
	/** REAUTHENTICATION_SECONDS: how recent a check must be to link an identity. */
	reauthenticationSeconds: number
	/** RECOVERY_REVIEW_SECONDS: a factor added at aal1 this recently lends no aal2 to a link. */
	recoveryReviewSeconds: number
	/** A notice to the account's address of every identity linked or unlinked. */
	notices: Pick<WayInNotices, 'queue'>
}

type Outcome = { ok: true; user: UserRow; created: boolean; linked: boolean } | { ok: false; error: ProviderError; userId?: string }

/**
 * Sign-in with OpenID Connect providers. Towards the provider: the authorization code flow with PKCE,
 * `state` and `nonce`, by openid-client. Towards the frontend: a one-time code in the redirect, bound to
 * the frontend's own PKCE challenge and exchanged at POST /auth/sessions. The flow is bound to the
 * browser that started it by a cookie, so a callback cannot be replayed or planted in another browser.
 */
export class ProviderSignIn {
	constructor(private readonly deps: ProviderSignInDeps) {}

	list() {
		return this.deps.directory.providers.map(({ id, label }) => ({ id, label }))
	}

	private provider(id: string): OidcProviderSettings {
		const provider = this.deps.directory.find(id)
		if (!provider) throw new NotFound('No such identity provider')
		return provider
	}

	/** The /sign-in page's own return URL (see PAGES_PROVIDER_RETURN_PATH). */
	get pagesReturnUrl() {
		return `${this.deps.settings.publicUrl}${PAGES_PROVIDER_RETURN_PATH}`
	}

	callbackUrl(providerId: string, requestOrigin: string) {
		return `${this.deps.settings.publicUrl ?? requestOrigin}/api/auth/providers/${providerId}/callback`
	}

	/** Where the browser goes to sign in at the provider; a flow is stored for the callback to find. */
	async start(
		providerId: string,
		input: { redirectTo: string; codeChallenge: string },
		browserSecret: string,
		requestOrigin: string,
	): Promise<string> {
		const provider = this.provider(providerId)
		if (input.redirectTo !== this.pagesReturnUrl && !isAllowedRedirect(input.redirectTo, this.deps.settings.redirectUrls))
			throw new AppError('redirect-not-allowed', 'redirectTo is not one of the REDIRECT_URLS')
		let configuration: oidc.Configuration
		try {
			configuration = await this.deps.directory.configuration(provider)
		} catch (error) {
			if (error instanceof ProviderUnavailable) return this.failure(input.redirectTo, 'provider-unavailable')
			throw error
		}
		return this.newFlow(provider, configuration, input, { browserHash: digestOf(browserSecret), linkUserId: null }, requestOrigin)
	}

	/**
	 * A signed-in user's request to add a provider to the account: the provider's authorization URL. The flow
	 * has no browser cookie (a frontend's request started it); the frontend's PKCE verifier binds it instead:
	 * the identity is linked only when that verifier exchanges the code. Adding a way in needs aal2 once the
	 * account has a second factor, as adding a factor does.
	 */
	async startLink(caller: Caller, input: { provider: string; redirectTo: string; codeChallenge: string }, requestOrigin: string): Promise<string> {
		const provider = this.provider(input.provider)
		// The /account/identities page links through its own return, as /sign-in signs in through it.
		if (input.redirectTo !== this.pagesReturnUrl && !isAllowedRedirect(input.redirectTo, this.deps.settings.redirectUrls))
			throw new AppError('redirect-not-allowed', 'redirectTo is not one of the REDIRECT_URLS')
		requireRecentAuthentication(caller, this.deps.reauthenticationSeconds)
		await this.deps.stepUp.requireStepUp(caller)
		const configuration = await this.deps.directory.configuration(provider).catch((error: unknown) => {
			throw error instanceof ProviderUnavailable ? new AppError('provider-unavailable', 'The identity provider could not be reached; try again later', { headers: { 'retry-after': '30' } }) : error
		})
		const linkAal = await provenanceAal(this.deps.db, caller, this.deps.recoveryReviewSeconds)
		return this.newFlow(provider, configuration, input, { browserHash: null, linkUserId: caller.user.id, linkAal, linkSessionId: caller.sessionId }, requestOrigin)
	}

	private async newFlow(
		provider: OidcProviderSettings,
		configuration: oidc.Configuration,
		input: { redirectTo: string; codeChallenge: string },
		binding: { browserHash: string | null; linkUserId: string | null; linkAal?: 'aal1' | 'aal2'; linkSessionId?: string },
		requestOrigin: string,
	): Promise<string> {
		const state = newOpaqueToken()
		const nonce = oidc.randomNonce()
		const providerVerifier = oidc.randomPKCECodeVerifier()
		await this.deps.db.insert(oidcFlows).values({
			id: Bun.randomUUIDv7(),
			stateHash: digestOf(state),
			...binding,
			provider: provider.id,
			nonce,
			providerVerifier,
			redirectTo: input.redirectTo,
			codeChallenge: input.codeChallenge,
			expiresAt: new Date(Date.now() + FLOW_SECONDS * 1000),
		})
		return oidc
			.buildAuthorizationUrl(configuration, {
				redirect_uri: this.callbackUrl(provider.id, requestOrigin),
				scope: provider.scopes,
				state,
				nonce,
				code_challenge: await oidc.calculatePKCECodeChallenge(providerVerifier),
				code_challenge_method: 'S256',
			})
			.toString()
	}

	/**
	 * The provider's redirect back. Every outcome is a redirect to the frontend: the flow's `redirectTo` with
	 * `code`, or with `error` and `error_description`; a callback that names no live flow of this browser
	 * goes to the frontend's URL (APP_URL) with `error=invalid-state` (its `redirectTo` is not this browser's to know).
	 */
	async callback(providerId: string, query: Record<string, string | undefined>, browserSecret: string | undefined, requestOrigin: string, client: ClientInfo): Promise<string> {
		const provider = this.provider(providerId)
		const { db } = this.deps
		// Only the browser that started a sign-in flow can spend it: a callback URL opened elsewhere (planted, or
		// leaked) neither signs that browser in nor burns the flow. A link flow has no browser; its PKCE verifier binds it.
		const [flow] = query.state
			? await db
					.update(oidcFlows)
					.set({ usedAt: sql`now()` })
					.where(
						and(
							eq(oidcFlows.stateHash, digestOf(query.state)),
							eq(oidcFlows.provider, provider.id),
							isNull(oidcFlows.usedAt),
							gt(oidcFlows.expiresAt, sql`now()`),
							or(isNull(oidcFlows.browserHash), eq(oidcFlows.browserHash, browserSecret ? digestOf(browserSecret) : '')),
						),
					)
					.returning()
			: []
		if (!flow) return this.failure(this.deps.settings.fallbackUrl, 'invalid-state')
		if (query.error) return this.failure(flow.redirectTo, query.error === 'access_denied' ? 'access-denied' : 'provider-error')
		try {
			return await this.finishCallback(provider, flow, query, requestOrigin, client)
		} catch (error) {
			// The flow is spent and the browser is the frontend's: it gets an error to show, never a page of this API.
			if (isDatabaseUnavailable(error)) throw error
			this.deps.log.error({ provider: provider.id, error: loggableError(error) }, 'provider sign-in failed on our side')
			return this.failure(flow.redirectTo, 'server-error')
		}
	}

	private async finishCallback(
		provider: OidcProviderSettings,
		flow: typeof oidcFlows.$inferSelect,
		query: Record<string, string | undefined>,
		requestOrigin: string,
		client: ClientInfo,
	): Promise<string> {
		const { db } = this.deps
		let claims: { sub: string; email?: string; emailVerified: boolean; name?: string }
		try {
			claims = await this.verifiedClaims(provider, flow, query, requestOrigin)
		} catch (error) {
			const reason: ProviderError = error instanceof ProviderUnavailable ? 'provider-unavailable' : 'invalid-response'
			await this.deps.audit.record('login.failed', client, { details: { provider: provider.id, reason } })
			return this.failure(flow.redirectTo, reason)
		}
		// Checked as sign-up checks its body, before anything is looked up or written (API.md): what is stored
		// from a provider must be what a sign-up could have stored.
		if (claims.email !== undefined && !isEmailAddress(claims.email)) {
			await this.deps.audit.record('login.failed', client, { subjectId: flow.linkUserId ?? undefined, details: { provider: provider.id, reason: 'invalid-email' } })
			return this.failure(flow.redirectTo, 'invalid-email')
		}
		if (flow.linkUserId) return this.linkCode(provider, flow, claims, client)
		const outcome = await this.resolveAccount(provider, claims, client)
		if (!outcome.ok) {
			await this.deps.audit.record('login.failed', client, { subjectId: outcome.userId, details: { provider: provider.id, reason: outcome.error } })
			return this.failure(flow.redirectTo, outcome.error)
		}
		const { user } = outcome
		if (outcome.created) await this.deps.audit.record('user.signed-up', client, { actorId: user.id, subjectId: user.id, details: { provider: provider.id } })
		if (outcome.linked || outcome.created)
			await this.deps.audit.record('identity.linked', client, { actorId: user.id, subjectId: user.id, details: { provider: provider.id, by: outcome.created ? 'sign-up' : 'verified-email' } })
		return withQuery(flow.redirectTo, { code: await this.issueCode(db, provider, flow, user) })
	}

	/** A link flow's callback: the identity is checked now and linked when the frontend exchanges the code. */
	private async linkCode(provider: OidcProviderSettings, flow: typeof oidcFlows.$inferSelect, claims: { sub: string; email?: string }, client: ClientInfo) {
		const { db } = this.deps
		const [user] = await db.select().from(users).where(eq(users.id, flow.linkUserId ?? ''))
		if (!user || user.status !== 'active') return this.failure(flow.redirectTo, 'account-deactivated')
		// The session that asked ended meanwhile (a logout, or the owner's recovery): its request ended with it.
		if (!(await liveLinkSession(db, flow.linkSessionId, user.id))) {
			await this.deps.audit.record('login.failed', client, { subjectId: user.id, details: { provider: provider.id, reason: 'session-ended' } })
			return this.failure(flow.redirectTo, 'invalid-state')
		}
		const [taken] = await db
			.select({ userId: identities.userId })
			.from(identities)
			.where(and(eq(identities.provider, provider.id), eq(identities.subject, claims.sub)))
		if (taken && taken.userId !== user.id) {
			await this.deps.audit.record('login.failed', client, { subjectId: user.id, details: { provider: provider.id, reason: 'identity-in-use' } })
			return this.failure(flow.redirectTo, 'identity-in-use')
		}
		return withQuery(flow.redirectTo, { code: await this.issueCode(db, provider, flow, user, { subject: claims.sub, email: claims.email ?? null }) })
	}

	private async issueCode(db: Queryable, provider: OidcProviderSettings, flow: typeof oidcFlows.$inferSelect, user: UserRow, link?: { subject: string; email: string | null }) {
		const code = newOpaqueToken()
		await db.insert(signInCodes).values({
			id: Bun.randomUUIDv7(),
			codeHash: digestOf(code),
			userId: user.id,
			credentialsVersion: user.credentialsVersion,
			provider: provider.id,
			codeChallenge: flow.codeChallenge,
			linkSubject: link?.subject ?? null,
			linkEmail: link?.email ?? null,
			linkAal: link ? flow.linkAal : null,
			linkSessionId: link ? flow.linkSessionId : null,
			expiresAt: new Date(Date.now() + CODE_SECONDS * 1000),
		})
		return code
	}

	/** The ID token checked by openid-client (signature against the JWKS, iss, aud, exp, nonce); userinfo when it lacks the email. */
	private async verifiedClaims(provider: OidcProviderSettings, flow: typeof oidcFlows.$inferSelect, query: Record<string, string | undefined>, requestOrigin: string) {
		const configuration = await this.deps.directory.configuration(provider)
		const current = new URL(this.callbackUrl(provider.id, requestOrigin))
		for (const [name, value] of Object.entries(query)) if (value !== undefined) current.searchParams.set(name, value)
		let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>
		try {
			tokens = await oidc.authorizationCodeGrant(configuration, current, {
				pkceCodeVerifier: flow.providerVerifier,
				expectedState: query.state,
				expectedNonce: flow.nonce,
				idTokenExpected: true,
			})
		} catch (error) {
			throw isUnreachable(error) ? new ProviderUnavailable('token endpoint unreachable') : error
		}
		const idToken = tokens.claims()
		if (!idToken) throw new Error('no ID token')
		let { email, email_verified: emailVerified, name } = idToken as { email?: unknown; email_verified?: unknown; name?: unknown }
		if (typeof email !== 'string') {
			const info = await oidc.fetchUserInfo(configuration, tokens.access_token, idToken.sub).catch((error: unknown) => {
				throw isUnreachable(error) ? new ProviderUnavailable('userinfo unreachable') : error
			})
			;({ email, email_verified: emailVerified, name } = info as { email?: unknown; email_verified?: unknown; name?: unknown })
		}
		return {
			sub: idToken.sub,
			email: typeof email === 'string' ? email : undefined,
			emailVerified: emailVerified === true,
			name: typeof name === 'string' ? oneLineName(name) : undefined,
		}
	}

	/**
	 * The account of an identity: the one it is linked to; or an account with its email, linked only when
	 * the provider asserts the email verified and the account proved it too (no pre-account takeover);
	 * or a new account without a password while sign-up is open. In one transaction; a concurrent first
	 * sign-in of the same identity meets the unique (provider, subject) and is read again.
	 */
	private async resolveAccount(provider: OidcProviderSettings, claims: { sub: string; email?: string; emailVerified: boolean; name?: string }, client: ClientInfo, retried = false): Promise<Outcome> {
		try {
			return await this.deps.db.transaction(async (tx): Promise<Outcome> => {
				const [linked] = await tx
					.select({ user: users })
					.from(identities)
					.innerJoin(users, eq(users.id, identities.userId))
					.where(and(eq(identities.provider, provider.id), eq(identities.subject, claims.sub)))
				if (linked) return linked.user.status === 'active' ? { ok: true, user: linked.user, created: false, linked: false } : { ok: false, error: 'account-deactivated', userId: linked.user.id }
				if (!claims.email) return { ok: false, error: 'email-required' }
				const email = normalizeEmail(claims.email)
				const [existing] = await tx.select().from(users).where(eq(users.email, email)).for('update')
				if (existing) {
					if (existing.status !== 'active') return { ok: false, error: 'account-deactivated', userId: existing.id }
					if (!claims.emailVerified || existing.emailVerifiedAt === null) return { ok: false, error: 'account-exists', userId: existing.id }
					// Linked by the provider's word alone, without a second factor: a recovery may review it.
					await linkIdentity(tx, { provider: provider.id, subject: claims.sub, email, userId: existing.id, addedUnverified: false, addedAal: 'aal1' })
					await this.deps.notices.queue(tx, existing, [{ way: 'identity', change: 'added', label: provider.id }], client)
					return { ok: true, user: existing, created: false, linked: true }
				}
				if (!this.deps.signupEnabled) return { ok: false, error: 'signup-disabled' }
				const user = await insertUser(tx, {
					email,
					name: claims.name ?? '',
					role: 'user',
					passwordHash: null,
					...(claims.emailVerified ? { emailVerifiedAt: new Date() } : {}),
				})
				await recordWebhookEvents(tx, userChangeEvents(null, user))
				// The account's first way in; while the provider leaves the address unproved, proving it later removes this identity.
				await linkIdentity(tx, { provider: provider.id, subject: claims.sub, email, userId: user.id, addedUnverified: user.emailVerifiedAt === null, addedAal: null })
				return { ok: true, user, created: true, linked: false }
			})
		} catch (error) {
			// A concurrent first sign-in of the same identity made the account or identity first: read it again.
			const { constraint } = sqlState(error)
			const raced = constraint === 'identities_provider_subject_key' || (error instanceof AppError && error.kind === 'email-taken')
			if (!retried && raced) return this.resolveAccount(provider, claims, client, true)
			throw error
		}
	}

	/**
	 * The frontend's exchange of the one-time code for a session, with the PKCE verifier of the challenge it
	 * sent at the start. The code is spent whatever the outcome. An account with an active second factor
	 * answers `mfaRequired` as a password login does: a provider does not stand in for the factor. With
	 * `browser`, the session is also the browser's behind the pages' cookie (the /sign-in page's provider buttons).
	 */
	async exchange(code: string, codeVerifier: string, client: ClientInfo, browser?: BrowserBinding): Promise<IssuedSession | SecondFactorOwed> {
		const { db } = this.deps
		const [spent] = await db
			.update(signInCodes)
			.set({ usedAt: sql`now()` })
			.where(and(eq(signInCodes.codeHash, digestOf(code)), isNull(signInCodes.usedAt), gt(signInCodes.expiresAt, sql`now()`)))
			.returning()
		if (!spent || !sameDigest(spent.codeChallenge, s256(codeVerifier))) throw invalidSignInCode()
		const [user] = await db.select().from(users).where(eq(users.id, spent.userId))
		if (!user || user.status !== 'active' || user.credentialsVersion !== spent.credentialsVersion) throw invalidSignInCode()
		if (spent.linkSubject !== null) {
			const { linkSubject } = spent
			const provenance = { addedUnverified: user.emailVerifiedAt === null, addedAal: spent.linkAal ?? 'aal1' }
			await db.transaction(async (tx) => {
				// Held until the link commits: a recovery that revokes the session waits, and then reviews the identity.
				if (!(await liveLinkSession(tx, spent.linkSessionId, user.id, true))) throw invalidSignInCode()
				await linkIdentity(tx, { provider: spent.provider, subject: linkSubject, email: spent.linkEmail, userId: user.id, ...provenance })
				await this.deps.notices.queue(tx, user, [{ way: 'identity', change: 'added', label: spent.provider }], client)
			}).catch((error: unknown) => {
				if (sqlState(error).constraint !== 'identities_provider_subject_key') throw error
				throw new Conflict('conflict', 'This identity is already linked to an account')
			})
			await this.deps.audit.record('identity.linked', client, { actorId: user.id, subjectId: user.id, details: { provider: spent.provider, by: 'user' } })
		}
		const { signIn } = this.deps
		const owed = await signIn.owes(user, PROVIDER_ONLY)
		if ('secondFactor' in owed) return signIn.secondFactorOwed(user, PROVIDER_ONLY, owed.secondFactor)
		const issued = await signIn.start(user.id, spent.credentialsVersion, owed.session, client, async () => true, browser)
		if (!issued) throw invalidSignInCode()
		await signIn.succeeded(issued, client, { method: 'provider', provider: spent.provider })
		return issued
	}

	/** Deletes flows and codes past their time: they serve no one any more. Returns how many went. */
	async purgeExpired(): Promise<number> {
		const flows = await this.deps.db.delete(oidcFlows).where(lt(oidcFlows.expiresAt, sql`now()`)).returning({ id: oidcFlows.id })
		const codes = await this.deps.db.delete(signInCodes).where(lt(signInCodes.expiresAt, sql`now()`)).returning({ id: signInCodes.id })
		return flows.length + codes.length
	}

	async identitiesOf(userId: string) {
		return this.deps.db.select().from(identities).where(eq(identities.userId, userId)).orderBy(identities.createdAt, identities.id)
	}

	/**
	 * Unlinks an identity, never the account's last way in: a password, another identity or a passkey must
	 * remain. The user's own unlinking needs aal2 once a second factor is active; an admin's does not.
	 * The account's row is locked so that two unlinks at once cannot both pass the check.
	 */
	async unlink(caller: Caller, userId: string, identityId: string, client: ClientInfo) {
		if (caller.user.id === userId) await this.deps.stepUp.requireStepUp(caller)
		const removed = await this.deps.db.transaction(async (tx) => {
			const [user] = await tx.select().from(users).where(eq(users.id, userId)).for('update')
			if (!user) throw new NotFound('No such user')
			const [identity] = await tx.select().from(identities).where(and(eq(identities.id, identityId), eq(identities.userId, userId)))
			if (!identity) throw new NotFound('No such identity on this account')
			const [others] = await tx.select({ count: count() }).from(identities).where(and(eq(identities.userId, userId), ne(identities.id, identity.id)))
			const [passkeys] = await tx.select({ count: count() }).from(factors).where(and(eq(factors.userId, userId), eq(factors.type, 'webauthn'), eq(factors.status, 'active')))
			if (user.passwordHash === null && (others?.count ?? 0) === 0 && (passkeys?.count ?? 0) === 0)
				throw new Conflict('conflict', 'This is the account’s last way to sign in: set a password (recovery by email) or add a passkey first')
			await tx.delete(identities).where(eq(identities.id, identity.id))
			await recordWebhookEvents(tx, [{ type: 'identity.unlinked', data: { userId, identity: toIdentityResource(identity) } }])
			await this.deps.notices.queue(tx, user, [{ way: 'identity', change: 'removed', label: identity.provider }], client)
			return identity
		})
		await this.deps.audit.record('identity.unlinked', client, { actorId: caller.user.id, subjectId: userId, details: { provider: removed.provider } })
		return removed
	}

	private failure(redirectTo: string, error: ProviderError) {
		return withQuery(redirectTo, { error, error_description: DESCRIPTIONS[error] })
	}
}

/** Whether the session that started a link flow is still live (locked FOR SHARE when `hold`, inside a transaction). */
async function liveLinkSession(db: Queryable, sessionId: string | null, userId: string, hold = false): Promise<boolean> {
	if (sessionId === null) return false
	const live = db
		.select({ id: sessions.id })
		.from(sessions)
		.where(and(eq(sessions.id, sessionId), eq(sessions.userId, userId), isNull(sessions.revokedAt), gt(sessions.expiresAt, sql`now()`)))
	const [row] = hold ? await live.for('share') : await live
	return row !== undefined
}

/** Links an identity to an account, with its `identity.linked` event (`tx` should be a transaction). */
async function linkIdentity(tx: Queryable, values: Omit<typeof identities.$inferInsert, 'id'> & { userId: string }) {
	const [identity] = await tx.insert(identities).values({ id: Bun.randomUUIDv7(), ...values }).returning()
	if (identity) await recordWebhookEvents(tx, [{ type: 'identity.linked', data: { userId: values.userId, identity: toIdentityResource(identity) } }])
}

/**
 * A provider's display name as an account's name: control characters (line breaks, NUL…) become spaces,
 * runs of white space one, and at most NAME_MAX_LENGTH characters are kept, never half a surrogate pair.
 * Cleaned rather than refused: the name is the provider's decoration, not a reason to fail a sign-in.
 */
export function oneLineName(raw: string): string {
	const flat = raw.toWellFormed().replace(/[\p{Cc}\p{Zl}\p{Zp}\s]+/gu, ' ').trim()
	let kept = ''
	for (const char of flat) {
		if (kept.length + char.length > NAME_MAX_LENGTH) break
		kept += char
	}
	return kept.trimEnd()
}

/** A network failure or timeout talking to the provider, as opposed to an answer that failed a check. */
function isUnreachable(error: unknown): boolean {
	for (let current = error, depth = 0; current && depth < 5; depth++) {
		const { name, code } = current as { name?: string; code?: string }
		if (name === 'TimeoutError' || name === 'AbortError' || code === 'ECONNREFUSED' || code === 'ConnectionRefused' || code === 'ECONNRESET' || code === 'OAUTH_RESPONSE_IS_NOT_CONFORM') return true
		if (name === 'TypeError' && (current as Error).message.includes('fetch')) return true
		current = (current as { cause?: unknown }).cause
	}
	return false
}
