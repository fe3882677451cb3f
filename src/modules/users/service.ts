import { and, asc, desc, eq, gt, gte, ilike, lt, lte, or, sql, type SQL } from 'drizzle-orm'
import type { Config } from '../../config/env'
import type { Database } from '../../db/client'
import { sqlState } from '../../db/client'
import { countUpTo, type CountMode, type Total } from '../../db/count'
import { users, type UserRow } from '../../db/schema'
import { Conflict, Forbidden, NotFound, ValidationFailed, type FieldError } from '../../http/problem'
import { decodeKeysetCursor, encodeKeysetCursor, escapeLike, type KeysetCursor } from '../../http/pagination'
import { passwordProblem, type PasswordHasher } from '../auth/password'
import type { AuditLog, ClientInfo } from '../audit/service'
import type { AuthService } from '../auth/service'
import type { StepUp } from '../auth/sign-in'
import { listActiveSessions, requireRecentAuthentication, revokeSession, revokeUserSessions, type Caller, type Queryable } from '../auth/sessions'
import { recordWebhookEvents, type WebhookEvent } from '../webhooks/outbox'
import type { WayInChange, WayInNotices } from '../../mail/notices'
import { EXACT_COUNT_LIMIT, metadataProblems, normalizeEmail, toUserResource, type CreateUserInput, type ListUsersQuery, type ReplaceUserInput } from './model'

/**
 * The webhook events of a change to an account, from the row before (null: created) and after it: the one
 * place that decides which user.* events a change is.
 */
export function userChangeEvents(before: UserRow | null, after: UserRow, passwordChanged = false): WebhookEvent[] {
	const user = toUserResource(after)
	if (before === null) return [{ type: 'user.created', data: { user } }]
	const events: WebhookEvent[] = []
	const shown = toUserResource(before)
	const changed = (['email', 'name', 'role', 'status', 'emailVerified', 'pendingEmail', 'metadata', 'appMetadata'] as const).filter(
		(field) => !Bun.deepEquals(shown[field], user[field]),
	)
	if (changed.length > 0 || passwordChanged) events.push({ type: 'user.updated', data: { user, changed } })
	if (before.status !== 'deactivated' && after.status === 'deactivated') events.push({ type: 'user.deactivated', data: { user } })
	if (before.status === 'deactivated' && after.status !== 'deactivated') events.push({ type: 'user.reactivated', data: { user } })
	if (before.emailVerifiedAt === null && after.emailVerifiedAt !== null) events.push({ type: 'user.email-verified', data: { user } })
	if (passwordChanged) events.push({ type: 'user.password-changed', data: { user } })
	return events
}

/** The mails of sign-up and email change: what the email module gives at composition (app.ts). */
export interface AccountMail {
	/** EMAIL_VERIFICATION: whether an address waits for its proof. */
	readonly verification: Config['mail']['verification']
	/** At sign-up, in its transaction: the first verification mail; whether one was queued. */
	onSignUp(tx: Queryable, user: UserRow): Promise<boolean>
	/** A user's own email change, in the PUT's transaction: the new address waits for its proof. */
	onEmailChangeRequested(tx: Queryable, user: UserRow, newEmail: string): Promise<void>
	/** Throws when no mail can go, before anything waits for one. */
	assertMailAvailable(): void
}

export interface UsersServiceDeps {
	db: Database
	audit: AuditLog
	hasher: PasswordHasher
	/** The lockout and failure audit that every password check goes through (the login's). */
	passwordChecks: Pick<AuthService, 'reserveAttempt' | 'recordFailure'>
	/** With an active second factor, users' own password and email changes need an aal2 session. */
	stepUp: StepUp
	/** The mails of sign-up and email change, written in the same transaction as the account. */
	email: AccountMail
	passwordMinLength: number
	signupEnabled: boolean
	/** REAUTHENTICATION_SECONDS: without `currentPassword`, a user's own password or email change needs a check this recent. */
	reauthenticationSeconds: number
	/** A notice to the account's address of a password set or changed, or an address changed. */
	notices: Pick<WayInNotices, 'queue'>
}

/** Inserts an account; the unique index, not a prior read, decides whether the email is taken. */
export async function insertUser(
	db: Queryable,
	values: {
		email: string
		name: string
		role: 'user' | 'admin'
		passwordHash: string | null
		emailVerifiedAt?: Date
		metadata?: Record<string, unknown>
		appMetadata?: Record<string, unknown>
	},
): Promise<UserRow> {
	try {
		const now = new Date()
		const [row] = await db
			.insert(users)
			.values({ id: Bun.randomUUIDv7(), ...values, email: normalizeEmail(values.email), createdAt: now, updatedAt: now })
			.returning()
		if (!row) throw new Error('user insert returned no row')
		return row
	} catch (error) {
		throw translateConstraint(error)
	}
}

