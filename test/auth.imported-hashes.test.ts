/**
 * Users imported from another service keep the password hash that service made (API.md, "Metadata, import and
 * export"): they sign in with their old password, and the hash is then replaced by argon2id. Each hash here is
 * made by the library that service itself uses — bcryptjs for GoTrue/Auth0's bcrypt, @noble/hashes for Better
 * Auth's scrypt, argon2i and Keycloak's argon2 (BouncyCastle's there), Firebase's published sample vector and the firebase-scrypt package, node:crypto's
 * pbkdf2 for Keycloak's and Django's PBKDF2 — and written into users.password_hash as the import will write it.
 * Work, not time, is asserted (no timed assertions): the cost classes a login hands to the hashing pool.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { pbkdf2Sync, randomBytes } from 'node:crypto'
import { argon2i, argon2id } from '@noble/hashes/argon2.js'
import { scryptAsync } from '@noble/hashes/scrypt.js'
import { bytesToHex } from '@noble/hashes/utils.js'
import bcrypt from 'bcryptjs'
import { eq } from 'drizzle-orm'
import { FirebaseScrypt } from 'firebase-scrypt'
import { users } from '../src/db/schema'
import { importedHash } from '../src/modules/auth/hash-schemes'
import { observeHashingJobs } from '../src/modules/auth/password'
import { problem, startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { signUp, uniqueEmail } from './support/fixtures'

setDefaultTimeout(60_000)

const BAD_CREDENTIALS = 'The email or password is incorrect'
const OLD_PASSWORD = 'the password I had before — ünïcode too'
const WRONG = 'not the password I had'
const OWN_HASH = '$argon2id$v=19$m=1024,t=1,p=1$' // TEST_ENV's settings

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64')
const b64NoPad = (bytes: Uint8Array) => b64(bytes).replace(/=+$/, '')

/**
 * bcrypt at cost 10, as GoTrue (Supabase; Go's x/crypto/bcrypt writes `$2a$`) and Auth0 (node's bcrypt, `$2b$`) store
 * it. bcryptjs writes `$2b$`; `$2a$` and `$2y$` name the same algorithm for such passwords, so the label is what differs.
 */
const bcryptHash = (password: string, minor: 'a' | 'b' | 'y') => bcrypt.hashSync(password, 10).replace(/^\$2b\$/, `$2${minor}$`)

/** Better Auth's hashPassword: @noble/hashes scrypt (N=16384, r=16, p=1, 64 bytes) of the NFKC password, the salt's hex text as salt. */
async function betterAuthHash(password: string): Promise<string> {
	const salt = bytesToHex(randomBytes(16))
	const key = await scryptAsync(password.normalize('NFKC'), salt, { N: 16384, r: 16, p: 1, dkLen: 64, maxmem: 128 * 16384 * 16 * 2 })
	const stored = importedHash.betterAuth(`${salt}:${bytesToHex(key)}`) // what the import writes for Better Auth's `salt:key`
	if (!stored) throw new Error("importedHash.betterAuth refused Better Auth's own hash")
	return stored
}

/** The sample of github.com/firebase/scrypt's README: the project's hash_config and user1's exported hash and salt. */
const FIREBASE_SAMPLE = {
	signerKey: 'jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==',
	saltSeparator: 'Bw==',
	rounds: 8,
	memCost: 14,
	salt: '42xEC+ixf3L2lw==',
	password: 'user1password',
	hash: 'lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==',
}
type FirebaseConfig = Pick<typeof FIREBASE_SAMPLE, 'signerKey' | 'saltSeparator' | 'rounds' | 'memCost'>
/** What the import writes (importedHash.firebase); the absurd ones it would refuse are written by hand. */
const firebaseStored = (config: FirebaseConfig, salt: string, hash: string) =>
	importedHash.firebase(config, { salt, passwordHash: hash }) ??
	`$firebase-scrypt$r=${config.rounds},m=${config.memCost}$${config.signerKey}$${config.saltSeparator}$${salt}$${hash}`

