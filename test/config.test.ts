import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ConfigError, EnvSchema, loadConfig } from '../src/config/env'
import { TEST_OAUTH_SIGNING_KEY } from './support/oauth-key'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const DATA_KEY = Buffer.alloc(32, 7).toString('base64')
/** What production requires from the environment, all of it. */
const PRODUCTION = {
	NODE_ENV: 'production',
	JWT_SECRET: 'x'.repeat(32),
	DATA_ENCRYPTION_KEY: DATA_KEY,
	OAUTH_SIGNING_KEY: TEST_OAUTH_SIGNING_KEY,
	PUBLIC_URL: 'https://auth.example.com',
}
const OAUTH_KEY_REQUIRED =
	'OAUTH_SIGNING_KEY: required (or OAUTH_SIGNING_KEY_FILE) when NODE_ENV=production (an RSA private key of at least 2048 bits, PEM: openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048)'
const PUBLIC_URL_REQUIRED = "PUBLIC_URL: required when NODE_ENV=production (the provider's issuer, provider callbacks and links to its pages)"

const problemsOf = (env: Record<string, string>) => {
	try {
		loadConfig(env)
	} catch (error) {
		if (error instanceof ConfigError) return error.problems
		throw error
	}
	return []
}

describe('configuration', () => {
	test('an empty environment gives the documented defaults', () => {
		const config = loadConfig({})
		expect(config.port).toBe(3000)
		expect(config.host).toBe('0.0.0.0')
		expect(config.database).toEqual({ kind: 'pglite', dataDir: './data' })
		expect(config.jwt).toMatchObject({ algorithm: 'HS256', issuer: 'latchkey', audience: 'latchkey', accessTtlSeconds: 900 })
		expect(config.jwt.refreshTtlSeconds).toBe(2_592_000)
		expect(config.jwt.reuseGraceSeconds).toBe(10)
		expect(config.rateLimit).toMatchObject({ max: 300, authMax: 10, windowSeconds: 60 })
		expect(config.lockout).toEqual({ threshold: 5, windowSeconds: 900, lockSeconds: 900 })
		expect(config.bodyLimitBytes).toBe(65_536)
		expect(config.cors.origins).toEqual(['*'])
		expect(config.docsEnabled).toBe(true)
		expect(config.signupEnabled).toBe(true)
		expect(config.password.minLength).toBe(8)
	})

	test('DATABASE_URL selects PostgreSQL with the pool size', () => {
		const config = loadConfig({ DATABASE_URL: 'postgres://u@db:5432/app', DATABASE_POOL_MAX: '4' })
		expect(config.database).toEqual({ kind: 'postgres', url: 'postgres://u@db:5432/app', poolMax: 4 })
	})

	test('every bad value is reported, one line each, naming the variable and what it expects', () => {
		expect(
			problemsOf({ PORT: 'eighty', SIGNUP_ENABLED: 'maybe', RATE_LIMIT_MAX: '-1', ACCESS_TOKEN_TTL_SECONDS: '0', LOG_LEVEL: 'loud' }),
		).toEqual([
			'PORT: expected a whole number from 0 to 65535 (got "eighty")',
			'ACCESS_TOKEN_TTL_SECONDS: expected a whole number of at least 1 (got "0")',
			'SIGNUP_ENABLED: expected true or false (got "maybe")',
			'RATE_LIMIT_MAX: expected a whole number of at least 0 (got "-1")',
			'LOG_LEVEL: expected "debug" or "info" or "warn" or "error" or "silent" (got "loud")',
		])
	})

	test('fractions are not silently truncated', () => {
		expect(problemsOf({ PORT: '3000.5' })).toEqual(['PORT: expected a whole number from 0 to 65535 (got "3000.5")'])
	})

	test('zero turns off the limits and the lockout but not lifetimes', () => {
		expect(loadConfig({ RATE_LIMIT_MAX: '0', AUTH_RATE_LIMIT_MAX: '0', LOCKOUT_THRESHOLD: '0', REFRESH_REUSE_GRACE_SECONDS: '0' }).rateLimit.max).toBe(0)
		for (const name of ['REFRESH_TOKEN_TTL_SECONDS', 'LOCKOUT_SECONDS', 'LOCKOUT_WINDOW_SECONDS', 'PASSWORD_MIN_LENGTH', 'BODY_LIMIT_BYTES', 'RATE_LIMIT_WINDOW_SECONDS'])
			expect(problemsOf({ [name]: '0' })[0]).toStartWith(`${name}: expected a whole number`)
	})

	test('a short JWT_SECRET is refused, and its value is never echoed', () => {
		const problems = problemsOf({ JWT_SECRET: 'too-short-secret' })
		expect(problems).toEqual(['JWT_SECRET: expected at least 32 bytes'])
		expect(problems.join()).not.toContain('too-short-secret')
	})

	test('production requires JWT_SECRET, DATA_ENCRYPTION_KEY, OAUTH_SIGNING_KEY and PUBLIC_URL', () => {
		expect(problemsOf({ NODE_ENV: 'production' })).toEqual([
			'JWT_SECRET: required when NODE_ENV=production (at least 32 bytes)',
			'DATA_ENCRYPTION_KEY: required when NODE_ENV=production (32 random bytes, base64: openssl rand -base64 32)',
			OAUTH_KEY_REQUIRED,
			PUBLIC_URL_REQUIRED,
		])
		// The key may come from a file instead (read and checked at start, src/crypto/oauth-signing-key.ts).
		const { OAUTH_SIGNING_KEY: _key, ...withoutKey } = PRODUCTION
		expect(problemsOf(withoutKey)).toEqual([OAUTH_KEY_REQUIRED])
		expect(loadConfig({ ...withoutKey, OAUTH_SIGNING_KEY_FILE: '/etc/latchkey/oauth.pem' }).oauth.signingKey).toEqual({ pem: undefined, file: '/etc/latchkey/oauth.pem' })
		const { PUBLIC_URL: _url, ...withoutUrl } = PRODUCTION
		expect(problemsOf(withoutUrl)).toEqual([PUBLIC_URL_REQUIRED])
		// Mail without APP_URL is fine now: its links open Latchkey's pages.
		expect(loadConfig({ ...PRODUCTION, SMTP_URL: 'smtps://mail.example.com' }).mail.verifyUrl).toBe('https://auth.example.com/email-verification')
	})

	test('production turns the docs off and allows no cross-origin callers unless configured', () => {
		const config = loadConfig(PRODUCTION)
		expect(config.docsEnabled).toBe(false)
		expect(config.cors.origins).toEqual([])
		expect(loadConfig({ ...PRODUCTION, DOCS_ENABLED: 'true' }).docsEnabled).toBe(true)
	})

	test('more than one worker needs PostgreSQL', () => {
		expect(problemsOf({ WORKERS: '2' })[0]).toStartWith('WORKERS: the embedded database belongs to one process')
		expect(loadConfig({ WORKERS: '2', DATABASE_URL: 'postgres://db/app' }).workers).toBe(2)
	})

	test('a TRUST_PROXY entry that is not an address or range is refused', () => {
		expect(problemsOf({ TRUST_PROXY: '10.0.0.0/8, not-an-ip' })).toEqual(['TRUST_PROXY: "not-an-ip" is not an IP address or CIDR range'])
	})

	test('empty values count as unset', () => {
		expect(loadConfig({ PORT: '', DATA_DIR: '  ' }).port).toBe(3000)
	})

	test('the schema documents every setting', () => {
		for (const [name, schema] of Object.entries(EnvSchema.properties))
			expect({ name, documented: typeof (schema as { description?: unknown }).description === 'string' }).toEqual({ name, documented: true })
	})

	test('the service refuses to start on bad configuration: exit code 1 and a line per problem', () => {
		const run = Bun.spawnSync(['bun', join(import.meta.dir, '..', 'src', 'index.ts')], {
			env: { PATH: process.env.PATH ?? '', PORT: 'x', NODE_ENV: 'production' },
		})
		expect(run.exitCode).toBe(1)
		expect(run.stderr.toString().trim().split('\n')).toEqual([
			'latchkey: configuration: PORT: expected a whole number from 0 to 65535 (got "x")',
			'latchkey: configuration: JWT_SECRET: required when NODE_ENV=production (at least 32 bytes)',
			'latchkey: configuration: DATA_ENCRYPTION_KEY: required when NODE_ENV=production (32 random bytes, base64: openssl rand -base64 32)',
			`latchkey: configuration: ${OAUTH_KEY_REQUIRED}`,
			`latchkey: configuration: ${PUBLIC_URL_REQUIRED}`,
		])
	})

	test('an unknown command is a usage error: exit code 2', () => {
		const run = Bun.spawnSync(['bun', join(import.meta.dir, '..', 'src', 'index.ts'), 'frobnicate'])
		expect(run.exitCode).toBe(2)
		expect(run.stderr.toString()).toContain("unknown command 'frobnicate'")
	})

	test('DATA_ENCRYPTION_KEY and its retired keys must be 32 bytes of base64; WEBAUTHN_ORIGINS must be origins', () => {
		expect(problemsOf({ DATA_ENCRYPTION_KEY: Buffer.alloc(16).toString('base64') })).toEqual(['DATA_ENCRYPTION_KEY: expected 32 bytes in base64 (openssl rand -base64 32)'])
		expect(problemsOf({ DATA_ENCRYPTION_PREVIOUS_KEYS: `${DATA_KEY}, not-a-key` })).toEqual(['DATA_ENCRYPTION_PREVIOUS_KEYS: expected 32 bytes in base64 (openssl rand -base64 32)'])
		expect(problemsOf({ WEBAUTHN_ORIGINS: 'https://app.example.com/path' })).toEqual([
			'WEBAUTHN_ORIGINS: expected origins such as https://app.example.com (got "https://app.example.com/path")',
		])
		const config = loadConfig({ DATA_ENCRYPTION_KEY: DATA_KEY, APP_URL: 'https://app.example.com/base', MFA_REQUIRED: 'admins' })
		// Latchkey's own pages (PUBLIC_URL, here the development default) may use passkeys too.
		expect(config.mfa).toEqual({ required: 'admins', rpId: 'app.example.com', rpName: 'Latchkey', origins: ['https://app.example.com', 'http://localhost:3000'], issuer: 'Latchkey' })
	})

	test('each provider in OIDC_PROVIDERS needs its issuer, client id and secret; production wants https; a secret is never echoed', () => {
		expect(problemsOf({ OIDC_PROVIDERS: 'acme', OIDC_ACME_CLIENT_SECRET: 'the-client-secret-value' })).toEqual([
			"OIDC_ACME_ISSUER: expected the provider's issuer URL",
			'OIDC_ACME_CLIENT_ID: required for the provider acme',
		])
		const production = { ...PRODUCTION, OIDC_PROVIDERS: 'acme' }
		const acme = { OIDC_ACME_ISSUER: 'http://idp.example.com', OIDC_ACME_CLIENT_ID: 'latchkey', OIDC_ACME_CLIENT_SECRET: 'the-client-secret-value', OIDC_ACME_SCOPES: 'email profile' }
		const problems = problemsOf({ ...production, ...acme })
		expect(problems).toEqual([
			'OIDC_ACME_ISSUER: expected https:// when NODE_ENV=production (got "http://idp.example.com")',
			'OIDC_ACME_SCOPES: expected a space-separated list that includes openid (got "email profile")',
		])
		expect(problems.join('\n')).not.toContain('the-client-secret-value')
		expect(problemsOf({ ...production, ...acme, OIDC_ACME_ISSUER: 'https://idp.example.com', OIDC_ACME_SCOPES: 'openid email' })).toEqual([])
		const config = loadConfig({ OIDC_PROVIDERS: 'acme,google', ...acme, OIDC_ACME_SCOPES: 'openid email', OIDC_ACME_LABEL: 'ACME Corp', OIDC_GOOGLE_ISSUER: 'https://accounts.google.com', OIDC_GOOGLE_CLIENT_ID: 'g', OIDC_GOOGLE_CLIENT_SECRET: 's' })
		expect(config.oidc.providers.map(({ id, label, scopes }) => ({ id, label, scopes }))).toEqual([
			{ id: 'acme', label: 'ACME Corp', scopes: 'openid email' },
			{ id: 'google', label: 'Google', scopes: 'openid email profile' },
		])
		// Without APP_URL, a provider sign-in returns to Latchkey's own pages only.
		expect(config.oidc.redirectUrls).toEqual(['http://localhost:3000/*'])
	})
})

