/**
 * Issue 22's rules ("Ways in, and proof that it is really the owner", API.md) attacked as an outside tester
 * would, against the compiled binary: several client addresses (sockets bound to 127.x.y.z), dozens of
 * requests fired at once, two instances. Two binaries share one PostgreSQL database and one Redis (when
 * TEST_DATABASE_URL and TEST_REDIS_URL are set); the recovery purge runs on one binary on PGlite. Mails are
 * read from the binaries' logs (development without SMTP_URL writes each one there, link and code included).
 * Run with `bun test ./test/ways-in.e2e.ts` after `bun run build`.
 *
 * Isolation on a Redis shared with other runs: client addresses are random per run (`client()`), emails
 * unique per run; the lockout keys of this file's emails are deleted at the end.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { RedisClient } from 'bun'
import { join } from 'node:path'
import postgres from 'postgres'
import { problemBody, type ProblemKind } from '../src/http/problem-catalogue'
import { hashRefreshToken } from '../src/modules/auth/tokens'
import { binaryFolder, client, requestFrom, startBinary, type Answer, type BinaryFolder, type RunningBinary } from './support/binary'
import { createEmptyTestDatabase, TEST_DATABASE_URL } from './support/database'
import { awayFromStepBoundary, totpCode } from './support/factors'
import { jwtPayload } from './support/fixtures'
import { proofOf } from './support/mail'

setDefaultTimeout(120_000)

const TEST_REDIS_URL = process.env.TEST_REDIS_URL?.trim() || undefined
const PASSWORD = 'a long enough passphrase'
const run = Bun.randomUUIDv7().replaceAll('-', '').slice(-10)
let made = 0
const emailFor = (label: string) => `ways-${label}-${run}-${made++}@example.test`
const SMALL_ARGON2 = { PASSWORD_HASH_MEMORY_KIB: '1024', PASSWORD_HASH_TIME_COST: '1' }

// What the service answers for each refusal under attack (their `detail` as the code writes it).
const DETAIL = {
	'invalid-credentials': 'The email or password is incorrect',
	'login-locked': 'Too many failed logins for this account; try again later',
	'invalid-code': 'The token or code is wrong, used or replaced by a newer one; ask for a new mail',
	'too-many-codes': 'Too many wrong codes for this address; use the link in the mail, or try a code again later',
	'mfa-enrollment-required': 'Enrol a second factor first: this session serves only enrolment',
} as const satisfies Partial<Record<ProblemKind, string>>

/** Whether an answer is exactly the problem document of `kind` for `path` (the whole body, and its media type). */
function expectProblem(answer: Answer, kind: ProblemKind, path: string, detail?: string) {
	const body = JSON.parse(answer.body) as { status: number; detail: unknown }
	expect(answer.headers['content-type']).toStartWith('application/problem+json')
	expect(body).toEqual(problemBody(kind, detail ?? (DETAIL as Record<string, string>)[kind] ?? String(body.detail), path))
	expect(answer.status).toBe(body.status)
}
/** A 429 whose Retry-After is a delay in seconds within `max`. */
function expectRetryAfter(answer: Answer, max: number) {
	const seconds = Number(answer.headers['retry-after'])
	expect(Number.isInteger(seconds)).toBe(true)
	expect(seconds).toBeGreaterThan(0)
	expect(seconds).toBeLessThanOrEqual(max)
}
const dataOf = <T = Record<string, unknown>>(answer: Answer) => (JSON.parse(answer.body) as { data: T }).data
const bearer = (token: string) => ({ authorization: `Bearer ${token}` })
const countOf = (answers: Answer[], status: number) => answers.filter((answer) => answer.status === status).length

