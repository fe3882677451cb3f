import { and, asc, eq, inArray, or, sql } from 'drizzle-orm'
import type { DataKeys } from '../../crypto/data-keys'
import { isDatabaseUnavailable, retryingDeadlocks, sqlState, type Database, type Queryable } from '../../db/client'
import { factors, identities, importCheckpoints, users, type UserRow } from '../../db/schema'
import { AppError } from '../../http/problem'
import { HASH_COST_CAPS, readStoredHash, type HashCostCaps } from '../auth/hash-schemes'
import { FACTORS_PER_USER_MAX } from '../factors/service'
import { isEmailAddress, metadataProblems, NAME_MAX_LENGTH, normalizeEmail } from '../users/model'
import { bumpsCredentialsVersion, endSessionsAfterChange, ensureAnotherActiveAdmin, lockActiveAdmins, userChangeEvents } from '../users/service'
import { recordWebhookEvents, type WebhookEvent } from '../webhooks/outbox'
import { importLineProblem, type ImportOutcome, type ImportUser, type OnConflict, type SourceLine } from './model'

/** A provider name as OIDC_PROVIDERS takes it (and POST /users/me/identities). */
const PROVIDER_NAME = /^[a-z][a-z0-9-]{0,31}$/

/** What the writer needs besides the database. */
export interface WriterDeps {
	db: Database
	/** Seals imported TOTP secrets at rest, each bound to its factor row's id (as the factors module does). */
	dataKeys: DataKeys
	/** The caps login reads hashes with: a hash above them would match no password, so it is refused here. */
	hashCaps?: HashCostCaps
}

export interface WriteOptions {
	onConflict: OnConflict
	/** `user.created` (and, for updates, the change's user.* events) into the webhooks outbox, in the batch's transaction. */
	emitEvents: boolean
}

type Outcome = ImportOutcome

/** A line checked and ready to store: the account's row as it would be created, and what the line carries. */
interface Prepared {
	line: number
	user: ImportUser
	/** The account as a new row (its id given or new); for an update, only the members the line carries are applied. */
	row: UserRow
	idGiven: boolean
	identities: Array<typeof identities.$inferInsert>
	totp: Array<typeof factors.$inferInsert>
}

const failed = (line: number, error: string): Outcome => ({ line, status: 'failed', error })

/** Whether a string holds a NUL, which PostgreSQL text and jsonb cannot store. */
const hasNul = (text: string) => text.includes('\u0000')

/**
 * Checks one line as far as it can be without the database, and makes its rows: the schema, then what the schema
 * cannot say (an address sign-up would take, metadata's bounds, a hash Latchkey verifies, provider names, base32
 * secrets), and seals TOTP secrets. A sentence naming the member when the line cannot be stored; never the value
 * of a hash or secret.
 */
export async function prepareLine(source: SourceLine, deps: Pick<WriterDeps, 'dataKeys' | 'hashCaps'>, now = new Date()): Promise<Prepared | Outcome> {
	if (source.error !== undefined) return failed(source.line, source.error)
	const { line, user } = source
	const problem = importLineProblem(user) ?? valueProblem(user, deps.hashCaps ?? HASH_COST_CAPS)
	if (problem) return failed(line, problem)
	const id = user.id?.toLowerCase() ?? Bun.randomUUIDv7()
	const createdAt = user.createdAt === undefined ? now : new Date(user.createdAt)
	const status = user.status ?? 'active'
	const row: UserRow = {
		id,
		email: normalizeEmail(user.email),
		name: user.name ?? '',
		role: user.role ?? 'user',
		status,
		passwordHash: user.passwordHash ?? null,
		credentialsVersion: 0,
		emailVerifiedAt: user.emailVerified ? now : null,
		pendingEmail: null,
		createdAt,
		updatedAt: now,
		deactivatedAt: status === 'deactivated' ? now : null,
		metadata: user.metadata ?? {},
		appMetadata: user.appMetadata ?? {},
	}
	const totp = []
	for (const { name, secret } of user.totpSecrets ?? []) {
		const factorId = Bun.randomUUIDv7()
		const plain = secret.replace(/=+$/, '')
		totp.push({ id: factorId, userId: id, type: 'totp' as const, name, status: 'active' as const, createdAt: now, activatedAt: now, totpSecret: await deps.dataKeys.seal(plain, factorId) })
	}
	return {
		line,
		user,
		row,
		idGiven: user.id !== undefined,
		identities: (user.identities ?? []).map((identity) => ({
			id: Bun.randomUUIDv7(),
			provider: identity.provider,
			subject: identity.subject,
			email: identity.email ?? null,
			userId: id,
			createdAt: identity.createdAt === undefined ? now : new Date(identity.createdAt),
		})),
		totp,
	}
}

