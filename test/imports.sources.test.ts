/**
 * The readers of other services' exports (src/modules/imports/sources): each export file of test/fixtures/imports is
 * shaped as the service's own export writes it, with hashes made as that service makes them (make.ts). A reader
 * yields Latchkey's lines — compared whole — and every password hash it yields verifies the user's old password,
 * every TOTP secret makes the codes the user's app makes, and an item it cannot read is a line with a reason that
 * names no hash or secret. Pure readers: no database.
 */
import { describe, expect, test } from 'bun:test'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Secret, TOTP } from 'otpauth'
import { verifyStoredHash } from '../src/modules/auth/hash-schemes'
import { matchingStep } from '../src/modules/factors/totp'
import type { ImportSource, SourceLine, SourceOptions } from '../src/modules/imports/model'
import { readAuth0 } from '../src/modules/imports/sources/auth0'
import { readBetterAuth } from '../src/modules/imports/sources/better-auth'
import { readFirebase } from '../src/modules/imports/sources/firebase'
import { readKeycloak } from '../src/modules/imports/sources/keycloak'
import { jsonListItems, newOutline, ROOT } from '../src/modules/imports/sources/json-lists'
import { SourceFileError } from '../src/modules/imports/sources/shared'
import { readSupabase } from '../src/modules/imports/sources/supabase'
import { FIREBASE_SAMPLE, PASSWORDS } from './fixtures/imports/passwords'

const FIXTURES = join(import.meta.dir, 'fixtures', 'imports')
const fixture = (name: string) => Bun.file(join(FIXTURES, name))
// any: a fixture's JSON, read to build what is expected and variants of it (its shape is the service's, not a type of ours)
const fixtureJson = async (name: string): Promise<any> => JSON.parse(await fixture(name).text())
const asFile = (value: unknown) => new Blob([typeof value === 'string' ? value : JSON.stringify(value)])

const NO_OPTIONS: SourceOptions = { providers: {} }
const FIREBASE_PROJECT = { hashKey: FIREBASE_SAMPLE.hashKey, saltSeparator: FIREBASE_SAMPLE.saltSeparator, rounds: FIREBASE_SAMPLE.rounds, memCost: FIREBASE_SAMPLE.memCost }

async function read(source: ImportSource, file: Blob, options: SourceOptions = NO_OPTIONS): Promise<SourceLine[]> {
	const lines: SourceLine[] = []
	for await (const line of source(file, options)) lines.push(line)
	return lines
}
const userOf = (lines: SourceLine[], line: number) => {
	const found = lines.find((candidate) => candidate.line === line)?.user
	if (!found) throw new Error(`line ${line} was not read`)
	return found
}

/** Every string of an export file at least 16 characters long: hashes, salts, secrets (and longer names). */
function longStrings(value: unknown, found: string[] = []): string[] {
	if (typeof value === 'string') {
		if (value.length >= 16) found.push(value)
		try {
			longStrings(JSON.parse(value), found) // Keycloak's secretData is JSON text
		} catch {}
	} else if (Array.isArray(value)) for (const item of value) longStrings(item, found)
	else if (typeof value === 'object' && value !== null) for (const item of Object.values(value)) longStrings(item, found)
	return found
}
function expectNoSecretIn(lines: SourceLine[], source: unknown) {
	const errors = lines.flatMap((line) => (line.error ? [line.error] : []))
	expect(errors.length).toBeGreaterThan(0)
	for (const secret of longStrings(source)) for (const error of errors) expect(error).not.toContain(secret)
}

