/**
 * The provider's RS256 key (OAUTH_SIGNING_KEY / OAUTH_SIGNING_KEY_FILE): read from PEM in either form, refused
 * when it cannot sign RS256 safely, and published in the JWKS beside the access tokens' keys, so that an ID
 * token verifies with a JWKS client that is not ours.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { createPrivateKey, generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { calculateJwkThumbprint, createRemoteJWKSet, exportPKCS8, generateKeyPair, jwtVerify, SignJWT } from 'jose'
import { loadOAuthSigningKey, OAuthKeyError } from '../src/crypto/oauth-signing-key'
import { createLogger } from '../src/log'
import { startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { signUp } from './support/fixtures'
import { TEST_OAUTH_SIGNING_KEY } from './support/oauth-key'

setDefaultTimeout(30_000)

const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi']
const silent = createLogger('silent')
const pkcs1 = createPrivateKey(TEST_OAUTH_SIGNING_KEY).export({ type: 'pkcs1', format: 'pem' }).toString()
const rsaPem = (bits: number) => generateKeyPairSync('rsa', { modulusLength: bits }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()

let folder: string
beforeAll(() => {
	folder = mkdtempSync(join(tmpdir(), 'latchkey-oauth-key-'))
})
afterAll(() => rmSync(folder, { recursive: true, force: true }))

/** The start-up line a key gives, or undefined when it loads. */
async function refusal(settings: { pem?: string; file?: string }): Promise<string | undefined> {
	try {
		await loadOAuthSigningKey(settings, silent)
		return undefined
	} catch (error) {
		if (error instanceof OAuthKeyError) return error.message
		throw error
	}
}

describe('loading the key', () => {
	test('a PKCS#8 and a PKCS#1 PEM of one key, inline or from a file, give one key with its RFC 7638 thumbprint as kid', async () => {
		const file = join(folder, 'key.pem')
		writeFileSync(file, pkcs1, { mode: 0o600 })
		const loaded = await Promise.all([
			loadOAuthSigningKey({ pem: TEST_OAUTH_SIGNING_KEY }, silent),
			loadOAuthSigningKey({ pem: pkcs1 }, silent),
			// One line with \n escapes, as some environments hold a PEM.
			loadOAuthSigningKey({ pem: TEST_OAUTH_SIGNING_KEY.trim().replaceAll('\n', '\\n') }, silent),
			loadOAuthSigningKey({ file }, silent),
		])
		const [first] = loaded
		if (!first) throw new Error('nothing loaded')
		for (const key of loaded) expect(key.publicJwk).toEqual(first.publicJwk)
		expect(first.kid).toBe(await calculateJwkThumbprint({ kty: 'RSA', n: String(first.publicJwk.n), e: String(first.publicJwk.e) }, 'sha256'))
		expect(Object.keys(first.publicJwk).sort()).toEqual(['alg', 'e', 'kid', 'kty', 'n', 'use'])
		expect(first.publicJwk).toMatchObject({ kty: 'RSA', kid: first.kid, alg: 'RS256', use: 'sig' })
		expect(first.privateJwk).toMatchObject({ ...first.publicJwk, d: expect.any(String), p: expect.any(String), q: expect.any(String), dp: expect.any(String), dq: expect.any(String), qi: expect.any(String) })
		expect(first.alg).toBe('RS256')
		expect(first.developmentPem).toBeUndefined()
		// What it signs verifies with the public half alone.
		const token = await new SignJWT({ sub: 'someone' }).setProtectedHeader({ alg: 'RS256', kid: first.kid }).sign(first.signingKey)
		expect((await jwtVerify(token, async () => first.publicJwk, { algorithms: ['RS256'] })).payload.sub).toBe('someone')
	})

	test('a key that is not RSA, too short, not a private key, encrypted or not PEM is refused with a line naming the setting, never quoting it', async () => {
		const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
		const ed = await exportPKCS8((await generateKeyPair('EdDSA', { extractable: true })).privateKey)
		const cutShort = createPrivateKey(TEST_OAUTH_SIGNING_KEY).export({ type: 'pkcs1', format: 'pem' }).toString().replace(/[A-Za-z0-9+/=]{64}\n/, '')
		const spki = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' }).toString()
		const encrypted = createPrivateKey(TEST_OAUTH_SIGNING_KEY).export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'secret' }).toString()
		const notPem = 'MIIEvQIBADANBgkqhkiG9w0BAQEFAASC'
		const cases: [string, string][] = [
			[ec, 'OAUTH_SIGNING_KEY: expected an RSA private key, got ec'],
			[ed, 'OAUTH_SIGNING_KEY: expected an RSA private key, got ed25519'],
			[rsaPem(1024), 'OAUTH_SIGNING_KEY: expected an RSA key of at least 2048 bits, got 1024'],
			[cutShort, 'OAUTH_SIGNING_KEY: expected an RSA private key in PEM (PKCS#8 or PKCS#1, not encrypted)'],
			[spki, 'OAUTH_SIGNING_KEY: expected an RSA private key in PEM (PKCS#8 or PKCS#1, not encrypted)'],
			[encrypted, 'OAUTH_SIGNING_KEY: expected an RSA private key in PEM (PKCS#8 or PKCS#1, not encrypted)'],
			[notPem, 'OAUTH_SIGNING_KEY: expected an RSA private key in PEM (PKCS#8 or PKCS#1, not encrypted)'],
		]
		for (const [pem, line] of cases) expect({ line: await refusal({ pem }) }).toEqual({ line })

		const file = join(folder, 'ec.pem')
		writeFileSync(file, ec)
		expect(await refusal({ file })).toBe('OAUTH_SIGNING_KEY_FILE: expected an RSA private key, got ec')
		expect(await refusal({ file: join(folder, 'missing.pem') })).toBe(`OAUTH_SIGNING_KEY_FILE: no file at ${join(folder, 'missing.pem')}`)
		expect(await refusal({ file: folder })).toStartWith(`OAUTH_SIGNING_KEY_FILE: cannot read ${folder} (`)
		// A 3072-bit key is fine.
		expect(await refusal({ pem: rsaPem(3072) })).toBeUndefined()
	})

	test('without a key (DATA_DIR=memory://) a random one lives as long as the process, with a warning, and is handed to the workers', async () => {
		const lines: string[] = []
		const log = createLogger('debug', { write: (line: string) => void lines.push(line) })
		const [one, two] = [await loadOAuthSigningKey({}, log), await loadOAuthSigningKey({}, log)]
		expect(one.kid).not.toBe(two.kid)
		expect(one.developmentPem).toStartWith('-----BEGIN PRIVATE KEY-----')
		// The PEM a worker gets through the environment gives the same key.
		expect((await loadOAuthSigningKey({ pem: one.developmentPem }, log)).publicJwk).toEqual(one.publicJwk)
		expect(lines.map((line) => JSON.parse(line).msg)).toEqual([
			'OAUTH_SIGNING_KEY is not set: using a random key for this process; ID tokens it signed stop verifying after a restart',
			'OAUTH_SIGNING_KEY is not set: using a random key for this process; ID tokens it signed stop verifying after a restart',
		])
	})

	test('the service refuses to start on a key it cannot use: exit code 1 and one line naming the setting', () => {
		const short = rsaPem(1024)
		const run = Bun.spawnSync(['bun', join(import.meta.dir, '..', 'src', 'index.ts')], {
			cwd: folder,
			env: { PATH: process.env.PATH ?? '', HOME: folder, DATA_DIR: 'memory://', PORT: '0', OAUTH_SIGNING_KEY: short },
		})
		expect({ code: run.exitCode, stderr: run.stderr.toString() }).toEqual({
			code: 1,
			stderr: 'latchkey: configuration: OAUTH_SIGNING_KEY: expected an RSA key of at least 2048 bits, got 1024\n',
		})
		for (const line of short.split('\n').filter((part) => part.length >= 16 && !part.startsWith('-----')))
			expect(run.stdout.toString() + run.stderr.toString()).not.toContain(line)
	})
})

