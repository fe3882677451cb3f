/**
 * The console's audit log and settings as an operator uses them, in Debian's Chromium (playwright-core), signed in
 * through the real /sign-in page (test/support/console-browser.ts, no request leaving the console's origin): the audit log filtered to a user and paged, a
 * user's audit trail on their page, the settings with a value set in the environment and a secret shown only as
 * set (its text nowhere in the page); axe-core at 320 px and 1280 px, light and dark, under the pages' CSP (any
 * refusal of it fails the test). Screenshots land in test-artifacts/console/ (audit-*.png, settings-*.png).
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { TEST_ENV, type TestApp } from './support/app'
import { contextIn, seriousViolations, VIEW_STATES } from './support/browser'
import { consoleScreenshot, launchConsoleBrowser, listeningConsole, signInToConsole } from './support/console-browser'
import { signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'

setDefaultTimeout(180_000)

/** Set in the test app's environment: a plain setting the page shows, and secrets it must never show. */
const SESSIONS_PER_USER_MAX = '42'
const METRICS_TOKEN = `console-metrics-${crypto.randomUUID()}`
const JWT_PREVIOUS_SECRET = `console-previous-${crypto.randomUUID()}-${crypto.randomUUID()}`

let t: TestApp
let app: Awaited<ReturnType<typeof listeningConsole>>
let browser: Browser
let base: string
let admin: Account
let grace: Account

beforeAll(async () => {
	app = await listeningConsole({ SESSIONS_PER_USER_MAX, METRICS_TOKEN, JWT_PREVIOUS_SECRET })
	;({ t, base } = app)
	browser = await launchConsoleBrowser()
	admin = await signUpAdmin(t, uniqueEmail('operator'))
	grace = await signUp(t, { email: uniqueEmail('grace'), name: 'Grace Hopper' })
	// More failed sign-ins of Grace's than one page holds (25), and events of others' around them.
	for (let i = 0; i < 27; i++) expect((await t.call('POST', '/api/auth/login', { json: { email: grace.email, password: `wrong ${i}` } })).status).toBe(401)
	for (let i = 0; i < 3; i++) await signUp(t, { email: uniqueEmail('someone') })
})
afterAll(async () => {
	await browser?.close()
	await app?.close()
})

/** Opens `path` as the operator, signing in on the way; ends on the view headed `landing`. */
const openAsOperator = (context: BrowserContext, path: string, landing: string) => signInToConsole(context, { base, email: admin.email, path, landing })
const screenshot = consoleScreenshot
const rowsOf = (page: Page) => page.locator('table.audit tbody tr')

describe('the audit log', () => {
	test('an operator filters it to a user by email and to an event type, and pages through it', async () => {
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await openAsOperator(context, '/console/audit', 'The audit log')
		await page.locator('.total', { hasText: 'newest first' }).waitFor()
		expect(await page.getAttribute('#nav a[href="/console/audit"]', 'aria-current')).toBe('page')
		// The whole log: the operator's own sign-in is there, by their email.
		expect(await rowsOf(page).first().textContent()).toBeTruthy()
		expect(await page.locator('table.audit').textContent()).toContain(admin.email)
		await screenshot(page, 'audit-log')

		// Filtered to Grace by her email: the address carries her id, every row is about her.
		await page.fill('#filter-user', grace.email)
		await page.press('#filter-user', 'Enter')
		await page.waitForURL((url) => url.searchParams.get('userId') === grace.id)
		await page.locator('.total', { hasText: `of ${grace.email}` }).waitFor()
		const rows = rowsOf(page)
		expect(await rows.count()).toBe(25)
		for (const text of await rows.allTextContents()) expect(text).toContain(grace.email)
		const firstPage = await page.locator('table.audit tbody tr td:first-child time').evaluateAll((times) => times.map((time) => time.getAttribute('datetime')))

		// Next: the rest of her events, none of the first page's; Previous and the browser's Back walk the same pages.
		await page.click('button:has-text("Next page")')
		await page.waitForURL((url) => url.searchParams.has('cursor') && url.searchParams.get('userId') === grace.id)
		await page.locator('.total', { hasText: 'page 2' }).waitFor()
		// 27 failed sign-ins and her sign-up (the fixture's sign-in too): at least 3 more.
		expect(await rows.count()).toBeGreaterThanOrEqual(3)
		expect(await page.locator('table.audit').textContent()).toContain('Signed up')
		expect(await page.locator('button:has-text("Next page")').isDisabled()).toBe(true)
		await screenshot(page, 'audit-page-2')
		await page.click('button:has-text("Previous page")')
		await page.locator('.total', { hasText: 'page 1' }).waitFor()
		expect(await page.locator('table.audit tbody tr td:first-child time').evaluateAll((times) => times.map((time) => time.getAttribute('datetime')))).toEqual(firstPage)
		await page.goBack()
		await page.locator('.total', { hasText: 'page 2' }).waitFor()

		// An event type on top: the filters combine, and the form shows them.
		await page.selectOption('#filter-type', 'user.signed-up')
		await page.click('form[role=search] button[type=submit]')
		await page.waitForURL((url) => url.searchParams.get('type') === 'user.signed-up' && !url.searchParams.has('cursor'))
		await page.locator('.total', { hasText: '1 event' }).waitFor()
		expect(await rows.count()).toBe(1)
		expect(await page.inputValue('#filter-user')).toBe(grace.id)
		expect(await rows.first().textContent()).toContain('user.signed-up')
		await screenshot(page, 'audit-filtered')

		// A time range that ends before anything happened finds nothing, and says so.
		await page.fill('#filter-before', '2001-01-01T00:00')
		await page.click('form[role=search] button[type=submit]')
		await page.waitForURL((url) => url.searchParams.has('occurredBefore'))
		await page.locator('.total', { hasText: 'No event matches these filters.' }).waitFor()
		expect(new URL(page.url()).searchParams.get('occurredBefore')).toMatch(/^2001-01-01T/)

		// An email that is no account's is a sentence, not a request the API would refuse.
		await page.click('a:has-text("Clear the filters")')
		await page.waitForURL((url) => url.search === '')
		await page.fill('#filter-user', 'nobody-at-all@example.test')
		await page.press('#filter-user', 'Enter')
		await page.locator('main > [role=alert]', { hasText: 'No account has the email nobody-at-all@example.test' }).waitFor()

		// Who did it links to their page.
		await page.fill('#filter-user', grace.id)
		await page.press('#filter-user', 'Enter')
		await page.waitForURL((url) => url.searchParams.get('userId') === grace.id)
		await page.locator('.total', { hasText: `of ${grace.email}` }).waitFor()
		await page.click(`table.audit tbody tr:first-child a[href="/console/users/${grace.id}"]`)
		await page.locator('main h1', { hasText: 'Grace Hopper' }).waitFor()
		expect(violations).toEqual([])
		await context.close()
	})
})

