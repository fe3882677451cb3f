/**
 * The admin console as an operator uses it, in Debian's Chromium (playwright-core): signing in through the real
 * /sign-in page (Latchkey's own provider, code flow with PKCE), finding a user, opening them, revoking a session,
 * deactivating (confirmed) and reactivating; a non-admin told why they cannot; the keyboard alone; axe-core at
 * 320 px and 1280 px, light and dark, under the pages' CSP (any refusal of it fails the test). The console runs at
 * http://localhost:<port> (PUBLIC_URL). Screenshots land in test-artifacts/console/.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { and, eq, isNull } from 'drizzle-orm'
import { type Browser, type BrowserContext, type Page } from 'playwright-core'
import { factors, oauthClients, sessions, users } from '../src/db/schema'
import { startTestApp, type TestApp } from './support/app'
import { contextIn, openPage, seriousViolations, VIEW_STATES } from './support/browser'
import { consoleScreenshot, launchConsoleBrowser, listeningConsole, signInToConsole } from './support/console-browser'
import { awayFromStepBoundary, enrollTotp, totpCode } from './support/factors'
import { login, PASSWORD, signUp, signUpAdmin, soleActiveAdmin, uniqueEmail, type Account } from './support/fixtures'
import { registerClient } from './support/oauth'

setDefaultTimeout(120_000)

let t: TestApp
let app: Awaited<ReturnType<typeof listeningConsole>>
let browser: Browser
let base: string
let admin: Account
let grace: Account

beforeAll(async () => {
	app = await listeningConsole()
	;({ t, base } = app)
	browser = await launchConsoleBrowser()
	admin = await signUpAdmin(t, uniqueEmail('operator'))
	grace = await signUp(t, { email: uniqueEmail('grace'), name: 'Grace Hopper' })
	for (let i = 0; i < 3; i++) await signUp(t, { email: uniqueEmail('someone'), name: `Someone ${i}` })
})
afterAll(async () => {
	await browser?.close()
	await app?.close()
})

const heading = (page: Page) => page.locator('main h1')

/** Opens /console in a fresh browser and signs in at the real /sign-in page; ends on the users list. */
async function signIn(context: BrowserContext, email: string, landing = 'Users') {
	const opened = await signInToConsole(context, { base, email, landing })
	// The users view shows its heading before its list: a test reads the rows once the total says they came.
	if (landing === 'Users') await opened.page.locator('.total').waitFor({ timeout: 30_000 })
	return opened
}

const screenshot = consoleScreenshot

