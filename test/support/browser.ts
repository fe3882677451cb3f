/**
 * What the tests in Chromium share: Debian's Chromium (at /usr/bin/chromium; .ci/run installs it), a page
 * that reaches nothing beyond this machine and records what its policy refused, and axe-core's verdict.
 */
import { expect } from 'bun:test'
import { mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'

/** Where the screenshots of the pages land (kept by CI as test artefacts). */
export const PAGE_ARTIFACTS = join(import.meta.dir, '..', '..', 'test-artifacts', 'pages')
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8')
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost'])

export function launchChromium(): Promise<Browser> {
	mkdirSync(PAGE_ARTIFACTS, { recursive: true })
	return chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] })
}

/** A page that records what the policy refused and any script error, and reaches nothing beyond this machine. */
export async function openPage(context: BrowserContext): Promise<{ page: Page; violations: string[] }> {
	const page = await context.newPage()
	const violations: string[] = []
	page.on('console', (message) => {
		if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text())
	})
	page.on('pageerror', (error) => violations.push(error.message))
	await page.route('**/*', (route) => (LOCAL_HOSTS.has(new URL(route.request().url()).hostname) ? route.continue() : route.abort('blockedbyclient')))
	return { page, violations }
}

/**
 * axe-core's serious and critical violations of the page as it is. Its source is evaluated through the
 * DevTools protocol, which the page's CSP does not govern (an injected <script> tag would be refused, as
 * it should be): the page stays under its own policy while it is checked.
 */
export async function seriousViolations(page: Page): Promise<string[]> {
	await page.evaluate(AXE_SOURCE)
	expect(await page.evaluate('typeof window.axe')).toBe('object')
	const results = (await page.evaluate("axe.run(document, { resultTypes: ['violations'] })")) as {
		violations: Array<{ id: string; impact: string; nodes: Array<{ target: string[] }> }>
	}
	return results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`)
}

export interface ViewState {
	width: number
	scheme: 'light' | 'dark'
}

/** The four ways a page is looked at: a phone and a desktop, each light and dark. */
export const VIEW_STATES: ViewState[] = [
	{ width: 320, scheme: 'light' },
	{ width: 320, scheme: 'dark' },
	{ width: 1280, scheme: 'light' },
	{ width: 1280, scheme: 'dark' },
]

/** A browser context in that state: the viewport's width (a phone's height below 400 px) and the colour scheme. */
export const contextIn = (browser: Browser, { width, scheme }: ViewState) => browser.newContext({ viewport: { width, height: width < 400 ? 640 : 800 }, colorScheme: scheme })

/**
 * Checks each state of a page as the test walks through them: a screenshot named after it, axe-core's
 * serious and critical violations (collected in `found`, by name, for one assertion at the end), and
 * nothing reaching past the page's edge.
 */
export function pageStateChecker(page: Page, { width, scheme }: ViewState) {
	const found: Record<string, string[]> = {}
	const check = async (name: string) => {
		await page.screenshot({ path: join(PAGE_ARTIFACTS, `${name}-${width}-${scheme}.png`), fullPage: true })
		found[name] = await seriousViolations(page)
		expect({ name, fits: await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth') }).toEqual({ name, fits: true })
	}
	return { check, found }
}
