/**
 * Firebase: `firebase auth:export users.json --format=json` — `{ users: [UserInfo…] }` — with the project's password
 * hash parameters given as `firebase auth:import` takes them (options.firebase; docs/guides/migrating/firebase.md).
 */
import { importedHash } from '../../auth/hash-schemes'
import type { ImportSource, ImportUser, SourceOptions } from '../model'
import { jsonListItems, newOutline } from './json-lists'
import { compact, date, defined, flag, LineError, list, object, providerName, quoted, readItems, record, requireEmail, SourceFileError, sourceId, text } from './shared'

const SHAPE = 'the JSON of firebase auth:export ({ "users": […] })'

/** Ways in with the account's own email or phone, not another provider's account. */
const OWN_PROVIDERS = new Set(['password', 'phone'])

export const readFirebase: ImportSource = async function* (file, options) {
	// A first scan checks the whole document; the second reads the users.
	const outline = newOutline()
	for await (const _ of jsonListItems(file, new Set(), outline, SHAPE));
	if (outline.root !== 'object' || !outline.lists.has('users')) throw new SourceFileError(`not a Firebase export: expected ${SHAPE}`)
	yield* readItems(jsonListItems(file, new Set(['users']), newOutline(), SHAPE), (value) => readUser(record(value), options))
}

function readUser(user: Record<string, unknown>, options: SourceOptions): ImportUser {
	const { id, importedFrom } = sourceId('firebase', user.localId)
	const claims = customClaims(user)
	return compact({
		id,
		email: requireEmail(text(user, 'email'), 'a phone-number or anonymous account'),
		emailVerified: flag(user, 'emailVerified') ?? false,
		name: text(user, 'displayName'),
		status: flag(user, 'disabled') ? 'deactivated' : 'active',
		createdAt: date(user, 'createdAt'),
		metadata: defined({ photoUrl: text(user, 'photoUrl'), phoneNumber: text(user, 'phoneNumber') }),
		appMetadata: defined({ claims, importedFrom }),
		passwordHash: passwordOf(user, options),
		identities: list(user, 'providerUserInfo').flatMap((value) => identityOf(value, options)),
	})
}

/** customAttributes: the custom claims (JSON text) Firebase puts in ID tokens; Latchkey's are appMetadata.claims. */
function customClaims(user: Record<string, unknown>): Record<string, unknown> | undefined {
	const attributes = text(user, 'customAttributes')
	if (!attributes) return undefined
	let claims: Record<string, unknown> | undefined
	try {
		claims = object(JSON.parse(attributes))
	} catch {
		claims = undefined
	}
	if (!claims) throw new LineError('customAttributes is not a JSON object')
	return Object.keys(claims).length > 0 ? claims : undefined
}

function passwordOf(user: Record<string, unknown>, options: SourceOptions): string | undefined {
	const passwordHash = text(user, 'passwordHash')
	if (!passwordHash) return undefined
	const salt = text(user, 'salt')
	if (!salt) throw new LineError('has a passwordHash but no salt')
	const project = options.firebase
	if (!project)
		throw new LineError(
			"has a password, and the project's hash parameters were not given: --hash-key, --salt-separator, --rounds and --mem-cost (Firebase console → Authentication → Users → ⋮ → Password hash parameters)",
		)
	const hash = importedHash.firebase({ signerKey: project.hashKey, saltSeparator: project.saltSeparator, rounds: project.rounds, memCost: project.memCost }, { passwordHash, salt })
	if (!hash) throw new LineError("its passwordHash and salt, with the hash parameters given, are not a Firebase scrypt hash Latchkey verifies (check --hash-key, --salt-separator, --rounds, --mem-cost)")
	return hash
}

/** A provider account: Google, Apple, GitHub… (`google.com` → `google`), OIDC and SAML providers (`oidc.acme` → `oidc-acme`). */
function identityOf(value: unknown, options: SourceOptions): NonNullable<ImportUser['identities']> {
	const info = object(value)
	const providerId = info && text(info, 'providerId')
	if (!info || !providerId) throw new LineError('a providerUserInfo entry has no providerId')
	if (OWN_PROVIDERS.has(providerId)) return []
	const subject = text(info, 'rawId')
	if (!subject) throw new LineError(`the ${quoted(providerId)} provider account has no rawId`)
	return [defined({ provider: providerName(providerId, options), subject, email: text(info, 'email') }) as NonNullable<ImportUser['identities']>[number]]
}
