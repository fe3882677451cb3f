import { and, eq, isNull, sql } from 'drizzle-orm'
import type { Database } from '../../db/client'
import { refreshTokens, sessions, users, type SessionRow, type UserRow } from '../../db/schema'
import { AppError } from '../../http/problem'
import { normalizeEmail } from '../users/model'
import type { AuditLog } from '../audit/service'
import { isLoginLocked, type LoginLockout, type PasswordAttempt } from './lockout'
import type { PasswordHasher } from './password'
import { recordWebhookEvents } from '../webhooks/outbox'
import { issueTokenPair, PASSWORD_ONLY, revokeUserSessions, sessionEvent, type Caller, type ClientInfo, type Queryable, type SessionAssurance } from './sessions'
import { emailNotVerified, holdCredentials, recordLoginLocked, type BrowserBinding, type IssuedSession, type SecondFactorOwed, type SignIn } from './sign-in'
import { hashRefreshToken } from './tokens'
import { notAMember, organizationClaimOf } from './organization-claim'

export interface AuthServiceDeps {
	db: Database
	audit: AuditLog
	hasher: PasswordHasher
	lockout: LoginLockout
	/** Where a right password goes on: what is owed, the session, its renewal. */
	signIn: SignIn
	/** EMAIL_VERIFICATION=required: the right password of an unverified account gets 403 email-not-verified. */
	requireVerifiedEmail: boolean
	refreshTtlSeconds: number
	reuseGraceSeconds: number
}

export type { IssuedSession, SecondFactorOwed }

export type LogoutScope = 'local' | 'others' | 'global'

/** One problem for every failed login: same status, body and (about) time. */
export const invalidCredentials = () => new AppError('invalid-credentials', 'The email or password is incorrect')

export const invalidRefreshToken = () =>
	new AppError('invalid-token', 'The refresh token is invalid, expired or revoked', {
		headers: { 'www-authenticate': 'Bearer realm="latchkey", error="invalid_token"' },
	})

export class AuthService {
	constructor(private readonly deps: AuthServiceDeps) {}

	/**
	 * Unknown email, wrong password and deactivated account all cost the same
	 * argon2 work (also for accounts whose hash predates a PASSWORD_HASH_*
	 * change) and end in the same error. The check is reserved with the
	 * lockout before the hash is computed, and what it verified is held by
	 * `holdCredentials` while the session is written: a password change (or
	 * email change, or deactivation) that lands between the check and the
	 * session makes this login fail rather than outlive the change. The pages' sign-in passes `browser`: the
	 * session is then also the browser's (its cookie's digest), and the token pair is not handed out.
	 */
	async login(email: string, password: string, client: ClientInfo, browser?: BrowserBinding): Promise<IssuedSession | SecondFactorOwed> {
		const normalized = normalizeEmail(email)
		const { db, hasher, signIn } = this.deps
		const attempt = await this.reserveAttempt(normalized, client)
		try {
			const [user] = await db.select().from(users).where(eq(users.email, normalized))
			// The same argon2 work for an unknown email and for any stored hash's parameters: time tells nothing.
			// An account without a password (made through an identity provider) costs the same work and is refused.
			const valid = await hasher.verifyForLogin(password, user?.passwordHash ?? undefined)
			// Only the right password learns that the address waits for its proof; a wrong one gets the usual 401.
			if (user && valid && user.status === 'active' && this.deps.requireVerifiedEmail && user.emailVerifiedAt === null) {
				await attempt.succeeded()
				await this.deps.audit.record('login.failed', client, { subjectId: user.id, details: { email: normalized, reason: 'email-not-verified' } })
				throw emailNotVerified()
			}
			const owed = user && valid && user.status === 'active' ? await signIn.owes(user, PASSWORD_ONLY) : undefined
			if (user && owed && 'secondFactor' in owed) {
				const methods = owed.secondFactor
				// The password was right: its failures are forgiven; the second factor has a lockout of its own.
				await attempt.succeeded()
				await this.deps.audit.record('login.mfa-required', client, { subjectId: user.id, details: { methods: methods.join(' ') } })
				return signIn.secondFactorOwed(user, PASSWORD_ONLY, methods)
			}
			const issued = user && owed && 'session' in owed ? await this.startCheckedSession(user, password, client, owed.session, browser) : undefined
			if (!user || !issued) {
				const reason = !user ? 'unknown-email' : !valid ? 'wrong-password' : user.status !== 'active' ? 'deactivated' : 'credentials-changed'
				await this.recordFailure(attempt, client, { email: normalized, subjectId: user?.id, reason })
				throw invalidCredentials()
			}
			await attempt.succeeded()
			await signIn.succeeded(issued, client)
			return issued
		} finally {
			// A check the database cut short (503) reached no verdict: it must not count toward the lockout.
			await attempt.release()
		}
	}

