import { t } from 'elysia'
import type { Env } from '../../config/env'

/** The groups the settings are shown in: the sections of docs/configuration.md, in its order. */
export const SETTING_GROUPS = {
	server: 'Server and database',
	tokens: 'Tokens and sessions',
	limits: 'Passwords, rate limits and lockout',
	http: 'HTTP, documentation, metrics and logs',
	mail: 'Mail and its flows',
	factors: 'Second factors, passkeys and ways in',
	providers: 'Identity providers',
	provider: 'The provider and its pages',
	webhooks: 'Background jobs and webhooks',
	admin: 'The first admin',
} as const

export type SettingGroup = keyof typeof SETTING_GROUPS

/** Each setting's group; a Record over the schema's names, so that a new setting cannot go without one. */
export const GROUP_OF: Record<keyof Env, SettingGroup> = {
	PORT: 'server',
	HOST: 'server',
	WORKERS: 'server',
	NODE_ENV: 'server',
	DATABASE_URL: 'server',
	DATA_DIR: 'server',
	DATABASE_POOL_MAX: 'server',
	SHUTDOWN_TIMEOUT_SECONDS: 'server',
	PUBLIC_URL: 'server',
	JWT_ALGORITHM: 'tokens',
	JWT_SECRET: 'tokens',
	JWT_PRIVATE_KEY: 'tokens',
	JWT_PRIVATE_KEY_FILE: 'tokens',
	JWT_PREVIOUS_PUBLIC_KEYS: 'tokens',
	JWT_PREVIOUS_PUBLIC_KEYS_FILE: 'tokens',
	JWT_PREVIOUS_SECRET: 'tokens',
	JWT_ISSUER: 'tokens',
	JWT_AUDIENCE: 'tokens',
	ACCESS_TOKEN_TTL_SECONDS: 'tokens',
	REFRESH_TOKEN_TTL_SECONDS: 'tokens',
	REFRESH_REUSE_GRACE_SECONDS: 'tokens',
	SESSION_RETENTION_SECONDS: 'tokens',
	SESSIONS_PER_USER_MAX: 'tokens',
	SIGNUP_ENABLED: 'limits',
	ORGANIZATION_CREATION: 'limits',
	PASSWORD_MIN_LENGTH: 'limits',
	PASSWORD_HASH_MEMORY_KIB: 'limits',
	PASSWORD_HASH_TIME_COST: 'limits',
	PASSWORD_HASH_NICENESS: 'limits',
	RATE_LIMIT_MAX: 'limits',
	RATE_LIMIT_WINDOW_SECONDS: 'limits',
	AUTH_RATE_LIMIT_MAX: 'limits',
	LOCKOUT_THRESHOLD: 'limits',
	LOCKOUT_WINDOW_SECONDS: 'limits',
	LOCKOUT_SECONDS: 'limits',
	TRUST_PROXY: 'limits',
	REDIS_URL: 'limits',
	CORS_ORIGINS: 'http',
	BODY_LIMIT_BYTES: 'http',
	CONSOLE_ENABLED: 'http',
	DOCS_ENABLED: 'http',
	METRICS_ENABLED: 'http',
	METRICS_TOKEN: 'http',
	LOG_LEVEL: 'http',
	APP_URL: 'mail',
	APP_NAME: 'mail',
	EMAIL_VERIFY_URL: 'mail',
	PASSWORD_RESET_URL: 'mail',
	SMTP_URL: 'mail',
	MAIL_FROM: 'mail',
	MAIL_TEMPLATES_DIR: 'mail',
	EMAIL_VERIFICATION: 'mail',
	MAIL_RESEND_SECONDS: 'mail',
	EMAIL_VERIFICATION_TTL_SECONDS: 'mail',
	RECOVERY_TTL_SECONDS: 'mail',
	EMAIL_CODE_SIGN_IN: 'mail',
	DATA_ENCRYPTION_KEY: 'factors',
	DATA_ENCRYPTION_PREVIOUS_KEYS: 'factors',
	MFA_REQUIRED: 'factors',
	WEBAUTHN_RP_ID: 'factors',
	WEBAUTHN_RP_NAME: 'factors',
	WEBAUTHN_ORIGINS: 'factors',
	RECOVERY_URL: 'factors',
	INVITATION_URL: 'factors',
	RECOVERY_REVIEW_SECONDS: 'factors',
	REAUTHENTICATION_SECONDS: 'factors',
	OIDC_PROVIDERS: 'providers',
	REDIRECT_URLS: 'providers',
	OAUTH_SIGNING_KEY: 'provider',
	OAUTH_SIGNING_KEY_FILE: 'provider',
	OAUTH_DYNAMIC_REGISTRATION: 'provider',
	OAUTH_DEVICE_POLL_SECONDS: 'provider',
	BRAND_LOGO_URL: 'provider',
	BRAND_COLOR: 'provider',
	PAGES_DIR: 'provider',
	JOB_POLL_SECONDS: 'webhooks',
	JOB_RETRY_SECONDS: 'webhooks',
	WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'webhooks',
	WEBHOOK_TIMEOUT_SECONDS: 'webhooks',
	WEBHOOK_RETRY_SCHEDULE: 'webhooks',
	WEBHOOK_DISABLE_AFTER_SECONDS: 'webhooks',
	WEBHOOK_CONCURRENCY: 'webhooks',
	LATCHKEY_ADMIN_EMAIL: 'admin',
	LATCHKEY_ADMIN_PASSWORD: 'admin',
}

const GroupId = t.Union(
	[
		t.Literal('server'),
		t.Literal('tokens'),
		t.Literal('limits'),
		t.Literal('http'),
		t.Literal('mail'),
		t.Literal('factors'),
		t.Literal('providers'),
		t.Literal('provider'),
		t.Literal('webhooks'),
		t.Literal('admin'),
	],
	{ description: 'the section of docs/configuration.md the setting is in' },
)

export namespace SettingsModel {
	export const setting = t.Object({
		name: t.String({ description: 'the environment variable', examples: ['ACCESS_TOKEN_TTL_SECONDS'] }),
		value: t.Union([t.String(), t.Number(), t.Boolean(), t.Null()], {
			description:
				'the value in effect; null when unset, and always null for a secret — but for a URL with credentials (DATABASE_URL, REDIS_URL, SMTP_URL), shown with its password (and any credential in its query) as `••••`',
		}),
		source: t.Union([t.Literal('environment'), t.Literal('default'), t.Literal('generated'), t.Literal('unset')], {
			description:
				'`environment`: set there; `default`: the schema’s default or one derived from other settings (PUBLIC_URL from PORT…); `generated`: a key made outside production because the environment left it unset (kept in DATA_DIR, or for the process alone with DATA_DIR=memory://); `unset`',
		}),
		set: t.Boolean({ description: 'whether it has a value (from the environment, a default or generated)' }),
		secret: t.Boolean({ description: 'a credential: its value is never returned, only whether it is set' }),
		description: t.String(),
		note: t.Union([t.String(), t.Null()], { description: 'what the value alone does not say, e.g. "generated in development, kept in DATA_DIR (keys/jwt-secret)"' }),
	})

	export const group = t.Object({ id: GroupId, title: t.String(), settings: t.Array(setting) })

	export const settings = t.Object({ groups: t.Array(group) })
}

export type SettingResource = typeof SettingsModel.setting.static
export type SettingsResource = typeof SettingsModel.settings.static
