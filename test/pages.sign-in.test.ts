import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { and, eq } from 'drizzle-orm'
import { isConsolePath } from '../src/console'
import { digestOf } from '../src/crypto/opaque-tokens'
import { auditEvents, sessions } from '../src/db/schema'
import { PAGE_PATHS, PageRenderer } from '../src/pages'
import { startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { awayFromStepBoundary, enrollTotp, totpCode } from './support/factors'
import { login, PASSWORD, signUp, uniqueEmail } from './support/fixtures'
import { PageBrowser } from './support/pages'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
const SESSION = '__Host-latchkey-session'
const CSRF = '__Host-latchkey-csrf'

let database: TestDatabase
let t: TestApp
beforeAll(async () => {
	database = await createTestDatabase()
	t = await startTestApp({}, database)
})
afterAll(async () => {
	await t?.close()
	await database?.drop()
})

const sessionRow = async (id: string) => (await t.database.handle.db.select().from(sessions).where(eq(sessions.id, id)))[0]
const browserSessionRow = async (browser: PageBrowser) => {
	const token = browser.cookies.get(SESSION)
	if (!token) return undefined
	return (await t.database.handle.db.select().from(sessions).where(eq(sessions.browserTokenHash, digestOf(token))))[0]
}

describe('the sign-in page', () => {
	test('is HTML under a strict policy, with labelled fields and a form token in a __Host- cookie', async () => {
		const browser = new PageBrowser(t)
		const page = await browser.get('/sign-in')
		expect(page.status).toBe(200)
		expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8')
		expect(page.headers.get('content-security-policy')).toBe(CSP)
		expect(page.headers.get('content-security-policy')).not.toContain('form-action')
		expect(page.headers.get('cache-control')).toBe('no-store')
		expect(page.headers.get('referrer-policy')).toBe('same-origin')
		expect(page.headers.get('x-frame-options')).toBe('DENY')
		expect(page.headers.get('x-request-id')).toBeTruthy()
		expect(page.html).toContain('<html lang="en" dir="ltr">')
		expect(page.html).toContain('<label for="email">Email address</label>')
		expect(page.html).toContain('<label for="password">Password</label>')
		expect(page.html).toMatch(/<input id="email" name="email" type="email" autocomplete="username"[^>]* autofocus>/)
		// Nothing inline for the policy to refuse: the one script is a file of the pages (the passkey button).
		expect(page.html).not.toMatch(/<style|\sstyle=|\son[a-z]+="/i)
		expect([...page.html.matchAll(/<script[^>]*>/gi)].map(([tag]) => tag)).toEqual(['<script src="/pages/passkeys.js" defer>'])
		expect(page.html).toContain('<script src="/pages/passkeys.js" defer></script>')
		const [csrf] = page.setCookies
		expect(csrf?.name).toBe(CSRF)
		expect(csrf?.attributes).toMatchObject({ path: '/', secure: true, httponly: true, samesite: 'Lax' })
		expect(csrf?.attributes.domain).toBeUndefined()
		expect(PageBrowser.field(page.html, 'csrf')).toBe(csrf?.value ?? '')
	})

	test('the stylesheets are served from the pages, the brand colour in a file of its own', async () => {
		const styles = await t.app.handle(new Request('http://localhost/pages/styles.css', { headers: { accept: 'text/css,*/*;q=0.1' } }))
		expect(styles.status).toBe(200)
		expect(styles.headers.get('content-type')).toBe('text/css; charset=utf-8')
		const css = await styles.text()
		expect(css).toContain('prefers-color-scheme: dark')
		expect(css).toContain(':focus-visible')
		const theme = await t.app.handle(new Request('http://localhost/pages/theme.css'))
		expect(theme.status).toBe(200)
		expect(theme.headers.get('content-type')).toBe('text/css; charset=utf-8')
	})

	test("a browser's own request for /favicon.ico is answered empty, not with a 404", async () => {
		const icon = await t.app.handle(new Request('http://localhost/favicon.ico', { headers: { accept: 'image/avif,image/webp,image/*,*/*;q=0.8' } }))
		expect(icon.status).toBe(204)
		expect(await icon.text()).toBe('')
		expect(icon.headers.get('cache-control')).toBe('public, max-age=86400')
	})

	test('login_hint fills in the email, escaped, and the password field takes the focus', async () => {
		const browser = new PageBrowser(t)
		const page = await browser.get(`/sign-in?${new URLSearchParams({ login_hint: 'ada"><script>x()</script>@example.test' })}`)
		expect(page.html).toContain('value="ada&quot;&gt;&lt;script&gt;x()&lt;&#x2F;script&gt;@example.test"')
		expect(page.html).not.toContain('<script>')
		expect(page.html).toMatch(/<input id="password"[^>]* autofocus>/)
	})
})

describe('signing in with a password', () => {
	test('starts a Latchkey session behind the __Host-latchkey-session cookie and goes on to /account', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		const done = await browser.signIn(account.email)
		expect(done.status).toBe(303)
		expect(done.location).toBe('/account')
		const cookie = done.setCookies.find((c) => c.name === SESSION)
		expect(cookie?.attributes).toMatchObject({ path: '/', secure: true, httponly: true, samesite: 'Lax', 'max-age': String(t.config.jwt.refreshTtlSeconds) })
		expect(cookie?.attributes.domain).toBeUndefined()
		expect(cookie?.value).toMatch(/^[A-Za-z0-9_-]{43}$/)

		// Only the digest is stored, on a session of the API's own table, with how it was established.
		const row = await browserSessionRow(browser)
		expect(row).toMatchObject({ userId: account.id, amr: ['pwd'], aal: 'aal1', revokedAt: null, clientId: null })
		expect(row?.browserTokenHash).toBe(digestOf(cookie?.value ?? ''))
		const listed = await t.call('GET', '/api/users/me/sessions', { token: account.accessToken })
		expect(listed.body.data.items.map((s: { id: string }) => s.id)).toContain(row?.id)

		const landing = await browser.get('/account')
		expect(landing.status).toBe(200)
		expect(landing.html).toContain(`Signed in as ${account.email}`)
		expect(landing.html).toContain('<form method="post" action="/sign-out">')

		// A browser with a live session is not asked again, unless it asks to be.
		const again = await browser.get('/sign-in?return_to=%2Faccount')
		expect(again.status).toBe(303)
		expect(again.location).toBe('/account')
		for (const forced of ['/sign-in?force=1', '/sign-in?prompt=login', `/sign-in?return_to=${encodeURIComponent('/oauth2/authorize?client_id=a&prompt=login')}`])
			expect((await browser.get(forced)).status).toBe(200)
	})

	test('the sign-in is audited like an API login, with the request’s id and address', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		await browser.signIn(account.email)
		const row = await browserSessionRow(browser)
		const events = await t.database.handle.db
			.select()
			.from(auditEvents)
			.where(and(eq(auditEvents.type, 'login.succeeded'), eq(auditEvents.subjectId, account.id)))
		const event = events.find((e) => e.details.sessionId === row?.id)
		expect(event).toMatchObject({ actorId: account.id, ip: '10.0.0.1' })
		expect(event?.requestId).toBeTruthy()
	})

	test('a wrong password, or an unknown email, shows the same sentence on the form with the email kept (401)', async () => {
		const account = await signUp(t)
		const answers = []
		for (const email of [account.email, uniqueEmail('nobody')]) {
			const browser = new PageBrowser(t)
			const page = await browser.signIn(email, 'not the password at all')
			expect(page.status).toBe(401)
			expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8')
			expect(page.html).toContain('The email address or password is incorrect.')
			expect(page.html).toContain(`value="${email}"`)
			expect(page.html).toMatch(/<div class="error-summary" id="error-summary" role="alert"[^>]* tabindex="-1" autofocus>/)
			expect(page.html).toMatch(/<input id="email"[^>]* aria-invalid="true" aria-describedby="error-summary">/)
			expect(page.setCookies.some((c) => c.name === SESSION)).toBe(false)
			answers.push(page.html.replace(email, '').replaceAll(PageBrowser.field(page.html, 'csrf'), ''))
		}
		expect(answers[0]).toBe(answers[1] ?? '')
	})

	test('an empty field is a sentence too (422), never a validation document', async () => {
		const browser = new PageBrowser(t)
		const form = await browser.get('/sign-in')
		const page = await browser.post('/sign-in', { csrf: PageBrowser.field(form.html, 'csrf'), email: 'ada@example.test', password: '' })
		expect(page.status).toBe(422)
		expect(page.html).toContain('Enter your email address and your password.')
		expect(page.html).toContain('value="ada@example.test"')
	})

	test('a deactivated account signs in no more, and its browser session ends', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		expect((await browser.signIn(account.email)).status).toBe(303)
		expect((await t.call('DELETE', '/api/users/me', { token: account.accessToken })).status).toBe(200)
		expect((await browser.get('/account')).status).toBe(303)
		expect((await new PageBrowser(t).signIn(account.email)).status).toBe(401)
	})
})