	/** The session of a login whose password was right; undefined when the account changed since it was read. */
	private async startCheckedSession(user: UserRow, password: string, client: ClientInfo, assurance: SessionAssurance, browser?: BrowserBinding) {
		const { hasher } = this.deps
		// Hashes made with other parameters are replaced now, while the password is known; never inside the transaction.
		const upgradedHash = user.passwordHash && hasher.needsRehash(user.passwordHash) ? await hasher.hash(password) : undefined
		return this.deps.signIn.startWithPassword(user, upgradedHash, assurance, client, browser)
	}

	/**
	 * POST /auth/reauthentication with a password: the same check as a login (the lockout, equal work for
	 * an account without a password), then the session is renewed as proved now.
	 */
	async reauthenticateWithPassword(caller: Caller, password: string, client: ClientInfo): Promise<IssuedSession> {
		const { user } = caller
		const attempt = await this.reserveAttempt(user.email, client, user.id)
		try {
			const valid = await this.deps.hasher.verifyForLogin(password, user.passwordHash ?? undefined)
			const renewed = valid ? await this.deps.signIn.renew(caller, { amr: ['pwd'], spend: async (tx) => (await holdCredentials(tx, user, undefined)) }) : undefined
			if (!renewed) {
				await this.recordFailure(attempt, client, { email: user.email, subjectId: user.id, actorId: user.id, reason: valid ? 'credentials-changed' : 'wrong-password' })
				await this.deps.audit.record('reauthentication.failed', client, { actorId: user.id, subjectId: user.id, details: { method: 'password' } })
				throw invalidCredentials()
			}
			await attempt.succeeded()
			await this.deps.audit.record('reauthentication.succeeded', client, { actorId: user.id, subjectId: user.id, details: { sessionId: caller.sessionId, method: 'password' } })
			return renewed
		} finally {
			await attempt.release()
		}
	}

	/** POST /auth/reauthentication with a code mailed to the account (which has neither password nor factor). */
	async reauthenticateWithMailedCode(caller: Caller, spend: (tx: Queryable) => Promise<boolean>, client: ClientInfo): Promise<IssuedSession> {
		const who = { actorId: caller.user.id, subjectId: caller.user.id }
		// A mailed code is no method of RFC 8176's: `amr` stays as it was; only `auth_time` moves.
		const renewed = await this.deps.signIn.renew(caller, { amr: [], spend })
		if (!renewed) {
			await this.deps.audit.record('reauthentication.failed', client, { ...who, details: { method: 'email', reason: 'spent-meanwhile' } })
			throw new AppError('invalid-code', 'The token or code is wrong, used or replaced by a newer one; ask for a new mail')
		}
		await this.deps.audit.record('reauthentication.succeeded', client, { ...who, details: { sessionId: caller.sessionId, method: 'email' } })
		return renewed
	}

	/**
	 * Counts a failed password check toward the lockout and audits it, and the lock it starts. The email is
	 * kept only when it is an account's (`subjectId`): text no account has is whatever was typed, perhaps a
	 * password in the wrong box, so it is neither audited nor sent. Such text is locked all the same (no
	 * enumeration by behaviour); only an account's lock is a `login.locked` event, carrying the account.
	 */
	async recordFailure(
		attempt: PasswordAttempt,
		client: ClientInfo,
		{ email, subjectId, actorId, reason }: { email: string; subjectId?: string; actorId?: string; reason: string },
	) {
		const shown: Record<string, string> = subjectId ? { email } : {}
		await this.deps.audit.record('login.failed', client, { actorId, subjectId, details: { ...shown, reason } })
		if (!(await attempt.failed())) return
		await this.deps.audit.record('login.locked', client, { actorId, subjectId, details: shown })
		// The lock lives in the counter store, not in a transaction: the event is written on its own.
		if (subjectId) await recordLoginLocked(this.deps.db, subjectId, 'password')
	}

