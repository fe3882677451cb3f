/**
 * The /sign-in page's other ways in, through HTTP as a browser without script sends them: a code by mail,
 * an identity provider (a real one: oidc-provider on a loopback port), and a passkey's answer (a software
 * authenticator; the button itself is driven in Chromium by pages.sign-in-ways.browser.ts). Each ends as the
 * password form does: the browser's session cookie and return_to, or the second factor when one is owed.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { digestOf } from '../src/crypto/opaque-tokens'
import { sessions, users } from '../src/db/schema'
import { startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { awayFromStepBoundary, enrollTotp, totpCode } from './support/factors'
import { signUp, uniqueEmail } from './support/fixtures'
import { FlowBrowser, TestOpenIdProvider } from './support/oidc-provider'
import { PageBrowser, type PageResult } from './support/pages'
import { SoftAuthenticator } from './support/soft-authenticator'
import { addPasskey, mailsTo, waitForMails } from './support/ways-in'

setDefaultTimeout(60_000)

const SESSION = '__Host-latchkey-session'
const FLOW = '__Host-latchkey-provider-flow'
const ORIGIN = 'http://localhost'
const RETURN_TO = '/oauth2/authorize?client_id=some-app'

let database: TestDatabase
let provider: TestOpenIdProvider
let t: TestApp
beforeAll(async () => {
	database = await createTestDatabase()
	provider = await TestOpenIdProvider.start(['http://localhost/api/auth/providers/test/callback'])
	// With APP_URL, REDIRECT_URLS names the app's frontend only: the pages' own return is admitted all the same.
	t = await startTestApp(
		{ APP_URL: 'http://frontend.test', OIDC_PROVIDERS: 'test', ...provider.settings('test'), MAIL_RESEND_SECONDS: '0', WEBAUTHN_RP_ID: 'localhost', WEBAUTHN_ORIGINS: ORIGIN },
		database,
	)
})
afterAll(async () => {
	await t?.close()
	await provider?.stop()
	await database?.drop()
})

const browserSession = async (browser: PageBrowser) => {
	const token = browser.cookies.get(SESSION)
	if (!token) return undefined
	return (await t.database.handle.db.select().from(sessions).where(eq(sessions.browserTokenHash, digestOf(token))))[0]
}
const csrfOf = (page: PageResult) => PageBrowser.field(page.html, 'csrf')
const codeIn = (mail: { text: string }) => /^(\d{6})$/m.exec(mail.text)?.[1] ?? ''
const withReturn = (path: string) => `${path}?${new URLSearchParams({ return_to: RETURN_TO })}`

describe('the sign-in page lists the other ways in', () => {
	test('a code by mail (a button of the password form), a passkey (hidden until its script shows it), each provider', async () => {
		const page = await new PageBrowser(t).get(withReturn('/sign-in'))
		const html = PageBrowser.decoded(page.html)
		expect(html).toContain(`<button type="submit" class="secondary" formaction="${withReturn('/sign-in/email-code')}" formnovalidate>Email me a sign-in code</button>`)
		expect(html).toContain('<div id="passkey" hidden>')
		expect(html).toContain(`<form method="post" action="${withReturn('/sign-in/passkey')}"`)
		expect(html).toContain(`<form method="post" action="${withReturn('/sign-in/provider')}">`)
		expect(html).toContain('<button type="submit" class="secondary" name="provider" value="test">Sign in with Test</button>')
		// Every form carries the browser's token.
		expect(html.match(/<form /g)?.length).toBe(3)
		expect(html.match(/name="csrf" value="[^"]+"/g)?.length).toBe(3)
	})

	test('the passkey script is a file of the pages, under the same policy', async () => {
		const script = await t.app.handle(new Request('http://localhost/pages/passkeys.js'))
		expect(script.status).toBe(200)
		expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8')
		const code = await script.text()
		expect(code).toContain('/api/auth/passkey/challenges')
		expect(code).toContain('navigator.credentials.get')
		// One script for every page's passkey: the account pages' enrolment is in it too, and the old paths are gone.
		expect(code).toContain('navigator.credentials.create')
		for (const old of ['/pages/sign-in.js', '/pages/account.js']) expect((await t.app.handle(new Request(`http://localhost${old}`))).status).toBe(404)
	})

	test('without providers and with EMAIL_CODE_SIGN_IN=false: neither button, and the code’s route is unknown', async () => {
		const bare = await startTestApp({ EMAIL_CODE_SIGN_IN: 'false' })
		try {
			const browser = new PageBrowser(bare)
			const page = await browser.get('/sign-in')
			expect(page.html).not.toContain('email-code')
			expect(page.html).not.toContain('name="provider"')
			// The section of other ways stays hidden: only the passkey's script may show it.
			expect(page.html).toContain('<section class="other-ways" id="other-ways" aria-labelledby="other-ways-title" hidden>')
			const refused = await browser.post('/sign-in/email-code', { csrf: csrfOf(page), email: 'ada@example.test' })
			expect(refused.status).toBe(404)
			expect(refused.html).toContain('This page does not exist.')
		} finally {
			await bare.close()
		}
	})
})

describe('"email me a code"', () => {
	/** The sign-in page, then its "Email me a code" with `email`. */
	async function askForCode(browser: PageBrowser, email: string) {
		const form = await browser.get(withReturn('/sign-in'))
		return browser.post(withReturn('/sign-in/email-code'), { csrf: csrfOf(form), email })
	}

	test('sends a code and asks for it; the code signs the browser in and goes on to return_to', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		const asked = await askForCode(browser, account.email)
		expect(asked.status).toBe(200)
		expect(asked.html).toContain('<h1>Check your email</h1>')
		expect(PageBrowser.decoded(asked.html)).toContain(`If ${account.email} belongs to an account, we sent it a 6-digit code.`)
		expect(asked.html).toMatch(/<input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code"[^>]* autofocus>/)
		expect(PageBrowser.decoded(asked.html)).toContain(`<form method="post" action="${withReturn('/sign-in/email-code')}">`)
		const [mail] = await waitForMails(t, account.email, 'sign-in', 1)
		const code = codeIn(mail as { text: string })
		expect(code).toMatch(/^\d{6}$/)

		const done = await browser.post(withReturn('/sign-in/email-code'), { csrf: csrfOf(asked), email: account.email, code: `${code.slice(0, 3)} ${code.slice(3)}` })
		expect(done.status).toBe(303)
		expect(done.location).toBe(RETURN_TO)
		const row = await browserSession(browser)
		expect(row).toMatchObject({ userId: account.id, amr: [], aal: 'aal1', revokedAt: null, clientId: 'some-app' })
		// The code worked once.
		const again = await browser.post(withReturn('/sign-in/email-code'), { csrf: csrfOf(asked), email: account.email, code })
		expect(again.status).toBe(400)
		expect(again.html).toContain('That code is not right, has expired or was used already.')
	})

	test('an unknown address gets the same page, and no mail', async () => {
		const account = await signUp(t)
		const nobody = uniqueEmail('nobody')
		const pages = []
		for (const email of [account.email, nobody]) {
			const browser = new PageBrowser(t)
			const page = await askForCode(browser, email)
			expect(page.status).toBe(200)
			pages.push(page.html.replaceAll(email, '').replaceAll(csrfOf(page), ''))
		}
		expect(pages[0]).toBe(pages[1] ?? '')
		await waitForMails(t, account.email, 'sign-in', 1)
		expect(mailsTo(t, nobody)).toEqual([])
	})

	test('a wrong code, a malformed one and no address are sentences on the page; "send a new code" sends another', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		const noAddress = await askForCode(browser, 'not an address')
		expect(noAddress.status).toBe(422)
		expect(noAddress.html).toContain('Enter your email address to get a sign-in code.')
		expect(noAddress.html).toContain('<h1>Sign in to Latchkey</h1>')

		const asked = await askForCode(browser, account.email)
		const [mail] = await waitForMails(t, account.email, 'sign-in', 1)
		const code = codeIn(mail as { text: string })
		const malformed = await browser.post(withReturn('/sign-in/email-code'), { csrf: csrfOf(asked), email: account.email, code: '12ab' })
		expect(malformed.status).toBe(422)
		expect(malformed.html).toContain('Enter the 6-digit code from the email.')
		const wrong = await browser.post(withReturn('/sign-in/email-code'), { csrf: csrfOf(asked), email: account.email, code: String((Number(code) + 1) % 1_000_000).padStart(6, '0') })
		expect(wrong.status).toBe(400)
		expect(wrong.html).toContain('That code is not right, has expired or was used already.')
		expect(wrong.html).toMatch(/<div class="error-summary" id="error-summary" role="alert"/)
		expect(wrong.html).toMatch(/<input id="code"[^>]* aria-invalid="true">/)
		expect(browser.cookies.has(SESSION)).toBe(false)

		const resent = await browser.post(withReturn('/sign-in/email-code'), { csrf: csrfOf(wrong), email: account.email, resend: '1' })
		expect(resent.status).toBe(200)
		const mails = await waitForMails(t, account.email, 'sign-in', 2)
		const done = await browser.post(withReturn('/sign-in/email-code'), { csrf: csrfOf(resent), email: account.email, code: codeIn(mails.at(-1) as { text: string }) })
		expect(done.status).toBe(303)
	})

	test('an account with a second factor is asked for it next, then signed in', async () => {
		// Proved before the factor is added: a code that proves an address removes what was added before it.
		const account = await signUp(t)
		await t.database.handle.db.update(users).set({ emailVerifiedAt: new Date() }).where(eq(users.id, account.id))
		const { secret } = await enrollTotp(t, account)
		const browser = new PageBrowser(t)
		const asked = await askForCode(browser, account.email)
		const [mail] = await waitForMails(t, account.email, 'sign-in', 1)
		const owed = await browser.post(withReturn('/sign-in/email-code'), { csrf: csrfOf(asked), email: account.email, code: codeIn(mail as { text: string }) })
		expect(owed.status).toBe(200)
		expect(owed.html).toContain('<h1>Enter your verification code</h1>')
		expect(browser.cookies.has(SESSION)).toBe(false)
		await awayFromStepBoundary()
		const done = await browser.post(withReturn('/sign-in'), { csrf: csrfOf(owed), mfaToken: PageBrowser.field(owed.html, 'mfaToken'), email: account.email, code: totpCode(secret, 1) })
		expect(done.status).toBe(303)
		expect(done.location).toBe(RETURN_TO)
		expect(await browserSession(browser)).toMatchObject({ userId: account.id, amr: ['otp', 'mfa'], aal: 'aal2' })
	})

	test('without the form’s token, or from another site, it is refused and sends nothing', async () => {
		const account = await signUp(t)
		const browser = new PageBrowser(t)
		await browser.get('/sign-in')
		const expired = await browser.post('/sign-in/email-code', { csrf: 'not-the-token', email: account.email })
		expect(expired.status).toBe(403)
		expect(expired.html).toContain('This form has expired')
		const crossSite = await browser.post('/sign-in/email-code', { csrf: browser.cookies.get('__Host-latchkey-csrf') ?? '', email: account.email }, { 'sec-fetch-site': 'cross-site' })
		expect(crossSite.status).toBe(403)
		expect(crossSite.html).toContain('This request came from another website')
		await Bun.sleep(300)
		expect(mailsTo(t, account.email, 'sign-in')).toEqual([])
	})
})