describe('return_to', () => {
	test('a local path is where the sign-in goes, and its client_id is the session’s client', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		const returnTo = '/oauth2/authorize?client_id=notes-app&response_type=code&scope=openid'
		const done = await browser.signIn(account.email, PASSWORD, `?return_to=${encodeURIComponent(returnTo)}`)
		expect(done.status).toBe(303)
		expect(done.location).toBe(returnTo)
		expect((await browserSessionRow(browser))?.clientId).toBe('notes-app')
	})

	for (const evil of ['//evil.com', '/\\evil.com', 'https://evil.com', '%2F%2Fevil.com', '/\t/evil.com', 'javascript:alert(1)', '///evil.com', '/%0a/evil.com'.replace('%0a', '\n')])
		test(`${JSON.stringify(evil)} is ignored: /account instead`, async () => {
			const account = await signUp(t)
			const browser = new PageBrowser(t)
			const done = await browser.signIn(account.email, PASSWORD, `?return_to=${encodeURIComponent(evil)}`)
			expect(done.status).toBe(303)
			expect(done.location).toBe('/account')
			// Nor does a live session's redirect follow it.
			const again = await browser.get(`/sign-in?return_to=${encodeURIComponent(evil)}`)
			expect(again.location).toBe('/account')
		})

	test('a signed-out browser on /account goes to /sign-in and back', async () => {
		const browser = new PageBrowser(t)
		const away = await browser.get('/account')
		expect(away.status).toBe(303)
		expect(away.location).toBe('/sign-in?return_to=%2Faccount')
		const account = await signUp(t)
		const back = await browser.signIn(account.email, PASSWORD, '?return_to=%2Faccount')
		expect(back.location).toBe('/account')
	})
})