describe('Supabase: auth.users, auth.identities and auth.mfa_factors rows', () => {
	test('each user becomes a line: id kept, bcrypt hash, name from full_name, bookkeeping left out of appMetadata, identities and verified TOTP factors; no email or an encrypted secret fails its line', async () => {
		const file = await fixtureJson('supabase.json')
		const lines = await read(readSupabase, fixture('supabase.json'))
		expect(lines).toEqual([
			{
				line: 1,
				user: {
					id: '6f1d2c8e-3b4a-4c5d-9e6f-7a8b9c0d1e2f',
					email: 'ada@example.com',
					emailVerified: true,
					name: 'Ada Lovelace',
					status: 'active',
					createdAt: '2024-03-14T09:26:53.589Z',
					metadata: { full_name: 'Ada Lovelace', name: 'Ada', avatar_url: 'https://lh3.googleusercontent.com/a/ada', locale: 'en' },
					appMetadata: { plan: 'pro' },
					passwordHash: file.users[0].encrypted_password,
					// The 'email' identity is the account's own email; the google one is another provider's account.
					identities: [{ provider: 'google', subject: '108378469102938475610', email: 'ada.lovelace@gmail.com', createdAt: '2024-09-01T10:00:00.000Z' }],
					// The verified TOTP factor only: not the unverified one, not the phone factor.
					totpSecrets: [{ name: 'Pixel 8', secret: file.mfa_factors[0].secret }],
				},
			},
			{
				line: 2,
				user: {
					id: '7a2e3d9f-4c5b-4d6e-8f70-8b9cad1e2f30',
					email: 'grace@example.com',
					emailVerified: true,
					name: 'Grace Hopper',
					status: 'deactivated', // banned until 2124
					createdAt: '2024-04-02T12:00:00.000Z',
					metadata: file.users[1].raw_user_meta_data,
					identities: [{ provider: 'github', subject: '583231', email: 'grace@example.com', createdAt: '2024-04-02T12:00:00.000Z' }],
				},
			},
			{
				line: 3,
				user: {
					id: '8b3f4e0a-5d6c-4e7f-9081-9cadbe2f3041',
					email: 'left@example.com',
					emailVerified: false,
					status: 'deactivated', // soft-deleted
					createdAt: '2024-03-14T09:26:53.589Z',
					passwordHash: file.users[2].encrypted_password,
				},
			},
			{ line: 4, error: "has no email address (an anonymous user); Latchkey's accounts sign in by email" },
			{ line: 5, error: 'the TOTP factor "Authenticator app"\'s secret is not base32 (encrypted by GOTRUE_SECURITY_DB_ENCRYPTION?); decrypt it before the import' },
		])
		expect(verifyStoredHash(PASSWORDS.supabase.ada, userOf(lines, 1).passwordHash ?? '')).toBe(true)
		expect(verifyStoredHash('not the password', userOf(lines, 1).passwordHash ?? '')).toBe(false)
		expectNoSecretIn(lines, file)
	})

	test('a JSON array of auth.users rows: an upper-case UUID is kept in lower case, PostgreSQL timestamps are read, a ban that has ended leaves the user active', async () => {
		const file = await fixtureJson('supabase-users-array.json')
		const lines = await read(readSupabase, fixture('supabase-users-array.json'))
		expect(lines).toEqual([
			{
				line: 1,
				user: {
					id: 'be627b3d-8091-4a2b-c3d4-cfd0e1526374',
					email: 'Array.User@Example.com',
					emailVerified: true,
					name: 'Array User',
					status: 'active',
					createdAt: '2024-07-01T07:59:59.500Z',
					metadata: { name: 'Array User' },
					passwordHash: file[0].encrypted_password,
				},
			},
		])
		expect(verifyStoredHash(PASSWORDS.supabase.arrayUser, userOf(lines, 1).passwordHash ?? '')).toBe(true)
	})

	test('provider names: --provider renames, a name OIDC_PROVIDERS cannot take fails its line and asks for one, as does a bad rename', async () => {
		const file = await fixtureJson('supabase.json')
		const renamed = await read(readSupabase, fixture('supabase.json'), { providers: { google: 'google-workspace' } })
		expect(userOf(renamed, 1).identities?.map((identity) => identity.provider)).toEqual(['google-workspace'])
		expect(userOf(renamed, 2).identities?.map((identity) => identity.provider)).toEqual(['github'])

		const badRename = await read(readSupabase, fixture('supabase.json'), { providers: { github: 'GitHub Enterprise' } })
		expect(badRename[1]).toEqual({ line: 2, error: '--provider "github"="GitHub Enterprise" is not a name OIDC_PROVIDERS takes (a-z, 0-9 and -, a letter first, at most 32)' })

		// A SAML SSO identity: 'sso:' and a UUID make 40 characters, more than a provider name may have.
		file.identities[2].provider = 'sso:4c4f5e0a-1b2c-4d3e-8f4a-5b6c7d8e9f00'
		const sso = await read(readSupabase, asFile(file))
		expect(sso[1]).toEqual({ line: 2, error: 'the provider "sso:4c4f5e0a-1b2c-4d3e-8f4a-5b6c7d8e9f00" has no name OIDC_PROVIDERS takes: give one with --provider "sso:4c4f5e0a-1b2c-4d3e-8f4a-5b6c7d8e9f00"=NAME' })
		const named = await read(readSupabase, asFile(file), { providers: { 'sso:4c4f5e0a-1b2c-4d3e-8f4a-5b6c7d8e9f00': 'acme-sso' } })
		expect(userOf(named, 2).identities?.map((identity) => identity.provider)).toEqual(['acme-sso'])
	})

	test('a hash Latchkey cannot verify, a date that is no date, a row that is not an object: each fails its own line, the others are read', async () => {
		const file = await fixtureJson('supabase.json')
		file.users[0].encrypted_password = '$fbscrypt$v=1,n=14,r=8,p=1,ss=Bw==,sk=c2lnbmVy$c2FsdA==$aGFzaA=='
		file.users[1].created_at = 'yesterday'
		file.users[2] = 'not a row'
		const lines = await read(readSupabase, asFile(file))
		expect(lines.slice(0, 3)).toEqual([
			{ line: 1, error: 'encrypted_password is not a hash Latchkey verifies (bcrypt or argon2)' },
			{ line: 2, error: 'created_at is not a date' },
			{ line: 3, error: 'is not a JSON object' },
		])
		expectNoSecretIn(lines, file)
	})

	test("members named like JavaScript's own: a provider called constructor is no rename, a __proto__ member of app_metadata stays data", async () => {
		const file = (await fixture('supabase.json').text()).replace('"plan": "pro"', '"plan": "pro", "__proto__": { "role": "admin" }')
		const parsed = JSON.parse(file)
		parsed.identities[2].provider = 'constructor'
		const lines = await read(readSupabase, asFile(JSON.stringify(parsed)), { providers: {} })
		const appMetadata = userOf(lines, 1).appMetadata ?? {}
		expect(Object.hasOwn(appMetadata, '__proto__')).toBe(true)
		expect(Object.getPrototypeOf(appMetadata)).toBe(Object.prototype)
		expect((appMetadata as { role?: unknown }).role).toBeUndefined() // not inherited from a prototype set by the file
		expect(userOf(lines, 2).identities?.map((identity) => identity.provider)).toEqual(['constructor'])
	})

	test('a file that is not a Supabase export is refused as a whole, saying what was expected', async () => {
		const expected = 'expected a JSON array of auth.users rows, or { "users": […], "identities": […], "mfa_factors": […] }'
		await expect(read(readSupabase, asFile('not json'))).rejects.toThrow(new SourceFileError(`the file is not one JSON document (it begins with neither [ nor {); ${expected}`))
		await expect(read(readSupabase, asFile({ rows: [] }))).rejects.toThrow(new SourceFileError(`not a Supabase export: ${expected}`))
		await expect(read(readSupabase, asFile({ users: [], identities: {} }))).rejects.toThrow(new SourceFileError('not a Supabase export: identities is not a list of rows'))
	})
})