const changedMeanwhile = () =>
	new Conflict('conflict', 'The account changed while this request was being handled; read it again and retry')

/** Account rules of API.md; knows nothing of HTTP. */
export class UsersService {
	constructor(private readonly deps: UsersServiceDeps) {}

	async create(input: CreateUserInput, caller: Caller | null, client: ClientInfo): Promise<UserRow> {
		const isAdmin = caller?.user.role === 'admin'
		if (!isAdmin && !this.deps.signupEnabled) throw new Forbidden('Sign-up is closed; ask an administrator for an account')
		if (!isAdmin && input.role !== undefined && input.role !== 'user') throw new Forbidden('Only admins may assign a role')
		// As a role: the default (an empty object) is anyone's to send, anything else only an admin's.
		if (!isAdmin && input.appMetadata !== undefined && Object.keys(input.appMetadata).length > 0) throw new Forbidden('Only admins may set appMetadata')
		const problems = [this.passwordProblem(input.password), ...metadataProblems(input)].filter((problem) => problem !== undefined)
		if (problems.length > 0) throw new ValidationFailed(problems)
		const passwordHash = await this.deps.hasher.hash(input.password)
		const { email } = this.deps
		const user = await this.deps.db.transaction(async (tx) => {
			const user = await insertUser(tx, {
				email: input.email,
				name: input.name ?? '',
				role: input.role ?? 'user',
				passwordHash,
				metadata: input.metadata ?? {},
				appMetadata: input.appMetadata ?? {},
			})
			await recordWebhookEvents(tx, userChangeEvents(null, user))
			await email.onSignUp(tx, user)
			return user
		})
		await this.deps.audit.record(isAdmin ? 'user.created' : 'user.signed-up', client, {
			actorId: caller?.user.id ?? user.id,
			subjectId: user.id,
			details: { role: user.role },
		})
		return user
	}

	/** An account's active sessions, the caller's own marked `current` (GET /users/{id}/sessions, the /account/sessions page). */
	async sessions(userId: string, currentSessionId: string) {
		return listActiveSessions(this.deps.db, userId, currentSessionId)
	}

	/**
	 * Revokes one session of the account `userId` (DELETE /users/{id}/sessions/{sessionId}, the /account/sessions
	 * page): 404 for a session of another account; repeating it answers the same revoked session.
	 */
	async revokeSession(userId: string, sessionId: string, caller: Caller, client: ClientInfo) {
		const session = await this.deps.db.transaction((tx) => revokeSession(tx, userId, sessionId, caller.sessionId, 'revoked'))
		await this.deps.audit.record('session.revoked', client, { actorId: caller.user.id, subjectId: userId, details: { sessionId: session.id } })
		return session
	}

	async get(id: string): Promise<UserRow> {
		const [row] = await this.deps.db.select().from(users).where(eq(users.id, id))
		if (!row) throw new NotFound('No user with this id')
		return row
	}

	async list(query: ListUsersQuery): Promise<{ items: UserRow[]; nextCursor: string | null; limit: number }> {
		const limit = query.limit ?? 20
		const sort = query.sort ?? '-createdAt'
		const cursor = query.cursor === undefined ? undefined : decodeKeysetCursor(query.cursor, sort, keyIsTime(sort))
		const rows = await this.deps.db
			.select()
			.from(users)
			.where(and(...filters(query), cursor && afterCursor(sort, cursor)))
			.orderBy(...ordering(sort))
			.limit(limit + 1)
		const items = rows.slice(0, limit)
		const last = items.at(-1)
		const nextCursor = rows.length > limit && last ? encodeCursor(sort, last) : null
		return { items, nextCursor, limit }
	}

	/** How many accounts match the list's filters, whatever the page (`count`; API.md, "Admin console"). */
	count(query: ListUsersQuery, mode: CountMode): Promise<Total> {
		const matching = this.deps.db.select({ one: sql`1` }).from(users).where(and(...filters(query)))
		return countUpTo(this.deps.db, matching, mode, EXACT_COUNT_LIMIT)
	}