/** A Keycloak realm export's password credential, as `users[].credentials[]` holds it (Pbkdf2PasswordHashProvider). */
function keycloakCredential(password: string, algorithm: 'pbkdf2' | 'pbkdf2-sha256' | 'pbkdf2-sha512', hashIterations: number) {
	const salt = randomBytes(16)
	const digest = { pbkdf2: 'sha1', 'pbkdf2-sha256': 'sha256', 'pbkdf2-sha512': 'sha512' }[algorithm] // Keycloak's `pbkdf2` is PBKDF2WithHmacSHA1
	const value = pbkdf2Sync(password, salt, hashIterations, 64, digest) // 512-bit key, Keycloak's default
	return {
		type: 'password',
		createdDate: 1732000000000,
		secretData: JSON.stringify({ value: b64(value), salt: b64(salt), additionalParameters: {} }),
		credentialData: JSON.stringify({ hashIterations, algorithm, additionalParameters: {} }),
	}
}
/**
 * A Keycloak argon2 credential (Argon2PasswordHashProvider, the default since Keycloak 24 outside FIPS mode): the key of
 * BouncyCastle's argon2 made here with @noble/hashes, the passes in hashIterations, the rest in additionalParameters.
 */
function keycloakArgon2Credential(password: string, type: 'id' | 'i' = 'id', memory = 7168, iterations = 5, parallelism = 1) {
	const salt = randomBytes(16)
	const value = (type === 'i' ? argon2i : argon2id)(password, salt, { m: memory, t: iterations, p: parallelism, dkLen: 32 })
	return {
		type: 'password',
		createdDate: 1732000000000,
		secretData: JSON.stringify({ value: b64(value), salt: b64(salt), additionalParameters: {} }),
		credentialData: JSON.stringify({
			hashIterations: iterations,
			algorithm: 'argon2',
			additionalParameters: { hashLength: ['32'], memory: [String(memory)], type: [type], version: ['1.3'], parallelism: [String(parallelism)] },
		}),
	}
}

/** What the import writes for such a credential. */
function keycloakStored(credential: { secretData: string; credentialData: string }): string {
	const stored = importedHash.keycloak(credential)
	if (!stored) throw new Error('importedHash.keycloak refused a credential Keycloak writes')
	return stored
}

/** Django's PBKDF2PasswordHasher.encode: `pbkdf2_sha256$iterations$salt$base64(pbkdf2(password, salt, 32 bytes))`, Django 5.2's iterations. */
function djangoHash(password: string, iterations = 1_000_000): string {
	const salt = randomBytes(16).toString('base64url').slice(0, 22) // Django's salt: 22 letters and digits
	return `pbkdf2_sha256$${iterations}$${salt}$${b64(pbkdf2Sync(password, salt, iterations, 32, 'sha256'))}`
}

/** A PHC string as the reference argon2 library writes it, made with @noble/hashes. */
function argon2Phc(variant: 'argon2i' | 'argon2id', password: string, m: number, t: number, p: number): string {
	const salt = randomBytes(16)
	const key = (variant === 'argon2i' ? argon2i : argon2id)(password, salt, { m, t, p, dkLen: 32 })
	return `$${variant}$v=19$m=${m},t=${t},p=${p}$${b64NoPad(salt)}$${b64NoPad(key)}`
}

async function storedHash(database: TestDatabase, email: string): Promise<string | null> {
	const [row] = await database.handle.db.select({ hash: users.passwordHash }).from(users).where(eq(users.email, email))
	return row?.hash ?? null
}

/** An account whose password_hash is `hash`, as an import would leave it. */
async function importedAccount(t: TestApp, hash: string): Promise<string> {
	const account = await signUp(t)
	await t.database.handle.db.update(users).set({ passwordHash: hash }).where(eq(users.id, account.id))
	return account.email
}

const login = (t: TestApp, email: string, password: string) => t.call('POST', '/api/auth/login', { json: { email, password } })

/** The cost classes of the verifications `action` hands to the hashing pool, sorted ('unreadable' for none). */
async function verificationsDuring<T>(action: () => Promise<T>): Promise<{ result: T; classes: string[] }> {
	const classes: string[] = []
	const stop = observeHashingJobs((job) => {
		if (job.op === 'verify') classes.push(job.costClass ?? 'unreadable')
	})
	try {
		return { result: await action(), classes: classes.sort() }
	} finally {
		stop()
	}
}

