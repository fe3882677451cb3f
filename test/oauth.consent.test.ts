import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type * as oauth from 'oauth4webapi'
import { startTestApp, type TestApp } from './support/app'
import { signUp, type Account } from './support/fixtures'
import { authorizationRequest, discover, REDIRECT_URI, registerClient, type RegisteredClient } from './support/oauth'
import { PageBrowser, type PageResult } from './support/pages'

/*
 * The consent page as a person meets it: signed in at /sign-in, sent by a third-party client's authorization
 * request to /consent, allowing or denying; remembered afterwards, and forgotten when revoked.
 */

let t: TestApp
let as: oauth.AuthorizationServer
let account: Account

beforeAll(async () => {
	t = await startTestApp()
	as = await discover(t)
	account = await signUp(t)
})
afterAll(() => t.close())

/** Follows redirects on the issuer (a page browser does not); stops at a page or outside. */
async function follow(browser: PageBrowser, first: PageResult): Promise<{ page: PageResult; at: URL }> {
	let page = first
	let at = new URL('http://localhost/')
	for (let hop = 0; hop < 10 && page.location; hop++) {
		at = new URL(page.location, at)
		if (at.origin !== 'http://localhost') return { page, at }
		page = await browser.get(at.pathname + at.search)
	}
	return { page, at }
}

async function signedInBrowser() {
	const browser = new PageBrowser(t)
	expect((await browser.signIn(account.email)).status).toBe(303)
	return browser
}

async function ask(browser: PageBrowser, client: RegisteredClient, params: Record<string, string> = {}) {
	const request = await authorizationRequest(as, client.clientId, params)
	return { ...(await follow(browser, await browser.get(request.url.pathname + request.url.search))), request }
}