	/**
	 * The slow part first, outside any transaction: the current password is
	 * checked (through the lockout) and the new one hashed against the account
	 * as read. Then one short transaction applies the change only if the
	 * account's credentials are still those that were checked (compare and
	 * swap on credentials_version), else 409: no argon2 ever runs while a row
	 * lock or a pooled connection is held.
	 */
	async replace(id: string, input: ReplaceUserInput, caller: Caller, client: ClientInfo): Promise<UserRow> {
		const callerIsAdmin = caller.user.role === 'admin'
		const self = caller.user.id === id
		const checked = await this.get(id)
		assertMayChange(input, checked, callerIsAdmin)
		const email = normalizeEmail(input.email)
		const changesCredentials = input.password !== undefined || email !== checked.email
		// Users' own new address waits for its proof (API.md); an admin's change applies at once.
		const changeWaitsForProof = self && email !== checked.email && this.deps.email.verification !== 'off'
		if (changeWaitsForProof) this.deps.email.assertMailAvailable()
		const problems = [input.password === undefined ? undefined : this.passwordProblem(input.password), ...metadataProblems(input)].filter(
			(problem) => problem !== undefined,
		)
		if (problems.length > 0) throw new ValidationFailed(problems)
		if (self && changesCredentials) await this.deps.stepUp.requireStepUp(caller)
		// The proof that it is the owner: the current password, or a recent check of this session (an account made through a
		// provider has no password to give).
		if (self && changesCredentials) {
			if (input.currentPassword !== undefined) await this.requireCurrentPassword(input.currentPassword, checked, caller, client)
			else requireRecentAuthentication(caller, this.deps.reauthenticationSeconds)
		}
		const newHash = input.password === undefined ? undefined : await this.deps.hasher.hash(input.password)

		// Every active admin is locked, before the account, only when admins can be affected (see lockActiveAdmins).
		const mayAffectAdmins = checked.role === 'admin' || (callerIsAdmin && (input.role !== undefined || input.status !== undefined))
		const updated = await this.deps.db.transaction(async (tx) => {
			const activeAdmins = mayAffectAdmins ? await lockActiveAdmins(tx) : []
			const current = await lockUser(tx, id)
			if (current.credentialsVersion !== checked.credentialsVersion || (current.role === 'admin' && !mayAffectAdmins))
				throw changedMeanwhile()
			assertMayChange(input, current, callerIsAdmin)
			const role = input.role ?? current.role
			const status = input.status ?? current.status
			const leavesAdmins = current.role === 'admin' && current.status === 'active' && (role !== 'admin' || status !== 'active')
			if (leavesAdmins) ensureAnotherActiveAdmin(activeAdmins, id)

			const deactivating = status === 'deactivated' && current.status !== 'deactivated'
			const appliedEmail = changeWaitsForProof ? current.email : email
			const emailChanges = appliedEmail !== current.email
			const bumpsCredentials = bumpsCredentialsVersion(current, { email: appliedEmail, status }, newHash !== undefined)
			if (changeWaitsForProof) await this.deps.email.onEmailChangeRequested(tx, current, email)
			const [row] = await tx
				.update(users)
				.set({
					email: appliedEmail,
					// An address set by an admin (or with verification off) is not proved; it also ends a pending change.
					emailVerifiedAt: emailChanges ? null : current.emailVerifiedAt,
					pendingEmail: changeWaitsForProof ? email : emailChanges ? null : current.pendingEmail,
					name: input.name,
					role,
					status,
					passwordHash: newHash ?? current.passwordHash,
					metadata: input.metadata ?? current.metadata,
					appMetadata: input.appMetadata ?? current.appMetadata,
					credentialsVersion: bumpsCredentials ? current.credentialsVersion + 1 : current.credentialsVersion,
					updatedAt: new Date(),
					deactivatedAt: status === 'active' ? null : deactivating ? new Date() : current.deactivatedAt,
				})
				.where(eq(users.id, id))
				.returning()
				.catch((error: unknown) => {
					throw translateConstraint(error)
				})
			if (!row) throw new NotFound('No user with this id')
			await recordWebhookEvents(tx, userChangeEvents(current, row, newHash !== undefined))
			// To the address the account had: its owner hears of a change even when the change moved it.
			const changes: WayInChange[] = [
				...(newHash !== undefined ? [{ way: 'password' as const, change: current.passwordHash === null ? ('added' as const) : ('changed' as const) }] : []),
				...(emailChanges ? [{ way: 'email' as const, change: 'changed' as const, label: row.email }] : []),
			]
			await this.deps.notices.queue(tx, current, changes, client)
			await endSessionsAfterChange(tx, id, { deactivating, passwordChanged: newHash !== undefined }, self ? caller.sessionId : undefined)
			return { before: current, row }
		})
		await this.auditChanges(updated.before, updated.row, newHash !== undefined, caller, client)
		return updated.row
	}

