import { and, eq, gt, isNull, sql } from 'drizzle-orm'
import { Elysia } from 'elysia'
import type { Config } from '../../config/env'
import type { Database } from '../../db/client'
import { refreshTokens, sessions, users, type UserRow } from '../../db/schema'
import { AppError } from '../../http/problem'
import type { AuditLog, ClientInfo } from '../audit/service'
import { toUserResource } from '../users/model'
import { recordWebhookEvents } from '../webhooks/outbox'
import type { authGuard } from './guard'
import { appClaimsOf } from './app-claims'
import { organizationClaimOf, type OrganizationClaim } from './organization-claim'
import { issueTokenPair, mustHaveFactor, startSession, type BrowserBinding, type Caller, type Queryable, type SessionAssurance } from './sessions'

export type { BrowserBinding }

/**
 * The one road every way of signing in ends on: a password here (auth/service.ts), a second factor or a
 * passkey (factors/), a provider (oidc/), a code by mail (email/code-sign-in.ts), and next the provider's own
 * pages. Each way checks its own proof and counts its own failures; then this decides what is still owed (a
 * second factor, or enrolment only under MFA_REQUIRED), starts or renews the session, and `tokenResponses`
 * answers the token pair.
 */

export type MfaMethod = 'totp' | 'webauthn' | 'recovery-code'

/** What a sign-in or refresh yields before the access token is signed. */
export interface IssuedSession {
	user: UserRow
	sessionId: string
	refreshToken: string
	/** The jti to sign the access token with. */
	accessTokenId: string
	/** How the session was established: the token's `amr` and `aal`. */
	assurance: SessionAssurance
	/** The session's last sign-in or check of its owner: the token's `auth_time`. */
	authenticatedAt: Date
	/** The session's active organization, where its membership holds: the token's `org` claim. */
	organization?: OrganizationClaim
}

/** A first step that proved an account with an active factor: no tokens yet. */
export interface SecondFactorOwed {
	mfaRequired: true
	mfaToken: string
	methods: MfaMethod[]
}

/** What the road asks of the second factors (the factors module, given at composition in app.ts). */
export interface SecondFactors {
	/** The methods the account can finish a sign-in with; none when it has no active factor. */
	methodsOf(userId: string): Promise<MfaMethod[]>
	/** A sign-in half done: the token it is finished with, bound to the account as the first step saw it and to that step's `amr`. */
	issueMfaToken(user: Pick<UserRow, 'id' | 'credentialsVersion'>, firstStepAmr: string[]): Promise<string>
}

/** With an active factor, sensitive changes need a session that used one (aal2): what users/ and oidc/ are given. */
export interface StepUp {
	requireStepUp(caller: Caller): Promise<void>
}

export interface SignInDeps {
	db: Database
	audit: AuditLog
	secondFactors: SecondFactors
	/** EMAIL_VERIFICATION=required: an unverified account gets no session. */
	requireVerifiedEmail: boolean
	refreshTtlSeconds: number
	/** Live sessions per user; a sign-in beyond it revokes the oldest (0: no cap). */
	sessionsPerUserMax: number
	/** MFA_REQUIRED: accounts it names and that have no factor get enrolment-only sessions. */
	mfaRequired: Config['mfa']['required']
}

export const emailNotVerified = () =>
	new AppError('email-not-verified', 'Verify your email address first: follow the link or enter the code from the mail')

/**
 * The `amr` of a sign-in finished with a second factor: the first step's methods, the factor's, and `mfa`
 * (RFC 8176: multiple factors) when the factor is not what the first step already used. A first step with
 * no value of its own (a provider: RFC 8176 has none for a federated sign-in) is still a step of its own.
 */
export const finishedAmr = (firstStep: string[], method: string) => [...new Set([...firstStep, method, ...(firstStep.includes(method) ? [] : ['mfa'])])]

/** What a first step still owes: the second factor's methods, or nothing more and the session's assurance. */
export type Owed = { secondFactor: MfaMethod[] } | { session: SessionAssurance }

export class SignIn {
	constructor(private readonly deps: SignInDeps) {}

	/**
	 * After a first step that proved `user` (a password here, a provider): an active factor is still owed;
	 * otherwise the session starts as that step established it, enrolment-only when MFA_REQUIRED names the account.
	 */
	async owes(user: UserRow, firstStep: SessionAssurance): Promise<Owed> {
		const methods = await this.deps.secondFactors.methodsOf(user.id)
		if (methods.length > 0) return { secondFactor: methods }
		return { session: { ...firstStep, enrollmentOnly: mustHaveFactor(this.deps.mfaRequired, user.role) } }
	}

