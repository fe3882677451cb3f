import { and, asc, desc, eq, getTableColumns, gt, inArray, isNull, lt, ne, notExists, sql } from 'drizzle-orm'
import type { Config } from '../../config/env'
import type { Database, Queryable } from '../../db/client'
import { factors, organizationMembers, organizations, refreshTokens, sessions, users, type SessionRow, type UserRow } from '../../db/schema'
import { AppError, NotFound } from '../../http/problem'
import type { ClientInfo } from '../../http/request-context'
import type { SessionResource } from '../users/model'
import { recordWebhookEvents, type WebhookEvent } from '../webhooks/outbox'
import type { SessionEndReason } from './model'
import { hashRefreshToken, newRefreshToken } from './tokens'
import { permissionsOfRoles, toOrganizationClaim, type OrganizationClaim } from './organization-claim'

export type { SessionEndReason }
export type { Queryable }

export type { ClientInfo }

/** How a session was established: RFC 8176 methods and the assurance level they give. */
export interface SessionAssurance {
	amr: string[]
	aal: 'aal1' | 'aal2'
	/** MFA_REQUIRED applied and the account had no factor: the session may only enrol one. */
	enrollmentOnly: boolean
}

/**
 * What ties a session started at the pages to a browser: the digest of its cookie's opaque value (the
 * cookie `__Host-latchkey-session`), and the OAuth client whose authorization request led there, if one did.
 */
export interface BrowserBinding {
	browserTokenHash: string
	clientId?: string
}

export const PASSWORD_ONLY: SessionAssurance = { amr: ['pwd'], aal: 'aal1', enrollmentOnly: false }
/**
 * A sign-in at an identity provider: RFC 8176 has no value for "federated", and what the provider did (a
 * password there, a passkey…) is its own to say, so the list is empty rather than a guess.
 */
export const PROVIDER_ONLY: SessionAssurance = { amr: [], aal: 'aal1', enrollmentOnly: false }

/**
 * The caller's account as the per-request lookup reads it: every column but `metadata` and `appMetadata`, up to
 * 16 KiB that no guard needs (a route that shows them reads them: GET /users/{id}).
 */
export type CallerUser = Omit<UserRow, 'metadata' | 'appMetadata'>
const { metadata: _metadata, appMetadata: _appMetadata, ...callerUserColumns } = getTableColumns(users)

export interface Caller {
	user: CallerUser
	sessionId: string
	assurance: SessionAssurance
	/** The session's last sign-in or check of its owner (the tokens' `auth_time`). */
	authenticatedAt: Date
	/**
	 * The organization the token speaks for (its `org` claim) as the membership is now: current slug, roles and
	 * permissions; null when it no longer holds (member removed, organization deactivated); absent when the token
	 * carries no `org` (or no access token made the caller: a page's session).
	 */
	organization?: OrganizationClaim | null
}

/** Whether MFA_REQUIRED names this account. */
export const mustHaveFactor = (required: Config['mfa']['required'], role: UserRow['role']) =>
	required === 'all' || (required === 'admins' && role === 'admin')

/**
 * Whether a session is held to enrolment (MFA_REQUIRED names its account, and it has not used a factor the account
 * still has), decided now as the API's guard decides it for a token (findCaller): for the OpenID Provider, whose
 * browser sessions sign in to other applications. Without MFA_REQUIRED no one is held and nothing is read.
 */
export function enrolmentHold(db: Database, mfaRequired: Config['mfa']['required']): (sessionId: string) => Promise<boolean> {
	if (mfaRequired === 'off') return async () => false
	const lookup = db
		.select({
			role: users.role,
			aal: sessions.aal,
			hasActiveFactor: sql<boolean>`exists (select 1 from ${factors} where ${factors.userId} = ${users.id} and ${factors.status} = 'active')`,
		})
		.from(sessions)
		.innerJoin(users, eq(users.id, sessions.userId))
		.where(eq(sessions.id, sql.placeholder('sid')))
		.limit(1)
		.prepare('latchkey_enrolment_hold')
	return async (sessionId) => {
		const [row] = await lookup.execute({ sid: sessionId })
		// A session that is gone is no one's to sign in with: held.
		return !row || (mustHaveFactor(mfaRequired, row.role) && !(row.hasActiveFactor && row.aal === 'aal2'))
	}
}

/** REAUTHENTICATION_SECONDS in words: "5 minutes", "90 seconds". */
const inWords = (seconds: number) =>
	seconds % 60 === 0 ? `${seconds / 60} minute${seconds === 60 ? '' : 's'}` : `${seconds} second${seconds === 1 ? '' : 's'}`