describe('cross-site requests', () => {
	test('a form posted without the browser’s token, or with another, is refused (403) and shown again with a new token', async () => {
		const account = await signUp(t)
		const stranger = new PageBrowser(t)
		const missing = await stranger.post('/sign-in', { email: account.email, password: PASSWORD })
		expect(missing.status).toBe(403)
		expect(missing.html).toContain('This form has expired or was opened in another window. Please submit it again.')
		expect(missing.html).toContain(`value="${account.email}"`)
		expect(missing.setCookies.some((c) => c.name === SESSION)).toBe(false)

		const browser = new PageBrowser(t)
		await browser.get('/sign-in')
		const wrong = await browser.post('/sign-in', { csrf: 'A'.repeat(43), email: account.email, password: PASSWORD })
		expect(wrong.status).toBe(403)
		expect(wrong.setCookies.some((c) => c.name === SESSION)).toBe(false)
		// The form shown again posts.
		const retried = await browser.post('/sign-in', { csrf: PageBrowser.field(wrong.html, 'csrf'), email: account.email, password: PASSWORD })
		expect(retried.status).toBe(303)
	})

	test('a cross-site Sec-Fetch-Site or a foreign Origin is refused with a page saying so (403), token or not', async () => {
		const account = await signUp(t)
		const foreign: Record<string, string>[] = [
			{ 'sec-fetch-site': 'cross-site' },
			{ 'sec-fetch-site': 'same-site' },
			{ origin: 'https://evil.example' },
			{ origin: 'null' },
			{ 'sec-fetch-site': '', origin: 'http://localhost.evil.example' },
		]
		for (const headers of foreign) {
			const browser = new PageBrowser(t)
			const form = await browser.get('/sign-in')
			const page = await browser.post('/sign-in', { csrf: PageBrowser.field(form.html, 'csrf'), email: account.email, password: PASSWORD }, headers)
			expect(page.status).toBe(403)
			expect(page.html).toContain('This request came from another website, so it was refused to protect your account.')
			expect(page.setCookies.some((c) => c.name === SESSION)).toBe(false)
		}
	})

	test('a form from this origin, or from a browser that sends neither header, goes through', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		const form = await browser.get('/sign-in')
		const page = await browser.post('/sign-in', { csrf: PageBrowser.field(form.html, 'csrf'), email: account.email, password: PASSWORD }, { origin: '', 'sec-fetch-site': '' })
		expect(page.status).toBe(303)
	})

	test('signing out needs the token too', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		await browser.signIn(account.email)
		const refused = await browser.post('/sign-out', { csrf: 'B'.repeat(43) })
		expect(refused.status).toBe(403)
		expect((await browserSessionRow(browser))?.revokedAt).toBeNull()
		const crossSite = await browser.post('/sign-out', { csrf: browser.cookies.get(CSRF) ?? '' }, { 'sec-fetch-site': 'cross-site' })
		expect(crossSite.status).toBe(403)
		expect((await browserSessionRow(browser))?.revokedAt).toBeNull()
	})
})

