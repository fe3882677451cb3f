/**
 * /invitation in a real Chromium (Debian's, at /usr/bin/chromium): the link's fragment token read by
 * /pages/invitation.js under the pages' policy, signing in first and coming back, the organization and roles shown
 * with the Accept button (the service of POST /invitation-acceptances), every refusal as a sentence, the page
 * without script, and axe-core at 320 px and 1280 px in light and dark on every state. Screenshots land in
 * test-artifacts/pages/.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { and, eq } from 'drizzle-orm'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { organizationMembers, users } from '../src/db/schema'
import { startTestApp, type TestApp } from './support/app'
import { contextIn, launchChromium, openPage, PAGE_ARTIFACTS, pageStateChecker, VIEW_STATES } from './support/browser'
import { PASSWORD, signUp, uniqueEmail, type Account } from './support/fixtures'
import { loggedMail } from './support/mail'
import { seedOrganization, type SeededOrganization } from './support/organization-seed'

setDefaultTimeout(120_000)

let t: TestApp
let server: ReturnType<TestApp['app']['listen']>
let browser: Browser
let base: string
let owner: Account
let org: SeededOrganization

beforeAll(async () => {
	t = await startTestApp()
	server = t.app.listen({ port: 0, hostname: '127.0.0.1' })
	base = `http://127.0.0.1:${server.server?.port}`
	browser = await launchChromium()
	owner = await verified(await signUp(t, { email: uniqueEmail('owner') }))
	org = await seedOrganization(t.database.handle.db, [{ userId: owner.id, roles: ['owner'] }], { name: 'Acme Robotics' })
})
afterAll(async () => {
	await browser?.close()
	await server?.stop()
	await t?.close()
})

async function verified(account: Account): Promise<Account> {
	await t.database.handle.db.update(users).set({ emailVerifiedAt: new Date() }).where(eq(users.id, account.id))
	return account
}

/** A verified account invited (by the owner) with `roles`, and the token its mail carries (the mail goes to the log). */
async function invitedAccount(roles = ['admin', 'member']) {
	const invitee = await verified(await signUp(t, { email: uniqueEmail('invitee') }))
	const res = await t.call('POST', `/api/organizations/${org.id}/invitations`, { token: owner.accessToken, json: { email: invitee.email, roles } })
	expect(res.status).toBe(201)
	const mail = await loggedMail(t, invitee.email, 10_000, 'invitation')
	const link = /^(http\S+#token=([A-Za-z0-9_-]+))$/m.exec(mail.text)
	if (!link?.[2]) throw new Error(`no link in mail:\n${mail.text}`)
	expect(link[1]).toStartWith('http://localhost/invitation#token=')
	return { invitee, token: link[2] }
}

/** Opens the mail's link, as from the mail: a new load of the page (not a fragment change of the page already shown). */
async function openLink(page: Page, token: string) {
	await page.goto('about:blank')
	await page.goto(`${base}/invitation#token=${token}`)
}

const signInButton = 'form[method=post] button[type=submit]:not([formaction])'

/** Signs in on /sign-in as it stands (its return_to kept), landing where it returns to. */
async function signInHere(page: Page, email: string, landing: string) {
	await page.fill('#email', email)
	await page.fill('#password', PASSWORD)
	await Promise.all([page.waitForURL(landing), page.click(signInButton)])
}

const isMember = async (userId: string) =>
	(await t.database.handle.db.select().from(organizationMembers).where(and(eq(organizationMembers.organizationId, org.id), eq(organizationMembers.userId, userId)))).length === 1

describe('the invitation link in Chromium', () => {
	test('signed out: sign in first, come back, see the organization and roles, accept', async () => {
		const { invitee, token } = await invitedAccount()
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await openPage(context)
		await openLink(page, token)
		await page.waitForSelector('#invitation-found:not([hidden])')
		// The token left the address bar (and the history).
		expect(page.url()).toBe(`${base}/invitation`)
		await Promise.all([page.waitForURL(`${base}/sign-in?return_to=%2Finvitation`), page.click('a.button[href^="/sign-in"]')])
		// Back from sign-in, the script finds the token where it left it and shows the invitation.
		await signInHere(page, invitee.email, `${base}/invitation`)
		await page.waitForSelector('text=Join Acme Robotics')
		const shown = await page.textContent('main')
		expect(shown).toContain('You are invited to join Acme Robotics as admin, member.')
		expect(shown).toContain(`The invitation is for ${invitee.email}`)
		await Promise.all([page.waitForLoadState('load'), page.click('button[name=accept]')])
		await page.waitForSelector('text=You joined Acme Robotics')
		expect(await isMember(invitee.id)).toBe(true)
		// Nothing is kept once it is accepted.
		expect(await page.evaluate("sessionStorage.getItem('latchkey.invitation')")).toBeNull()
		expect(violations).toEqual([])
		await context.close()
	})

	test('signed in as another account: the sentence says whose it is, and no Accept button; a used link is a sentence too', async () => {
		const { invitee, token } = await invitedAccount(['member'])
		const other = await verified(await signUp(t, { email: uniqueEmail('other') }))
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await openPage(context)
		await page.goto(`${base}/sign-in?return_to=%2Faccount`)
		await signInHere(page, other.email, `${base}/account`)
		await openLink(page, token)
		await page.waitForSelector('#error-summary')
		expect(await page.textContent('#error-summary')).toContain(`This invitation is for ${invitee.email}, not for the account you are signed in with.`)
		expect(await page.isVisible('button[name=accept]')).toBe(false)
		expect(await isMember(other.id)).toBe(false)

		expect((await t.call('POST', '/api/invitation-acceptances', { token: invitee.accessToken, json: { token } })).status).toBe(200)
		await openLink(page, token)
		await page.waitForSelector('#error-summary')
		expect(await page.textContent('#error-summary')).toContain('This invitation was used, revoked or does not exist.')
		expect(violations).toEqual([])
		await context.close()
	})

	test('an address not yet confirmed is asked to confirm it first, and nothing is accepted', async () => {
		const { invitee, token } = await invitedAccount(['member'])
		await t.database.handle.db.update(users).set({ emailVerifiedAt: null }).where(eq(users.id, invitee.id))
		const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
		const { page, violations } = await openPage(context)
		const { check, found } = pageStateChecker(page, { width: 1280, scheme: 'light' })
		await page.goto(`${base}/sign-in?return_to=%2Faccount`)
		await signInHere(page, invitee.email, `${base}/account`)
		await openLink(page, token)
		await page.waitForSelector('#error-summary')
		expect(await page.textContent('#error-summary')).toContain('Confirm your email address first')
		expect(await page.isVisible('button[name=accept]')).toBe(false)
		expect(await page.getAttribute('a.button', 'href')).toBe('/email-verification?return_to=%2Finvitation')
		await check('invitation-unverified')
		expect(found).toEqual({ 'invitation-unverified': [] })
		expect(await isMember(invitee.id)).toBe(false)
		expect(violations).toEqual([])
		await context.close()
	})

	test('without script the page says the link needs it, or a new invitation', async () => {
		const { token } = await invitedAccount(['member'])
		const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1280, height: 800 } })
		const { page } = await openPage(context)
		await openLink(page, token)
		expect(await page.textContent('main')).toContain('This page reads the invitation from its link with script, which is turned off.')
		expect(await page.isVisible('#invitation-found')).toBe(false)
		await page.screenshot({ path: join(PAGE_ARTIFACTS, 'invitation-no-script.png'), fullPage: true })
		await context.close()
	})
})

