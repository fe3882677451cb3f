/**
 * The console's OAuth clients as an operator uses them, in Debian's Chromium: signed in through the real /sign-in
 * page, registering a confidential client (its secret shown once, and working at the token endpoint over HTTP),
 * adding a redirect URI, a new secret (the old one still works), disabling it (its secret refused); the built-in
 * console client shown without a change the API would refuse; axe-core at 320 px and 1280 px, light and dark, under
 * the pages' CSP. Screenshots land in test-artifacts/console/oauth-clients-*.png.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import type { Browser, BrowserContext } from 'playwright-core'
import type { TestApp } from './support/app'
import { contextIn, seriousViolations, VIEW_STATES } from './support/browser'
import { consoleScreenshot, launchConsoleBrowser, listeningConsole, signInToConsole } from './support/console-browser'
import { signUpAdmin, uniqueEmail, type Account } from './support/fixtures'

setDefaultTimeout(120_000)

let t: TestApp
let app: Awaited<ReturnType<typeof listeningConsole>>
let browser: Browser
let base: string
let port: number
let admin: Account

beforeAll(async () => {
	app = await listeningConsole()
	;({ t, base, port } = app)
	browser = await launchConsoleBrowser()
	admin = await signUpAdmin(t, uniqueEmail('operator'))
})
afterAll(async () => {
	await browser?.close()
	await app?.close()
})

/** Opens `path` of the console in a fresh browser, signing in as the operator at the real /sign-in page on the way. */
const signIn = (context: BrowserContext, path: string, landing: string) => signInToConsole(context, { base, email: admin.email, path, landing })

const screenshot = consoleScreenshot