/** What the schema cannot check of a line that passed it. */
function valueProblem(user: ImportUser, caps: HashCostCaps): string | undefined {
	const email = normalizeEmail(user.email)
	if (!isEmailAddress(email)) return 'email must be an email address of at most 254 characters, at most 64 of them before the @'
	if (user.name !== undefined && (user.name.length > NAME_MAX_LENGTH || hasNul(user.name))) return `name must be at most ${NAME_MAX_LENGTH} characters, with no NUL character`
	for (const when of [user.createdAt, ...(user.identities ?? []).map((identity) => identity.createdAt)]) {
		const year = when === undefined ? 2000 : new Date(when).getUTCFullYear()
		if (!(year >= 1 && year <= 9999)) return 'createdAt must be a date-time (RFC 3339) between the years 1 and 9999'
	}
	const [metadata] = metadataProblems(user)
	if (metadata) return `${metadata.pointer.slice(2)} ${metadata.detail}`
	for (const member of ['metadata', 'appMetadata'] as const)
		if (user[member] !== undefined && JSON.stringify(user[member]).includes('\\u0000')) return `${member} must not contain NUL characters`
	if (user.passwordHash !== undefined && user.passwordHash !== null) {
		const read = readStoredHash(user.passwordHash, caps)
		if (!read.ok)
			return read.reason === 'too-costly'
				? `passwordHash (${read.scheme}) costs more to verify than Latchkey allows`
				: `passwordHash is not a hash in a scheme Latchkey verifies (read as ${read.scheme}: malformed)`
	}
	const linked = new Set<string>()
	for (const [index, identity] of (user.identities ?? []).entries()) {
		if (!PROVIDER_NAME.test(identity.provider)) return `identities[${index}].provider must be a provider name as in OIDC_PROVIDERS (lower-case letters, digits and -, at most 32)`
		if (hasNul(identity.subject) || (identity.email && hasNul(identity.email))) return `identities[${index}] must not contain NUL characters`
		const key = `${identity.provider}\n${identity.subject}`
		if (linked.has(key)) return `identities[${index}] names the same provider and subject as an earlier identity of this line`
		linked.add(key)
	}
	const secrets = user.totpSecrets ?? []
	if (secrets.length > FACTORS_PER_USER_MAX) return `totpSecrets must hold at most ${FACTORS_PER_USER_MAX} secrets (an account holds at most ${FACTORS_PER_USER_MAX} factors)`
	for (const [index, { name, secret }] of secrets.entries()) {
		if (hasNul(name)) return `totpSecrets[${index}].name must not contain NUL characters`
		// base32 of at least 80 bits (RFC 4226 asks for 128; apps take 80): the pattern allows 16 characters, 80 bits.
		if ((secret.replace(/=+$/, '').length * 5) % 8 >= 5) return `totpSecrets[${index}].secret is not whole base32`
	}
	return undefined
}

const isOutcome = (value: Prepared | Outcome): value is Outcome => 'status' in value

/** Rows of a raw query, whichever driver ran it (postgres.js: an array; PGlite: `{ rows }`). */
function rowsOf<T>(result: unknown): T[] {
	return ((result as { rows?: T[] }).rows ?? (result as T[])) as T[]
}

/**
 * Writes checked lines, in the caller's transaction, and says what became of each (in line order). Lines whose
 * email and id name no account are inserted together (one statement per table, inside a savepoint); if that
 * fails (two lines linking the same identity, one already linked elsewhere) or a line meets an account (existing,
 * or made by an earlier line of the batch), the lines are written one by one, each in its own savepoint, so that
 * only a bad line fails and nothing of it is written.
 */
