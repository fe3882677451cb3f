import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { SignJWT, createRemoteJWKSet, exportPKCS8, exportSPKI, generateKeyPair, jwtVerify } from 'jose'
import { startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { jwtHeader, jwtPayload, signUp } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

let database: TestDatabase
beforeAll(async () => {
	database = await createTestDatabase()
})
afterAll(() => database.drop())

async function keyPair(algorithm: 'ES256' | 'EdDSA') {
	const { privateKey, publicKey } = await generateKeyPair(algorithm, { extractable: true })
	return { privatePem: await exportPKCS8(privateKey), publicPem: await exportSPKI(publicKey) }
}

const refused = { status: 401, challenge: 'Bearer realm="latchkey", error="invalid_token"' }
const me = async (t: TestApp, token: string) => {
	const res = await t.call('GET', '/api/users/me', { token })
	return { status: res.status, challenge: res.headers.get('www-authenticate') }
}

describe('HS256 (the default)', () => {
	test('publishes an empty key set at the root and under /api', async () => {
		const t = await startTestApp({}, database)
		for (const path of ['/.well-known/jwks.json', '/api/.well-known/jwks.json']) {
			const res = await t.call('GET', path)
			expect(res.status).toBe(200)
			expect(res.body).toEqual({ keys: [] })
			expect(res.headers.get('cache-control')).toBe('public, max-age=300')
		}
	})
})

for (const algorithm of ['ES256', 'EdDSA'] as const) {
	describe(`${algorithm} signing`, () => {
		let t: TestApp
		let keys: Awaited<ReturnType<typeof keyPair>>
		beforeAll(async () => {
			keys = await keyPair(algorithm)
			t = await startTestApp({ JWT_ALGORITHM: algorithm, JWT_PRIVATE_KEY: keys.privatePem }, database)
		})

		test('tokens carry the algorithm and a kid that the JWKS lists', async () => {
			const account = await signUp(t)
			const header = jwtHeader(account.accessToken)
			expect(header).toMatchObject({ alg: algorithm, typ: 'at+jwt' })
			const jwks = (await t.call('GET', '/.well-known/jwks.json')).body
			expect(jwks.keys).toHaveLength(1)
			expect(jwks.keys[0]).toMatchObject({ kid: header.kid, alg: algorithm, use: 'sig' })
			expect(jwks.keys[0].d).toBeUndefined()
			expect((await me(t, account.accessToken)).status).toBe(200)
		})

		test('another service verifies tokens with a JWKS client that is not ours (jose createRemoteJWKSet over HTTP)', async () => {
			const account = await signUp(t)
			t.app.listen({ port: 0, hostname: '127.0.0.1' })
			try {
				const remote = createRemoteJWKSet(new URL(`http://127.0.0.1:${t.app.server?.port}/.well-known/jwks.json`))
				const { payload, protectedHeader } = await jwtVerify(account.accessToken, remote, {
					issuer: 'latchkey',
					audience: 'latchkey',
					typ: 'at+jwt',
					algorithms: [algorithm],
				})
				expect(payload.sub).toBe(account.id)
				expect(protectedHeader.alg).toBe(algorithm)
			} finally {
				await t.app.stop()
			}
		})

		test('an HS256 token keyed with the public key is refused (algorithm confusion)', async () => {
			const account = await signUp(t)
			const forged = await new SignJWT(jwtPayload(account.accessToken))
				.setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid: String(jwtHeader(account.accessToken).kid) })
				.sign(new TextEncoder().encode(keys.publicPem))
			expect(await me(t, forged)).toEqual(refused)
		})

		test('a token signed by a key the service does not know is refused', async () => {
			const account = await signUp(t)
			const stranger = await generateKeyPair(algorithm)
			const forged = await new SignJWT(jwtPayload(account.accessToken))
				.setProtectedHeader({ alg: algorithm, typ: 'at+jwt', kid: String(jwtHeader(account.accessToken).kid) })
				.sign(stranger.privateKey)
			expect(await me(t, forged)).toEqual(refused)
		})
	})
}

describe('key rotation', () => {
	test('tokens signed by the previous key stay valid while it is listed, and the JWKS publishes both', async () => {
		const old = await keyPair('ES256')
		const next = await keyPair('ES256')
		const before = await startTestApp({ JWT_ALGORITHM: 'ES256', JWT_PRIVATE_KEY: old.privatePem }, database)
		const account = await signUp(before)

		const after = await startTestApp(
			{ JWT_ALGORITHM: 'ES256', JWT_PRIVATE_KEY: next.privatePem, JWT_PREVIOUS_PUBLIC_KEYS: old.publicPem },
			database,
		)
		expect((await me(after, account.accessToken)).status).toBe(200)
		const kids = (await after.call('GET', '/.well-known/jwks.json')).body.keys.map((key: { kid: string }) => key.kid)
		expect(kids).toHaveLength(2)
		expect(kids).toContain(String(jwtHeader(account.accessToken).kid))

		const fresh = await signUp(after)
		expect(jwtHeader(fresh.accessToken).kid).toBe(kids[0])

		const retired = await startTestApp({ JWT_ALGORITHM: 'ES256', JWT_PRIVATE_KEY: next.privatePem }, database)
		expect(await me(retired, account.accessToken)).toEqual(refused)
		expect((await me(retired, fresh.accessToken)).status).toBe(200)
	})

	test('a private key that is not PEM stops the service with a line naming the variable', async () => {
		const run = Bun.spawnSync(['bun', `${import.meta.dir}/../src/index.ts`], {
			env: { PATH: process.env.PATH ?? '', JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: 'not a key', DATA_DIR: 'memory://', PORT: '0' },
		})
		expect(run.exitCode).toBe(1)
		expect(run.stderr.toString()).toContain('latchkey: configuration: JWT_PRIVATE_KEY: expected a PKCS#8 PEM private key for EdDSA')
	})
})