	private async auditChanges(before: UserRow, after: UserRow, passwordChanged: boolean, caller: Caller, client: ClientInfo) {
		const { audit } = this.deps
		const who = { actorId: caller.user.id, subjectId: after.id }
		if (passwordChanged) await audit.record('password.changed', client, who)
		if (before.email !== after.email) await audit.record('email.changed', client, who)
		if (after.pendingEmail !== null && after.pendingEmail !== before.pendingEmail) await audit.record('email.change-requested', client, who)
		if (before.role !== after.role) await audit.record('role.changed', client, { ...who, details: { from: before.role, to: after.role } })
		if (before.status !== after.status)
			await audit.record(after.status === 'deactivated' ? 'user.deactivated' : 'status.changed', client, {
				...who,
				details: { from: before.status, to: after.status },
			})
		// Which members changed, never their values (appMetadata's claims go into tokens: who changed them matters).
		for (const [type, member] of [['metadata.changed', 'metadata'], ['app-metadata.changed', 'appMetadata']] as const) {
			const members = changedMembers(before[member], after[member])
			if (members.length) await audit.record(type, client, { ...who, details: { members: members.join(',') } })
		}
	}

	/** Deactivation is a state: sessions revoked at once, email kept, idempotent. */
	async deactivate(id: string, caller: Caller, client: ClientInfo): Promise<UserRow> {
		let changed = false
		const row = await this.deps.db.transaction(async (tx) => {
			const activeAdmins = await lockActiveAdmins(tx)
			const current = await lockUser(tx, id)
			if (current.status === 'deactivated') return current
			changed = true
			if (current.role === 'admin') ensureAnotherActiveAdmin(activeAdmins, id)
			const now = new Date()
			const [row] = await tx
				.update(users)
				.set({ status: 'deactivated', deactivatedAt: now, updatedAt: now, credentialsVersion: current.credentialsVersion + 1 })
				.where(eq(users.id, id))
				.returning()
			if (!row) throw new NotFound('No user with this id')
			await recordWebhookEvents(tx, userChangeEvents(current, row))
			await revokeUserSessions(tx, id, 'deactivated')
			return row
		})
		if (changed) await this.deps.audit.record('user.deactivated', client, { actorId: caller.user.id, subjectId: id })
		return row
	}

	/** What the password policy finds wrong with a password, if anything. */
	passwordProblem(password: string): FieldError | undefined {
		return passwordProblem(password, this.deps.passwordMinLength)
	}

	/** A wrong current password is a failed login of the account: counted toward its lockout, and audited. */
	private async requireCurrentPassword(currentPassword: string, user: UserRow, caller: Caller, client: ClientInfo) {
		const pointer = '#/currentPassword'
		const { passwordChecks } = this.deps
		const attempt = await passwordChecks.reserveAttempt(user.email, client, caller.user.id)
		try {
			// Without a password (an account from an identity provider) no current password is right: recovery sets one.
			if (user.passwordHash && (await this.deps.hasher.verify(currentPassword, user.passwordHash))) return await attempt.succeeded()
			await passwordChecks.recordFailure(attempt, client, {
				email: user.email,
				subjectId: user.id,
				actorId: caller.user.id,
				reason: 'wrong-current-password',
			})
			throw new ValidationFailed([{ pointer, code: 'mismatch', detail: 'is not your current password' }])
		} finally {
			await attempt.release()
		}
	}
}

/** Only admins change a role or a status: sending another value than the account's is 403. */
function assertMayChange(input: ReplaceUserInput, current: UserRow, callerIsAdmin: boolean) {
	if (callerIsAdmin) return
	if (input.role !== undefined && input.role !== current.role) throw new Forbidden('Only admins may change a role')
	if (input.status !== undefined && input.status !== current.status) throw new Forbidden('Only admins may change an account status')
	// The same value, as read (in any key order), is not a change: a client may send back what it read.
	if (input.appMetadata !== undefined && !Bun.deepEquals(input.appMetadata, current.appMetadata)) throw new Forbidden('Only admins may change appMetadata')
}

