import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { and, eq, sql } from 'drizzle-orm'
import { emailTokens, factors } from '../src/db/schema'
import { problem, startTestApp, type CallResult, type TestApp } from './support/app'
import { awayFromStepBoundary, completeWithTotp, enrollTotp, totpCode } from './support/factors'
import { jwtPayload, login, PASSWORD, signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'
import { countJobs, mailJobs, signUpVerified } from './support/mail'
import { mailsTo, recoverByMail, waitForMails } from './support/ways-in'

setDefaultTimeout(60_000)

const REQUEST = '/api/auth/sign-in-codes'
const SIGN_IN = '/api/auth/email-code'
const ACCEPTED = { data: null, message: 'If an account can use it, a mail is on its way', errors: [] }
const INVALID = 'The token or code is wrong, used or replaced by a newer one; ask for a new mail'

let t: TestApp
let admin: Account

beforeAll(async () => {
	t = await startTestApp({ MAIL_RESEND_SECONDS: '0' })
	admin = await signUpAdmin(t)
})
afterAll(() => t.close())

const requestCode = (email: string, app = t) => app.call('POST', REQUEST, { json: { email } })
const signInWithCode = (email: string, code: string, app = t) => app.call('POST', SIGN_IN, { json: { email, code } })
const otherCode = (code: string, step = 1) => String((Number(code) + step) % 1_000_000).padStart(6, '0')
const codeIn = (mail: { text: string }) => {
	const code = /^(\d{6})$/m.exec(mail.text)?.[1]
	if (!code) throw new Error(`no code in mail:\n${mail.text}`)
	return code
}

/** Asks for a sign-in code and reads it out of the mail the app wrote to its log. */
async function mailedCode(email: string, app = t): Promise<string> {
	const before = mailsTo(app, email, 'sign-in').length
	expect((await requestCode(email, app)).status).toBe(202)
	const mails = await waitForMails(app, email, 'sign-in', before + 1)
	return codeIn(mails.at(-1) as { text: string })
}

async function auditOf(userId: string, type: string, app = t, by = admin) {
	const res = await app.call('GET', `/api/audit-events?userId=${userId}&type=${type}&limit=100`, { token: by.accessToken })
	expect(res.status).toBe(200)
	return res.body.data.items as Array<{ type: string; actorId: string | null; subjectId: string | null; details: Record<string, unknown> }>
}

describe('asking for a code', () => {
	test('an active account gets a mail with a 6-digit code, valid 10 minutes, and no link', async () => {
		const user = await signUp(t, { name: 'Ada' })
		const res = await requestCode(user.email)
		expect(res.status).toBe(202)
		expect(res.body).toEqual(ACCEPTED)
		const [mail] = await waitForMails(t, user.email, 'sign-in', 1)
		expect(mail?.subject).toBe('Your Latchkey sign-in code')
		expect(codeIn(mail as { text: string })).toMatch(/^\d{6}$/)
		expect(mail?.text).toContain('Hello Ada,')
		expect(mail?.text).toContain('valid for 10 minutes')
		expect(mail?.text).not.toContain('#token=')
		const [row] = await t.database.handle.db.select().from(emailTokens).where(and(eq(emailTokens.userId, user.id), eq(emailTokens.purpose, 'sign-in')))
		// expires_at is the service's clock, created_at the database's: a few ms apart.
		expect(Math.abs((row?.expiresAt.getTime() ?? 0) - (row?.createdAt.getTime() ?? 0) - 600_000)).toBeLessThan(1000)
		expect((await auditOf(user.id, 'login.code-sent')).length).toBe(1)
	})

	test('unknown, deactivated and active addresses get the same answer, one request job each; only the active one gets a mail', async () => {
		const active = await signUp(t)
		const deactivated = await signUp(t)
		expect((await t.call('DELETE', `/api/users/${deactivated.id}`, { token: admin.accessToken })).status).toBe(200)
		const addresses = { unknown: uniqueEmail('unknown'), deactivated: deactivated.email, active: active.email }
		const answers: CallResult[] = []
		for (const email of Object.values(addresses)) {
			const before = await countJobs(t.database, 'mail-request')
			answers.push(await requestCode(email))
			expect(await countJobs(t.database, 'mail-request')).toBe(before + 1)
		}
		for (const answer of answers) {
			expect(answer.status).toBe(202)
			expect(answer.text).toBe(answers[0]?.text as string)
			expect([...answer.headers.keys()].sort()).toEqual([...(answers[0] as CallResult).headers.keys()].sort())
		}
		await waitForMails(t, addresses.active, 'sign-in', 1)
		await t.app.decorator.jobs.idle()
		expect(mailsTo(t, addresses.unknown)).toHaveLength(0)
		expect(mailsTo(t, addresses.deactivated, 'sign-in')).toHaveLength(0)
		expect(await mailJobs(t.database, 'sign-in', addresses.unknown)).toEqual([])
		expect(await mailJobs(t.database, 'sign-in', addresses.deactivated)).toEqual([])
	})

	test('a newer code voids the older one', async () => {
		const user = await signUp(t)
		const older = await mailedCode(user.email)
		const newer = await mailedCode(user.email)
		if (older !== newer) expect((await signInWithCode(user.email, older)).body).toEqual(problem('invalid-code', 400, SIGN_IN, INVALID))
		expect((await signInWithCode(user.email, newer)).status).toBe(200)
	})

	test('bad input is a 422 naming the field, never a 500', async () => {
		const cases: Array<[string, unknown, string]> = [
			[REQUEST, {}, '#/email'],
			[REQUEST, { email: 'not an address' }, '#/email'],
			[SIGN_IN, { email: uniqueEmail() }, '#/code'],
			[SIGN_IN, { email: uniqueEmail(), code: '12345' }, '#/code'],
			[SIGN_IN, { email: uniqueEmail(), code: '12345a' }, '#/code'],
			[SIGN_IN, { email: 'nope', code: '123456' }, '#/email'],
			[SIGN_IN, { code: '123456' }, '#/email'],
		]
		for (const [path, json, pointer] of cases) {
			const res = await t.call('POST', path, { json })
			expect({ path, json, status: res.status }).toEqual({ path, json, status: 422 })
			expect(res.body.type).toBe('https://latchkey.dev/problems/validation-error')
			expect(res.body.errors).toEqual([expect.objectContaining({ pointer })])
		}
		const bad = await t.call('POST', SIGN_IN, { json: { email: uniqueEmail(), code: '1234567' } })
		expect(bad.body.errors).toEqual([{ pointer: '#/code', code: 'pattern', detail: 'must be the 6 digits from the mail' }])
		expect((await t.call('POST', SIGN_IN, { json: { email: uniqueEmail(), code: '123456', extra: 1 } })).status).toBe(422)
		expect((await t.call('POST', SIGN_IN, { body: 'not json', headers: { 'content-type': 'application/json' } })).status).toBe(400)
	})
})

describe('signing in with the code', () => {
	test('the right code answers the login body: tokens of a session that works, amr [] at aal1, and login.succeeded with method email-code', async () => {
		const user = await signUp(t)
		const code = await mailedCode(user.email)
		const res = await signInWithCode(`  ${user.email.toUpperCase()} `, code)
		expect(res.status).toBe(200)
		expect(res.headers.get('cache-control')).toBe('no-store')
		expect(res.body).toEqual({
			data: {
				accessToken: expect.any(String),
				refreshToken: expect.any(String),
				tokenType: 'Bearer',
				expiresIn: t.config.jwt.accessTtlSeconds,
				refreshExpiresIn: t.config.jwt.refreshTtlSeconds,
				user: expect.objectContaining({ id: user.id, email: user.email }),
			},
			message: 'Logged in',
			errors: [],
		})
		const claims = jwtPayload(res.body.data.accessToken)
		expect(claims).toMatchObject({ sub: user.id, amr: [], aal: 'aal1' })
		expect((await t.call('GET', '/api/users/me', { token: res.body.data.accessToken })).body.data.id).toBe(user.id)
		expect((await t.call('POST', '/api/auth/refresh', { json: { refreshToken: res.body.data.refreshToken } })).status).toBe(200)
		const byCode = (await auditOf(user.id, 'login.succeeded')).filter((event) => event.details.method === 'email-code')
		expect(byCode).toHaveLength(1)
		expect(byCode[0]).toMatchObject({ actorId: user.id, subjectId: user.id, details: { sessionId: claims.sid, method: 'email-code' } })
		// Signing in with a code proved the address.
		expect(res.body.data.user.emailVerified).toBe(true)
	})

	test('a code works once', async () => {
		const user = await signUp(t)
		const code = await mailedCode(user.email)
		expect((await signInWithCode(user.email, code)).status).toBe(200)
		expect((await signInWithCode(user.email, code)).body).toEqual(problem('invalid-code', 400, SIGN_IN, INVALID))
	})

	test('of 20 requests fired together with the right code, exactly one signs in', async () => {
		const user = await signUp(t)
		const code = await mailedCode(user.email)
		const answers = await Promise.all(Array.from({ length: 20 }, () => signInWithCode(user.email, code)))
		expect(answers.map((answer) => answer.status).sort()).toEqual([200, ...Array(19).fill(400)])
		for (const answer of answers.filter((answer) => answer.status !== 200)) expect(answer.body).toEqual(problem('invalid-code', 400, SIGN_IN, INVALID))
		// The sign-up's password login, and one by code.
		expect((await auditOf(user.id, 'login.succeeded')).filter((event) => event.details.method === 'email-code')).toHaveLength(1)
	})

	test('five wrong codes void the code: the right one is refused after them', async () => {
		const user = await signUp(t)
		const code = await mailedCode(user.email)
		for (let i = 1; i <= 5; i++) expect((await signInWithCode(user.email, otherCode(code, i))).body).toEqual(problem('invalid-code', 400, SIGN_IN, INVALID))
		expect((await signInWithCode(user.email, code)).body).toEqual(problem('invalid-code', 400, SIGN_IN, INVALID))
		// A new mail brings a live code again.
		expect((await signInWithCode(user.email, await mailedCode(user.email))).status).toBe(200)
	})

	test('four wrong codes leave the right one working', async () => {
		const user = await signUp(t)
		const code = await mailedCode(user.email)
		for (let i = 1; i <= 4; i++) expect((await signInWithCode(user.email, otherCode(code, i))).status).toBe(400)
		expect((await signInWithCode(user.email, code)).status).toBe(200)
	})

	test('an expired code is refused', async () => {
		const user = await signUp(t)
		const code = await mailedCode(user.email)
		await t.database.handle.db
			.update(emailTokens)
			.set({ expiresAt: sql`now() - interval '1 second'` })
			.where(and(eq(emailTokens.userId, user.id), eq(emailTokens.purpose, 'sign-in')))
		expect((await signInWithCode(user.email, code)).body).toEqual(problem('invalid-code', 400, SIGN_IN, INVALID))
	})

	test('a deactivated account is refused as an unknown address is, even with its right code', async () => {
		const user = await signUp(t)
		const code = await mailedCode(user.email)
		expect((await t.call('DELETE', `/api/users/${user.id}`, { token: admin.accessToken })).status).toBe(200)
		const deactivated = await signInWithCode(user.email, code)
		const unknown = await signInWithCode(uniqueEmail('unknown'), code)
		expect(deactivated.body).toEqual(problem('invalid-code', 400, SIGN_IN, INVALID))
		expect(unknown.text).toBe(deactivated.text)
		expect(unknown.status).toBe(deactivated.status)
	})

	test('a code mailed to another kind of flow opens nothing here, and a sign-in code verifies nothing there', async () => {
		const user = await signUp(t)
		const code = await mailedCode(user.email)
		expect((await t.call('POST', '/api/auth/email-verifications', { json: { email: user.email, code } })).body.type).toEndWith('/invalid-code')
		expect((await t.call('POST', '/api/auth/password-resets', { json: { email: user.email, code, password: 'a brand new passphrase' } })).body.type).toEndWith(
			'/invalid-code',
		)
		expect((await signInWithCode(user.email, code)).status).toBe(200)
	})

	test('a password reset voids the sign-in code the account had', async () => {
		const user = await signUp(t)
		const code = await mailedCode(user.email)
		expect((await recoverByMail(t, user.email)).status).toBe(200)
		expect((await signInWithCode(user.email, code)).body).toEqual(problem('invalid-code', 400, SIGN_IN, INVALID))
	})

	test('after 10 wrong codes for an address in 24 hours the route is 429 too-many-codes, right code or not', async () => {
		const user = await signUp(t)
		for (let round = 0; round < 2; round++) {
			const code = await mailedCode(user.email)
			for (let i = 1; i <= 5; i++) expect((await signInWithCode(user.email, otherCode(code, i))).status).toBe(400)
		}
		const code = await mailedCode(user.email)
		const res = await signInWithCode(user.email, code)
		expect(res.body).toEqual(problem('too-many-codes', 429, SIGN_IN, 'Too many wrong codes for this address; sign in another way, or try a code again later'))
		expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(86_000)
		// The password still signs in.
		await login(t, user.email)
	})
})

describe('with a second factor', () => {
	test('the code answers mfaRequired and POST /auth/mfa finishes the sign-in at aal2', async () => {
		const account = await signUpVerified(t)
		const { secret } = await enrollTotp(t, account)
		const code = await mailedCode(account.email)
		const first = await signInWithCode(account.email, code)
		expect(first.status).toBe(200)
		expect(first.body).toEqual({
			data: { mfaRequired: true, mfaToken: expect.any(String), methods: expect.arrayContaining(['totp', 'recovery-code']) },
			message: 'Code accepted; a second factor is required',
			errors: [],
		})
		// The code is spent by the first step.
		expect((await signInWithCode(account.email, code)).status).toBe(400)
		await awayFromStepBoundary()
		const finished = await completeWithTotp(t, first.body.data.mfaToken, totpCode(secret, 1))
		expect(finished.status).toBe(200)
		expect(jwtPayload(finished.body.data.accessToken)).toMatchObject({ sub: account.id, amr: ['otp', 'mfa'], aal: 'aal2' })
		expect((await auditOf(account.id, 'login.mfa-required'))[0]?.details).toEqual({ methods: expect.any(String), method: 'email-code' })
	})

	test('a factor added before the address was proved goes when the code proves it: no second factor is owed then', async () => {
		const account = await signUp(t)
		const { factorId } = await enrollTotp(t, account)
		const res = await signInWithCode(account.email, await mailedCode(account.email))
		expect(res.status).toBe(200)
		expect(res.body.data.accessToken).toEqual(expect.any(String))
		expect(await t.database.handle.db.select().from(factors).where(eq(factors.id, factorId))).toEqual([])
		// Every earlier session went with it, as after a verification.
		expect((await t.call('GET', '/api/users/me', { token: account.accessToken })).status).toBe(401)
		await waitForMails(t, account.email, 'way-in-notice', 1)
	})
})

describe('limits shared with the other mailed codes and with the password', () => {
	let strict: TestApp
	let strictAdmin: Account
	beforeAll(async () => {
		strict = await startTestApp({ LOCKOUT_THRESHOLD: '3', MAIL_RESEND_SECONDS: '60' })
		strictAdmin = await signUpAdmin(strict)
	})
	afterAll(() => strict.close())

	test('wrong codes count toward the email’s login lockout; a locked email is refused even the right code, and so is its password', async () => {
		const user = await signUp(strict)
		const code = await mailedCode(user.email, strict)
		for (let i = 1; i <= 3; i++) expect((await signInWithCode(user.email, otherCode(code, i), strict)).status).toBe(400)
		const locked = await signInWithCode(user.email, code, strict)
		expect(locked.body).toEqual(problem('login-locked', 429, SIGN_IN, 'Too many failed logins for this account; try again later'))
		expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0)
		expect((await strict.call('POST', '/api/auth/login', { json: { email: user.email, password: PASSWORD } })).status).toBe(429)
		const failures = await auditOf(user.id, 'login.failed', strict, strictAdmin)
		expect(failures.map((event) => event.details.reason).sort()).toEqual(['locked', 'locked', 'wrong-code', 'wrong-code', 'wrong-code'])
		expect(await auditOf(user.id, 'login.locked', strict, strictAdmin)).toHaveLength(1)
	})

	test('a right code forgives the wrong ones before it', async () => {
		const user = await signUp(strict)
		const code = await mailedCode(user.email, strict)
		for (let i = 1; i <= 2; i++) expect((await signInWithCode(user.email, otherCode(code, i), strict)).status).toBe(400)
		expect((await signInWithCode(user.email, code, strict)).status).toBe(200)
		expect((await strict.call('POST', '/api/auth/login', { json: { email: user.email, password: 'a wrong password' } })).status).toBe(401)
		expect((await strict.call('POST', '/api/auth/login', { json: { email: user.email, password: 'a wrong password' } })).status).toBe(401)
		await login(strict, user.email)
	})

	test('one mail per address per MAIL_RESEND_SECONDS: a second request within it sends nothing, and the first code still works', async () => {
		const user = await signUp(strict)
		const code = await mailedCode(user.email, strict)
		expect((await requestCode(user.email, strict)).body).toEqual(ACCEPTED)
		await strict.app.decorator.jobs.idle()
		expect(mailsTo(strict, user.email, 'sign-in')).toHaveLength(1)
		expect((await signInWithCode(user.email, code, strict)).status).toBe(200)
	})
})

