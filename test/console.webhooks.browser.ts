/**
 * The console's webhooks as an operator uses them, in Debian's Chromium (playwright-core), signed in through the real
 * /sign-in page: adding an endpoint (its secret shown once, copied, and signing what the receiver gets), a ping and
 * its attempt, rotating the secret (the new one signs), a failing receiver's delivery tried again, changing, turning
 * off and on, deleting; axe-core at 320 px and 1280 px, light and dark, under the pages' CSP (any refusal of it fails
 * the test). Receivers are real HTTP servers on loopback (WEBHOOK_ALLOW_PRIVATE_NETWORKS=true), retries a quarter
 * of a second apart. Screenshots land in test-artifacts/console/webhooks-*.png.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { type Browser, type BrowserContext, type Page } from 'playwright-core'
import type { TestApp } from './support/app'
import { contextIn, openPage, seriousViolations, VIEW_STATES } from './support/browser'
import { consoleScreenshot, launchConsoleBrowser, listeningConsole, signInToConsole } from './support/console-browser'
import { PASSWORD, signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'
import { verified, WebhookReceiver, type ReceivedDelivery } from './support/webhook-receiver'

setDefaultTimeout(120_000)

let t: TestApp
let app: Awaited<ReturnType<typeof listeningConsole>>
let browser: Browser
let base: string
let admin: Account
let receiver: WebhookReceiver

beforeAll(async () => {
	// One retry a quarter of a second after a failed attempt, then the delivery is `failed`; jobs looked for every tenth of a second.
	app = await listeningConsole({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETRY_SCHEDULE: '0.25', JOB_POLL_SECONDS: '0.1' })
	;({ t, base } = app)
	browser = await launchConsoleBrowser()
	admin = await signUpAdmin(t, uniqueEmail('operator'))
	receiver = await WebhookReceiver.start()
})
afterAll(async () => {
	await browser?.close()
	await receiver?.stop()
	await app?.close()
})

const screenshot = (page: Page, name: string) => consoleScreenshot(page, `webhooks-${name}`)

/** Opens /console/webhooks in a fresh browser, signing in at the real /sign-in page on the way. */
async function signInToWebhooks(context: BrowserContext) {
	const opened = await signInToConsole(context, { base, email: admin.email, path: '/console/webhooks', landing: 'Webhooks' })
	await opened.page.locator('#endpoints-heading').waitFor()
	return opened
}

/** An endpoint added through the API (for the tests about what comes after adding one). */
async function addEndpoint(url: string, events: string[] = ['user.created']) {
	const res = await t.call('POST', '/api/webhooks', { token: admin.accessToken, json: { url, events, description: 'Added by the test' } })
	expect(res.status).toBe(201)
	return res.body.data as { id: string; url: string; secret: string }
}

async function openEndpoint(page: Page, id: string) {
	await page.goto(`${base}/console/webhooks/${id}`)
	await page.locator('#deliveries-heading').waitFor()
	await page.locator('#deliveries-heading ~ .total').waitFor()
}

const said = (page: Page, text: string) => page.locator('#announce', { hasText: text }).waitFor({ timeout: 30_000 })
const pingsTo = (endpointId: string) => (delivery: ReceivedDelivery) => delivery.event.type === 'webhook.ping' && delivery.event.data.endpointId === endpointId