describe('an operator', () => {
	test('signs in, finds a user, opens them, revokes a session, deactivates and reactivates them', async () => {
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await signIn(context, admin.email)
		expect(new URL(page.url()).pathname).toBe('/console')
		// The whole table's total is the planner's estimate or a count: either way a number of users. When it does not
		// come, the failure says what the page shows instead (a problem's sentence, a sign-in), not only that it timed out.
		await page
			.locator('.total')
			.waitFor({ timeout: 30_000 })
			.catch(async (error: unknown) => {
				throw new Error(`no total on the users list; the page (${page.url()}) shows: ${await page.locator('body').innerText().catch(() => '(nothing)')}`, { cause: error })
			})
		expect(await page.locator('.total').textContent()).toMatch(/\d+ users?/)
		// The tokens are the tab's: in sessionStorage, never a cookie a script could read.
		expect(await page.evaluate("Object.keys(sessionStorage).includes('latchkey-console:tokens')")).toBe(true)

		await page.fill('#filter-q', grace.email.slice(0, 20))
		await page.press('#filter-q', 'Enter')
		await page.waitForURL((url) => url.searchParams.get('q') === grace.email.slice(0, 20))
		await page.locator('.total', { hasText: '1 user' }).waitFor()
		expect(await page.locator('tbody tr').count()).toBe(1)
		await screenshot(page, 'users-search')

		await page.click(`a:has-text("${grace.email}")`)
		await page.locator('main h1', { hasText: 'Grace Hopper' }).waitFor()
		expect(new URL(page.url()).pathname).toBe(`/console/users/${grace.id}`)
		expect(await page.textContent('#profile-heading + .facts')).toContain(grace.email)
		expect(await page.locator('#sessions-heading ~ .table-wrap tbody tr').count()).toBe(1)
		await screenshot(page, 'user')

		// Revoke the one session: confirmed, then gone from the list and refused at the API.
		await page.click('button:has-text("Revoke…")')
		expect(await page.locator('dialog').textContent()).toContain('signed out at its next request')
		await screenshot(page, 'user-revoke-dialog')
		await page.click('dialog button[data-confirm]')
		await page.locator('#announce', { hasText: 'The session is revoked.' }).waitFor()
		await page.locator('#sessions-heading ~ p', { hasText: 'No live session.' }).waitFor()
		expect((await t.call('GET', '/api/users/me', { token: grace.accessToken })).status).toBe(401)

		// Deactivate: the dialog says what will happen; cancelling does nothing.
		const again = await login(t, grace.email)
		await page.reload()
		await page.locator('main h1', { hasText: 'Grace Hopper' }).waitFor()
		await page.click('button:has-text("Deactivate…")')
		const dialog = page.locator('dialog')
		expect(await dialog.textContent()).toContain('This signs them out everywhere at once (1 session)')
		await dialog.locator('button', { hasText: 'Cancel' }).click()
		expect(await dialog.count()).toBe(0)
		expect((await t.database.handle.db.select({ status: users.status }).from(users).where(eq(users.id, grace.id)))[0]?.status).toBe('active')
		await page.click('button:has-text("Deactivate…")')
		await page.click('dialog button[data-confirm]')
		await page.locator('main h1 .badge', { hasText: 'Deactivated' }).waitFor()
		await page.locator('#announce', { hasText: 'is deactivated and signed out everywhere' }).waitFor()
		await screenshot(page, 'user-deactivated')
		expect((await t.call('GET', '/api/users/me', { token: again.accessToken })).status).toBe(401)
		expect((await t.call('POST', '/api/auth/login', { json: { email: grace.email, password: PASSWORD } })).status).toBe(401)

		await page.click('button:has-text("Reactivate…")')
		expect(await page.locator('dialog').textContent()).toContain('They can sign in again')
		await page.click('dialog button[data-confirm]')
		await page.locator('main h1 .badge', { hasText: 'Active' }).waitFor()
		expect((await t.call('POST', '/api/auth/login', { json: { email: grace.email, password: PASSWORD } })).status).toBe(200)

		// Back to the list through the crumbs, and the browser's Back returns to the search.
		await page.click('.crumbs a')
		await page.locator('main h1', { hasText: 'Users' }).waitFor()
		expect(violations).toEqual([])
		await context.close()
	})

	test('pages through the users with Next and Previous, the cursors kept in the tab’s history', async () => {
		for (let i = 0; i < 21; i++) await t.database.handle.db.insert(users).values({ id: Bun.randomUUIDv7(), email: uniqueEmail('bulk'), name: `Bulk ${i}` })
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await signIn(context, admin.email)
		const firstPage = await page.locator('tbody tr td:first-child').allTextContents()
		expect(firstPage).toHaveLength(20)
		expect(await page.locator('button:has-text("Previous page")').isDisabled()).toBe(true)
		await page.click('button:has-text("Next page")')
		await page.waitForURL((url) => url.searchParams.has('cursor'))
		await page.locator('.total', { hasText: 'page 2' }).waitFor()
		const secondPage = await page.locator('tbody tr td:first-child').allTextContents()
		expect(secondPage.some((email) => firstPage.includes(email))).toBe(false)
		await page.click('button:has-text("Previous page")')
		await page.locator('.total', { hasText: 'page 1' }).waitFor()
		expect(await page.locator('tbody tr td:first-child').allTextContents()).toEqual(firstPage)
		// The browser's own Back and Forward walk the same pages.
		await page.goBack()
		await page.locator('.total', { hasText: 'page 2' }).waitFor()
		expect(await page.locator('tbody tr td:first-child').allTextContents()).toEqual(secondPage)
		expect(violations).toEqual([])
		await context.close()
	})

	test('with the keyboard alone: a visible focus, every action reached with Tab and Enter, the dialog keeps the focus', async () => {
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await signIn(context, admin.email)
		// The search field, then a user's link, by Tab alone.
		const tabTo = async (matches: string, limit = 60) => {
			for (let i = 0; i < limit; i++) {
				await page.keyboard.press('Tab')
				if (await page.evaluate(matches)) return
			}
			throw new Error(`Tab never reached ${matches}`)
		}
		await tabTo("document.activeElement?.id === 'filter-q'")
		await page.keyboard.type(grace.email)
		await page.keyboard.press('Enter')
		await page.locator('.total', { hasText: '1 user' }).waitFor()
		await tabTo(`document.activeElement?.textContent === ${JSON.stringify(grace.email)}`)
		const outline = await page.evaluate('getComputedStyle(document.activeElement).outlineStyle')
		expect(outline).not.toBe('none')
		await page.keyboard.press('Enter')
		await page.locator('main h1', { hasText: 'Grace Hopper' }).waitFor()
		// The view's heading has the focus, for a screen reader to start there.
		expect(await page.evaluate("document.activeElement?.tagName")).toBe('H1')
		await tabTo("document.activeElement?.textContent === 'Deactivate…'")
		expect(await page.evaluate('getComputedStyle(document.activeElement).outlineStyle')).not.toBe('none')
		await page.keyboard.press('Enter')
		await page.locator('dialog[open]').waitFor()
		const inDialog = "document.querySelector('dialog')?.contains(document.activeElement) ? document.activeElement.textContent : 'outside'"
		expect(await page.evaluate(inDialog)).toBe('Cancel')
		const seen = []
		for (let i = 0; i < 5; i++) {
			await page.keyboard.press('Tab')
			seen.push(await page.evaluate(inDialog))
		}
		expect(seen).toEqual(['Deactivate', 'Cancel', 'Deactivate', 'Cancel', 'Deactivate'])
		await page.keyboard.press('Shift+Tab')
		expect(await page.evaluate(inDialog)).toBe('Cancel')
		// Escape closes it, doing nothing, and the focus returns to the button that opened it.
		await page.keyboard.press('Escape')
		expect(await page.locator('dialog').count()).toBe(0)
		expect(await page.evaluate('document.activeElement?.textContent')).toBe('Deactivate…')
		expect((await t.database.handle.db.select({ status: users.status }).from(users).where(eq(users.id, grace.id)))[0]?.status).toBe('active')
		// Enter on the confirmation's button does it.
		const session = await login(t, grace.email)
		await page.reload()
		await page.locator('main h1', { hasText: 'Grace Hopper' }).waitFor()
		await tabTo("document.activeElement?.textContent === 'Revoke all sessions…'")
		await page.keyboard.press('Enter')
		await page.locator('dialog[open]').waitFor()
		await page.keyboard.press('Tab')
		await page.keyboard.press('Enter')
		await page.locator('#announce', { hasText: 'signed out everywhere' }).waitFor()
		const live = await t.database.handle.db.select().from(sessions).where(and(eq(sessions.userId, grace.id), isNull(sessions.revokedAt)))
		expect(live).toHaveLength(0)
		expect((await t.call('GET', '/api/users/me', { token: session.accessToken })).status).toBe(401)
		expect(violations).toEqual([])
		await context.close()
	})
})