describe('an imported user signs in with the old password, and the hash becomes argon2id', () => {
	let database: TestDatabase
	let t: TestApp
	beforeAll(async () => {
		database = await createTestDatabase()
	})
	afterAll(() => database.drop())
	// A fresh app for each test: a login check covers every cost class its hasher has learnt (password.ts), so one
	// app for the file made each login after the scrypt, Firebase and Keycloak tests verify all of them again (about
	// 0.3 s of CPU a login), which no test here is about. Each test leaves only argon2id hashes at the current settings
	// behind (its logins rehash them), so the next app samples no class from the database; learning classes up to
	// the bound and beyond it is test/auth.hash-settings.test.ts's, covering them all that of the last describe here.
	beforeEach(async () => {
		t = await startTestApp({}, database)
	})
	afterEach(() => t.close())

	const firebaseConfig: FirebaseConfig = { signerKey: b64(randomBytes(64)), saltSeparator: b64(randomBytes(1)), rounds: 8, memCost: 14 }
	const schemes: Array<[string, () => Promise<{ hash: string; password: string }>]> = [
		['bcrypt $2a$ (GoTrue / Supabase, bcryptjs)', async () => ({ hash: bcryptHash(OLD_PASSWORD, 'a'), password: OLD_PASSWORD })],
		['bcrypt $2b$ (Auth0, bcryptjs)', async () => ({ hash: bcryptHash(OLD_PASSWORD, 'b'), password: OLD_PASSWORD })],
		['bcrypt $2y$ (PHP, bcryptjs)', async () => ({ hash: bcryptHash(OLD_PASSWORD, 'y'), password: OLD_PASSWORD })],
		['Better Auth scrypt (@noble/hashes)', async () => ({ hash: await betterAuthHash(OLD_PASSWORD), password: OLD_PASSWORD })],
		[
			"Firebase modified scrypt (the README's sample vector)",
			async () => ({ hash: firebaseStored(FIREBASE_SAMPLE, FIREBASE_SAMPLE.salt, FIREBASE_SAMPLE.hash), password: FIREBASE_SAMPLE.password }),
		],
		[
			'Firebase modified scrypt (the firebase-scrypt package)',
			async () => {
				const salt = b64(randomBytes(12))
				const hash = await new FirebaseScrypt(firebaseConfig).hash(OLD_PASSWORD, salt)
				return { hash: firebaseStored(firebaseConfig, salt, hash), password: OLD_PASSWORD }
			},
		],
		['Keycloak pbkdf2-sha256 (27,500 iterations, a realm export credential)', async () => ({ hash: keycloakStored(keycloakCredential(OLD_PASSWORD, 'pbkdf2-sha256', 27_500)), password: OLD_PASSWORD })],
		['Keycloak pbkdf2-sha512 (210,000 iterations, a realm export credential)', async () => ({ hash: keycloakStored(keycloakCredential(OLD_PASSWORD, 'pbkdf2-sha512', 210_000)), password: OLD_PASSWORD })],
		['Keycloak pbkdf2 (HMAC-SHA1, 27,500 iterations, a realm export credential)', async () => ({ hash: keycloakStored(keycloakCredential(OLD_PASSWORD, 'pbkdf2', 27_500)), password: OLD_PASSWORD })],
		["Keycloak argon2 (argon2id, Keycloak 24's defaults m=7168 t=5 p=1, a realm export credential)", async () => ({ hash: keycloakStored(keycloakArgon2Credential(OLD_PASSWORD)), password: OLD_PASSWORD })],
		['Keycloak argon2 (argon2i, two lanes, a realm export credential)', async () => ({ hash: keycloakStored(keycloakArgon2Credential(OLD_PASSWORD, 'i', 1024, 2, 2)), password: OLD_PASSWORD })],
		['Django pbkdf2_sha256 (1,000,000 iterations)', async () => ({ hash: djangoHash(OLD_PASSWORD), password: OLD_PASSWORD })],
		['argon2i (PHC string)', async () => ({ hash: argon2Phc('argon2i', OLD_PASSWORD, 1024, 2, 1), password: OLD_PASSWORD })],
		['argon2id with two lanes (PHC string)', async () => ({ hash: argon2Phc('argon2id', OLD_PASSWORD, 1024, 2, 2), password: OLD_PASSWORD })],
	]

	test('twelve logins at once with the old password all succeed and keep their sessions; the stored hash ends an argon2id that verifies', async () => {
		const email = await importedAccount(t, bcryptHash(OLD_PASSWORD, 'b'))
		const answers = await Promise.all(Array.from({ length: 12 }, () => login(t, email, OLD_PASSWORD)))
		expect(answers.map((answer) => answer.status)).toEqual(Array(12).fill(200))
		const upgraded = await storedHash(database, email)
		expect(upgraded).toStartWith(OWN_HASH)
		expect(await Bun.password.verify(OLD_PASSWORD, upgraded ?? '')).toBe(true)
		// The sessions those logins made are all live: a rehash racing another changed no credential.
		const reads = await Promise.all(answers.map((answer) => t.call('GET', '/api/users/me', { token: answer.body.data.accessToken })))
		expect(reads.map((read) => read.status)).toEqual(Array(12).fill(200))
		expect((await login(t, email, OLD_PASSWORD)).status).toBe(200)
	})

	for (const [name, make] of schemes) {
		test(`${name}: a wrong password is refused and leaves the hash; the right one logs in and rehashes to argon2id`, async () => {
			const { hash, password } = await make()
			const email = await importedAccount(t, hash)

			const wrong = await login(t, email, WRONG)
			expect(wrong.status).toBe(401)
			expect(wrong.body).toEqual(problem('invalid-credentials', 401, '/api/auth/login', BAD_CREDENTIALS))
			expect(await storedHash(database, email)).toBe(hash)

			const right = await login(t, email, password)
			expect(right.status).toBe(200)
			expect(right.body.data.user.email).toBe(email)
			const upgraded = await storedHash(database, email)
			expect(upgraded).toStartWith(OWN_HASH)
			expect(await Bun.password.verify(password, upgraded ?? '')).toBe(true)

			// And from now on the password is checked against the argon2id hash.
			expect((await login(t, email, password)).status).toBe(200)
			expect((await login(t, email, WRONG)).status).toBe(401)
		})
	}

	test('bcrypt as node and Auth0 read it: only the first 72 bytes of a longer password count', async () => {
		const long = `${'x'.repeat(72)}and what follows`
		const email = await importedAccount(t, bcryptHash(long, 'b'))
		expect((await login(t, email, `${'x'.repeat(72)}whatever else`)).status).toBe(200)
	})

	test("a signed-in user whose hash is still imported (say, after a passkey sign-in) proves the old password as currentPassword to change it", async () => {
		const account = await signUp(t)
		const hash = keycloakStored(keycloakCredential(OLD_PASSWORD, 'pbkdf2-sha256', 27_500))
		await database.handle.db.update(users).set({ passwordHash: hash }).where(eq(users.id, account.id))
		const change = (currentPassword: string) =>
			t.call('PUT', '/api/users/me', { json: { email: account.email, name: 'Test User', password: 'a brand new passphrase', currentPassword }, token: account.accessToken })
		const wrong = await change(WRONG)
		expect(wrong.status).toBe(422)
		expect(wrong.body.errors).toEqual([{ pointer: '#/currentPassword', code: 'mismatch', detail: 'is not your current password' }])
		expect(await storedHash(database, account.email)).toBe(hash)
		expect((await change(OLD_PASSWORD)).status).toBe(200)
		expect(await storedHash(database, account.email)).toStartWith(OWN_HASH)
		expect((await login(t, account.email, 'a brand new passphrase')).status).toBe(200)
	})

	test('Better Auth normalizes to NFKC: the compatibility form of the password signs in too, as it did there', async () => {
		const email = await importedAccount(t, await betterAuthHash('ﬁve ﬁsh in a row'))
		expect((await login(t, email, 'five fish in a row')).status).toBe(200)
	})
})