test('"email me a code" and the passkey’s answer are charged to the /auth budget, as their API routes are', async () => {
	const limited = await startTestApp({ AUTH_RATE_LIMIT_MAX: '2', RATE_LIMIT_MAX: '100' })
	try {
		const browser = new PageBrowser(limited)
		const form = await browser.get(withReturn('/sign-in'))
		for (let i = 0; i < 2; i++) expect((await browser.post(withReturn('/sign-in/email-code'), { csrf: csrfOf(form), email: 'ada@example.test' })).status).toBe(200)
		const refused = await browser.post(withReturn('/sign-in/email-code'), { csrf: csrfOf(form), email: 'ada@example.test' })
		expect(refused.status).toBe(429)
		expect(refused.headers.get('retry-after')).toBeTruthy()
		expect(refused.html).toContain('Too many attempts from your network.')
		expect(PageBrowser.decoded(refused.html)).toContain(`<a class="button" href="${withReturn('/sign-in')}">`)
		expect((await browser.post('/sign-in/passkey', { csrf: csrfOf(form), response: '{}' })).status).toBe(429)
	} finally {
		await limited.close()
	}
})

describe('an identity provider', () => {
	/** The provider's button on /sign-in, through the provider, back to the page's return (not yet opened). */
	async function throughProvider(browser: PageBrowser, identity: { sub: string; email?: string; email_verified?: boolean }) {
		provider.signInAs = identity
		const form = await browser.get(withReturn('/sign-in'))
		const started = await browser.post(withReturn('/sign-in/provider'), { csrf: csrfOf(form), provider: 'test' })
		expect(started.status).toBe(303)
		const flowCookie = started.setCookies.find((c) => c.name === FLOW)
		expect(flowCookie?.attributes).toMatchObject({ path: '/', secure: true, httponly: true, samesite: 'Lax', 'max-age': '600' })
		const location = new URL(started.location ?? '', ORIGIN)
		expect(location.pathname).toBe('/api/auth/providers/test/authorization')
		expect(location.searchParams.get('redirectTo')).toBe('http://localhost/sign-in/provider/callback')
		// The API's own route and callback run the flow; it ends on the page's return with a one-time code.
		const landed = await new FlowBrowser(t.app).follow(location.pathname + location.search, provider.issuer, (url) => url.pathname === '/sign-in/provider/callback')
		expect(landed.searchParams.get('code')).toBeTruthy()
		return landed
	}

	test('a linked or new identity comes back as the browser’s session, going on to return_to', async () => {
		const email = uniqueEmail('provider-page')
		const browser = new PageBrowser(t)
		const landed = await throughProvider(browser, { sub: `sub-${email}`, email, email_verified: true })
		const done = await browser.get(landed.pathname + landed.search)
		expect(done.status).toBe(303)
		expect(done.location).toBe(RETURN_TO)
		expect(done.setCookies.find((c) => c.name === FLOW)?.attributes['max-age']).toBe('0')
		const row = await browserSession(browser)
		expect(row).toMatchObject({ amr: [], aal: 'aal1', revokedAt: null, clientId: 'some-app' })
		const landing = await browser.get('/account')
		expect(landing.html).toContain(`Signed in as ${email}`)
	})

	test('an account with a second factor is asked for it on return', async () => {
		const account = await signUp(t)
		await t.database.handle.db.update(users).set({ emailVerifiedAt: new Date() }).where(eq(users.id, account.id))
		const { secret } = await enrollTotp(t, account)
		const browser = new PageBrowser(t)
		const landed = await throughProvider(browser, { sub: `sub-${account.email}`, email: account.email, email_verified: true })
		const owed = await browser.get(landed.pathname + landed.search)
		expect(owed.status).toBe(200)
		expect(owed.html).toContain('<h1>Enter your verification code</h1>')
		expect(PageBrowser.decoded(owed.html)).toContain(`<form method="post" action="${withReturn('/sign-in')}">`)
		await awayFromStepBoundary()
		const done = await browser.post(withReturn('/sign-in'), { csrf: csrfOf(owed), mfaToken: PageBrowser.field(owed.html, 'mfaToken'), email: '', code: totpCode(secret, 1) })
		expect(done.status).toBe(303)
		expect(done.location).toBe(RETURN_TO)
		expect(await browserSession(browser)).toMatchObject({ userId: account.id, amr: ['otp', 'mfa'], aal: 'aal2' })
	})

	test('a return in another browser (no flow cookie) signs no one in, and leaves the code for its own browser', async () => {
		const email = uniqueEmail('provider-planted')
		const browser = new PageBrowser(t)
		const landed = await throughProvider(browser, { sub: `sub-${email}`, email, email_verified: true })
		const stranger = new PageBrowser(t)
		const refused = await stranger.get(landed.pathname + landed.search)
		expect(refused.status).toBe(400)
		expect(refused.html).toContain('This sign-in was not started in this browser, or took too long. Start again.')
		expect(stranger.cookies.has(SESSION)).toBe(false)
		expect((await browser.get(landed.pathname + landed.search)).status).toBe(303)
	})

	test('a flow that ends with an error is a sentence on the sign-in form', async () => {
		const browser = new PageBrowser(t)
		const form = await browser.get('/sign-in')
		await browser.post('/sign-in/provider', { csrf: csrfOf(form), provider: 'test' })
		const denied = await browser.get('/sign-in/provider/callback?error=access-denied&error_description=x')
		expect(denied.status).toBe(400)
		expect(denied.html).toContain('The sign-in was cancelled at the identity provider.')
		expect(denied.html).toContain('<h1>Sign in to Latchkey</h1>')
		// The problem is not the fields'.
		expect(denied.html).not.toContain('aria-invalid')
		const odd = await browser.get('/sign-in/provider/callback?error=%3Cscript%3E')
		expect(odd.html).toContain('The identity provider refused the sign-in.')
		// A return whose state this browser does not hold lands on /sign-in (the API's fallback without APP_URL).
		const fallback = await new PageBrowser(t).get('/sign-in?error=invalid-state&error_description=x')
		expect(fallback.status).toBe(200)
		expect(fallback.html).toContain('This sign-in was not started in this browser, or took too long. Start again.')
	})

	test('an unknown provider, a missing token or another site are refused at the button', async () => {
		const browser = new PageBrowser(t)
		const form = await browser.get('/sign-in')
		const unknown = await browser.post('/sign-in/provider', { csrf: csrfOf(form), provider: 'nope' })
		expect(unknown.status).toBe(422)
		expect(unknown.html).toContain('That identity provider is not offered here.')
		const expired = await browser.post('/sign-in/provider', { csrf: 'x', provider: 'test' })
		expect(expired.status).toBe(403)
		expect(expired.setCookies.some((c) => c.name === FLOW)).toBe(false)
		const crossSite = await browser.post('/sign-in/provider', { csrf: csrfOf(form), provider: 'test' }, { 'sec-fetch-site': 'cross-site' })
		expect(crossSite.status).toBe(403)
	})
})