export async function writeLines(tx: Queryable & Pick<Database, 'transaction'>, lines: Array<Prepared | Outcome>, options: WriteOptions): Promise<Outcome[]> {
	const outcomes = new Map<number, Outcome>()
	const prepared = lines.filter((line): line is Prepared => {
		if (isOutcome(line)) outcomes.set(line.line, line)
		return !isOutcome(line)
	})
	const { fresh, oneByOne, decided, updatable } = await sortOut(tx, prepared, options)
	for (const outcome of decided) outcomes.set(outcome.line, outcome)
	if (updatable.length > 0) {
		try {
			const { updated, left } = await tx.transaction((savepoint) => updateTogether(savepoint, updatable, options))
			for (const outcome of updated) outcomes.set(outcome.line, outcome)
			oneByOne.push(...left)
		} catch (error) {
			if (isDatabaseUnavailable(error)) throw error
			oneByOne.push(...updatable.map(({ line }) => line))
		}
	}
	if (fresh.length > 0) {
		try {
			const inserted = await tx.transaction((savepoint) => insertTogether(savepoint, fresh, options))
			for (const line of fresh) {
				if (inserted.has(line.row.id)) outcomes.set(line.line, { line: line.line, status: 'created', id: line.row.id })
				// Created meanwhile by another import or request: it now meets that account.
				else oneByOne.push(line)
			}
		} catch (error) {
			if (isDatabaseUnavailable(error)) throw error
			oneByOne.push(...fresh)
		}
	}
	for (const line of oneByOne.sort((a, b) => a.line - b.line)) outcomes.set(line.line, await writeOne(tx, line, options))
	return [...outcomes.values()].sort((a, b) => a.line - b.line)
}

/**
 * Which lines can go in together: those whose email and id no account holds and no earlier line of the batch
 * takes. The others meet an account and are written one by one, in line order (as if the file were read a line
 * at a time: the same email twice, and the second meets the account the first made) — except, with `skip`,
 * those that meet an account already there: decided from the lookup (accounts are never deleted), so that
 * running a file again costs one read a batch.
 */
async function sortOut(tx: Queryable, prepared: Prepared[], options: WriteOptions) {
	const fresh: Prepared[] = []
	const oneByOne: Prepared[] = []
	const decided: Outcome[] = []
	const updatable: Array<{ line: Prepared; accountId: string }> = []
	if (prepared.length === 0) return { fresh, oneByOne, decided, updatable }
	const emails = JSON.stringify(prepared.map((line) => line.row.email))
	const ids = JSON.stringify(prepared.filter((line) => line.idGiven).map((line) => line.row.id))
	// A union rather than `or`: each half is an index lookup per value, where `or` would read the whole table.
	const taken = rowsOf<{ id: string; email: string }>(
		await tx.execute(sql`select id::text as id, email from users where email in (select json_array_elements_text(${emails}::json))
			union select id::text as id, email from users where id in (select json_array_elements_text(${ids}::json)::uuid)`),
	)
	const idOfEmail = new Map(taken.map((row) => [row.email, row.id]))
	const takenIds = new Set(taken.map((row) => row.id))
	const claimedEmails = new Set<string>()
	const claimedIds = new Set<string>()
	for (const line of prepared) {
		const { email, id } = line.row
		const byEmail = idOfEmail.get(email)
		const byId = line.idGiven && takenIds.has(id) ? id : undefined
		const accountId = byEmail ?? byId
		// An earlier line of the batch takes this email or id, or meets the same account: this line waits its turn.
		const claimed = claimedEmails.has(email) || claimedIds.has(id) || (accountId !== undefined && claimedIds.has(accountId))
		claimedEmails.add(email)
		claimedIds.add(id)
		if (accountId) claimedIds.add(accountId)
		if (!claimed && accountId && byEmail && byId && byEmail !== byId) decided.push(failed(line.line, 'id and email belong to two different accounts'))
		else if (!claimed && accountId && options.onConflict === 'skip') decided.push({ line: line.line, status: 'skipped', id: accountId })
		else if (!claimed && accountId) updatable.push({ line, accountId })
		else (claimed ? oneByOne : fresh).push(line)
	}
	return { fresh, oneByOne, decided, updatable }
}