test('importedHash refuses what it cannot read: another Keycloak algorithm, an argon2 credential without its parameters or in argon2d, broken JSON, a Better Auth hash that is not hex', () => {
	const credential = keycloakCredential(OLD_PASSWORD, 'pbkdf2-sha256', 1000)
	expect(importedHash.keycloak({ ...credential, credentialData: JSON.stringify({ hashIterations: 1000, algorithm: 'bcrypt' }) })).toBeUndefined()
	// An argon2 credential without its parameters, or in the argon2d variant Latchkey does not verify.
	expect(importedHash.keycloak({ ...credential, credentialData: JSON.stringify({ hashIterations: 5, algorithm: 'argon2' }) })).toBeUndefined()
	const argon2d = keycloakArgon2Credential(OLD_PASSWORD)
	expect(importedHash.keycloak({ ...argon2d, credentialData: argon2d.credentialData.replace('["id"]', '["d"]') })).toBeUndefined()
	expect(importedHash.keycloak(argon2d)).toStartWith('$argon2id$v=19$m=7168,t=5,p=1$')
	expect(importedHash.keycloak({ ...credential, secretData: '{not json' })).toBeUndefined()
	expect(importedHash.betterAuth('zz:zz')).toBeUndefined()
	expect(importedHash.firebase({ ...FIREBASE_SAMPLE, memCost: 40 }, { salt: FIREBASE_SAMPLE.salt, passwordHash: FIREBASE_SAMPLE.hash })).toBeUndefined()
})