describe('Auth0: the user export job’s NDJSON, with the password hash export joined in', () => {
	test('each line becomes a line: ids kept in appMetadata.importedFrom, bcrypt hashes, profile and user_metadata, social and enterprise identities (not the database one), blocked users deactivated; a hash export line is read; blank lines count', async () => {
		const file = (await fixture('auth0-users.ndjson').text()).split('\n')
		const hashOf = (line: number) => JSON.parse(file[line - 1] ?? '').passwordHash
		const lines = await read(readAuth0, fixture('auth0-users.ndjson'))
		expect(lines).toEqual([
			{
				line: 1,
				user: {
					email: 'dana@example.com',
					emailVerified: true,
					name: 'Dana Scully',
					status: 'active',
					createdAt: '2024-03-14T09:26:53.589Z',
					metadata: { given_name: 'Dana', family_name: 'Scully', nickname: 'Scully', picture: 'https://s.gravatar.com/avatar/dana.png', theme: 'dark' },
					appMetadata: { plan: 'team', roles: ['editor'], importedFrom: { service: 'auth0', id: 'auth0|65f1c2d3e4b5a69788990011' } },
					passwordHash: hashOf(1),
				},
			},
			{
				line: 2,
				user: {
					email: 'fox@gmail.com',
					emailVerified: true,
					name: 'Fox Mulder',
					status: 'deactivated',
					createdAt: '2024-05-06T07:08:09.100Z',
					metadata: { picture: 'https://lh3.googleusercontent.com/a/fox' },
					appMetadata: { importedFrom: { service: 'auth0', id: 'google-oauth2|109876543210987654321' } },
					identities: [{ provider: 'google', subject: '109876543210987654321' }],
				},
			},
			{
				line: 3,
				user: {
					email: 'walter@example.com',
					emailVerified: false,
					name: 'walter@example.com',
					status: 'active',
					createdAt: '2024-06-01T00:00:00.000Z',
					appMetadata: { importedFrom: { service: 'auth0', id: 'auth0|660000000000000000000001' } },
					passwordHash: hashOf(3),
					// GitHub's numeric id as text; the enterprise OIDC connection by its connection's name.
					identities: [
						{ provider: 'github', subject: '1234567' },
						{ provider: 'acme-okta', subject: '00u1abcdEFGH2345' },
					],
				},
			},
			{
				line: 4,
				user: {
					email: 'hash.export@example.com',
					emailVerified: false,
					status: 'active',
					appMetadata: { importedFrom: { service: 'auth0', id: 'auth0|5dea9f9c82dd7c0e76e4ec93' } },
					passwordHash: hashOf(4),
				},
			},
			{ line: 6, error: "has no email address (a passwordless SMS user, or the export job was not asked for the email field); Latchkey's accounts sign in by email" },
			{ line: 7, error: 'is not JSON' },
		])
		expect(verifyStoredHash(PASSWORDS.auth0.database, userOf(lines, 1).passwordHash ?? '')).toBe(true)
		expect(verifyStoredHash(PASSWORDS.auth0.linked, userOf(lines, 3).passwordHash ?? '')).toBe(true)
		expect(verifyStoredHash(PASSWORDS.auth0.hashExport, userOf(lines, 4).passwordHash ?? '')).toBe(true)
		expect(verifyStoredHash(PASSWORDS.auth0.database, userOf(lines, 3).passwordHash ?? '')).toBe(false)
		expectNoSecretIn(lines, file.map((line) => line))
	})

	test('without identities exported, the identity user_id names is read; --provider renames by the name Auth0 gives', async () => {
		const line = JSON.stringify({ user_id: 'windowslive|4f1a2b3c4d5e6f70', email: 'live@example.com', email_verified: true })
		expect(await read(readAuth0, asFile(line))).toEqual([
			{ line: 1, user: { email: 'live@example.com', emailVerified: true, status: 'active', appMetadata: { importedFrom: { service: 'auth0', id: 'windowslive|4f1a2b3c4d5e6f70' } }, identities: [{ provider: 'windowslive', subject: '4f1a2b3c4d5e6f70' }] } },
		])
		const renamed = await read(readAuth0, asFile(line), { providers: { windowslive: 'microsoft' } })
		expect(userOf(renamed, 1).identities).toEqual([{ provider: 'microsoft', subject: '4f1a2b3c4d5e6f70' }])
	})

	test('streamed: a line longer than 1 MiB fails alone without being held, a long line under it is read whole across chunks, a hash that is not bcrypt fails its line', async () => {
		const long = JSON.stringify({ user_id: 'auth0|long', email: 'long@example.com', user_metadata: { notes: 'x'.repeat(600_000) } })
		const file = [
			JSON.stringify({ user_id: 'auth0|huge', email: 'huge@example.com', user_metadata: { notes: 'y'.repeat(2_000_000) } }),
			long,
			JSON.stringify({ user_id: 'auth0|md5', email: 'md5@example.com', passwordHash: '5f4dcc3b5aa765d61d8327deb882cf99' }),
		].join('\r\n')
		// On disk, so that the file comes in chunks as a real export does.
		const path = join(tmpdir(), `latchkey-auth0-${crypto.randomUUID()}.ndjson`)
		await Bun.write(path, file)
		const lines = await read(readAuth0, Bun.file(path)).finally(() => rm(path, { force: true }))
		expect(lines.map((line) => ({ line: line.line, error: line.error, email: line.user?.email }))).toEqual([
			{ line: 1, error: 'is longer than 1048576 characters', email: undefined },
			{ line: 2, error: undefined, email: 'long@example.com' },
			{ line: 3, error: 'passwordHash is not a bcrypt hash Latchkey verifies', email: undefined },
		])
		expect((userOf(lines, 2).metadata as { notes: string }).notes).toHaveLength(600_000)
	})
})

