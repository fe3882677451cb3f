import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { problem, startTestApp, type TestApp } from './support/app'
import { login, PASSWORD, signUp, signUpAdmin, uniqueEmail } from './support/fixtures'
import { proofOf, SmtpSink, SUBJECT, startAppWithSmtp } from './support/mail'

setDefaultTimeout(60_000)

const NEW_PASSWORD = 'a brand new passphrase'
const APP_URL = 'https://app.example.test'
const INVALID = 'The token or code is wrong, used or replaced by a newer one; ask for a new mail'

let sink: SmtpSink
let t: TestApp

let closeApp: () => Promise<void>

beforeAll(async () => {
	;({ t, sink, close: closeApp } = await startAppWithSmtp({ LOCKOUT_THRESHOLD: '3' }))
})
afterAll(() => closeApp())

const requestRecovery = (email: string, app = t) => app.call('POST', '/api/auth/recovery-requests', { json: { email } })
const reset = (body: Record<string, unknown>, app = t) => app.call('POST', '/api/auth/password-resets', { json: body })

/** Asks for a recovery mail and reads it out of the SMTP server. */
async function recoveryMail(email: string, app = t, smtp = sink) {
	const count = smtp.to(email, SUBJECT.recovery).length + 1
	expect((await requestRecovery(email, app)).status).toBe(202)
	return smtp.waitFor(email, { subject: SUBJECT.recovery, count })
}

describe('recovery by the link in the mail', () => {
	test('the mail has a plain-text and an HTML part, the link to the frontend with the token in the fragment, and a 6-digit code', async () => {
		const user = await signUp(t, { name: 'Ada' })
		const mail = await recoveryMail(user.email)
		const { link, token, code } = proofOf(mail)
		expect(link).toStartWith(`${APP_URL}/reset-password#token=`)
		expect(token.length).toBeGreaterThanOrEqual(43)
		expect(code).toMatch(/^\d{6}$/)
		expect(mail.subject).toBe('Reset your Latchkey password')
		expect(mail.text).toContain('valid for 1 hour')
		expect(mail.html).toContain('Hello Ada')
		expect(mail.html).toContain(code)
		expect(mail.html).toContain(`${APP_URL}/reset-password#token=${token}`.replaceAll('/', '&#x2F;').replaceAll('=', '&#x3D;'))
	})

	test('the token sets the password, revokes every session, marks the email verified, and works once', async () => {
		const user = await signUp(t)
		const other = await login(t, user.email)
		const { token } = proofOf(await recoveryMail(user.email))
		const res = await reset({ token, password: NEW_PASSWORD })
		expect(res.status).toBe(200)
		expect(res.headers.get('cache-control')).toBe('no-store')
		expect(res.body).toEqual({ data: null, message: 'Password reset; log in with the new password', errors: [] })
		// Not signed in by it, and every session ended.
		for (const session of [user, other]) {
			expect((await t.call('GET', '/api/users/me', { token: session.accessToken })).status).toBe(401)
			expect((await t.call('POST', '/api/auth/refresh', { json: { refreshToken: session.refreshToken } })).status).toBe(401)
		}
		expect((await t.call('POST', '/api/auth/login', { json: { email: user.email, password: PASSWORD } })).status).toBe(401)
		const after = await login(t, user.email, NEW_PASSWORD)
		expect((await t.call('GET', '/api/users/me', { token: after.accessToken })).body.data.emailVerified).toBe(true)
		const again = await reset({ token, password: 'yet another passphrase' })
		expect(again.body).toEqual(problem('invalid-code', 400, '/api/auth/password-resets', INVALID))
		const admin = await signUpAdmin(t)
		const audit = await t.call('GET', `/api/audit-events?userId=${user.id}&type=password.reset`, { token: admin.accessToken })
		expect(audit.body.data.items).toEqual([expect.objectContaining({ actorId: user.id, subjectId: user.id, details: { sessionsRevoked: 2 } })])
	})

	test('a new request voids the older mail’s token and code', async () => {
		const user = await signUp(t)
		const first = proofOf(await recoveryMail(user.email))
		const second = proofOf(await recoveryMail(user.email))
		expect((await reset({ token: first.token, password: NEW_PASSWORD })).body.type).toEndWith('/invalid-code')
		expect((await reset({ email: user.email, code: first.code, password: NEW_PASSWORD })).status).toBe(first.code === second.code ? 200 : 400)
		if (first.code !== second.code) expect((await reset({ token: second.token, password: NEW_PASSWORD })).status).toBe(200)
	})

	test('a weak new password is a 422 naming it, and the token stays good', async () => {
		const user = await signUp(t)
		const { token } = proofOf(await recoveryMail(user.email))
		const weak = await reset({ token, password: 'short' })
		expect(weak.status).toBe(422)
		expect(weak.body.errors).toEqual([expect.objectContaining({ pointer: '#/password' })])
		expect((await reset({ token, password: NEW_PASSWORD })).status).toBe(200)
	})

	test('a made-up token is invalid-code; a body that is neither form is a 422 naming what is missing', async () => {
		expect((await reset({ token: 'x'.repeat(43), password: NEW_PASSWORD })).body).toEqual(problem('invalid-code', 400, '/api/auth/password-resets', INVALID))
		const res = await reset({ email: uniqueEmail(), password: NEW_PASSWORD })
		expect(res.status).toBe(422)
		expect(res.body.errors).toEqual([{ pointer: '#/code', code: 'required', detail: 'is required' }])
		const bad = await reset({ email: uniqueEmail(), code: '12345', password: NEW_PASSWORD })
		expect(bad.body.errors).toEqual([{ pointer: '#/code', code: 'pattern', detail: 'must be the 6 digits from the mail' }])
	})

	test('of 12 resets fired together with one token, exactly one succeeds', async () => {
		const user = await signUp(t)
		const { token } = proofOf(await recoveryMail(user.email))
		const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => reset({ token, password: `${NEW_PASSWORD} ${i}` })))
		const statuses = answers.map((answer) => answer.status).sort()
		expect(statuses).toEqual([200, ...Array(11).fill(400)])
		const winner = answers.findIndex((answer) => answer.status === 200)
		await login(t, user.email, `${NEW_PASSWORD} ${winner}`)
	})

	test('recovery clears the email’s login lockout', async () => {
		const user = await signUp(t)
		for (let i = 0; i < 3; i++) await t.call('POST', '/api/auth/login', { json: { email: user.email, password: 'wrong password!' } })
		expect((await t.call('POST', '/api/auth/login', { json: { email: user.email, password: PASSWORD } })).status).toBe(429)
		const { token } = proofOf(await recoveryMail(user.email))
		expect((await reset({ token, password: NEW_PASSWORD })).status).toBe(200)
		await login(t, user.email, NEW_PASSWORD)
	})
})

