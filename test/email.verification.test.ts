import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { problem, startTestApp, type TestApp } from './support/app'
import { login, PASSWORD, signUp, signUpAdmin, uniqueEmail } from './support/fixtures'
import { enrollTotp } from './support/factors'
import { loggedMail, proofOf, SmtpSink, SUBJECT, startAppWithSmtp } from './support/mail'

setDefaultTimeout(60_000)

const APP_URL = 'https://app.example.test'

let sink: SmtpSink
let t: TestApp

let closeApp: () => Promise<void>

beforeAll(async () => {
	;({ t, sink, close: closeApp } = await startAppWithSmtp())
})
afterAll(() => closeApp())

const verify = (body: Record<string, unknown>, app = t) => app.call('POST', '/api/auth/email-verifications', { json: body })
const requestVerification = (email: string, app = t) => app.call('POST', '/api/auth/verification-requests', { json: { email } })
const signUpRaw = (email: string, app = t) => app.call('POST', '/api/users', { json: { email, password: PASSWORD, name: 'Grace' } })

describe('verification at sign-up (EMAIL_VERIFICATION=optional, the default)', () => {
	test('sign-up sends a mail whose link token verifies the address; the user can log in before', async () => {
		const email = uniqueEmail('verify')
		expect((await signUpRaw(email)).status).toBe(201)
		const mail = await sink.waitFor(email, { subject: SUBJECT.verification })
		expect(mail.from).toBe('"Latchkey" <no-reply@app.example.test>')
		expect(mail.subject).toBe('Confirm your email address for Latchkey')
		expect(mail.text).toContain('valid for 24 hours')
		const { link, token } = proofOf(mail)
		expect(link).toStartWith(`${APP_URL}/verify-email#token=`)
		const user = await login(t, email)
		expect((await t.call('GET', '/api/users/me', { token: user.accessToken })).body.data.emailVerified).toBe(false)

		const res = await verify({ token })
		expect(res.status).toBe(200)
		expect(res.headers.get('cache-control')).toBe('no-store')
		expect(res.body).toEqual({ data: expect.objectContaining({ id: user.id, email, emailVerified: true, pendingEmail: null }), message: 'Email verified', errors: [] })
		expect((await verify({ token })).body.type).toEndWith('/invalid-code')
	})

	test('the address and the 6-digit code verify it too', async () => {
		const email = uniqueEmail('verify')
		await signUpRaw(email)
		const { code } = proofOf(await sink.waitFor(email, { subject: SUBJECT.verification }))
		const res = await verify({ email: email.toUpperCase(), code })
		expect(res.status).toBe(200)
		expect(res.body.data.emailVerified).toBe(true)
	})

	test('a new request sends a new mail and voids the first; a verified address asks in vain', async () => {
		const email = uniqueEmail('verify')
		await signUpRaw(email)
		const first = proofOf(await sink.waitFor(email, { subject: SUBJECT.verification }))
		expect((await requestVerification(email)).status).toBe(202)
		const second = proofOf(await sink.waitFor(email, { subject: SUBJECT.verification, count: 2 }))
		expect((await verify({ token: first.token })).body.type).toEndWith('/invalid-code')
		expect((await verify({ token: second.token })).status).toBe(200)
		expect((await requestVerification(email)).status).toBe(202)
		await t.app.decorator.jobs.idle()
		expect(sink.to(email, SUBJECT.verification)).toHaveLength(2)
	})

	test('the wrong code five times voids it', async () => {
		const email = uniqueEmail('verify')
		await signUpRaw(email)
		const { code, token } = proofOf(await sink.waitFor(email, { subject: SUBJECT.verification }))
		const wrong = code === '999999' ? '999998' : '999999'
		for (let i = 0; i < 5; i++) expect((await verify({ email, code: wrong })).status).toBe(400)
		expect((await verify({ email, code })).body.type).toEndWith('/invalid-code')
		expect((await verify({ token })).body.type).toEndWith('/invalid-code')
	})

	test('a deactivated account’s token opens nothing', async () => {
		const email = uniqueEmail('verify')
		await signUpRaw(email)
		const { token } = proofOf(await sink.waitFor(email, { subject: SUBJECT.verification }))
		const user = await login(t, email)
		expect((await t.call('DELETE', '/api/users/me', { token: user.accessToken })).status).toBe(200)
		expect((await verify({ token })).body.type).toEndWith('/invalid-code')
	})

	test('each step is in the audit trail, and no code or token is', async () => {
		const email = uniqueEmail('verify')
		const created = await signUpRaw(email)
		const { token, code } = proofOf(await sink.waitFor(email, { subject: SUBJECT.verification }))
		await verify({ email, code: code === '000000' ? '000001' : '000000' })
		await verify({ token })
		const admin = await signUpAdmin(t)
		const trail = await t.call('GET', `/api/audit-events?userId=${created.body.data.id}`, { token: admin.accessToken })
		expect(trail.body.data.items.map((event: { type: string }) => event.type).reverse()).toEqual(['user.signed-up', 'code.rejected', 'email.verified'])
		expect(trail.text).not.toContain(token)
		expect(trail.text).not.toContain(`"${code}"`)
	})
})