/** A client_credentials grant at the token endpoint, over HTTP to the listening server, with HTTP Basic. */
async function tokenStatus(clientId: string, secret: string) {
	const response = await fetch(`http://127.0.0.1:${port}/oauth2/token`, {
		method: 'POST',
		headers: {
			'content-type': 'application/x-www-form-urlencoded',
			authorization: `Basic ${btoa(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`)}`,
		},
		body: 'grant_type=client_credentials',
	})
	const body = (await response.json()) as { access_token?: string; error?: string }
	return { status: response.status, hasToken: typeof body.access_token === 'string', error: body.error }
}

describe('an operator', () => {
	test('registers a confidential client, copies its secret shown once, adds a redirect URI, gives it a new secret, and disables it', async () => {
		const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
		await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base })
		const { page, violations } = await signIn(context, '/console/oauth-clients', 'OAuth clients')
		// The built-in client is listed like any other.
		await page.locator('main table', { hasText: 'latchkey-console' }).waitFor()
		await screenshot(page, 'oauth-clients-list')

		await page.fill('#client-name', 'Acme Billing')
		await page.fill('#client-redirect-uris', 'https://billing.example.test/callback')
		await page.check('input[name=client-grants][value=client_credentials]')
		await page.click('button:has-text("Register the client")')
		const secretField = page.locator('#client-secret')
		await secretField.waitFor()
		const secret = await secretField.inputValue()
		expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/)
		expect(await page.textContent('.panel.secret')).toContain('will not be shown again')
		await page.locator('#announce', { hasText: 'Copy its secret now' }).waitFor()
		await page.click('button:has-text("Copy the secret")')
		await page.locator('#announce', { hasText: 'The secret is copied.' }).waitFor()
		expect(await page.evaluate('navigator.clipboard.readText()')).toBe(secret)
		// The secret never reaches the address or the tab's history.
		const id = new URL(page.url()).pathname.split('/').pop() ?? ''
		expect(id).toMatch(/^[0-9a-f-]{36}$/)
		expect(JSON.stringify(await page.evaluate('history.state'))).not.toContain(secret)
		expect(await page.title()).toMatch(/^Acme Billing .*· Console$/)
		await screenshot(page, 'oauth-clients-secret')

		const clientId = (await page.locator('#client-heading ~ .facts dd code').first().textContent()) ?? ''
		expect(clientId).toMatch(/^[A-Za-z0-9_-]{22}$/)
		expect(await tokenStatus(clientId, secret)).toEqual({ status: 200, hasToken: true, error: undefined })

		// Shown once: the client's page read again has no secret.
		await page.reload()
		await page.locator('main h1', { hasText: 'Acme Billing' }).waitFor()
		expect(await page.locator('#client-secret').count()).toBe(0)
		expect(await page.content()).not.toContain(secret)

		// A second redirect URI, saved through PUT; the rest of the settings is kept.
		await page.fill('#edit-redirect-uris', 'https://billing.example.test/callback\nhttps://billing.example.test/other')
		await page.click('button:has-text("Save the settings")')
		await page.locator('#announce', { hasText: 'The settings of Acme Billing are saved.' }).waitFor()
		const saved = await t.call('GET', `/api/oauth-clients/${id}`, { token: admin.accessToken })
		expect(saved.body.data).toMatchObject({
			redirectUris: ['https://billing.example.test/callback', 'https://billing.example.test/other'],
			grantTypes: ['authorization_code', 'refresh_token', 'client_credentials'],
			tokenEndpointAuthMethod: 'client_secret_basic',
			status: 'active',
		})
		expect(await page.textContent('#client-heading ~ .facts')).toContain('https://billing.example.test/other')

		// A new secret: confirmed, shown once; the old one works for 24 hours more, the new one at once.
		await page.click('button:has-text("New secret…")')
		expect(await page.locator('dialog').textContent()).toContain('keeps working for 24 hours more')
		await screenshot(page, 'oauth-clients-new-secret-dialog')
		await page.click('dialog button[data-confirm]')
		await page.locator('.panel.secret h2', { hasText: 'The new secret of Acme Billing' }).waitFor()
		const rotated = await page.locator('#client-secret').inputValue()
		expect(rotated).not.toBe(secret)
		expect(await tokenStatus(clientId, secret)).toEqual({ status: 200, hasToken: true, error: undefined })
		expect(await tokenStatus(clientId, rotated)).toEqual({ status: 200, hasToken: true, error: undefined })
		await screenshot(page, 'oauth-clients-rotated')

		// Disabled: confirmed; both secrets refused at once.
		await page.click('button:has-text("Disable…")')
		expect(await page.locator('dialog').textContent()).toContain('Its tokens are refused at once')
		await page.click('dialog button[data-confirm]')
		await page.locator('main h1 .badge', { hasText: 'Disabled' }).waitFor()
		await page.locator('#announce', { hasText: 'Acme Billing is disabled.' }).waitFor()
		expect(await tokenStatus(clientId, rotated)).toMatchObject({ status: 401, hasToken: false, error: 'invalid_client' })
		expect(await tokenStatus(clientId, secret)).toMatchObject({ status: 401, hasToken: false })
		expect(await page.locator('button:has-text("New secret…")').count()).toBe(0)
		await screenshot(page, 'oauth-clients-disabled')

		// The list shows it disabled, and its status filter finds it.
		await page.click('.crumbs a')
		await page.selectOption('#filter-status', 'disabled')
		await page.click('button:has-text("Show")')
		await page.waitForURL((url) => url.searchParams.get('status') === 'disabled')
		await page.locator('main table', { hasText: 'Acme Billing' }).waitFor()
		expect(await page.locator('main table', { hasText: 'latchkey-console' }).count()).toBe(0)
		expect(violations).toEqual([])
		await context.close()
	})

	test('registers a public client: no secret, and a broken redirect URI is refused in a sentence naming it', async () => {
		const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
		const { page, violations } = await signIn(context, '/console/oauth-clients', 'OAuth clients')
		await page.fill('#client-name', 'Acme Notes')
		await page.check('input[name=client-type][value=public]')
		await page.fill('#client-redirect-uris', 'http://notes.example.test/callback')
		await page.click('button:has-text("Register the client")')
		const alert = page.locator('#register-heading ~ form [role=alert]')
		await alert.waitFor()
		expect(await alert.textContent()).toContain('Some values are not valid: redirectUris/0')
		expect(await page.evaluate("document.activeElement?.getAttribute('role')")).toBe('alert')
		await screenshot(page, 'oauth-clients-refused')

		await page.fill('#client-redirect-uris', 'https://notes.example.test/callback')
		await page.click('button:has-text("Register the client")')
		await page.locator('main h1', { hasText: 'Acme Notes' }).waitFor()
		expect(await page.locator('#client-secret').count()).toBe(0)
		expect(await page.textContent('#client-heading ~ .facts')).toContain('no secret: PKCE alone')
		// A public client has no secret to renew; client_credentials is not offered to it.
		expect(await page.locator('button:has-text("New secret…")').count()).toBe(0)
		expect(await page.locator('input[name=edit-grants][value=client_credentials]').count()).toBe(0)
		expect(violations).toEqual([])
		await context.close()
	})

	test('sees the console’s own client, told why it cannot be disabled rather than offered a button the API refuses', async () => {
		const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
		const { page, violations } = await signIn(context, '/console/oauth-clients', 'OAuth clients')
		await page.click('main table a:has-text("Console")')
		await page.locator('#client-heading ~ .facts', { hasText: 'latchkey-console' }).waitFor()
		expect(await page.textContent('#client-heading ~ .note')).toContain('cannot be changed or disabled')
		expect(await page.locator('button:has-text("Disable…")').count()).toBe(0)
		expect(await page.locator('#settings-heading').count()).toBe(0)
		await screenshot(page, 'oauth-clients-built-in')
		expect(violations).toEqual([])
		await context.close()
	})
})

describe('axe-core', () => {
	test('no serious or critical violation on the list, a client, its secret and a confirmation, at 320 px and 1280 px, light and dark', async () => {
		const made = await t.call('POST', '/api/oauth-clients', {
			token: admin.accessToken,
			json: { name: 'Acme Reports', type: 'confidential', redirectUris: ['https://reports.example.test/callback'], postLogoutRedirectUris: ['https://reports.example.test/bye'] },
		})
		expect(made.status).toBe(201)
		const id = made.body.data.id as string
		const found: Record<string, string[]> = {}
		for (const state of VIEW_STATES) {
			const context = await contextIn(browser, state)
			const { page, violations } = await signIn(context, '/console/oauth-clients', 'OAuth clients')
			const check = async (name: string) => {
				const label = `oauth-clients-${name}-${state.width}-${state.scheme}`
				await screenshot(page, label)
				found[label] = await seriousViolations(page)
				expect({ label, fits: await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth') }).toEqual({ label, fits: true })
			}
			await page.locator('main table').waitFor()
			await check('list')
			await page.goto(`${base}/console/oauth-clients/${id}`)
			await page.locator('main h1', { hasText: 'Acme Reports' }).waitFor()
			await check('client')
			await page.click('button:has-text("New secret…")')
			await page.locator('dialog[open]').waitFor()
			await check('confirm')
			await page.click('dialog button[data-confirm]')
			await page.locator('#client-secret').waitFor()
			await check('secret')
			expect(violations).toEqual([])
			await context.close()
		}
		expect(Object.values(found).flat()).toEqual([])
	})
})