describe('recovery by the code in the mail', () => {
	test('the address and the code set the password', async () => {
		const user = await signUp(t)
		const { code } = proofOf(await recoveryMail(user.email))
		expect((await reset({ email: ` ${user.email.toUpperCase()} `, code, password: NEW_PASSWORD })).status).toBe(200)
		await login(t, user.email, NEW_PASSWORD)
	})

	test('five wrong codes void it: the right one is then refused too', async () => {
		const user = await signUp(t)
		const { code, token } = proofOf(await recoveryMail(user.email))
		const wrong = code === '000000' ? '000001' : '000000'
		for (let i = 0; i < 5; i++)
			expect((await reset({ email: user.email, code: wrong, password: NEW_PASSWORD })).body).toEqual(problem('invalid-code', 400, '/api/auth/password-resets', INVALID))
		expect((await reset({ email: user.email, code, password: NEW_PASSWORD })).status).toBe(400)
		// The voided code takes its link with it.
		expect((await reset({ token, password: NEW_PASSWORD })).status).toBe(400)
		expect((await t.call('POST', '/api/auth/login', { json: { email: user.email, password: PASSWORD } })).status).toBe(200)
	})

	// Eight: more than a code's five tries, fewer than the address's ten wrong codes a day (email.code-limit.test.ts).
	test('wrong codes fired together are counted one by one: after 8 in parallel the right code is refused', async () => {
		const user = await signUp(t)
		const { code } = proofOf(await recoveryMail(user.email))
		const wrongs = Array.from({ length: 8 }, (_, i) => String((Number(code) + 1 + i) % 1_000_000).padStart(6, '0'))
		const answers = await Promise.all(wrongs.map((wrong) => reset({ email: user.email, code: wrong, password: NEW_PASSWORD })))
		expect(answers.every((answer) => answer.status === 400)).toBe(true)
		expect((await reset({ email: user.email, code, password: NEW_PASSWORD })).status).toBe(400)
	})
})

describe('expiry', () => {
	let short: TestApp
	beforeAll(async () => {
		// A database of its own: sharing another app's, that app's worker, woken by the same commit, could take the
		// request and issue the token with its own hour.
		short = await startTestApp({ SMTP_URL: sink.url, APP_URL, RECOVERY_TTL_SECONDS: '1' })
	})
	afterAll(() => short.close())

	test('a genuine token past its hour is code-expired; its code is invalid-code', async () => {
		const user = await signUp(short)
		const { token, code } = proofOf(await recoveryMail(user.email, short))
		await Bun.sleep(1100)
		expect((await reset({ token, password: NEW_PASSWORD }, short)).body).toEqual(
			problem('code-expired', 400, '/api/auth/password-resets', 'The token has expired; ask for a new mail'),
		)
		expect((await reset({ email: user.email, code, password: NEW_PASSWORD }, short)).body.type).toEndWith('/invalid-code')
	})
})
