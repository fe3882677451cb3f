/**
 * Supabase (GoTrue): a JSON array of `auth.users` rows, or `{ users, identities, mfa_factors }` with rows of those
 * three tables (docs/guides/migrating/supabase.md). Rows as `row_to_json` writes them: jsonb members as objects,
 * timestamps as text.
 */
import { readStoredHash } from '../../auth/hash-schemes'
import type { ImportSource, ImportUser, SourceOptions } from '../model'
import { jsonListItems, newOutline, ROOT } from './json-lists'
import { compact, date, defined, LineError, object, objectMember, providerName, quoted, readItems, record, requireEmail, SourceFileError, sourceId, text, totpName } from './shared'

const SHAPE = 'a JSON array of auth.users rows, or { "users": […], "identities": […], "mfa_factors": […] }'

/** GoTrue's bookkeeping in raw_app_meta_data, rewritten at each sign-in; Latchkey keeps identities as identities. */
const BOOKKEEPING = new Set(['provider', 'providers'])

/** Identities that are ways of signing in with the account's own email or phone, not another provider's account. */
const OWN_PROVIDERS = new Set(['email', 'phone'])

export const readSupabase: ImportSource = async function* (file, options) {
	// A first scan checks the whole document and gathers the identities and factors by user; the second reads the users.
	const outline = newOutline()
	const identities = new Map<string, Record<string, unknown>[]>()
	const factors = new Map<string, Record<string, unknown>[]>()
	for await (const item of jsonListItems(file, new Set(['identities', 'mfa_factors']), outline, SHAPE)) {
		if (!item.error) addByUser(item.list === 'identities' ? identities : factors, item.value)
	}
	const users = outline.root === 'array' ? ROOT : outline.lists.has('users') ? 'users' : undefined
	if (users === undefined) throw new SourceFileError(`not a Supabase export: expected ${SHAPE}`)
	for (const table of ['identities', 'mfa_factors']) {
		if (outline.members.has(table) && !outline.lists.has(table)) throw new SourceFileError(`not a Supabase export: ${table} is not a list of rows`)
	}
	yield* readItems(jsonListItems(file, new Set([users]), newOutline(), SHAPE), (row) => readUser(record(row), identities, factors, options))
}

/** A row kept under its user_id (a row of no user, or not an object, is left out). */
function addByUser(grouped: Map<string, Record<string, unknown>[]>, value: unknown) {
	const row = object(value)
	const userId = row?.user_id
	if (!row || typeof userId !== 'string') return
	const key = userId.toLowerCase()
	const rowsOfUser = grouped.get(key)
	if (rowsOfUser) rowsOfUser.push(row)
	else grouped.set(key, [row])
}

function readUser(row: Record<string, unknown>, identities: Map<string, Record<string, unknown>[]>, factors: Map<string, Record<string, unknown>[]>, options: SourceOptions): ImportUser {
	const { id, importedFrom } = sourceId('supabase', row.id)
	const email = requireEmail(text(row, 'email'), row.is_anonymous === true ? 'an anonymous user' : 'a phone-only or anonymous user')
	const metadata = objectMember(row, 'raw_user_meta_data') ?? {}
	const appMetadata = Object.fromEntries(Object.entries(objectMember(row, 'raw_app_meta_data') ?? {}).filter(([key]) => !BOOKKEEPING.has(key)))
	const key = typeof row.id === 'string' ? row.id.toLowerCase() : undefined
	return compact({
		id,
		email,
		emailVerified: date(row, 'email_confirmed_at') !== undefined,
		name: nameOf(metadata),
		status: deactivated(row) ? 'deactivated' : 'active',
		createdAt: date(row, 'created_at'),
		metadata,
		appMetadata: importedFrom ? { ...appMetadata, importedFrom } : appMetadata,
		passwordHash: passwordOf(row),
		identities: (key ? (identities.get(key) ?? []) : []).flatMap((identity) => identityOf(identity, options)),
		totpSecrets: (key ? (factors.get(key) ?? []) : []).flatMap(totpOf),
	})
}

/** As Supabase's own dashboard shows it: full_name, else name. */
function nameOf(metadata: Record<string, unknown>): string | undefined {
	for (const member of ['full_name', 'name']) {
		const value = metadata[member]
		if (typeof value === 'string' && value.trim() !== '') return value.trim()
	}
	return undefined
}

/** Banned (banned_until still ahead, or 'infinity') or soft-deleted (deleted_at): Supabase refuses their sign-in. */
function deactivated(row: Record<string, unknown>): boolean {
	if (date(row, 'deleted_at') !== undefined) return true
	if (row.banned_until === 'infinity') return true
	const until = date(row, 'banned_until')
	return until !== undefined && Date.parse(until) > Date.now()
}

/** encrypted_password: GoTrue's bcrypt, or an argon2 PHC string imported into Supabase; '' for accounts with none. */
function passwordOf(row: Record<string, unknown>): string | undefined {
	const hash = text(row, 'encrypted_password')
	if (hash === undefined) return undefined
	if (!readStoredHash(hash).ok) throw new LineError('encrypted_password is not a hash Latchkey verifies (bcrypt or argon2)')
	return hash
}

function identityOf(row: Record<string, unknown>, options: SourceOptions): NonNullable<ImportUser['identities']> {
	const provider = text(row, 'provider')
	if (!provider) throw new LineError('an identity has no provider')
	if (OWN_PROVIDERS.has(provider)) return []
	const data = objectMember(row, 'identity_data') ?? {}
	// provider_id since GoTrue 2.x's identities migration; identity_data.sub before (and always for OAuth providers).
	const subject = text(row, 'provider_id') ?? (typeof data.sub === 'string' && data.sub.trim() !== '' ? data.sub.trim() : undefined)
	if (!subject) throw new LineError(`the ${quoted(provider)} identity has neither provider_id nor identity_data.sub`)
	const email = typeof data.email === 'string' && data.email !== '' ? data.email : text(row, 'email')
	return [defined({ provider: providerName(provider, options), subject, email, createdAt: date(row, 'created_at') }) as NonNullable<ImportUser['identities']>[number]]
}

/** A verified TOTP factor; unverified ones were never finished, and phone and WebAuthn factors have no TOTP secret. */
function totpOf(row: Record<string, unknown>): NonNullable<ImportUser['totpSecrets']> {
	if (row.factor_type !== 'totp' || row.status !== 'verified') return []
	const name = totpName(text(row, 'friendly_name'))
	const secret = text(row, 'secret')?.toUpperCase()
	if (!secret) throw new LineError(`the TOTP factor ${quoted(name)} has no secret`)
	// GoTrue's base32 secret; with GOTRUE_SECURITY_DB_ENCRYPTION the column holds an encrypted JSON document instead.
	if (!/^[A-Z2-7]{16,128}=*$/.test(secret)) throw new LineError(`the TOTP factor ${quoted(name)}'s secret is not base32 (encrypted by GOTRUE_SECURITY_DB_ENCRYPTION?); decrypt it before the import`)
	return [{ name, secret }]
}