	/** A password check reserved with the lockout; a refusal is audited as a failed login (of the account, if one has the email). */
	async reserveAttempt(email: string, client: ClientInfo, actorId?: string): Promise<PasswordAttempt> {
		try {
			return await this.deps.lockout.reserve(email)
		} catch (error) {
			if (isLoginLocked(error)) {
				const [account] = await this.deps.db.select({ id: users.id }).from(users).where(eq(users.email, email))
				await this.deps.audit.record('login.failed', client, { actorId, subjectId: account?.id, details: account ? { email, reason: 'locked' } : { reason: 'locked' } })
			}
			throw error
		}
	}

	/**
	 * Rotation with reuse detection (RFC 9700 §4.14). All of it runs under a
	 * lock on the session row, so concurrent refreshes of one session are
	 * decided one after another:
	 * - the live token: exchanged for a new one;
	 * - the token rotated just before the live one, within the grace interval:
	 *   a client retry, so the live pair is superseded and a new one issued;
	 * - any other rotated token: reuse, so the session is revoked.
	 *
	 * `organizationId` switches the session's active organization in the same transaction (a UUID: one the caller
	 * is a member of, and active, else 403 `not-a-member` and nothing changes, the token not spent; null: none;
	 * undefined: as it was). The new access token's `org` claim is the active organization's membership as it is
	 * now; one that no longer holds is dropped, and the session forgets it.
	 */
	async refresh(refreshToken: string, client: ClientInfo, organizationId?: string | null): Promise<IssuedSession> {
		const tokenHash = hashRefreshToken(refreshToken)
		const outcome = await this.deps.db.transaction(async (tx) => {
			const [found] = await tx
				.select({ sessionId: refreshTokens.sessionId })
				.from(refreshTokens)
				.where(eq(refreshTokens.tokenHash, tokenHash))
			if (!found) return { kind: 'unknown' as const }
			const [session] = await tx.select().from(sessions).where(eq(sessions.id, found.sessionId)).for('update')
			const [token] = await tx.select().from(refreshTokens).where(eq(refreshTokens.tokenHash, tokenHash))
			const [user] = session ? await tx.select().from(users).where(eq(users.id, session.userId)) : []
			if (!session || !token || !user) return { kind: 'unknown' as const }
			if (session.revokedAt || session.expiresAt <= new Date() || user.status !== 'active')
				return { kind: 'dead' as const }

			if (token.rotatedAt === null) {
				await tx.update(refreshTokens).set({ rotatedAt: new Date() }).where(eq(refreshTokens.id, token.id))
				return this.continueSession(tx, user, session, token.id, client, organizationId)
			}
			const [live] = await tx
				.select()
				.from(refreshTokens)
				.where(and(eq(refreshTokens.sessionId, session.id), isNull(refreshTokens.rotatedAt)))
			const withinGrace =
				this.deps.reuseGraceSeconds > 0 &&
				Date.now() - token.rotatedAt.getTime() <= this.deps.reuseGraceSeconds * 1000
			if (withinGrace && live && live.parentId === token.id) {
				await tx.update(refreshTokens).set({ rotatedAt: new Date() }).where(eq(refreshTokens.id, live.id))
				if (live.accessTokenId)
					await tx
						.update(sessions)
						.set({ supersededAccessTokenIds: sql`array_append(${sessions.supersededAccessTokenIds}, ${live.accessTokenId})` })
						.where(eq(sessions.id, session.id))
				return this.continueSession(tx, user, session, token.id, client, organizationId)
			}
			const revoked = await tx.update(sessions).set({ revokedAt: sql`now()` }).where(eq(sessions.id, session.id)).returning()
			await recordWebhookEvents(tx, revoked.map((row) => sessionEvent('session.revoked', row, 'token-reuse')))
			return { kind: 'reuse' as const, sessionId: session.id, userId: user.id }
		})
		if (outcome.kind === 'reuse')
			await this.deps.audit.record('token.reuse-detected', client, {
				subjectId: outcome.userId,
				details: { sessionId: outcome.sessionId },
			})
		if (outcome.kind !== 'issued') throw invalidRefreshToken()
		const { user, sessionId } = outcome.issued
		// A switch of organization is part of the refresh's record: which one (null: none) the session speaks for now.
		const details: Record<string, string | null> = { sessionId }
		if (organizationId !== undefined) details.organizationId = outcome.issued.organization?.id ?? null
		await this.deps.audit.record('token.refreshed', client, { actorId: user.id, subjectId: user.id, details })
		return outcome.issued
	}