describe('EMAIL_VERIFICATION=required', () => {
	let strict: TestApp
	beforeAll(async () => {
		strict = await startTestApp({ SMTP_URL: sink.url, APP_URL, EMAIL_VERIFICATION: 'required' }, t.database)
	})
	afterAll(() => strict.close())

	test('the right password of an unverified account is 403 email-not-verified; a wrong one is the usual 401; after the proof, 200', async () => {
		const email = uniqueEmail('strict')
		expect((await signUpRaw(email, strict)).status).toBe(201)
		const right = await strict.call('POST', '/api/auth/login', { json: { email, password: PASSWORD } })
		expect(right.body).toEqual(
			problem('email-not-verified', 403, '/api/auth/login', 'Verify your email address first: follow the link or enter the code from the mail'),
		)
		const wrong = await strict.call('POST', '/api/auth/login', { json: { email, password: 'not the password' } })
		expect(wrong.status).toBe(401)
		expect(wrong.body.type).toEndWith('/invalid-credentials')
		const { token } = proofOf(await sink.waitFor(email, { subject: SUBJECT.verification }))
		expect((await verify({ token }, strict)).status).toBe(200)
		await login(strict, email)
	})

	test('the operator’s first admin is verified: it can sign in', async () => {
		const admin = await signUpAdmin(strict)
		expect((await strict.call('GET', '/api/users/me', { token: admin.accessToken })).body.data.emailVerified).toBe(true)
	})
})

describe('EMAIL_VERIFICATION=off', () => {
	test('sign-up sends nothing', async () => {
		const off = await startTestApp({ SMTP_URL: sink.url, APP_URL, EMAIL_VERIFICATION: 'off' }, t.database)
		try {
			const email = uniqueEmail('off')
			expect((await signUpRaw(email, off)).status).toBe(201)
			await off.app.decorator.jobs.idle()
			await Bun.sleep(100)
			expect(sink.to(email)).toHaveLength(0)
		} finally {
			await off.close()
		}
	})
})

describe('without APP_URL (the default)', () => {
	test("the links in mails open Latchkey's own pages at PUBLIC_URL: email verification, password reset, and a notice's recovery page", async () => {
		const PAGES = 'https://auth.example.test'
		const pages = await startTestApp({ PUBLIC_URL: PAGES, MAIL_RESEND_SECONDS: '0' })
		try {
			const email = uniqueEmail('pages')
			expect((await signUpRaw(email, pages)).status).toBe(201)
			const { link, token } = proofOf(await loggedMail(pages, email, 10_000, 'verification'))
			expect(link).toStartWith(`${PAGES}/email-verification#token=`)
			expect((await verify({ token }, pages)).status).toBe(200)

			expect((await pages.call('POST', '/api/auth/recovery-requests', { json: { email } })).status).toBe(202)
			expect(proofOf(await loggedMail(pages, email, 10_000, 'recovery')).link).toStartWith(`${PAGES}/password-reset#token=`)

			await enrollTotp(pages, await login(pages, email))
			expect((await loggedMail(pages, email, 10_000, 'way-in-notice')).text.split('\n')).toContain(`${PAGES}/recovery`)
		} finally {
			await pages.close()
		}
	})
})

describe('without SMTP_URL', () => {
	test('in development each mail goes to the log, link and code included', async () => {
		// A database of its own: an app sharing another's would see that app's worker (with its SMTP sink) woken by
		// the same commit, and the mail sent there rather than logged here.
		const dev = await startTestApp({ APP_URL })
		try {
			const email = uniqueEmail('logged')
			expect((await signUpRaw(email, dev)).status).toBe(201)
			const mail = await loggedMail(dev, email)
			expect(mail.kind).toBe('verification')
			const { token } = proofOf(mail)
			expect((await verify({ token }, dev)).status).toBe(200)
		} finally {
			await dev.close()
		}
	})

	test('in production the two request routes answer 503 mail-unavailable and queue nothing; sign-up still works', async () => {
		const production = await startTestApp({ NODE_ENV: 'production' }, t.database)
		try {
			const email = uniqueEmail('prod')
			expect((await signUpRaw(email, production)).status).toBe(201)
			for (const path of ['/api/auth/verification-requests', '/api/auth/recovery-requests']) {
				const res = await production.call('POST', path, { json: { email } })
				expect(res.body).toEqual(
					problem(
						'mail-unavailable',
						503,
						path,
						'This service cannot send mail now (no SMTP server is configured); try again later or contact its operator',
					),
				)
			}
			const user = await login(production, email)
			const change = await production.call('PUT', '/api/users/me', {
				json: { email: uniqueEmail('moved'), name: 'x', currentPassword: PASSWORD },
				token: user.accessToken,
			})
			expect(change.status).toBe(503)
			expect(change.body.type).toEndWith('/mail-unavailable')
		} finally {
			await production.close()
		}
	})
})
