/**
 * /account as a person uses it, in Debian's Chromium (playwright-core): a passkey enrolled on /account/security
 * by its script (/pages/passkeys.js, under the pages' policy, with the DevTools virtual authenticator), then used
 * to sign in; every section and step checked by axe-core at 320 px and 1280 px, light and dark. The pages run
 * at http://localhost:<port> (PUBLIC_URL), a secure context whose host is the passkeys' RP ID. Screenshots land
 * in test-artifacts/pages/.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { join } from 'node:path'
import { eq } from 'drizzle-orm'
import { chromium, type Browser, type Page } from 'playwright-core'
import { factors, identities, sessions } from '../src/db/schema'
import { startTestApp, type TestApp } from './support/app'
import { contextIn, openPage, PAGE_ARTIFACTS, pageStateChecker, seriousViolations, VIEW_STATES } from './support/browser'
import { enrollTotp } from './support/factors'
import { ageSession, PASSWORD, signUp, uniqueEmail } from './support/fixtures'
import { registerClient } from './support/oauth'
import { TestOpenIdProvider } from './support/oidc-provider'
import { freePort } from './support/ports'

setDefaultTimeout(120_000)

let t: TestApp
let server: ReturnType<TestApp['app']['listen']>
let browser: Browser
let base: string
let provider: TestOpenIdProvider

beforeAll(async () => {
	const port = await freePort()
	base = `http://localhost:${port}`
	provider = await TestOpenIdProvider.start([`${base}/api/auth/providers/test/callback`])
	t = await startTestApp({ PUBLIC_URL: base, WEBAUTHN_RP_ID: 'localhost', WEBAUTHN_ORIGINS: base, OIDC_PROVIDERS: 'test', ...provider.settings('test') })
	server = t.app.listen({ port, hostname: '127.0.0.1' })
	// Not launchChromium(): localhost must be this machine's IPv4 loopback, where the app listens (not ::1).
	browser = await chromium.launch({
		executablePath: '/usr/bin/chromium',
		args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--host-resolver-rules=MAP localhost 127.0.0.1'],
	})
})
afterAll(async () => {
	await browser?.close()
	await server?.stop()
	await t?.close()
	await provider?.stop()
})

/** A virtual platform authenticator on the page (resident keys, user verification). */
async function virtualAuthenticator(page: Page) {
	const cdp = await page.context().newCDPSession(page)
	await cdp.send('WebAuthn.enable')
	const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
		options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
	})
	return { cdp, authenticatorId }
}

/** Signs the page's browser in at /sign-in with the password, on to `returnTo`. */
async function signInWithPassword(page: Page, email: string, returnTo = '/account') {
	await page.goto(`${base}/sign-in?${new URLSearchParams({ return_to: returnTo })}`)
	await page.fill('#email', email)
	await page.fill('#password', PASSWORD)
	await Promise.all([page.waitForURL(`${base}${returnTo}`), page.click('button[type=submit]')])
}

