import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import {
	SignJWT,
	createLocalJWKSet,
	createRemoteJWKSet,
	exportJWK,
	exportPKCS8,
	exportSPKI,
	generateKeyPair,
	importPKCS8,
	importSPKI,
	jwtVerify,
	type JWK,
} from 'jose'
import { startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { jwtHeader, jwtPayload, signUp, type Account } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

let database: TestDatabase
beforeAll(async () => {
	database = await createTestDatabase()
})
afterAll(() => database.drop())

const newSecret = () => `secret-${crypto.randomUUID()}-${crypto.randomUUID()}`

async function keyPair(algorithm: 'ES256' | 'EdDSA' | 'ES384') {
	const { privateKey, publicKey } = await generateKeyPair(algorithm, { extractable: true })
	return { privatePem: await exportPKCS8(privateKey), publicPem: await exportSPKI(publicKey) }
}

const refused = { status: 401, challenge: 'Bearer realm="latchkey", error="invalid_token"' }
const me = async (t: TestApp, token: string) => {
	const res = await t.call('GET', '/api/users/me', { token })
	return { status: res.status, challenge: res.headers.get('www-authenticate') }
}

describe('HS256 (the default)', () => {
	test('publishes no key of its own at the root and under /api: only the provider\'s RS256 key (ID tokens)', async () => {
		const t = await startTestApp({}, database)
		for (const path of ['/.well-known/jwks.json', '/api/.well-known/jwks.json']) {
			const res = await t.call('GET', path)
			expect(res.status).toBe(200)
			expect(res.body).toEqual({ keys: [t.oauthKey.publicJwk] })
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
			expect(jwks.keys).toHaveLength(2)
			expect(jwks.keys[0]).toMatchObject({ kid: header.kid, alg: algorithm, use: 'sig' })
			expect(jwks.keys[0].d).toBeUndefined()
			expect(jwks.keys[1]).toEqual(t.oauthKey.publicJwk)
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
		const kids = (await after.call('GET', '/.well-known/jwks.json')).body.keys
			.map((key: { kid: string }) => key.kid)
			.filter((kid: string) => kid !== after.oauthKey.kid)
		expect(kids).toHaveLength(2)
		expect(kids).toContain(String(jwtHeader(account.accessToken).kid))

		const fresh = await signUp(after)
		expect(jwtHeader(fresh.accessToken).kid).toBe(kids[0])

		const retired = await startTestApp({ JWT_ALGORITHM: 'ES256', JWT_PRIVATE_KEY: next.privatePem }, database)
		expect(await me(retired, account.accessToken)).toEqual(refused)
		expect((await me(retired, fresh.accessToken)).status).toBe(200)
	})

	test('an HS256 secret rotates: tokens signed with the previous JWT_SECRET stay valid while it is JWT_PREVIOUS_SECRET', async () => {
		const before = await startTestApp({ JWT_SECRET: newSecret() }, database)
		const account = await signUp(before)
		const after = await startTestApp({ JWT_SECRET: newSecret(), JWT_PREVIOUS_SECRET: before.config.jwt.secret ?? '' }, database)
		expect((await me(after, account.accessToken)).status).toBe(200)
		const fresh = await signUp(after)
		expect(jwtHeader(fresh.accessToken).kid).toBe(after.keys.kid)
		// No secret is ever published.
		expect((await after.call('GET', '/.well-known/jwks.json')).body).toEqual({ keys: [after.oauthKey.publicJwk] })

		const retired = await startTestApp({ JWT_SECRET: after.config.jwt.secret ?? '' }, database)
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

describe('key rotation across algorithms', () => {
	/** The public keys an app publishes for its access tokens, by kid (the provider's RS256 key aside). */
	const published = async (t: TestApp) =>
		new Map(
			((await t.call('GET', '/.well-known/jwks.json')).body.keys as JWK[]).filter((jwk) => jwk.kid !== t.oauthKey.kid).map((jwk) => [String(jwk.kid), jwk]),
		)

	test('HS256 to EdDSA: tokens signed with the previous secret stay valid while it is JWT_PREVIOUS_SECRET, which is never published', async () => {
		const secret = newSecret()
		const ed = await keyPair('EdDSA')
		const before = await startTestApp({ JWT_ALGORITHM: 'HS256', JWT_SECRET: secret }, database)
		const account = await signUp(before)
		expect(jwtHeader(account.accessToken).alg).toBe('HS256')

		const after = await startTestApp({ JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: ed.privatePem, JWT_PREVIOUS_SECRET: secret }, database)
		expect((await me(after, account.accessToken)).status).toBe(200)
		const fresh = await signUp(after)
		expect(jwtHeader(fresh.accessToken)).toMatchObject({ alg: 'EdDSA', kid: after.keys.kid })
		expect((await me(after, fresh.accessToken)).status).toBe(200)
		const jwks = await published(after)
		expect([...jwks.keys()]).toEqual([after.keys.kid])
		expect(jwks.get(after.keys.kid)).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' })
		expect(JSON.stringify([...jwks.values()])).not.toContain(secret)

		// Without the previous secret, the old tokens are refused (everyone signs in again).
		const without = await startTestApp({ JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: ed.privatePem }, database)
		expect(await me(without, account.accessToken)).toEqual(refused)
		expect((await me(without, fresh.accessToken)).status).toBe(200)
	})

	test('EdDSA to ES256: tokens signed with the previous Ed25519 key stay valid, and JWKS lists it with alg EdDSA', async () => {
		const ed = await keyPair('EdDSA')
		const es = await keyPair('ES256')
		const before = await startTestApp({ JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: ed.privatePem }, database)
		const account = await signUp(before)
		const oldKid = String(jwtHeader(account.accessToken).kid)

		const after = await startTestApp(
			{ JWT_ALGORITHM: 'ES256', JWT_PRIVATE_KEY: es.privatePem, JWT_PREVIOUS_PUBLIC_KEYS: ed.publicPem },
			database,
		)
		expect((await me(after, account.accessToken)).status).toBe(200)
		const fresh = await signUp(after)
		expect(jwtHeader(fresh.accessToken)).toMatchObject({ alg: 'ES256', kid: after.keys.kid })
		const jwks = await published(after)
		expect([...jwks.keys()]).toEqual([after.keys.kid, oldKid])
		expect(jwks.get(after.keys.kid)).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' })
		expect(jwks.get(oldKid)).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' })

		// Another service verifying with that key set accepts both tokens, each under its own algorithm.
		const remote = createLocalJWKSet({ keys: [...jwks.values()] })
		for (const token of [account.accessToken, fresh.accessToken])
			expect((await jwtVerify(token, remote, { algorithms: ['ES256', 'EdDSA'], typ: 'at+jwt' })).payload.iss).toBe('latchkey')

		const without = await startTestApp({ JWT_ALGORITHM: 'ES256', JWT_PRIVATE_KEY: es.privatePem }, database)
		expect(await me(without, account.accessToken)).toEqual(refused)
	})

	test('EdDSA to HS256: the previous public key is still accepted and published, while the secret is not', async () => {
		const ed = await keyPair('EdDSA')
		const before = await startTestApp({ JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: ed.privatePem }, database)
		const account = await signUp(before)
		const after = await startTestApp({ JWT_ALGORITHM: 'HS256', JWT_SECRET: newSecret(), JWT_PREVIOUS_PUBLIC_KEYS: ed.publicPem }, database)
		expect((await me(after, account.accessToken)).status).toBe(200)
		expect((await me(after, (await signUp(after)).accessToken)).status).toBe(200)
		expect([...(await published(after)).values()]).toEqual([
			expect.objectContaining({ kid: jwtHeader(account.accessToken).kid, alg: 'EdDSA', crv: 'Ed25519' }),
		])
	})

	describe('each key verifies under its own algorithm only', () => {
		const secret = newSecret()
		let ed: Awaited<ReturnType<typeof keyPair>>
		let es: Awaited<ReturnType<typeof keyPair>>
		let t: TestApp
		let account: Account
		/** The kids of the current Ed25519 key, the previous P-256 key and the previous HS256 secret. */
		let kids: { ed: string; es: string; hs: string }
		beforeAll(async () => {
			ed = await keyPair('EdDSA')
			es = await keyPair('ES256')
			const hs = await startTestApp({ JWT_ALGORITHM: 'HS256', JWT_SECRET: secret }, database)
			const previousEs = await startTestApp({ JWT_ALGORITHM: 'ES256', JWT_PRIVATE_KEY: es.privatePem }, database)
			t = await startTestApp(
				{ JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: ed.privatePem, JWT_PREVIOUS_SECRET: secret, JWT_PREVIOUS_PUBLIC_KEYS: es.publicPem },
				database,
			)
			account = await signUp(t)
			kids = { ed: t.keys.kid, es: previousEs.keys.kid, hs: hs.keys.kid }
		})

		const forge = (header: { alg: string; kid?: string }, key: Uint8Array | CryptoKey) =>
			new SignJWT({ ...jwtPayload(account.accessToken), iat: Math.floor(Date.now() / 1000) })
				.setProtectedHeader({ typ: 'at+jwt', ...header })
				.sign(key)
		const edPrivate = () => importPKCS8(ed.privatePem, 'EdDSA')
		const esPrivate = () => importPKCS8(es.privatePem, 'ES256')

		test('the control: each key signing under its own algorithm and kid is accepted', async () => {
			expect((await me(t, await forge({ alg: 'EdDSA', kid: kids.ed }, await edPrivate()))).status).toBe(200)
			expect((await me(t, await forge({ alg: 'ES256', kid: kids.es }, await esPrivate()))).status).toBe(200)
			expect((await me(t, await forge({ alg: 'HS256', kid: kids.hs }, new TextEncoder().encode(secret)))).status).toBe(200)
		})

		test('an HS256 token keyed with a published public key (PEM or raw bytes) is refused, whatever kid it names', async () => {
			const raw = Buffer.from(String((await exportJWK(await importSPKI(ed.publicPem, 'EdDSA', { extractable: true }))).x), 'base64url')
			for (const key of [new TextEncoder().encode(ed.publicPem), new TextEncoder().encode(es.publicPem), new Uint8Array(raw)])
				for (const kid of [kids.ed, kids.es, kids.hs]) expect(await me(t, await forge({ alg: 'HS256', kid }, key))).toEqual(refused)
		})

		test('a token whose alg is not that of the key its kid names is refused', async () => {
			expect(await me(t, await forge({ alg: 'EdDSA', kid: kids.es }, await edPrivate()))).toEqual(refused)
			expect(await me(t, await forge({ alg: 'EdDSA', kid: kids.hs }, await edPrivate()))).toEqual(refused)
			expect(await me(t, await forge({ alg: 'ES256', kid: kids.ed }, await esPrivate()))).toEqual(refused)
			expect(await me(t, await forge({ alg: 'ES256', kid: kids.hs }, await esPrivate()))).toEqual(refused)
		})

		test('a token without a kid, or with an unknown one, is refused even when its signature is right', async () => {
			expect(await me(t, await forge({ alg: 'EdDSA' }, await edPrivate()))).toEqual(refused)
			expect(await me(t, await forge({ alg: 'HS256' }, new TextEncoder().encode(secret)))).toEqual(refused)
			expect(await me(t, await forge({ alg: 'EdDSA', kid: 'someone-else' }, await edPrivate()))).toEqual(refused)
		})

		test('algorithms of no configured key are refused: alg none, HS512 with the previous secret, ES384', async () => {
			const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
			const [, payload, signature] = account.accessToken.split('.')
			expect(await me(t, `${b64({ alg: 'none', typ: 'at+jwt', kid: kids.ed })}.${payload}.`)).toEqual(refused)
			expect(await me(t, `${b64({ alg: 'none', typ: 'at+jwt', kid: kids.ed })}.${payload}.${signature}`)).toEqual(refused)
			expect(await me(t, await forge({ alg: 'HS512', kid: kids.hs }, new TextEncoder().encode(secret)))).toEqual(refused)
			const p384 = await generateKeyPair('ES384')
			expect(await me(t, await forge({ alg: 'ES384', kid: kids.es }, p384.privateKey))).toEqual(refused)
		})
	})

	test('a previous public key of an unsupported kind (P-384) stops the service with a line naming the variable', async () => {
		const p384 = await keyPair('ES384')
		const run = Bun.spawnSync(['bun', `${import.meta.dir}/../src/index.ts`], {
			env: {
				PATH: process.env.PATH ?? '',
				JWT_SECRET: newSecret(),
				JWT_PREVIOUS_PUBLIC_KEYS: p384.publicPem,
				DATA_DIR: 'memory://',
				PORT: '0',
			},
		})
		expect(run.exitCode).toBe(1)
		expect(run.stderr.toString()).toContain(
			'latchkey: configuration: JWT_PREVIOUS_PUBLIC_KEYS: expected Ed25519 (EdDSA) or P-256 (ES256) public keys, got secp384r1',
		)
	})

	test('a JWT_PREVIOUS_SECRET shorter than 32 bytes stops the service with a line naming the variable', async () => {
		const run = Bun.spawnSync(['bun', `${import.meta.dir}/../src/index.ts`], {
			env: { PATH: process.env.PATH ?? '', JWT_SECRET: newSecret(), JWT_PREVIOUS_SECRET: 'too-short', DATA_DIR: 'memory://', PORT: '0' },
		})
		expect(run.exitCode).toBe(1)
		expect(run.stderr.toString()).toContain('JWT_PREVIOUS_SECRET: expected at least 32 bytes')
		expect(run.stderr.toString()).not.toContain('too-short')
	})
})