describe('the second factor', () => {
	test('a password of an account with TOTP asks for the code, then the right code starts an aal2 session', async () => {
		const account = await signUp(t)
		const { secret } = await enrollTotp(t, account)
		const browser = new PageBrowser(t)
		const step = await browser.signIn(account.email)
		expect(step.status).toBe(200)
		expect(step.html).toContain('Enter your verification code')
		expect(step.html).toContain(`Signing in as ${account.email}.`)
		expect(step.html).toContain('<label for="code">Verification or recovery code</label>')
		expect(step.setCookies.some((c) => c.name === SESSION)).toBe(false)
		const mfaToken = PageBrowser.field(step.html, 'mfaToken')
		const csrf = PageBrowser.field(step.html, 'csrf')

		const wrong = await browser.post('/sign-in', { csrf, mfaToken, email: account.email, code: '000000' === totpCode(secret) ? '111111' : '000000' })
		expect(wrong.status).toBe(401)
		expect(wrong.html).toContain('That code is not right, or it was used already. Check it and try again.')
		expect(PageBrowser.field(wrong.html, 'mfaToken')).toBe(mfaToken)

		await awayFromStepBoundary()
		const done = await browser.post('/sign-in', { csrf, mfaToken, email: account.email, code: totpCode(secret, 1) })
		expect(done.status).toBe(303)
		expect(done.location).toBe('/account')
		const row = await browserSessionRow(browser)
		expect(row).toMatchObject({ userId: account.id, aal: 'aal2', amr: ['pwd', 'otp', 'mfa'] })
	})

	test('a recovery code finishes it too, and a spent half sign-in asks for the password again', async () => {
		const account = await signUp(t)
		const { recoveryCodes } = await enrollTotp(t, account)
		const browser = new PageBrowser(t)
		const step = await browser.signIn(account.email)
		const mfaToken = PageBrowser.field(step.html, 'mfaToken')
		const csrf = PageBrowser.field(step.html, 'csrf')
		const done = await browser.post('/sign-in', { csrf, mfaToken, email: account.email, code: ` ${(recoveryCodes[0] ?? '').toUpperCase()} ` })
		expect(done.status).toBe(303)
		expect((await browserSessionRow(browser))?.aal).toBe('aal2')

		const replay = await browser.post('/sign-in', { csrf, mfaToken, email: account.email, code: recoveryCodes[1] ?? '' })
		expect(replay.status).toBe(401)
		expect(replay.html).toContain('Your sign-in took too long or had too many wrong codes. Enter your password again.')
		expect(replay.html).toContain('<input id="password"')
		expect(replay.html).toContain(`value="${account.email}"`)
	})

	test('an empty code is a sentence (422)', async () => {
		const account = await signUp(t)
		await enrollTotp(t, account)
		const browser = new PageBrowser(t)
		const step = await browser.signIn(account.email)
		const page = await browser.post('/sign-in', { csrf: PageBrowser.field(step.html, 'csrf'), mfaToken: PageBrowser.field(step.html, 'mfaToken'), email: account.email, code: '  ' })
		expect(page.status).toBe(422)
		expect(page.html).toContain('Enter the code from your authenticator app, or a recovery code.')
	})
})

