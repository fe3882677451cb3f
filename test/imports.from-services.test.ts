import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { join } from 'node:path'
import { Secret, TOTP } from 'otpauth'
import { awayFromStepBoundary, completeWithTotp, passwordStep } from './support/factors'
import { cliDatabase, type CliDatabase } from './support/imports'
import { FIREBASE_SAMPLE, PASSWORDS } from './fixtures/imports/passwords'

// Every service's export file, as its own tool writes it (test/fixtures/imports), through the real command into one
// database; then the people in them sign in as they did there: the old password, and the old authenticator app.
// The readers' line-by-line output is held to the files by imports.sources.test.ts; this is the whole road.
setDefaultTimeout(120_000)

const FIXTURES = join(import.meta.dir, 'fixtures', 'imports')
const fixture = (name: string) => join(FIXTURES, name)
const json = async (name: string) => Bun.file(fixture(name)).json()

let cli: CliDatabase
beforeAll(async () => {
	cli = await cliDatabase()
})
afterAll(() => cli.drop())

describe('latchkey import --from each service, then sign-in as there', () => {
	test('every file imports; failures are the lines the readers refuse, each named', async () => {
		const runs = [
			['better-auth.json', 'better-auth'],
			['supabase.json', 'supabase'],
			['auth0-users.ndjson', 'auth0'],
			['keycloak-realm.json', 'keycloak'],
		] as const
		const errors: Record<string, string> = {}
		for (const [file, from] of runs) {
			const run = await cli.run(['import', fixture(file), '--from', from])
			errors[from] = run.err
			// A line a reader refuses is reported as `line N: reason` and fails the run (exit 1); the rest is written.
			expect(run.out).toMatch(/^created [1-9]\d*, updated 0, skipped \d+, failed \d+ in \d+\.\d s\n$/)
			for (const line of run.err.split('\n').filter(Boolean)) expect(line).toMatch(/^line \d+: /)
			expect(run.code).toBe(run.err.trim() === '' ? 0 : 1)
		}
		const firebase = await cli.run([
			'import', fixture('firebase-users.json'), '--from', 'firebase',
			'--hash-key', FIREBASE_SAMPLE.hashKey, '--salt-separator', FIREBASE_SAMPLE.saltSeparator,
			'--rounds', String(FIREBASE_SAMPLE.rounds), '--mem-cost', String(FIREBASE_SAMPLE.memCost),
		])
		expect(firebase.out).toMatch(/^created [1-9]\d*, /)
		// Grace's Supabase account has the GitHub account that Ada's Better Auth one already brought: one person's
		// identity cannot sign in to two accounts, so that line fails, across files as within one.
		expect(errors.supabase).toMatch(/^line \d+: an identity of this line \(provider and subject\) is already linked to another account$/m)
		// A file of one service read as another's is refused whole, with nothing written.
		const wrong = await cli.run(['import', fixture('firebase-users.json'), '--from', 'keycloak'])
		expect(wrong.err).toMatch(/^latchkey: .*firebase-users\.json: not a Keycloak export: .*; nothing was imported\n$/)
		expect(wrong.code).toBe(1)
	})

	test("the old passwords sign in (Auth0's bcrypt, Firebase's modified scrypt, Better Auth's scrypt after NFKC) and a wrong one does not", async () => {
		await cli.withApp(async (t) => {
			const accounts = [
				['dana@example.com', PASSWORDS.auth0.database],
				['user1@example.com', PASSWORDS.firebase.user1],
				['ada.admin@example.com', PASSWORDS.betterAuth.ada],
			] as const
			for (const [email, password] of accounts) {
				const res = await t.call('POST', '/api/auth/login', { json: { email, password } })
				expect({ email, status: res.status, mfa: res.body.data?.mfaRequired ?? false }).toEqual({ email, status: 200, mfa: false })
				const wrong = await t.call('POST', '/api/auth/login', { json: { email, password: `${password}!` } })
				expect(wrong.status).toBe(401)
			}
		})
	})

	test("a Supabase user's and a Keycloak user's authenticator apps keep working: the password, then the app's code", async () => {
		const supabase = await json('supabase.json')
		const keycloak = await json('keycloak-realm.json')
		const adaFactor = supabase.mfa_factors.find((factor: { status: string; factor_type: string; secret: string | null }) => factor.status === 'verified' && factor.factor_type === 'totp')
		const alice = keycloak.users.find((user: { email: string }) => user.email === 'alice@example.com')
		const aliceOtp = alice.credentials.find((credential: { type: string }) => credential.type === 'otp')
		// What each app on the user's phone holds: Supabase's base32 secret; for Keycloak, the base32 of the secret text's bytes.
		const apps = [
			['ada@example.com', PASSWORDS.supabase.ada, new TOTP({ algorithm: 'SHA1', digits: 6, period: 30, secret: Secret.fromBase32(adaFactor.secret) })],
			['alice@example.com', PASSWORDS.keycloak.alice, new TOTP({ algorithm: 'SHA1', digits: 6, period: 30, secret: Secret.fromUTF8(JSON.parse(aliceOtp.secretData).value) })],
		] as const
		await cli.withApp(async (t) => {
			for (const [email, password, app] of apps) {
				const mfaToken = await passwordStep(t, email, password)
				await awayFromStepBoundary()
				const signedIn = await completeWithTotp(t, mfaToken, app.generate())
				expect({ email, status: signedIn.status }).toEqual({ email, status: 200 })
				expect(signedIn.body.data.user.email).toBe(email)
			}
		})
	})
})
