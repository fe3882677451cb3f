/**
 * The docs page as a person opens it: a real Chromium with no network but
 * this machine. Needs Debian's `chromium` at /usr/bin/chromium (.ci/run
 * installs it). The screenshot lands in test-artifacts/docs.png.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { chromium, type Browser } from 'playwright-core'
import { startTestApp, type TestApp } from './support/app'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const ARTIFACTS = join(import.meta.dir, '..', 'test-artifacts')
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost'])

let t: TestApp
let server: ReturnType<TestApp['app']['listen']>
let browser: Browser

beforeAll(async () => {
	t = await startTestApp()
	server = t.app.listen({ port: 0, hostname: '127.0.0.1' })
	browser = await chromium.launch({
		executablePath: '/usr/bin/chromium',
		args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
	})
})
afterAll(async () => {
	await browser?.close()
	await server?.stop()
	await t?.close()
})

test('the docs page renders the operations with nothing loaded from outside this machine', async () => {
	const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
	const requested: string[] = []
	const refused: string[] = []
	await page.route('**/*', (route) => {
		const url = new URL(route.request().url())
		requested.push(url.href)
		if (url.protocol === 'data:' || url.protocol === 'blob:' || LOCAL_HOSTS.has(url.hostname)) return route.continue()
		refused.push(url.href)
		return route.abort('blockedbyclient')
	})
	const errors: string[] = []
	page.on('pageerror', (error) => errors.push(error.message))
	// Scalar announces deprecated configuration on the console: the page must use its current configuration.
	const warnings: string[] = []
	page.on('console', (message) => {
		if (message.type() === 'warning' || message.type() === 'error') warnings.push(message.text())
	})

	const response = await page.goto(`http://127.0.0.1:${server.server?.port}/api/docs`)
	expect(response?.status()).toBe(200)
	await page.getByText('Log in with email and password').first().waitFor({ timeout: 30_000 })
	mkdirSync(ARTIFACTS, { recursive: true })
	await page.screenshot({ path: join(ARTIFACTS, 'docs.png'), fullPage: false })
	// The sidebar lists every tag's operations.
	for (const tag of ['Authentication', 'Users', 'Audit', 'Health']) expect(await page.getByText(tag, { exact: true }).count()).toBeGreaterThan(0)

	expect(refused).toEqual([])
	expect(requested.some((url) => url.includes('/api/docs/scalar.js'))).toBe(true)
	expect(requested.some((url) => url.endsWith('/api/docs/json'))).toBe(true)
	expect(errors).toEqual([])
	expect(warnings).toEqual([])
	await page.close()
}, 60_000)