describe('the JWKS', () => {
	let database: TestDatabase
	let t: TestApp
	beforeAll(async () => {
		database = await createTestDatabase()
		t = await startTestApp({}, database)
	})
	afterAll(async () => {
		await t.close()
		await database.drop()
	})

	test('lists the provider\'s RSA key at the root and under /api: its kid, use sig, alg RS256, and no private member', async () => {
		for (const path of ['/.well-known/jwks.json', '/api/.well-known/jwks.json']) {
			const res = await t.call('GET', path)
			expect(res.status).toBe(200)
			const rsa = (res.body.keys as Record<string, unknown>[]).filter((key) => key.kty === 'RSA')
			expect(rsa).toEqual([{ kty: 'RSA', n: expect.any(String), e: 'AQAB', kid: t.oauthKey.kid, alg: 'RS256', use: 'sig' }])
			for (const member of PRIVATE_MEMBERS) expect(res.text).not.toContain(`"${member}"`)
		}
		const expected = createPrivateKey(TEST_OAUTH_SIGNING_KEY).export({ format: 'jwk' })
		expect(t.oauthKey.publicJwk.n).toBe(expected.n)
	})

	test('beside the access tokens\' keys (EdDSA here), each under its own kid', async () => {
		const { privateKey } = await generateKeyPair('EdDSA', { extractable: true })
		const ed = await startTestApp({ JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: await exportPKCS8(privateKey) }, database)
		try {
			const { keys } = (await ed.call('GET', '/.well-known/jwks.json')).body as { keys: Record<string, unknown>[] }
			expect(keys.map(({ kid, alg, kty }) => ({ kid, alg, kty }))).toEqual([
				{ kid: ed.keys.kid, alg: 'EdDSA', kty: 'OKP' },
				{ kid: ed.oauthKey.kid, alg: 'RS256', kty: 'RSA' },
			])
		} finally {
			await ed.close()
		}
	})

	test('an ID token signed with the key verifies through the JWKS over HTTP (jose createRemoteJWKSet), and is no access token here', async () => {
		const account = await signUp(t)
		const idToken = await new SignJWT({ sub: account.id, aud: 'a-client', nonce: 'n-0S6_WzA2Mj' })
			.setProtectedHeader({ alg: 'RS256', kid: t.oauthKey.kid, typ: 'JWT' })
			.setIssuer(t.config.publicUrl)
			.setIssuedAt()
			.setExpirationTime('5m')
			.sign(t.oauthKey.signingKey)
		t.app.listen({ port: 0, hostname: '127.0.0.1' })
		try {
			const remote = createRemoteJWKSet(new URL(`http://127.0.0.1:${t.app.server?.port}/.well-known/jwks.json`))
			const { payload, protectedHeader } = await jwtVerify(idToken, remote, { issuer: 'http://localhost', audience: 'a-client', algorithms: ['RS256'] })
			expect({ sub: payload.sub, kid: protectedHeader.kid }).toEqual({ sub: account.id, kid: t.oauthKey.kid })
		} finally {
			await t.app.stop()
		}
		// The bearer guard knows the access tokens' keys only: an RS256 token under the provider's kid is refused.
		const res = await t.call('GET', '/api/users/me', { token: idToken })
		expect({ status: res.status, challenge: res.headers.get('www-authenticate') }).toEqual({ status: 401, challenge: 'Bearer realm="latchkey", error="invalid_token"' })
	})
})