describe('APP_URL, PUBLIC_URL and where links point', () => {
	test('without APP_URL (the default), mail links, passkeys and provider sign-ins point at Latchkey\'s pages at PUBLIC_URL, http://localhost:{PORT} outside production', () => {
		const config = loadConfig({ PORT: '8080' })
		expect(config.publicUrl).toBe('http://localhost:8080')
		expect(config.mail).toMatchObject({
			appUrl: undefined,
			verifyUrl: 'http://localhost:8080/email-verification',
			resetUrl: 'http://localhost:8080/password-reset',
			recoveryUrl: 'http://localhost:8080/recovery',
			from: '"Latchkey" <no-reply@localhost>',
		})
		expect(config.mfa).toMatchObject({ rpId: 'localhost', origins: ['http://localhost:8080'] })
		expect(config.oidc).toMatchObject({ publicUrl: 'http://localhost:8080', redirectUrls: ['http://localhost:8080/*'], fallbackUrl: 'http://localhost:8080/sign-in' })

		const behind = loadConfig({ PUBLIC_URL: 'https://auth.example.com' })
		expect(behind.publicUrl).toBe('https://auth.example.com')
		expect(behind.mail).toMatchObject({
			verifyUrl: 'https://auth.example.com/email-verification',
			resetUrl: 'https://auth.example.com/password-reset',
			recoveryUrl: 'https://auth.example.com/recovery',
			from: '"Latchkey" <no-reply@auth.example.com>',
		})
		expect(behind.mfa).toMatchObject({ rpId: 'auth.example.com', origins: ['https://auth.example.com'] })
		expect(behind.oidc).toMatchObject({ publicUrl: 'https://auth.example.com', redirectUrls: ['https://auth.example.com/*'], fallbackUrl: 'https://auth.example.com/sign-in' })
	})

	test('with APP_URL, they point at the frontend as before; the pages at PUBLIC_URL may still use passkeys', () => {
		const config = loadConfig({ APP_URL: 'https://app.example.com/', PUBLIC_URL: 'https://auth.example.com' })
		expect(config.mail).toMatchObject({
			appUrl: 'https://app.example.com',
			verifyUrl: 'https://app.example.com/verify-email',
			resetUrl: 'https://app.example.com/reset-password',
			recoveryUrl: 'https://app.example.com/recovery',
			from: '"Latchkey" <no-reply@app.example.com>',
		})
		expect(config.mfa).toMatchObject({ rpId: 'app.example.com', origins: ['https://app.example.com', 'https://auth.example.com'] })
		expect(config.oidc).toMatchObject({ publicUrl: 'https://auth.example.com', redirectUrls: ['https://app.example.com/*'], fallbackUrl: 'https://app.example.com' })
	})

	test('settings of their own win over both defaults', () => {
		const urls = {
			EMAIL_VERIFY_URL: 'https://www.example.com/confirm',
			PASSWORD_RESET_URL: 'https://www.example.com/reset',
			RECOVERY_URL: 'https://www.example.com/help',
			WEBAUTHN_RP_ID: 'example.com',
			WEBAUTHN_ORIGINS: 'https://www.example.com',
			REDIRECT_URLS: 'https://www.example.com/callback',
			MAIL_FROM: 'Example <hello@example.com>',
		}
		for (const app of [{}, { APP_URL: 'https://app.example.com' }]) {
			const config = loadConfig({ ...app, ...urls, PUBLIC_URL: 'https://auth.example.com' })
			expect(config.mail).toMatchObject({ verifyUrl: urls.EMAIL_VERIFY_URL, resetUrl: urls.PASSWORD_RESET_URL, recoveryUrl: urls.RECOVERY_URL, from: urls.MAIL_FROM })
			expect(config.mfa).toMatchObject({ rpId: 'example.com', origins: ['https://www.example.com'] })
			expect(config.oidc.redirectUrls).toEqual(['https://www.example.com/callback'])
		}
	})

	test('PUBLIC_URL is an origin: a path or a trailing slash is refused', () => {
		for (const value of ['https://auth.example.com/', 'https://example.com/auth', 'auth.example.com'])
			expect(problemsOf({ PUBLIC_URL: value })).toEqual([`PUBLIC_URL: expected a string matching ^https?://[^\\s/]+$ (got ${JSON.stringify(value)})`])
	})
})