describe('signing out', () => {
	test("ends the browser's Latchkey session through the provider's sign-out, and the console then asks to sign in", async () => {
		const operator = await signUpAdmin(t, uniqueEmail('leaving'))
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await signIn(context, operator.email)
		await page.click('#sign-out')
		await page.waitForURL((url) => url.pathname === '/oauth2/logout')
		await Promise.all([page.waitForURL((url) => url.pathname === '/sign-in'), page.click('button[name=logout]')])
		// The tokens are gone from the tab, and no session of the operator's is live any more but the API login's.
		expect(await page.evaluate("sessionStorage.getItem('latchkey-console:tokens')")).toBeNull()
		const live = await t.database.handle.db.select({ id: sessions.id }).from(sessions).where(and(eq(sessions.userId, operator.id), isNull(sessions.revokedAt)))
		expect(live.map((row) => row.id)).toEqual([operator.sessionId])
		expect(violations).toEqual([])
		await context.close()
	})
})

describe('a second factor and a consent', () => {
	test("are removed from a user's page after a confirmation that says what it does", async () => {
		const ada = await signUp(t, { email: uniqueEmail('ada'), name: 'Ada Lovelace' })
		const { factorId } = await enrollTotp(t, ada, 'Work phone')
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await signIn(context, admin.email)
		await page.goto(`${base}/console/users/${ada.id}`)
		await page.locator('main h1', { hasText: 'Ada Lovelace' }).waitFor()
		expect(await page.textContent('#factors-heading ~ .table-wrap')).toContain('Work phone')
		await page.click('button[aria-label="Remove the authenticator app Work phone"]')
		expect(await page.locator('dialog').textContent()).toContain('This cannot be undone')
		await page.click('dialog button[data-confirm]')
		await page.locator('#factors-heading ~ p', { hasText: 'No second factor.' }).waitFor()
		expect((await t.database.handle.db.select().from(factors).where(eq(factors.id, factorId))).length).toBe(0)

		// A consent to an application, withdrawn the same way.
		const notes = await registerClient(t, { type: 'public', name: 'Acme Notes' })
		const [row] = await t.database.handle.db.select({ id: oauthClients.id }).from(oauthClients).where(eq(oauthClients.clientId, notes.clientId))
		await t.app.decorator.oauthConsents.grant(ada.id, row?.id ?? '', ['openid', 'email'], { ip: null, userAgent: null, requestId: crypto.randomUUID() })
		await page.reload()
		await page.locator('#consents-heading ~ .table-wrap', { hasText: 'Acme Notes' }).waitFor()
		await page.click('button[aria-label="Withdraw the consent to Acme Notes"]')
		expect(await page.locator('dialog').textContent()).toContain('must ask them again')
		await page.click('dialog button[data-confirm]')
		await page.locator('#announce', { hasText: 'The consent to Acme Notes is withdrawn.' }).waitFor()
		expect((await t.call('GET', `/api/users/${ada.id}/consents`, { token: admin.accessToken })).body.data.items).toEqual([])
		expect(violations).toEqual([])
		await context.close()
	})
})

