import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { EnvSchema, loadConfig } from '../src/config/env'
import { keepDevelopmentSecrets } from '../src/config/secret-file'
import { createLogger } from '../src/log'
import { problem, startTestApp, TEST_ENV, type TestApp } from './support/app'
import { signUp, signUpAdmin, type Account } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

/** Secrets set in the app's environment: none of them may appear anywhere in an answer. */
const SECRETS = {
	METRICS_TOKEN: 'metrics-token-f3a9c1d7e5b2',
	JWT_PREVIOUS_SECRET: `previous-${'p'.repeat(40)}`,
	OIDC_ACME_CLIENT_SECRET: 'acme-client-secret-7d41b9',
	LATCHKEY_ADMIN_PASSWORD: 'first-admin-password-2c8e',
}
const DATABASE_PASSWORD = 'db-password-91fe3a'
const SMTP_PASSWORD = 'smtp-password-5be20c'

let t: TestApp
let admin: Account
let user: Account
beforeAll(async () => {
	t = await startTestApp({
		...SECRETS,
		// config.database is not what the test app uses (it is given its database), so any PostgreSQL URL will do.
		DATABASE_URL: `postgres://latchkey:${DATABASE_PASSWORD}@db.internal:5432/latchkey?sslmode=require`,
		SMTP_URL: `smtp://mailer:${SMTP_PASSWORD}@127.0.0.1:2525`,
		LATCHKEY_ADMIN_EMAIL: 'first-admin@example.test',
		OIDC_PROVIDERS: 'acme',
		OIDC_ACME_ISSUER: 'https://idp.example.test',
		OIDC_ACME_CLIENT_ID: 'acme-client',
		ACCESS_TOKEN_TTL_SECONDS: '600',
	})
	admin = await signUpAdmin(t)
	user = await signUp(t)
})
afterAll(() => t.close())

interface Setting {
	name: string
	value: string | number | boolean | null
	source: string
	set: boolean
	secret: boolean
	description: string
	note: string | null
}
const read = async () => {
	const res = await t.call('GET', '/api/settings', { token: admin.accessToken })
	expect(res.status).toBe(200)
	const groups = res.body.data.groups as Array<{ id: string; title: string; settings: Setting[] }>
	return { text: res.text, groups, settings: new Map(groups.flatMap((group) => group.settings).map((setting) => [setting.name, setting])) }
}

describe('GET /api/settings', () => {
	test('is refused without a token (401) and to a user who is not an admin (403)', async () => {
		const anonymous = await t.call('GET', '/api/settings')
		expect(anonymous.status).toBe(401)
		expect(anonymous.body).toEqual(problem('unauthorized', 401, '/api/settings', expect.any(String)))
		const plain = await t.call('GET', '/api/settings', { token: user.accessToken })
		expect(plain.status).toBe(403)
		expect(plain.body).toEqual(problem('forbidden', 403, '/api/settings', expect.stringMatching(/admin/i)))
		// Neither refusal says anything of the settings.
		for (const text of [anonymous.text, plain.text]) expect(text).not.toContain('ACCESS_TOKEN_TTL_SECONDS')
	})

	test('answers every setting of the schema once, and each provider setting, in the groups of docs/configuration.md', async () => {
		const { groups, settings } = await read()
		expect(groups.map((group) => group.id)).toEqual(['server', 'tokens', 'limits', 'http', 'mail', 'factors', 'providers', 'provider', 'webhooks', 'admin'])
		expect(groups.every((group) => group.title.length > 0 && group.settings.length > 0)).toBe(true)
		const names = groups.flatMap((group) => group.settings.map((setting) => setting.name))
		expect(new Set(names).size).toBe(names.length)
		const providerNames = ['ISSUER', 'CLIENT_ID', 'CLIENT_SECRET', 'SCOPES', 'LABEL'].map((suffix) => `OIDC_ACME_${suffix}`)
		expect(names.sort()).toEqual([...Object.keys(EnvSchema.properties), ...providerNames].sort())
		expect(groups.find((group) => group.id === 'providers')?.settings.map((setting) => setting.name)).toEqual(['OIDC_PROVIDERS', 'REDIRECT_URLS', ...providerNames])
		for (const setting of settings.values()) expect({ name: setting.name, described: setting.description.length > 0 }).toEqual({ name: setting.name, described: true })
	})

	test('never returns a set secret’s value, anywhere in the body: only that it is set', async () => {
		const { text, settings } = await read()
		for (const secret of [...Object.values(SECRETS), DATABASE_PASSWORD, SMTP_PASSWORD, TEST_ENV.JWT_SECRET, TEST_ENV.DATA_ENCRYPTION_KEY, TEST_ENV.OAUTH_SIGNING_KEY])
			expect(text).not.toContain(secret as string)
		// Nor a telling piece of one (the PEM key's body, a base64 key's start).
		expect(text).not.toContain('PRIVATE KEY')
		expect(text).not.toContain((TEST_ENV.DATA_ENCRYPTION_KEY as string).slice(0, 12))
		for (const name of [...Object.keys(SECRETS), 'JWT_SECRET', 'DATA_ENCRYPTION_KEY', 'OAUTH_SIGNING_KEY'])
			expect(settings.get(name)).toEqual({ name, value: null, source: 'environment', set: true, secret: true, description: expect.any(String), note: 'set, hidden' })
		// A URL with a password says where it points, the password masked.
		expect(settings.get('DATABASE_URL')).toMatchObject({ value: 'postgres://latchkey:••••@db.internal:5432/latchkey?sslmode=require', source: 'environment', set: true, secret: true })
		expect(settings.get('SMTP_URL')).toMatchObject({ value: 'smtp://mailer:••••@127.0.0.1:2525', secret: true, note: 'set; its password is hidden' })
		// A secret left unset says so.
		expect(settings.get('JWT_PRIVATE_KEY')).toEqual({ name: 'JWT_PRIVATE_KEY', value: null, source: 'unset', set: false, secret: true, description: expect.any(String), note: null })
	})

	test('reports defaults as defaults, derived ones included, and values from the environment as such', async () => {
		const { settings } = await read()
		expect(settings.get('REFRESH_TOKEN_TTL_SECONDS')).toMatchObject({ value: 2_592_000, source: 'default', set: true, secret: false })
		expect(settings.get('EMAIL_VERIFICATION')).toMatchObject({ value: 'optional', source: 'default' })
		expect(settings.get('SIGNUP_ENABLED')).toMatchObject({ value: true, source: 'default' })
		// Defaults that depend on other settings are shown as they are in effect.
		expect(settings.get('WEBAUTHN_RP_ID')).toMatchObject({ value: 'localhost', source: 'default' })
		expect(settings.get('EMAIL_VERIFY_URL')).toMatchObject({ value: 'http://localhost/email-verification', source: 'default' })
		// METRICS_ENABLED is off by default, but METRICS_TOKEN is set: it is on.
		expect(settings.get('METRICS_ENABLED')).toMatchObject({ value: true, source: 'default' })
		expect(settings.get('OIDC_ACME_SCOPES')).toMatchObject({ value: 'openid email profile', source: 'default' })
		expect(settings.get('OIDC_ACME_LABEL')).toMatchObject({ value: 'Acme', source: 'default' })
		// From the environment: the parsed value.
		expect(settings.get('ACCESS_TOKEN_TTL_SECONDS')).toMatchObject({ value: 600, source: 'environment', secret: false })
		expect(settings.get('LOCKOUT_THRESHOLD')).toMatchObject({ value: 0, source: 'environment' })
		expect(settings.get('OIDC_ACME_ISSUER')).toMatchObject({ value: 'https://idp.example.test', source: 'environment', secret: false })
		expect(settings.get('LATCHKEY_ADMIN_EMAIL')).toMatchObject({ value: 'first-admin@example.test', secret: false })
		// Unset, with no default.
		expect(settings.get('TRUST_PROXY')).toEqual({ name: 'TRUST_PROXY', value: null, source: 'unset', set: false, secret: false, description: expect.any(String), note: null })
	})
})

