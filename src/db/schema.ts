import { sql } from 'drizzle-orm'
import { bigint, boolean, check, index, integer, jsonb, pgTable, primaryKey, smallint, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core'

// IDs are UUIDv7 made by the application (Bun.randomUUIDv7), so PostgreSQL 15 and
// the embedded PGlite (PostgreSQL 18) behave the same.
const timestamps = {
	createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
	updatedAt: timestamp('updated_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
}

export const users = pgTable(
	'users',
	{
		id: uuid('id').primaryKey(),
		// Stored trimmed and lower-cased; the check keeps every writer honest.
		email: text('email').notNull(),
		name: text('name').notNull().default(''),
		role: text('role', { enum: ['user', 'admin'] }).notNull().default('user'),
		status: text('status', { enum: ['active', 'deactivated'] }).notNull().default('active'),
		// Null for an account created through an identity provider, until recovery by email sets a password.
		passwordHash: text('password_hash'),
		// Bumped by every change of what signs the user in (password, email, status), so that a login
		// that verified against an older state cannot start a session after the change (compare-and-swap).
		credentialsVersion: integer('credentials_version').notNull().default(0),
		// When the current email was proved (a token or code from a mail to it); null: not proved.
		emailVerifiedAt: timestamp('email_verified_at', { withTimezone: true, precision: 3 }),
		// A user's own email change waits here until the new address confirms it.
		pendingEmail: text('pending_email'),
		...timestamps,
		deactivatedAt: timestamp('deactivated_at', { withTimezone: true, precision: 3 }),
		// The user's own data, and the data only admins write (its `claims` go into tokens): JSON objects (API.md).
		metadata: jsonb('metadata').$type<Record<string, unknown>>().notNull().default({}),
		appMetadata: jsonb('app_metadata').$type<Record<string, unknown>>().notNull().default({}),
	},
	(table) => [
		uniqueIndex('users_email_key').on(table.email),
		// Keyset pagination on the default sort: (created_at, id) in either direction.
		index('users_created_at_id_idx').on(table.createdAt, table.id),
		index('users_role_created_at_idx').on(table.role, table.createdAt, table.id),
		// Trigram indexes: `q` (a substring of email or name) without reading every row.
		index('users_email_trgm_idx').using('gin', sql`${table.email} gin_trgm_ops`),
		index('users_name_trgm_idx').using('gin', sql`${table.name} gin_trgm_ops`),
		check('users_email_normalised', sql`${table.email} = lower(btrim(${table.email})) and ${table.email} <> ''`),
		check('users_pending_email_normalised', sql`${table.pendingEmail} = lower(btrim(${table.pendingEmail})) and ${table.pendingEmail} <> ${table.email}`),
		check('users_role_valid', sql`${table.role} in ('user', 'admin')`),
		check('users_status_valid', sql`${table.status} in ('active', 'deactivated')`),
		check('users_metadata_object', sql`jsonb_typeof(${table.metadata}) = 'object'`),
		check('users_app_metadata_object', sql`jsonb_typeof(${table.appMetadata}) = 'object'`),
		check(
			'users_deactivated_at_matches_status',
			sql`(${table.status} = 'deactivated') = (${table.deactivatedAt} is not null)`,
		),
	],
)

export const sessions = pgTable(
	'sessions',
	{
		id: uuid('id').primaryKey(),
		userId: uuid('user_id')
			.notNull()
			.references(() => users.id),
		createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
		lastUsedAt: timestamp('last_used_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
		expiresAt: timestamp('expires_at', { withTimezone: true, precision: 3 }).notNull(),
		ip: text('ip'),
		userAgent: text('user_agent'),
		revokedAt: timestamp('revoked_at', { withTimezone: true, precision: 3 }),
		// Access tokens (by jti) of pairs replaced by a refresh retry inside the grace interval.
		supersededAccessTokenIds: text('superseded_access_token_ids').array().notNull().default(sql`'{}'::text[]`),
		// How the session was established (RFC 8176 methods) and the assurance level that gives; tokens carry both.
		amr: text('amr').array().notNull().default(sql`'{pwd}'::text[]`),
		aal: text('aal', { enum: ['aal1', 'aal2'] }).notNull().default('aal1'),
		// MFA_REQUIRED applies and the account had no factor: the session serves only enrolment.
		enrollmentOnly: boolean('enrollment_only').notNull().default(false),
		// The last sign-in or check of this session (the tokens' auth_time): adding a way in needs a recent one.
		authenticatedAt: timestamp('authenticated_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
		// The OAuth client whose authorization request started the session (its `client_id`), if one did.
		clientId: text('client_id'),
		// SHA-256 of the opaque value of the browser cookie `__Host-latchkey-session` (a session made at the pages).
		browserTokenHash: text('browser_token_hash'),
		// The organization this session's access tokens speak for (`org` claim), chosen at a refresh; null: none.
		activeOrganizationId: uuid('active_organization_id').references(() => organizations.id),
	},
	(table) => [
		uniqueIndex('sessions_browser_token_hash_key').on(table.browserTokenHash),
		index('sessions_user_id_idx').on(table.userId, table.createdAt),
		// When a session ended (revoked or expired; for a live one, its expiry), oldest first: the purge walks it.
		index('sessions_ended_at_idx').on(sql`least(${table.revokedAt}, ${table.expiresAt})`),
	],
)

/**
 * Every refresh token ever issued, by hash only. Keeping the rotated ones is
 * what lets a replay of any old token be recognised as reuse (RFC 9700 §4.14).
 */
export const refreshTokens = pgTable(
	'refresh_tokens',
	{
		id: uuid('id').primaryKey(),
		sessionId: uuid('session_id')
			.notNull()
			.references(() => sessions.id),
		tokenHash: text('token_hash').notNull(),
		parentId: uuid('parent_id'),
		// jti of the access token issued together with this refresh token.
		accessTokenId: text('access_token_id'),
		createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
		// Set when the token is exchanged (rotated) or superseded; null while it is the live one.
		rotatedAt: timestamp('rotated_at', { withTimezone: true, precision: 3 }),
	},
	(table) => [
		uniqueIndex('refresh_tokens_token_hash_key').on(table.tokenHash),
		index('refresh_tokens_session_id_idx').on(table.sessionId),
	],
)

/**
 * Security events, append-only (a trigger refuses UPDATE and DELETE). The id
 * is a UUIDv7, so ordering by id is ordering by time: keyset pagination needs
 * no second column. Never holds a password, token or hash.
 */
export const auditEvents = pgTable(
	'audit_events',
	{
		id: uuid('id').primaryKey(),
		occurredAt: timestamp('occurred_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
		type: text('type').notNull(),
		actorId: uuid('actor_id'),
		subjectId: uuid('subject_id'),
		ip: text('ip'),
		userAgent: text('user_agent'),
		requestId: text('request_id'),
		details: jsonb('details').$type<Record<string, string | number | boolean | null>>().notNull().default({}),
	},
	(table) => [
		index('audit_events_subject_idx').on(table.subjectId, table.id),
		index('audit_events_actor_idx').on(table.actorId, table.id),
		index('audit_events_type_idx').on(table.type, table.id),
	],
)

/**
 * One-time proofs sent by mail: a link token (≥ 256 bits) and a 6-digit code,
 * both stored only as SHA-256 hashes. A row is live while neither used nor
 * voided nor expired; a new one of a purpose for a user voids the older ones.
 */
export const emailTokens = pgTable(
	'email_tokens',
	{
		id: uuid('id').primaryKey(),
		userId: uuid('user_id')
			.notNull()
			.references(() => users.id),
		purpose: text('purpose', { enum: ['verification', 'recovery', 'email-change', 'reauthentication', 'sign-in'] }).notNull(),
		// The address the mail went to: the account's email, or for a change the new one.
		email: text('email').notNull(),
		tokenHash: text('token_hash').notNull(),
		codeHash: text('code_hash').notNull(),
		// No longer written: a code's wrong tries are counted in code_failures (a wrong code writes the same one
		// row whether its address has a live code or not). Kept until a migration drops it.
		codeAttempts: integer('code_attempts').notNull().default(0),
		createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
		expiresAt: timestamp('expires_at', { withTimezone: true, precision: 3 }).notNull(),
		usedAt: timestamp('used_at', { withTimezone: true, precision: 3 }),
		voidedAt: timestamp('voided_at', { withTimezone: true, precision: 3 }),
	},
	(table) => [
		uniqueIndex('email_tokens_token_hash_key').on(table.tokenHash),
		index('email_tokens_user_purpose_idx').on(table.userId, table.purpose),
		index('email_tokens_email_idx').on(table.email, table.purpose),
		check('email_tokens_purpose_valid', sql`${table.purpose} in ('verification', 'recovery', 'email-change', 'reauthentication', 'sign-in')`),
	],
)

/**
 * Wrong codes typed for mailed proofs (API.md "Codes by mail"): one row per wrong code, kept 24 hours.
 * At most 10 count per subject and kind in any 24 hours (then the code path answers 429 too-many-codes),
 * so a subject gains at most 10 rows a day. `kind` is what the codes prove (`verification`,
 * `recovery`); `subject` is the SHA-256 of the normalised address the code was typed for, whether an
 * account has it or not, so an unknown address is counted and refused alike.
 */
export const codeFailures = pgTable(
	'code_failures',
	{
		id: uuid('id').primaryKey(),
		kind: text('kind').notNull(),
		subject: text('subject').notNull(),
		createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
	},
	(table) => [index('code_failures_subject_idx').on(table.subject, table.kind, table.createdAt), index('code_failures_created_idx').on(table.createdAt)],
)

/**
 * The service's one background-job queue (mail now, webhooks next). Workers on
 * every instance claim due jobs with FOR UPDATE SKIP LOCKED and hold a short
 * lease, renewed while they run one; a job whose worker died is claimed again
 * when its lease ends. A finished job keeps no payload (a mail's payload holds its link).
 */
export const jobs = pgTable(
	'jobs',
	{
		id: uuid('id').primaryKey(),
		queue: text('queue').notNull(),
		payload: jsonb('payload').$type<Record<string, unknown>>(),
		// Jobs that must not repeat within an interval (one mail of a kind per address) share a key.
		throttleKey: text('throttle_key'),
		createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
		runAt: timestamp('run_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
		attempts: integer('attempts').notNull().default(0),
		lockedUntil: timestamp('locked_until', { withTimezone: true, precision: 3 }),
		// Which claim holds the lease: a worker finishes, fails, defers or renews a job only while this is still its own.
		claimId: uuid('claim_id'),
		lastError: text('last_error'),
		finishedAt: timestamp('finished_at', { withTimezone: true, precision: 3 }),
		outcome: text('outcome', { enum: ['done', 'failed'] }),
		// Higher runs first: work already decided (a mail to send) before work that decides more (a mail request).
		priority: smallint('priority').notNull().default(0),
	},
	(table) => [
		index('jobs_due_idx').on(table.priority.desc(), table.runAt).where(sql`${table.finishedAt} is null`),
		index('jobs_throttle_idx').on(table.throttleKey, table.createdAt),
		index('jobs_finished_idx').on(table.finishedAt),
		check('jobs_outcome_valid', sql`(${table.outcome} is null) = (${table.finishedAt} is null)`),
	],
)

/**
 * Second factors: a TOTP secret (sealed with DATA_ENCRYPTION_KEY, bound to the row's id) or a WebAuthn
 * credential. A factor is `pending` from enrolment until a code or an attestation proves it.
 */
/**
 * How a way in (a factor, an identity) was added, for the rules that undo an intruder's: added while the
 * account's address was unverified (removed when it is verified), and the assurance of the session that
 * added it (null: it came with the account, or an admin's act); recovery removes recent ones not added at aal2.
 */
const provenance = {
	addedUnverified: boolean('added_unverified').notNull().default(false),
	addedAal: text('added_aal', { enum: ['aal1', 'aal2'] }),
}

export const factors = pgTable(
	'factors',
	{
		id: uuid('id').primaryKey(),
		userId: uuid('user_id')
			.notNull()
			.references(() => users.id),
		type: text('type', { enum: ['totp', 'webauthn'] }).notNull(),
		name: text('name').notNull(),
		status: text('status', { enum: ['pending', 'active'] }).notNull().default('pending'),
		createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
		lastUsedAt: timestamp('last_used_at', { withTimezone: true, precision: 3 }),
		totpSecret: text('totp_secret'),
		// The time step of the last accepted code: a code of that step or an earlier one is a replay.
		totpLastStep: bigint('totp_last_step', { mode: 'number' }),
		credentialId: text('credential_id'),
		publicKey: text('public_key'),
		signCount: bigint('sign_count', { mode: 'number' }),
		transports: text('transports').array(),
		...provenance,
		activatedAt: timestamp('activated_at', { withTimezone: true, precision: 3 }),
	},
	(table) => [
		index('factors_user_id_idx').on(table.userId, table.createdAt),
		uniqueIndex('factors_credential_id_key').on(table.credentialId),
		check('factors_type_valid', sql`${table.type} in ('totp', 'webauthn')`),
		check('factors_status_valid', sql`${table.status} in ('pending', 'active')`),
	],
)

/** Single-use recovery codes, by hash; a new set replaces the old. */
export const recoveryCodes = pgTable(
	'recovery_codes',
	{
		id: uuid('id').primaryKey(),
		userId: uuid('user_id')
			.notNull()
			.references(() => users.id),
		codeHash: text('code_hash').notNull(),
		createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
		usedAt: timestamp('used_at', { withTimezone: true, precision: 3 }),
	},
	(table) => [uniqueIndex('recovery_codes_user_code_key').on(table.userId, table.codeHash)],
)

/**
 * A login half done: the password was right, a second factor is owed. The token is single use and short-lived,
 * and wrong codes wear it out. A WebAuthn challenge issued for it is kept here too (one at a time).
 */
export const mfaTokens = pgTable(
	'mfa_tokens',
	{
		id: uuid('id').primaryKey(),
		userId: uuid('user_id')
			.notNull()
			.references(() => users.id),
		tokenHash: text('token_hash').notNull(),
		// The account as the password check saw it: a change since then voids the token.
		credentialsVersion: integer('credentials_version').notNull(),
		// RFC 8176 methods of the first step (`{pwd}` after a password, empty after a provider), which the
		// finished session's amr starts from. Tokens older than the column claim nothing.
		amr: text('amr').array().notNull().default(sql`'{}'::text[]`),
		failures: integer('failures').notNull().default(0),
		challenge: text('challenge'),
		expiresAt: timestamp('expires_at', { withTimezone: true, precision: 3 }).notNull(),
		usedAt: timestamp('used_at', { withTimezone: true, precision: 3 }),
	},
	(table) => [uniqueIndex('mfa_tokens_token_hash_key').on(table.tokenHash), index('mfa_tokens_expires_at_idx').on(table.expiresAt)],
)

/** WebAuthn challenges of registrations (bound to a pending factor) and of passwordless sign-in (bound to nothing). */
export const webauthnChallenges = pgTable(
	'webauthn_challenges',
	{
		challenge: text('challenge').primaryKey(),
		purpose: text('purpose', { enum: ['registration', 'passkey', 'reauthentication'] }).notNull(),
		factorId: uuid('factor_id').references(() => factors.id, { onDelete: 'cascade' }),
		// A reauthentication challenge answers for this session only.
		sessionId: uuid('session_id'),
		expiresAt: timestamp('expires_at', { withTimezone: true, precision: 3 }).notNull(),
	},
	(table) => [index('webauthn_challenges_expires_at_idx').on(table.expiresAt)],
)

/** Accounts at identity providers (OpenID Connect) that sign in to a local account: one per (provider, subject). */
export const identities = pgTable(
	'identities',
	{
		id: uuid('id').primaryKey(),
		provider: text('provider').notNull(),
		subject: text('subject').notNull(),
		// The address the provider gave when the identity was linked (for display; never used to sign in).
		email: text('email'),
		userId: uuid('user_id')
			.notNull()
			.references(() => users.id),
		createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
		...provenance,
	},
	(table) => [uniqueIndex('identities_provider_subject_key').on(table.provider, table.subject), index('identities_user_id_idx').on(table.userId)],
)

/**
 * A sign-in at a provider in progress, from the redirect to the provider until its callback: found by the
 * digest of `state`, bound to the browser that started it (the digest of a cookie), single use, 10 minutes.
 */
export const oidcFlows = pgTable(
	'oidc_flows',
	{
		id: uuid('id').primaryKey(),
		stateHash: text('state_hash').notNull(),
		// Null for a link flow: started by a signed-in frontend's request, it is bound by its PKCE challenge instead.
		browserHash: text('browser_hash'),
		// The account a link flow adds the identity to, and the assurance of the session that asked.
		linkUserId: uuid('link_user_id').references(() => users.id),
		linkAal: text('link_aal', { enum: ['aal1', 'aal2'] }),
		// The session that asked: the link completes only while it lives (a recovery or a proved address ends it).
		linkSessionId: uuid('link_session_id').references(() => sessions.id, { onDelete: 'cascade' }),
		provider: text('provider').notNull(),
		nonce: text('nonce').notNull(),
		// The PKCE verifier towards the provider: needed once, at the callback.
		providerVerifier: text('provider_verifier').notNull(),
		redirectTo: text('redirect_to').notNull(),
		// The frontend's PKCE challenge: the one-time code it gets back is bound to it.
		codeChallenge: text('code_challenge').notNull(),
		expiresAt: timestamp('expires_at', { withTimezone: true, precision: 3 }).notNull(),
		usedAt: timestamp('used_at', { withTimezone: true, precision: 3 }),
	},
	(table) => [uniqueIndex('oidc_flows_state_hash_key').on(table.stateHash), index('oidc_flows_expires_at_idx').on(table.expiresAt)],
)

/** The one-time code a provider sign-in hands the frontend: 60 seconds, single use, bound to its PKCE challenge. */
export const signInCodes = pgTable(
	'sign_in_codes',
	{
		id: uuid('id').primaryKey(),
		codeHash: text('code_hash').notNull(),
		userId: uuid('user_id')
			.notNull()
			.references(() => users.id),
		credentialsVersion: integer('credentials_version').notNull(),
		provider: text('provider').notNull(),
		codeChallenge: text('code_challenge').notNull(),
		// A link flow's verified identity, linked when the code is exchanged (by the frontend that holds the verifier).
		linkSubject: text('link_subject'),
		linkEmail: text('link_email'),
		linkAal: text('link_aal', { enum: ['aal1', 'aal2'] }),
		linkSessionId: uuid('link_session_id').references(() => sessions.id, { onDelete: 'cascade' }),
		expiresAt: timestamp('expires_at', { withTimezone: true, precision: 3 }).notNull(),
		usedAt: timestamp('used_at', { withTimezone: true, precision: 3 }),
	},
	(table) => [uniqueIndex('sign_in_codes_code_hash_key').on(table.codeHash), index('sign_in_codes_expires_at_idx').on(table.expiresAt)],
)

/** Receivers of webhook events; secrets sealed with the data key (signing needs them back). */
export const webhookEndpoints = pgTable(
	'webhook_endpoints',
	{
		id: uuid('id').primaryKey(),
		url: text('url').notNull(),
		description: text('description').notNull().default(''),
		// Event types, or `*` for all.
		events: text('events').array().notNull(),
		enabled: boolean('enabled').notNull().default(true),
		// Why it is off: `failing` when the service turned it off, `admin` when an admin did.
		disabledReason: text('disabled_reason'),
		secret: text('secret').notNull(),
		// The secret before the last rotation, which signs too until `previous_secret_expires_at`.
		previousSecret: text('previous_secret'),
		previousSecretExpiresAt: timestamp('previous_secret_expires_at', { withTimezone: true, precision: 3 }),
		// Since when every attempt has failed (null while the last one succeeded).
		failingSince: timestamp('failing_since', { withTimezone: true, precision: 3 }),
		...timestamps,
	},
	(table) => [check('webhook_endpoints_disabled_reason_valid', sql`${table.disabledReason} in ('failing', 'admin')`)],
)

/** The outbox: one row per event, written in the transaction of the change it reports. */
export const webhookEvents = pgTable(
	'webhook_events',
	{
		id: uuid('id').primaryKey(),
		type: text('type').notNull(),
		// The JSON body exactly as it is POSTed (and signed) at every attempt.
		body: text('body').notNull(),
		createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
	},
	(table) => [index('webhook_events_created_at_idx').on(table.createdAt)],
)

/** An event owed to one endpoint; its attempts are the delivery log. */
export const webhookDeliveries = pgTable(
	'webhook_deliveries',
	{
		id: uuid('id').primaryKey(),
		endpointId: uuid('endpoint_id')
			.notNull()
			.references(() => webhookEndpoints.id, { onDelete: 'cascade' }),
		eventId: uuid('event_id')
			.notNull()
			.references(() => webhookEvents.id, { onDelete: 'cascade' }),
		status: text('status', { enum: ['pending', 'succeeded', 'failed'] }).notNull().default('pending'),
		nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true, precision: 3 }),
		createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
	},
	(table) => [
		// One delivery of an event per endpoint; the log pages on the (time-ordered) event id.
		uniqueIndex('webhook_deliveries_endpoint_event_key').on(table.endpointId, table.eventId),
		index('webhook_deliveries_event_id_idx').on(table.eventId),
		check('webhook_deliveries_status_valid', sql`${table.status} in ('pending', 'succeeded', 'failed')`),
	],
)

export const webhookAttempts = pgTable(
	'webhook_attempts',
	{
		id: uuid('id').primaryKey(),
		deliveryId: uuid('delivery_id')
			.notNull()
			.references(() => webhookDeliveries.id, { onDelete: 'cascade' }),
		attemptedAt: timestamp('attempted_at', { withTimezone: true, precision: 3 }).notNull(),
		durationMs: integer('duration_ms').notNull(),
		// The receiver's HTTP status, null when none came (refused address, timeout, connection error).
		statusCode: smallint('status_code'),
		succeeded: boolean('succeeded').notNull(),
		error: text('error'),
	},
	(table) => [index('webhook_attempts_delivery_id_idx').on(table.deliveryId, table.attemptedAt)],
)

/** Applications that sign their users in through Latchkey (Latchkey as an OpenID Provider). */
export const oauthClients = pgTable(
	'oauth_clients',
	{
		id: uuid('id').primaryKey(),
		// The OAuth `client_id`: what the protocol, sessions and consents name the client by.
		clientId: text('client_id').notNull(),
		name: text('name').notNull(),
		type: text('type', { enum: ['public', 'confidential'] }).notNull(),
		redirectUris: text('redirect_uris').array().notNull().default(sql`'{}'::text[]`),
		postLogoutRedirectUris: text('post_logout_redirect_uris').array().notNull().default(sql`'{}'::text[]`),
		backchannelLogoutUri: text('backchannel_logout_uri'),
		grantTypes: text('grant_types').array().notNull(),
		scopes: text('scopes').array().notNull(),
		tokenEndpointAuthMethod: text('token_endpoint_auth_method', {
			enum: ['none', 'client_secret_basic', 'client_secret_post', 'private_key_jwt'],
		}).notNull(),
		jwksUri: text('jwks_uri'),
		// First-party clients (the operator's own apps, the console) skip the consent page.
		firstParty: boolean('first_party').notNull().default(false),
		idTokenSignedResponseAlg: text('id_token_signed_response_alg', { enum: ['RS256', 'ES256', 'EdDSA'] }),
		logoUri: text('logo_uri'),
		// Registered by anyone through RFC 7591 (OAUTH_DYNAMIC_REGISTRATION), not by an admin.
		dynamic: boolean('dynamic').notNull().default(false),
		status: text('status', { enum: ['active', 'disabled'] }).notNull().default('active'),
		...timestamps,
	},
	(table) => [uniqueIndex('oauth_clients_client_id_key').on(table.clientId), index('oauth_clients_created_at_idx').on(table.createdAt, table.id)],
)

/** A confidential client's secrets, hashed: the newest, and the one before it for a while after a rotation. */
export const oauthClientSecrets = pgTable(
	'oauth_client_secrets',
	{
		id: uuid('id').primaryKey(),
		clientId: uuid('client_id')
			.notNull()
			.references(() => oauthClients.id, { onDelete: 'cascade' }),
		// SHA-256 of a 256-bit random secret: a slow hash adds nothing to a secret no one can guess.
		secretHash: text('secret_hash').notNull(),
		createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
		// Set when a newer secret replaces this one: it keeps working until then (24 h).
		expiresAt: timestamp('expires_at', { withTimezone: true, precision: 3 }),
	},
	(table) => [index('oauth_client_secrets_client_id_idx').on(table.clientId, table.createdAt)],
)

/** What a user allowed a client (remembered, so the consent page is asked once per new scope). */
export const oauthConsents = pgTable(
	'oauth_consents',
	{
		userId: uuid('user_id')
			.notNull()
			.references(() => users.id),
		clientId: uuid('client_id')
			.notNull()
			.references(() => oauthClients.id, { onDelete: 'cascade' }),
		scopes: text('scopes').array().notNull(),
		grantedAt: timestamp('granted_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
	},
	(table) => [uniqueIndex('oauth_consents_user_client_key').on(table.userId, table.clientId), index('oauth_consents_client_id_idx').on(table.clientId)],
)

/**
 * The protocol's own records (authorization codes, access and refresh tokens, grants, interactions, device codes,
 * provider sessions), kept as the OpenID Provider library writes them: one row per record, by kind (`model`).
 */
export const oauthArtifacts = pgTable(
	'oauth_artifacts',
	{
		model: text('model').notNull(),
		id: text('id').notNull(),
		payload: jsonb('payload').$type<Record<string, unknown>>().notNull(),
		// Every record issued under one grant: a code used twice, or a refresh token replayed, ends them all at once.
		grantId: text('grant_id'),
		userCode: text('user_code'),
		uid: text('uid'),
		expiresAt: timestamp('expires_at', { withTimezone: true, precision: 3 }),
		consumedAt: timestamp('consumed_at', { withTimezone: true, precision: 3 }),
	},
	(table) => [
		primaryKey({ columns: [table.model, table.id] }),
		index('oauth_artifacts_grant_id_idx').on(table.grantId),
		index('oauth_artifacts_user_code_idx').on(table.userCode),
		// With the model first: a lookup by uid (a session's) never ANDs in every row of the model when the statistics lag (seen after a burst of sign-ins).
		index('oauth_artifacts_model_uid_idx').on(table.model, table.uid),
		index('oauth_artifacts_expires_at_idx').on(table.expiresAt),
	],
)

/** A customer, a team, a tenant: accounts belong to it with roles (API.md, Organizations). Deactivated, never deleted. */
export const organizations = pgTable(
	'organizations',
	{
		id: uuid('id').primaryKey(),
		name: text('name').notNull(),
		// Unique, kebab-case: the check keeps every writer honest.
		slug: text('slug').notNull(),
		status: text('status', { enum: ['active', 'deactivated'] }).notNull().default('active'),
		...timestamps,
		deactivatedAt: timestamp('deactivated_at', { withTimezone: true, precision: 3 }),
	},
	(table) => [
		uniqueIndex('organizations_slug_key').on(table.slug),
		// Keyset pages on each sort: (created_at, id) and (name, id), in either direction.
		index('organizations_created_at_id_idx').on(table.createdAt, table.id),
		index('organizations_name_id_idx').on(table.name, table.id),
		// `q`: a substring of name or slug without reading every row.
		index('organizations_name_trgm_idx').using('gin', sql`${table.name} gin_trgm_ops`),
		index('organizations_slug_trgm_idx').using('gin', sql`${table.slug} gin_trgm_ops`),
		check('organizations_slug_kebab', sql`${table.slug} ~ '^[a-z0-9]+(-[a-z0-9]+)*$' and length(${table.slug}) <= 64`),
	],
)

/**
 * The roles an organization's members hold: `owner`, `admin` and `member` built in, more defined by admins,
 * one set for every organization (Logto's template). `*` in permissions: every permission.
 */
export const organizationRoles = pgTable('organization_roles', {
	name: text('name').primaryKey(),
	description: text('description').notNull().default(''),
	permissions: text('permissions').array().notNull().default(sql`'{}'::text[]`),
	builtIn: boolean('built_in').notNull().default(false),
	...timestamps,
})

/** An account's membership of an organization, with its roles (names in organization_roles). */
export const organizationMembers = pgTable(
	'organization_members',
	{
		organizationId: uuid('organization_id')
			.notNull()
			.references(() => organizations.id),
		userId: uuid('user_id')
			.notNull()
			.references(() => users.id),
		roles: text('roles').array().notNull().default(sql`'{}'::text[]`),
		joinedAt: timestamp('joined_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
		updatedAt: timestamp('updated_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
	},
	(table) => [
		primaryKey({ columns: [table.organizationId, table.userId] }),
		// A member list's keyset page: (joined_at, user_id) within one organization, whatever its size. Migration 0025
		// adds INCLUDE (roles) (drizzle has no INCLUDE): every page is then an index-only scan.
		index('organization_members_org_joined_idx').on(table.organizationId, table.joinedAt, table.userId),
		// A user's memberships.
		index('organization_members_user_id_idx').on(table.userId),
	],
)

/**
 * One row per role a member holds, kept by a trigger on organization_members (migration 0025, never written by the
 * service): a member list filtered by `role` seeks (organization, role) in joined order instead of passing over
 * every member of the organization — in one of 100,000 members that hold the role once, 0.1 ms instead of 23 ms.
 */
export const organizationMemberRoles = pgTable(
	'organization_member_roles',
	{
		organizationId: uuid('organization_id').notNull(),
		userId: uuid('user_id').notNull(),
		role: text('role').notNull(),
		joinedAt: timestamp('joined_at', { withTimezone: true, precision: 3 }).notNull(),
	},
	(table) => [
		primaryKey({ columns: [table.organizationId, table.userId, table.role] }),
		index('organization_member_roles_keyset_idx').on(table.organizationId, table.role, table.joinedAt, table.userId),
	],
)

/** An invitation to join an organization, by mail: single use, 7 days, kept by hash only. */
export const organizationInvitations = pgTable(
	'organization_invitations',
	{
		id: uuid('id').primaryKey(),
		organizationId: uuid('organization_id')
			.notNull()
			.references(() => organizations.id),
		// Stored trimmed and lower-cased, as users.email.
		email: text('email').notNull(),
		roles: text('roles').array().notNull().default(sql`'{}'::text[]`),
		tokenHash: text('token_hash').notNull(),
		invitedBy: uuid('invited_by').references(() => users.id),
		createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
		expiresAt: timestamp('expires_at', { withTimezone: true, precision: 3 }).notNull(),
		acceptedAt: timestamp('accepted_at', { withTimezone: true, precision: 3 }),
		acceptedBy: uuid('accepted_by').references(() => users.id),
		revokedAt: timestamp('revoked_at', { withTimezone: true, precision: 3 }),
	},
	(table) => [
		uniqueIndex('organization_invitations_token_hash_key').on(table.tokenHash),
		index('organization_invitations_org_created_idx').on(table.organizationId, table.createdAt, table.id),
	],
)

export type UserRow = typeof users.$inferSelect
export type SessionRow = typeof sessions.$inferSelect
export type AuditEventRow = typeof auditEvents.$inferSelect
export type EmailTokenRow = typeof emailTokens.$inferSelect
export type JobRow = typeof jobs.$inferSelect
export type FactorRow = typeof factors.$inferSelect
export type WebhookEndpointRow = typeof webhookEndpoints.$inferSelect
export type WebhookAttemptRow = typeof webhookAttempts.$inferSelect
export type OAuthClientRow = typeof oauthClients.$inferSelect
export type OrganizationRow = typeof organizations.$inferSelect
export type OrganizationMemberRow = typeof organizationMembers.$inferSelect
export type OrganizationInvitationRow = typeof organizationInvitations.$inferSelect

/**
 * Where an import run stands (src/modules/imports): the last line committed, written in each batch's transaction,
 * so that the same command on the same file resumes after it without writing a line twice. Keyed by the source and
 * the file's SHA-256; removed when the run ends.
 */
export const importCheckpoints = pgTable('import_checkpoints', {
	key: text('key').primaryKey(),
	lastLine: integer('last_line').notNull(),
	// The outcomes so far (created, updated, skipped, failed), so that a resumed run's summary covers the whole file.
	counts: jsonb('counts').$type<Record<string, number>>().notNull().default({}),
	updatedAt: timestamp('updated_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
})
