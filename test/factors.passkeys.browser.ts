/**
 * Passkeys as a person uses them: Debian's Chromium (driven by playwright-core) with the DevTools virtual
 * authenticator (internal transport, resident keys, user verification), on a page served from an origin
 * in WEBAUTHN_ORIGINS that calls the API with @simplewebauthn/browser and fetch. On PGlite, and on
 * PostgreSQL with TEST_DATABASE_URL.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { chromium, type Browser, type CDPSession, type Page } from 'playwright-core'
import { factors, webauthnChallenges } from '../src/db/schema'
import { problem, startTestApp, type TestApp } from './support/app'
import { jwtPayload, login, PASSWORD, signUp } from './support/fixtures'
import type { PasskeyPage } from './support/passkey-page/page'
import { servePasskeyPage } from './support/passkey-page/server'

setDefaultTimeout(60_000)

let t: TestApp
let api: ReturnType<TestApp['app']['listen']>
let apiBase: string
let browser: Browser
let frontend: Awaited<ReturnType<typeof servePasskeyPage>>
/** A page of the same RP ID (localhost) on an origin that WEBAUTHN_ORIGINS does not list. */
let stranger: Awaited<ReturnType<typeof servePasskeyPage>>

beforeAll(async () => {
	frontend = await servePasskeyPage()
	stranger = await servePasskeyPage()
	t = await startTestApp({ WEBAUTHN_RP_ID: 'localhost', WEBAUTHN_ORIGINS: frontend.origin, CORS_ORIGINS: frontend.origin })
	api = t.app.listen({ port: 0, hostname: '127.0.0.1' })
	apiBase = `http://127.0.0.1:${api.server?.port}`
	browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] })
})
afterAll(async () => {
	await browser?.close()
	await api?.stop()
	await t?.close()
	frontend?.stop()
	stranger?.stop()
})

/** A fresh page of `origin` with its own virtual authenticator: a platform passkey that verifies the user. */
async function openPage(origin = frontend.origin): Promise<{ page: Page; cdp: CDPSession; authenticatorId: string }> {
	const page = await browser.newPage()
	const errors: string[] = []
	page.on('pageerror', (error) => errors.push(error.message))
	await page.goto(`${origin}/`)
	await page.waitForFunction(() => 'latchkeyPage' in globalThis)
	const cdp = await page.context().newCDPSession(page)
	await cdp.send('WebAuthn.enable')
	const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
		options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
	})
	expect(errors).toEqual([])
	return { page, cdp, authenticatorId }
}

type Answer = { status: number; body: Record<string, any> }
const inPage = <K extends keyof PasskeyPage>(page: Page, method: K, ...args: Parameters<PasskeyPage[K]>) =>
	page.evaluate(
		([name, values]) => (globalThis as unknown as { latchkeyPage: Record<string, (...a: unknown[]) => Promise<unknown>> }).latchkeyPage[name]?.(...values),
		[method, args] as const,
	) as Promise<Answer>

const storedCounter = async (userId: string) =>
	(await t.database.handle.db.select({ signCount: factors.signCount }).from(factors).where(eq(factors.userId, userId)))[0]?.signCount

/** A signed-up account whose passkey lives in the page's virtual authenticator. */
async function accountWithPasskey() {
	const account = await signUp(t)
	const opened = await openPage()
	const activated = await inPage(opened.page, 'registerPasskey', apiBase, account.accessToken)
	expect(activated.status).toBe(200)
	return { account, ...opened, activated }
}