describe('Keycloak: a realm export with its users’ credentials', () => {
	test('each user becomes a line: id kept, PBKDF2 and argon2 credentials, OTP secrets as the app holds them, federated identities, roles and groups in appMetadata; a non-default OTP, a service account and a user without email fail', async () => {
		const file = await fixtureJson('keycloak-realm.json')
		const lines = await read(readKeycloak, fixture('keycloak-realm.json'))
		const otpText = (user: number, credential: number) => JSON.parse(file.users[user].credentials[credential].secretData).value as string
		expect(lines).toEqual([
			{
				line: 1,
				user: {
					id: '3f0e9a51-6c2b-4f8e-9d1a-2b3c4d5e6f70',
					email: 'alice@example.com',
					emailVerified: true,
					name: 'Alice Liddell',
					status: 'active',
					createdAt: '2024-03-14T09:26:53.589Z',
					metadata: { username: 'alice', firstName: 'Alice', lastName: 'Liddell', attributes: { locale: ['en'], department: ['Research'] } },
					// Not default-roles-acme or offline_access, which every user has.
					appMetadata: { roles: ['editor'], groups: ['/staff'], clientRoles: { 'acme-app': ['viewer'] } },
					passwordHash: expect.stringMatching(/^\$pbkdf2-sha256\$i=27500\$/),
					identities: [{ provider: 'google', subject: '112233445566778899001' }],
					totpSecrets: [{ name: 'iPhone', secret: new Secret({ buffer: new TextEncoder().encode(otpText(0, 1)).buffer as ArrayBuffer }).base32 }],
				},
			},
			{
				line: 2,
				user: {
					id: '4a1f0b62-7d3c-4091-ae2b-3c4d5e6f7081',
					email: 'bob@example.com',
					emailVerified: false,
					name: 'Bob',
					status: 'deactivated',
					createdAt: '2024-06-01T00:00:00.000Z',
					metadata: { username: 'bob', firstName: 'Bob' },
					passwordHash: expect.stringMatching(/^\$argon2id\$v=19\$m=7168,t=5,p=1\$/),
				},
			},
			{ line: 3, error: 'the OTP credential "YubiKey" makes 8-digit codes every 30 s with "HmacSHA1"; Latchkey\'s TOTP is 6 digits every 30 s with HmacSHA1, so the app\'s codes would no longer match' },
			{ line: 4, error: 'is the service account of the client "acme-backend", not a person: leave it out of the file' },
			{ line: 5, error: "has no email address (Keycloak lets an account have a username only); Latchkey's accounts sign in by email" },
			{
				line: 6,
				user: {
					id: '8e534fa6-b170-44d5-a263-708192a3b4c5',
					email: 'erin@example.com',
					emailVerified: true,
					name: 'Brockovich',
					status: 'active',
					createdAt: '2024-03-14T09:26:53.589Z',
					metadata: { username: 'erin', lastName: 'Brockovich' },
					passwordHash: expect.stringMatching(/^\$pbkdf2-sha1\$i=27500\$/),
					// secretEncoding BASE32: the text is the app's base32 already.
					totpSecrets: [{ name: 'Authenticator app', secret: otpText(5, 1) }],
				},
			},
		])
		expect(verifyStoredHash(PASSWORDS.keycloak.alice, userOf(lines, 1).passwordHash ?? '')).toBe(true)
		expect(verifyStoredHash(PASSWORDS.keycloak.bob, userOf(lines, 2).passwordHash ?? '')).toBe(true)
		expect(verifyStoredHash(PASSWORDS.keycloak.erin, userOf(lines, 6).passwordHash ?? '')).toBe(true)
		expect(verifyStoredHash(PASSWORDS.keycloak.alice, userOf(lines, 2).passwordHash ?? '')).toBe(false)
		expectNoSecretIn(lines, file)
	})

	test("the user's authenticator app keeps working: the code Keycloak's secret makes is the code of the converted secret, and Latchkey's TOTP check takes it", async () => {
		const file = await fixtureJson('keycloak-realm.json')
		const lines = await read(readKeycloak, fixture('keycloak-realm.json'))
		const original = JSON.parse(file.users[0].credentials[1].secretData).value as string
		const converted = userOf(lines, 1).totpSecrets?.[0]?.secret ?? ''
		// What Keycloak computes (HmacOTP over the secret text's UTF-8 bytes) and what the app computes from base32.
		const keycloakSide = new TOTP({ algorithm: 'SHA1', digits: 6, period: 30, secret: Secret.fromUTF8(original) })
		const appSide = new TOTP({ algorithm: 'SHA1', digits: 6, period: 30, secret: Secret.fromBase32(converted) })
		for (const timestamp of [0, 1_717_200_000_000, Date.now()]) {
			const code = keycloakSide.generate({ timestamp })
			expect(appSide.generate({ timestamp })).toBe(code)
			expect(matchingStep(converted, code, timestamp)).toBe(Math.floor(timestamp / 30_000))
		}
		const erin = userOf(lines, 6).totpSecrets?.[0]?.secret ?? ''
		const erinOriginal = JSON.parse(file.users[5].credentials[1].secretData).value as string
		const code = new TOTP({ secret: Secret.fromBase32(erinOriginal) }).generate({ timestamp: 1_717_200_000_000 })
		expect(matchingStep(erin, code, 1_717_200_000_000)).toBe(Math.floor(1_717_200_000_000 / 30_000))
	})

	test('a users file of a realm exported with --users different_files is read the same way', async () => {
		const lines = await read(readKeycloak, fixture('keycloak-acme-users-0.json'))
		expect(lines).toEqual([
			{
				line: 1,
				user: {
					id: '9f6450b7-c281-45e6-b374-8192a3b4c5d6',
					email: 'frank@example.com',
					emailVerified: false,
					status: 'active',
					createdAt: '2024-03-14T09:26:53.589Z',
					metadata: { username: 'frank' },
					passwordHash: expect.stringMatching(/^\$argon2id\$v=19\$m=7168,t=5,p=1\$/),
				},
			},
		])
		expect(verifyStoredHash(PASSWORDS.keycloak.partial, userOf(lines, 1).passwordHash ?? '')).toBe(true)
	})

	test('an HOTP or SHA-256 OTP, an unknown hash algorithm, argon2d: the line fails naming what, never the secret; a realm without users is refused', async () => {
		const file = await fixtureJson('keycloak-realm.json')
		const alice = file.users[0]
		const otp = JSON.parse(alice.credentials[1].credentialData)
		const variants = [
			{ ...alice, credentials: [{ ...alice.credentials[1], credentialData: JSON.stringify({ ...otp, subType: 'hotp' }) }] },
			{ ...alice, credentials: [{ ...alice.credentials[1], credentialData: JSON.stringify({ ...otp, algorithm: 'HmacSHA256' }) }] },
			{ ...alice, credentials: [{ ...alice.credentials[0], credentialData: JSON.stringify({ hashIterations: 1, algorithm: 'md5-custom', additionalParameters: {} }) }] },
			{ ...file.users[1], credentials: [{ ...file.users[1].credentials[0], credentialData: file.users[1].credentials[0].credentialData.replace('["id"]', '["d"]') }] },
		]
		const lines = await read(readKeycloak, asFile({ realm: 'acme', users: variants }))
		expect(lines).toEqual([
			{ line: 1, error: 'the OTP credential "iPhone" is "hotp"; Latchkey keeps time-based codes (TOTP) only' },
			{ line: 2, error: 'the OTP credential "iPhone" makes 6-digit codes every 30 s with "HmacSHA256"; Latchkey\'s TOTP is 6 digits every 30 s with HmacSHA1, so the app\'s codes would no longer match' },
			{ line: 3, error: 'its password credential ("md5-custom") is not one Latchkey verifies: pbkdf2-sha256, pbkdf2-sha512, pbkdf2, argon2 (id or i)' },
			{ line: 4, error: 'its password credential ("argon2") is not one Latchkey verifies: pbkdf2-sha256, pbkdf2-sha512, pbkdf2, argon2 (id or i)' },
		])
		expectNoSecretIn(lines, variants)
		await expect(read(readKeycloak, asFile({ realm: 'acme', enabled: true }))).rejects.toBeInstanceOf(SourceFileError)
	})
})