describe('a passkey’s answer posted by the page', () => {
	test('signs the browser in at aal2 and goes on to return_to; a refused or malformed answer is a sentence', async () => {
		const account = await signUp(t)
		const authenticator = new SoftAuthenticator(ORIGIN, 'localhost')
		await addPasskey(t, account, authenticator)
		const browser = new PageBrowser(t)
		const form = await browser.get(withReturn('/sign-in'))

		const malformed = await browser.post(withReturn('/sign-in/passkey'), { csrf: csrfOf(form), response: '{"id":' })
		expect(malformed.status).toBe(422)
		expect(malformed.html).toContain('That passkey could not sign you in.')

		const options = (await t.call('POST', '/api/auth/passkey/challenges')).body.data
		const forged = authenticator.authenticate(options, { origin: 'https://evil.example' })
		const refused = await browser.post(withReturn('/sign-in/passkey'), { csrf: csrfOf(form), response: JSON.stringify(forged) })
		expect(refused.status).toBe(401)
		expect(refused.html).toContain('That passkey could not sign you in.')
		expect(browser.cookies.has(SESSION)).toBe(false)

		const fresh = (await t.call('POST', '/api/auth/passkey/challenges')).body.data
		const expired = await browser.post(withReturn('/sign-in/passkey'), { csrf: 'x', response: JSON.stringify(authenticator.authenticate(fresh)) })
		expect(expired.status).toBe(403)
		const done = await browser.post(withReturn('/sign-in/passkey'), { csrf: csrfOf(form), response: JSON.stringify(authenticator.authenticate((await t.call('POST', '/api/auth/passkey/challenges')).body.data)) })
		expect(done.status).toBe(303)
		expect(done.location).toBe(RETURN_TO)
		expect(await browserSession(browser)).toMatchObject({ userId: account.id, amr: ['hwk', 'mfa'], aal: 'aal2', clientId: 'some-app' })
	})
})