describe('the provider and its pages', () => {
	test('defaults: no dynamic registration, no key set (development makes one), devices polling every 5 s, no branding beyond APP_NAME', () => {
		const config = loadConfig({})
		expect(config.oauth).toEqual({ dynamicRegistration: false, devicePollSeconds: 5, signingKey: { pem: undefined, file: undefined } })
		expect(config.pages).toEqual({ dir: undefined, brandLogoUrl: undefined, brandColor: undefined, appName: 'Latchkey' })
	})

	test('set, they reach config.oauth and config.pages as they are', () => {
		const folder = mkdtempSync(join(tmpdir(), 'latchkey-pages-'))
		try {
			const config = loadConfig({
				OAUTH_DYNAMIC_REGISTRATION: 'true',
				OAUTH_SIGNING_KEY: TEST_OAUTH_SIGNING_KEY,
				OAUTH_DEVICE_POLL_SECONDS: '0.5',
				BRAND_LOGO_URL: 'https://cdn.example.com/logo.svg',
				BRAND_COLOR: '#0A7c5F',
				PAGES_DIR: folder,
				APP_NAME: 'Acme Vault',
			})
			expect(config.oauth).toEqual({ dynamicRegistration: true, devicePollSeconds: 0.5, signingKey: { pem: TEST_OAUTH_SIGNING_KEY.trim(), file: undefined } })
			expect(config.pages).toEqual({ dir: folder, brandLogoUrl: 'https://cdn.example.com/logo.svg', brandColor: '#0A7c5F', appName: 'Acme Vault' })
			expect(loadConfig({ BRAND_COLOR: '#fa0' }).pages.brandColor).toBe('#fa0')
			for (const logo of ['http://localhost:5174/logo.png', 'http://127.0.0.1/logo.png', 'http://[::1]:8080/logo.png'])
				expect(loadConfig({ BRAND_LOGO_URL: logo }).pages.brandLogoUrl).toBe(logo)
		} finally {
			rmSync(folder, { recursive: true, force: true })
		}
	})

	test('a bad value stops the start with a line naming it; the key is never echoed', () => {
		const folder = mkdtempSync(join(tmpdir(), 'latchkey-pages-'))
		try {
			writeFileSync(join(folder, 'a-file'), '')
			expect(
				problemsOf({
					OAUTH_DYNAMIC_REGISTRATION: 'yes',
					BRAND_COLOR: 'teal',
					BRAND_LOGO_URL: 'http://cdn.example.com/logo.svg',
					PAGES_DIR: join(folder, 'missing'),
				}),
			).toEqual([
				'OAUTH_DYNAMIC_REGISTRATION: expected true or false (got "yes")',
				'BRAND_COLOR: expected a string matching ^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$ (got "teal")',
				'BRAND_LOGO_URL: expected an https:// URL (http:// only on loopback) (got "http://cdn.example.com/logo.svg")',
				`PAGES_DIR: no folder at ${join(folder, 'missing')}`,
			])
			expect(problemsOf({ BRAND_COLOR: '#12345' })).toEqual(['BRAND_COLOR: expected a string matching ^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$ (got "#12345")'])
			for (const logo of ['http://cdn.example.com/logo.svg', 'javascript:alert(1)', 'https://user:pass@cdn.example.com/logo.svg', 'logo.svg'])
				expect(problemsOf({ BRAND_LOGO_URL: logo })).toEqual([`BRAND_LOGO_URL: expected an https:// URL (http:// only on loopback) (got ${JSON.stringify(logo)})`])
			expect(problemsOf({ PAGES_DIR: join(folder, 'a-file') })).toEqual([`PAGES_DIR: ${join(folder, 'a-file')} is not a folder`])
			const problems = problemsOf({ OAUTH_SIGNING_KEY: TEST_OAUTH_SIGNING_KEY, OAUTH_SIGNING_KEY_FILE: '/etc/latchkey/oauth.pem' })
			expect(problems).toEqual(['OAUTH_SIGNING_KEY: set OAUTH_SIGNING_KEY or OAUTH_SIGNING_KEY_FILE, not both'])
		} finally {
			rmSync(folder, { recursive: true, force: true })
		}
	})
})