interface LoggedMail {
	kind: string
	to: string
	subject: string
	text: string
}
/** Every mail the instances wrote to their logs for `to` (of one kind), in the order each instance logged them. */
function loggedMails(instances: RunningBinary[], to: string, kind: string): LoggedMail[] {
	const found: Array<{ at: number; mail: LoggedMail }> = []
	for (const instance of instances)
		for (const line of instance.output().split('\n')) {
			if (!line.includes('"mail":')) continue
			const { mail, time } = JSON.parse(line) as { mail?: LoggedMail; time?: string }
			if (mail?.to === to && mail.kind === kind) found.push({ at: Date.parse(time ?? '') || 0, mail })
		}
	// In the order they were sent, whichever instance's worker sent each (not instance by instance).
	return found.sort((x, y) => x.at - y.at).map(({ mail }) => mail)
}
/** Waits until `count` such mails were logged (by whichever instance's worker sent them); returns them. */
async function waitForMails(instances: RunningBinary[], to: string, kind: string, count = 1): Promise<LoggedMail[]> {
	const deadline = Date.now() + 20_000
	for (;;) {
		const mails = loggedMails(instances, to, kind)
		if (mails.length >= count) return mails
		if (Date.now() > deadline) throw new Error(`${mails.length} of ${count} ${kind} mails to ${to} in the logs after 20 s`)
		await Bun.sleep(50)
	}
}

async function stop(instance: RunningBinary) {
	instance.process.kill('SIGTERM')
	const code = await Promise.race([instance.process.exited, Bun.sleep(15_000).then(() => 'timeout' as const)])
	if (code === 'timeout') {
		instance.process.kill('SIGKILL')
		await instance.process.exited
	}
}

/** Signs an account up, from an address of its own; answers the user. */
async function signUp(instance: RunningBinary, email = emailFor('user'), password = PASSWORD) {
	const created = await requestFrom(instance.base, client(), 'POST', '/api/users', { json: { email, password, name: 'Ways In' } })
	expect(created.status).toBe(201)
	return dataOf<{ id: string; email: string }>(created)
}
interface Tokens {
	accessToken: string
	refreshToken: string
	user: { id: string; email: string; role: string }
}
async function login(instance: RunningBinary, email: string, password = PASSWORD, from = client()): Promise<Tokens> {
	const answer = await requestFrom(instance.base, from, 'POST', '/api/auth/login', { json: { email, password } })
	expect(answer.status).toBe(200)
	const data = dataOf<Tokens & { mfaRequired?: boolean }>(answer)
	expect(data.mfaRequired).toBeUndefined()
	return data
}

