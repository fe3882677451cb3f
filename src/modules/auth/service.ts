import { and, eq, isNull, sql } from 'drizzle-orm'
import type { Database } from '../../db/client'
import { refreshTokens, sessions, users, type UserRow } from '../../db/schema'
import { AppError } from '../../http/problem'
import { normalizeEmail } from '../users/service'
import type { AuditLog } from '../audit/service'
import type { LoginLockout } from './lockout'
import type { PasswordHasher } from './password'
import { issueTokenPair, revokeUserSessions, startSession, type Caller, type ClientInfo } from './sessions'
import { hashRefreshToken } from './tokens'

export interface AuthServiceDeps {
	db: Database
	audit: AuditLog
	hasher: PasswordHasher
	lockout: LoginLockout
	refreshTtlSeconds: number
	reuseGraceSeconds: number
}

/** What a login or refresh yields before the access token is signed. */
export interface IssuedSession {
	user: UserRow
	sessionId: string
	refreshToken: string
	/** The jti to sign the access token with. */
	accessTokenId: string
}

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
	 * Unknown email, wrong password and deactivated account all cost one
	 * argon2 verification and end in the same error.
	 */
	async login(email: string, password: string, client: ClientInfo): Promise<IssuedSession> {
		const normalized = normalizeEmail(email)
		const { audit } = this.deps
		try {
			await this.deps.lockout.assertNotLocked(normalized)
		} catch (error) {
			await audit.record('login.failed', client, { details: { email: normalized, reason: 'locked' } })
			throw error
		}
		const [user] = await this.deps.db.select().from(users).where(eq(users.email, normalized))
		const valid = user
			? await this.deps.hasher.verify(password, user.passwordHash)
			: await this.deps.hasher.verifyAgainstDummy(password)
		if (!user || !valid || user.status !== 'active') {
			const reason = !user ? 'unknown_email' : !valid ? 'wrong_password' : 'deactivated'
			await audit.record('login.failed', client, { subjectId: user?.id, details: { email: normalized, reason } })
			if (await this.deps.lockout.recordFailure(normalized))
				await audit.record('login.locked', client, { subjectId: user?.id, details: { email: normalized } })
			throw invalidCredentials()
		}
		await this.deps.lockout.recordSuccess(normalized)
		if (this.deps.hasher.needsRehash(user.passwordHash)) await this.upgradeHash(user.id, password)
		const started = await this.deps.db.transaction((tx) => startSession(tx, user.id, client, this.deps.refreshTtlSeconds))
		await audit.record('login.succeeded', client, { actorId: user.id, subjectId: user.id, details: { sessionId: started.session.id } })
		return { user, sessionId: started.session.id, refreshToken: started.refreshToken, accessTokenId: started.accessTokenId }
	}

	/** Hashes made with older parameters are replaced on the next successful login. */
	private async upgradeHash(userId: string, password: string) {
		const passwordHash = await this.deps.hasher.hash(password)
		await this.deps.db.update(users).set({ passwordHash }).where(eq(users.id, userId))
	}

	/**
	 * Rotation with reuse detection (RFC 9700 §4.14). All of it runs under a
	 * lock on the session row, so concurrent refreshes of one session are
	 * decided one after another:
	 * - the live token: exchanged for a new one;
	 * - the token rotated just before the live one, within the grace interval:
	 *   a client retry, so the live pair is superseded and a new one issued;
	 * - any other rotated token: reuse, so the session is revoked.
	 */
	async refresh(refreshToken: string, client: ClientInfo): Promise<IssuedSession> {
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
				return this.continueSession(tx, user, session.id, token.id, client)
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
				return this.continueSession(tx, user, session.id, token.id, client)
			}
			await tx.update(sessions).set({ revokedAt: sql`now()` }).where(eq(sessions.id, session.id))
			return { kind: 'reuse' as const, sessionId: session.id, userId: user.id }
		})
		if (outcome.kind === 'reuse')
			await this.deps.audit.record('token.reuse_detected', client, {
				subjectId: outcome.userId,
				details: { sessionId: outcome.sessionId },
			})
		if (outcome.kind !== 'issued') throw invalidRefreshToken()
		const { user, sessionId } = outcome.issued
		await this.deps.audit.record('token.refreshed', client, { actorId: user.id, subjectId: user.id, details: { sessionId } })
		return outcome.issued
	}

	private async continueSession(
		tx: Parameters<Parameters<Database['transaction']>[0]>[0],
		user: UserRow,
		sessionId: string,
		parentId: string,
		client: ClientInfo,
	) {
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
			})
			.where(eq(sessions.id, sessionId))
		return { kind: 'issued' as const, issued: { user, sessionId, refreshToken, accessTokenId } }
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

	private async revokeForLogout(caller: Caller, scope: LogoutScope): Promise<number> {
		if (scope === 'global') return revokeUserSessions(this.deps.db, caller.user.id)
		if (scope === 'others') return revokeUserSessions(this.deps.db, caller.user.id, caller.sessionId)
		const revoked = await this.deps.db
			.update(sessions)
			.set({ revokedAt: sql`now()` })
			.where(and(eq(sessions.id, caller.sessionId), isNull(sessions.revokedAt)))
			.returning({ id: sessions.id })
		return revoked.length
	}
}