describe('an operator', () => {
	test('adds an endpoint: a refused URL is said in words, the secret is shown once with a copy button, and it signs the deliveries', async () => {
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base })
		const { page, violations } = await signInToWebhooks(context)

		// A cloud metadata address is refused even on a server that allows its own network.
		await page.fill('#new-url', 'http://169.254.169.254/latest/meta-data')
		await page.check('#new-all')
		await page.click('button:has-text("Add the endpoint")')
		const alert = page.locator('main > [role=alert]')
		await alert.waitFor()
		expect(await alert.textContent()).toContain('This URL cannot receive webhooks: the host resolves to a cloud metadata address, which is always refused.')
		expect(await page.evaluate("document.activeElement?.getAttribute('role')")).toBe('alert')
		await screenshot(page, 'refused-url')

		// No event chosen: the form says so before asking the API.
		await page.fill('#new-url', receiver.url)
		await page.check('#new-some')
		await page.click('button:has-text("Add the endpoint")')
		await page.locator('form [role=alert]', { hasText: 'Choose at least one event' }).waitFor()

		await page.check('#new-event-user\\.created')
		await page.fill('#new-description', 'The CRM')
		await page.click('button:has-text("Add the endpoint")')
		const notice = page.locator('#secret-heading')
		await notice.waitFor()
		expect(await page.evaluate('document.activeElement?.id')).toBe('secret-heading')
		expect(await page.textContent('.notice')).toContain('Copy it now; it will not be shown again.')
		const secret = (await page.textContent('#new-secret')) ?? ''
		expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/)
		await page.click('button:has-text("Copy the secret")')
		await said(page, 'The secret is copied to the clipboard.')
		expect(await page.evaluate('navigator.clipboard.readText()')).toBe(secret)
		const row = page.locator('#endpoints-heading ~ .table-wrap tbody tr', { hasText: receiver.url })
		expect(await row.textContent()).toContain('user.created')
		expect(await row.textContent()).toContain('The CRM')
		expect(await row.textContent()).toContain('Enabled')
		await screenshot(page, 'secret-once')

		// It is the endpoint's secret: a new account's event arrives signed with it.
		const [endpoint] = ((await t.call('GET', '/api/webhooks', { token: admin.accessToken })).body.data.items as Array<{ id: string; url: string; events: string[] }>).filter((item) => item.url === receiver.url)
		expect(endpoint?.events).toEqual(['user.created'])
		const user = await signUp(t)
		const [delivery] = await receiver.waitFor((received) => received.event.type === 'user.created' && received.event.data.user.id === user.id)
		expect(verified(delivery as ReceivedDelivery, secret).data.user.id).toBe(user.id)

		// Shown once: hidden by its button, and gone for good once the page is left.
		await page.click('button:has-text("I have kept it")')
		expect(await page.locator('#new-secret').count()).toBe(0)
		await page.reload()
		await page.locator('#endpoints-heading').waitFor()
		expect(await page.locator('#new-secret').count()).toBe(0)
		expect(await page.content()).not.toContain(secret)
		await screenshot(page, 'list')
		expect(violations).toEqual([])
		await context.close()
	})

	test('sends a ping and sees its delivery and attempt; rotates the secret, and the next delivery verifies with the new one', async () => {
		const endpoint = await addEndpoint(receiver.url)
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await signInToWebhooks(context)
		await page.click(`a:has-text("${receiver.url}") >> nth=-1`)
		await page.locator('#deliveries-heading ~ .total', { hasText: 'No delivery yet' }).waitFor()
		expect(new URL(page.url()).pathname).toBe(`/console/webhooks/${endpoint.id}`)
		expect(await page.textContent('#endpoint-heading + .facts')).toContain('Added by the test')

		await page.click('button:has-text("Send a ping")')
		await said(page, 'The ping was delivered: the receiver answered 204.')
		const entry = page.locator('details.delivery', { hasText: 'webhook.ping' })
		expect(await entry.count()).toBe(1)
		expect(await entry.locator(':scope > summary').textContent()).toContain('Delivered')
		// The keyboard opens it: its summary is reached and used like a button.
		await entry.locator(':scope > summary').focus()
		await page.keyboard.press('Enter')
		expect(await entry.getAttribute('open')).not.toBeNull()
		const attempts = entry.locator('.table-wrap tbody tr')
		expect(await attempts.count()).toBe(1)
		expect(await attempts.textContent()).toContain('204')
		expect(await attempts.textContent()).toContain('Delivered: the receiver answered 204')
		await screenshot(page, 'ping')
		const [ping] = await receiver.waitFor(pingsTo(endpoint.id))
		expect(verified(ping as ReceivedDelivery, endpoint.secret).data.endpointId).toBe(endpoint.id)

		// Rotating: the confirmation says the old secret keeps signing for 24 hours; cancelling does nothing.
		await page.click('button:has-text("Rotate the secret…")')
		const dialog = page.locator('dialog')
		expect(await dialog.textContent()).toContain('The current secret keeps signing beside it for 24 hours')
		await screenshot(page, 'rotate-dialog')
		await dialog.locator('button', { hasText: 'Cancel' }).click()
		expect((await t.call('GET', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken })).body.data.secretRotatedAt).toBeNull()
		await page.click('button:has-text("Rotate the secret…")')
		await page.click('dialog button[data-confirm]')
		await page.locator('#secret-heading', { hasText: 'The new signing secret' }).waitFor()
		expect(await page.textContent('.notice')).toContain('Copy it now; it will not be shown again.')
		expect(await page.textContent('.notice')).toContain('The previous secret keeps signing beside it until')
		const rotated = (await page.textContent('#new-secret')) ?? ''
		expect(rotated).toMatch(/^whsec_/)
		expect(rotated).not.toBe(endpoint.secret)
		await screenshot(page, 'rotated')

		// The next delivery verifies with the new secret (and, for 24 hours, with the old one too).
		await page.click('button:has-text("Send a ping")')
		await said(page, 'The ping was delivered')
		const pings = await receiver.waitFor(pingsTo(endpoint.id), 2)
		const afterRotation = pings.at(-1) as ReceivedDelivery
		expect(verified(afterRotation, rotated).type).toBe('webhook.ping')
		expect(verified(afterRotation, endpoint.secret).type).toBe('webhook.ping')
		expect(await page.locator('details.delivery').count()).toBe(2)
		expect(violations).toEqual([])
		await context.close()
	})

	test('a failing receiver’s delivery shows its failed attempts, and “Try again” makes a new attempt', async () => {
		const failing = await WebhookReceiver.start()
		failing.otherwise = 500
		try {
			const endpoint = await addEndpoint(failing.url)
			const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
			const { page, violations } = await signInToWebhooks(context)
			await openEndpoint(page, endpoint.id)
			await page.click('button:has-text("Send a ping")')
			await said(page, 'The ping failed: The receiver answered 500 (not a 2xx).')
			expect(await page.textContent('#endpoint-heading + .facts')).toContain('every attempt has failed since')
			// The one retry fails too, then the delivery is failed: seen through the status filter.
			await failing.waitFor(pingsTo(endpoint.id), 2)
			await page.selectOption('#deliveries-status', 'failed')
			const entry = page.locator('details.delivery', { hasText: 'webhook.ping' })
			for (let tries = 0; tries < 50 && !(await entry.count()); tries++) {
				await page.click('#deliveries-heading ~ form button:has-text("Show")')
				await page.waitForURL((url) => url.searchParams.get('status') === 'failed')
				await page.locator('#deliveries-heading ~ .total').waitFor()
				if (!(await entry.count())) await Bun.sleep(200)
			}
			expect(await entry.locator(':scope > summary').textContent()).toContain('Failed')
			await entry.locator(':scope > summary').click()
			const attempts = entry.locator('.table-wrap tbody tr')
			expect(await attempts.count()).toBe(2)
			expect(await attempts.nth(0).textContent()).toContain('The receiver answered 500')
			await screenshot(page, 'failed')

			// The receiver is fixed; "Try again" makes a third attempt, which is delivered.
			failing.otherwise = 204
			await entry.locator('button', { hasText: 'Try again' }).click()
			await said(page, 'The new attempt was delivered: the receiver answered 204.')
			await page.locator('details.delivery[open] .table-wrap tbody tr >> nth=2').waitFor()
			expect(await page.locator('details.delivery[open] .table-wrap tbody tr').count()).toBe(3)
			const received = await failing.waitFor(pingsTo(endpoint.id), 3)
			expect(new Set(received.map((delivery) => delivery.id)).size).toBe(1)
			await screenshot(page, 'tried-again')
			expect(await page.textContent('#endpoint-heading + .facts')).not.toContain('every attempt has failed since')
			const [delivery] = (await t.call('GET', `/api/webhooks/${endpoint.id}/deliveries`, { token: admin.accessToken })).body.data.items
			expect(delivery.status).toBe('succeeded')
			expect(delivery.attempts).toHaveLength(3)
			expect(violations).toEqual([])
			await context.close()
		} finally {
			await failing.stop()
		}
	})

	test('changes an endpoint, turns it off and on, and deletes it after a confirmation that says what it does', async () => {
		const endpoint = await addEndpoint('http://127.0.0.1:9/hooks')
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await signInToWebhooks(context)
		await openEndpoint(page, endpoint.id)

		await page.fill('#edit-description', 'Billing')
		await page.check('#edit-event-session\\.revoked')
		await page.click('button:has-text("Save the changes")')
		await said(page, 'The endpoint is saved.')
		const saved = (await t.call('GET', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken })).body.data
		expect(saved.description).toBe('Billing')
		expect(saved.events).toEqual(['user.created', 'session.revoked'])
		expect(await page.textContent('#endpoint-heading + .facts')).toContain('user.created, session.revoked')

		await page.click('button:has-text("Turn off…")')
		expect(await page.locator('dialog').textContent()).toContain('Nothing is sent to it while it is off')
		await page.click('dialog button[data-confirm]')
		await page.locator('main h1 .badge', { hasText: 'Disabled' }).waitFor()
		expect(await page.locator('button:has-text("Send a ping")').count()).toBe(0)
		expect((await t.call('GET', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken })).body.data).toMatchObject({ enabled: false, disabledReason: 'admin' })
		await screenshot(page, 'off')
		await page.click('button:has-text("Turn on")')
		await page.locator('main h1 .badge', { hasText: 'Enabled' }).waitFor()
		expect((await t.call('GET', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken })).body.data.enabled).toBe(true)

		await page.click('button:has-text("Delete…")')
		expect(await page.locator('dialog').textContent()).toContain('This cannot be undone')
		await screenshot(page, 'delete-dialog')
		await page.click('dialog button[data-confirm]')
		await page.waitForURL((url) => url.pathname === '/console/webhooks')
		await said(page, 'is deleted.')
		expect(await page.locator(`a:has-text("${endpoint.url}")`).count()).toBe(0)
		expect((await t.call('GET', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken })).status).toBe(404)
		expect(violations).toEqual([])
		await context.close()
	})

	test('pages through the deliveries with Next and Previous', async () => {
		const endpoint = await addEndpoint(receiver.url)
		for (let i = 0; i < 21; i++) expect((await t.call('POST', `/api/webhooks/${endpoint.id}/pings`, { token: admin.accessToken })).status).toBe(202)
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await signInToWebhooks(context)
		await openEndpoint(page, endpoint.id)
		expect(await page.locator('details.delivery').count()).toBe(20)
		const firstPage = await page.locator('details.delivery').evaluateAll((items) => items.map((item) => item.getAttribute('data-delivery')))
		await page.click('button:has-text("Next page")')
		await page.locator('#deliveries-heading ~ .total', { hasText: 'page 2' }).waitFor()
		expect(await page.locator('details.delivery').count()).toBe(1)
		const second = await page.locator('details.delivery').getAttribute('data-delivery')
		expect(firstPage).not.toContain(second)
		await page.click('button:has-text("Previous page")')
		await page.locator('#deliveries-heading ~ .total', { hasText: 'page 1' }).waitFor()
		expect(await page.locator('details.delivery').evaluateAll((items) => items.map((item) => item.getAttribute('data-delivery')))).toEqual(firstPage)
		expect(violations).toEqual([])
		await context.close()
	})
})