describe('MFA_REQUIRED=admins', () => {
	test('an admin without a second factor sees no section, only what to do; after adding one and signing in again, the console', async () => {
		const strictApp = await listeningConsole({ MFA_REQUIRED: 'admins' })
		const { t: strict, base: strictBase } = strictApp
		try {
			const unenrolled = await signUpAdmin(strict, uniqueEmail('unenrolled'))
			const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
			const { page, violations } = await openPage(context)
			await page.goto(`${strictBase}/console`)
			await page.waitForURL((url) => url.pathname === '/sign-in')
			await page.fill('#email', unenrolled.email)
			await page.fill('#password', PASSWORD)
			await page.click('button[type=submit]')
			await page.locator('main h1', { hasText: 'Add a second factor first' }).waitFor()
			expect(await page.textContent('main [role=alert]')).toContain('add a second factor')
			expect(new URL(page.url()).pathname).toBe('/console')
			expect(await page.getAttribute('main a[href="/account/security"]', 'href')).toBe('/account/security')
			// The API refuses every section to this session: the console offers none of them.
			expect(await page.isVisible('#nav')).toBe(false)
			expect(await page.locator('main form, main table').count()).toBe(0)
			await screenshot(page, 'add-a-second-factor')
			expect(await seriousViolations(page)).toEqual([])

			// What the sentence says to do: add a factor (here through the API, as the account page would), then sign in again.
			const { secret } = await enrollTotp(strict, unenrolled)
			await page.click('button:has-text("Sign in to the console again")')
			await page.waitForURL((url) => url.pathname === '/sign-in')
			// As a person would take: the provider counts a sign-in for prompt=login only from the whole second after
			// the request began (src/modules/oauth/interactions.ts); a password and a code typed by a script within
			// that second would send the browser to /account instead.
			await Bun.sleep(1_100)
			await page.fill('#email', unenrolled.email)
			await page.fill('#password', PASSWORD)
			await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')])
			await page.waitForSelector('#code')
			// The activation spent this step's code: the next step's, with time to spare for a loaded machine.
			await awayFromStepBoundary(8000)
			await page.fill('#code', totpCode(secret, 1))
			await page.click('button[type=submit]')
			await page
				.locator('main h1', { hasText: 'Users' })
				.waitFor({ timeout: 20_000 })
				.catch(async (error: unknown) => {
					throw new Error(`no users list after the second factor; the page (${page.url()}) shows: ${await page.locator('body').innerText().catch(() => '(nothing)')}`, { cause: error })
				})
			await page.locator('.total').waitFor()
			expect(await page.isVisible('#nav')).toBe(true)
			expect(violations).toEqual([])
			await context.close()
		} finally {
			await strictApp.close()
		}
	})
})

