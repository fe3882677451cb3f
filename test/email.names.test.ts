import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { type TestApp } from './support/app'
import { signUp, uniqueEmail } from './support/fixtures'
import { proofOf, SmtpSink, SUBJECT, startAppWithSmtp } from './support/mail'

setDefaultTimeout(60_000)

const APP_URL = 'https://app.example.test'
const ZWSP = '\u200b'

let sink: SmtpSink
let t: TestApp

let closeApp: () => Promise<void>

beforeAll(async () => {
	;({ t, sink, close: closeApp } = await startAppWithSmtp())
})
afterAll(() => closeApp())

/** A name as anyone may type it at sign-up (200 characters, the most the API takes): lines, a fake link, bidi controls. */
const HOSTILE = `Ada\r\n\r\nYour account is locked. Unlock it at:\nhttps://evil.example/unlock#token=x\u2028\u2029\u202Eevil ${'x'.repeat(200)}`.slice(0, 200)
/** The same as the greeting shows it: one line, no controls, the first 100 characters, no link. */
const SHOWN = `Ada Your account is locked.${ZWSP} Unlock it at:${ZWSP} https:${ZWSP}/${ZWSP}/${ZWSP}evil.${ZWSP}example/${ZWSP}unlock#token=x evil ${'x'.repeat(17)}`

describe('the account name in mail (API.md: one line, no control characters, at most 100 characters, never a link)', () => {
	test('the sign-up and recovery mails greet a hostile name on one line, cut to 100 characters, with no link in it, in both parts', async () => {
		const email = uniqueEmail('named')
		expect(Array.from(HOSTILE).length).toBe(200)
		await signUp(t, { email, name: HOSTILE })
		expect((await t.call('POST', '/api/auth/recovery-requests', { json: { email } })).status).toBe(202)
		const mails = [await sink.waitFor(email, { subject: SUBJECT.verification }), await sink.waitFor(email, { subject: SUBJECT.recovery })]
		for (const mail of mails) {
			const lines = mail.text.split('\n')
			expect(lines[0]).toBe(`Hello ${SHOWN},`)
			expect(Array.from(SHOWN.replaceAll(ZWSP, '')).length).toBe(100)
			expect(lines[1]).toBe('')
			// The only link in the mail is the service's own, and it is what a reader (or a parser) finds.
			expect(mail.text).not.toMatch(/evil\.example|https?:\/\/evil/)
			expect(mail.text).not.toMatch(/[\r\u2028\u2029\u202E]/)
			expect(proofOf(mail).link).toStartWith(APP_URL)
			expect(mail.html).toContain(`<p>Hello ${SHOWN.replaceAll('/', '&#x2F;').replaceAll('=', '&#x3D;')},</p>`)
			expect(mail.html).not.toMatch(/evil\.example|https?:\/\/evil|https?:&#x2F;&#x2F;evil|\u202E/)
		}
	})

	test('the name the API shows is left as it was given: only mail shows it cut', async () => {
		const account = await signUp(t, { name: HOSTILE })
		const me = await t.call('GET', '/api/users/me', { token: account.accessToken })
		expect(me.status).toBe(200)
		expect(me.body.data.name).toBe(HOSTILE)
	})
})