if (TEST_DATABASE_URL && TEST_REDIS_URL) {
	const serverUrl = TEST_DATABASE_URL
	const redisUrl = TEST_REDIS_URL
	const LOCKOUT_THRESHOLD = 5
	const LOCKOUT_SECONDS = 900
	const REAUTHENTICATION_SECONDS = 2
	const ADMIN_EMAIL = emailFor('admin')

	describe('two binaries on one PostgreSQL and one Redis', () => {
		let at: BinaryFolder | undefined
		let database: { url: string; drop(): Promise<void> } | undefined
		let sql: postgres.Sql | undefined
		const instances: RunningBinary[] = []
		let a: RunningBinary
		let b: RunningBinary
		/** Ten client addresses that the attacks spread over. */
		const addresses = Array.from({ length: 10 }, () => client())
		/** Emails whose lockout keys this file leaves in Redis. */
		const locked: string[] = []

		beforeAll(async () => {
			at = binaryFolder('ways-in')
			database = await createEmptyTestDatabase(serverUrl)
			sql = postgres(database.url, { max: 1, onnotice: () => {} })
			const env = {
				DATABASE_URL: database.url,
				DATABASE_POOL_MAX: '5',
				REDIS_URL: redisUrl,
				// The same keys on both instances, as an operator must set them.
				JWT_SECRET: Buffer.from(crypto.getRandomValues(new Uint8Array(48))).toString('base64'),
				DATA_ENCRYPTION_KEY: Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64'),
				...SMALL_ARGON2,
				// The budgets stop nothing here: what stops the attacks must be the lockout and the code cap.
				AUTH_RATE_LIMIT_MAX: '1000',
				RATE_LIMIT_MAX: '5000',
				LOCKOUT_THRESHOLD: String(LOCKOUT_THRESHOLD),
				LOCKOUT_SECONDS: String(LOCKOUT_SECONDS),
				MFA_REQUIRED: 'admins',
				REAUTHENTICATION_SECONDS: String(REAUTHENTICATION_SECONDS),
				LATCHKEY_ADMIN_EMAIL: ADMIN_EMAIL,
				LATCHKEY_ADMIN_PASSWORD: PASSWORD,
				MAIL_RESEND_SECONDS: '0',
				JOB_POLL_SECONDS: '1',
			}
			const folder = at
			// One after the other: the first migrates and makes the admin, the second finds both done.
			instances.push(await startBinary(folder, { ...env, DATA_DIR: join(folder.folder, 'data-a') }))
			instances.push(await startBinary(folder, { ...env, DATA_DIR: join(folder.folder, 'data-b') }))
			;[a, b] = instances as [RunningBinary, RunningBinary]
		})

		afterAll(async () => {
			await Promise.allSettled(instances.map(stop))
			await sql?.end().catch(() => {})
			await database?.drop().catch((error: unknown) => console.error('could not drop the test database', error))
			const redis = new RedisClient(redisUrl)
			const digest = (email: string) => new Bun.CryptoHasher('sha256').update(email).digest('hex')
			const keys = locked.flatMap((email) => [`latchkey:lockout:fail:${digest(email)}`, `latchkey:lockout:lock:${digest(email)}`])
			if (keys.length > 0) await redis.send('DEL', keys).catch(() => {})
			redis.close()
			at?.remove()
		})

		test('30 wrong reauthentication passwords at once, over both instances and 10 addresses: 5 judged, then the account is locked everywhere', async () => {
			const victim = await signUp(a)
			locked.push(victim.email)
			const session = await login(b, victim.email)
			const path = '/api/auth/reauthentication'
			const answers = await Promise.all(
				Array.from({ length: 30 }, (_, i) =>
					requestFrom(i % 2 ? b.base : a.base, addresses[i % 10] as string, 'POST', path, {
						json: { password: `not the password ${i}` },
						headers: bearer(session.accessToken),
					}),
				),
			)
			// The first five reserved checks are judged (and fail); no more, whichever instance or address they came from.
			expect(countOf(answers, 401)).toBe(LOCKOUT_THRESHOLD)
			expect(countOf(answers, 429)).toBe(30 - LOCKOUT_THRESHOLD)
			for (const answer of answers) {
				if (answer.status === 401) {
					expectProblem(answer, 'invalid-credentials', path)
					expect(answer.headers['www-authenticate']).toStartWith('Bearer realm=')
				} else {
					expectProblem(answer, 'login-locked', path)
					expectRetryAfter(answer, LOCKOUT_SECONDS)
				}
			}
			// The lock holds on both instances, against the right password too, and it is the sign-in's lock.
			for (const instance of [a, b]) {
				const right = await requestFrom(instance.base, client(), 'POST', path, { json: { password: PASSWORD }, headers: bearer(session.accessToken) })
				expectProblem(right, 'login-locked', path)
				expectRetryAfter(right, LOCKOUT_SECONDS)
				const signIn = await requestFrom(instance.base, client(), 'POST', '/api/auth/login', { json: { email: victim.email, password: PASSWORD } })
				expectProblem(signIn, 'login-locked', '/api/auth/login')
				expectRetryAfter(signIn, LOCKOUT_SECONDS)
			}
		})

		test('40 wrong recovery codes at once, over both instances and 10 addresses: exactly 10 judged, the rest 429; a link still resets the password', async () => {
			const owner = await signUp(b)
			locked.push(owner.email)
			const path = '/api/auth/password-resets'
			expect((await requestFrom(a.base, client(), 'POST', '/api/auth/recovery-requests', { json: { email: owner.email } })).status).toBe(202)
			const [attacked] = await waitForMails(instances, owner.email, 'recovery')
			const proof = proofOf(attacked as LoggedMail)
			const wrongCode = (i: number) => String((Number(proof.code) + 1 + i) % 1_000_000).padStart(6, '0')
			const guess = (email: string) =>
				Promise.all(
					Array.from({ length: 40 }, (_, i) =>
						requestFrom(i % 2 ? a.base : b.base, addresses[i % 10] as string, 'POST', path, {
							json: { email, code: wrongCode(i), password: 'the attacker’s passphrase' },
						}),
					),
				)
			const checkVolley = (answers: Answer[]) => {
				expect(countOf(answers, 400)).toBe(10)
				expect(countOf(answers, 429)).toBe(30)
				for (const answer of answers) {
					if (answer.status === 400) expectProblem(answer, 'invalid-code', path)
					else {
						expectProblem(answer, 'too-many-codes', path)
						expectRetryAfter(answer, 86_400)
					}
				}
			}
			checkVolley(await guess(owner.email))

			// From the 11th on the code path is closed, right code or not.
			const rightCode = await requestFrom(a.base, client(), 'POST', path, { json: { email: owner.email, code: proof.code, password: 'the owner’s new passphrase' } })
			expectProblem(rightCode, 'too-many-codes', path)
			expectRetryAfter(rightCode, 86_400)
			// Five wrong codes voided the attacked mail's link with its code (README: the proof is under attack).
			const voidedLink = await requestFrom(b.base, client(), 'POST', path, { json: { token: proof.token, password: 'the owner’s new passphrase' } })
			expectProblem(voidedLink, 'invalid-code', path)

			// The owner asks again: the new mail's code is held by the cap too, its link is not.
			expect((await requestFrom(b.base, client(), 'POST', '/api/auth/recovery-requests', { json: { email: owner.email } })).status).toBe(202)
			const fresh = proofOf((await waitForMails(instances, owner.email, 'recovery', 2))[1] as LoggedMail)
			expect(fresh.token).not.toBe(proof.token)
			const freshCode = await requestFrom(a.base, client(), 'POST', path, { json: { email: owner.email, code: fresh.code, password: 'the owner’s new passphrase' } })
			expectProblem(freshCode, 'too-many-codes', path)
			const reset = await requestFrom(a.base, client(), 'POST', path, { json: { token: fresh.token, password: 'the owner’s new passphrase' } })
			expect(reset.status).toBe(200)
			expect(JSON.parse(reset.body)).toMatchObject({ data: null, errors: [] })
			await login(b, owner.email, 'the owner’s new passphrase')

			// An address no account has is counted and refused alike.
			const unknown = emailFor('nobody')
			checkVolley(await guess(unknown))
			const after = await requestFrom(b.base, client(), 'POST', path, { json: { email: unknown, code: '000000', password: 'the attacker’s passphrase' } })
			expectProblem(after, 'too-many-codes', path)
		})

		test('a user promoted at instance B is held to enrolment at instance A from its very next request', async () => {
			const user = await signUp(a)
			const held = await login(a, user.email)
			// Instance A has seen this token (and verified it) while the account was a plain user.
			expect((await requestFrom(a.base, client(), 'GET', '/api/users/me', { headers: bearer(held.accessToken) })).status).toBe(200)
			expectProblem(await requestFrom(a.base, client(), 'GET', '/api/users', { headers: bearer(held.accessToken) }), 'forbidden', '/api/users', 'This requires an admin')

			// The first admin must enrol first (MFA_REQUIRED=admins): within the 2 s its fresh sign-in allows.
			await awayFromStepBoundary()
			const admin = await login(b, ADMIN_EMAIL)
			const enrolled = await requestFrom(b.base, client(), 'POST', '/api/users/me/factors', { json: { type: 'totp', name: 'Admin phone' }, headers: bearer(admin.accessToken) })
			expect(enrolled.status).toBe(201)
			const { factor, secret } = dataOf<{ factor: { id: string }; secret: string }>(enrolled)
			// Checked again just before (on a busy machine the sign-in may be 2 s old by now).
			const checked = await requestFrom(b.base, client(), 'POST', '/api/auth/reauthentication', { json: { password: PASSWORD }, headers: bearer(admin.accessToken) })
			expect(checked.status).toBe(200)
			const activated = await requestFrom(b.base, client(), 'POST', `/api/users/me/factors/${factor.id}/activation`, {
				json: { code: totpCode(secret) },
				headers: bearer(admin.accessToken),
			})
			expect(activated.status).toBe(200)

			const promoted = await requestFrom(b.base, client(), 'PUT', `/api/users/${user.id}`, {
				json: { email: user.email, name: 'Ways In', role: 'admin' },
				headers: bearer(admin.accessToken),
			})
			expect(promoted.status).toBe(200)
			expect(dataOf<{ role: string }>(promoted).role).toBe('admin')

			// The very next request of the old token, at the other instance, is judged on the account as it is now.
			const listed = await requestFrom(a.base, client(), 'GET', '/api/users', { headers: bearer(held.accessToken) })
			expectProblem(listed, 'mfa-enrollment-required', '/api/users')
			const newcomer = emailFor('made-by-held')
			const created = await requestFrom(a.base, client(), 'POST', '/api/users', {
				json: { email: newcomer, password: PASSWORD, name: 'Nobody', role: 'admin' },
				headers: bearer(held.accessToken),
			})
			expectProblem(created, 'mfa-enrollment-required', '/api/users')
			const other = await requestFrom(a.base, client(), 'GET', `/api/users/${admin.user.id}`, { headers: bearer(held.accessToken) })
			expectProblem(other, 'mfa-enrollment-required', `/api/users/${admin.user.id}`)
			const me = await requestFrom(a.base, client(), 'GET', '/api/users/me', { headers: bearer(held.accessToken) })
			expect(me.status).toBe(200)
			expect(dataOf<{ id: string; role: string }>(me)).toMatchObject({ id: user.id, role: 'admin' })
			// Nothing was created by the refused POST.
			const search = await requestFrom(b.base, client(), 'GET', `/api/users?email=${encodeURIComponent(newcomer)}`, { headers: bearer(admin.accessToken) })
			expect(search.status).toBe(200)
			expect(dataOf<{ items: unknown[] }>(search).items).toEqual([])
		})

		test('an old token adds no way in at either instance; 20 concurrent reauthentications leave one usable refresh token', async () => {
			const holder = await signUp(b)
			locked.push(holder.email)
			const stolen = await login(a, holder.email)
			const sid = jwtPayload(stolen.accessToken).sid as string
			// Older than REAUTHENTICATION_SECONDS.
			await Bun.sleep(REAUTHENTICATION_SECONDS * 1000 + 500)
			for (const instance of [a, b]) {
				const added = await requestFrom(instance.base, client(), 'POST', '/api/users/me/factors', { json: { type: 'totp' }, headers: bearer(stolen.accessToken) })
				// The detail names the window this instance was given (REAUTHENTICATION_SECONDS=2).
				expectProblem(added, 'reauthentication-required', '/api/users/me/factors', 'Confirm it is you first: sign in again or use POST /auth/reauthentication, then retry within 2 seconds')
			}

			const path = '/api/auth/reauthentication'
			const answers = await Promise.all(
				Array.from({ length: 20 }, (_, i) =>
					requestFrom(i % 2 ? b.base : a.base, addresses[i % 10] as string, 'POST', path, { json: { password: PASSWORD }, headers: bearer(stolen.accessToken) }),
				),
			)
			// Each is a renewal of the same session, or refused cleanly (the lockout lets no more than its threshold be checked at once).
			const renewed = answers.filter((answer) => answer.status === 200).map((answer) => dataOf<Tokens>(answer))
			expect(renewed.length).toBeGreaterThanOrEqual(1)
			for (const answer of answers.filter((answer) => answer.status !== 200)) {
				expectProblem(answer, 'login-locked', path)
				expectRetryAfter(answer, LOCKOUT_SECONDS)
			}
			for (const tokens of renewed) expect(jwtPayload(tokens.accessToken).sid).toBe(sid)

			// Each renewal rotated the live refresh token: exactly one is left unrotated, and it is one of the answers'.
			const live = await (sql as postgres.Sql)<Array<{ token_hash: string }>>`
				select token_hash from refresh_tokens where session_id = ${sid} and rotated_at is null`
			expect(live).toHaveLength(1)
			const usable = renewed.filter((tokens) => hashRefreshToken(tokens.refreshToken) === live[0]?.token_hash)
			expect(usable).toHaveLength(1)
			const [current] = usable as [Tokens]

			// That chain goes on: its refresh works (at the other instance too), for the same session.
			const refreshed = await requestFrom(b.base, client(), 'POST', '/api/auth/refresh', { json: { refreshToken: current.refreshToken } })
			expect(refreshed.status).toBe(200)
			const next = dataOf<Tokens>(refreshed)
			expect(jwtPayload(next.accessToken).sid).toBe(sid)
			expect((await requestFrom(a.base, client(), 'GET', '/api/users/me', { headers: bearer(next.accessToken) })).status).toBe(200)

			// Any other refresh token of the session (the stolen one, or a losing renewal's) is reuse: refused, and the session ends.
			const stale = renewed.find((tokens) => tokens !== current) ?? stolen
			const reused = await requestFrom(a.base, client(), 'POST', '/api/auth/refresh', { json: { refreshToken: stale.refreshToken } })
			expect(reused.status).toBe(401)
			for (const instance of [a, b])
				expect((await requestFrom(instance.base, client(), 'GET', '/api/users/me', { headers: bearer(next.accessToken) })).status).toBe(401)
			// The concurrent right passwords locked nothing: the owner signs in again.
			await login(b, holder.email)
		})
	})
}