describe('the record of the settings', () => {
	test('says which development keys were generated and where they are kept, never their values', () => {
		const folder = mkdtempSync(join(tmpdir(), 'latchkey-settings-'))
		const dataDir = join(folder, 'data')
		const config = keepDevelopmentSecrets(loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent' }), createLogger('silent'))
		const byName = new Map(config.settings.map((setting) => [setting.name, setting]))
		expect(byName.get('JWT_SECRET')).toMatchObject({ value: null, source: 'generated', secret: true, note: 'generated in development, kept in DATA_DIR (keys/jwt-secret)' })
		expect(byName.get('DATA_ENCRYPTION_KEY')).toMatchObject({ value: null, source: 'generated', note: 'generated in development, kept in DATA_DIR (keys/data-encryption-key)' })
		expect(byName.get('OAUTH_SIGNING_KEY')).toMatchObject({ value: null, source: 'generated', note: 'generated in development, kept in DATA_DIR (keys/oauth-signing-key)' })
		const text = JSON.stringify(config.settings)
		for (const secret of [config.jwt.secret, config.dataKeys.current, config.oauth.signingKey.pem]) expect(text).not.toContain(secret as string)
		rmSync(folder, { recursive: true, force: true })
		// With DATA_DIR=memory:// each process makes its own and keeps none.
		const memory = loadConfig({ DATA_DIR: 'memory://' })
		expect(memory.settings.find((setting) => setting.name === 'DATA_ENCRYPTION_KEY')).toMatchObject({ source: 'generated', note: 'generated at random for this process only (DATA_DIR=memory://), not kept' })
	})

	test('masks a password in any URL, a secret’s or not, and credentials in its query', () => {
		const config = loadConfig({ ...TEST_ENV, REDIS_URL: 'rediss://default:redis-pass-77@cache.internal:6380/2', APP_URL: 'https://someone:app-pass-12@app.example.test' })
		const text = JSON.stringify(config.settings)
		expect(text).not.toContain('redis-pass-77')
		expect(text).not.toContain('app-pass-12')
		expect(config.settings.find((setting) => setting.name === 'REDIS_URL')?.value).toBe('rediss://default:••••@cache.internal:6380/2')
		expect(config.settings.find((setting) => setting.name === 'APP_URL')).toMatchObject({ value: 'https://someone:••••@app.example.test/', secret: false, note: 'its password is hidden' })
		const query = loadConfig({ ...TEST_ENV, DATABASE_URL: 'postgres://db.internal/latchkey?user=app&password=query-pass-3' })
		expect(query.settings.find((setting) => setting.name === 'DATABASE_URL')?.value).toBe('postgres://db.internal/latchkey?user=app&password=••••')
	})
})