describe('Firebase: firebase auth:export, with the project’s hash parameters', () => {
	test("each user becomes a line: the modified scrypt hash with the project's parameters, custom claims as appMetadata.claims, provider accounts (not password or phone), disabled users deactivated; a UUID uid is kept", async () => {
		const file = await fixtureJson('firebase-users.json')
		const lines = await read(readFirebase, fixture('firebase-users.json'), { providers: {}, firebase: FIREBASE_PROJECT })
		expect(lines).toEqual([
			{
				line: 1,
				user: {
					email: 'user1@example.com',
					emailVerified: true,
					name: 'User One',
					status: 'active',
					createdAt: '2018-11-28T16:59:46.000Z',
					appMetadata: { claims: { admin: true, tier: 'gold' }, importedFrom: { service: 'firebase', id: 'Ky1n0XqgZVSq9NZ8d1p0I5wAlw23' } },
					passwordHash: `$firebase-scrypt$r=8,m=14$${FIREBASE_SAMPLE.hashKey}$${FIREBASE_SAMPLE.saltSeparator}$${FIREBASE_SAMPLE.salt}$${FIREBASE_SAMPLE.hash}`,
				},
			},
			{
				line: 2,
				user: {
					id: 'b7c3f0e2-1d4a-4e5b-8c6d-9e0f1a2b3c4d',
					email: 'gmail.user@gmail.com',
					emailVerified: true,
					name: 'Gmail User',
					status: 'deactivated',
					createdAt: '2022-04-15T05:20:00.000Z',
					metadata: { photoUrl: 'https://lh3.googleusercontent.com/a/gmail-user' },
					identities: [
						{ provider: 'google', subject: '104857392018475629301', email: 'gmail.user@gmail.com' },
						{ provider: 'oidc-acme-okta', subject: '00u9zyxw8765', email: 'gmail.user@acme.example' },
					],
				},
			},
			{ line: 3, error: "has no email address (a phone-number or anonymous account); Latchkey's accounts sign in by email" },
			{ line: 4, error: 'customAttributes is not a JSON object' },
		])
		expect(verifyStoredHash(PASSWORDS.firebase.user1, userOf(lines, 1).passwordHash ?? '')).toBe(true)
		expect(verifyStoredHash('user2password', userOf(lines, 1).passwordHash ?? '')).toBe(false)
		expectNoSecretIn(lines, file)
	})

	test('without the hash parameters, a user with a password fails saying which flags are missing and where they are; users without one are read', async () => {
		const lines = await read(readFirebase, fixture('firebase-users.json'))
		expect(lines[0]).toEqual({
			line: 1,
			error: "has a password, and the project's hash parameters were not given: --hash-key, --salt-separator, --rounds and --mem-cost (Firebase console → Authentication → Users → ⋮ → Password hash parameters)",
		})
		expect(lines[1]?.user?.email).toBe('gmail.user@gmail.com')
		const absurd = await read(readFirebase, fixture('firebase-users.json'), { providers: {}, firebase: { ...FIREBASE_PROJECT, memCost: 40 } })
		expect(absurd[0]).toEqual({ line: 1, error: 'its passwordHash and salt, with the hash parameters given, are not a Firebase scrypt hash Latchkey verifies (check --hash-key, --salt-separator, --rounds, --mem-cost)' })
		expectNoSecretIn([...lines, ...absurd], await fixtureJson('firebase-users.json'))
	})

	test("--provider renames Firebase's own provider id (google.com) before its normalised name", async () => {
		const lines = await read(readFirebase, fixture('firebase-users.json'), { providers: { 'google.com': 'google-consumer', 'oidc-acme-okta': 'okta' }, firebase: FIREBASE_PROJECT })
		expect(userOf(lines, 2).identities?.map((identity) => identity.provider)).toEqual(['google-consumer', 'okta'])
	})
})