describe('a server that keeps webhooks off its own network (WEBHOOK_ALLOW_PRIVATE_NETWORKS unset)', () => {
	test('refuses a loopback URL, and the console says why and what would allow it', async () => {
		const strictApp = await listeningConsole()
		const { t: strict, base: strictBase } = strictApp
		try {
			const operator = await signUpAdmin(strict, uniqueEmail('strict'))
			const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
			const { page, violations } = await openPage(context)
			await page.goto(`${strictBase}/console/webhooks`)
			await page.waitForURL((url) => url.pathname === '/sign-in')
			await page.fill('#email', operator.email)
			await page.fill('#password', PASSWORD)
			await Promise.all([page.waitForURL((url) => url.pathname === '/console/webhooks'), page.click('button[type=submit]')])
			await page.locator('#endpoints-heading').waitFor()
			await page.fill('#new-url', receiver.url)
			await page.check('#new-all')
			await page.click('button:has-text("Add the endpoint")')
			await page.locator('main > [role=alert]').waitFor()
			expect(await page.textContent('main > [role=alert]')).toBe(
				'This URL cannot receive webhooks: the host resolves to a loopback, private or link-local address. Deliveries go only to public addresses, unless the server is started with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true.',
			)
			expect((await strict.call('GET', '/api/webhooks', { token: operator.accessToken })).body.data.items).toEqual([])
			await screenshot(page, 'private-url')
			expect(violations).toEqual([])
			await context.close()
		} finally {
			await strictApp.close()
		}
	})
})

