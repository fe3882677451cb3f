/**
 * Auth0: the NDJSON of a user export job (`POST /api/v2/jobs/users-exports`, `"format": "json"`), each line with the
 * `passwordHash` of the password hash export joined in (docs/guides/migrating/auth0.md); a line of the password hash
 * export itself (`_id.$oid`, `passwordHash`, `connection`) is read too. Streamed: a line is read as it comes.
 */
import { readStoredHash } from '../../auth/hash-schemes'
import type { ImportSource, ImportUser, SourceOptions } from '../model'
import { compact, date, defined, flag, LineError, list, ndjsonLines, object, objectMember, providerName, quoted, readOne, record, requireEmail, sourceId, text } from './shared'

/** Auth0's own connections: the database (`auth0`) and passwordless by email or SMS — the account's own ways in, not another provider's. */
const OWN_PROVIDERS = new Set(['auth0', 'email', 'sms'])

/** Profile members Auth0 keeps beside user_metadata, carried into metadata (user_metadata wins on a clash). */
const PROFILE = ['given_name', 'family_name', 'nickname', 'picture', 'username', 'phone_number'] as const

export const readAuth0: ImportSource = async function* (file, options) {
	for await (const read of ndjsonLines(file)) {
		if ('error' in read) yield { line: read.line, error: read.error.message }
		else yield readOne(read.value, read.line, (value) => readUser(record(value), options))
	}
}

function readUser(item: Record<string, unknown>, options: SourceOptions): ImportUser {
	const userId = item.user_id !== undefined ? text(item, 'user_id') : hashExportId(item)
	if (!userId) throw new LineError('has no user_id')
	const { id, importedFrom } = sourceId('auth0', userId)
	const profile = Object.fromEntries(PROFILE.flatMap((member) => (item[member] === undefined || item[member] === null ? [] : [[member, item[member]]])))
	const appMetadata = objectMember(item, 'app_metadata') ?? {}
	return compact({
		id,
		email: requireEmail(text(item, 'email') ?? identifierEmail(item), 'a passwordless SMS user, or the export job was not asked for the email field'),
		emailVerified: flag(item, 'email_verified') ?? identifierVerified(item),
		name: text(item, 'name'),
		status: flag(item, 'blocked') ? 'deactivated' : 'active',
		createdAt: date(item, 'created_at'),
		metadata: { ...profile, ...objectMember(item, 'user_metadata') },
		appMetadata: importedFrom ? { ...appMetadata, importedFrom } : appMetadata,
		passwordHash: passwordOf(item),
		identities: identitiesOf(item, userId, options),
	})
}

/** A password hash export line's user id: `auth0|` and its alt_id (a custom database's id) or its MongoDB `_id`. */
function hashExportId(item: Record<string, unknown>): string | undefined {
	const oid = object(item._id)?.$oid
	const alt = typeof item.alt_id === 'string' ? item.alt_id : undefined
	const local = alt ?? (typeof oid === 'string' ? oid : undefined)
	return local ? `auth0|${local}` : undefined
}

/** The password hash export may leave email and email_verified at the root out; `identifiers` then has them. */
const emailIdentifier = (item: Record<string, unknown>) => list(item, 'identifiers').map(object).find((identifier) => identifier?.type === 'email')
const identifierEmail = (item: Record<string, unknown>) => {
	const value = emailIdentifier(item)?.value
	return typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined
}
const identifierVerified = (item: Record<string, unknown>) => {
	const verified = emailIdentifier(item)?.verified
	return typeof verified === 'boolean' ? verified : undefined
}

/** Auth0's database hashes are bcrypt ($2a$/$2b$); anything else cannot be verified here. */
function passwordOf(item: Record<string, unknown>): string | undefined {
	const hash = text(item, 'passwordHash')
	if (hash === undefined) return undefined
	if (!readStoredHash(hash).ok) throw new LineError('passwordHash is not a bcrypt hash Latchkey verifies')
	return hash
}

/**
 * The accounts at other providers: `identities` when exported, else the one user_id names (`google-oauth2|1234`).
 * A social connection is named by its provider (`google-oauth2`), an enterprise one by its connection's name (a tenant
 * may have several of one strategy); the subject is the account's id at that provider (identities[].user_id).
 */
function identitiesOf(item: Record<string, unknown>, userId: string, options: SourceOptions): NonNullable<ImportUser['identities']> {
	const exported = item.identities === undefined ? undefined : list(item, 'identities')
	const entries = exported
		? exported.map((value) => {
				const identity = object(value)
				if (!identity) throw new LineError('an identity is not a JSON object')
				const provider = text(identity, 'provider')
				const subject = identity.user_id === undefined || identity.user_id === null ? undefined : String(identity.user_id)
				if (!provider || !subject) throw new LineError('an identity has no provider or user_id')
				const source = identity.isSocial === false && !OWN_PROVIDERS.has(provider) ? (text(identity, 'connection') ?? provider) : provider
				return { provider, source, subject }
			})
		: [fromUserId(userId)]
	return entries.flatMap(({ provider, source, subject }) =>
		OWN_PROVIDERS.has(provider) || subject === '' ? [] : [defined({ provider: providerName(source, options), subject }) as NonNullable<ImportUser['identities']>[number]],
	)
}

function fromUserId(userId: string) {
	const bar = userId.indexOf('|')
	if (bar <= 0) throw new LineError(`user_id ${quoted(userId)} is not PROVIDER|ID`)
	const provider = userId.slice(0, bar)
	return { provider, source: provider, subject: userId.slice(bar + 1) }
}