describe('a passkey as the second factor', () => {
	test('after the password, the page offers the passkey; its answer finishes the sign-in at aal2', async () => {
		const account = await signUp(t)
		const authenticator = new SoftAuthenticator(ORIGIN, 'localhost')
		await addPasskey(t, account, authenticator)
		const browser = new PageBrowser(t)
		const owed = await browser.signIn(account.email, undefined, `?${new URLSearchParams({ return_to: RETURN_TO })}`)
		expect(owed.status).toBe(200)
		expect(owed.html).toContain('Use your passkey, or enter one of the recovery codes you saved')
		expect(owed.html).toContain('<section class="other-ways" id="other-ways" aria-labelledby="other-ways-title" hidden>')
		expect(owed.html).toContain('<button type="submit" class="secondary">Use your passkey</button>')
		expect(owed.html).toContain('<script src="/pages/passkeys.js" defer></script>')
		const mfaToken = PageBrowser.field(owed.html, 'mfaToken')
		const challenge = async () => (await t.call('POST', '/api/auth/mfa/challenges', { json: { mfaToken } })).body.data

		const refused = await browser.post(withReturn('/sign-in'), {
			csrf: csrfOf(owed),
			mfaToken,
			email: account.email,
			passkey: '1',
			response: JSON.stringify(authenticator.authenticate(await challenge(), { origin: 'https://evil.example' })),
		})
		expect(refused.status).toBe(401)
		expect(refused.html).toContain('That passkey could not sign you in.')
		// The passkey's button survives the refusal.
		expect(refused.html).toContain('<button type="submit" class="secondary">Use your passkey</button>')

		const done = await browser.post(withReturn('/sign-in'), { csrf: csrfOf(owed), mfaToken, email: account.email, passkey: '1', response: JSON.stringify(authenticator.authenticate(await challenge())) })
		expect(done.status).toBe(303)
		expect(done.location).toBe(RETURN_TO)
		expect(await browserSession(browser)).toMatchObject({ userId: account.id, amr: ['pwd', 'hwk', 'mfa'], aal: 'aal2' })
	})

	test('an account without a passkey is offered none', async () => {
		const account = await signUp(t)
		await enrollTotp(t, account)
		const owed = await new PageBrowser(t).signIn(account.email)
		expect(owed.html).toContain('<h1>Enter your verification code</h1>')
		expect(owed.html).not.toContain('passkey')
		expect(owed.html).not.toContain('<script')
	})
})
