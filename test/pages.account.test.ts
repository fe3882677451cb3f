/**
 * /account through HTTP, as a browser sends its forms: the profile (name, email, password), sign-in and security
 * (authenticator apps, passkeys, recovery codes), linked identities, sessions and applications. Each action calls
 * the service its API route calls, so the API's rules hold here: a session older than REAUTHENTICATION_SECONDS is
 * asked to confirm it is the owner (then the action is done), a second factor is asked where the API asks for
 * aal2, another account's session cannot be ended, the last way in cannot be unlinked.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { and, eq, isNull } from 'drizzle-orm'
import { factors, identities, sessions, users } from '../src/db/schema'
import { startTestApp, type TestApp } from './support/app'
import { awayFromStepBoundary, enrollTotp, totpCode } from './support/factors'
import { ageSession, jwtPayload, PASSWORD, signUp, soleActiveAdmin, uniqueEmail, type Account } from './support/fixtures'
import { registerClient } from './support/oauth'
import { PageBrowser, type PageResult } from './support/pages'
import { SoftAuthenticator } from './support/soft-authenticator'
import { addPasskey, mailsTo, waitForMails } from './support/ways-in'

setDefaultTimeout(60_000)

const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
const SECTIONS = ['/account', '/account/security', '/account/identities', '/account/sessions', '/account/applications']

let t: TestApp
beforeAll(async () => {
	t = await startTestApp()
})
afterAll(async () => {
	await t?.close()
})

const decoded = (page: PageResult) => PageBrowser.decoded(page.html)
const csrfOf = (page: PageResult) => PageBrowser.field(page.html, 'csrf')
/** The sentence of the page's error summary. */
const errorOf = (page: PageResult) => /<div class="error-summary"[^>]*>\s*<h2[^>]*>[^<]*<\/h2>\s*<p>([^<]*)<\/p>/.exec(decoded(page))?.[1]
/** The sentence of the page's result (its live region). */
const noticeOf = (page: PageResult) => /<div class="notice" id="notice" role="status"[^>]*>\s*<p>([^<]*)<\/p>/.exec(decoded(page))?.[1]
const userRow = async (id: string) => (await t.database.handle.db.select().from(users).where(eq(users.id, id)))[0]
const sessionRow = async (id: string) => (await t.database.handle.db.select().from(sessions).where(eq(sessions.id, id)))[0]

/** An account made through the API, and a browser signed in to it at the pages; its session's id. */
async function signedIn(fields: { name?: string } = {}): Promise<{ account: Account; browser: PageBrowser; sessionId: string }> {
	const account = await signUp(t, { email: uniqueEmail('page-account'), ...fields })
	const browser = new PageBrowser(t)
	const done = await browser.signIn(account.email)
	expect(done.status).toBe(303)
	const rows = await t.database.handle.db.select().from(sessions).where(and(eq(sessions.userId, account.id), isNull(sessions.revokedAt)))
	const browserSession = rows.find((row) => row.browserTokenHash !== null)
	if (!browserSession) throw new Error('no browser session')
	return { account, browser, sessionId: browserSession.id }
}

/** Opens `page` and posts `form` to `path` with the page's token. */
async function submit(browser: PageBrowser, path: string, form: Record<string, string>, page = '/account') {
	const opened = await browser.get(page)
	expect(opened.status).toBe(200)
	return browser.post(path, { csrf: csrfOf(opened), ...form })
}

/** Follows a 303 to a section, which shows its result. */
async function followed(browser: PageBrowser, result: PageResult) {
	expect(result.status).toBe(303)
	return browser.get(result.location ?? '')
}