describe('the consent page', () => {
	let thirdParty: RegisteredClient
	beforeAll(async () => {
		thirdParty = await registerClient(t, { type: 'public', firstParty: false, name: 'Acme Notes' })
	})

	test('names the client and what it asks in words, and allowing sends the browser back with a code', async () => {
		const browser = await signedInBrowser()
		const { page, at } = await ask(browser, thirdParty, { scope: 'openid email profile' })
		expect(at.pathname).toBe('/consent')
		expect(page.status).toBe(200)
		expect(page.headers.get('content-security-policy')).toContain("default-src 'self'")
		const html = PageBrowser.decoded(page.html)
		expect(html).toContain('Acme Notes wants to use your Latchkey account')
		expect(html).toContain('See your email address')
		expect(html).toContain('See your name')
		expect(html).toContain(account.email)
		const answered = await browser.post('/consent', { csrf: PageBrowser.field(page.html, 'csrf'), interaction: PageBrowser.field(page.html, 'interaction'), decision: 'allow' })
		const back = await follow(browser, answered)
		expect(back.at.origin + back.at.pathname).toBe(REDIRECT_URI)
		expect(back.at.searchParams.get('code')).toBeString()
	})

	test('is remembered: the same scopes again need no page; a new scope asks again', async () => {
		const browser = await signedInBrowser()
		const again = await ask(browser, thirdParty, { scope: 'openid email' })
		expect(again.at.origin + again.at.pathname).toBe(REDIRECT_URI)
		const more = await ask(browser, thirdParty, { scope: 'openid email offline_access', prompt: 'consent' })
		expect(more.at.pathname).toBe('/consent')
		expect(PageBrowser.decoded(more.page.html)).toContain('Keep access while you are away')
	})

	test('the consent is listed and, once revoked, asked again', async () => {
		const listed = await t.call('GET', '/api/users/me/consents', { token: account.accessToken })
		expect(listed.status).toBe(200)
		expect(listed.body.data.items).toContainEqual(expect.objectContaining({ clientId: thirdParty.clientId, clientName: 'Acme Notes' }))
		expect((await t.call('DELETE', `/api/users/me/consents/${thirdParty.clientId}`, { token: account.accessToken })).status).toBe(200)
		const browser = await signedInBrowser()
		const { at } = await ask(browser, thirdParty, { scope: 'openid email' })
		expect(at.pathname).toBe('/consent')
	})

	test('denying sends the client access_denied, with its state and the issuer', async () => {
		const denier = await registerClient(t, { type: 'public', firstParty: false })
		const browser = await signedInBrowser()
		const { page, request } = await ask(browser, denier)
		const answered = await browser.post('/consent', { csrf: PageBrowser.field(page.html, 'csrf'), interaction: PageBrowser.field(page.html, 'interaction'), decision: 'deny' })
		const back = await follow(browser, answered)
		expect(back.at.origin + back.at.pathname).toBe(REDIRECT_URI)
		expect(back.at.searchParams.get('error')).toBe('access_denied')
		expect(back.at.searchParams.get('state')).toBe(request.state)
		expect(back.at.searchParams.get('iss')).toBe('http://localhost')
	})

	test('an answer without the form token, or from another site, is refused and grants nothing (CSRF)', async () => {
		const victim = await registerClient(t, { type: 'public', firstParty: false })
		const browser = await signedInBrowser()
		const { page } = await ask(browser, victim)
		const interaction = PageBrowser.field(page.html, 'interaction')
		const forged = await browser.post('/consent', { interaction, decision: 'allow' })
		expect(forged.status).toBe(403)
		expect(forged.location).toBeNull()
		const crossSite = await browser.post('/consent', { csrf: PageBrowser.field(page.html, 'csrf'), interaction, decision: 'allow' }, { 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' })
		expect(crossSite.status).toBe(403)
		expect(crossSite.location).toBeNull()
		const consents = await t.call('GET', '/api/users/me/consents', { token: account.accessToken })
		expect(consents.body.data.items.map((item: { clientId: string }) => item.clientId)).not.toContain(victim.clientId)
	})

	test('an unknown or finished interaction is a page that says so, never a redirect', async () => {
		const browser = await signedInBrowser()
		const page = await browser.get('/consent?interaction=no-such-thing')
		expect(page.status).toBe(400)
		expect(page.location).toBeNull()
		expect(PageBrowser.decoded(page.html)).toContain('has expired or was already answered')
	})
})

describe('sign-in through the pages', () => {
	test('a signed-out browser signs in at /sign-in and lands back at the client with a code', async () => {
		const client = await registerClient(t, { type: 'confidential', firstParty: true })
		const browser = new PageBrowser(t)
		const { page, at } = await ask(browser, client)
		expect(at.pathname).toBe('/sign-in')
		const returnTo = at.searchParams.get('return_to') ?? ''
		const signedIn = await browser.post(`/sign-in?${new URLSearchParams({ return_to: returnTo })}`, { csrf: PageBrowser.field(page.html, 'csrf'), email: account.email, password: account.password })
		const back = await follow(browser, signedIn)
		expect(back.at.origin + back.at.pathname).toBe(REDIRECT_URI)
		expect(back.at.searchParams.get('code')).toBeString()
	})

	test('prompt=login asks for the password again although the browser is signed in', async () => {
		const client = await registerClient(t, { type: 'confidential', firstParty: true })
		const browser = await signedInBrowser()
		const { at, page } = await ask(browser, client, { prompt: 'login' })
		expect(at.pathname).toBe('/sign-in')
		expect(page.status).toBe(200)
		const returnTo = at.searchParams.get('return_to') ?? ''
		// A person takes more than the second the request's time is counted in (a sign-in in the same second as
		// the request is not taken as an answer to prompt=login).
		await Bun.sleep(1100)
		const signedIn = await browser.post(`/sign-in?${new URLSearchParams({ return_to: returnTo, prompt: 'login' })}`, {
			csrf: PageBrowser.field(page.html, 'csrf'),
			email: account.email,
			password: account.password,
		})
		const back = await follow(browser, signedIn)
		expect(back.at.origin + back.at.pathname).toBe(REDIRECT_URI)
		expect(back.at.searchParams.get('code')).toBeString()
	})
})