describe('ending the browser session', () => {
	test('signing out revokes the session, removes the cookie and says so', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		await browser.signIn(account.email)
		const row = await browserSessionRow(browser)
		const confirm = await browser.get('/sign-out')
		expect(confirm.status).toBe(200)
		expect(confirm.html).toContain(`You are signed in as ${account.email}.`)
		const out = await browser.post('/sign-out', { csrf: PageBrowser.field(confirm.html, 'csrf') })
		expect(out.status).toBe(303)
		expect(out.location).toBe('/sign-out')
		expect(out.setCookies.find((c) => c.name === SESSION)?.attributes['max-age']).toBe('0')
		expect((await sessionRow(row?.id ?? ''))?.revokedAt).not.toBeNull()
		const after = await browser.get('/sign-out')
		expect(after.html).toContain('You are signed out')
		expect((await browser.get('/account')).status).toBe(303)
	})

	test('revoking the session through the API ends the browser session', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		await browser.signIn(account.email)
		const row = await browserSessionRow(browser)
		expect((await browser.get('/account')).status).toBe(200)
		const revoked = await t.call('DELETE', `/api/users/me/sessions/${row?.id}`, { token: account.accessToken })
		expect(revoked.status).toBe(200)
		const after = await browser.get('/account')
		expect(after.status).toBe(303)
		expect(after.location).toBe('/sign-in?return_to=%2Faccount')
		expect((await t.app.decorator.browserSessions.current(new Request('http://localhost/', { headers: { cookie: `${SESSION}=${browser.cookies.get(SESSION)}` } })))).toBeUndefined()
	})

	test('a global logout through the API ends it too', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		await browser.signIn(account.email)
		const request = () => new Request('http://localhost/', { headers: { cookie: `${SESSION}=${browser.cookies.get(SESSION)}` } })
		const live = await t.app.decorator.browserSessions.current(request())
		expect(live).toMatchObject({ user: { id: account.id }, amr: ['pwd'], aal: 'aal1' })
		expect(live?.authenticatedAt).toBeInstanceOf(Date)
		const api = await login(t, account.email)
		expect((await t.call('POST', '/api/auth/logout', { json: { scope: 'global' }, token: api.accessToken })).status).toBe(200)
		expect(await t.app.decorator.browserSessions.current(request())).toBeUndefined()
		expect((await browser.get('/account')).status).toBe(303)
	})

	test('a password change through the API ends it (the changing session stays)', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		await browser.signIn(account.email)
		expect((await browser.get('/account')).status).toBe(200)
		const changed = await t.call('PUT', '/api/users/me', { json: { email: account.email, name: '', password: 'a brand new passphrase here', currentPassword: PASSWORD }, token: account.accessToken })
		expect(changed.status).toBe(200)
		expect((await browser.get('/account')).status).toBe(303)
		expect((await browser.signIn(account.email, 'a brand new passphrase here')).status).toBe(303)
	})

	test('a new sign-in in the same browser ends the one before', async () => {
		const first = await signUp(t)
		const second = await signUp(t)
		const browser = new PageBrowser(t)
		await browser.signIn(first.email)
		const before = await browserSessionRow(browser)
		await browser.signIn(second.email, PASSWORD, '?force=1')
		expect((await sessionRow(before?.id ?? ''))?.revokedAt).not.toBeNull()
		expect((await browser.get('/account')).html).toContain(`Signed in as ${second.email}`)
	})
})

