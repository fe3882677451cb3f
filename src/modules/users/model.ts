import { Value } from '@sinclair/typebox/value'
import { t } from 'elysia'
import { AccountId, Id, IssuedId } from '../../http/ids'
import { queryDateTime, queryInteger } from '../../http/problem'
import type { UserRow } from '../../db/schema'
import type { FieldError } from '../../http/problem'

const Role = t.Union([t.Literal('user'), t.Literal('admin')])
const Status = t.Union([t.Literal('active'), t.Literal('deactivated')])
// RFC 5321 limits: 254 characters in all (a path of 256 less its angle brackets), 64 before the @.
export const Email = t.String({
	format: 'email',
	maxLength: 254,
	pattern: '^(?![^@]{65})',
	description: 'an email address of at most 254 characters, at most 64 of them before the @ (RFC 5321)',
	error: 'must be an email address',
	'x-pattern-error': 'must have at most 64 characters before the @',
	examples: ['ada@example.com'],
})
/**
 * Whether a value from outside (a provider's claim, an imported line) is an address sign-up would take:
 * the same schema, so the two can never disagree.
 */
export const normalizeEmail = (email: string) => email.trim().toLowerCase()

export const isEmailAddress = (value: string) => Value.Check(Email, value)
export const NAME_MAX_LENGTH = 200
const Name = t.String({ maxLength: NAME_MAX_LENGTH, examples: ['Ada Lovelace'] })
/**
 * What the database can hold, and so what a response may carry: the `users` check constraints keep it
 * trimmed, lower-cased and non-empty, not a well-formed address. Rows written by older versions or
 * imported may hold any such string, and no response may fail its own schema over one (API.md).
 */
const StoredEmail = t.String({
	minLength: 1,
	description: 'trimmed and lower-cased; what sign-up and every writer accept is an email address (see POST /users), but older or imported rows are shown as stored',
	examples: ['ada@example.com'],
})
// The policy (8–256 code points, not a common password) is checked by the service, which counts
// code points rather than UTF-16 units; the body limit bounds the input.
export const Password = t.String({
	description: 'at least PASSWORD_MIN_LENGTH (default 8) and at most 256 characters; common passwords are refused',
	examples: ['correct horse battery staple'],
})
/** Bounds of `metadata` and `appMetadata` (API.md: ≤ 8 KiB), checked by `metadataProblems`: a schema cannot count bytes. */
export const METADATA_MAX_BYTES = 8 * 1024
export const METADATA_MAX_DEPTH = 16
const metadataLimits = `a JSON object of at most ${METADATA_MAX_BYTES} bytes as compact JSON in UTF-8, nested at most ${METADATA_MAX_DEPTH} levels deep`
const APP_METADATA_DESCRIPTION = `data only admins change (${metadataLimits}). Its \`claims\` member, an object, is copied into the account's access tokens and the provider's ID and access tokens from their next issuance (a refresh), under its own names — never those the service sets (\`iss\`, \`sub\`, \`aud\`, \`exp\`, \`nbf\`, \`iat\`, \`jti\`, \`sid\`, \`typ\`, \`scope\`, \`client_id\`, \`auth_time\`, \`acr\`, \`amr\`, \`aal\`, \`role\`, \`org\`, \`organizations\`, \`nonce\`, \`azp\`, \`at_hash\`, \`c_hash\`, \`s_hash\`, \`cnf\`), which are left out of the copy.`
const jsonObject = (description: string, example: Record<string, unknown>) =>
	t.Record(t.String(), t.Unknown(), { description, error: 'must be a JSON object', examples: [example] })
const Metadata = (more = '') => jsonObject(`the account's own data, which the user may change: ${metadataLimits}${more}`, { theme: 'dark' })
const AppMetadata = (more = '') => jsonObject(`${APP_METADATA_DESCRIPTION}${more}`, { plan: 'pro', claims: { tenant: 'acme' } })
const Timestamp = t.String({ format: 'date-time', examples: ['2026-01-01T12:00:00.000Z'] })

/** Up to how many matching accounts `count` counts them one by one (API.md, "Admin console"); beyond, it estimates. */
export const EXACT_COUNT_LIMIT = 10_000

// A tuple of literals, so that the static type is their union (a mapped array types as string).
const Sort = t.Union([t.Literal('createdAt'), t.Literal('-createdAt'), t.Literal('email'), t.Literal('-email')], { default: '-createdAt' })

export namespace UserModel {
	export const user = t.Object(
		{
			id: IssuedId(),
			email: StoredEmail,
			name: t.String(),
			role: Role,
			status: Status,
			createdAt: Timestamp,
			updatedAt: Timestamp,
			deactivatedAt: t.Union([Timestamp, t.Null()]),
			emailVerified: t.Boolean({ description: 'whether the owner proved the address (a link or code from a mail to it)' }),
			pendingEmail: t.Union([StoredEmail, t.Null()], {
				description: 'the new address of the user’s own email change, until it is confirmed from a mail to it',
			}),
			metadata: Metadata(),
			appMetadata: AppMetadata(),
		},
		{ description: 'A user account. Never carries a password or a hash.' },
	)

	export const create = t.Object({
		email: Email,
		password: Password,
		name: t.Optional(Name),
		role: t.Optional(Role),
		metadata: t.Optional(Metadata()),
		appMetadata: t.Optional(AppMetadata(' Only admins may set it at sign-up: anyone else sending it gets 403.')),
	})