/** New accounts with their identities and factors, set-based: the ids of the accounts inserted (one taken meanwhile is left out). */
async function insertTogether(tx: Queryable, lines: Prepared[], options: WriteOptions): Promise<Set<string>> {
	// In email order, so that two imports inserting the same addresses take their index entries in the same order (no deadlock).
	const rows = lines.map(({ row }) => ({
		id: row.id,
		email: row.email,
		name: row.name,
		role: row.role,
		status: row.status,
		password_hash: row.passwordHash,
		email_verified_at: row.emailVerifiedAt,
		created_at: row.createdAt,
		updated_at: row.updatedAt,
		deactivated_at: row.deactivatedAt,
		metadata: row.metadata,
		app_metadata: row.appMetadata,
	}))
	const inserted = rowsOf<{ id: string }>(
		await tx.execute(sql`insert into users (id, email, name, role, status, password_hash, email_verified_at, created_at, updated_at, deactivated_at, metadata, app_metadata)
			select id, email, name, role, status, password_hash, email_verified_at, created_at, updated_at, deactivated_at, metadata, app_metadata
			from json_to_recordset(${JSON.stringify(rows)}::json) as r(id uuid, email text, name text, role text, status text, password_hash text,
				email_verified_at timestamptz, created_at timestamptz, updated_at timestamptz, deactivated_at timestamptz, metadata jsonb, app_metadata jsonb)
			order by email
			on conflict do nothing
			returning id::text as id`),
	)
	const ids = new Set(inserted.map((row) => row.id))
	const kept = lines.filter((line) => ids.has(line.row.id))
	const links = kept.flatMap((line) => line.identities)
	if (links.length > 0)
		await tx.execute(sql`insert into identities (id, provider, subject, email, user_id, created_at)
			select id, provider, subject, email, user_id, created_at
			from json_to_recordset(${JSON.stringify(links.map((link) => ({ id: link.id, provider: link.provider, subject: link.subject, email: link.email, user_id: link.userId, created_at: link.createdAt })))}::json)
				as r(id uuid, provider text, subject text, email text, user_id uuid, created_at timestamptz)`)
	const secrets = kept.flatMap((line) => line.totp)
	if (secrets.length > 0) await tx.insert(factors).values(secrets)
	if (options.emitEvents) await recordWebhookEvents(tx, kept.flatMap((line) => userChangeEvents(null, line.row)))
	return ids
}

/** One line, alone, in a savepoint: created, skipped, updated, or failed with nothing of it written. */
async function writeOne(tx: Pick<Database, 'transaction'>, line: Prepared, options: WriteOptions): Promise<Outcome> {
	try {
		return await tx.transaction((savepoint) => storeOne(savepoint, line, options))
	} catch (error) {
		if (isDatabaseUnavailable(error)) throw error
		return failed(line.line, reasonOf(error))
	}
}

async function storeOne(tx: Queryable, line: Prepared, options: WriteOptions): Promise<Outcome> {
	const { row } = line
	for (let attempt = 0; attempt < 2; attempt++) {
		const found = await tx
			.select()
			.from(users)
			.where(line.idGiven ? or(eq(users.email, row.email), eq(users.id, row.id)) : eq(users.email, row.email))
			.for('update')
		if (found.length > 1) return failed(line.line, 'id and email belong to two different accounts')
		const [current] = found
		if (current) {
			if (options.onConflict === 'skip') return { line: line.line, status: 'skipped', id: current.id }
			await update(tx, current, line, options)
			return { line: line.line, status: 'updated', id: current.id }
		}
		const [created] = await tx.insert(users).values(row).onConflictDoNothing().returning()
		// Taken since the read (another import or request committed it): read again, and meet that account.
		if (!created) continue
		if (line.identities.length > 0) await tx.insert(identities).values(line.identities)
		if (line.totp.length > 0) await tx.insert(factors).values(line.totp)
		if (options.emitEvents) await recordWebhookEvents(tx, userChangeEvents(null, created))
		return { line: line.line, status: 'created', id: created.id }
	}
	return failed(line.line, 'the account changed while it was being imported; import the line again')
}

