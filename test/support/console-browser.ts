/**
 * What the console's tests in Chromium share: the browser (localhost mapped to this machine's IPv4 loopback, where
 * the test apps listen, not ::1), signing in through the real /sign-in page (Latchkey's own provider, code flow with
 * PKCE) with every request held to the console's own origin, and the screenshots kept in test-artifacts/console/.
 */
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import { startTestApp, type TestApp } from './app'
import { openPage } from './browser'
import { PASSWORD } from './fixtures'
import { freePort } from './ports'

export const CONSOLE_ARTIFACTS = join(import.meta.dir, '..', '..', 'test-artifacts', 'console')

export function launchConsoleBrowser(): Promise<Browser> {
	mkdirSync(CONSOLE_ARTIFACTS, { recursive: true })
	return chromium.launch({
		executablePath: '/usr/bin/chromium',
		args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--host-resolver-rules=MAP localhost 127.0.0.1'],
	})
}

interface Started {
	t: TestApp
	close(): Promise<void>
}

const startPlain = async (env: Record<string, string>): Promise<Started> => {
	const t = await startTestApp(env)
	return { t, close: () => t.close() }
}

/**
 * A test app listening at http://localhost:<a free port>, which is its PUBLIC_URL: the console's issuer, where the
 * browser signs in. `start` makes the app (startTestApp by default; startAppWithSmtp for one that sends mail).
 */
export async function listeningConsole<S extends Started = Started>(env: Record<string, string> = {}, start: (env: Record<string, string>) => Promise<S> = startPlain as never) {
	const port = await freePort()
	const base = `http://localhost:${port}`
	const started = await start({ ...env, PUBLIC_URL: base })
	const server = started.t.app.listen({ port, hostname: '127.0.0.1' })
	return {
		...started,
		port,
		base,
		close: async () => {
			await server.stop()
			await started.close()
		},
	}
}

export interface ConsoleSignIn {
	/** The console's origin: its PUBLIC_URL. */
	base: string
	email: string
	password?: string
	/** Where the browser opens (a path under /console). */
	path?: string
	/** The heading of the view it lands on. */
	landing?: string
}

/**
 * Opens `path` in a fresh page and signs in at the real /sign-in page on the way; ends on the view headed `landing`.
 * No request may leave the console's origin (issue 28: "no request leaves the machine"): each one that would is
 * recorded with the policy's refusals and script errors, which the tests expect to be none.
 */
export async function signInToConsole(context: BrowserContext, { base, email, password = PASSWORD, path = '/console', landing = 'Users' }: ConsoleSignIn) {
	const opened = await openPage(context)
	const { page } = opened
	page.on('request', (request) => {
		const { origin, protocol } = new URL(request.url())
		if (origin !== base && protocol !== 'data:') opened.violations.push(`a request left the console's origin: ${origin}`)
	})
	await page.goto(`${base}${path}`)
	// The console sends the browser to the provider, which asks the pages to sign in.
	await page.waitForURL((url) => url.pathname === '/sign-in')
	await page.fill('#email', email)
	await page.fill('#password', password)
	await Promise.all([page.waitForURL((url) => url.pathname.startsWith('/console') && !url.pathname.startsWith('/console/callback')), page.click('button[type=submit]')])
	await page.locator('main h1', { hasText: landing }).waitFor()
	return opened
}

/** A full-page screenshot, kept as a test artefact. */
export const consoleScreenshot = (page: Page, name: string) => page.screenshot({ path: join(CONSOLE_ARTIFACTS, `${name}.png`), fullPage: true })
