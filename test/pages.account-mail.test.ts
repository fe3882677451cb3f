/**
 * The pages around an account's mail, through HTTP as a browser sends their forms: /sign-up, /recovery,
 * /password-reset and /email-verification. Each calls the service its API route calls (POST /users,
 * /auth/recovery-requests, /auth/password-resets, /auth/verification-requests, /auth/email-verifications),
 * so the rules are the API's: one answer whatever the address, the resend interval, single-use proofs, the
 * password policy, the /auth budget. The link's token is posted here as /pages/link-token.js puts it in the
 * form (the script itself runs in Chromium in pages.account-mail.browser.ts).
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { and, eq } from 'drizzle-orm'
import { auditEvents, emailTokens, users } from '../src/db/schema'
import { startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { login, PASSWORD, signUp, uniqueEmail } from './support/fixtures'
import { proofOf } from './support/mail'
import { PageBrowser, type PageResult } from './support/pages'
import { mailsTo, waitForMails } from './support/ways-in'

setDefaultTimeout(60_000)

const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
const NEW_PASSWORD = 'a brand new passphrase'
const RETURN_TO = '/oauth2/authorize?client_id=some-app'

let database: TestDatabase
let t: TestApp
beforeAll(async () => {
	database = await createTestDatabase()
	// No APP_URL: the mails link to these pages. MAIL_RESEND_SECONDS stays at its default (60).
	t = await startTestApp({}, database)
})
afterAll(async () => {
	await t?.close()
	await database?.drop()
})

const csrfOf = (page: PageResult) => PageBrowser.field(page.html, 'csrf')
const decoded = (page: PageResult) => PageBrowser.decoded(page.html)
const userRow = async (email: string, app = t) => (await app.database.handle.db.select().from(users).where(eq(users.email, email)))[0]
/** The one mail of a kind to an address that `before` mails preceded, waited for. */
const nextMail = async (email: string, kind: string, before = 0, app = t) => ((await waitForMails(app, email, kind, before + 1)).slice(before)[0] as { text: string })
/** The sentence of the page's error summary. */
const errorOf = (page: PageResult) => /<div class="error-summary"[^>]*>\s*<h2[^>]*>[^<]*<\/h2>\s*<p>([^<]*)<\/p>/.exec(decoded(page))?.[1]

/** Opens a page and posts its form with the page's token. */
async function submit(browser: PageBrowser, path: string, form: Record<string, string>, formPath = path) {
	const page = await browser.get(formPath)
	expect(page.status).toBe(200)
	return browser.post(path, { csrf: csrfOf(page), ...form })
}

describe('the sign-in page links to the others', () => {
	test('“Forgot your password?” and “Create an account” keep where the sign-in goes next', async () => {
		const page = decoded(await new PageBrowser(t).get(`/sign-in?${new URLSearchParams({ return_to: RETURN_TO })}`))
		const query = new URLSearchParams({ return_to: RETURN_TO })
		expect(page).toContain(`<a href="/recovery?${query}">Forgot your password?</a>`)
		expect(page).toContain(`New here? <a href="/sign-up?${query}">Create an account</a>`)
	})
})