describe('a malformed or absurd stored hash matches no password: no 500, no hash in the logs', () => {
	let database: TestDatabase
	let t: TestApp
	beforeAll(async () => {
		database = await createTestDatabase()
		t = await startTestApp({}, database)
	})
	afterAll(() => database.drop())

	const salt = b64(randomBytes(16))
	const key = b64(randomBytes(64))
	const cases: Array<[string, string, string]> = [
		['PBKDF2 with 4 billion iterations', `$pbkdf2-sha256$i=999999999$${salt}$${key}`, 'too-costly'],
		['Django PBKDF2 with 50 million iterations', `pbkdf2_sha256$50000000$abcdefgh$${b64(randomBytes(32))}`, 'too-costly'],
		['bcrypt at cost 31', `$2b$31$${'a'.repeat(53)}`, 'too-costly'],
		['Firebase scrypt with mem_cost 30', firebaseStored({ ...FIREBASE_SAMPLE, memCost: 30 }, FIREBASE_SAMPLE.salt, FIREBASE_SAMPLE.hash), 'too-costly'],
		['argon2id with 4 GiB', `$argon2id$v=19$m=4194304,t=3,p=1$${b64NoPad(randomBytes(16))}$${b64NoPad(randomBytes(32))}`, 'too-costly'],
		['a truncated bcrypt hash', '$2b$10$abcdefghijklmnopqrstuv', 'malformed'],
		['Better Auth scrypt that is not hex', '$better-auth-scrypt$zz-not-hex:0123', 'malformed'],
		['a PBKDF2 key of 4 bytes', `$pbkdf2-sha256$i=27500$${salt}$${b64(randomBytes(4))}`, 'malformed'],
		['an unknown scheme', '{SSHA}c2VjcmV0c2FsdA==', 'malformed'],
	]

	for (const [name, hash, reason] of cases) {
		test(`${name}: 401 invalid-credentials, the unknown email's work, a log line naming the scheme and never the hash`, async () => {
			const email = await importedAccount(t, hash)
			const before = t.logs.length
			const refused = await verificationsDuring(() => login(t, email, WRONG))
			const unknown = await verificationsDuring(() => login(t, uniqueEmail('nobody'), WRONG))
			expect(refused.result.status).toBe(401)
			expect(refused.result.body).toEqual(problem('invalid-credentials', 401, '/api/auth/login', BAD_CREDENTIALS))
			expect(refused.classes).toEqual(unknown.classes)
			expect(refused.classes).not.toContain('unreadable')
			expect(await storedHash(database, email)).toBe(hash)

			const lines = t.logs.slice(before)
			const warning = lines.map((line) => JSON.parse(line) as Record<string, unknown>).find((line) => line.msg === 'stored password hash refused: it matches no password')
			expect(warning).toMatchObject({ level: 'warn', reason })
			const everything = t.logs.join('\n')
			// Salts and keys (the scheme's name may well be logged).
			const secrets = hash.split(/[$:]/).filter((piece) => piece.length >= 16 && !['better-auth-scrypt', 'firebase-scrypt'].includes(piece))
			for (const part of secrets) expect(everything).not.toContain(part)
			expect(everything).not.toContain(hash)
		})
	}
})

describe('an imported account costs what an unknown email costs', () => {
	test("a fresh app's checks cover the schemes stored: an unknown email, an imported bcrypt account and a Keycloak one verify in the same cost classes", async () => {
		const database = await createTestDatabase()
		try {
			const seeding = await startTestApp({}, database)
			const bcryptEmail = await importedAccount(seeding, bcryptHash(OLD_PASSWORD, 'a'))
			const keycloakEmail = await importedAccount(seeding, keycloakStored(keycloakCredential(OLD_PASSWORD, 'pbkdf2-sha256', 27_500)))
			const current = await signUp(seeding)

			const t = await startTestApp({}, database)
			const expected = ['bcrypt:10', 'm=1024,t=1', 'pbkdf2-sha256:i=27500,blocks=2']
			const checks = {
				unknown: await verificationsDuring(() => login(t, uniqueEmail('nobody'), WRONG)),
				bcrypt: await verificationsDuring(() => login(t, bcryptEmail, WRONG)),
				keycloak: await verificationsDuring(() => login(t, keycloakEmail, WRONG)),
				current: await verificationsDuring(() => login(t, current.email, WRONG)),
			}
			for (const check of Object.values(checks)) {
				expect(check.result.status).toBe(401)
				expect(check.result.body).toEqual(checks.unknown.result.body)
				expect(check.classes).toEqual(expected)
			}
			expect((await login(t, keycloakEmail, OLD_PASSWORD)).status).toBe(200)
		} finally {
			await database.drop()
		}
	})
})
