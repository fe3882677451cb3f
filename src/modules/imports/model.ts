import { TypeCompiler } from '@sinclair/typebox/compiler'
import { t } from 'elysia'
import { UUID_PATTERN } from '../../http/ids'

/**
 * Latchkey's own import and export format (API.md, "Metadata, import and export"): one user a line (NDJSON),
 * the user's members as the API shows them, their identities, and with `--with-hashes` the password hash and
 * TOTP secrets. Every other service's export is read into these lines first (./sources), so one writer
 * (./writer.ts) checks and stores them all.
 */
/** POST /user-imports: at most this many users a request (422 beyond), in a body of at most USER_IMPORTS_BODY_LIMIT_BYTES. */
export const USER_IMPORTS_MAX_USERS = 1000
export const USER_IMPORTS_BODY_LIMIT_BYTES = 8 * 1024 * 1024
export const USER_IMPORTS_PATH = '/api/user-imports'

export namespace ImportModel {
	export const identity = t.Object({
		// What GET /users/{id}/identities shows; an export writes it, an import takes a new one.
		id: t.Optional(t.String()),
		provider: t.String({ minLength: 1, description: 'a provider name as in OIDC_PROVIDERS' }),
		subject: t.String({ minLength: 1, maxLength: 255, description: 'the account’s id at the provider (`sub`)' }),
		email: t.Optional(t.Union([t.String(), t.Null()])),
		createdAt: t.Optional(t.String({ format: 'date-time' })),
	})

	export const totpSecret = t.Object({
		name: t.String({ minLength: 1, maxLength: 100 }),
		secret: t.String({ pattern: '^[A-Z2-7]{16,128}=*$', description: 'base32, RFC 6238 defaults (SHA-1, 6 digits, 30 s)' }),
	})

	export const user = t.Object({
		id: t.Optional(t.String({ pattern: UUID_PATTERN, description: 'kept when given; a new UUIDv7 otherwise' })),
		email: t.String({ description: 'an address sign-up would take; stored trimmed and lower-cased' }),
		emailVerified: t.Optional(t.Boolean()),
		name: t.Optional(t.String()),
		role: t.Optional(t.Union([t.Literal('user'), t.Literal('admin')])),
		status: t.Optional(t.Union([t.Literal('active'), t.Literal('deactivated')])),
		createdAt: t.Optional(t.String({ format: 'date-time' })),
		metadata: t.Optional(t.Record(t.String(), t.Unknown())),
		appMetadata: t.Optional(t.Record(t.String(), t.Unknown())),
		identities: t.Optional(t.Array(identity, { maxItems: 100 })),
		passwordHash: t.Optional(t.Union([t.String(), t.Null()], { description: 'a hash in a scheme Latchkey verifies (src/modules/auth/hash-schemes.ts)' })),
		totpSecrets: t.Optional(t.Array(totpSecret, { maxItems: 20 })),
	})

	export const onConflict = t.Union([t.Literal('skip'), t.Literal('update')], { default: 'skip' })

	/** POST /user-imports. */
	export const request = t.Object(
		{
			users: t.Array(user, { minItems: 1, maxItems: USER_IMPORTS_MAX_USERS, description: `up to ${USER_IMPORTS_MAX_USERS} lines of Latchkey’s format (what \`latchkey export\` writes, one object each)` }),
			onConflict: t.Optional(t.Union([t.Literal('skip'), t.Literal('update')], { description: 'for a user whose email or id is already an account: `skip` (the default) leaves it, `update` replaces every member the line carries' })),
			emitEvents: t.Optional(t.Boolean({ description: 'send `user.created` (and for updates their user.* events) to the webhooks; off by default' })),
		},
		{
			additionalProperties: false,
			examples: [
				{
					users: [
						{
							email: 'ada@example.com',
							emailVerified: true,
							name: 'Ada Lovelace',
							passwordHash: '$2b$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy',
							metadata: { theme: 'dark' },
							identities: [{ provider: 'google', subject: '109876543210987654321' }],
						},
					],
					onConflict: 'skip',
				},
			],
		},
	)

	export const outcome = t.Object({
		line: t.Integer({ minimum: 1, description: 'the line (or, in a JSON array, the item) of the input, from 1' }),
		status: t.Union([t.Literal('created'), t.Literal('updated'), t.Literal('skipped'), t.Literal('failed')]),
		id: t.Optional(t.String({ format: 'uuid' })),
		error: t.Optional(t.String({ description: 'why the line failed: a sentence naming the member, never a hash or secret' })),
	})

	export const result = t.Object({ items: t.Array(outcome, { description: 'one per line, in line order' }) })
}

const checkLine = TypeCompiler.Compile(ImportModel.user)

/**
 * What makes a value not a line of Latchkey's format, as a sentence naming the member (the first problem found);
 * undefined for a line the schema takes. Never quotes the value (it may be a hash or a secret).
 */
export function importLineProblem(value: unknown): string | undefined {
	if (checkLine.Check(value)) return undefined
	if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'a line must be a JSON object (one user)'
	const [first] = checkLine.Errors(value)
	if (!first) return 'the line is not a user in Latchkey’s format'
	const member = first.path.slice(1).replace(/\/(\d+)(?=\/|$)/g, '[$1]').replaceAll('/', '.') || 'the line'
	return `${member}: ${first.message.charAt(0).toLowerCase()}${first.message.slice(1)}`
}

/** One user in Latchkey's format. */
export type ImportUser = typeof ImportModel.user.static
export type ImportOutcome = typeof ImportModel.outcome.static
export type OnConflict = 'skip' | 'update'

/**
 * One line of a source, read: the user in Latchkey's format, or why it could not be read (the writer then
 * writes nothing of it). `line` counts from 1: the line of an NDJSON file, the item of a JSON array.
 */
export type SourceLine = { line: number; user: ImportUser; error?: undefined } | { line: number; user?: undefined; error: string }

/** What a source needs besides its file: provider names to rename, and Firebase's project hash parameters. */
export interface SourceOptions {
	/** `--provider SOURCE=NAME`: a source's provider name → the name in OIDC_PROVIDERS. */
	providers: Record<string, string>
	/** Firebase's `auth:import` hash flags (base64 where Firebase gives base64). */
	firebase?: { hashKey: string; saltSeparator: string; rounds: number; memCost: number }
}

/** Reads a service's export file into Latchkey's lines, in order, streaming where the format allows. */
export type ImportSource = (file: Blob, options: SourceOptions) => AsyncIterable<SourceLine>

export const SOURCES = ['latchkey', 'supabase', 'auth0', 'keycloak', 'firebase', 'better-auth'] as const
export type SourceName = (typeof SOURCES)[number]