test('a passkey enrolled on /account/security signs in', async () => {
	const account = await signUp(t, { email: uniqueEmail('account-passkey') })
	const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
	const { page, violations } = await openPage(context)
	const { cdp, authenticatorId } = await virtualAuthenticator(page)
	await signInWithPassword(page, account.email, '/account/security')
	await page.fill('#passkey-name', 'This laptop')
	await Promise.all([page.waitForURL(`${base}/account/security/passkey`), page.click('text=Add a passkey')])
	// The script shows the button (and hides the sentence for browsers without passkeys).
	await page.waitForSelector('#passkey-create:not([hidden])')
	expect(await page.isVisible('#passkey-unsupported')).toBe(false)
	await Promise.all([page.waitForURL(`${base}/account/security/passkey/activation`), page.click('text=Create the passkey')])
	expect(await page.textContent('h1')).toBe('Save your recovery codes')
	expect(await page.locator('.codes li').count()).toBe(10)
	const { credentials } = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })) as { credentials: unknown[] }
	expect(credentials).toHaveLength(1)
	await Promise.all([page.waitForURL(`${base}/account/security`), page.click('text=I have saved them')])
	expect(await page.textContent('main')).toContain('This laptop')
	const [factor] = await t.database.handle.db.select().from(factors).where(eq(factors.userId, account.id))
	expect(factor).toMatchObject({ type: 'webauthn', name: 'This laptop', status: 'active' })
	// Signed out, then in again with the passkey alone.
	await page.goto(`${base}/account`)
	await Promise.all([page.waitForURL(`${base}/sign-out`), page.click('form[action="/sign-out"] button')])
	await page.goto(`${base}/sign-in`)
	await page.waitForSelector('#passkey:not([hidden])')
	await Promise.all([page.waitForURL(`${base}/account`), page.click('text=Sign in with a passkey')])
	expect(await page.textContent('main')).toContain(`Signed in as ${account.email}`)
	// Later, past REAUTHENTICATION_SECONDS: "confirm it's you" takes the passkey too, then the action is done.
	const [browserSession] = (await t.database.handle.db.select().from(sessions).where(eq(sessions.userId, account.id))).filter((row) => row.browserTokenHash !== null && row.revokedAt === null)
	await ageSession(t, { sessionId: browserSession?.id ?? '' })
	await page.goto(`${base}/account/security`)
	await Promise.all([page.waitForURL(`${base}/account/security/totp`), page.click('text=Add an authenticator app')])
	expect(await page.textContent('h1')).toBe('Confirm it is you')
	await page.waitForSelector('#passkey-confirm:not([hidden])')
	await page.screenshot({ path: join(PAGE_ARTIFACTS, 'account-confirm-passkey-1280-light.png'), fullPage: true })
	expect(await seriousViolations(page)).toEqual([])
	// A button's name, exactly: the heading above it says "Or use your passkey".
	await page.getByRole('button', { name: 'Use your passkey', exact: true }).click()
	await page.waitForSelector('img.qr')
	expect(await page.textContent('h1')).toBe('Add an authenticator app')
	expect(violations).toEqual([])
	await context.close()
})

test('a cancelled passkey is said in the live region, and the button works again', async () => {
	const account = await signUp(t)
	const context = await browser.newContext({ viewport: { width: 320, height: 640 } })
	const { page, violations } = await openPage(context)
	const { cdp, authenticatorId } = await virtualAuthenticator(page)
	await signInWithPassword(page, account.email, '/account/security')
	await Promise.all([page.waitForURL(`${base}/account/security/passkey`), page.click('text=Add a passkey')])
	await page.waitForSelector('#passkey-create:not([hidden])')
	// The person says no at the prompt.
	await cdp.send('WebAuthn.setUserVerified', { authenticatorId, isUserVerified: false })
	await page.click('text=Create the passkey')
	await page.locator('#passkey-status:not(:empty)').waitFor()
	expect(await page.textContent('#passkey-status')).toMatch(/The passkey was not created|could not create a passkey/)
	// Still on the step, its button ready again.
	expect(page.url()).toBe(`${base}/account/security/passkey`)
	expect(await page.isEnabled('text=Create the passkey')).toBe(true)
	expect(violations).toEqual([])
	await context.close()
})

test('linking a provider on /account/identities goes through the provider and back; unlinking takes it off', async () => {
	const account = await signUp(t, { email: uniqueEmail('account-link') })
	const context = await browser.newContext({ viewport: { width: 320, height: 640 } })
	const { page, violations } = await openPage(context)
	await signInWithPassword(page, account.email, '/account/identities')
	expect(await page.textContent('main')).toContain('No other account is linked.')
	provider.signInAs = { sub: `sub-${account.id}`, email: `elsewhere-${account.email}`, email_verified: true }
	await Promise.all([page.waitForURL(`${base}/account/identities`), page.click('text=Link Test')])
	expect(await page.textContent('.items')).toContain('Test')
	const [linked] = await t.database.handle.db.select().from(identities).where(eq(identities.userId, account.id))
	expect(linked).toMatchObject({ provider: 'test', subject: `sub-${account.id}` })
	// Still this account's browser, signed in again by the link.
	expect((await context.cookies(base)).map((c) => c.name)).not.toContain('__Host-latchkey-provider-flow')
	await Promise.all([page.waitForURL(`${base}/account/identities?done=unlinked`), page.click('button[aria-label="Unlink Test"]')])
	expect(await page.textContent('#notice')).toContain('The account is unlinked.')
	expect(await t.database.handle.db.select().from(identities).where(eq(identities.userId, account.id))).toHaveLength(0)
	expect(violations).toEqual([])
	await context.close()
})