describe('passkeys in Chromium', () => {
	test('registering: the page creates a resident, user-verified credential and the first factor brings recovery codes', async () => {
		const { account, cdp, authenticatorId, activated, page } = await accountWithPasskey()
		expect(activated.body.data.factor).toMatchObject({ type: 'webauthn', status: 'active', name: 'Virtual authenticator' })
		expect(activated.body.data.recoveryCodes).toHaveLength(10)
		const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId })
		expect(credentials).toHaveLength(1)
		expect(credentials[0]?.isResidentCredential).toBe(true)
		expect(credentials[0]?.rpId).toBe('localhost')
		const [stored] = await t.database.handle.db.select().from(factors).where(eq(factors.userId, account.id))
		expect(stored?.credentialId).toBe(credentials[0]?.credentialId.replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, ''))
		await page.close()
	})

	test('signing in passwordless: tokens at aal2 with amr hwk + mfa, for the account that owns the passkey', async () => {
		const { account, page } = await accountWithPasskey()
		const signedIn = await inPage(page, 'signInWithPasskey', apiBase)
		expect(signedIn.status).toBe(200)
		expect(signedIn.body.data.user.id).toBe(account.id)
		expect(jwtPayload(signedIn.body.data.accessToken)).toMatchObject({ sub: account.id, amr: ['hwk', 'mfa'], aal: 'aal2' })
		await page.close()
	})

	test('signing in with a password, then the passkey as the second factor', async () => {
		const { account, page } = await accountWithPasskey()
		const passwordStep = await t.call('POST', '/api/auth/login', { json: { email: account.email, password: PASSWORD } })
		expect(passwordStep.status).toBe(200)
		expect(passwordStep.body.data).toEqual({ mfaRequired: true, mfaToken: expect.any(String), methods: ['webauthn', 'recovery-code'] })
		const completed = await inPage(page, 'completeWithPasskey', apiBase, passwordStep.body.data.mfaToken)
		expect(completed.status).toBe(200)
		expect(completed.body.data.user.id).toBe(account.id)
		expect(jwtPayload(completed.body.data.accessToken)).toMatchObject({ sub: account.id, amr: ['pwd', 'hwk', 'mfa'], aal: 'aal2' })
		await page.close()
	})

	test('a cloned credential, whose counter is behind the original’s, is refused', async () => {
		const { account, page, cdp, authenticatorId } = await accountWithPasskey()
		for (let i = 0; i < 2; i++) expect((await inPage(page, 'signInWithPasskey', apiBase)).status).toBe(200)
		const [original] = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials
		if (!original) throw new Error('no credential')
		const [stored] = await t.database.handle.db.select().from(factors).where(eq(factors.userId, account.id))
		expect(stored?.signCount).toBe(original.signCount)
		expect(original.signCount).toBeGreaterThan(0)

		// The same key in another authenticator that has counted less: what a copied passkey looks like.
		const clone = await openPage()
		await clone.cdp.send('WebAuthn.addCredential', { authenticatorId: clone.authenticatorId, credential: { ...original, signCount: 0 } })
		const refused = await inPage(clone.page, 'signInWithPasskey', apiBase)
		expect(refused.status).toBe(401)
		expect(refused.body).toEqual(problem('invalid-credentials', 401, '/api/auth/passkey', 'The passkey was not accepted'))
		expect(await storedCounter(account.id)).toBe(original.signCount)
		// The original still signs in, and its counter moves on.
		expect((await inPage(page, 'signInWithPasskey', apiBase)).status).toBe(200)
		expect(await storedCounter(account.id)).toBeGreaterThan(original.signCount)
		await page.close()
		await clone.page.close()
	})

	test('an assertion made on another origin (same RP ID, not in WEBAUTHN_ORIGINS) is refused, and an assertion is good once', async () => {
		const { page, cdp, authenticatorId } = await accountWithPasskey()
		const [credential] = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials
		if (!credential) throw new Error('no credential')
		const elsewhere = await openPage(stranger.origin)
		await elsewhere.cdp.send('WebAuthn.addCredential', { authenticatorId: elsewhere.authenticatorId, credential: { ...credential, signCount: 1000 } })
		const options = (await t.call('POST', '/api/auth/passkey/challenges')).body.data
		const phished = await inPage(elsewhere.page, 'assert', options)
		expect(JSON.parse(Buffer.from((phished as unknown as { response: { clientDataJSON: string } }).response.clientDataJSON, 'base64url').toString()).origin).toBe(stranger.origin)
		const refused = await t.call('POST', '/api/auth/passkey', { json: { response: phished } })
		expect(refused.status).toBe(401)
		expect(refused.body).toEqual(problem('invalid-credentials', 401, '/api/auth/passkey', 'The passkey was not accepted'))

		// The same authenticator on the listed origin: accepted once, refused when replayed.
		const honestOptions = (await t.call('POST', '/api/auth/passkey/challenges')).body.data
		const honest = await inPage(page, 'assert', honestOptions)
		const accepted = await t.call('POST', '/api/auth/passkey', { json: { response: honest } })
		expect(accepted.status).toBe(200)
		expect(jwtPayload(accepted.body.data.accessToken)).toMatchObject({ amr: ['hwk', 'mfa'], aal: 'aal2' })
		const replayed = await t.call('POST', '/api/auth/passkey', { json: { response: honest } })
		expect(replayed.status).toBe(401)
		expect(replayed.body).toEqual(problem('invalid-credentials', 401, '/api/auth/passkey', 'The passkey was not accepted'))
		await page.close()
		await elsewhere.page.close()
	})

	test('a challenge answers once: a fresh assertion for a spent challenge, one for a challenge the server never issued, and one for an expired challenge are refused', async () => {
		const { page } = await accountWithPasskey()
		const refusal = problem('invalid-credentials', 401, '/api/auth/passkey', 'The passkey was not accepted')
		const options = (await t.call('POST', '/api/auth/passkey/challenges')).body.data
		expect((await t.call('POST', '/api/auth/passkey', { json: { response: await inPage(page, 'assert', options) } })).status).toBe(200)
		// A new signature (the counter moved on) over the spent challenge.
		const again = await t.call('POST', '/api/auth/passkey', { json: { response: await inPage(page, 'assert', options) } })
		expect(again.status).toBe(401)
		expect(again.body).toEqual(refusal)

		const madeUp = { ...options, challenge: Buffer.from('never issued by the server').toString('base64url') }
		const unknown = await t.call('POST', '/api/auth/passkey', { json: { response: await inPage(page, 'assert', madeUp) } })
		expect(unknown.status).toBe(401)
		expect(unknown.body).toEqual(refusal)

		const stale = (await t.call('POST', '/api/auth/passkey/challenges')).body.data
		await t.database.handle.db.update(webauthnChallenges).set({ expiresAt: new Date(Date.now() - 1000) }).where(eq(webauthnChallenges.challenge, stale.challenge))
		const expired = await t.call('POST', '/api/auth/passkey', { json: { response: await inPage(page, 'assert', stale) } })
		expect(expired.status).toBe(401)
		expect(expired.body).toEqual(refusal)
		// The passkey itself is fine.
		expect((await inPage(page, 'signInWithPasskey', apiBase)).status).toBe(200)
		await page.close()
	})

	test('removing the passkey: refused to a password session from before it (aal1), done by a passkey session (aal2)', async () => {
		const account = await signUp(t)
		const before = await login(t, account.email)
		const { page } = await openPage()
		expect((await inPage(page, 'registerPasskey', apiBase, account.accessToken)).status).toBe(200)
		const [factor] = (await t.call('GET', '/api/users/me/factors', { token: before.accessToken })).body.data.items
		const refused = await t.call('DELETE', `/api/users/me/factors/${factor.id}`, { token: before.accessToken })
		expect(refused.status).toBe(403)
		expect(refused.body.type).toEndWith('/mfa-required')
		const signedIn = await inPage(page, 'signInWithPasskey', apiBase)
		expect((await t.call('DELETE', `/api/users/me/factors/${factor.id}`, { token: signedIn.body.data.accessToken })).status).toBe(200)
		// With no factor left, the password alone signs in again.
		expect(jwtPayload((await login(t, account.email)).accessToken).aal).toBe('aal1')
		await page.close()
	})
})