describe('axe-core', () => {
	test('no serious or critical violation on the list, an endpoint with a delivery open, a confirmation and a new secret, at 320 px and 1280 px, light and dark', async () => {
		const endpoint = await addEndpoint(receiver.url, ['*'])
		expect((await t.call('POST', `/api/webhooks/${endpoint.id}/pings`, { token: admin.accessToken })).status).toBe(202)
		await receiver.waitFor(pingsTo(endpoint.id))
		const found: Record<string, string[]> = {}
		for (const state of VIEW_STATES) {
			const context = await contextIn(browser, state)
			const { page, violations } = await signInToWebhooks(context)
			const check = async (name: string) => {
				const label = `${name}-${state.width}-${state.scheme}`
				await screenshot(page, label)
				found[label] = await seriousViolations(page)
				expect({ label, fits: await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth') }).toEqual({ label, fits: true })
			}
			await check('list')
			await openEndpoint(page, endpoint.id)
			await page.locator('details.delivery summary >> nth=0').click()
			await page.locator('details.delivery[open] .table-wrap').waitFor()
			await check('endpoint')
			await page.click('button:has-text("Rotate the secret…")')
			await page.locator('dialog[open]').waitFor()
			await check('rotate-confirm')
			await page.click('dialog button[data-confirm]')
			await page.locator('#new-secret').waitFor()
			await check('new-secret')
			expect(violations).toEqual([])
			await context.close()
		}
		expect(Object.values(found).flat()).toEqual([])
	}, 300_000)
})