	/** PUT replaces the editable representation. */
	export const replace = t.Object({
		email: Email,
		name: Name,
		password: t.Optional(Password),
		currentPassword: t.Optional(t.String({ description: 'when users change their own email or password: required unless this session was signed in or checked within REAUTHENTICATION_SECONDS' })),
		role: t.Optional(Role),
		status: t.Optional(Status),
		metadata: t.Optional(Metadata('; omitted: unchanged')),
		appMetadata: t.Optional(AppMetadata(' Omitted: unchanged; a non-admin sending another value than the current one gets 403.')),
	})

	export const idParams = t.Object({ id: AccountId })

	export const listQuery = t.Object(
		{
			limit: t.Optional(queryInteger('limit', { minimum: 1, maximum: 100, default: 20 })),
			cursor: t.Optional(t.String({ maxLength: 512, description: 'opaque, from `nextCursor`' })),
			email: t.Optional(t.String({ maxLength: 254, description: 'exact match' })),
			q: t.Optional(t.String({ minLength: 1, maxLength: 200, description: 'case-insensitive substring of email or name' })),
			role: t.Optional(Role),
			status: t.Optional(Status),
			createdAfter: t.Optional(queryDateTime()),
			createdBefore: t.Optional(queryDateTime()),
			sort: t.Optional(Sort),
			count: t.Optional(
				t.Union([t.Literal('estimated'), t.Literal('exact')], {
					description: `adds the total of the accounts that match (\`data.total\`, \`X-Total-Count\`). \`exact\` counts them while there are at most ${EXACT_COUNT_LIMIT.toLocaleString('en')}, and estimates beyond; \`estimated\` takes PostgreSQL's planner estimate, counting only when that estimate is at most ${EXACT_COUNT_LIMIT.toLocaleString('en')}: as fast at a million accounts as at ten. \`data.totalExact\` says which it is.`,
				}),
			),
		},
		{ additionalProperties: false },
	)

	export const page = t.Object({
		items: t.Array(user),
		nextCursor: t.Union([t.String(), t.Null()]),
		limit: t.Integer(),
		total: t.Optional(t.Integer({ minimum: 0, description: 'with `count`: how many accounts match the query in all' })),
		totalExact: t.Optional(t.Boolean({ description: 'with `count`: whether `total` was counted (true) or is the planner’s estimate (false)' })),
	})

	export const session = t.Object({
		id: IssuedId(),
		createdAt: Timestamp,
		lastUsedAt: Timestamp,
		expiresAt: Timestamp,
		revokedAt: t.Union([Timestamp, t.Null()]),
		ip: t.Union([t.String(), t.Null()]),
		userAgent: t.Union([t.String(), t.Null()]),
		current: t.Boolean({ description: 'whether this is the session of the token making the request' }),
		organization: t.Optional(
			t.Union(
				[
					t.Object({
						id: IssuedId(),
						slug: t.String({ examples: ['acme'] }),
						roles: t.Array(t.String(), { examples: [['admin']] }),
						permissions: t.Array(t.String(), { examples: [['invitations:manage', 'members:manage']] }),
					}),
					t.Null(),
				],
				{
					description:
						'on the current session, when the request’s access token carries an `org` claim: that organization as the membership is now — its current slug, roles and permissions; `null` when it no longer holds (member removed, organization deactivated). Absent otherwise.',
				},
			),
		),
	})

	export const sessionParams = t.Object({
		id: AccountId,
		sessionId: Id(),
	})
}

export type UserResource = typeof UserModel.user.static
export type CreateUserInput = typeof UserModel.create.static
export type ReplaceUserInput = typeof UserModel.replace.static
export type ListUsersQuery = typeof UserModel.listQuery.static
export type SessionResource = typeof UserModel.session.static

/** An account as the API shows it (in sign-ins, events and the users routes alike). */
export function toUserResource(row: UserRow): UserResource {
	return {
		id: row.id,
		email: row.email,
		name: row.name,
		role: row.role,
		status: row.status,
		createdAt: row.createdAt.toISOString(),
		updatedAt: row.updatedAt.toISOString(),
		deactivatedAt: row.deactivatedAt?.toISOString() ?? null,
		emailVerified: row.emailVerifiedAt !== null,
		pendingEmail: row.pendingEmail,
		metadata: row.metadata,
		appMetadata: row.appMetadata,
	}
}

/** How deep a JSON value nests: 0 for a scalar, 1 for an object or array of scalars. */
function depthOf(value: unknown): number {
	if (typeof value !== 'object' || value === null) return 0
	let deepest = 0
	for (const member of Object.values(value)) deepest = Math.max(deepest, depthOf(member))
	return deepest + 1
}

/**
 * What the bounds of `metadata` and `appMetadata` find wrong with a body's (objects only: anything else is the
 * schema's to refuse). The size is the compact JSON serialization's, in UTF-8 bytes, as a client can measure it.
 */
export function metadataProblems(body: { metadata?: unknown; appMetadata?: unknown }): FieldError[] {
	const problems: FieldError[] = []
	for (const member of ['metadata', 'appMetadata'] as const) {
		const value = body[member]
		if (typeof value !== 'object' || value === null || Array.isArray(value)) continue
		const bytes = Buffer.byteLength(JSON.stringify(value), 'utf8')
		if (bytes > METADATA_MAX_BYTES)
			problems.push({ pointer: `#/${member}`, code: 'maxSize', detail: `must be at most ${METADATA_MAX_BYTES} bytes as JSON (UTF-8); this is ${bytes}` })
		else if (depthOf(value) > METADATA_MAX_DEPTH)
			problems.push({ pointer: `#/${member}`, code: 'maxDepth', detail: `must nest at most ${METADATA_MAX_DEPTH} levels deep` })
	}
	return problems
}