describe('axe-core finds no serious or critical violation', () => {
	for (const { width, scheme } of VIEW_STATES)
		test(`on /invitation, every state, at ${width} px, ${scheme}`, async () => {
			const { invitee, token } = await invitedAccount()
			const stranger = await verified(await signUp(t, { email: uniqueEmail('stranger') }))
			const context = await contextIn(browser, { width, scheme })
			const { page, violations } = await openPage(context)
			const { check, found } = pageStateChecker(page, { width, scheme })

			await page.goto(`${base}/invitation`)
			await page.waitForSelector('#invitation-missing:not([hidden])')
			await check('invitation-missing')
			await openLink(page, token)
			await page.waitForSelector('#invitation-found:not([hidden])')
			await check('invitation-signed-out')

			// Signed in with the wrong account first.
			await page.goto(`${base}/sign-in?return_to=%2Finvitation`)
			await signInHere(page, stranger.email, `${base}/invitation`)
			await page.waitForSelector('#error-summary')
			await check('invitation-other-address')
			await Promise.all([page.waitForURL(/\/sign-in\?/), page.click('text=Sign in with another account')])
			await signInHere(page, invitee.email, `${base}/invitation`)
			await page.waitForSelector('button[name=accept]')
			await check('invitation-review')
			await Promise.all([page.waitForLoadState('load'), page.click('button[name=accept]')])
			await page.waitForSelector('text=You joined Acme Robotics')
			await check('invitation-accepted')
			await openLink(page, token)
			await page.waitForSelector('#error-summary')
			await check('invitation-used')

			expect(found).toEqual({
				'invitation-missing': [],
				'invitation-signed-out': [],
				'invitation-other-address': [],
				'invitation-review': [],
				'invitation-accepted': [],
				'invitation-used': [],
			})
			expect(violations).toEqual([])
			await context.close()
		})
})