describe('problems at the pages are pages', () => {
	test('a repeated parameter (400), another method (405) and a JSON body (415) answer HTML, never problem+json', async () => {
		const browser = new PageBrowser(t)
		const repeated = await browser.get('/sign-in?return_to=%2Fa&return_to=%2Fb')
		expect(repeated.status).toBe(400)
		expect(repeated.headers.get('content-type')).toBe('text/html; charset=utf-8')
		expect(repeated.headers.get('content-security-policy')).toBe(CSP)
		expect(repeated.html).toContain('The request could not be read. Go back and try again.')
		const put = await browser.request('PUT', '/account')
		expect(put.status).toBe(405)
		expect(put.headers.get('allow')).toBe('GET')
		expect(put.html).toContain('This page cannot be used that way.')
		const json = await t.app.handle(
			new Request('http://localhost/sign-in', { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/html' }, body: '{}' }),
		)
		expect(json.status).toBe(415)
		expect(json.headers.get('content-type')).toBe('text/html; charset=utf-8')
	})

	test('PAGE_PATHS, assembled from the page files, is exactly the paths the pages answer', () => {
		const hidden = (route: (typeof t.app.routes)[number]) => (route.hooks?.detail as { hide?: boolean } | undefined)?.hide === true
		// Every hidden route outside the API (held to its document by docs.openapi.test.ts) and the console (its page and
		// files, docs/console.md) is a page, and every page path a route.
		expect([...new Set(t.app.routes.filter((route) => hidden(route) && route.path !== '/*' && !route.path.startsWith('/api/') && !isConsolePath(route.path)).map((route) => route.path))].sort()).toEqual([...PAGE_PATHS].sort())
	})

	test('the API next to the pages still answers problem+json', async () => {
		const res = await t.call('GET', '/api/nothing-here')
		expect(res.status).toBe(404)
		expect(res.headers.get('content-type')).toBe('application/problem+json')
	})
})

describe('limits and lockout, as the API’s', () => {
	test('the lockout counts the pages’ wrong passwords with the API’s, and the page says how long to wait (429)', async () => {
		const db = await createTestDatabase()
		const locked = await startTestApp({ LOCKOUT_THRESHOLD: '3', LOCKOUT_WINDOW_SECONDS: '900', LOCKOUT_SECONDS: '900' }, db)
		try {
			const account = await signUp(locked)
			expect((await locked.call('POST', '/api/auth/login', { json: { email: account.email, password: 'wrong password one' } })).status).toBe(401)
			const browser = new PageBrowser(locked)
			expect((await browser.signIn(account.email, 'wrong password two')).status).toBe(401)
			expect((await browser.signIn(account.email, 'wrong password three')).status).toBe(401)
			const page = await browser.signIn(account.email, PASSWORD)
			expect(page.status).toBe(429)
			expect(Number(page.headers.get('retry-after'))).toBeGreaterThan(890)
			expect(page.html).toContain('Too many failed attempts for this account. Try again in 15 minutes.')
			expect(page.html).toContain(`value="${account.email}"`)
			expect((await locked.call('POST', '/api/auth/login', { json: { email: account.email, password: PASSWORD } })).status).toBe(429)
		} finally {
			await locked.close()
			await db.drop()
		}
	})

	test('POST /sign-in spends the /auth budget of the client address with POST /api/auth/login (429, a page)', async () => {
		const db = await createTestDatabase()
		const limited = await startTestApp({ RATE_LIMIT_MAX: '100', AUTH_RATE_LIMIT_MAX: '3' }, db)
		try {
			const browser = new PageBrowser(limited)
			const form = await browser.get('/sign-in?return_to=%2Faccount')
			const csrf = PageBrowser.field(form.html, 'csrf')
			const email = uniqueEmail('budget')
			expect((await limited.call('POST', '/api/auth/login', { json: { email, password: 'whatever it is' } })).status).toBe(401)
			expect((await browser.post('/sign-in?return_to=%2Faccount', { csrf, email, password: 'whatever it is' })).status).toBe(401)
			expect((await browser.post('/sign-in?return_to=%2Faccount', { csrf, email, password: 'whatever it is' })).status).toBe(401)
			const refused = await browser.post('/sign-in?return_to=%2Faccount', { csrf, email, password: 'whatever it is' })
			expect(refused.status).toBe(429)
			expect(refused.headers.get('content-type')).toBe('text/html; charset=utf-8')
			expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
			expect(refused.html).toMatch(/Too many attempts from your network\. Try again in \d+ (seconds|minutes?)\./)
			expect(PageBrowser.decoded(refused.html)).toContain('action="/sign-in?return_to=%2Faccount"')
			// Reading the page costs nothing of that budget.
			expect((await browser.get('/sign-in')).status).toBe(200)
			expect((await limited.call('POST', '/api/auth/login', { json: { email, password: 'whatever it is' } })).status).toBe(429)
		} finally {
			await limited.close()
			await db.drop()
		}
	})

	test('an unverified address under EMAIL_VERIFICATION=required is told to confirm it first (403)', async () => {
		const db = await createTestDatabase()
		const strict = await startTestApp({ EMAIL_VERIFICATION: 'required' }, db)
		try {
			const email = uniqueEmail('unverified')
			expect((await strict.call('POST', '/api/users', { json: { email, password: PASSWORD, name: 'Unverified' } })).status).toBe(201)
			const page = await new PageBrowser(strict).signIn(email)
			expect(page.status).toBe(403)
			expect(page.html).toContain('Confirm your email address first')
		} finally {
			await strict.close()
			await db.drop()
		}
	})
})

describe('PAGES_DIR', () => {
	test('adds a language, replaces a template and a text, and adds to the stylesheet', async () => {
		const dir = mkdtempSync(join(tmpdir(), 'latchkey-pages-'))
		mkdirSync(join(dir, 'locales'))
		mkdirSync(join(dir, 'templates'))
		writeFileSync(join(dir, 'locales', 'de.json'), JSON.stringify({ signIn: { heading: 'Bei {{appName}} anmelden', email: 'E-Mail-Adresse' } }))
		writeFileSync(join(dir, 'locales', 'en.json'), JSON.stringify({ signIn: { submit: 'Continue' } }))
		writeFileSync(join(dir, 'templates', 'account.mustache'), '<h1>Hello {{signedInAs}}</h1><p class="custom">{{t.account.signOut}}</p>')
		writeFileSync(join(dir, 'styles.css'), '.custom { color: rebeccapurple; }')
		const db = await createTestDatabase()
		const renderer = new PageRenderer({ appName: 'Acme', dir, brandColor: '#ffcc00', brandLogoUrl: 'https://cdn.acme.test/logo.svg' })
		const custom = await startTestApp({}, db, { pageRenderer: renderer })
		try {
			const browser = new PageBrowser(custom)
			const german = await browser.get('/sign-in?ui_locales=fr%20de')
			expect(german.html).toContain('<html lang="de" dir="ltr">')
			expect(german.html).toContain('<h1>Bei Acme anmelden</h1>')
			expect(german.html).toContain('<label for="email">E-Mail-Adresse</label>')
			// What de.json does not say comes from en (with PAGES_DIR's own en.json laid over it).
			expect(german.html).toContain('<button type="submit">Continue</button>')
			expect((await browser.get('/sign-in', { 'accept-language': 'de-CH, en;q=0.5' })).html).toContain('<html lang="de"')
			expect((await browser.get('/sign-in', { 'accept-language': 'fr' })).html).toContain('<html lang="en"')
			expect((await browser.get('/sign-in?ui_locales=en', { 'accept-language': 'de' })).html).toContain('<html lang="en"')

			const css = await (await custom.app.handle(new Request('http://localhost/pages/styles.css'))).text()
			expect(css).toContain('--brand: #1d4ed8')
			expect(css.trimEnd().endsWith('.custom { color: rebeccapurple; }')).toBe(true)
			const theme = await (await custom.app.handle(new Request('http://localhost/pages/theme.css'))).text()
			expect(theme).toContain('--brand: #ffcc00;')
			// Yellow takes black text.
			expect(theme).toContain('--on-brand: #000000;')
			expect(german.headers.get('content-security-policy')).toContain("img-src 'self' data: https://cdn.acme.test;")
			expect(german.html).toContain('<img class="logo" src="https:&#x2F;&#x2F;cdn.acme.test&#x2F;logo.svg" alt="Acme">')

			const account = await signUp(custom)
			await browser.signIn(account.email)
			const landing = await browser.get('/account')
			expect(landing.html).toContain(`<h1>Hello Signed in as ${account.email}</h1><p class="custom">Sign out</p>`)
			expect(landing.html).toContain('<title>Your account – Acme</title>')
		} finally {
			await custom.close()
			await db.drop()
		}
	})

	test('replaces the sign-up page and the mail pages’ texts: the template keeps its form, problems and fields; a language of its own', async () => {
		const dir = mkdtempSync(join(tmpdir(), 'latchkey-pages-'))
		mkdirSync(join(dir, 'locales'))
		mkdirSync(join(dir, 'templates'))
		// As the pages-only guide says: the built-in template copied, then a line added.
		const terms = '<p class="terms">By creating an account you accept <a href="https://acme.test/terms">our terms</a>.</p>'
		const builtIn = readFileSync(join(import.meta.dir, '..', 'src', 'pages', 'templates', 'sign-up.mustache'), 'utf8')
		writeFileSync(join(dir, 'templates', 'sign-up.mustache'), builtIn.replace('{{> error-summary}}\n', `{{> error-summary}}\n${terms}\n`))
		writeFileSync(
			join(dir, 'locales', 'en.json'),
			JSON.stringify({
				signUp: { heading: 'Join {{appName}}', submit: 'Join' },
				recovery: { submit: 'Email me a link' },
				emailVerification: { submit: 'Yes, this is my address' },
				problem: { 'email-taken': 'That address has an account already.' },
			}),
		)
		writeFileSync(join(dir, 'locales', 'de.json'), JSON.stringify({ signUp: { heading: 'Bei {{appName}} registrieren' }, passwordReset: { heading: 'Neues Passwort' } }))
		const db = await createTestDatabase()
		const custom = await startTestApp({}, db, { pageRenderer: new PageRenderer({ appName: 'Acme', dir }) })
		try {
			const browser = new PageBrowser(custom)
			const signUpPage = await browser.get('/sign-up')
			expect(signUpPage.status).toBe(200)
			expect(signUpPage.html).toContain('<h1>Join Acme</h1>')
			expect(PageBrowser.decoded(signUpPage.html)).toContain(terms)
			expect(signUpPage.html).toContain('<button type="submit">Join</button>')
			// What the replaced template keeps works as built in: the form's token, a problem in the summary, the field marked.
			const taken = await signUp(custom)
			const refused = await browser.post('/sign-up', { csrf: PageBrowser.field(signUpPage.html, 'csrf'), email: taken.email, password: PASSWORD })
			expect(refused.status).toBe(409)
			expect(refused.html).toContain('<p>That address has an account already.</p>')
			expect(refused.html).toMatch(/<input id="email" [^>]*aria-invalid="true"/)
			expect(PageBrowser.decoded(refused.html)).toContain(terms)
			const created = await browser.post('/sign-up', { csrf: PageBrowser.field(refused.html, 'csrf'), email: uniqueEmail('pages-dir'), password: PASSWORD })
			expect(created.status).toBe(200)
			expect(created.html).toContain('Check your email')
			expect(created.html).toContain('<button type="submit">Yes, this is my address</button>')

			expect((await browser.get('/recovery')).html).toContain('<button type="submit">Email me a link</button>')
			expect((await browser.get('/email-verification')).html).toContain('<button type="submit">Yes, this is my address</button>')
			// German where de.json says it, English (with en.json's changes) where it does not.
			const german = await browser.get('/sign-up?ui_locales=de')
			expect(german.html).toContain('<html lang="de" dir="ltr">')
			expect(german.html).toContain('<h1>Bei Acme registrieren</h1>')
			expect(german.html).toContain('<button type="submit">Join</button>')
			expect((await browser.get('/password-reset', { 'accept-language': 'de' })).html).toContain('<h1>Neues Passwort</h1>')
		} finally {
			await custom.close()
			await db.drop()
		}
	})

	test('a broken template or catalogue stops the start, naming the file', () => {
		const dir = mkdtempSync(join(tmpdir(), 'latchkey-pages-'))
		mkdirSync(join(dir, 'templates'))
		writeFileSync(join(dir, 'templates', 'sign-in.mustache'), '{{#open}} never closed')
		expect(() => new PageRenderer({ appName: 'Acme', dir })).toThrow(/sign-in\.mustache/)
		const other = mkdtempSync(join(tmpdir(), 'latchkey-pages-'))
		mkdirSync(join(other, 'locales'))
		writeFileSync(join(other, 'locales', 'de.json'), '{"signIn": {"heading": 3}}')
		expect(() => new PageRenderer({ appName: 'Acme', dir: other })).toThrow(/locales\/de\.json/)
		expect(() => new PageRenderer({ appName: 'Acme', dir: join(other, 'missing') })).toThrow(/not a folder/)
	})
})
