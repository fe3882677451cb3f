/**
 * The pages as a person uses them: a real Chromium (Debian's, at /usr/bin/chromium; .ci/run installs it),
 * with the keyboard alone, checked by axe-core at 320 px and 1280 px, in light and dark, under the pages'
 * own Content-Security-Policy. Screenshots land in test-artifacts/pages/.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { PageRenderer } from '../src/pages'
import { startTestApp, type TestApp } from './support/app'
import { contextIn, launchChromium, openPage, PAGE_ARTIFACTS, pageStateChecker, seriousViolations, VIEW_STATES, type ViewState } from './support/browser'
import { awayFromStepBoundary, enrollTotp, totpCode } from './support/factors'
import { PASSWORD, signUp, type Account } from './support/fixtures'
import { authorizationRequest, registerClient } from './support/oauth'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(60_000)

const LOGO = '<svg xmlns="http://www.w3.org/2000/svg" width="160" height="40" viewBox="0 0 160 40"><rect width="40" height="40" rx="8" fill="#0f766e"/><text x="50" y="27" font-family="sans-serif" font-size="20" fill="#0f766e">Acme</text></svg>'

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
const activeText = (page: Page) => page.evaluate('document.activeElement?.textContent')

describe('with the keyboard alone', () => {
	test('sign in (Tab, Enter), land on the account, sign out', async () => {
		const account = await signUp(t)
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await openPage(context)
		await page.goto(`${base}/sign-in`)
		// The email field has the focus on arrival (a loaded machine may apply it a moment after `load`).
		await page.waitForFunction("document.activeElement?.id === 'email'")
		expect(await activeId(page)).toBe('email')
		await page.keyboard.type(account.email)
		await page.keyboard.press('Tab')
		expect(await activeId(page)).toBe('password')
		await page.keyboard.type(PASSWORD)
		await page.keyboard.press('Tab')
		expect(await activeText(page)).toBe('Sign in')
		await Promise.all([page.waitForURL(`${base}/account`), page.keyboard.press('Enter')])
		expect(await page.textContent('main')).toContain(`Signed in as ${account.email}`)

		// The session cookie is the browser's, HttpOnly: no script reads it.
		const cookies = await context.cookies(base)
		const session = cookies.find((c) => c.name === '__Host-latchkey-session')
		expect(session).toMatchObject({ httpOnly: true, secure: true, sameSite: 'Lax', path: '/' })
		expect(await page.evaluate('document.cookie')).toBe('')

		// Tab reaches the sign-out button, past the account's sections and forms; a visible focus ring is drawn.
		let focused = ''
		for (let i = 0; i < 30 && focused !== 'Sign out'; i++) {
			await page.keyboard.press('Tab')
			focused = String(await activeText(page))
		}
		expect(focused).toBe('Sign out')
		expect(await page.evaluate('getComputedStyle(document.activeElement).outlineStyle')).toBe('solid')
		await Promise.all([page.waitForURL(`${base}/sign-out`), page.keyboard.press('Enter')])
		expect(await page.textContent('h1')).toBe('You are signed out')
		expect((await context.cookies(base)).some((c) => c.name === '__Host-latchkey-session')).toBe(false)
		expect(violations).toEqual([])
		await context.close()
	})

	test('a wrong password puts the focus on the problem; the second factor is typed and sent with Enter', async () => {
		const account = await signUp(t)
		const { secret } = await enrollTotp(t, account)
		const context = await browser.newContext({ viewport: { width: 320, height: 640 } })
		const { page, violations } = await openPage(context)
		await page.goto(`${base}/sign-in?return_to=%2Faccount`)
		// Typed only once the field has the focus the page gives it on arrival (a loaded machine may apply it later than `load`).
		await page.waitForFunction("document.activeElement?.id === 'email'")
		await page.keyboard.type(account.email)
		await page.keyboard.press('Tab')
		await page.keyboard.type('not the password')
		await Promise.all([page.waitForLoadState('load'), page.keyboard.press('Enter')])
		await page.waitForSelector('#error-summary')
		expect(await activeId(page)).toBe('error-summary')
		expect(await page.inputValue('#email')).toBe(account.email)

		// Tab from the problem to the email (kept), on to the password.
		await page.keyboard.press('Tab')
		await page.keyboard.press('Tab')
		expect(await activeId(page)).toBe('password')
		await page.keyboard.type(PASSWORD)
		await Promise.all([page.waitForURL(`${base}/sign-in?return_to=%2Faccount`), page.keyboard.press('Enter')])
		await page.waitForSelector('#code')
		expect(await activeId(page)).toBe('code')
		await awayFromStepBoundary()
		await page.keyboard.type(totpCode(secret, 1))
		await Promise.all([page.waitForURL(`${base}/account`), page.keyboard.press('Enter')])
		expect(await page.textContent('main')).toContain(`Signed in as ${account.email}`)
		expect(violations).toEqual([])
		await context.close()
	})
})

describe('axe-core finds no serious or critical violation', () => {
	for (const { width, scheme } of VIEW_STATES)
		test.concurrent(`on every page and state at ${width} px, ${scheme}`, async () => {
			const account: Account = await signUp(t)
			const { secret } = await enrollTotp(t, account)
			const context = await contextIn(browser, { width, scheme })
			const { page, violations } = await openPage(context)
			const { check, found } = pageStateChecker(page, { width, scheme })

			await page.goto(`${base}/sign-in`)
			await check('sign-in')
			await page.fill('#email', account.email)
			await page.fill('#password', 'not the password')
			await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
			await page.waitForSelector('#error-summary')
			await check('sign-in-error')
			await page.fill('#password', PASSWORD)
			await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
			await page.waitForSelector('#code')
			await check('second-factor')
			await page.fill('#code', '000000' === totpCode(secret) ? '111111' : '000000')
			await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
			await page.waitForSelector('#error-summary')
			await check('second-factor-error')
			await awayFromStepBoundary()
			await page.fill('#code', totpCode(secret, 1))
			await Promise.all([page.waitForURL(`${base}/account`), page.click('button[type=submit]')])
			await check('account')
			await page.goto(`${base}/sign-out`)
			await check('sign-out-confirm')
			await Promise.all([page.waitForURL(`${base}/sign-out`), page.click('button[type=submit]')])
			await page.waitForSelector('text=You are signed out')
			await check('signed-out')

			// Nothing reaches past the page's edge at 320 px.
			expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true)
			expect(found).toEqual({ 'sign-in': [], 'sign-in-error': [], 'second-factor': [], 'second-factor-error': [], account: [], 'sign-out-confirm': [], 'signed-out': [] })
			expect(violations).toEqual([])
			await context.close()
		})
})

test('branded: the logo loads from its origin under the policy, the brand colour reads in light and dark', async () => {
	const branded = await startTestApp({}, undefined, {
		pageRenderer: new PageRenderer({ appName: 'Acme Notes', brandColor: '#0f766e', brandLogoUrl: 'https://cdn.acme.test/logo.svg' }),
	})
	const brandedServer = branded.app.listen({ port: 0, hostname: '127.0.0.1' })
	const origin = `http://127.0.0.1:${brandedServer.server?.port}`
	try {
		for (const { width, scheme } of [{ width: 320, scheme: 'dark' }, { width: 1280, scheme: 'light' }] as const) {
			const context = await browser.newContext({ viewport: { width, height: 700 }, colorScheme: scheme })
			const { page, violations } = await openPage(context)
			await page.route('https://cdn.acme.test/logo.svg', (route) => route.fulfill({ contentType: 'image/svg+xml', body: LOGO }))
			await page.goto(`${origin}/sign-in`)
			await page.fill('#email', 'someone@example.test')
			await page.fill('#password', 'not the password')
			await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
			await page.waitForSelector('#error-summary')
			expect(await page.evaluate("document.querySelector('img.logo').naturalWidth > 0")).toBe(true)
			expect(await page.evaluate("getComputedStyle(document.querySelector('button')).backgroundColor")).toBe('rgb(15, 118, 110)')
			await page.screenshot({ path: join(PAGE_ARTIFACTS, `branded-${width}-${scheme}.png`), fullPage: true })
			expect(await seriousViolations(page)).toEqual([])
			expect(violations).toEqual([])
			await context.close()
		}
	} finally {
		await brandedServer.stop()
		await branded.close()
	}
})

test('the policy is enforced: an injected inline script does not run', async () => {
	const context = await browser.newContext()
	const { page } = await openPage(context)
	await page.goto(`${base}/sign-in`)
	const ran = await page.evaluate(`(() => {
		const script = document.createElement('script')
		script.textContent = 'window.__injected = true'
		document.body.append(script)
		return window.__injected === true
	})()`)
	expect(ran).toBe(false)
	await context.close()
})

describe('the OpenID Provider’s pages: axe-core finds no serious or critical violation', () => {
	const states: ViewState[] = [
		{ width: 320, scheme: 'light' },
		{ width: 1280, scheme: 'dark' },
	]
	for (const { width, scheme } of states)
		test.concurrent(`consent, device code, the provider's sign-out question and its error page at ${width} px, ${scheme}`, async () => {
			const account = await signUp(t)
			const client = await registerClient(t, { type: 'public', firstParty: false, name: 'Acme Notes' })
			const context = await contextIn(browser, { width, scheme })
			const { page, violations } = await openPage(context)
			const { check, found } = pageStateChecker(page, { width, scheme })
			await page.goto(`${base}/sign-in`)
			await page.fill('#email', account.email)
			await page.fill('#password', PASSWORD)
			await Promise.all([page.waitForURL(`${base}/account`), page.click('button[type=submit]')])

			const request = await authorizationRequest({ authorization_endpoint: `${base}/oauth2/authorization`, issuer: base }, client.clientId, { scope: 'openid email profile offline_access', prompt: 'consent' })
			await page.goto(request.url.href)
			await page.waitForSelector('text=Acme Notes wants to use your')
			await check('consent')

			await page.goto(`${base}/device`)
			await check('device-code')
			await page.fill('#user_code', 'BCDF-GHJK')
			await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
			await page.waitForSelector('#error-summary')
			await check('device-code-error')

			await page.goto(`${base}/oauth2/logout?client_id=${encodeURIComponent(client.clientId)}`)
			await check('provider-sign-out')

			await page.goto(`${base}/oauth2/authorization?client_id=no-such-client&response_type=code&redirect_uri=https%3A%2F%2Fevil.example%2F`)
			await check('provider-error')

			expect(found).toEqual({ consent: [], 'device-code': [], 'device-code-error': [], 'provider-sign-out': [], 'provider-error': [] })
			expect(violations).toEqual([])
			await context.close()
		})
})
