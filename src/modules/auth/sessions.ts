import { and, desc, eq, gt, isNull, ne, sql } from 'drizzle-orm'
import type { Database } from '../../db/client'
import { refreshTokens, sessions, users, type SessionRow, type UserRow } from '../../db/schema'
import { NotFound } from '../../http/problem'
import type { ClientInfo } from '../audit/service'
import type { SessionResource } from '../users/model'
import { hashRefreshToken, newRefreshToken } from './tokens'

/** A Drizzle handle or an open transaction on it. */
export type Queryable = Pick<Database, 'select' | 'insert' | 'update' | 'execute'>

export type { ClientInfo }

export interface Caller {
	user: UserRow
	sessionId: string
}

/** Starts a session and its first refresh token; returns the token in clear, once. */
export async function startSession(
	db: Queryable,
	userId: string,
	client: ClientInfo,
	refreshTtlSeconds: number,
): Promise<{ session: SessionRow; refreshToken: string; accessTokenId: string }> {
	const now = new Date()
	const [session] = await db
		.insert(sessions)
		.values({
			id: Bun.randomUUIDv7(),
			userId,
			createdAt: now,
			lastUsedAt: now,
			expiresAt: new Date(now.getTime() + refreshTtlSeconds * 1000),
			ip: client.ip,
			userAgent: client.userAgent?.slice(0, 512) ?? null,
		})
		.returning()
	if (!session) throw new Error('session insert returned no row')
	return { session, ...(await issueTokenPair(db, session.id, null)) }
}

/**
 * A new refresh token, and the id (jti) of the access token to be signed
 * beside it: the pair is recorded together so that it can be refused together.
 */
export async function issueTokenPair(db: Queryable, sessionId: string, parentId: string | null) {
	const refreshToken = newRefreshToken()
	const accessTokenId = Bun.randomUUIDv7()
	await db.insert(refreshTokens).values({
		id: Bun.randomUUIDv7(),
		sessionId,
		parentId,
		tokenHash: hashRefreshToken(refreshToken),
		accessTokenId,
	})
	return { refreshToken, accessTokenId }
}

/**
 * The caller behind an access token, in one primary-key lookup: the session
 * must be live, belong to the token's subject, whose account is active, and
 * the token must not belong to a pair superseded during a refresh retry.
 * This per-request check is what makes logout and deactivation immediate.
 *
 * It runs on every authenticated request, so its SQL is built once per
 * database (a Drizzle prepared query) instead of once per request.
 */
export function callerFinder(db: Database) {
	const lookup = db
		.select({ user: users, supersededAccessTokenIds: sessions.supersededAccessTokenIds })
		.from(sessions)
		.innerJoin(users, eq(users.id, sessions.userId))
		.where(
			and(
				eq(sessions.id, sql.placeholder('sid')),
				eq(sessions.userId, sql.placeholder('sub')),
				isNull(sessions.revokedAt),
				gt(sessions.expiresAt, sql`now()`),
				eq(users.status, 'active'),
			),
		)
		.limit(1)
		.prepare('latchkey_find_caller')

	return async (claims: { sid: string; sub: string; jti: string }): Promise<Caller | undefined> => {
		const [row] = await lookup.execute({ sid: claims.sid, sub: claims.sub })
		if (!row || row.supersededAccessTokenIds.includes(claims.jti)) return undefined
		return { user: row.user, sessionId: claims.sid }
	}
}

export async function listActiveSessions(db: Queryable, userId: string, currentSessionId: string): Promise<SessionResource[]> {
	const rows = await db
		.select()
		.from(sessions)
		.where(and(eq(sessions.userId, userId), isNull(sessions.revokedAt), gt(sessions.expiresAt, sql`now()`)))
		.orderBy(desc(sessions.createdAt))
		.limit(1000)
	return rows.map((row) => toSessionResource(row, currentSessionId))
}

/** Revokes one session of a user; repeating it returns the same revoked session. */
export async function revokeSession(db: Queryable, userId: string, sessionId: string, currentSessionId: string) {
	await db
		.update(sessions)
		.set({ revokedAt: sql`now()` })
		.where(and(eq(sessions.id, sessionId), eq(sessions.userId, userId), isNull(sessions.revokedAt)))
	const [row] = await db
		.select()
		.from(sessions)
		.where(and(eq(sessions.id, sessionId), eq(sessions.userId, userId)))
	if (!row) throw new NotFound('No such session for this user')
	return toSessionResource(row, currentSessionId)
}

/** Revokes every live session of a user, or every one but `keepSessionId`. Returns how many. */
export async function revokeUserSessions(db: Queryable, userId: string, keepSessionId?: string): Promise<number> {
	const revoked = await db
		.update(sessions)
		.set({ revokedAt: sql`now()` })
		.where(
			and(
				eq(sessions.userId, userId),
				isNull(sessions.revokedAt),
				keepSessionId ? ne(sessions.id, keepSessionId) : undefined,
			),
		)
		.returning({ id: sessions.id })
	return revoked.length
}

export async function countActiveSessions(db: Queryable): Promise<number> {
	const [row] = await db
		.select({ count: sql<number>`count(*)::int` })
		.from(sessions)
		.where(and(isNull(sessions.revokedAt), gt(sessions.expiresAt, sql`now()`)))
	return Number(row?.count ?? 0)
}

export function toSessionResource(row: SessionRow, currentSessionId: string): SessionResource {
	return {
		id: row.id,
		createdAt: row.createdAt.toISOString(),
		lastUsedAt: row.lastUsedAt.toISOString(),
		expiresAt: row.expiresAt.toISOString(),
		revokedAt: row.revokedAt?.toISOString() ?? null,
		ip: row.ip,
		userAgent: row.userAgent,
		current: row.id === currentSessionId,
	}
}