describe('/sign-up', () => {
	test('is a form under the pages’ policy: name (optional), email, a new password with its rule, and a form token', async () => {
		const page = await new PageBrowser(t).get('/sign-up')
		expect(page.status).toBe(200)
		expect(page.headers.get('content-security-policy')).toBe(CSP)
		expect(page.headers.get('cache-control')).toBe('no-store')
		const html = decoded(page)
		expect(html).toContain('<title>Create an account – Latchkey</title>')
		expect(html).toContain('<label for="name">Name <span class="optional">(optional)</span></label>')
		expect(html).toMatch(/<input id="email" name="email" type="email" autocomplete="username"[^>]* required/)
		expect(html).toContain('<p class="hint" id="password-hint">At least 8 characters.')
		expect(html).toMatch(/<input id="password" name="password" type="password" autocomplete="new-password" required maxlength="1024" aria-describedby="password-hint">/)
		expect(html).not.toMatch(/<script|<style|\sstyle=|\son[a-z]+="/i)
		expect(html).toContain('Already have an account? <a href="/sign-in">Sign in</a>')
		expect(csrfOf(page)).toBeTruthy()
	})

	test('creates the account as POST /users does, sends the verification mail, and the page takes its code', async () => {
		const browser = new PageBrowser(t)
		const email = uniqueEmail('page-sign-up')
		const query = `?${new URLSearchParams({ return_to: RETURN_TO })}`
		const created = await submit(browser, `/sign-up${query}`, { name: 'Ada Lovelace', email: `  ${email.toUpperCase()} `, password: PASSWORD })
		expect(created.status).toBe(200)
		const html = decoded(created)
		expect(html).toContain('<h1>Check your email</h1>')
		expect(html).toContain(`We sent an email to ${email}. Follow its link, or enter its 6-digit code here. You can also sign in now and confirm later.`)
		expect(html).toContain(`<form method="post" action="/email-verification${query}" data-link-token>`)
		expect(html).toMatch(new RegExp(`<input id="email" name="email" type="email"[^>]* value="${email}"`))
		expect(html).toMatch(/<input id="code" [^>]* autofocus>/)
		expect(html).toContain(`<a href="/sign-in${query}">Sign in</a>`)
		// The account, as the API makes it: its name, not yet verified, its sign-up audited.
		const row = await userRow(email)
		expect(row).toMatchObject({ name: 'Ada Lovelace', role: 'user', emailVerifiedAt: null, status: 'active' })
		const [audited] = await t.database.handle.db.select().from(auditEvents).where(and(eq(auditEvents.type, 'user.signed-up'), eq(auditEvents.subjectId, row?.id ?? '')))
		expect(audited).toBeDefined()
		// The mail links to the pages (no APP_URL) and carries the code the page asks for.
		const mail = await nextMail(email, 'verification')
		const { link, code } = proofOf(mail)
		expect(link).toStartWith('http://localhost/email-verification#token=')
		const confirmed = await browser.post(`/email-verification${query}`, { csrf: csrfOf(created), email, code })
		expect(confirmed.status).toBe(200)
		const done = decoded(confirmed)
		expect(done).toContain('<h1>Your email address is confirmed</h1>')
		expect(done).toContain(`${email} is confirmed for your Latchkey account.`)
		expect(done).toContain(`<a class="button" href="/sign-in?${new URLSearchParams({ return_to: RETURN_TO, login_hint: email })}">Sign in</a>`)
		expect((await userRow(email))?.emailVerifiedAt).toBeInstanceOf(Date)
		// The sign-in page's own ending: the new account signs in and goes where it was going.
		const signedIn = await browser.signIn(email, PASSWORD, query)
		expect(signedIn.status).toBe(303)
		expect(signedIn.location).toBe(RETURN_TO)
	})

	test('every field’s problem at once (422), the fields marked and what was typed kept (never the password)', async () => {
		const browser = new PageBrowser(t)
		const refused = await submit(browser, '/sign-up', { name: 'n'.repeat(201), email: 'not an address', password: 'short' })
		expect(refused.status).toBe(422)
		expect(errorOf(refused)).toBe('Enter an email address, like name@example.com. The name is too long: use at most 200 characters. The password is too short: use at least 8 characters.')
		const html = decoded(refused)
		for (const field of ['name', 'email']) expect(html).toMatch(new RegExp(`<input id="${field}" [^>]*aria-invalid="true" aria-describedby="error-summary">`))
		expect(html).toContain('aria-describedby="password-hint error-summary" aria-invalid="true"')
		expect(html).toContain('value="not an address"')
		expect(html).not.toContain('value="short"')
		const common = await submit(browser, '/sign-up', { email: uniqueEmail(), password: 'password123' })
		expect(common.status).toBe(422)
		expect(errorOf(common)).toBe('This password is too common and easy to guess. Choose another.')
	})

	test('a taken address is said as POST /users says it (409), with the ways to sign in or recover', async () => {
		const taken = await signUp(t)
		const refused = await submit(new PageBrowser(t), '/sign-up', { email: taken.email, password: PASSWORD })
		expect(refused.status).toBe(409)
		expect(errorOf(refused)).toBe('An account with this email address already exists. Sign in, or reset your password if you have forgotten it.')
		expect(decoded(refused)).toMatch(/<input id="email" [^>]*aria-invalid="true"/)
	})

	test('a form without the browser’s token is shown again (403); another site’s is refused with a page (403); no account either way', async () => {
		const browser = new PageBrowser(t)
		await browser.get('/sign-up')
		const email = uniqueEmail('csrf-sign-up')
		const expired = await browser.post('/sign-up', { csrf: 'not-the-token', email, password: PASSWORD })
		expect(expired.status).toBe(403)
		expect(errorOf(expired)).toBe('This form has expired or was opened in another window. Please submit it again.')
		const form = await browser.get('/sign-up')
		const crossSite = await browser.post('/sign-up', { csrf: csrfOf(form), email, password: PASSWORD }, { 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' })
		expect(crossSite.status).toBe(403)
		expect(crossSite.html).toContain('This request came from another website')
		expect(await userRow(email)).toBeUndefined()
	})
})

describe('/recovery', () => {
	test('the same page whatever the address, a mail only to an account, and no second one within MAIL_RESEND_SECONDS', async () => {
		const account = await signUp(t)
		const unknown = uniqueEmail('nobody')
		const browser = new PageBrowser(t)
		const known = await submit(browser, '/recovery', { email: account.email })
		const other = await submit(browser, '/recovery', { email: unknown })
		expect(known.status).toBe(200)
		expect(other.status).toBe(200)
		const scrub = (page: PageResult, email: string) => decoded(page).replaceAll(email, 'EMAIL').replace(/name="csrf" value="[^"]*"/g, '')
		expect(scrub(known, account.email)).toBe(scrub(other, unknown))
		expect(decoded(known)).toContain(`If ${account.email} belongs to an account, we sent it an email. Follow its link, or enter its 6-digit code here with your new password.`)
		// The next page is the new password's, the address filled in and the code's field focused.
		expect(decoded(known)).toContain('<form method="post" action="/password-reset" data-link-token>')
		expect(decoded(known)).toMatch(/<input id="code" [^>]* autofocus>/)
		const mail = await nextMail(account.email, 'recovery')
		expect(proofOf(mail).link).toStartWith('http://localhost/password-reset#token=')
		await submit(browser, '/recovery', { email: account.email })
		// The second request went through the same queue; still one mail.
		await Bun.sleep(300)
		expect(mailsTo(t, account.email, 'recovery')).toHaveLength(1)
		expect(mailsTo(t, unknown)).toHaveLength(0)
	})

	test('an address that is not one is a sentence (422); no token, a 403 and the form again', async () => {
		const browser = new PageBrowser(t)
		const refused = await submit(browser, '/recovery', { email: 'nope' })
		expect(refused.status).toBe(422)
		expect(errorOf(refused)).toBe('Enter an email address, like name@example.com.')
		expect(decoded(refused)).toMatch(/<input id="email" [^>]*aria-invalid="true">/)
		const expired = await browser.post('/recovery', { csrf: 'stale', email: uniqueEmail() })
		expect(expired.status).toBe(403)
		expect(errorOf(expired)).toBe('This form has expired or was opened in another window. Please submit it again.')
	})
})

describe('/password-reset', () => {
	test('is the code’s fields, a new password, the link token’s hidden field and its script (no inline script)', async () => {
		const page = await new PageBrowser(t).get('/password-reset')
		expect(page.status).toBe(200)
		expect(page.headers.get('content-security-policy')).toBe(CSP)
		const html = decoded(page)
		expect(html).toContain('<input type="hidden" name="token" value="">')
		expect(html).toContain('<fieldset id="code-proof">')
		expect(html).toMatch(/<input id="password" name="password" type="password" autocomplete="new-password"/)
		expect([...html.matchAll(/<script[^>]*>/gi)].map(([tag]) => tag)).toEqual(['<script src="/pages/link-token.js" defer>'])
		const script = await t.app.handle(new Request('http://localhost/pages/link-token.js'))
		expect(script.status).toBe(200)
		expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8')
		expect(await script.text()).toContain('history.replaceState')
	})

	test('without script, the mail’s code sets the password: every session ends, the old password no longer signs in', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		expect((await browser.signIn(account.email)).status).toBe(303)
		const sent = await submit(browser, '/recovery', { email: account.email })
		const { code } = proofOf(await nextMail(account.email, 'recovery'))
		const reset = await browser.post('/password-reset', { csrf: csrfOf(sent), email: account.email, code, password: NEW_PASSWORD })
		expect(reset.status).toBe(200)
		const html = decoded(reset)
		expect(html).toContain('<h1>Your password is set</h1>')
		expect(html).toContain(`<a class="button" href="/sign-in?${new URLSearchParams({ login_hint: account.email })}">Sign in</a>`)
		// As POST /auth/password-resets: the API's session and the browser's are gone, the new password works.
		expect((await t.call('GET', '/api/users/me', { token: account.accessToken })).status).toBe(401)
		expect((await browser.get('/account')).status).toBe(303)
		expect((await t.call('POST', '/api/auth/login', { json: { email: account.email, password: PASSWORD } })).status).toBe(401)
		expect((await login(t, account.email, NEW_PASSWORD)).email).toBe(account.email)
		// The code worked once.
		const again = await browser.post('/password-reset', { csrf: csrfOf(sent), email: account.email, code, password: 'yet another passphrase' })
		expect(again.status).toBe(400)
		expect(errorOf(again)).toBe('That link or code is not right, has expired or was replaced by a newer one. Check the email, or ask for a new one.')
	})

	test('the link’s token, as its script posts it, sets the password too; a spent or expired one is a sentence', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		await submit(browser, '/recovery', { email: account.email })
		const { token } = proofOf(await nextMail(account.email, 'recovery'))
		const done = await submit(browser, '/password-reset', { token, password: NEW_PASSWORD })
		expect(done.status).toBe(200)
		expect(decoded(done)).toContain('<a class="button" href="/sign-in">Sign in</a>')
		expect((await login(t, account.email, NEW_PASSWORD)).email).toBe(account.email)
		const spent = await submit(browser, '/password-reset', { token, password: NEW_PASSWORD })
		expect(spent.status).toBe(400)
		expect(decoded(spent)).toMatch(/<input id="code" [^>]*aria-invalid="true"/)
		// A genuine token past its hour: the API's code-expired, and the way to a new mail.
		const other = await signUp(t)
		await submit(browser, '/recovery', { email: other.email })
		const fresh = proofOf(await nextMail(other.email, 'recovery'))
		await t.database.handle.db.update(emailTokens).set({ expiresAt: new Date(Date.now() - 1000) }).where(and(eq(emailTokens.email, other.email), eq(emailTokens.purpose, 'recovery')))
		const expired = await submit(browser, '/password-reset', { token: fresh.token, password: 'yet another passphrase' })
		expect(expired.status).toBe(400)
		expect(errorOf(expired)).toBe('This link has expired. Ask for a new email.')
		expect(decoded(expired)).toContain('<a href="/recovery">Send me a new email</a>')
	})

	test('the password policy (422) and a missing code (422) are sentences; the proof is not spent by them', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		await submit(browser, '/recovery', { email: account.email })
		const { code } = proofOf(await nextMail(account.email, 'recovery'))
		const weak = await submit(browser, '/password-reset', { email: account.email, code, password: 'short' })
		expect(weak.status).toBe(422)
		expect(errorOf(weak)).toBe('The password is too short: use at least 8 characters.')
		expect(decoded(weak)).toContain('aria-describedby="password-hint error-summary" aria-invalid="true"')
		expect(decoded(weak)).toContain(`value="${code}"`)
		const missing = await submit(browser, '/password-reset', { email: account.email, code: '', password: 'short' })
		expect(missing.status).toBe(422)
		expect(errorOf(missing)).toBe('Enter your email address and the 6-digit code from the email. The password is too short: use at least 8 characters.')
		const done = await submit(browser, '/password-reset', { email: account.email, code, password: NEW_PASSWORD })
		expect(done.status).toBe(200)
	})

	test('wrong codes count as the API’s do: the fifth voids the code, ten in a day refuse the address (429, how long to wait)', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		await submit(browser, '/recovery', { email: account.email })
		const { code } = proofOf(await nextMail(account.email, 'recovery'))
		const wrong = code === '000000' ? '111111' : '000000'
		for (let i = 0; i < 5; i++) expect((await submit(browser, '/password-reset', { email: account.email, code: wrong, password: NEW_PASSWORD })).status).toBe(400)
		// Voided by the fifth wrong try, as POST /api/auth/password-resets says.
		expect((await t.call('POST', '/api/auth/password-resets', { json: { email: account.email, code, password: NEW_PASSWORD } })).status).toBe(400)
		for (let i = 0; i < 4; i++) await t.call('POST', '/api/auth/password-resets', { json: { email: account.email, code: wrong, password: NEW_PASSWORD } })
		const refused = await submit(browser, '/password-reset', { email: account.email, code: wrong, password: NEW_PASSWORD })
		expect(refused.status).toBe(429)
		expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
		expect(errorOf(refused)).toMatch(/^Too many wrong codes\. Try again in \d+ hours\.$/)
	})
})

