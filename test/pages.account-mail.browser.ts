/**
 * /sign-up, /recovery, /password-reset and /email-verification in a real Chromium (Debian's, at
 * /usr/bin/chromium): the mail links' fragment token read by /pages/link-token.js under the pages' policy, the
 * mail's code without script, and axe-core at 320 px and 1280 px in light and dark on every state. Screenshots
 * land in test-artifacts/pages/.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import type { Browser, Page } from 'playwright-core'
import { startTestApp, type TestApp } from './support/app'
import { contextIn, launchChromium, openPage, pageStateChecker, VIEW_STATES } from './support/browser'
import { login, PASSWORD, signUp, uniqueEmail } from './support/fixtures'
import { proofOf } from './support/mail'
import { mailsTo, waitForMails } from './support/ways-in'

setDefaultTimeout(90_000)

const NEW_PASSWORD = 'a brand new passphrase'

let t: TestApp
let server: ReturnType<TestApp['app']['listen']>
let browser: Browser
let base: string

beforeAll(async () => {
	t = await startTestApp()
	server = t.app.listen({ port: 0, hostname: '127.0.0.1' })
	base = `http://127.0.0.1:${server.server?.port}`
	browser = await launchChromium()
})
afterAll(async () => {
	await browser?.close()
	await server?.stop()
	await t?.close()
})

const activeId = (page: Page) => page.evaluate('document.activeElement?.id')

/** The next mail of a kind to an address (from the log: no SMTP in tests), its link's token and its code. */
async function nextProof(email: string, kind: string) {
	const before = mailsTo(t, email, kind).length
	return async () => proofOf((await waitForMails(t, email, kind, before + 1)).slice(before)[0] as { text: string })
}

const submit = (page: Page, selector = 'form[method=post] button[type=submit]:not([name])') => Promise.all([page.waitForLoadState('load'), page.click(selector)])

describe('the whole road in Chromium', () => {
	test('sign up with the keyboard, confirm by the mail’s link, forget the password, set a new one by the link, sign in', async () => {
		const email = uniqueEmail('browser-road')
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await openPage(context)
		await page.goto(`${base}/sign-in`)
		await Promise.all([page.waitForURL(`${base}/sign-up`), page.click('text=Create an account')])
		await page.waitForFunction("document.activeElement?.id === 'name'")
		await page.keyboard.type('Ada Lovelace')
		await page.keyboard.press('Tab')
		await page.keyboard.type(email)
		await page.keyboard.press('Tab')
		expect(await activeId(page)).toBe('password')
		await page.keyboard.type(PASSWORD)
		const verification = await nextProof(email, 'verification')
		await Promise.all([page.waitForLoadState('load'), page.keyboard.press('Enter')])
		await page.waitForSelector('text=Check your email')
		expect(await activeId(page)).toBe('code')

		// The mail's link, opened in this browser: the script takes the token, hides the code and clears the address.
		const { token } = await verification()
		await page.goto(`${base}/email-verification#token=${token}`)
		await page.waitForSelector('#link-ready:not([hidden])')
		expect(page.url()).toBe(`${base}/email-verification`)
		expect(await page.isVisible('#code-proof')).toBe(false)
		expect(await page.isVisible('#resend')).toBe(false)
		await submit(page)
		await page.waitForSelector('text=Your email address is confirmed')

		// Recovery: the address, then the mail's link, the new password typed where the focus is.
		await page.goto(`${base}/recovery`)
		await page.fill('#email', email)
		const recovery = await nextProof(email, 'recovery')
		await submit(page)
		await page.waitForSelector('text=Set a new password')
		await page.goto(`${base}/password-reset#token=${(await recovery()).token}`)
		await page.waitForSelector('#link-ready:not([hidden])')
		expect(await activeId(page)).toBe('password')
		expect(page.url()).toBe(`${base}/password-reset`)
		await page.keyboard.type(NEW_PASSWORD)
		await Promise.all([page.waitForLoadState('load'), page.keyboard.press('Enter')])
		await page.waitForSelector('text=Your password is set')
		await Promise.all([page.waitForURL(`${base}/sign-in`), page.click('a.button')])
		expect(await page.inputValue('#email')).toBe('')
		await page.fill('#email', email)
		await page.fill('#password', NEW_PASSWORD)
		await Promise.all([page.waitForURL(`${base}/account`), page.click('form[method=post] button[type=submit]:not([formaction])')])
		expect(await page.textContent('main')).toContain(`Signed in as ${email}`)
		expect(violations).toEqual([])
		await context.close()
	})

	test('without script the link’s page asks for the mail’s code, which sets the password', async () => {
		const account = await signUp(t)
		const context = await browser.newContext({ javaScriptEnabled: false })
		const { page } = await openPage(context)
		const recovery = await nextProof(account.email, 'recovery')
		expect((await t.call('POST', '/api/auth/recovery-requests', { json: { email: account.email } })).status).toBe(202)
		const { token, code } = await recovery()
		await page.goto(`${base}/password-reset#token=${token}`)
		expect(await page.isVisible('#code-proof')).toBe(true)
		expect(await page.isVisible('#link-ready')).toBe(false)
		await page.fill('#email', account.email)
		await page.fill('#code', code)
		await page.fill('#password', NEW_PASSWORD)
		await submit(page)
		await page.waitForSelector('text=Your password is set')
		expect((await login(t, account.email, NEW_PASSWORD)).email).toBe(account.email)
		await context.close()
	})
})