	/** The answer of a first step that owes a second factor: the token that finishes it (POST /auth/mfa). */
	async secondFactorOwed(user: UserRow, firstStep: SessionAssurance, methods: MfaMethod[]): Promise<SecondFactorOwed> {
		return { mfaRequired: true, mfaToken: await this.deps.secondFactors.issueMfaToken(user, firstStep.amr), methods }
	}

	/**
	 * The session of a password checked here, in one transaction with `holdCredentials` (see there), writing
	 * `upgradedHash` over the hash that was checked. Undefined when the account changed since it was read.
	 * With `browser`, the session is also the browser's behind the pages' cookie (pages/browser-sessions.ts).
	 */
	async startWithPassword(
		user: UserRow,
		upgradedHash: string | undefined,
		assurance: SessionAssurance,
		client: ClientInfo,
		browser?: BrowserBinding,
	): Promise<IssuedSession | undefined> {
		const { db, refreshTtlSeconds, sessionsPerUserMax } = this.deps
		const started = await db.transaction(async (tx) =>
			(await holdCredentials(tx, user, upgradedHash)) ? startSession(tx, user.id, client, refreshTtlSeconds, sessionsPerUserMax, assurance, browser) : undefined,
		)
		return started && { user, sessionId: started.session.id, refreshToken: started.refreshToken, accessTokenId: started.accessTokenId, assurance, authenticatedAt: started.session.authenticatedAt }
	}

	/**
	 * The session of a sign-in finished by other means than a password here (a second factor, a passkey, a
	 * provider, a code by mail): on the account as it was when the sign-in began (same credentials version, still active), and
	 * only if `spend` (the code, token or counter the proof used) is still unspent. Undefined when either
	 * fails: nothing is written. With `browser`, the session is also the browser's behind the pages' cookie.
	 */
	async start(
		userId: string,
		credentialsVersion: number,
		assurance: SessionAssurance,
		client: ClientInfo,
		spend: (tx: Queryable) => Promise<boolean>,
		browser?: BrowserBinding,
	): Promise<IssuedSession | undefined> {
		const { db, refreshTtlSeconds, sessionsPerUserMax, requireVerifiedEmail } = this.deps
		const abandoned = Symbol('abandoned')
		try {
			return await db.transaction(async (tx) => {
				const [found] = await tx
					.select()
					.from(users)
					.where(and(eq(users.id, userId), eq(users.credentialsVersion, credentialsVersion), eq(users.status, 'active')))
					.for('share')
				if (!found || !(await spend(tx))) throw abandoned
				// A proof by mail proves the address as it is spent (a code sign-in): an unproved one is read again.
				const [user = found] = found.emailVerifiedAt === null ? await tx.select().from(users).where(eq(users.id, found.id)) : [found]
				if (requireVerifiedEmail && user.emailVerifiedAt === null) throw emailNotVerified()
				const started = await startSession(tx, user.id, client, refreshTtlSeconds, sessionsPerUserMax, assurance, browser)
				return { user, sessionId: started.session.id, refreshToken: started.refreshToken, accessTokenId: started.accessTokenId, assurance, authenticatedAt: started.session.authenticatedAt }
			})
		} catch (error) {
			if (error === abandoned) return undefined
			throw error
		}
	}

	/** The audit of a finished sign-in; `how` says which way it came (none for a password). */
	async succeeded(issued: IssuedSession, client: ClientInfo, how: Record<string, string> = {}): Promise<void> {
		await this.deps.audit.record('login.succeeded', client, { actorId: issued.user.id, subjectId: issued.user.id, details: { sessionId: issued.sessionId, ...how } })
	}