/** What an update makes of an account: its new row, and what the change means for its sign-ins. */
function updatedRow(current: UserRow, line: Prepared, now: Date) {
	const { user, row } = line
	const status = user.status ?? current.status
	const role = user.role ?? current.role
	const emailChanges = row.email !== current.email
	const passwordChanged = user.passwordHash !== undefined && user.passwordHash !== current.passwordHash
	const deactivating = status === 'deactivated' && current.status !== 'deactivated'
	const after: UserRow = {
		...current,
		email: row.email,
		name: user.name ?? current.name,
		role,
		status,
		passwordHash: user.passwordHash === undefined ? current.passwordHash : user.passwordHash,
		emailVerifiedAt:
			user.emailVerified === undefined ? (emailChanges ? null : current.emailVerifiedAt) : user.emailVerified ? (emailChanges ? now : (current.emailVerifiedAt ?? now)) : null,
		pendingEmail: emailChanges || current.pendingEmail === row.email ? null : current.pendingEmail,
		createdAt: user.createdAt === undefined ? current.createdAt : row.createdAt,
		metadata: user.metadata ?? current.metadata,
		appMetadata: user.appMetadata ?? current.appMetadata,
		credentialsVersion: bumpsCredentialsVersion(current, { email: row.email, status }, passwordChanged) ? current.credentialsVersion + 1 : current.credentialsVersion,
		updatedAt: now,
		deactivatedAt: status === 'active' ? null : deactivating ? now : current.deactivatedAt,
	}
	const leavesAdmins = current.role === 'admin' && current.status === 'active' && (role !== 'admin' || status !== 'active')
	return { after, passwordChanged, deactivating, leavesAdmins }
}

/**
 * `--on-conflict update`: every member the line carries replaces the account's (the password hash included;
 * identities and TOTP secrets carried replace all of the account's). The account keeps its id. A change of email,
 * password hash or status ends sessions as an admin's change does.
 */
async function update(tx: Queryable, current: UserRow, line: Prepared, options: WriteOptions) {
	const { after, passwordChanged, deactivating, leavesAdmins } = updatedRow(current, line, new Date())
	if (leavesAdmins) ensureAnotherActiveAdmin(await lockActiveAdmins(tx), current.id)
	const { id: _, ...changes } = after
	const [stored] = await tx.update(users).set(changes).where(eq(users.id, current.id)).returning()
	if (!stored) throw new Error('the account vanished under its row lock')
	await replaceWaysIn(tx, [{ current, line }])
	await endSessionsAfterChange(tx, current.id, { deactivating, passwordChanged })
	const events: WebhookEvent[] = options.emitEvents ? userChangeEvents(current, stored, passwordChanged) : []
	await recordWebhookEvents(tx, events)
}

/** The identities and TOTP factors the lines carry, in place of their accounts' (lines that carry none leave them). */
async function replaceWaysIn(tx: Queryable, updates: Array<{ current: UserRow; line: Prepared }>) {
	const withIdentities = updates.filter(({ line }) => line.user.identities !== undefined)
	if (withIdentities.length > 0) {
		await tx.delete(identities).where(inArray(identities.userId, withIdentities.map(({ current }) => current.id)))
		const links = withIdentities.flatMap(({ current, line }) => line.identities.map((identity) => ({ ...identity, userId: current.id })))
		if (links.length > 0) await tx.insert(identities).values(links)
	}
	const withSecrets = updates.filter(({ line }) => line.user.totpSecrets !== undefined)
	if (withSecrets.length > 0) {
		await tx.delete(factors).where(and(inArray(factors.userId, withSecrets.map(({ current }) => current.id)), eq(factors.type, 'totp')))
		// Sealed for the line's own new factor ids, which stay; only the owner changes.
		const secrets = withSecrets.flatMap(({ current, line }) => line.totp.map((factor) => ({ ...factor, userId: current.id })))
		if (secrets.length > 0) await tx.insert(factors).values(secrets)
	}
}

/**
 * Updates, set-based, of lines that each meet one account (found by the batch's lookup): the accounts locked in
 * id order, their rows written by one statement, their identities and factors replaced by one each. Returns the
 * lines it did not take (their account changed since the lookup, or the change would leave no active admin),
 * for the one-by-one path.
 */
