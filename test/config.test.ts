import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { join } from 'node:path'
import { ConfigError, EnvSchema, loadConfig } from '../src/config/env'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const DATA_KEY = Buffer.alloc(32, 7).toString('base64')

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

	test('production requires JWT_SECRET', () => {
		expect(problemsOf({ NODE_ENV: 'production' })).toEqual([
			'JWT_SECRET: required when NODE_ENV=production (at least 32 bytes)',
			'DATA_ENCRYPTION_KEY: required when NODE_ENV=production (32 random bytes, base64: openssl rand -base64 32)',
		])
	})

	test('production turns the docs off and allows no cross-origin callers unless configured', () => {
		const config = loadConfig({ NODE_ENV: 'production', JWT_SECRET: 'x'.repeat(32), DATA_ENCRYPTION_KEY: DATA_KEY })
		expect(config.docsEnabled).toBe(false)
		expect(config.cors.origins).toEqual([])
		expect(loadConfig({ NODE_ENV: 'production', JWT_SECRET: 'x'.repeat(32), DATA_ENCRYPTION_KEY: DATA_KEY, DOCS_ENABLED: 'true' }).docsEnabled).toBe(true)
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
		expect(config.mfa).toEqual({ required: 'admins', rpId: 'app.example.com', rpName: 'Latchkey', origins: ['https://app.example.com'], issuer: 'Latchkey' })
	})

	test('each provider in OIDC_PROVIDERS needs its issuer, client id and secret; production wants https and PUBLIC_URL; a secret is never echoed', () => {
		expect(problemsOf({ OIDC_PROVIDERS: 'acme', OIDC_ACME_CLIENT_SECRET: 'the-client-secret-value' })).toEqual([
			"OIDC_ACME_ISSUER: expected the provider's issuer URL",
			'OIDC_ACME_CLIENT_ID: required for the provider acme',
		])
		const production = { NODE_ENV: 'production', JWT_SECRET: 'x'.repeat(32), DATA_ENCRYPTION_KEY: DATA_KEY, OIDC_PROVIDERS: 'acme' }
		const acme = { OIDC_ACME_ISSUER: 'http://idp.example.com', OIDC_ACME_CLIENT_ID: 'latchkey', OIDC_ACME_CLIENT_SECRET: 'the-client-secret-value', OIDC_ACME_SCOPES: 'email profile' }
		const problems = problemsOf({ ...production, ...acme })
		expect(problems).toEqual([
			'OIDC_ACME_ISSUER: expected https:// when NODE_ENV=production (got "http://idp.example.com")',
			'OIDC_ACME_SCOPES: expected a space-separated list that includes openid (got "email profile")',
			'PUBLIC_URL: required when NODE_ENV=production and OIDC_PROVIDERS is set (providers call back to it)',
		])
		expect(problems.join('\n')).not.toContain('the-client-secret-value')
		expect(problemsOf({ ...production, ...acme, OIDC_ACME_ISSUER: 'https://idp.example.com', OIDC_ACME_SCOPES: 'openid email' })).toEqual([
			'PUBLIC_URL: required when NODE_ENV=production and OIDC_PROVIDERS is set (providers call back to it)',
		])
		const config = loadConfig({ OIDC_PROVIDERS: 'acme,google', ...acme, OIDC_ACME_SCOPES: 'openid email', OIDC_ACME_LABEL: 'ACME Corp', OIDC_GOOGLE_ISSUER: 'https://accounts.google.com', OIDC_GOOGLE_CLIENT_ID: 'g', OIDC_GOOGLE_CLIENT_SECRET: 's' })
		expect(config.oidc.providers.map(({ id, label, scopes }) => ({ id, label, scopes }))).toEqual([
			{ id: 'acme', label: 'ACME Corp', scopes: 'openid email' },
			{ id: 'google', label: 'Google', scopes: 'openid email profile' },
		])
		expect(config.oidc.redirectUrls).toEqual(['http://localhost:5173/*'])
	})
})