	/**
	 * The caller's session, proved by its owner now (POST /auth/reauthentication): `authenticatedAt` (the
	 * tokens' `auth_time`) is set, the proof's methods join its `amr` (a second factor raises it to aal2), and
	 * a new token pair replaces the live one (the old refresh token then counts as rotated). Only if `spend`
	 * (the code, challenge or counter the proof used) is still unspent; undefined otherwise, or when the
	 * session ended meanwhile.
	 */
	async renew(
		caller: Caller,
		proof: { amr: string[]; secondFactor?: boolean; spend: (tx: Queryable) => Promise<boolean> },
	): Promise<IssuedSession | undefined> {
		const abandoned = Symbol('abandoned')
		try {
			return await this.deps.db.transaction(async (tx) => {
				const [session] = await tx
					.select()
					.from(sessions)
					.where(and(eq(sessions.id, caller.sessionId), isNull(sessions.revokedAt), gt(sessions.expiresAt, sql`now()`)))
					.for('update')
				const [user] = await tx.select().from(users).where(and(eq(users.id, caller.user.id), eq(users.status, 'active')))
				if (!session || !user || !(await proof.spend(tx))) throw abandoned
				const methods = proof.secondFactor ? [...proof.amr, 'mfa'] : proof.amr
				const now = new Date()
				const [renewed] = await tx
					.update(sessions)
					.set({
						authenticatedAt: now,
						lastUsedAt: now,
						amr: [...new Set([...session.amr, ...methods])],
						...(proof.secondFactor ? { aal: 'aal2' as const, enrollmentOnly: false } : {}),
					})
					.where(eq(sessions.id, session.id))
					.returning()
				if (!renewed) throw abandoned
				const [live] = await tx
					.update(refreshTokens)
					.set({ rotatedAt: now })
					.where(and(eq(refreshTokens.sessionId, session.id), isNull(refreshTokens.rotatedAt)))
					.returning({ id: refreshTokens.id })
				const { refreshToken, accessTokenId } = await issueTokenPair(tx, session.id, live?.id ?? null)
				const assurance: SessionAssurance = { amr: renewed.amr, aal: renewed.aal, enrollmentOnly: caller.assurance.enrollmentOnly && !proof.secondFactor }
				// The new pair speaks for the session's active organization as a refresh's would (where it still holds).
				const organization = renewed.activeOrganizationId ? await organizationClaimOf(tx, user.id, renewed.activeOrganizationId) : undefined
				return { user, sessionId: session.id, refreshToken, accessTokenId, assurance, authenticatedAt: now, organization }
			})
		} catch (error) {
			if (error === abandoned) return undefined
			throw error
		}
	}
}

/**
 * Inside the sign-in's transaction: holds the account as the password check saw
 * it (same credentials version, still active) until the session is written,
 * and writes an upgraded hash only over the hash that was checked. A change
 * committed since the check leaves no row to hold (false); one that comes
 * later waits for this transaction, and then revokes the session it wrote.
 */
export async function holdCredentials(tx: Queryable, checked: Pick<UserRow, 'id' | 'credentialsVersion'>, upgradedHash: string | undefined): Promise<boolean> {
	const unchanged = and(eq(users.id, checked.id), eq(users.credentialsVersion, checked.credentialsVersion), eq(users.status, 'active'))
	const held = upgradedHash
		? await tx.update(users).set({ passwordHash: upgradedHash }).where(unchanged).returning({ id: users.id })
		: await tx.select({ id: users.id }).from(users).where(unchanged).for('share')
	return held.length === 1
}

/**
 * The `login.locked` event of a lockout a sign-in's wrong passwords or codes started: the account as the API
 * shows it (with `email` and `userId`, the members the event had before `user`). Nothing when the account is gone.
 */
export async function recordLoginLocked(db: Queryable, userId: string, reason: 'password' | 'second-factor') {
	const [account] = await db.select().from(users).where(eq(users.id, userId))
	if (account) await recordWebhookEvents(db, [{ type: 'login.locked', data: { user: toUserResource(account), email: account.email, userId: account.id, reason } }])
}

/** `tokenResponse(issued)`: the body of every sign-in, check and refresh, with the access token signed. */
export const tokenResponses = ({ guard, jwt }: { guard: ReturnType<typeof authGuard>; jwt: Config['jwt'] }) =>
	new Elysia({ name: 'token-responses' })
		.use(guard)
		.derive({ as: 'scoped' }, ({ accessTokenSigner }) => ({
			/** The response body of login and refresh: the signed pair and the user. */
			tokenResponse: async (issued: IssuedSession) => ({
				accessToken: await accessTokenSigner.sign({
					// First, so that nothing after it can be replaced (the registered names are left out of it anyway).
					...appClaimsOf(issued.user.appMetadata.claims),
					sub: issued.user.id,
					sid: issued.sessionId,
					role: issued.user.role,
					jti: issued.accessTokenId,
					amr: issued.assurance.amr,
					aal: issued.assurance.aal,
					auth_time: Math.floor(issued.authenticatedAt.getTime() / 1000),
					...(issued.organization ? { org: issued.organization } : {}),
				}),
				refreshToken: issued.refreshToken,
				tokenType: 'Bearer' as const,
				expiresIn: jwt.accessTtlSeconds,
				refreshExpiresIn: jwt.refreshTtlSeconds,
				user: toUserResource(issued.user),
			}),
		}))