describe('EMAIL_VERIFICATION=required', () => {
	test('an unverified account signs in with a code, which proves its address (then its password signs in too)', async () => {
		const strict = await startTestApp({ EMAIL_VERIFICATION: 'required', MAIL_RESEND_SECONDS: '0' })
		try {
			const email = uniqueEmail('strict')
			const created = await strict.call('POST', '/api/users', { json: { email, password: PASSWORD, name: 'Strict' } })
			expect(created.status).toBe(201)
			expect((await strict.call('POST', '/api/auth/login', { json: { email, password: PASSWORD } })).status).toBe(403)
			const res = await signInWithCode(email, await mailedCode(email, strict), strict)
			expect(res.status).toBe(200)
			expect(res.body.data.user.emailVerified).toBe(true)
			await login(strict, email)
			const strictAdmin = await signUpAdmin(strict)
			const [verified] = await auditOf(created.body.data.id, 'email.verified', strict, strictAdmin)
			expect(verified?.details).toEqual({ by: 'sign-in-code' })
		} finally {
			await strict.close()
		}
	})
})

describe('EMAIL_CODE_SIGN_IN=false', () => {
	test('both routes answer as an unknown route does, and the OpenAPI document leaves them out', async () => {
		const off = await startTestApp({ EMAIL_CODE_SIGN_IN: 'false' })
		try {
			const user = await signUp(off)
			for (const [path, json] of [
				[REQUEST, { email: user.email }],
				[SIGN_IN, { email: user.email, code: '123456' }],
			] as const) {
				const res = await off.call('POST', path, { json })
				expect(res.body).toEqual(problem('not-found', 404, path, `No route matches POST ${path}`))
			}
			await off.app.decorator.jobs.idle()
			expect(mailsTo(off, user.email, 'sign-in')).toHaveLength(0)
			const document = (await (await off.app.handle(new Request('http://localhost/api/docs/json'))).json()) as { paths: Record<string, unknown> }
			expect(Object.keys(document.paths)).not.toContain('/api/auth/sign-in-codes')
			expect(Object.keys(document.paths)).not.toContain('/api/auth/email-code')
			expect(Object.keys(document.paths)).toContain('/api/auth/login')
		} finally {
			await off.close()
		}
	})
})