describe('one binary on PGlite', () => {
	let at: BinaryFolder
	let service: RunningBinary

	beforeAll(async () => {
		at = binaryFolder('ways-in-pglite')
		service = await startBinary(at, { ...SMALL_ARGON2, DATA_DIR: join(at.folder, 'data') })
	})
	afterAll(async () => {
		if (service) await stop(service)
		at?.remove()
	})

	test('a TOTP factor an attacker enrolled on the unverified address is gone after the owner recovers it by code', async () => {
		const email = emailFor('pre-hijacked')
		const attacker = client()
		const owner = client()
		// The attacker signs up first with the owner's address and adds a second factor from a fresh session.
		await requestFrom(service.base, attacker, 'POST', '/api/users', { json: { email, password: 'the attacker’s passphrase', name: 'Owner' } }).then((answer) =>
			expect(answer.status).toBe(201),
		)
		await awayFromStepBoundary()
		const intruder = await login(service, email, 'the attacker’s passphrase', attacker)
		const enrolled = await requestFrom(service.base, attacker, 'POST', '/api/users/me/factors', { json: { type: 'totp', name: 'Intruder' }, headers: bearer(intruder.accessToken) })
		expect(enrolled.status).toBe(201)
		const { factor, secret } = dataOf<{ factor: { id: string }; secret: string }>(enrolled)
		const activated = await requestFrom(service.base, attacker, 'POST', `/api/users/me/factors/${factor.id}/activation`, {
			json: { code: totpCode(secret) },
			headers: bearer(intruder.accessToken),
		})
		expect(activated.status).toBe(200)
		const owed = await requestFrom(service.base, attacker, 'POST', '/api/auth/login', { json: { email, password: 'the attacker’s passphrase' } })
		expect(dataOf<{ mfaRequired: boolean }>(owed).mfaRequired).toBe(true)

		// The owner recovers the account with the mailed code.
		expect((await requestFrom(service.base, owner, 'POST', '/api/auth/recovery-requests', { json: { email } })).status).toBe(202)
		const { code } = proofOf((await waitForMails([service], email, 'recovery'))[0] as LoggedMail)
		const reset = await requestFrom(service.base, owner, 'POST', '/api/auth/password-resets', { json: { email, code, password: 'the owner’s own passphrase' } })
		expect(reset.status).toBe(200)

		// Tokens at once: the factor added while the address was unverified is gone, and so is the intruder's session.
		const signedIn = await login(service, email, 'the owner’s own passphrase', owner)
		const factors = await requestFrom(service.base, owner, 'GET', '/api/users/me/factors', { headers: bearer(signedIn.accessToken) })
		expect(factors.status).toBe(200)
		expect(dataOf<{ items: unknown[] }>(factors).items).toEqual([])
		expect((await requestFrom(service.base, attacker, 'GET', '/api/users/me', { headers: bearer(intruder.accessToken) })).status).toBe(401)

		// The owner hears what was removed and what remains.
		const [review] = await waitForMails([service], email, 'recovery-review')
		expect(review?.subject).toBe('Your Latchkey account was recovered: the ways in that remain')
		expect(review?.text).toContain('were removed:')
		expect(review?.text).toContain('“Intruder”')
		expect(review?.text).toContain(`From: ${owner},`)
	})
})
