/**
 * A provider sign-in as a person's browser goes through it: Debian's Chromium (playwright-core) opens a
 * frontend page that makes a PKCE pair, goes to the API, on to a real OpenID Provider (oidc-provider) and
 * back through the API's callback — cookies, redirects and all — to the frontend's callback page, which
 * exchanges the code with its verifier. On PGlite, and on PostgreSQL with TEST_DATABASE_URL.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { chromium, type Browser } from 'playwright-core'
import { startTestApp, type TestApp } from './support/app'
import { jwtPayload, uniqueEmail } from './support/fixtures'
import { FlowBrowser, pkcePair, TestOpenIdProvider } from './support/oidc-provider'
import { freePort } from './support/ports'

setDefaultTimeout(60_000)

let provider: TestOpenIdProvider
let t: TestApp
let api: ReturnType<TestApp['app']['listen']>
let frontend: ReturnType<typeof Bun.serve>
let browser: Browser
let apiBase: string

/** The frontend: `/` starts a sign-in, `/auth/callback` finishes it; what it saw lands in `window.result`. */
const page = (apiBase: string, body: string) => `<!doctype html><title>frontend</title><script type="module">
const base64url = (bytes) => btoa(String.fromCharCode(...bytes)).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '')
${body}
</script>`

const START = (apiBase: string) => `
if (new URLSearchParams(location.search).get('error')) window.result = { error: new URLSearchParams(location.search).get('error') }
else {
const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)))
sessionStorage.setItem('pkce', verifier)
const challenge = base64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))))
const query = new URLSearchParams({ redirectTo: location.origin + '/auth/callback', codeChallenge: challenge, codeChallengeMethod: 'S256' })
location.href = '${apiBase}/api/auth/providers/test/authorization?' + query
}`

const CALLBACK = (apiBase: string) => `
const params = new URLSearchParams(location.search)
history.replaceState(null, '', location.pathname)
if (params.get('error')) window.result = { error: params.get('error') }
else {
	const response = await fetch('${apiBase}/api/auth/sessions', {
		method: 'POST',
		headers: { 'content-type': 'application/json' },
		body: JSON.stringify({ code: params.get('code'), codeVerifier: sessionStorage.getItem('pkce') }),
	})
	window.result = { status: response.status, body: await response.json(), addressBar: location.href }
}`

beforeAll(async () => {
	const apiPort = await freePort()
	apiBase = `http://127.0.0.1:${apiPort}`
	frontend = Bun.serve({
		hostname: 'localhost',
		port: 0,
		fetch(request) {
			const { pathname } = new URL(request.url)
			const html = pathname === '/' ? page(apiBase, START(apiBase)) : pathname === '/auth/callback' ? page(apiBase, CALLBACK(apiBase)) : undefined
			return html ? new Response(html, { headers: { 'content-type': 'text/html' } }) : new Response('not found', { status: 404 })
		},
	})
	const frontendOrigin = `http://localhost:${frontend.port}`
	provider = await TestOpenIdProvider.start([`${apiBase}/api/auth/providers/test/callback`])
	t = await startTestApp({
		OIDC_PROVIDERS: 'test',
		...provider.settings('test'),
		PUBLIC_URL: apiBase,
		APP_URL: frontendOrigin,
		REDIRECT_URLS: `${frontendOrigin}/auth/*`,
		CORS_ORIGINS: frontendOrigin,
	})
	api = t.app.listen({ port: apiPort, hostname: '127.0.0.1' })
	browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] })
})
afterAll(async () => {
	await browser?.close()
	await api?.stop()
	await t?.close()
	await provider?.stop()
	frontend?.stop(true)
})

test('Chromium goes from the frontend to the provider and back, and the callback page exchanges its code for tokens', async () => {
	const email = uniqueEmail('oidc-browser')
	provider.signInAs = { sub: `browser-${email}`, email, email_verified: true, name: 'Browser User' }
	const tab = await browser.newPage()
	const errors: string[] = []
	tab.on('pageerror', (error) => errors.push(error.message))
	const visited: string[] = []
	tab.on('framenavigated', (frame) => visited.push(new URL(frame.url()).pathname))
	await tab.goto(`http://localhost:${frontend.port}/`)
	await tab.waitForFunction(() => 'result' in globalThis)
	const result = (await tab.evaluate(() => (globalThis as unknown as { result: unknown }).result)) as { status: number; body: { data: { accessToken: string; user: { email: string } } }; addressBar: string }
	expect(errors).toEqual([])
	expect(result.status).toBe(200)
	expect(result.body.data.user.email).toBe(email)
	expect(jwtPayload(result.body.data.accessToken)).toMatchObject({ amr: [], aal: 'aal1' })
	// The code left the address bar once used.
	expect(new URL(result.addressBar).search).toBe('')
	expect(visited.at(-1)).toBe('/auth/callback')
	// The browser kept the flow's cookie only for the API's provider paths.
	const cookies = await tab.context().cookies()
	expect(cookies.find((cookie) => cookie.name === 'latchkey-oidc')).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/api/auth/providers' })
	await tab.close()
})

test('a callback URL stopped short by an attacker and opened in a victim’s Chromium ends in invalid-state (login CSRF)', async () => {
	provider.signInAs = { sub: 'attacker', email: uniqueEmail('oidc-attacker'), email_verified: true }
	// The attacker's own flow, stopped at the API's callback with its code and state.
	const attacker = new FlowBrowser(t.app, apiBase)
	const { challenge } = pkcePair() // the attacker keeps the verifier
	const query = new URLSearchParams({ redirectTo: `http://localhost:${frontend.port}/auth/callback`, codeChallenge: challenge, codeChallengeMethod: 'S256' })
	const stolen = await attacker.follow(`${apiBase}/api/auth/providers/test/authorization?${query}`, provider.issuer, (url) => url.pathname.endsWith('/callback'))
	expect(stolen.searchParams.get('code')).toBeString()
	const victim = await (await browser.newContext()).newPage()
	await victim.goto(stolen.href)
	await victim.waitForFunction(() => 'result' in globalThis)
	expect(await victim.evaluate(() => (globalThis as unknown as { result: unknown }).result)).toEqual({ error: 'invalid-state' })
	expect(new URL(victim.url()).origin).toBe(`http://localhost:${frontend.port}`)
	await victim.context().close()
})