describe("a user's page", () => {
	test('shows their recent audit trail and leads to the log filtered to them', async () => {
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await openAsOperator(context, `/console/users/${grace.id}`, 'Grace Hopper')
		const trail = page.locator('#audit-heading ~ .table-wrap table.audit tbody tr')
		expect(await trail.count()).toBe(10)
		expect(await trail.first().textContent()).toContain('Sign-in failed')
		expect(await page.textContent('#audit-heading ~ p.muted')).toContain('The last 10 events')
		await screenshot(page, 'audit-user-trail')
		await page.click('a:has-text("Their full audit log")')
		await page.waitForURL((url) => url.pathname === '/console/audit' && url.searchParams.get('userId') === grace.id)
		await page.locator('.total', { hasText: `25 events of ${grace.email}` }).waitFor()
		expect(violations).toEqual([])
		await context.close()
	})
})

describe('the settings', () => {
	test('show a value set in the environment, defaults as defaults, and secrets only as set — their text nowhere in the page', async () => {
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await openAsOperator(context, '/console/settings', 'Settings')
		await page.locator('#settings-server-heading').waitFor()
		expect(await page.getAttribute('#nav a[href="/console/settings"]', 'aria-current')).toBe('page')
		const row = (name: string) => page.locator(`tr[data-setting="${name}"]`)
		expect(await row('SESSIONS_PER_USER_MAX').textContent()).toContain('42')
		expect(await row('SESSIONS_PER_USER_MAX').textContent()).toContain('From the environment')
		expect(await row('ACCESS_TOKEN_TTL_SECONDS').textContent()).toContain('900')
		expect(await row('ACCESS_TOKEN_TTL_SECONDS').textContent()).toContain('Default')
		for (const name of ['METRICS_TOKEN', 'JWT_PREVIOUS_SECRET', 'JWT_SECRET', 'DATA_ENCRYPTION_KEY', 'OAUTH_SIGNING_KEY']) expect(await row(name).textContent()).toContain('set, hidden')
		expect(await row('JWT_PRIVATE_KEY').textContent()).toContain('not set')
		// Each group of docs/configuration.md is a titled section.
		expect(await page.locator('main section h2').allTextContents()).toEqual([
			'Server and database',
			'Tokens and sessions',
			'Passwords, rate limits and lockout',
			'HTTP, documentation, metrics and logs',
			'Mail and its flows',
			'Second factors, passkeys and ways in',
			'Identity providers',
			'The provider and its pages',
			'Background jobs and webhooks',
			'The first admin',
		])
		const html = await page.content()
		for (const secret of [METRICS_TOKEN, JWT_PREVIOUS_SECRET, TEST_ENV.JWT_SECRET, TEST_ENV.DATA_ENCRYPTION_KEY, TEST_ENV.OAUTH_SIGNING_KEY]) expect(html).not.toContain(secret as string)
		expect(html).not.toContain('PRIVATE KEY')
		await screenshot(page, 'settings')
		expect(violations).toEqual([])
		await context.close()
	})
})

describe('axe-core', () => {
	test('no serious or critical violation on the audit log, a user’s trail and the settings, at 320 px and 1280 px, light and dark', async () => {
		const found: Record<string, string[]> = {}
		for (const state of VIEW_STATES) {
			const context = await contextIn(browser, state)
			const { page, violations } = await openAsOperator(context, `/console/audit?userId=${grace.id}`, 'The audit log')
			const check = async (name: string) => {
				const label = `${name}-${state.width}-${state.scheme}`
				await screenshot(page, label)
				found[label] = await seriousViolations(page)
				expect({ label, fits: await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth') }).toEqual({ label, fits: true })
			}
			await page.locator('.total', { hasText: 'newest first' }).waitFor()
			await check('audit')
			await page.goto(`${base}/console/users/${grace.id}`)
			await page.locator('#audit-heading').waitFor()
			await check('audit-user')
			await page.goto(`${base}/console/settings`)
			await page.locator('#settings-admin-heading').waitFor()
			await check('settings')
			expect(violations).toEqual([])
			await context.close()
		}
		expect(Object.values(found).flat()).toEqual([])
	})
})