describe('axe-core finds no serious or critical violation on /account', () => {
	for (const state of VIEW_STATES)
		test.concurrent(`at ${state.width} px, ${state.scheme}`, async () => {
			// An account with something in every section: an app, an identity, an application, another session.
			const account = await signUp(t, { name: 'Ada Lovelace' })
			const { recoveryCodes } = await enrollTotp(t, account, 'Phone')
			await t.database.handle.db.insert(identities).values({ id: Bun.randomUUIDv7(), userId: account.id, provider: 'acme', subject: `s-${account.id}`, email: account.email })
			const registered = await registerClient(t, { type: 'public', name: 'Photo Printer' })
			const [row] = await t.database.handle.db.query.oauthClients.findMany({ where: (clients, { eq: is }) => is(clients.clientId, registered.clientId) })
			await t.app.decorator.oauthConsents.grant(account.id, row?.id ?? '', ['openid', 'email', 'offline_access'])
			const context = await contextIn(browser, state)
			const { page, violations } = await openPage(context)
			const { check, found } = pageStateChecker(page, state)
			// The account has a factor: the sign-in asks for it; a recovery code finishes it.
			await page.goto(`${base}/sign-in?return_to=%2Faccount`)
			await page.fill('#email', account.email)
			await page.fill('#password', PASSWORD)
			await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
			await page.fill('#code', recoveryCodes[0] ?? '')
			await Promise.all([page.waitForURL(`${base}/account`), page.click('button[type=submit]')])
			await page.goto(`${base}/account?done=name`)
			await check('account-profile')
			await page.goto(`${base}/account/security`)
			await check('account-security')
			await page.goto(`${base}/account/identities`)
			await check('account-identities')
			await page.goto(`${base}/account/sessions`)
			await check('account-sessions')
			await page.goto(`${base}/account/applications`)
			await check('account-applications')
			await page.goto(`${base}/account/deactivation`)
			await check('account-deactivation')
			// An authenticator app's enrolment: its QR code and key.
			await page.goto(`${base}/account/security`)
			await Promise.all([page.waitForURL(`${base}/account/security/totp`), page.click('text=Add an authenticator app')])
			await check('account-totp')
			// The passkey's step, and the "confirm it's you" of a session older than REAUTHENTICATION_SECONDS.
			await page.goto(`${base}/account/security`)
			await Promise.all([page.waitForURL(`${base}/account/security/passkey`), page.click('text=Add a passkey')])
			await check('account-passkey')
			const browserSession = (await t.call('GET', '/api/users/me/sessions', { token: account.accessToken })).body.data.items.find(
				(item: { userAgent: string | null }) => item.userAgent?.includes('Chrome'),
			)
			await ageSession(t, { sessionId: browserSession.id })
			await page.goto(`${base}/account/security`)
			await Promise.all([page.waitForURL(`${base}/account/security/totp`), page.click('text=Add an authenticator app')])
			expect(await page.textContent('h1')).toBe('Confirm it is you')
			await check('account-confirm')
			await page.fill('#confirm-password', 'not the password')
			await Promise.all([page.waitForLoadState('load'), page.click('form:has(#confirm-password) button[type=submit]')])
			await check('account-confirm-refused')
			// Recovery codes, shown once.
			await page.fill('#confirm-password', PASSWORD)
			await Promise.all([page.waitForLoadState('load'), page.click('form:has(#confirm-password) button[type=submit]')])
			expect(await page.textContent('h1')).toBe('Add an authenticator app')
			await page.goto(`${base}/account/security`)
			await Promise.all([page.waitForURL(`${base}/account/security/recovery-codes`), page.click('text=Make new recovery codes')])
			await check('account-codes')
			expect(Object.fromEntries(Object.entries(found).filter(([, serious]) => serious.length > 0))).toEqual({})
			expect(violations).toEqual([])
			await context.close()
		})
})