describe('a refusal of the API', () => {
	test('is a sentence saying why and what to do: the last administrator cannot make themself a plain user (409)', async () => {
		const { admin: last, restore } = await soleActiveAdmin(t)
		try {
			const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
			const { page, violations } = await signIn(context, last.email)
			await page.goto(`${base}/console/users/${last.id}`)
			await page.locator('main h1', { hasText: last.email }).waitFor()
			await page.click('button:has-text("Make a plain user…")')
			await page.click('dialog button[data-confirm]')
			const alert = page.locator('main > [role=alert]')
			await alert.waitFor()
			expect(await alert.textContent()).toContain('This is the last active administrator')
			// The sentence has the focus, so that a screen reader reads it at once.
			expect(await page.evaluate("document.activeElement?.getAttribute('role')")).toBe('alert')
			await screenshot(page, 'last-admin')
			expect((await t.call('GET', '/api/users/me', { token: last.accessToken })).body.data.role).toBe('admin')
			expect(violations).toEqual([])
			await context.close()
		} finally {
			await restore()
		}
	})
})

describe('someone who is not an administrator', () => {
	test('is told so in a sentence, with a way to sign in with another account', async () => {
		const user = await signUp(t, { email: uniqueEmail('plain') })
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await signIn(context, user.email, 'Not an administrator')
		expect(await page.textContent('main [role=alert]')).toContain('This account is not an administrator')
		expect(await page.isVisible('button:has-text("Sign in with another account")')).toBe(true)
		expect(await page.isVisible('#nav')).toBe(false)
		await screenshot(page, 'not-an-administrator')
		expect(await seriousViolations(page)).toEqual([])
		expect(violations).toEqual([])
		await context.close()
	})
})

describe('axe-core', () => {
	test('no serious or critical violation on the list, a user, and a confirmation, at 320 px and 1280 px, light and dark', async () => {
		const found: Record<string, string[]> = {}
		for (const state of VIEW_STATES) {
			const context = await contextIn(browser, state)
			const { page, violations } = await signIn(context, admin.email)
			const check = async (name: string) => {
				const label = `${name}-${state.width}-${state.scheme}`
				await screenshot(page, label)
				found[label] = await seriousViolations(page)
				expect({ label, fits: await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth') }).toEqual({ label, fits: true })
			}
			await check('users')
			await page.goto(`${base}/console/users/${grace.id}`)
			await page.locator('main h1', { hasText: 'Grace Hopper' }).waitFor()
			await check('user')
			await page.click('button:has-text("Deactivate…")')
			await page.locator('dialog[open]').waitFor()
			await check('user-confirm')
			await page.keyboard.press('Escape')
			expect(violations).toEqual([])
			await context.close()
		}
		expect(Object.values(found).flat()).toEqual([])
	})
})

describe('CONSOLE_ENABLED=false', () => {
	test('the console is a 404 in the browser', async () => {
		const off = await startTestApp({ CONSOLE_ENABLED: 'false' })
		const listening = off.app.listen({ port: 0, hostname: '127.0.0.1' })
		try {
			const context = await browser.newContext()
			const page = await context.newPage()
			const response = await page.goto(`http://127.0.0.1:${listening.server?.port}/console/users`)
			expect(response?.status()).toBe(404)
			await context.close()
		} finally {
			await listening.stop()
			await off.close()
		}
	})
})
