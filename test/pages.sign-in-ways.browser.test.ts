/**
 * The /sign-in page's other ways in as a person uses them, in Debian's Chromium (playwright-core): the passkey
 * button (its script, /pages/sign-in.js, under the pages' policy, with the DevTools virtual authenticator), a
 * provider's button through a real OpenID Provider (oidc-provider) and back, and "email me a code"; each new
 * page and state checked by axe-core at 320 px and 1280 px, light and dark. The pages run at
 * http://localhost:<port> (PUBLIC_URL), a secure context whose host is the passkeys' RP ID.
 * Screenshots land in test-artifacts/pages/.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdirSync, readFileSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { join } from 'node:path'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import { startTestApp, type TestApp } from './support/app'
import { PASSWORD, signUp, uniqueEmail } from './support/fixtures'
import { TestOpenIdProvider } from './support/oidc-provider'
import { SoftAuthenticator } from './support/soft-authenticator'
import { addPasskey, waitForMails } from './support/ways-in'

setDefaultTimeout(90_000)

const ARTIFACTS = join(import.meta.dir, '..', 'test-artifacts', 'pages')
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8')

let t: TestApp
let server: ReturnType<TestApp['app']['listen']>
let provider: TestOpenIdProvider
let browser: Browser
let base: string

/** A port nothing listens on yet: PUBLIC_URL, the passkeys' origin and the provider's redirect URI name it before the app starts. */
async function freePort(): Promise<number> {
	const probe = createServer()
	await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
	const { port } = probe.address() as AddressInfo
	await new Promise<void>((resolve) => probe.close(() => resolve()))
	return port
}

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
	browser = await chromium.launch({
		executablePath: '/usr/bin/chromium',
		// localhost is this machine's IPv4 loopback, where the app listens (not ::1).
		args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--host-resolver-rules=MAP localhost 127.0.0.1'],
	})
	mkdirSync(ARTIFACTS, { recursive: true })
})
afterAll(async () => {
	await browser?.close()
	await server?.stop()
	await t?.close()
	await provider?.stop()
})

/** A page that records what the policy refused and any script error, and reaches nothing beyond this machine. */
async function openPage(context: BrowserContext): Promise<{ page: Page; violations: string[] }> {
	const page = await context.newPage()
	const violations: string[] = []
	page.on('console', (message) => {
		if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text())
	})
	page.on('pageerror', (error) => violations.push(error.message))
	await page.route('**/*', (route) => (['localhost', '127.0.0.1'].includes(new URL(route.request().url()).hostname) ? route.continue() : route.abort('blockedbyclient')))
	return { page, violations }
}

/** axe-core's serious and critical violations (its source evaluated through DevTools: the page keeps its own policy). */
async function seriousViolations(page: Page): Promise<string[]> {
	await page.evaluate(AXE_SOURCE)
	const results = (await page.evaluate("axe.run(document, { resultTypes: ['violations'] })")) as {
		violations: Array<{ id: string; impact: string; nodes: Array<{ target: string[] }> }>
	}
	return results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`)
}

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
	const states: Array<{ width: number; scheme: 'light' | 'dark' }> = [
		{ width: 320, scheme: 'light' },
		{ width: 320, scheme: 'dark' },
		{ width: 1280, scheme: 'light' },
		{ width: 1280, scheme: 'dark' },
	]
	for (const { width, scheme } of states)
		test(`at ${width} px, ${scheme}`, async () => {
			const account = await signUp(t)
			const context = await browser.newContext({ viewport: { width, height: width < 400 ? 640 : 800 }, colorScheme: scheme })
			const { page, violations } = await openPage(context)
			// An authenticator without a passkey for this site: the browser says no, and the page says so.
			await virtualAuthenticator(page)
			const found: Record<string, string[]> = {}
			const check = async (name: string) => {
				await page.screenshot({ path: join(ARTIFACTS, `${name}-${width}-${scheme}.png`), fullPage: true })
				found[name] = await seriousViolations(page)
				expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true)
			}

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