describe('every /account path', () => {
	test('a signed-out browser goes to sign-in, and back to the section it asked for', async () => {
		const browser = new PageBrowser(t)
		for (const path of SECTIONS) {
			const page = await browser.get(path)
			expect(page.status).toBe(303)
			expect(page.location).toBe(`/sign-in?${new URLSearchParams({ return_to: path })}`)
		}
		const posted = await browser.post('/account/sessions/end', { csrf: 'x', others: '1' })
		expect(posted.location).toBe(`/sign-in?${new URLSearchParams({ return_to: '/account/sessions' })}`)
		const { account } = await signedIn()
		const back = await browser.get(`/sign-in?${new URLSearchParams({ return_to: '/account/security' })}`)
		const done = await browser.post(`/sign-in?${new URLSearchParams({ return_to: '/account/security' })}`, { csrf: csrfOf(back), email: account.email, password: PASSWORD })
		expect(done.location).toBe('/account/security')
	})

	test('each section is a page under the pages’ policy, never stored, with the sections’ nav and no script', async () => {
		const { browser } = await signedIn()
		for (const path of SECTIONS) {
			const page = await browser.get(path)
			expect(page.status).toBe(200)
			expect(page.headers.get('content-security-policy')).toBe(CSP)
			expect(page.headers.get('cache-control')).toBe('no-store')
			const html = decoded(page)
			expect(html).toContain('<nav class="account-nav" aria-label="Account sections">')
			expect(html).toContain(`<a href="${path}" aria-current="page">`)
			expect(html).not.toMatch(/<script|<style|\sstyle=|\son[a-z]+="/i)
			expect(html).toContain('<main class="card wide"')
		}
	})

	test('another site’s form is refused (403), and a form without the browser’s token is shown again', async () => {
		const { browser, account } = await signedIn()
		const page = await browser.get('/account')
		const crossSite = await browser.post('/account/profile', { csrf: csrfOf(page), name: 'Mallory' }, { 'sec-fetch-site': 'cross-site' })
		expect(crossSite.status).toBe(403)
		expect(decoded(crossSite)).toContain('This request came from another website')
		const expired = await browser.post('/account/profile', { csrf: 'not-the-token', name: 'Mallory' })
		expect(expired.status).toBe(403)
		expect(errorOf(expired)).toBe('This form has expired or was opened in another window. Please submit it again.')
		expect((await userRow(account.id))?.name).toBe('Test User')
	})
})

describe('/account: profile, email, password', () => {
	test('the name is saved as PUT /users/me saves it; too long a name is refused', async () => {
		const { browser, account } = await signedIn()
		const saved = await followed(browser, await submit(browser, '/account/profile', { name: '  Ada Lovelace ' }))
		expect(noticeOf(saved)).toBe('Your name is saved.')
		expect(decoded(saved)).toContain('value="Ada Lovelace"')
		expect((await userRow(account.id))?.name).toBe('Ada Lovelace')
		const long = await submit(browser, '/account/profile', { name: 'n'.repeat(201) })
		expect(long.status).toBe(422)
		expect(errorOf(long)).toBe('The name is too long: use at most 200 characters.')
		expect(decoded(long)).toMatch(/<input id="name" [^>]*aria-invalid="true"/)
	})

	test('a new password with the current one: the other sessions end, this browser stays; a wrong current one is refused', async () => {
		const { browser, account, sessionId } = await signedIn()
		const wrong = await submit(browser, '/account/password', { currentPassword: 'not my password', password: 'a brand new passphrase' })
		expect(wrong.status).toBe(422)
		expect(errorOf(wrong)).toBe('Your current password is not right.')
		const weak = await submit(browser, '/account/password', { currentPassword: PASSWORD, password: 'short' })
		expect(weak.status).toBe(422)
		expect(errorOf(weak)).toBe('The password is too short: use at least 8 characters.')
		const changed = await followed(browser, await submit(browser, '/account/password', { currentPassword: PASSWORD, password: 'a brand new passphrase' }))
		expect(noticeOf(changed)).toBe('Your password is changed. Every other session was signed out.')
		expect((await sessionRow(account.sessionId))?.revokedAt).toBeInstanceOf(Date)
		expect((await sessionRow(sessionId))?.revokedAt).toBeNull()
		expect((await t.call('POST', '/api/auth/login', { json: { email: account.email, password: 'a brand new passphrase' } })).status).toBe(200)
	})

	test('a new address waits for its proof from a mail to it, as the API’s own change does', async () => {
		const { browser, account } = await signedIn()
		const email = uniqueEmail('page-account-new')
		const asked = await followed(browser, await submit(browser, '/account/email', { email: email.toUpperCase(), currentPassword: PASSWORD }))
		expect(noticeOf(asked)).toBe('We sent a link to your new address. Your email address changes when you follow it.')
		expect(decoded(asked)).toContain(`Waiting for confirmation: ${email}.`)
		expect(await userRow(account.id)).toMatchObject({ email: account.email, pendingEmail: email })
		await waitForMails(t, email, 'email-change', 1)
		const taken = await submit(browser, '/account/email', { email: 'not an address', currentPassword: PASSWORD })
		expect(taken.status).toBe(422)
		expect(errorOf(taken)).toBe('Enter an email address, like name@example.com.')
	})

	test('without the current password, a session older than REAUTHENTICATION_SECONDS confirms it is the owner, then the change is made', async () => {
		const { browser, account, sessionId } = await signedIn()
		await ageSession(t, { sessionId })
		const asked = await submit(browser, '/account/password', { password: 'another fine passphrase' })
		expect(asked.status).toBe(403)
		const html = decoded(asked)
		expect(html).toContain('<h1>Confirm it is you</h1>')
		expect(html).toContain('<form method="post" action="/account/password">')
		// The action's own fields ride along; the confirmation's own do not.
		expect(html).toContain('<input type="hidden" name="password" value="another fine passphrase">')
		expect(html).toContain('<input type="hidden" name="reason" value="reauthentication-required">')
		expect(html).toMatch(/<input id="confirm-password" name="confirmPassword" type="password" autocomplete="current-password" required maxlength="1024" autofocus>/)
		const form = { csrf: csrfOf(asked), confirm: 'password', reason: 'reauthentication-required', password: 'another fine passphrase' }
		const wrong = await browser.post('/account/password', { ...form, confirmPassword: 'not it' })
		expect(wrong.status).toBe(401)
		expect(errorOf(wrong)).toBe('That password is not right.')
		const done = await followed(browser, await browser.post('/account/password', { ...form, confirmPassword: PASSWORD }))
		expect(noticeOf(done)).toBe('Your password is changed. Every other session was signed out.')
		expect((await t.call('POST', '/api/auth/login', { json: { email: account.email, password: 'another fine passphrase' } })).status).toBe(200)
	})
})

describe('deactivating the account', () => {
	test('is asked once more, then deactivates as DELETE /users/me does: every session ends, the browser is signed out', async () => {
		const { browser, account, sessionId } = await signedIn()
		expect(decoded(await browser.get('/account'))).toContain('<a href="/account/deactivation">Deactivate your account…</a>')
		const question = await browser.get('/account/deactivation')
		expect(question.status).toBe(200)
		expect(decoded(question)).toContain(`${account.email} will be signed out of every browser and app and can no longer sign in.`)
		const done = await browser.post('/account/deactivation', { csrf: csrfOf(question) })
		expect(done.status).toBe(200)
		expect(decoded(done)).toContain('<h1>Your account is deactivated</h1>')
		expect(done.setCookies.find((cookie) => cookie.name === '__Host-latchkey-session')?.attributes['max-age']).toBe('0')
		expect(await userRow(account.id)).toMatchObject({ status: 'deactivated' })
		for (const id of [sessionId, account.sessionId]) expect((await sessionRow(id))?.revokedAt).toBeInstanceOf(Date)
		expect((await t.call('POST', '/api/auth/login', { json: { email: account.email, password: PASSWORD } })).status).toBe(401)
		expect((await browser.get('/account')).status).toBe(303)
	})

	test('the last active admin is refused, as the API refuses it (409)', async () => {
		const { admin, restore } = await soleActiveAdmin(t)
		try {
			const browser = new PageBrowser(t)
			expect((await browser.signIn(admin.email)).status).toBe(303)
			const refused = await submit(browser, '/account/deactivation', {}, '/account/deactivation')
			expect(refused.status).toBe(409)
			expect(errorOf(refused)).toBe('You are the last active administrator, so your account cannot be deactivated. Make another account an administrator first.')
			expect(await userRow(admin.id)).toMatchObject({ status: 'active' })
		} finally {
			await restore()
		}
	})
})

describe('/account/security', () => {
	test('an authenticator app: a recent session gets its QR code and key once, a code turns it on, and the recovery codes are shown once', async () => {
		const { browser, account } = await signedIn()
		const enrol = await submit(browser, '/account/security/totp', { name: 'My phone' }, '/account/security')
		expect(enrol.status).toBe(200)
		expect(enrol.headers.get('cache-control')).toBe('no-store')
		const html = decoded(enrol)
		expect(html).toMatch(/<img class="qr" src="data:image\/svg\+xml;base64,[A-Za-z0-9+/=]+" alt="QR code for your authenticator app/)
		const secret = /<code class="secret"[^>]*>([A-Z2-7]+)<\/code>/.exec(html)?.[1] ?? ''
		expect(secret).toMatch(/^[A-Z2-7]{16,}$/)
		const factorId = PageBrowser.field(enrol.html, 'factorId')
		const wrong = await browser.post('/account/security/totp/activation', { csrf: csrfOf(enrol), factorId, code: '000000' })
		expect(wrong.status).toBe(400)
		expect(errorOf(wrong)).toBe('That code is not right, or it was used already. Check it and try again.')
		// The key is not shown again.
		expect(decoded(wrong)).not.toContain(secret)
		await awayFromStepBoundary()
		const on = await browser.post('/account/security/totp/activation', { csrf: csrfOf(enrol), factorId, code: totpCode(secret) })
		expect(on.status).toBe(200)
		expect(on.headers.get('cache-control')).toBe('no-store')
		expect(decoded(on)).toContain('<h1>Save your recovery codes</h1>')
		expect([...on.html.matchAll(/<li><code>([^<]+)<\/code><\/li>/g)]).toHaveLength(10)
		const [factor] = await t.database.handle.db.select().from(factors).where(eq(factors.userId, account.id))
		expect(factor).toMatchObject({ type: 'totp', name: 'My phone', status: 'active' })
		const listed = decoded(await browser.get('/account/security'))
		expect(listed).toContain('<span class="item-name">My phone</span>')
		expect(listed).toContain('aria-label="Remove My phone"')
		// New recovery codes (aal2: the activation raised this session), shown once.
		const codes = await submit(browser, '/account/security/recovery-codes', {}, '/account/security')
		expect(codes.status).toBe(200)
		expect(decoded(codes)).toContain('Your old recovery codes no longer work.')
		// Removal.
		const removed = await followed(browser, await submit(browser, '/account/security/factor-removal', { factorId: factor?.id ?? '' }, '/account/security'))
		expect(noticeOf(removed)).toBe('The authenticator app is removed.')
		expect(await t.database.handle.db.select().from(factors).where(eq(factors.userId, account.id))).toHaveLength(0)
	})

	test('a new enrolment replaces an unfinished one of its kind, so abandoned ones never fill the account', async () => {
		const { browser, account } = await signedIn()
		for (const name of ['First', 'Second', 'Third']) expect((await submit(browser, '/account/security/totp', { name }, '/account/security')).status).toBe(200)
		expect((await submit(browser, '/account/security/passkey', { name: 'Key' }, '/account/security')).status).toBe(200)
		const rows = await t.database.handle.db.select().from(factors).where(eq(factors.userId, account.id))
		expect(rows.map(({ type, name, status }) => ({ type, name, status })).sort((a, b) => a.name.localeCompare(b.name))).toEqual([
			{ type: 'webauthn', name: 'Key', status: 'pending' },
			{ type: 'totp', name: 'Third', status: 'pending' },
		])
	})

	test('a session older than REAUTHENTICATION_SECONDS confirms with the password before enrolling', async () => {
		const { browser, sessionId } = await signedIn()
		await ageSession(t, { sessionId })
		const asked = await submit(browser, '/account/security/totp', { name: 'Tablet' }, '/account/security')
		expect(asked.status).toBe(403)
		expect(decoded(asked)).toContain('<input type="hidden" name="name" value="Tablet">')
		const enrol = await browser.post('/account/security/totp', { csrf: csrfOf(asked), confirm: 'password', reason: 'reauthentication-required', name: 'Tablet', confirmPassword: PASSWORD })
		expect(enrol.status).toBe(200)
		expect(decoded(enrol)).toContain('<h1>Add an authenticator app</h1>')
	})

	test('where the API asks for a second factor (aal2), the page asks for a code, then acts', async () => {
		const { browser, account } = await signedIn()
		// A factor added from another session: this browser's session has not used it.
		const { secret, factorId } = await enrollTotp(t, account)
		const asked = await submit(browser, '/account/security/recovery-codes', {}, '/account/security')
		expect(asked.status).toBe(403)
		const html = decoded(asked)
		expect(html).toContain('This change needs your second factor')
		expect(html).not.toContain('confirmPassword')
		expect(html).toContain('<input type="hidden" name="reason" value="mfa-required">')
		const wrong = await browser.post('/account/security/recovery-codes', { csrf: csrfOf(asked), confirm: 'code', reason: 'mfa-required', confirmCode: '000000' })
		expect(wrong.status).toBe(401)
		expect(errorOf(wrong)).toBe('That code is not right, or it was used already. Check it and try again.')
		await awayFromStepBoundary()
		const codes = await browser.post('/account/security/recovery-codes', { csrf: csrfOf(asked), confirm: 'code', reason: 'mfa-required', confirmCode: totpCode(secret, 1) })
		expect(codes.status).toBe(200)
		expect(decoded(codes)).toContain('<h1>Save your recovery codes</h1>')
		// The check raised the browser's session, as POST /auth/reauthentication raises a token's.
		const browserSession = (await t.database.handle.db.select().from(sessions).where(eq(sessions.userId, account.id))).find((row) => row.browserTokenHash !== null)
		expect(browserSession?.aal).toBe('aal2')
		const removed = await followed(browser, await submit(browser, '/account/security/factor-removal', { factorId }, '/account/security'))
		expect(noticeOf(removed)).toBe('The authenticator app is removed.')
	})

	test('“confirm it’s you” takes a passkey: the page carries this session’s challenge, the signed answer confirms', async () => {
		const { browser, account } = await signedIn()
		const authenticator = new SoftAuthenticator('http://localhost', 'localhost')
		await addPasskey(t, account, authenticator)
		const asked = await submit(browser, '/account/security/recovery-codes', {}, '/account/security')
		expect(asked.status).toBe(403)
		const html = decoded(asked)
		expect(html).toContain('<div id="passkey-confirm" hidden>')
		expect(html).toContain('<label for="confirm-code">Recovery code</label>')
		expect(html).toContain('<script src="/pages/passkeys.js" defer></script>')
		const options = JSON.parse(PageBrowser.decoded(/data-options="([^"]*)"/.exec(asked.html)?.[1] ?? '{}'))
		const form = { csrf: csrfOf(asked), confirm: 'passkey', reason: 'mfa-required' }
		const garbled = await browser.post('/account/security/recovery-codes', { ...form, confirmResponse: 'not json' })
		expect(garbled.status).toBe(422)
		expect(errorOf(garbled)).toBe('That passkey could not confirm it is you. Try again, or confirm another way.')
		const codes = await browser.post('/account/security/recovery-codes', { ...form, confirmResponse: JSON.stringify(authenticator.authenticate(options)) })
		expect(codes.status).toBe(200)
		expect(decoded(codes)).toContain('<h1>Save your recovery codes</h1>')
		// The challenge was this session's, and is spent.
		const again = await browser.post('/account/security/recovery-codes', { ...form, confirmResponse: JSON.stringify(authenticator.authenticate(options)) })
		expect(again.status).toBe(401)
	})

	test('an old session of an account with a factor is asked for the factor at once, not the password first', async () => {
		const { browser, account, sessionId } = await signedIn()
		const { secret } = await enrollTotp(t, account)
		await ageSession(t, { sessionId })
		const asked = await submit(browser, '/account/security/passkey', { name: 'Key' }, '/account/security')
		expect(asked.status).toBe(403)
		expect(asked.html).not.toContain('confirmPassword')
		expect(decoded(asked)).toContain('This change needs your second factor: confirm with it below.')
		await awayFromStepBoundary()
		const enrol = await browser.post('/account/security/passkey', { csrf: csrfOf(asked), confirm: 'code', reason: 'reauthentication-required', name: 'Key', confirmCode: totpCode(secret, 1) })
		expect(enrol.status).toBe(200)
		expect(decoded(enrol)).toContain('<h1>Add a passkey</h1>')
	})

	test('a passkey: the page carries the registration options for its script; the answer activates it', async () => {
		const { browser, account } = await signedIn()
		const enrol = await submit(browser, '/account/security/passkey', { name: 'Laptop' }, '/account/security')
		expect(enrol.status).toBe(200)
		const html = decoded(enrol)
		expect(html).toContain('<script src="/pages/passkeys.js" defer></script>')
		expect(html).toContain('<p id="passkey-unsupported">Adding a passkey needs JavaScript')
		const options = JSON.parse(PageBrowser.decoded(/data-options="([^"]*)"/.exec(enrol.html)?.[1] ?? '{}'))
		expect(options.authenticatorSelection).toMatchObject({ residentKey: 'required', userVerification: 'required' })
		const factorId = PageBrowser.field(enrol.html, 'factorId')
		const refused = await browser.post('/account/security/passkey/activation', { csrf: csrfOf(enrol), factorId, response: '{"not":"a passkey"}' })
		expect(refused.status).toBe(400)
		expect(errorOf(refused)).toBe('The passkey could not be added. Try again.')
		const authenticator = new SoftAuthenticator('http://localhost', 'localhost')
		const response = JSON.stringify(authenticator.register(options))
		const added = await browser.post('/account/security/passkey/activation', { csrf: csrfOf(enrol), factorId, response })
		expect(added.status).toBe(200)
		expect(decoded(added)).toContain('<h1>Save your recovery codes</h1>')
		const [factor] = await t.database.handle.db.select().from(factors).where(eq(factors.userId, account.id))
		expect(factor).toMatchObject({ type: 'webauthn', name: 'Laptop', status: 'active' })
		expect(decoded(await browser.get('/account/security'))).toContain('aria-label="Remove Laptop"')
		const script = await browser.get('/pages/passkeys.js')
		expect(script.status).toBe(200)
		expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8')
	})
})

describe('/account/sessions', () => {
	test('lists the account’s sessions; ends one, refuses another account’s, and ends all others', async () => {
		const { browser, account, sessionId } = await signedIn()
		const page = decoded(await browser.get('/account/sessions'))
		expect(page).toContain('<span class="item-name">This browser</span>')
		expect(page).toContain(`<input type="hidden" name="sessionId" value="${account.sessionId}">`)
		expect(page).not.toContain(`<input type="hidden" name="sessionId" value="${sessionId}">`)
		// Another account's session is not this account's to end: not found, and it lives on.
		const other = await signUp(t)
		const refused = await submit(browser, '/account/sessions/end', { sessionId: other.sessionId }, '/account/sessions')
		expect(refused.status).toBe(404)
		expect(errorOf(refused)).toBe('There is no such session on your account.')
		expect((await sessionRow(other.sessionId))?.revokedAt).toBeNull()
		const ended = await followed(browser, await submit(browser, '/account/sessions/end', { sessionId: account.sessionId }, '/account/sessions'))
		expect(noticeOf(ended)).toBe('That session is signed out.')
		expect((await sessionRow(account.sessionId))?.revokedAt).toBeInstanceOf(Date)
		expect((await t.call('GET', '/api/users/me', { token: account.accessToken })).status).toBe(401)
		// Two more sessions, then "sign out of all other sessions": only this browser's remains.
		const second = await t.call('POST', '/api/auth/login', { json: { email: account.email, password: PASSWORD } })
		const third = await t.call('POST', '/api/auth/login', { json: { email: account.email, password: PASSWORD } })
		const all = await followed(browser, await submit(browser, '/account/sessions/end', { others: '1' }, '/account/sessions'))
		expect(noticeOf(all)).toBe('Every other session is signed out.')
		for (const token of [second.body.data.accessToken, third.body.data.accessToken]) expect((await sessionRow(String(jwtPayload(token).sid)))?.revokedAt).toBeInstanceOf(Date)
		expect((await sessionRow(sessionId))?.revokedAt).toBeNull()
		expect(decoded(all)).not.toContain('Sign out of all other sessions')
	})

	test('ending this browser’s own session signs it out', async () => {
		const { browser, sessionId } = await signedIn()
		const out = await submit(browser, '/account/sessions/end', { sessionId }, '/account/sessions')
		expect(out.status).toBe(303)
		expect(out.location).toBe('/sign-out')
		expect((await browser.get('/account')).status).toBe(303)
	})
})

describe('/account/applications', () => {
	test('lists the consents with their scopes in words, and withdraws one as DELETE /users/me/consents does', async () => {
		const { browser, account } = await signedIn()
		const empty = decoded(await browser.get('/account/applications'))
		expect(empty).toContain('You have not allowed any application to use your account.')
		const registered = await registerClient(t, { type: 'public', name: 'Photo Printer' })
		const [row] = await t.database.handle.db.query.oauthClients.findMany({ where: (clients, { eq: is }) => is(clients.clientId, registered.clientId) })
		await t.app.decorator.oauthConsents.grant(account.id, row?.id ?? '', ['openid', 'email'])
		const listed = decoded(await browser.get('/account/applications'))
		expect(listed).toContain('<span class="item-name">Photo Printer</span>')
		expect(listed).toContain('<li>See your email address</li>')
		expect(listed).toContain('aria-label="Withdraw access of Photo Printer"')
		const withdrawn = await followed(browser, await submit(browser, '/account/applications/withdrawal', { clientId: registered.clientId }, '/account/applications'))
		expect(noticeOf(withdrawn)).toBe('The application’s access is withdrawn.')
		expect(await t.app.decorator.oauthConsents.list(account.id)).toEqual([])
		const again = await submit(browser, '/account/applications/withdrawal', { clientId: registered.clientId })
		expect(again.status).toBe(404)
		expect(errorOf(again)).toBe('That application has no access to withdraw.')
	})
})

describe('/account/identities', () => {
	test('lists linked identities and unlinks one; never the last way in', async () => {
		const { browser, account } = await signedIn()
		expect(decoded(await browser.get('/account/identities'))).toContain('No other account is linked.')
		const [identity] = await t.database.handle.db
			.insert(identities)
			.values({ id: Bun.randomUUIDv7(), userId: account.id, provider: 'acme', subject: `subject-${account.id}`, email: account.email })
			.returning()
		const listed = decoded(await browser.get('/account/identities'))
		expect(listed).toContain('<span class="item-name">acme</span>')
		expect(listed).toContain('aria-label="Unlink acme"')
		// Without a password, the identity is the last way in: refused as the API refuses it (409).
		const hash = (await userRow(account.id))?.passwordHash ?? null
		await t.database.handle.db.update(users).set({ passwordHash: null }).where(eq(users.id, account.id))
		const refused = await submit(browser, '/account/identities/unlink', { identityId: identity?.id ?? '' }, '/account/identities')
		expect(refused.status).toBe(409)
		expect(errorOf(refused)).toBe('This is the last way you can sign in. Set a password or add a passkey first.')
		// With its password again, it goes.
		await t.database.handle.db.update(users).set({ passwordHash: hash }).where(eq(users.id, account.id))
		const unlinked = await followed(browser, await submit(browser, '/account/identities/unlink', { identityId: identity?.id ?? '' }, '/account/identities'))
		expect(noticeOf(unlinked)).toBe('The account is unlinked.')
		expect(await t.database.handle.db.select().from(identities).where(eq(identities.userId, account.id))).toHaveLength(0)
	})

	test('an account without password or factor confirms with a code by mail', async () => {
		const { browser, account, sessionId } = await signedIn()
		await t.database.handle.db.update(users).set({ passwordHash: null }).where(eq(users.id, account.id))
		await ageSession(t, { sessionId })
		const asked = await submit(browser, '/account/password', { password: 'a first password here' })
		expect(asked.status).toBe(403)
		expect(decoded(asked)).not.toContain('confirmPassword')
		const sent = await browser.post('/account/password', { csrf: csrfOf(asked), confirm: 'email-send', reason: 'reauthentication-required', password: 'a first password here' })
		expect(sent.status).toBe(200)
		expect(decoded(sent)).toContain(`We sent a 6-digit code to ${account.email}.`)
		const [mail] = await waitForMails(t, account.email, 'reauthentication', 1)
		const code = /\b(\d{6})\b/.exec((mail as { text: string }).text)?.[1] ?? ''
		const done = await followed(browser, await browser.post('/account/password', { csrf: csrfOf(sent), confirm: 'email', reason: 'reauthentication-required', password: 'a first password here', confirmCode: code }))
		expect(noticeOf(done)).toBe('Your password is changed. Every other session was signed out.')
		expect(mailsTo(t, account.email, 'reauthentication')).toHaveLength(1)
		expect((await userRow(account.id))?.passwordHash).toStartWith('$argon2')
	})
})

describe('an enrolment-only session (MFA_REQUIRED=all)', () => {
	let strict: TestApp
	beforeAll(async () => {
		strict = await startTestApp({ MFA_REQUIRED: 'all' })
	})
	afterAll(async () => {
		await strict?.close()
	})

	test('sees /account/security only, may enrol an authenticator app there, and nothing else', async () => {
		const account = await signUp(strict, { email: uniqueEmail('page-enrolment') })
		const browser = new PageBrowser(strict)
		expect((await browser.signIn(account.email)).location).toBe('/account')
		for (const path of ['/account', '/account/sessions', '/account/applications']) {
			const page = await browser.get(path)
			expect(page.status).toBe(303)
			expect(page.location).toBe('/account/security')
		}
		const security = await browser.get('/account/security')
		expect(security.status).toBe(200)
		const refused = await browser.post('/account/sessions/end', { csrf: csrfOf(security), others: '1' })
		expect(refused.status).toBe(403)
		expect(errorOf(refused)).toBe('Add a second factor first: this session can only set one up.')
		const enrol = await browser.post('/account/security/totp', { csrf: csrfOf(security), name: 'Phone' })
		expect(enrol.status).toBe(200)
		const secret = /<code class="secret"[^>]*>([A-Z2-7]+)<\/code>/.exec(decoded(enrol))?.[1] ?? ''
		await awayFromStepBoundary()
		const on = await browser.post('/account/security/totp/activation', { csrf: csrfOf(enrol), factorId: PageBrowser.field(enrol.html, 'factorId'), code: totpCode(secret) })
		expect(on.status).toBe(200)
		expect(decoded(on)).toContain('Two-step verification is on.')
		// The factor ends the enrolment: every section opens.
		expect((await browser.get('/account/sessions')).status).toBe(200)
	})
})
