/**
 * Better Auth: `{ user: [rows], account: [rows] }`, the rows of its `user` and `account` tables as an SQL export
 * writes them (docs/guides/migrating/better-auth.md). Column names as Better Auth's own schema has them
 * (`emailVerified`) or snake_case as its Drizzle schema generates them (`email_verified`); tables named in the
 * singular or, with `usePlural`, the plural.
 */
import { readStoredHash, importedHash } from '../../auth/hash-schemes'
import type { ImportSource, ImportUser, SourceOptions } from '../model'
import { jsonListItems, newOutline } from './json-lists'
import { compact, date, defined, flag, LineError, object, providerName, readItems, record, requireEmail, SourceFileError, sourceId, text } from './shared'

const SHAPE = '{ "user": [rows of the user table], "account": [rows of the account table] }'

/** The user table's columns read here (or dropped on purpose); any other column goes to appMetadata under its name. */
const KNOWN = new Set(['id', 'name', 'email', 'emailVerified', 'image', 'createdAt', 'updatedAt', 'role', 'banned', 'banReason', 'banExpires', 'twoFactorEnabled'])

/** The column's name as this row has it: camelCase, else snake_case. */
const column = (row: Record<string, unknown>, name: string) => (name in row ? name : name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`))
const camel = (name: string) => name.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase())

export const readBetterAuth: ImportSource = async function* (file, options) {
	// A first scan checks the whole document and gathers the accounts by user; the second reads the users.
	const outline = newOutline()
	const accounts = new Map<string, Record<string, unknown>[]>()
	for await (const item of jsonListItems(file, new Set(['account', 'accounts']), outline, SHAPE)) {
		const account = item.error ? undefined : object(item.value)
		const userId = account?.[column(account, 'userId')]
		if (!account || (typeof userId !== 'string' && typeof userId !== 'number')) continue
		const ofUser = accounts.get(String(userId))
		if (ofUser) ofUser.push(account)
		else accounts.set(String(userId), [account])
	}
	const users = outline.lists.has('user') ? 'user' : outline.lists.has('users') ? 'users' : undefined
	const accountsNotRows = ['account', 'accounts'].some((table) => outline.members.has(table) && !outline.lists.has(table))
	if (outline.root !== 'object' || users === undefined || accountsNotRows) throw new SourceFileError(`not a Better Auth export: expected ${SHAPE}`)
	yield* readItems(jsonListItems(file, new Set([users]), newOutline(), SHAPE), (value) => {
		const row = record(value)
		return readUser(row, accounts.get(String(row.id)) ?? [], options)
	})
}

function readUser(row: Record<string, unknown>, accounts: Record<string, unknown>[], options: SourceOptions): ImportUser {
	const { id, importedFrom } = sourceId('better-auth', row.id)
	const roles = (text(row, 'role') ?? '').split(',').map((role) => role.trim()).filter(Boolean)
	const otherRoles = roles.filter((role) => role !== 'user' && role !== 'admin')
	const extra = Object.fromEntries(Object.entries(row).filter(([name, value]) => !KNOWN.has(camel(name)) && value !== null && value !== undefined))
	const credential = accounts.find((account) => account[column(account, 'providerId')] === 'credential')
	return compact({
		id,
		email: requireEmail(text(row, 'email'), 'an anonymous user'),
		emailVerified: flag(row, column(row, 'emailVerified')) ?? false,
		name: text(row, 'name'),
		// The admin plugin's admin manages users and sessions as Latchkey's admin does.
		role: roles.length === 0 ? undefined : roles.includes('admin') ? 'admin' : 'user',
		status: banned(row) ? 'deactivated' : 'active',
		createdAt: date(row, column(row, 'createdAt'), 'guess'),
		metadata: defined({ image: text(row, 'image') }),
		appMetadata: defined({ ...extra, roles: otherRoles.length > 0 ? otherRoles : undefined, importedFrom }),
		passwordHash: credential ? passwordOf(credential) : undefined,
		identities: accounts.filter((account) => account !== credential).map((account) => identityOf(account, options)),
	})
}

/** The admin plugin's ban: banned, and banExpires (if any) still ahead. */
function banned(row: Record<string, unknown>): boolean {
	if (!flag(row, 'banned')) return false
	const until = date(row, column(row, 'banExpires'), 'guess')
	return until === undefined || Date.parse(until) > Date.now()
}

/** The credential account's password: Better Auth's scrypt `salt:key`, or a bcrypt/argon2 hash an app's own hasher wrote. */
function passwordOf(account: Record<string, unknown>): string | undefined {
	const password = text(account, 'password')
	if (!password) return undefined
	const hash = /^[0-9a-f]+:[0-9a-f]+$/i.test(password) ? importedHash.betterAuth(password) : readStoredHash(password).ok ? password : undefined
	if (!hash) throw new LineError("the credential account's password is not a hash Latchkey verifies (Better Auth's scrypt salt:key, bcrypt or argon2)")
	return hash
}

/** Another provider's account: providerId names it, accountId is the account's id there. */
function identityOf(account: Record<string, unknown>, options: SourceOptions): NonNullable<ImportUser['identities']>[number] {
	const provider = text(account, column(account, 'providerId'))
	const subjectValue = account[column(account, 'accountId')]
	const subject = typeof subjectValue === 'number' ? String(subjectValue) : typeof subjectValue === 'string' ? subjectValue.trim() : ''
	if (!provider || subject === '') throw new LineError('an account has no providerId or accountId')
	return defined({ provider: providerName(provider, options), subject, createdAt: date(account, column(account, 'createdAt'), 'guess') }) as NonNullable<ImportUser['identities']>[number]
}
