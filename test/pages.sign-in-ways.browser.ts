/**
 * The /sign-in page's other ways in as a person uses them, in Debian's Chromium (playwright-core): the passkey
 * button (its script, /pages/passkeys.js, under the pages' policy, with the DevTools virtual authenticator), a
 * provider's button through a real OpenID Provider (oidc-provider) and back, and "email me a code"; each new
 * page and state checked by axe-core at 320 px and 1280 px, light and dark. The pages run at
 * http://localhost:<port> (PUBLIC_URL), a secure context whose host is the passkeys' RP ID.
 * Screenshots land in test-artifacts/pages/.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import type { Browser, Page } from 'playwright-core'
import { startTestApp, type TestApp } from './support/app'
import { contextIn, launchChromium, openPage, pageStateChecker, VIEW_STATES } from './support/browser'
import { freePort } from './support/ports'
import { PASSWORD, signUp, uniqueEmail } from './support/fixtures'
import { TestOpenIdProvider } from './support/oidc-provider'
import { SoftAuthenticator } from './support/soft-authenticator'
import { addPasskey, waitForMails } from './support/ways-in'

setDefaultTimeout(90_000)


let t: TestApp
let server: ReturnType<TestApp['app']['listen']>
let provider: TestOpenIdProvider
let browser: Browser
let base: string

beforeAll(async () => {
	const port = await freePort()
	base = `http://localhost:${port}`
	provider = await TestOpenIdProvider.start([`${base}/api/auth/providers/test/callback`])
	t = await startTestApp({
		PUBLIC_URL: base,
		OIDC_PROVIDERS: 'test',
		...provider.settings('test'),
		WEBAUTHN_RP_ID: 'localhost',
		WEBAUTHN_ORIGINS: base,
		MAIL_RESEND_SECONDS: '0',
	})
	server = t.app.listen({ port, hostname: '127.0.0.1' })
	browser = await launchChromium()
})
afterAll(async () => {
	await browser?.close()
	await server?.stop()
	await t?.close()
	await provider?.stop()
})

/** A virtual platform authenticator on the page (resident keys, user verification), holding `credentials`. */
async function virtualAuthenticator(page: Page, authenticator?: SoftAuthenticator) {
	const cdp = await page.context().newCDPSession(page)
	await cdp.send('WebAuthn.enable')
	const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
		options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
	})
	// The passkey registered through the API by the software authenticator, handed to Chromium's.
	for (const credential of authenticator?.credentials ?? [])
		await cdp.send('WebAuthn.addCredential', {
			authenticatorId,
			credential: {
				credentialId: credential.id.toString('base64'),
				isResidentCredential: true,
				rpId: 'localhost',
				privateKey: credential.privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64'),
				userHandle: Buffer.from(credential.userHandle, 'base64url').toString('base64'),
				signCount: credential.signCount,
			},
		})
	return { cdp, authenticatorId }
}

const activeText = (page: Page) => page.evaluate('document.activeElement?.textContent')

describe('the passkey button', () => {
	test('is shown by its script; Tab and Enter sign in with the passkey and go on to return_to', async () => {
		const account = await signUp(t)
		const authenticator = new SoftAuthenticator(base, 'localhost')
		await addPasskey(t, account, authenticator)
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await openPage(context)
		await virtualAuthenticator(page, authenticator)
		await page.goto(`${base}/sign-in?return_to=%2Faccount`)
		await page.waitForSelector('#passkey:not([hidden])')
		let focused = ''
		for (let i = 0; i < 10 && focused !== 'Sign in with a passkey'; i++) {
			await page.keyboard.press('Tab')
			focused = String(await activeText(page))
		}
		expect(focused).toBe('Sign in with a passkey')
		await Promise.all([page.waitForURL(`${base}/account`), page.keyboard.press('Enter')])
		expect(await page.textContent('main')).toContain(`Signed in as ${account.email}`)
		const session = (await context.cookies(base)).find((c) => c.name === '__Host-latchkey-session')
		expect(session).toMatchObject({ httpOnly: true, secure: true, sameSite: 'Lax' })
		expect(violations).toEqual([])
		await context.close()
	})

	test('as the second factor: after the password, "Use your passkey" finishes the sign-in', async () => {
		const account = await signUp(t)
		const authenticator = new SoftAuthenticator(base, 'localhost')
		await addPasskey(t, account, authenticator)
		const context = await browser.newContext({ viewport: { width: 320, height: 640 } })
		const { page, violations } = await openPage(context)
		await virtualAuthenticator(page, authenticator)
		await page.goto(`${base}/sign-in?return_to=%2Faccount`)
		await page.fill('#email', account.email)
		await page.fill('#password', PASSWORD)
		await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
		// A button's name, exactly: the heading above it says "Or use your passkey".
		const usePasskey = page.getByRole('button', { name: 'Use your passkey', exact: true })
		await usePasskey.waitFor({ state: 'visible' })
		await usePasskey.click()
		await page.waitForURL(`${base}/account`)
		expect(await page.textContent('main')).toContain(`Signed in as ${account.email}`)
		expect(violations).toEqual([])
		await context.close()
	})

	test('stays hidden without script', async () => {
		const context = await browser.newContext({ javaScriptEnabled: false })
		const { page } = await openPage(context)
		await page.goto(`${base}/sign-in`)
		expect(await page.isVisible('text=Sign in with a passkey')).toBe(false)
		// The providers' buttons need no script.
		expect(await page.isVisible('text=Sign in with Test')).toBe(true)
		expect(await page.isVisible('text=Email me a sign-in code')).toBe(true)
		await context.close()
	})
})