describe('axe-core finds no serious or critical violation', () => {
	for (const { width, scheme } of VIEW_STATES)
		test.concurrent(`on sign-up, recovery, password reset and email verification, every state, at ${width} px, ${scheme}`, async () => {
			const taken = await signUp(t)
			const email = uniqueEmail('axe')
			const context = await contextIn(browser, { width, scheme })
			const { page, violations } = await openPage(context)
			const { check, found } = pageStateChecker(page, { width, scheme })

			await page.goto(`${base}/sign-up`)
			await check('sign-up')
			await page.fill('#email', taken.email)
			await page.fill('#password', 'short')
			await submit(page)
			await page.waitForSelector('#error-summary')
			await check('sign-up-error')
			await page.fill('#email', email)
			await page.fill('#password', PASSWORD)
			const verification = await nextProof(email, 'verification')
			await submit(page)
			await page.waitForSelector('text=Check your email')
			await check('check-email')
			await page.fill('#code', '12')
			await submit(page)
			await page.waitForSelector('#error-summary')
			await check('email-verification-error')
			const { token } = await verification()
			await page.goto(`${base}/email-verification#token=${token}`)
			await page.waitForSelector('#link-ready:not([hidden])')
			await check('email-verification-link')
			await submit(page)
			await page.waitForSelector('text=Your email address is confirmed')
			await check('email-verified')

			await page.goto(`${base}/recovery`)
			await check('recovery')
			await page.fill('#email', 'not an address')
			// The browser's own check would stop an invalid address: the server's sentence is what is checked here.
			await page.evaluate("document.querySelector('form[method=post]').noValidate = true")
			await submit(page)
			await page.waitForSelector('#error-summary')
			await check('recovery-error')
			await page.fill('#email', email)
			const recovery = await nextProof(email, 'recovery')
			await submit(page)
			await page.waitForSelector('text=Set a new password')
			await check('password-reset-sent')
			await page.fill('#code', '000000')
			await page.fill('#password', 'short')
			await submit(page)
			await page.waitForSelector('#error-summary')
			await check('password-reset-error')
			await page.goto(`${base}/password-reset#token=${(await recovery()).token}`)
			await page.waitForSelector('#link-ready:not([hidden])')
			await check('password-reset-link')
			await page.fill('#password', NEW_PASSWORD)
			await submit(page)
			await page.waitForSelector('text=Your password is set')
			await check('password-set')

			expect(found).toEqual({
				'sign-up': [],
				'sign-up-error': [],
				'check-email': [],
				'email-verification-error': [],
				'email-verification-link': [],
				'email-verified': [],
				recovery: [],
				'recovery-error': [],
				'password-reset-sent': [],
				'password-reset-error': [],
				'password-reset-link': [],
				'password-set': [],
			})
			expect(violations).toEqual([])
			await context.close()
		})
})