async function updateTogether(tx: Queryable, lines: Array<{ line: Prepared; accountId: string }>, options: WriteOptions): Promise<{ updated: Outcome[]; left: Prepared[] }> {
	const locked = await tx
		.select()
		.from(users)
		.where(inArray(users.id, lines.map(({ accountId }) => accountId)))
		.orderBy(asc(users.id))
		.for('update')
	const byId = new Map(locked.map((row) => [row.id, row]))
	const now = new Date()
	const taken: Array<{ current: UserRow; line: Prepared; change: ReturnType<typeof updatedRow> }> = []
	const left: Prepared[] = []
	for (const { line, accountId } of lines) {
		const current = byId.get(accountId)
		const stillMeets = current && (current.email === line.row.email || (line.idGiven && current.id === line.row.id))
		const change = current && updatedRow(current, line, now)
		if (current && stillMeets && change && !change.leavesAdmins) taken.push({ current, line, change })
		else left.push(line)
	}
	if (taken.length === 0) return { updated: [], left }
	const rows = taken.map(({ change: { after } }) => ({
		id: after.id,
		email: after.email,
		name: after.name,
		role: after.role,
		status: after.status,
		password_hash: after.passwordHash,
		credentials_version: after.credentialsVersion,
		email_verified_at: after.emailVerifiedAt,
		pending_email: after.pendingEmail,
		created_at: after.createdAt,
		updated_at: after.updatedAt,
		deactivated_at: after.deactivatedAt,
		metadata: after.metadata,
		app_metadata: after.appMetadata,
	}))
	await tx.execute(sql`update users set email = r.email, name = r.name, role = r.role, status = r.status, password_hash = r.password_hash,
			credentials_version = r.credentials_version, email_verified_at = r.email_verified_at, pending_email = r.pending_email,
			created_at = r.created_at, updated_at = r.updated_at, deactivated_at = r.deactivated_at, metadata = r.metadata, app_metadata = r.app_metadata
		from json_to_recordset(${JSON.stringify(rows)}::json) as r(id uuid, email text, name text, role text, status text, password_hash text,
			credentials_version integer, email_verified_at timestamptz, pending_email text, created_at timestamptz, updated_at timestamptz,
			deactivated_at timestamptz, metadata jsonb, app_metadata jsonb)
		where users.id = r.id`)
	await replaceWaysIn(tx, taken)
	for (const { current, change } of taken) await endSessionsAfterChange(tx, current.id, change)
	if (options.emitEvents) await recordWebhookEvents(tx, taken.flatMap(({ current, change }) => userChangeEvents(current, change.after, change.passwordChanged)))
	return { updated: taken.map(({ line, current }) => ({ line: line.line, status: 'updated', id: current.id })), left }
}

/** Why a line could not be written, for its report: the constraint in words, never SQL or a value. */
function reasonOf(error: unknown): string {
	if (error instanceof AppError) return error.message
	const { code, constraint } = sqlState(error)
	if (code === '23505' && constraint === 'identities_provider_subject_key')
		return 'an identity of this line (provider and subject) is already linked to another account'
	if (code === '23505' && constraint === 'users_email_key') return 'the email belongs to another account'
	if (code === '23505' && constraint === 'users_pkey') return 'the id belongs to another account'
	if (code === '23505' && constraint === 'factors_pkey') return 'a factor id was taken; import the line again'
	if (code === '22P05' || code === '22021') return 'a value holds a character PostgreSQL cannot store (NUL)'
	if (code?.startsWith('23')) return `the line breaks a rule of the database (${constraint ?? code})`
	if (code?.startsWith('22')) return `a value of the line is one the database cannot store (SQLSTATE ${code})`
	throw error
}

// ── runs ─────────────────────────────────────────────────────────────────

export interface Counts {
	created: number
	updated: number
	skipped: number
	failed: number
}

export const noCounts = (): Counts => ({ created: 0, updated: 0, skipped: 0, failed: 0 })

export function countInto(counts: Counts, outcomes: Outcome[]) {
	for (const outcome of outcomes) counts[outcome.status]++
	return counts
}

/**
 * Writes one batch in its own transaction, with the run's checkpoint (the last line of the batch, and the counts
 * so far): the two commit together, so a crash leaves the checkpoint exactly at the last batch written. A
 * transaction chosen as a deadlock's victim (two imports of overlapping files) runs again, whole.
 */
export async function writeBatch(
	db: Database,
	lines: Array<Prepared | Outcome>,
	options: WriteOptions,
	checkpoint?: { key: string; lastLine: number; counts: Counts },
): Promise<Outcome[]> {
	return retryingDeadlocks(
		() =>
			db.transaction(async (tx) => {
				const outcomes = await writeLines(tx, lines, options)
				if (checkpoint) {
					const counts = countInto({ ...checkpoint.counts }, outcomes)
					await tx
						.insert(importCheckpoints)
						.values({ key: checkpoint.key, lastLine: checkpoint.lastLine, counts: { ...counts } })
						.onConflictDoUpdate({ target: importCheckpoints.key, set: { lastLine: checkpoint.lastLine, counts: { ...counts }, updatedAt: sql`now()` } })
				}
				return outcomes
			}),
		5,
	)
}

export type { Prepared as PreparedLine }