export const reauthenticationRequired = (seconds: number) =>
	new AppError('reauthentication-required', `Confirm it is you first: sign in again or use POST /auth/reauthentication, then retry within ${inWords(seconds)}`)

/**
 * Adding or changing a way in needs a session that proved its owner within `seconds` (a "sudo" check, as
 * GitHub and Google make): a token taken from an older session adds no way in.
 */
export function requireRecentAuthentication(caller: Caller, seconds: number): void {
	if (Date.now() - caller.authenticatedAt.getTime() > seconds * 1000) throw reauthenticationRequired(seconds)
}


/** A `session.*` webhook event: the session as the API shows it, with its user and how it was established. */
export function sessionEvent(type: 'session.created' | 'session.revoked', row: SessionRow, reason?: SessionEndReason): WebhookEvent {
	const { current: _, ...shown } = toSessionResource(row, '')
	return { type, data: { session: { ...shown, userId: row.userId, amr: row.amr, aal: row.aal }, ...(reason ? { reason } : {}) } }
}

// Any constant works; it keeps these per-user advisory locks apart from other users of two-key locks.
const SESSION_CAP_LOCK_SPACE = 0x53_45_53_53 // "SESS"

/**
 * Starts a session and its first refresh token; returns the token in clear, once.
 *
 * With a cap (`sessionsPerUserMax` > 0), the user's oldest live sessions beyond it are revoked, the new
 * one always kept. Concurrent logins of one user are serialised by a transaction-scoped advisory lock
 * on the user, so `db` must be a transaction: row locks cannot do it (the rows that would push a login
 * over the cap are other logins' uncommitted inserts), and the caller's FOR SHARE on the user's row does
 * not exclude other logins.
 */
export async function startSession(
	db: Queryable,
	userId: string,
	client: ClientInfo,
	refreshTtlSeconds: number,
	sessionsPerUserMax: number,
	assurance: SessionAssurance = PASSWORD_ONLY,
	browser?: BrowserBinding,
): Promise<{ session: SessionRow; refreshToken: string; accessTokenId: string; evictedSessionIds: string[] }> {
	if (sessionsPerUserMax > 0)
		await db.execute(sql`select pg_advisory_xact_lock(${SESSION_CAP_LOCK_SPACE}::int, ${userLockKey(userId)}::int)`)
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
			...assurance,
			...(browser ? { browserTokenHash: browser.browserTokenHash, clientId: browser.clientId ?? null } : {}),
		})
		.returning()
	if (!session) throw new Error('session insert returned no row')
	const evicted = sessionsPerUserMax > 0 ? await revokeSessionsBeyondCap(db, userId, session.id, sessionsPerUserMax) : []
	await recordWebhookEvents(db, [sessionEvent('session.created', session), ...evicted.map((row) => sessionEvent('session.revoked', row, 'session-limit'))])
	const evictedSessionIds = evicted.map((row) => row.id)
	return { session, evictedSessionIds, ...(await issueTokenPair(db, session.id, null)) }
}

/** 32 bits of the user id's random part: a collision only makes two users' logins wait for each other. */
const userLockKey = (userId: string) => Number.parseInt(userId.replaceAll('-', '').slice(-8), 16) | 0

/**
 * Revokes the user's live sessions, oldest first, until `max` remain counting `keepId` (another instance's
 * clock may date an older session later, so the one being started is excluded by id, not by time).
 */
