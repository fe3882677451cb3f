/**
 * Keycloak: a realm export (`kc.sh export --realm R --users realm_file`: the RealmRepresentation with `users`) or one
 * of its users files (`--users different_files`/`same_file`: `{ realm, users }` in `R-users-N.json`), each user a
 * UserRepresentation with its `credentials` (docs/guides/migrating/keycloak.md).
 */
import { Secret } from 'otpauth'
import { importedHash } from '../../auth/hash-schemes'
import type { ImportSource, ImportUser, SourceOptions } from '../model'
import { jsonListItems, newOutline } from './json-lists'
import { compact, date, defined, flag, LineError, list, object, objectMember, providerName, quoted, readItems, record, requireEmail, SourceFileError, sourceId, text, totpName } from './shared'

const SHAPE = 'a Keycloak realm export, or a users file of one ({ "realm": …, "users": […] })'

/** Realm roles every user has (with `default-roles-<realm>`): Keycloak's defaults, which say nothing about the user. */
const BUILT_IN_ROLES = new Set(['offline_access', 'uma_authorization'])

export const readKeycloak: ImportSource = async function* (file, options) {
	// A first scan checks the whole document (a realm export is mostly the realm's settings, skipped); the second reads the users.
	const outline = newOutline()
	for await (const _ of jsonListItems(file, new Set(), outline, SHAPE));
	// Both a realm export and its users files name the realm: what tells them from another service's `{ users }`.
	if (outline.root !== 'object' || !outline.lists.has('users') || !outline.members.has('realm'))
		throw new SourceFileError(`not a Keycloak export: expected ${SHAPE} (was the realm exported with --users realm_file, same_file or different_files?)`)
	yield* readItems(jsonListItems(file, new Set(['users']), newOutline(), SHAPE), (value) => readUser(record(value), options))
}

function readUser(user: Record<string, unknown>, options: SourceOptions): ImportUser {
	const client = text(user, 'serviceAccountClientId')
	if (client) throw new LineError(`is the service account of the client ${quoted(client)}, not a person: leave it out of the file`)
	const { id, importedFrom } = sourceId('keycloak', user.id)
	const [firstName, lastName, username] = [text(user, 'firstName'), text(user, 'lastName'), text(user, 'username')]
	const attributes = objectMember(user, 'attributes')
	const credentials = list(user, 'credentials').map((value) => {
		const credential = object(value)
		if (!credential) throw new LineError('a credential is not a JSON object')
		return credential
	})
	const realmRoles = list(user, 'realmRoles').filter((role): role is string => typeof role === 'string' && !BUILT_IN_ROLES.has(role) && !role.startsWith('default-roles-'))
	const groups = list(user, 'groups').filter((group) => typeof group === 'string')
	const clientRoles = objectMember(user, 'clientRoles')
	return compact({
		id,
		email: requireEmail(text(user, 'email'), 'Keycloak lets an account have a username only'),
		emailVerified: flag(user, 'emailVerified') ?? false,
		name: [firstName, lastName].filter(Boolean).join(' ') || undefined,
		status: flag(user, 'enabled') === false ? 'deactivated' : 'active',
		createdAt: date(user, 'createdTimestamp'),
		metadata: defined({ username, firstName, lastName, attributes: attributes && Object.keys(attributes).length > 0 ? attributes : undefined }),
		appMetadata: defined({
			roles: realmRoles.length > 0 ? realmRoles : undefined,
			groups: groups.length > 0 ? groups : undefined,
			clientRoles: clientRoles && Object.keys(clientRoles).length > 0 ? clientRoles : undefined,
			importedFrom,
		}),
		passwordHash: passwordOf(credentials),
		identities: list(user, 'federatedIdentities').map((value) => identityOf(value, options)),
		totpSecrets: credentials.filter((credential) => credential.type === 'otp').map(totpOf),
	})
}

function passwordOf(credentials: Record<string, unknown>[]): string | undefined {
	const credential = credentials.find((candidate) => candidate.type === 'password')
	if (!credential) return undefined
	const [secretData, credentialData] = [credential.secretData, credential.credentialData]
	const hash = typeof secretData === 'string' && typeof credentialData === 'string' ? importedHash.keycloak({ secretData, credentialData }) : undefined
	if (hash) return hash
	throw new LineError(`its password credential (${algorithmOf(credentialData)}) is not one Latchkey verifies: pbkdf2-sha256, pbkdf2-sha512, pbkdf2, argon2 (id or i)`)
}

/** The algorithm a password credential names, for a message (never its secret data). */
function algorithmOf(credentialData: unknown): string {
	try {
		const algorithm = object(JSON.parse(String(credentialData)))?.algorithm
		return typeof algorithm === 'string' ? quoted(algorithm) : 'no algorithm'
	} catch {
		return 'unreadable credentialData'
	}
}

function identityOf(value: unknown, options: SourceOptions): NonNullable<ImportUser['identities']>[number] {
	const identity = object(value)
	const provider = identity && text(identity, 'identityProvider')
	const subject = identity && text(identity, 'userId')
	if (!provider || !subject) throw new LineError('a federated identity has no identityProvider or userId')
	return { provider: providerName(provider, options), subject }
}

/**
 * An OTP credential as the user's authenticator app holds it. Keycloak stores the secret as text and gives the app
 * base32 of its UTF-8 bytes (or, with credentialData.secretEncoding BASE32, the text is that base32 already).
 * Latchkey's TOTP is RFC 6238's defaults: another algorithm, length, period or HOTP cannot be kept, and the line
 * fails rather than drop a second factor.
 */
function totpOf(credential: Record<string, unknown>): { name: string; secret: string } {
	const name = totpName(text(credential, 'userLabel'))
	const label = `the OTP credential ${quoted(name)}`
	let secretText: unknown
	let data: Record<string, unknown> | undefined
	try {
		secretText = object(JSON.parse(String(credential.secretData)))?.value
		data = object(JSON.parse(String(credential.credentialData)))
	} catch {
		throw new LineError(`${label} has unreadable secretData or credentialData`)
	}
	if (typeof secretText !== 'string' || secretText === '' || !data) throw new LineError(`${label} has no secret`)
	const subType = data.subType ?? 'totp'
	const [digits, period, algorithm] = [data.digits ?? 6, data.period ?? 30, data.algorithm ?? 'HmacSHA1']
	if (subType !== 'totp') throw new LineError(`${label} is ${quoted(String(subType))}; Latchkey keeps time-based codes (TOTP) only`)
	if (digits !== 6 || period !== 30 || algorithm !== 'HmacSHA1')
		throw new LineError(`${label} makes ${String(digits)}-digit codes every ${String(period)} s with ${quoted(String(algorithm))}; Latchkey's TOTP is 6 digits every 30 s with HmacSHA1, so the app's codes would no longer match`)
	const base32 = typeof data.secretEncoding === 'string' && data.secretEncoding.toUpperCase() === 'BASE32'
	const secret = base32 ? secretText.replace(/[\s=]/g, '').toUpperCase() : new Secret({ buffer: new TextEncoder().encode(secretText).buffer as ArrayBuffer }).base32
	if (!/^[A-Z2-7]{16,128}$/.test(secret)) throw new LineError(`${label}'s secret is not one Latchkey keeps (10 to 80 bytes)`)
	return { name, secret }
}