test('a provider’s button goes through the provider and back as the browser’s session', async () => {
	const email = uniqueEmail('provider-chromium')
	provider.signInAs = { sub: `sub-${email}`, email, email_verified: true }
	const context = await browser.newContext({ viewport: { width: 320, height: 640 } })
	const { page, violations } = await openPage(context)
	await page.goto(`${base}/sign-in?return_to=%2Faccount`)
	await Promise.all([page.waitForURL(`${base}/account`), page.click('text=Sign in with Test')])
	expect(await page.textContent('main')).toContain(`Signed in as ${email}`)
	// The flow's cookie is gone once it served.
	expect((await context.cookies(base)).map((c) => c.name)).not.toContain('__Host-latchkey-provider-flow')
	expect(violations).toEqual([])
	await context.close()
})

describe('axe-core finds no serious or critical violation on the other ways in', () => {
	for (const { width, scheme } of VIEW_STATES)
		test.concurrent(`at ${width} px, ${scheme}`, async () => {
			const account = await signUp(t)
			const context = await contextIn(browser, { width, scheme })
			const { page, violations } = await openPage(context)
			// An authenticator without a passkey for this site: the browser says no, and the page says so.
			await virtualAuthenticator(page)
			const { check, found } = pageStateChecker(page, { width, scheme })

			await page.goto(`${base}/sign-in`)
			await page.waitForSelector('#passkey:not([hidden])')
			await check('sign-in-all-ways')
			await page.click('text=Sign in with a passkey')
			await page.waitForSelector('#passkey-status:not(:empty)')
			await check('sign-in-passkey-failed')

			await page.goto(`${base}/sign-in/provider/callback?error=access-denied`)
			await page.waitForSelector('#error-summary')
			await check('sign-in-provider-error')

			await page.goto(`${base}/sign-in`)
			await page.fill('#email', account.email)
			await Promise.all([page.waitForLoadState('load'), page.click('text=Email me a sign-in code')])
			await page.waitForSelector('#code')
			await check('email-code')
			await waitForMails(t, account.email, 'sign-in', 1)
			await page.fill('#code', '12')
			await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
			await page.waitForSelector('#error-summary')
			await check('email-code-error')

			// The second factor of an account with a passkey: the code's field and the passkey's button.
			const withPasskey = await signUp(t)
			await addPasskey(t, withPasskey, new SoftAuthenticator(base, 'localhost'))
			await page.goto(`${base}/sign-in?force=1`)
			await page.fill('#email', withPasskey.email)
			await page.fill('#password', PASSWORD)
			await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
			await page.getByRole('button', { name: 'Use your passkey', exact: true }).waitFor({ state: 'visible' })
			await check('second-factor-passkey')

			expect(found).toEqual({ 'sign-in-all-ways': [], 'sign-in-passkey-failed': [], 'sign-in-provider-error': [], 'email-code': [], 'email-code-error': [], 'second-factor-passkey': [] })
			expect(violations).toEqual([])
			await context.close()
		})
})