/**
 * Whether a change of an account changes what signs it in (password, email, status): such a change bumps
 * credentials_version, so that a login checked against the old state starts no session (PUT /users/{id}, and an
 * import's update of an account).
 */
export const bumpsCredentialsVersion = (before: Pick<UserRow, 'email' | 'status'>, after: Pick<UserRow, 'email' | 'status'>, passwordChanged: boolean) =>
	passwordChanged || before.email !== after.email || before.status !== after.status

/**
 * The sessions an admin's change of an account ends, in the change's transaction: all of them when it is
 * deactivated; with a new password every one but `keepSessionId` (whoever knew the old password is logged out).
 */
export async function endSessionsAfterChange(tx: Queryable, userId: string, change: { deactivating: boolean; passwordChanged: boolean }, keepSessionId?: string) {
	if (change.deactivating) await revokeUserSessions(tx, userId, 'deactivated')
	else if (change.passwordChanged) await revokeUserSessions(tx, userId, 'password-changed', keepSessionId)
}

async function lockUser(tx: Queryable, id: string): Promise<UserRow> {
	const [row] = await tx.select().from(users).where(eq(users.id, id)).for('update')
	if (!row) throw new NotFound('No user with this id')
	return row
}

/**
 * Locks every active admin row, in id order and before any other row, so
 * that two admins demoting each other at the same moment queue (never
 * deadlock) and cannot both succeed and leave none.
 */
export async function lockActiveAdmins(tx: Queryable): Promise<string[]> {
	const admins = await tx
		.select({ id: users.id })
		.from(users)
		.where(and(eq(users.role, 'admin'), eq(users.status, 'active')))
		.orderBy(asc(users.id))
		.for('update')
	return admins.map((admin) => admin.id)
}

export function ensureAnotherActiveAdmin(activeAdmins: string[], leavingId: string) {
	if (!activeAdmins.some((id) => id !== leavingId))
		throw new Conflict('last-admin', 'The last active admin can be neither deactivated nor demoted')
}

function translateConstraint(error: unknown): unknown {
	const { code, constraint } = sqlState(error)
	if (code === '23505' && constraint === 'users_email_key')
		return new Conflict('email-taken', 'An account with this email already exists')
	return error
}

// ── listing ──────────────────────────────────────────────────────────────

type Sort = NonNullable<ListUsersQuery['sort']>

/** The top-level members of two JSON objects that were added, removed or changed, sorted. */
function changedMembers(before: Record<string, unknown>, after: Record<string, unknown>): string[] {
	const names = new Set([...Object.keys(before), ...Object.keys(after)])
	return [...names].filter((name) => !Bun.deepEquals(before[name], after[name], true)).sort()
}

function filters(query: ListUsersQuery): Array<SQL | undefined> {
	return [
		query.email === undefined ? undefined : eq(users.email, normalizeEmail(query.email)),
		query.q === undefined
			? undefined
			: or(ilike(users.email, `%${escapeLike(query.q)}%`), ilike(users.name, `%${escapeLike(query.q)}%`)),
		query.role === undefined ? undefined : eq(users.role, query.role),
		query.status === undefined ? undefined : eq(users.status, query.status),
		query.createdAfter === undefined ? undefined : gte(users.createdAt, new Date(query.createdAfter)),
		query.createdBefore === undefined ? undefined : lte(users.createdAt, new Date(query.createdBefore)),
	]
}

function ordering(sort: Sort) {
	const direction = sort.startsWith('-') ? desc : asc
	return sort.endsWith('email') ? [direction(users.email)] : [direction(users.createdAt), direction(users.id)]
}

/** Rows strictly after the cursor in the sort order: a row comparison an index can seek to. */
function afterCursor(sort: Sort, cursor: KeysetCursor): SQL | undefined {
	const descending = sort.startsWith('-')
	if (sort.endsWith('email')) return descending ? lt(users.email, cursor.key) : gt(users.email, cursor.key)
	// Typed casts: postgres.js sends raw parameters untyped, and the row comparison must hit the index.
	const key = sql`(${new Date(cursor.key).toISOString()}::timestamptz, ${cursor.id}::uuid)`
	return descending
		? sql`(${users.createdAt}, ${users.id}) < ${key}`
		: sql`(${users.createdAt}, ${users.id}) > ${key}`
}

const keyIsTime = (sort: Sort) => !sort.endsWith('email')

const encodeCursor = (sort: Sort, row: UserRow) => encodeKeysetCursor(sort, keyIsTime(sort) ? row.createdAt.toISOString() : row.email, row.id)