describe('Better Auth: rows of its user and account tables', () => {
	test("each user becomes a line: its scrypt salt:key, the admin plugin's admin as admin, a ban still running deactivates, other providers' accounts as identities, other columns in appMetadata; a hash Latchkey cannot verify fails", async () => {
		const file = await fixtureJson('better-auth.json')
		const lines = await read(readBetterAuth, fixture('better-auth.json'))
		expect(lines).toEqual([
			{
				line: 1,
				user: {
					email: 'ada.admin@example.com',
					emailVerified: true,
					name: 'Ada Admin',
					role: 'admin',
					status: 'active',
					createdAt: '2024-05-01T10:00:00.000Z',
					metadata: { image: 'https://avatars.githubusercontent.com/u/1' },
					appMetadata: { stripeCustomerId: 'cus_Q1w2E3r4T5y6', importedFrom: { service: 'better-auth', id: 'Xq3v9ZkP0aLm2nB7cD4eF6gH8iJ1kL5m' } },
					passwordHash: `$better-auth-scrypt$${file.account[0].password}`,
					identities: [{ provider: 'github', subject: '583231', createdAt: '2024-08-01T10:00:00.000Z' }],
				},
			},
			{
				line: 2,
				user: {
					email: 'banned@example.com',
					emailVerified: false,
					name: 'Banned Until Later',
					role: 'user',
					status: 'deactivated',
					createdAt: '2024-06-01T10:00:00.000Z',
					appMetadata: { importedFrom: { service: 'better-auth', id: 'Yr4w0AlQ1bMn3oC8dE5fG7hI9jK2lM6n' } },
				},
			},
			{ line: 3, error: "the credential account's password is not a hash Latchkey verifies (Better Auth's scrypt salt:key, bcrypt or argon2)" },
		])
		expect(verifyStoredHash(PASSWORDS.betterAuth.ada, userOf(lines, 1).passwordHash ?? '')).toBe(true)
		// As Better Auth does, the password is NFKC-normalised: the compatibility form signs in too.
		expect(verifyStoredHash('five fish in a row', userOf(lines, 1).passwordHash ?? '')).toBe(true)
		expectNoSecretIn(lines, file)
	})

	test("snake_case columns of Better Auth's Drizzle schema on SQLite: integers for booleans, seconds for dates, a UUID id kept, an app's own bcrypt hash, custom roles in appMetadata.roles", async () => {
		const file = await fixtureJson('better-auth-drizzle-sqlite.json')
		const lines = await read(readBetterAuth, fixture('better-auth-drizzle-sqlite.json'))
		expect(lines).toEqual([
			{
				line: 1,
				user: {
					id: '0193f1c2-7a5e-7c3b-9d2e-5f6a7b8c9d0e',
					email: 'drizzle@example.com',
					emailVerified: true,
					name: 'Drizzle User',
					role: 'user',
					status: 'deactivated',
					createdAt: '2024-05-01T10:00:00.000Z',
					appMetadata: { username: 'drizzle', roles: ['editor'] },
					passwordHash: file.account[0].password,
					identities: [{ provider: 'discord', subject: '117', createdAt: '2024-05-01T10:01:40.000Z' }],
				},
			},
		])
		expect(verifyStoredHash(PASSWORDS.betterAuth.drizzle, userOf(lines, 1).passwordHash ?? '')).toBe(true)
	})

	test('a file without a user list is refused as a whole', async () => {
		await expect(read(readBetterAuth, asFile({ users_table: [] }))).rejects.toThrow(new SourceFileError('not a Better Auth export: expected { "user": [rows of the user table], "account": [rows of the account table] }'))
	})
})