	private async continueSession(
		tx: Parameters<Parameters<Database['transaction']>[0]>[0],
		user: UserRow,
		session: SessionRow,
		parentId: string,
		client: ClientInfo,
		organizationId: string | null | undefined,
	) {
		const sessionId = session.id
		// A switch is checked under a share lock on the membership: removed or deactivated meanwhile, it waits for
		// this commit and is then seen by the next request's check. Refused, the transaction (the rotation) rolls back.
		const wanted = organizationId === undefined ? session.activeOrganizationId : organizationId
		const organization = wanted ? await organizationClaimOf(tx, user.id, wanted, { lock: organizationId !== undefined }) : undefined
		if (organizationId && !organization) throw notAMember()
		const { refreshToken, accessTokenId } = await issueTokenPair(tx, sessionId, parentId)
		// Sliding lifetime: each refresh token is good for the refresh TTL from its issue.
		const now = new Date()
		await tx
			.update(sessions)
			.set({
				lastUsedAt: now,
				expiresAt: new Date(now.getTime() + this.deps.refreshTtlSeconds * 1000),
				ip: client.ip,
				userAgent: client.userAgent?.slice(0, 512) ?? null,
				// The active organization as chosen, or none once its membership no longer holds (the claim is dropped).
				activeOrganizationId: organization?.id ?? null,
			})
			.where(eq(sessions.id, sessionId))
		const assurance: SessionAssurance = { amr: session.amr, aal: session.aal, enrollmentOnly: session.enrollmentOnly }
		return { kind: 'issued' as const, issued: { user, sessionId, refreshToken, accessTokenId, assurance, authenticatedAt: session.authenticatedAt, organization } }
	}

	async logout(caller: Caller, scope: LogoutScope, client: ClientInfo): Promise<number> {
		const revoked = await this.revokeForLogout(caller, scope)
		await this.deps.audit.record('logout', client, {
			actorId: caller.user.id,
			subjectId: caller.user.id,
			details: { scope, sessionsRevoked: revoked },
		})
		return revoked
	}

	/** A session signed out of from a browser (through a client, RP-initiated logout): as a local logout is. */
	async endSession(userId: string, sessionId: string, client: ClientInfo): Promise<number> {
		const revoked = await this.deps.db.transaction((tx) => revokeOwnSession(tx, userId, sessionId))
		await this.deps.audit.record('logout', client, { actorId: userId, subjectId: userId, details: { scope: 'local', sessionsRevoked: revoked } })
		return revoked
	}

	private revokeForLogout(caller: Caller, scope: LogoutScope): Promise<number> {
		const { user, sessionId } = caller
		return this.deps.db.transaction(async (tx) => {
			if (scope === 'global') return revokeUserSessions(tx, user.id, 'logout')
			if (scope === 'others') return revokeUserSessions(tx, user.id, 'logout', sessionId)
			return revokeOwnSession(tx, user.id, sessionId)
		})
	}
}

/** Revokes a user's session at its owner's logout, with its `session.revoked` event; how many (0 or 1). */
async function revokeOwnSession(tx: Queryable, userId: string, sessionId: string): Promise<number> {
	const revoked = await tx
		.update(sessions)
		.set({ revokedAt: sql`now()` })
		.where(and(eq(sessions.id, sessionId), eq(sessions.userId, userId), isNull(sessions.revokedAt)))
		.returning()
	await recordWebhookEvents(tx, revoked.map((row) => sessionEvent('session.revoked', row, 'logout')))
	return revoked.length
}
