import { Type as T, type Static, type TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { accessSync, constants, statSync } from 'node:fs'
import { RSA_KEY_COMMAND } from './rsa-key'
import { generatedSecret, recordSettings, type SettingRecord, type SettingValue } from './settings'
import { parseTrustedProxies } from './trust-proxy'

/**
 * Every setting, as it appears in the environment. The schema is the single
 * source of names, defaults, ranges and docs/configuration.md's table (test/docs.configuration.test.ts).
 */
const positive = (def: number, description: string) =>
	T.Integer({ minimum: 1, default: def, description })
const zeroOrMore = (def: number, description: string) =>
	T.Integer({ minimum: 0, default: def, description })
/** A duration that may be a fraction of a second (tests poll and retry in tenths rather than wait whole seconds). */
const seconds = (def: number, description: string) =>
	T.Number({ exclusiveMinimum: 0, default: def, description })

export const EnvSchema = T.Object({
	PORT: T.Integer({ minimum: 0, maximum: 65535, default: 3000, description: 'TCP port to listen on' }),
	HOST: T.String({ minLength: 1, default: '0.0.0.0', description: 'address to listen on' }),
	WORKERS: T.Union([T.Literal('auto'), T.Integer({ minimum: 1, maximum: 256 })], {
		default: 1,
		description: 'processes sharing the port (`auto`: one per core; PostgreSQL only)',
	}),
	NODE_ENV: T.Union([T.Literal('development'), T.Literal('production'), T.Literal('test')], {
		default: 'development',
		description: '`production` turns docs off and makes secrets mandatory',
	}),
	DATABASE_URL: T.Optional(
		T.String({ pattern: '^postgres(ql)?://', description: 'PostgreSQL URL; unset means the embedded database' }),
	),
	DATA_DIR: T.String({
		minLength: 1,
		default: './data',
		description:
			'where the embedded database lives and, in development, the keys made for unset secrets (`keys/`, also with DATABASE_URL); `memory://` keeps nothing',
	}),
	DATABASE_POOL_MAX: positive(10, 'connections per instance'),
	JWT_ALGORITHM: T.Union([T.Literal('HS256'), T.Literal('EdDSA'), T.Literal('ES256')], {
		default: 'HS256',
		description: 'access-token signing algorithm',
	}),
	JWT_SECRET: T.Optional(
		T.String({ description: 'HS256 key, at least 32 bytes; required in production; in development generated once and kept in DATA_DIR (`keys/jwt-secret`)' }),
	),
	JWT_PRIVATE_KEY: T.Optional(T.String({ description: 'PEM private key for EdDSA/ES256' })),
	JWT_PRIVATE_KEY_FILE: T.Optional(T.String({ description: 'path of a PEM private key for EdDSA/ES256' })),
	JWT_PREVIOUS_PUBLIC_KEYS: T.Optional(
		T.String({
			description:
				'PEM public key(s) of retired signing keys, still accepted and published until their tokens expire; each verifies under its own algorithm, read from the key (Ed25519: EdDSA, P-256: ES256), whatever JWT_ALGORITHM is now',
		}),
	),
	JWT_PREVIOUS_PUBLIC_KEYS_FILE: T.Optional(T.String({ description: 'path of a file holding those PEM public keys' })),
	JWT_PREVIOUS_SECRET: T.Optional(
		T.String({
			description:
				'retired HS256 secret, at least 32 bytes, after moving to a new JWT_SECRET or to EdDSA/ES256: its tokens stay valid until they expire; never published',
		}),
	),
	JWT_ISSUER: T.String({ minLength: 1, default: 'latchkey', description: '`iss` of access tokens' }),
	JWT_AUDIENCE: T.String({ minLength: 1, default: 'latchkey', description: '`aud` of access tokens' }),
	ACCESS_TOKEN_TTL_SECONDS: positive(900, 'access token lifetime'),
	REFRESH_TOKEN_TTL_SECONDS: positive(2_592_000, 'refresh token lifetime'),
	REFRESH_REUSE_GRACE_SECONDS: zeroOrMore(10, 'grace interval for concurrent refresh (`0`: none)'),
	SESSION_RETENTION_SECONDS: zeroOrMore(
		604_800,
		'how long an expired or revoked session and its refresh tokens are kept before they are deleted (`0`: at the next purge)',
	),
	SESSIONS_PER_USER_MAX: zeroOrMore(100, 'live sessions per user; a login beyond it revokes the oldest ones (`0`: no cap)'),
	SIGNUP_ENABLED: T.Boolean({ default: true, description: 'whether anyone may POST /users' }),
	ORGANIZATION_CREATION: T.Union([T.Literal('admins'), T.Literal('all')], {
		default: 'admins',
		description: 'who may POST /organizations: `admins`, or `all` signed-in users',
	}),
	PASSWORD_MIN_LENGTH: T.Integer({ minimum: 1, maximum: 256, default: 8, description: 'minimum password length' }),
	PASSWORD_HASH_MEMORY_KIB: T.Integer({
		minimum: 1024,
		default: 65536,
		description: 'argon2id memory cost in KiB (Bun default 65536; lower only in tests)',
	}),
	PASSWORD_HASH_TIME_COST: T.Integer({
		minimum: 1,
		default: 2,
		description: 'argon2id iterations (Bun default 2)',
	}),
	PASSWORD_HASH_NICENESS: T.Integer({
		minimum: 0,
		maximum: 19,
		default: 10,
		description: 'nice value of the hashing threads (Linux): they yield the cores to requests; 0 = normal priority',
	}),
	RATE_LIMIT_MAX: zeroOrMore(300, 'general request budget per client and window (`0`: off)'),
	RATE_LIMIT_WINDOW_SECONDS: positive(60, 'rate-limit window'),
	AUTH_RATE_LIMIT_MAX: zeroOrMore(10, 'budget on /auth/* per client, same window (`0`: off)'),
	LOCKOUT_THRESHOLD: zeroOrMore(5, 'failed logins per email before it is locked (`0`: off)'),
	LOCKOUT_WINDOW_SECONDS: positive(900, 'window in which failed logins are counted'),
	LOCKOUT_SECONDS: positive(900, 'how long a locked email stays locked'),
	TRUST_PROXY: T.Optional(T.String({ description: 'comma-separated IPs or CIDRs of trusted proxies' })),
	REDIS_URL: T.Optional(T.String({ pattern: '^rediss?://', description: 'shared store for counters' })),
	CORS_ORIGINS: T.Optional(
		T.String({ description: 'comma-separated allowed origins (default `*` in development, none in production)' }),
	),
	BODY_LIMIT_BYTES: positive(65_536, 'largest request body'),
	DOCS_ENABLED: T.Optional(T.Boolean({ description: 'OpenAPI JSON and the docs page (default: on except in production)' })),
	METRICS_ENABLED: T.Boolean({ default: false, description: 'serve Prometheus metrics at GET /metrics (on whenever METRICS_TOKEN is set)' }),
	METRICS_TOKEN: T.Optional(
		T.String({ minLength: 16, description: 'bearer token required at /metrics (at least 16 characters)' }),
	),
	LOG_LEVEL: T.Union(
		[T.Literal('debug'), T.Literal('info'), T.Literal('warn'), T.Literal('error'), T.Literal('silent')],
		{ default: 'info', description: 'least severe level written' },
	),
	SHUTDOWN_TIMEOUT_SECONDS: positive(10, 'how long in-flight requests may run after SIGTERM'),
	APP_URL: T.Optional(
		T.String({
			pattern: '^https?://[^\\s]+$',
			description: "the app's own frontend, if it has one: mail links, the passkeys' RP ID and REDIRECT_URLS then point at it; unset, they point at Latchkey's pages at PUBLIC_URL",
		}),
	),
	APP_NAME: T.String({ minLength: 1, maxLength: 100, default: 'Latchkey', description: 'the name in mails' }),
	EMAIL_VERIFY_URL: T.Optional(T.String({ pattern: '^https?://[^\\s#]+$', description: 'the page that takes a verification token (default {APP_URL}/verify-email with APP_URL, else {PUBLIC_URL}/email-verification)' })),
	PASSWORD_RESET_URL: T.Optional(T.String({ pattern: '^https?://[^\\s#]+$', description: 'the page that takes a recovery token (default {APP_URL}/reset-password with APP_URL, else {PUBLIC_URL}/password-reset)' })),
	SMTP_URL: T.Optional(
		T.String({
			pattern: '^smtps?://',
			description:
				'`smtp://user:pass@host:587` (STARTTLS, required when credentials are given) or `smtps://…:465` (implicit TLS); unset: mail goes to the log in development and the mail routes answer 503 in production',
		}),
	),
	MAIL_FROM: T.Optional(T.String({ minLength: 3, description: 'the sender, `Name <address>` or an address (default `APP_NAME <no-reply@host of APP_URL>`, else of PUBLIC_URL)' })),
	MAIL_TEMPLATES_DIR: T.Optional(T.String({ minLength: 1, description: 'folder of mustache templates that replace the built-in ones (`<kind>.subject`, `.text`, `.html`)' })),
	EMAIL_VERIFICATION: T.Union([T.Literal('off'), T.Literal('optional'), T.Literal('required')], {
		default: 'optional',
		description: '`off`, `optional` (a verification mail at sign-up, login allowed), `required` (login refused until verified)',
	}),
	MAIL_RESEND_SECONDS: zeroOrMore(60, 'least interval between two mails of a kind to one address (`0`: no limit)'),
	EMAIL_VERIFICATION_TTL_SECONDS: positive(86_400, 'lifetime of verification and email-change tokens and codes'),
	RECOVERY_TTL_SECONDS: positive(3_600, 'lifetime of recovery tokens and codes'),
	EMAIL_CODE_SIGN_IN: T.Boolean({
		default: true,
		description: 'sign-in with a 6-digit code mailed to the account (POST /auth/sign-in-codes, then /auth/email-code); `false`: both routes are unknown (404)',
	}),
	CONSOLE_ENABLED: T.Boolean({ default: true, description: 'the admin console at /console (`false`: every /console path answers 404)' }),
	RECOVERY_URL: T.Optional(T.String({ pattern: '^https?://[^\\s#]+$', description: 'the page that mail notices of a way in added or removed link to (default {APP_URL}/recovery with APP_URL, else {PUBLIC_URL}/recovery)' })),
	INVITATION_URL: T.Optional(T.String({ pattern: '^https?://[^\\s#]+$', description: "the page that takes an organization invitation's token, in the fragment (default {APP_URL}/invitation with APP_URL, else {PUBLIC_URL}/invitation)" })),
	RECOVERY_REVIEW_SECONDS: zeroOrMore(
		604_800,
		'passkeys and linked identities added within this before a recovery, from a session without a second factor, are removed by it (`0`: none)',
	),
	REAUTHENTICATION_SECONDS: positive(300, 'how recent a sign-in or check of the session must be to add or change a way in (a factor, an identity, the password or email)'),
	JOB_POLL_SECONDS: seconds(1, 'how often each instance looks for due background jobs (mail, webhooks) besides the NOTIFY that wakes it when one is queued; fractions allowed'),
	JOB_RETRY_SECONDS: seconds(10, 'delay before the first retry of a failed job; each next one doubles, up to an hour, for at least 24 hours; fractions allowed'),
	DATA_ENCRYPTION_KEY: T.Optional(
		T.String({ description: '32 random bytes, base64: encrypts TOTP and webhook secrets at rest (AES-256-GCM); required in production; in development generated once and kept in DATA_DIR (`keys/data-encryption-key`)' }),
	),
	DATA_ENCRYPTION_PREVIOUS_KEYS: T.Optional(
		T.String({ description: 'comma-separated retired DATA_ENCRYPTION_KEY values, still read; a secret under one is re-encrypted with the current key when next used' }),
	),
	MFA_REQUIRED: T.Union([T.Literal('off'), T.Literal('admins'), T.Literal('all')], {
		default: 'off',
		description: 'who must have a second factor: `off`, `admins`, `all`; without one, a login gets an enrolment-only session',
	}),
	WEBAUTHN_RP_ID: T.Optional(T.String({ pattern: '^[a-z0-9.-]+$', description: 'the passkeys\' relying-party ID, a domain (default: the host of APP_URL, else of PUBLIC_URL)' })),
	WEBAUTHN_RP_NAME: T.Optional(T.String({ minLength: 1, maxLength: 100, description: 'the name authenticators show (default APP_NAME)' })),
	WEBAUTHN_ORIGINS: T.Optional(T.String({ description: 'comma-separated origins allowed to use passkeys (default: the origins of APP_URL and PUBLIC_URL)' })),
	OIDC_PROVIDERS: T.Optional(
		T.String({
			pattern: '^[a-z][a-z0-9-]{0,31}(,[a-z][a-z0-9-]{0,31})*$',
			description: 'comma-separated names of OpenID Connect providers (`google,acme`), each configured by OIDC_<NAME>_ISSUER, _CLIENT_ID, _CLIENT_SECRET, optional _SCOPES and _LABEL',
		}),
	),
	PUBLIC_URL: T.Optional(
		T.String({
			pattern: '^https?://[^\\s/]+$',
			description: "this service's public origin: the provider's issuer, provider callbacks, links to its pages (default http://localhost:{PORT} outside production; required in production)",
		}),
	),
	REDIRECT_URLS: T.Optional(
		T.String({
			description: "comma-separated frontend URLs a provider sign-in may return to; an entry ending in `/*` admits the paths under it (default {APP_URL}/* with APP_URL, else Latchkey's pages: {PUBLIC_URL}/*)",
		}),
	),
	OAUTH_SIGNING_KEY: T.Optional(
		T.String({
			description:
				'RSA private key in PEM (PKCS#8 or PKCS#1), at least 2048 bits: signs ID tokens (RS256) and the provider\'s access tokens, published in the JWKS; required in production; in development generated once and kept in DATA_DIR (`keys/oauth-signing-key`)',
		}),
	),
	OAUTH_SIGNING_KEY_FILE: T.Optional(T.String({ minLength: 1, description: 'path of a file holding that PEM key (instead of OAUTH_SIGNING_KEY)' })),
	OAUTH_DYNAMIC_REGISTRATION: T.Boolean({ default: false, description: 'RFC 7591 dynamic client registration, open to anyone' }),
	OAUTH_DEVICE_POLL_SECONDS: seconds(5, 'how long a device waits between two polls of the token endpoint in the device flow, sent as RFC 8628\'s `interval` (5 is also what a client assumes without it); fractions allowed'),
	BRAND_LOGO_URL: T.Optional(T.String({ description: 'the logo the pages show: an https:// URL (http:// on loopback only)' })),
	BRAND_COLOR: T.Optional(T.String({ pattern: '^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$', description: 'the pages\' accent colour, a CSS hex colour (#rgb or #rrggbb)' })),
	PAGES_DIR: T.Optional(
		T.String({ minLength: 1, description: 'folder of templates, styles and language catalogues replacing the built-in ones of the pages; must exist and be readable at start' }),
	),
	WEBHOOK_ALLOW_PRIVATE_NETWORKS: T.Boolean({ default: false, description: 'let webhooks and the OpenID Provider’s requests to clients (back-channel logout, jwks_uri) reach private addresses (tests, internal receivers)' }),
	WEBHOOK_TIMEOUT_SECONDS: positive(15, 'how long a webhook receiver has to answer 2xx'),
	WEBHOOK_RETRY_SCHEDULE: T.String({
		pattern: '^[0-9]{1,6}(\\.[0-9]{1,3})?(,[0-9]{1,6}(\\.[0-9]{1,3})?){0,19}$',
		default: '5,300,1800,7200,18000,36000,36000',
		description: 'seconds (fractions allowed) before each retry of a failed webhook delivery, comma-separated; after the last the delivery is `failed`',
	}),
	WEBHOOK_DISABLE_AFTER_SECONDS: positive(432_000, 'an endpoint whose every attempt failed for this long is disabled'),
	WEBHOOK_CONCURRENCY: positive(256, 'webhook deliveries in flight at once per instance (a slow endpoint gets an eighth of them at most)'),
	LATCHKEY_ADMIN_EMAIL: T.Optional(T.String({ description: 'first admin, created on start if no admin exists' })),
	LATCHKEY_ADMIN_PASSWORD: T.Optional(T.String({ description: 'password of that first admin' })),
})

export type Env = Static<typeof EnvSchema>

/** The settings in effect, and a record of each (its value unless a secret, where it came from) for GET /api/settings. */
export type Config = ReturnType<typeof toConfig> & { settings: SettingRecord[] }

export class ConfigError extends Error {
	constructor(readonly problems: string[]) {
		super(problems.join('\n'))
	}
}

const SECRET_NAMES = new Set(['METRICS_TOKEN', 'JWT_SECRET', 'JWT_PRIVATE_KEY', 'JWT_PREVIOUS_PUBLIC_KEYS', 'JWT_PREVIOUS_SECRET', 'LATCHKEY_ADMIN_PASSWORD', 'DATABASE_URL', 'REDIS_URL', 'SMTP_URL', 'DATA_ENCRYPTION_KEY', 'DATA_ENCRYPTION_PREVIOUS_KEYS', 'OAUTH_SIGNING_KEY'])

/** What a schema expects, in words, for the start-up error line. */
function expectation(schema: TSchema): string {
	if (schema.anyOf) return (schema.anyOf as TSchema[]).map(expectation).join(' or ')
	if (schema.const !== undefined) return JSON.stringify(schema.const)
	if (schema.type === 'integer') {
		const lo = schema.minimum
		const hi = schema.maximum
		if (lo !== undefined && hi !== undefined) return `a whole number from ${lo} to ${hi}`
		if (lo !== undefined) return `a whole number of at least ${lo}`
		return 'a whole number'
	}
	if (schema.type === 'number') return 'a number of seconds above 0'
	if (schema.type === 'boolean') return 'true or false'
	if (schema.pattern) return `a string matching ${schema.pattern}`
	if (schema.minLength) return `a non-empty string`
	return 'a string'
}

/**
 * Parse the environment once. Empty values count as unset (as `PORT=` in a
 * .env file would mean to most people). Throws ConfigError with one line per
 * problem, naming the variable and what it expects, never echoing secrets.
 */
export function loadConfig(source: Record<string, string | undefined> = process.env): Config {
	const raw: Record<string, string> = {}
	for (const name of Object.keys(EnvSchema.properties)) {
		const value = source[name]?.trim()
		if (value !== undefined && value !== '') raw[name] = value
	}
	const candidate = Value.Default(EnvSchema, convert(raw)) as Record<string, unknown>
	const problems: string[] = []
	for (const error of Value.Errors(EnvSchema, candidate)) {
		const name = error.path.slice(1).split('/')[0] ?? ''
		if (problems.some((p) => p.startsWith(`${name}:`))) continue
		const schema = EnvSchema.properties[name as keyof Env] as TSchema | undefined
		const shown = SECRET_NAMES.has(name) ? '' : ` (got ${JSON.stringify(raw[name])})`
		problems.push(`${name}: expected ${schema ? expectation(schema) : 'nothing'}${shown}`)
	}
	problems.push(...crossCheck(candidate as Env))
	const oidc = problems.length === 0 ? oidcProviders(candidate as Env, source) : { providers: [], problems: [] }
	problems.push(...oidc.problems)
	if (problems.length > 0) throw new ConfigError(problems)
	const config = toConfig(candidate as Env, oidc.providers)
	const settings = recordSettings({
		properties: EnvSchema.properties,
		given: raw,
		values: candidate,
		derived: derivedDefaults(config),
		secretNames: SECRET_NAMES,
		providers: oidc.providers.map((provider) => {
			const prefix = providerPrefix(provider.id)
			const given = Object.fromEntries(['ISSUER', 'CLIENT_ID', 'CLIENT_SECRET', 'SCOPES', 'LABEL'].map((suffix) => [suffix, source[prefix + suffix]?.trim() || undefined]))
			const effective = { ISSUER: provider.issuer, CLIENT_ID: provider.clientId, CLIENT_SECRET: provider.clientSecret, SCOPES: provider.scopes, LABEL: provider.label }
			return { prefix, given, effective }
		}),
	})
	// Outside production with DATA_DIR=memory://, each process makes its own keys (auth/keys, crypto/data-keys,
	// crypto/oauth-signing-key); with a folder, keepDevelopmentSecrets records those it makes or reads there.
	const perProcess = !config.production && config.dataDir.startsWith('memory://') ? DEVELOPMENT_SECRETS.filter((name) => name !== 'JWT_SECRET' || config.jwt.algorithm === 'HS256') : []
	return { ...config, settings: perProcess.reduce((records, name) => generatedSecret(records, name, 'generated at random for this process only (DATA_DIR=memory://), not kept'), settings) }
}

/** The secrets made up outside production when the environment leaves them unset. */
const DEVELOPMENT_SECRETS = ['JWT_SECRET', 'DATA_ENCRYPTION_KEY', 'OAUTH_SIGNING_KEY']

/** What the config derives for settings left unset whose default depends on other settings. */
function derivedDefaults(config: ReturnType<typeof toConfig>): Partial<Record<keyof Env, SettingValue>> {
	return {
		PUBLIC_URL: config.publicUrl,
		CORS_ORIGINS: config.cors.origins.join(',') || null,
		DOCS_ENABLED: config.docsEnabled,
		// Off by default, but on whenever METRICS_TOKEN is set.
		METRICS_ENABLED: config.metrics.enabled,
		EMAIL_VERIFY_URL: config.mail.verifyUrl,
		PASSWORD_RESET_URL: config.mail.resetUrl,
		MAIL_FROM: config.mail.from,
		RECOVERY_URL: config.mail.recoveryUrl,
		INVITATION_URL: config.mail.invitationUrl,
		WEBAUTHN_RP_ID: config.mfa.rpId,
		WEBAUTHN_RP_NAME: config.mfa.rpName,
		WEBAUTHN_ORIGINS: config.mfa.origins.join(','),
		REDIRECT_URLS: config.oidc.redirectUrls.join(','),
	}
}

/** The prefix of a provider's settings: OIDC_<NAME>_, the name in upper case with `-` as `_`. */
const providerPrefix = (id: string) => `OIDC_${id.toUpperCase().replaceAll('-', '_')}_`

export interface OidcProviderSettings {
	/** The name in OIDC_PROVIDERS: the provider's id in routes. */
	id: string
	label: string
	issuer: string
	clientId: string
	clientSecret: string
	scopes: string
}

/**
 * The providers OIDC_PROVIDERS names, each from its OIDC_<NAME>_* settings (names vary, so they are read
 * here rather than declared in the schema). A client secret is never echoed in a problem line.
 */
function oidcProviders(env: Env, source: Record<string, string | undefined>): { providers: OidcProviderSettings[]; problems: string[] } {
	const providers: OidcProviderSettings[] = []
	const problems: string[] = []
	const production = env.NODE_ENV === 'production'
	for (const id of list(env.OIDC_PROVIDERS)) {
		const prefix = providerPrefix(id)
		const read = (name: string) => source[prefix + name]?.trim() || undefined
		const issuer = read('ISSUER')
		const clientId = read('CLIENT_ID')
		const clientSecret = read('CLIENT_SECRET')
		const scopes = read('SCOPES') ?? 'openid email profile'
		if (issuer === undefined || !/^https?:\/\/[^\s]+$/.test(issuer)) problems.push(`${prefix}ISSUER: expected the provider's issuer URL${issuer === undefined ? '' : ` (got ${JSON.stringify(issuer)})`}`)
		else if (production && !issuer.startsWith('https://')) problems.push(`${prefix}ISSUER: expected https:// when NODE_ENV=production (got ${JSON.stringify(issuer)})`)
		if (clientId === undefined) problems.push(`${prefix}CLIENT_ID: required for the provider ${id}`)
		if (clientSecret === undefined) problems.push(`${prefix}CLIENT_SECRET: required for the provider ${id}`)
		if (!scopes.split(/\s+/).includes('openid')) problems.push(`${prefix}SCOPES: expected a space-separated list that includes openid (got ${JSON.stringify(scopes)})`)
		if (issuer && clientId && clientSecret)
			providers.push({ id, label: read('LABEL') ?? id.charAt(0).toUpperCase() + id.slice(1), issuer, clientId, clientSecret, scopes })
	}
	for (const entry of list(env.REDIRECT_URLS))
		if (!URL.canParse(entry.replace(/\/\*$/, '/')) || !/^https?:/.test(entry)) problems.push(`REDIRECT_URLS: expected absolute http(s) URLs (got ${JSON.stringify(entry)})`)
	return { providers, problems }
}

/**
 * Strings to typed values, strictly: TypeBox's own Convert would truncate
 * "3.5" to 3 and read "yes" as true; here such values stay strings and fail.
 */
function convert(raw: Record<string, string>): Record<string, unknown> {
	const out: Record<string, unknown> = {}
	for (const [name, value] of Object.entries(raw)) {
		if (/^-?\d{1,15}$/.test(value)) out[name] = Number(value)
		else if (/^\d{1,15}\.\d{1,6}$/.test(value) && (EnvSchema.properties[name as keyof Env] as TSchema | undefined)?.type === 'number') out[name] = Number(value)
		else if (value === 'true' || value === 'false') out[name] = value === 'true'
		else out[name] = value
		const schema = EnvSchema.properties[name as keyof Env] as TSchema
		// A value that reads as a number or boolean where a string is expected stays a string.
		if (schema.type === 'string') out[name] = value
	}
	return out
}

/** Rules that span several settings; reads only values the schema accepted. */
function crossCheck(env: Env): string[] {
	const problems: string[] = []
	const production = env.NODE_ENV === 'production'
	const secret = typeof env.JWT_SECRET === 'string' ? env.JWT_SECRET : undefined
	if (env.JWT_ALGORITHM === 'HS256') {
		if (secret !== undefined && new TextEncoder().encode(secret).byteLength < 32)
			problems.push('JWT_SECRET: expected at least 32 bytes')
		if (secret === undefined && production)
			problems.push('JWT_SECRET: required when NODE_ENV=production (at least 32 bytes)')
	} else if (env.JWT_PRIVATE_KEY === undefined && env.JWT_PRIVATE_KEY_FILE === undefined) {
		problems.push(`JWT_PRIVATE_KEY: required (or JWT_PRIVATE_KEY_FILE) when JWT_ALGORITHM=${env.JWT_ALGORITHM}`)
	}
	if (typeof env.JWT_PREVIOUS_SECRET === 'string' && new TextEncoder().encode(env.JWT_PREVIOUS_SECRET).byteLength < 32)
		problems.push('JWT_PREVIOUS_SECRET: expected at least 32 bytes')
	if (!env.DATABASE_URL && (env.WORKERS === 'auto' ? navigator.hardwareConcurrency : env.WORKERS) > 1)
		problems.push('WORKERS: the embedded database belongs to one process; set DATABASE_URL to run more than 1 worker')
	if (typeof env.TRUST_PROXY === 'string') {
		try {
			parseTrustedProxies(env.TRUST_PROXY.split(',').map((entry) => entry.trim()).filter(Boolean))
		} catch (error) {
			problems.push((error as Error).message)
		}
	}
	if ((env.LATCHKEY_ADMIN_EMAIL === undefined) !== (env.LATCHKEY_ADMIN_PASSWORD === undefined))
		problems.push('LATCHKEY_ADMIN_PASSWORD: LATCHKEY_ADMIN_EMAIL and LATCHKEY_ADMIN_PASSWORD go together')
	if (production && env.EMAIL_VERIFICATION === 'required' && env.SMTP_URL === undefined)
		problems.push('SMTP_URL: required when NODE_ENV=production and EMAIL_VERIFICATION=required (no one could verify an address)')
	if (production && env.DATA_ENCRYPTION_KEY === undefined)
		problems.push('DATA_ENCRYPTION_KEY: required when NODE_ENV=production (32 random bytes, base64: openssl rand -base64 32)')
	for (const name of ['DATA_ENCRYPTION_KEY', 'DATA_ENCRYPTION_PREVIOUS_KEYS'] as const)
		if (list(env[name]).some((key) => !isDataKey(key))) problems.push(`${name}: expected 32 bytes in base64 (openssl rand -base64 32)`)
	for (const origin of list(env.WEBAUTHN_ORIGINS))
		if (!/^https?:\/\/[^/\s]+$/.test(origin)) problems.push(`WEBAUTHN_ORIGINS: expected origins such as https://app.example.com (got ${JSON.stringify(origin)})`)
	if (env.OAUTH_SIGNING_KEY !== undefined && env.OAUTH_SIGNING_KEY_FILE !== undefined)
		problems.push('OAUTH_SIGNING_KEY: set OAUTH_SIGNING_KEY or OAUTH_SIGNING_KEY_FILE, not both')
	else if (production && env.OAUTH_SIGNING_KEY === undefined && env.OAUTH_SIGNING_KEY_FILE === undefined)
		problems.push(`OAUTH_SIGNING_KEY: required (or OAUTH_SIGNING_KEY_FILE) when NODE_ENV=production (an RSA private key of at least 2048 bits, PEM: ${RSA_KEY_COMMAND})`)
	if (production && env.PUBLIC_URL === undefined)
		problems.push("PUBLIC_URL: required when NODE_ENV=production (the provider's issuer, provider callbacks and links to its pages)")
	if (env.BRAND_LOGO_URL !== undefined && !isLogoUrl(env.BRAND_LOGO_URL))
		problems.push(`BRAND_LOGO_URL: expected an https:// URL (http:// only on loopback) (got ${JSON.stringify(env.BRAND_LOGO_URL)})`)
	if (env.PAGES_DIR !== undefined) {
		const problem = folderProblem(env.PAGES_DIR)
		if (problem) problems.push(`PAGES_DIR: ${problem}`)
	}
	return problems
}

/** A logo the pages may load from anywhere over https; over plain http only from this machine (development). */
function isLogoUrl(value: string): boolean {
	if (!URL.canParse(value)) return false
	const url = new URL(value)
	if (url.username || url.password) return false
	if (url.protocol === 'https:') return true
	return url.protocol === 'http:' && (url.hostname === 'localhost' || url.hostname === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(url.hostname))
}

/** Why a folder the service reads from at start cannot be used, or undefined when it can. */
function folderProblem(path: string): string | undefined {
	try {
		if (!statSync(path).isDirectory()) return `${path} is not a folder`
		accessSync(path, constants.R_OK | constants.X_OK)
		return undefined
	} catch (error) {
		const code = (error as NodeJS.ErrnoException).code
		return code === 'ENOENT' ? `no folder at ${path}` : `cannot read ${path} (${code ?? 'unknown error'})`
	}
}

/** 32 bytes in standard or URL-safe base64. */
export const isDataKey = (value: string) => /^[A-Za-z0-9+/_-]{43}=?$/.test(value) && Buffer.from(value, 'base64').byteLength === 32

const list = (value: string | undefined) =>
	(value ?? '')
		.split(',')
		.map((item) => item.trim())
		.filter(Boolean)

/**
 * This service's public origin (the config refuses production without one) and the app's own frontend, if it
 * has one: with APP_URL, mail links, passkeys and provider sign-ins point at the frontend; without it, at
 * Latchkey's own pages under PUBLIC_URL.
 */
function siteUrls(env: Env) {
	return {
		publicUrl: env.PUBLIC_URL ?? `http://localhost:${env.PORT}`,
		appUrl: env.APP_URL?.replace(/\/+$/, ''),
	}
}

function toConfig(env: Env, providers: OidcProviderSettings[] = []) {
	const production = env.NODE_ENV === 'production'
	const workers = env.WORKERS === 'auto' ? navigator.hardwareConcurrency : env.WORKERS
	const origins = env.CORS_ORIGINS === undefined ? (production ? [] : ['*']) : list(env.CORS_ORIGINS)
	const { publicUrl, appUrl } = siteUrls(env)
	return {
		/** This service's public origin: the provider's issuer, and where its pages are. */
		publicUrl,
		env: env.NODE_ENV,
		production,
		/** Where the embedded database lives and, in development, the secrets the environment leaves unset (keys/). */
		dataDir: env.DATA_DIR,
		port: env.PORT,
		host: env.HOST,
		workers,
		database: env.DATABASE_URL
			? ({ kind: 'postgres', url: env.DATABASE_URL, poolMax: env.DATABASE_POOL_MAX } as const)
			: ({ kind: 'pglite', dataDir: env.DATA_DIR } as const),
		jwt: {
			algorithm: env.JWT_ALGORITHM,
			secret: env.JWT_SECRET,
			privateKeyPem: env.JWT_PRIVATE_KEY,
			privateKeyFile: env.JWT_PRIVATE_KEY_FILE,
			previousPublicKeys: env.JWT_PREVIOUS_PUBLIC_KEYS,
			previousPublicKeysFile: env.JWT_PREVIOUS_PUBLIC_KEYS_FILE,
			previousSecret: env.JWT_PREVIOUS_SECRET,
			issuer: env.JWT_ISSUER,
			audience: env.JWT_AUDIENCE,
			accessTtlSeconds: env.ACCESS_TOKEN_TTL_SECONDS,
			refreshTtlSeconds: env.REFRESH_TOKEN_TTL_SECONDS,
			reuseGraceSeconds: env.REFRESH_REUSE_GRACE_SECONDS,
		},
		sessions: {
			retentionSeconds: env.SESSION_RETENTION_SECONDS,
			perUserMax: env.SESSIONS_PER_USER_MAX,
		},
		signupEnabled: env.SIGNUP_ENABLED,
		/** ORGANIZATION_CREATION: who may create an organization. */
		organizationCreation: env.ORGANIZATION_CREATION,
		password: {
			minLength: env.PASSWORD_MIN_LENGTH,
			memoryCost: env.PASSWORD_HASH_MEMORY_KIB,
			timeCost: env.PASSWORD_HASH_TIME_COST,
			niceness: env.PASSWORD_HASH_NICENESS,
		},
		rateLimit: {
			max: env.RATE_LIMIT_MAX,
			authMax: env.AUTH_RATE_LIMIT_MAX,
			windowSeconds: env.RATE_LIMIT_WINDOW_SECONDS,
			trustProxy: list(env.TRUST_PROXY),
			redisUrl: env.REDIS_URL,
		},
		lockout: {
			threshold: env.LOCKOUT_THRESHOLD,
			windowSeconds: env.LOCKOUT_WINDOW_SECONDS,
			lockSeconds: env.LOCKOUT_SECONDS,
		},
		cors: { origins },
		bodyLimitBytes: env.BODY_LIMIT_BYTES,
		docsEnabled: env.DOCS_ENABLED ?? !production,
		/** CONSOLE_ENABLED: the admin console at /console. */
		consoleEnabled: env.CONSOLE_ENABLED,
		logLevel: env.LOG_LEVEL,
		metrics: { enabled: env.METRICS_ENABLED || env.METRICS_TOKEN !== undefined, token: env.METRICS_TOKEN },
		shutdownTimeoutSeconds: env.SHUTDOWN_TIMEOUT_SECONDS,
		mail: mailConfig(env, production),
		dataKeys: { current: env.DATA_ENCRYPTION_KEY, previous: list(env.DATA_ENCRYPTION_PREVIOUS_KEYS) },
		mfa: mfaConfig(env),
		reauthenticationSeconds: env.REAUTHENTICATION_SECONDS,
		oidc: {
			providers,
			publicUrl,
			redirectUrls: env.REDIRECT_URLS === undefined ? [`${appUrl ?? publicUrl}/*`] : list(env.REDIRECT_URLS),
			/** Where an error goes when a callback names no flow (its state is unknown): the frontend, else the sign-in page. */
			fallbackUrl: appUrl ?? `${publicUrl}/sign-in`,
			/** http:// issuers (a provider on this machine, in tests and development) are refused in production. */
			allowHttpIssuers: !production,
		},
		oauth: {
			dynamicRegistration: env.OAUTH_DYNAMIC_REGISTRATION,
			devicePollSeconds: env.OAUTH_DEVICE_POLL_SECONDS,
			/** The PEM itself, or the file holding it (src/crypto/oauth-signing-key.ts reads and checks either); in development, made and kept in DATA_DIR when both are unset. */
			signingKey: { pem: env.OAUTH_SIGNING_KEY, file: env.OAUTH_SIGNING_KEY_FILE },
		},
		pages: {
			dir: env.PAGES_DIR,
			brandLogoUrl: env.BRAND_LOGO_URL,
			brandColor: env.BRAND_COLOR,
			appName: env.APP_NAME,
		},
		jobs: { pollSeconds: env.JOB_POLL_SECONDS, retrySeconds: env.JOB_RETRY_SECONDS },
		webhooks: {
			allowPrivateNetworks: env.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
			/** http:// receivers are for development and tests only. */
			allowHttp: !production,
			timeoutSeconds: env.WEBHOOK_TIMEOUT_SECONDS,
			retrySchedule: env.WEBHOOK_RETRY_SCHEDULE.split(',').map(Number),
			disableAfterSeconds: env.WEBHOOK_DISABLE_AFTER_SECONDS,
			concurrency: env.WEBHOOK_CONCURRENCY,
		},
		bootstrapAdmin:
			env.LATCHKEY_ADMIN_EMAIL && env.LATCHKEY_ADMIN_PASSWORD
				? { email: env.LATCHKEY_ADMIN_EMAIL, password: env.LATCHKEY_ADMIN_PASSWORD }
				: undefined,
	}
}

function mfaConfig(env: Env) {
	const { publicUrl, appUrl } = siteUrls(env)
	const site = new URL(appUrl ?? publicUrl)
	// Latchkey's own pages (sign-in with a passkey) run at PUBLIC_URL beside the frontend's; its origin counts
	// only where the RP ID allows it (a browser refuses an RP ID its origin does not end with).
	const origins = [...new Set([site.origin, new URL(publicUrl).origin])]
	return {
		required: env.MFA_REQUIRED,
		rpId: env.WEBAUTHN_RP_ID ?? site.hostname,
		rpName: env.WEBAUTHN_RP_NAME ?? env.APP_NAME,
		origins: env.WEBAUTHN_ORIGINS === undefined ? origins : list(env.WEBAUTHN_ORIGINS),
		issuer: env.APP_NAME,
	}
}

function mailConfig(env: Env, production: boolean) {
	const { publicUrl, appUrl } = siteUrls(env)
	const page = (onApp: string, onPages: string) => (appUrl === undefined ? `${publicUrl}/${onPages}` : `${appUrl}/${onApp}`)
	return {
		/** The frontend, if there is one (APP_URL); the links below point at Latchkey's pages otherwise. */
		appUrl,
		appName: env.APP_NAME,
		verifyUrl: env.EMAIL_VERIFY_URL ?? page('verify-email', 'email-verification'),
		resetUrl: env.PASSWORD_RESET_URL ?? page('reset-password', 'password-reset'),
		smtpUrl: env.SMTP_URL,
		from: env.MAIL_FROM ?? `${JSON.stringify(env.APP_NAME)} <no-reply@${new URL(appUrl ?? publicUrl).hostname}>`,
		templatesDir: env.MAIL_TEMPLATES_DIR,
		verification: env.EMAIL_VERIFICATION,
		resendSeconds: env.MAIL_RESEND_SECONDS,
		verificationTtlSeconds: env.EMAIL_VERIFICATION_TTL_SECONDS,
		recoveryTtlSeconds: env.RECOVERY_TTL_SECONDS,
		/** Sign-in with a code mailed to the account (EMAIL_CODE_SIGN_IN). */
		codeSignIn: env.EMAIL_CODE_SIGN_IN,
		recoveryUrl: env.RECOVERY_URL ?? page('recovery', 'recovery'),
		/** The page an organization invitation's mail links to, its token in the fragment (INVITATION_URL). */
		invitationUrl: env.INVITATION_URL ?? page('invitation', 'invitation'),
		recoveryReviewSeconds: env.RECOVERY_REVIEW_SECONDS,
		/** Without SMTP in development and tests, each mail goes to the log instead. */
		toLog: env.SMTP_URL === undefined && !production,
	}
}