describe('the JSON exports are streamed: each user list item cut out and parsed alone', () => {
	const items = async (file: Blob, wanted: string[], maxItemChars?: number) => {
		const outline = newOutline()
		const found: Array<{ list: string; index: number; value?: unknown; error?: string }> = []
		for await (const item of jsonListItems(file, new Set(wanted), outline, 'a test document', maxItemChars)) found.push(item.error ? { list: item.list, index: item.index, error: item.error.message } : item)
		return { found, outline: { root: outline.root, members: [...outline.members], lists: [...outline.lists] } }
	}

	test('strings holding brackets, quotes and escapes, nested lists, scalars before and after: the wanted list’s items, in order, each as JSON.parse reads it', async () => {
		const document = '\uFEFF { "realm" : "a]}\\"[{", "meta": {"a": [1, [2, {"b": "}"}]], "c": "\\\\"}, "users": [ {"x": "}\\\\", "y": ["]"]}, "a string item" , 42,null, [1,[2]], {"z": "\\u005d\\""} ], "n": -1.5e3, "t": true, "empty": [] }\n'
		const { found, outline } = await items(asFile(document), ['users'])
		expect(found).toEqual([
			{ list: 'users', index: 1, value: { x: '}\\', y: [']'] } },
			{ list: 'users', index: 2, value: 'a string item' },
			{ list: 'users', index: 3, value: 42 },
			{ list: 'users', index: 4, value: null },
			{ list: 'users', index: 5, value: [1, [2]] },
			{ list: 'users', index: 6, value: { z: ']"' } },
		])
		expect(outline).toEqual({ root: 'object', members: ['realm', 'meta', 'users', 'n', 't', 'empty'], lists: ['users', 'empty'] })
		expect((await items(asFile('[{"a":1},{"b":[2]}]'), [ROOT])).found).toEqual([
			{ list: ROOT, index: 1, value: { a: 1 } },
			{ list: ROOT, index: 2, value: { b: [2] } },
		])
	})

	test('a file on disk, read in chunks: items cut at any place across chunk edges come out whole', async () => {
		// Strings of every troublesome character at every length, so that chunk edges fall everywhere in them.
		const alphabet = ['"', '\\', ']', '}', '[', '{', ',', 'é', '😀', 'a', '\n']
		const users = Array.from({ length: 300 }, (_, n) => ({ n, text: Array.from({ length: 1000 + n * 37 }, (_, k) => alphabet[(k * 7 + n) % alphabet.length]).join(''), list: [[n], { deep: [n] }] }))
		const path = join(tmpdir(), `latchkey-json-lists-${crypto.randomUUID()}.json`)
		await Bun.write(path, JSON.stringify({ users, after: 'x' }))
		try {
			const { found } = await items(Bun.file(path), ['users'])
			expect(found.map((item) => item.value)).toEqual(users)
			expect(found.map((item) => item.index)).toEqual(users.map((_, n) => n + 1))
		} finally {
			await rm(path, { force: true })
		}
	})

	test('cut into two chunks at every byte, or into single bytes, a document with escapes, brackets in strings and multi-byte characters reads the same', async () => {
		const document = '{"a": "\\\\", "users": [{"s": "x\\\\\\"]}\\\\"}, "é😀\\"", [{"k": "\\\\"}], 7], "b": ["\\\\"]}'
		const bytes = new TextEncoder().encode(document)
		const chunked = (...parts: Uint8Array<ArrayBuffer>[]) => ({
			stream: () =>
				new ReadableStream<Uint8Array<ArrayBuffer>>({
					start(controller) {
						for (const part of parts) controller.enqueue(part)
						controller.close()
					},
				}),
		})
		const whole = (await items(asFile(document), ['users'])).found
		expect(whole.map((item) => item.value)).toEqual(JSON.parse(document).users)
		for (let cut = 1; cut < bytes.length; cut++) {
			const outline = newOutline()
			const found = []
			for await (const item of jsonListItems(chunked(bytes.slice(0, cut), bytes.slice(cut)), new Set(['users']), outline, 'a test document')) found.push(item)
			expect(found).toEqual(whole as never)
		}
		const found = []
		for await (const item of jsonListItems(chunked(...Array.from(bytes, (byte) => Uint8Array.of(byte))), new Set(['users']), newOutline(), 'a test document')) found.push(item)
		expect(found).toEqual(whole as never)
	})

	test('an item that is not JSON, or too long, fails alone; the items around it are read', async () => {
		const { found } = await items(asFile(`{"users": [{"a": 1}, {bad}, {"long": "${'x'.repeat(200)}"}, {"b": 2}]}`), ['users'], 100)
		expect(found).toEqual([
			{ list: 'users', index: 1, value: { a: 1 } },
			{ list: 'users', index: 2, error: 'is not JSON' },
			{ list: 'users', index: 3, error: 'is longer than 100 characters' },
			{ list: 'users', index: 4, value: { b: 2 } },
		])
	})

	test('a file that is not one JSON document is refused before a single user is read: cut short, text after it, a missing comma, empty', async () => {
		const whole = await fixture('firebase-users.json').text()
		const broken: Array<[string, string]> = [
			[whole.slice(0, Math.floor(whole.length * 0.8)), 'it ends before the document does'],
			[`${whole}{}`, 'text follows the document'],
			[whole.replace('"users": [', '"kind": "x" "users": ['), 'a comma or } is missing between members'],
			['', 'it is empty'],
		]
		for (const [text, why] of broken) {
			const lines: SourceLine[] = []
			const reading = (async () => {
				for await (const line of readFirebase(asFile(text), { providers: {}, firebase: FIREBASE_PROJECT })) lines.push(line)
			})()
			await expect(reading).rejects.toThrow(new SourceFileError(`the file is not one JSON document (${why}); expected the JSON of firebase auth:export ({ "users": […] })`))
			expect(lines).toEqual([])
		}
	})
})