async function revokeSessionsBeyondCap(db: Queryable, userId: string, keepId: string, max: number): Promise<SessionRow[]> {
	const beyondCap = db
		.select({ id: sessions.id })
		.from(sessions)
		.where(
			and(eq(sessions.userId, userId), ne(sessions.id, keepId), isNull(sessions.revokedAt), gt(sessions.expiresAt, sql`now()`)),
		)
		.orderBy(desc(sessions.createdAt), desc(sessions.id))
		.offset(max - 1)
	const revoked = await db
		.update(sessions)
		.set({ revokedAt: sql`now()` })
		.where(inArray(sessions.id, beyondCap))
		.returning()
	return revoked
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
export function callerFinder(db: Database, mfaRequired: Config['mfa']['required'] = 'off') {
	const plain = callerLookup(db, mfaRequired, false)
	const full = callerLookup(db, mfaRequired, true)
	return (claims: CallerClaims, options: { metadata?: boolean } = {}) => (options.metadata ? full : plain)(claims)
}

type CallerClaims = { sid: string; sub: string; jti: string; authTime: number; org?: string }

/** Whether the caller's account was read with its metadata (a route that asked for it: see the guard's `metadata`). */
export const withMetadata = (user: CallerUser): user is UserRow => 'metadata' in user && 'appMetadata' in user

/**
 * The lookup of callerFinder, reading the caller's metadata or not: a route that shows the caller's own account
 * (GET /users/me) has them from the one read it makes anyway, and every other route does not pay for them.
 */
function callerLookup(db: Database, mfaRequired: Config['mfa']['required'], metadata: boolean) {
	// Typed as the narrower set either way: `withMetadata` tells at run time whether the two columns were read.
	const userColumns = (metadata ? getTableColumns(users) : callerUserColumns) as typeof callerUserColumns
	const suffix = metadata ? '_metadata' : ''
	const columns = {
		user: userColumns,
		supersededAccessTokenIds: sessions.supersededAccessTokenIds,
		amr: sessions.amr,
		aal: sessions.aal,
		authenticatedAt: sessions.authenticatedAt,
	}
	// Enrolment-only is decided on every request from the account as it is now (its role, its factors), not
	// from what the login saw: a promotion or a last factor removed holds the session to enrolment at once.
	// Without MFA_REQUIRED no one is held, and the read path does not pay for the question; with it, the factors
	// are looked at only where the answer counts — an aal2 session of an account the setting names (an aal1
	// one is held whatever it has), so a plain user's read under MFA_REQUIRED=admins costs what it does without.
	const named = mfaRequired === 'admins' ? sql`and ${users.role} = 'admin'` : sql``
	const hasActiveFactor = sql<boolean>`case when ${sessions.aal} = 'aal2' ${named} then exists (select 1 from ${factors} where ${factors.userId} = ${users.id} and ${factors.status} = 'active') else false end`
	// The token's session, live, of the token's active account.
	const liveSessionOfToken = and(
		eq(sessions.id, sql.placeholder('sid')),
		eq(sessions.userId, sql.placeholder('sub')),
		isNull(sessions.revokedAt),
		gt(sessions.expiresAt, sql`now()`),
		eq(users.status, 'active'),
	)
	const lookup = db
		.select(mfaRequired === 'off' ? columns : { ...columns, hasActiveFactor })
		.from(sessions)
		.innerJoin(users, eq(users.id, sessions.userId))
		.where(liveSessionOfToken)
		.limit(1)
		.prepare(`${mfaRequired === 'off' ? 'latchkey_find_caller' : 'latchkey_find_caller_mfa'}${suffix}`)

	// A token with an `org` claim is read by the same query with the membership joined (by primary key) and its
	// roles' permissions as a subquery: still one round trip, and a token without one pays nothing for it.
	const membership = and(eq(organizationMembers.organizationId, sql.placeholder('org')), eq(organizationMembers.userId, users.id))
	const withOrganization = db
		.select({
			...(mfaRequired === 'off' ? columns : { ...columns, hasActiveFactor }),
			organizationId: organizations.id,
			organizationSlug: organizations.slug,
			organizationRoles: organizationMembers.roles,
			organizationPermissions: permissionsOfRoles(organizationMembers.roles),
		})
		.from(sessions)
		.innerJoin(users, eq(users.id, sessions.userId))
		.leftJoin(organizationMembers, membership)
		.leftJoin(organizations, and(eq(organizations.id, organizationMembers.organizationId), eq(organizations.status, 'active')))
		.where(liveSessionOfToken)
		.limit(1)
		.prepare(`${mfaRequired === 'off' ? 'latchkey_find_caller_org' : 'latchkey_find_caller_org_mfa'}${suffix}`)

	type Row = Awaited<ReturnType<typeof lookup.execute>>[number]
	const callerOf = (row: Row | undefined, claims: { sid: string; jti: string; authTime: number }, organization: OrganizationClaim | null | undefined): Caller | undefined => {
		if (!row || row.supersededAccessTokenIds.includes(claims.jti)) return undefined
		const { amr, aal } = row
		// The check a token can show is the one it was issued after (its `auth_time`): a token taken before
		// the owner proved the session again gains nothing from that proof.
		const authenticatedAt = new Date(Math.min(row.authenticatedAt.getTime(), claims.authTime * 1000))
		// Held to enrolment: a factor is owed and this session has not used one (none exists, or it came later).
		const enrollmentOnly = mustHaveFactor(mfaRequired, row.user.role) && !('hasActiveFactor' in row && row.hasActiveFactor && aal === 'aal2')
		return { user: row.user, sessionId: claims.sid, assurance: { amr, aal, enrollmentOnly }, authenticatedAt, ...(organization === undefined ? {} : { organization }) }
	}

	return async (claims: CallerClaims): Promise<Caller | undefined> => {
		if (!claims.org) return callerOf((await lookup.execute({ sid: claims.sid, sub: claims.sub }))[0], claims, undefined)
		const [row] = await withOrganization.execute({ sid: claims.sid, sub: claims.sub, org: claims.org })
		// Served as the membership is now: gone, or the organization deactivated, as if the token carried no `org`.
		const organization =
			row?.organizationId && row.organizationSlug && row.organizationRoles
				? toOrganizationClaim({ id: row.organizationId, slug: row.organizationSlug, roles: row.organizationRoles, permissions: row.organizationPermissions ?? [] })
				: null
		return callerOf(row, claims, organization)
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

/** Revokes one session of a user; repeating it returns the same revoked session. `db` should be a transaction (the event goes with it). */
export async function revokeSession(db: Queryable, userId: string, sessionId: string, currentSessionId: string, reason: SessionEndReason) {
	const revoked = await db
		.update(sessions)
		.set({ revokedAt: sql`now()` })
		.where(and(eq(sessions.id, sessionId), eq(sessions.userId, userId), isNull(sessions.revokedAt)))
		.returning()
	await recordWebhookEvents(db, revoked.map((row) => sessionEvent('session.revoked', row, reason)))
	const [row] = await db
		.select()
		.from(sessions)
		.where(and(eq(sessions.id, sessionId), eq(sessions.userId, userId)))
	if (!row) throw new NotFound('No such session for this user')
	return toSessionResource(row, currentSessionId)
}

/**
 * Revokes every live session of a user, or every one but `keepSessionId`, with a `session.revoked` event
 * each (`db` should be a transaction). Returns how many.
 */
export async function revokeUserSessions(db: Queryable, userId: string, reason: SessionEndReason, keepSessionId?: string): Promise<number> {
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
		.returning()
	await recordWebhookEvents(db, revoked.map((row) => sessionEvent('session.revoked', row, reason)))
	return revoked.length
}

export async function countActiveSessions(db: Queryable): Promise<number> {
	const [row] = await db
		.select({ count: sql<number>`count(*)::int` })
		.from(sessions)
		.where(and(isNull(sessions.revokedAt), gt(sessions.expiresAt, sql`now()`)))
	return Number(row?.count ?? 0)
}

/** Sessions taken per purge step (the oldest-ended first), and refresh tokens deleted per statement. */
const PURGE_SESSIONS_PER_STEP = 500
const PURGE_TOKENS_PER_STEP = 2000

/**
 * One bounded step of the purge of sessions that ended (expired or were revoked) more than
 * `retentionSeconds` ago, among the 500 that ended first: up to 2,000 of their refresh tokens, then
 * those of them left with none (refresh_tokens references sessions). Each statement is its own short
 * transaction, and rows locked elsewhere are skipped rather than waited for, so instances purging at
 * once share the work and neither blocks the other nor a request. Nothing revives an ended session,
 * so a row chosen here is not needed by anyone. Both counts 0: nothing left that can go now.
 */
export async function purgeEndedSessionsStep(db: Queryable, retentionSeconds: number) {
	const endedAt = sql`least(${sessions.revokedAt}, ${sessions.expiresAt})`
	const oldestEnded = db
		.select({ id: sessions.id })
		.from(sessions)
		.where(lt(endedAt, sql`now() - ${retentionSeconds} * interval '1 second'`))
		.orderBy(asc(endedAt))
		.limit(PURGE_SESSIONS_PER_STEP)
	const tokens = await db
		.delete(refreshTokens)
		.where(
			inArray(
				refreshTokens.id,
				db
					.select({ id: refreshTokens.id })
					.from(refreshTokens)
					.where(inArray(refreshTokens.sessionId, oldestEnded))
					.limit(PURGE_TOKENS_PER_STEP)
					.for('update', { skipLocked: true }),
			),
		)
		.returning({ id: refreshTokens.id })
	const emptied = await db
		.delete(sessions)
		.where(
			inArray(
				sessions.id,
				db
					.select({ id: sessions.id })
					.from(sessions)
					.where(
						and(
							inArray(sessions.id, oldestEnded),
							notExists(db.select({ id: refreshTokens.id }).from(refreshTokens).where(eq(refreshTokens.sessionId, sessions.id))),
						),
					)
					.for('update', { skipLocked: true }),
			),
		)
		.returning({ id: sessions.id })
	return { sessions: emptied.length, refreshTokens: tokens.length }
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