describe('/email-verification', () => {
	test('the link’s token confirms the address (as its script posts it), ending every session as the API does, then sign-in', async () => {
		const email = uniqueEmail('verify-link')
		expect((await t.call('POST', '/api/users', { json: { email, password: PASSWORD } })).status).toBe(201)
		const { token } = proofOf(await nextMail(email, 'verification'))
		const browser = new PageBrowser(t)
		expect((await browser.signIn(email)).status).toBe(303)
		const page = await browser.get('/email-verification')
		expect(page.status).toBe(200)
		expect(decoded(page)).toContain('<h1>Confirm your email address</h1>')
		expect([...decoded(page).matchAll(/<script[^>]*>/gi)].map(([tag]) => tag)).toEqual(['<script src="/pages/link-token.js" defer>'])
		const confirmed = await browser.post('/email-verification', { csrf: csrfOf(page), token })
		expect(confirmed.status).toBe(200)
		expect(decoded(confirmed)).toContain(`<a class="button" href="/sign-in?${new URLSearchParams({ login_hint: email })}">Sign in</a>`)
		expect((await userRow(email))?.emailVerifiedAt).toBeInstanceOf(Date)
		// Whoever signed in before the address was proved could not read its mail: their sessions end (API.md).
		expect((await browser.get('/account')).status).toBe(303)
		const again = await browser.post('/email-verification', { csrf: csrfOf(page), token })
		expect(again.status).toBe(400)
		expect(errorOf(again)).toBe('That link or code is not right, has expired or was replaced by a newer one. Check the email, or ask for a new one.')
	})

	test('an email change is confirmed there too, and the next page is sign-in with the new address', async () => {
		const account = await signUp(t)
		const moved = uniqueEmail('moved')
		const changed = await t.call('PUT', '/api/users/me', { json: { email: moved, name: 'Test User', currentPassword: PASSWORD }, token: account.accessToken })
		expect(changed.status).toBe(200)
		const { token } = proofOf(await nextMail(moved, 'email-change'))
		const confirmed = await submit(new PageBrowser(t), '/email-verification', { token })
		expect(confirmed.status).toBe(200)
		expect(decoded(confirmed)).toContain(`${moved} is confirmed for your Latchkey account.`)
		expect(decoded(confirmed)).toContain(`<a class="button" href="/sign-in?${new URLSearchParams({ login_hint: moved })}">Sign in</a>`)
		expect((await userRow(moved))?.id).toBe(account.id)
	})

	test('an address another account took meanwhile is said (409), and the change is not applied', async () => {
		const account = await signUp(t)
		const moved = uniqueEmail('taken-meanwhile')
		expect((await t.call('PUT', '/api/users/me', { json: { email: moved, name: 'Test User', currentPassword: PASSWORD }, token: account.accessToken })).status).toBe(200)
		const { token } = proofOf(await nextMail(moved, 'email-change'))
		expect((await t.call('POST', '/api/users', { json: { email: moved, password: PASSWORD } })).status).toBe(201)
		const refused = await submit(new PageBrowser(t), '/email-verification', { token })
		expect(refused.status).toBe(409)
		expect(errorOf(refused)).toBe('Another account took this email address meanwhile, so your address was not changed.')
		expect((await userRow(account.email))?.id).toBe(account.id)
	})

	test('“Send me a new email”: the same answer for any address, a mail only to an unverified account', async () => {
		const email = uniqueEmail('verify-resend')
		expect((await t.call('POST', '/api/users', { json: { email, password: PASSWORD } })).status).toBe(201)
		await nextMail(email, 'verification')
		const verified = await signUp(t)
		const browser = new PageBrowser(t)
		const before = { unverified: mailsTo(t, email, 'verification').length, verified: mailsTo(t, verified.email, 'verification').length }
		const resent = await submit(browser, '/email-verification', { email: email.toUpperCase(), resend: '1' })
		expect(resent.status).toBe(200)
		expect(decoded(resent)).toContain(`If ${email} has an address to confirm, we sent it a new email.`)
		const unknown = await submit(browser, '/email-verification', { email: uniqueEmail('nobody'), resend: '1' })
		expect(unknown.status).toBe(200)
		await submit(browser, '/email-verification', { email: verified.email, resend: '1' })
		await Bun.sleep(300)
		expect(mailsTo(t, verified.email, 'verification')).toHaveLength(before.verified)
		// Within MAIL_RESEND_SECONDS of the sign-up's mail: nothing more was sent, the page said the same.
		expect(mailsTo(t, email, 'verification')).toHaveLength(before.unverified)
		const missing = await submit(browser, '/email-verification', { email, code: '12' })
		expect(missing.status).toBe(422)
		expect(errorOf(missing)).toBe('Enter your email address and the 6-digit code from the email.')
		const notAnAddress = await submit(browser, '/email-verification', { email: 'nope', resend: '1' })
		expect(notAnAddress.status).toBe(422)
		expect(errorOf(notAnAddress)).toBe('Enter an email address, like name@example.com.')
	})

	test('another site’s form is refused with a page (403), and nothing is confirmed', async () => {
		const email = uniqueEmail('verify-csrf')
		expect((await t.call('POST', '/api/users', { json: { email, password: PASSWORD } })).status).toBe(201)
		const { token } = proofOf(await nextMail(email, 'verification'))
		const browser = new PageBrowser(t)
		const page = await browser.get('/email-verification')
		const refused = await browser.post('/email-verification', { csrf: csrfOf(page), token }, { 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' })
		expect(refused.status).toBe(403)
		expect((await userRow(email))?.emailVerifiedAt).toBeNull()
	})
})

describe('settings', () => {
	test('SIGNUP_ENABLED=false: no link, /sign-up says so (404), a posted form is refused by the service (403)', async () => {
		const db = await createTestDatabase()
		const closed = await startTestApp({ SIGNUP_ENABLED: 'false' }, db)
		try {
			const browser = new PageBrowser(closed)
			expect(decoded(await browser.get('/sign-in'))).not.toContain('/sign-up')
			const page = await browser.get('/sign-up')
			expect(page.status).toBe(404)
			expect(errorOf(page)).toBe('New accounts cannot be made here. Ask an administrator for one.')
			const form = await browser.get('/sign-in')
			const email = uniqueEmail()
			const refused = await browser.post('/sign-up', { csrf: csrfOf(form), email, password: PASSWORD })
			expect(refused.status).toBe(403)
			expect(errorOf(refused)).toBe('New accounts cannot be made here. Ask an administrator for one.')
			expect(await userRow(email, closed)).toBeUndefined()
		} finally {
			await closed.close()
			await db.drop()
		}
	})

	test('EMAIL_VERIFICATION=off: the account is ready at once, the next page is sign-in with the address filled in', async () => {
		const db = await createTestDatabase()
		const off = await startTestApp({ EMAIL_VERIFICATION: 'off' }, db)
		try {
			const browser = new PageBrowser(off)
			const email = uniqueEmail('no-verification')
			const done = await submit(browser, '/sign-up', { email, password: PASSWORD })
			expect(done.status).toBe(200)
			expect(decoded(done)).toContain('<h1>Your account is ready</h1>')
			expect(decoded(done)).toContain(`<a class="button" href="/sign-in?${new URLSearchParams({ login_hint: email })}">Sign in</a>`)
			expect(mailsTo(off, email)).toHaveLength(0)
		} finally {
			await off.close()
			await db.drop()
		}
	})

	test('EMAIL_VERIFICATION=required: the page says to confirm first, and sign-in waits for it', async () => {
		const db = await createTestDatabase()
		const required = await startTestApp({ EMAIL_VERIFICATION: 'required' }, db)
		try {
			const browser = new PageBrowser(required)
			const email = uniqueEmail('verification-required')
			const next = await submit(browser, '/sign-up', { email, password: PASSWORD })
			expect(decoded(next)).toContain(`We sent an email to ${email}. Follow its link, or enter its 6-digit code here.</p>`)
			expect(decoded(next)).not.toContain('sign in now')
			expect((await browser.signIn(email)).status).toBe(403)
			const { code } = proofOf(await nextMail(email, 'verification', 0, required))
			expect((await browser.post('/email-verification', { csrf: csrfOf(next), email, code })).status).toBe(200)
			expect((await browser.signIn(email)).status).toBe(303)
		} finally {
			await required.close()
			await db.drop()
		}
	})

	test('the pages’ POSTs spend the /auth budget with the API’s routes (429, a page)', async () => {
		const db = await createTestDatabase()
		const limited = await startTestApp({ RATE_LIMIT_MAX: '100', AUTH_RATE_LIMIT_MAX: '4' }, db)
		try {
			const browser = new PageBrowser(limited)
			const form = await browser.get('/recovery')
			const csrf = csrfOf(form)
			expect((await limited.call('POST', '/api/auth/recovery-requests', { json: { email: uniqueEmail() } })).status).toBe(202)
			expect((await browser.post('/recovery', { csrf, email: uniqueEmail() })).status).toBe(200)
			expect((await browser.post('/sign-up', { csrf, email: 'nope', password: 'x' })).status).toBe(422)
			expect((await browser.post('/email-verification', { csrf, email: uniqueEmail(), resend: '1' })).status).toBe(200)
			const refused = await browser.post('/password-reset', { csrf, email: uniqueEmail(), code: '123456', password: NEW_PASSWORD })
			expect(refused.status).toBe(429)
			expect(refused.headers.get('content-type')).toBe('text/html; charset=utf-8')
			expect(refused.html).toMatch(/Too many attempts from your network\. Try again in \d+ (seconds|minutes?)\./)
			expect((await browser.get('/password-reset')).status).toBe(200)
		} finally {
			await limited.close()
			await db.drop()
		}
	})
})
