/**
 * The console's organizations as an operator uses them, in Debian's Chromium: signed in through the real /sign-in
 * page, creating an organization, adding a member by email, changing their roles, inviting by email (the mail goes
 * out over SMTP) and revoking it, trying to remove the last owner (a sentence), deactivating; searching and sorting
 * the list; defining, editing and deleting an organization role; axe-core at 320 px and 1280 px, light and dark,
 * under the pages' CSP. Screenshots land in test-artifacts/console/organizations-*.png.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import type { Browser, BrowserContext } from 'playwright-core'
import type { TestApp } from './support/app'
import { contextIn, seriousViolations, VIEW_STATES } from './support/browser'
import { consoleScreenshot, launchConsoleBrowser, listeningConsole, signInToConsole } from './support/console-browser'
import { signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'
import { startAppWithSmtp, type SmtpSink } from './support/mail'

setDefaultTimeout(120_000)

let t: TestApp
let sink: SmtpSink
let app: Awaited<ReturnType<typeof listeningConsole<Awaited<ReturnType<typeof startAppWithSmtp>>>>>
let browser: Browser
let base: string
let admin: Account
let grace: Account

beforeAll(async () => {
	// Invitations go out as mail: an SMTP sink of the test's own.
	app = await listeningConsole({}, startAppWithSmtp)
	;({ t, sink, base } = app)
	browser = await launchConsoleBrowser()
	admin = await signUpAdmin(t, uniqueEmail('operator'))
	grace = await signUp(t, { email: uniqueEmail('grace'), name: 'Grace Hopper' })
})
afterAll(async () => {
	await browser?.close()
	await app?.close()
})

/** Opens `path` of the console in a fresh browser, signing in as the operator at the real /sign-in page on the way. */
const signIn = (context: BrowserContext, path: string, landing: string) => signInToConsole(context, { base, email: admin.email, path, landing })

const screenshot = consoleScreenshot
const api = (method: string, path: string, json?: unknown) => t.call(method, path, { token: admin.accessToken, ...(json === undefined ? {} : { json }) })
const memberRoles = async (organizationId: string, userId: string) => (await api('GET', `/api/organizations/${organizationId}/members/${userId}`)).body.data?.roles

describe('an operator', () => {
	test('creates an organization, adds a member by email, changes their role, invites by email, is refused removing the last owner, and deactivates it', async () => {
		const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
		const { page, violations } = await signIn(context, '/console/organizations', 'Organizations')

		await page.fill('#organization-name', 'Acme Corp')
		await page.click('button:has-text("Create the organization")')
		await page.locator('main h1', { hasText: 'Acme Corp' }).waitFor()
		const id = new URL(page.url()).pathname.split('/').pop() ?? ''
		expect(id).toMatch(/^[0-9a-f-]{36}$/)
		await page.locator('#announce', { hasText: 'you are its first owner' }).waitFor()
		expect(await page.textContent('#organization-heading ~ .facts')).toContain('acme-corp')
		expect(await memberRoles(id, admin.id)).toEqual(['owner'])

		// A member added by their email: looked up through GET /users?email=, added as a member.
		await page.fill('#add-member-who', grace.email.toUpperCase())
		await page.click('button:has-text("Add the member")')
		await page.locator('#announce', { hasText: `${grace.email} is a member of Acme Corp (member).` }).waitFor()
		await page.locator('#members-heading ~ .table-wrap tr', { hasText: grace.email }).waitFor()
		expect(await memberRoles(id, grace.id)).toEqual(['member'])
		// Nobody has this address: the sentence says to invite it instead.
		const stranger = uniqueEmail('stranger')
		await page.fill('#add-member-who', stranger)
		await page.click('button:has-text("Add the member")')
		expect(await page.locator('#add-member-heading ~ .alert-slot [role=alert]').textContent()).toContain(`No account has the address ${stranger}`)

		// Her roles changed: admin instead of member.
		await page.click(`button[aria-label="Change roles of ${grace.email}"]`)
		expect(await page.evaluate('document.activeElement?.id')).toBe('editor-heading')
		await page.check('.editor input[name=member-roles][value=admin]')
		await page.uncheck('.editor input[name=member-roles][value=member]')
		await screenshot(page, 'organizations-roles-editor')
		await page.click('button:has-text("Save the roles")')
		await page.locator('#announce', { hasText: `${grace.email} now holds admin.` }).waitFor()
		expect(await memberRoles(id, grace.id)).toEqual(['admin'])

		// An invitation by email: the mail goes out, the invitation is listed, then revoked.
		const invitee = uniqueEmail('invitee')
		await page.fill('#invite-email', invitee)
		await page.click('button:has-text("Send the invitation")')
		await page.locator('#announce', { hasText: `An invitation to Acme Corp is sent to ${invitee}.` }).waitFor()
		const row = page.locator('#invitations-heading ~ .table-wrap tr', { hasText: invitee })
		expect(await row.textContent()).toContain('pending')
		expect((await sink.waitFor(invitee, { subject: 'invited' })).text).toContain('#token=')
		await screenshot(page, 'organizations-organization')
		await page.click(`button[aria-label="Revoke the invitation of ${invitee}"]`)
		expect(await page.locator('dialog').textContent()).toContain('Its link opens nothing any more')
		await page.click('dialog button[data-confirm]')
		await page.locator('#invitations-heading ~ .table-wrap tr', { hasText: 'revoked' }).waitFor()
		const invitations = (await api('GET', `/api/organizations/${id}/invitations`)).body.data.items
		expect(invitations.map((each: { email: string; status: string }) => [each.email, each.status])).toEqual([[invitee, 'revoked']])

		// The last owner: removing them is refused, in a sentence, and nothing changes.
		await page.click(`button[aria-label="Remove ${admin.email}"]`)
		expect(await page.locator('dialog').textContent()).toContain('Their organization tokens for it stop at once')
		await page.click('dialog button[data-confirm]')
		const alert = page.locator('.editor [role=alert]')
		await alert.waitFor()
		expect(await alert.textContent()).toContain('This is the organization’s last owner')
		expect(await page.evaluate("document.activeElement?.getAttribute('role')")).toBe('alert')
		await screenshot(page, 'organizations-last-owner')
		expect(await memberRoles(id, admin.id)).toEqual(['owner'])

		// Deactivated: confirmed, and its members' organization tokens stop at once.
		const refreshed = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: grace.refreshToken, organizationId: id } })
		expect(refreshed.status).toBe(200)
		await page.click('button:has-text("Deactivate…")')
		expect(await page.locator('dialog').textContent()).toContain('organization tokens stop at once')
		await page.click('dialog button[data-confirm]')
		await page.locator('main h1 .badge', { hasText: 'Deactivated' }).waitFor()
		await page.locator('#announce', { hasText: 'Acme Corp is deactivated.' }).waitFor()
		expect((await api('GET', `/api/organizations/${id}`)).body.data.status).toBe('deactivated')
		// No form offers a change the API would refuse now.
		expect(await page.locator('#add-member-who, #invite-email, #rename-name').count()).toBe(0)
		await screenshot(page, 'organizations-deactivated')
		expect(violations).toEqual([])
		await context.close()
	})

	test('searches the organizations by name or slug, sorts them, and pages through them', async () => {
		const tag = crypto.randomUUID().slice(0, 8)
		for (const name of ['Zeta', 'Alpha', 'Mid']) expect((await api('POST', '/api/organizations', { name: `${name} ${tag}` })).status).toBe(201)
		for (let i = 0; i < 20; i++) expect((await api('POST', '/api/organizations', { name: `Bulk ${tag} ${i}` })).status).toBe(201)
		const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
		const { page, violations } = await signIn(context, '/console/organizations', 'Organizations')
		await page.fill('#filter-q', `alpha-${tag}`)
		await page.click('button:has-text("Search")')
		await page.waitForURL((url) => url.searchParams.get('q') === `alpha-${tag}`)
		await page.locator('.total', { hasText: '1 organization on this page' }).waitFor()
		expect(await page.locator('#results-heading ~ .table-wrap tbody tr td:first-child').allTextContents()).toEqual([`Alpha ${tag}`])

		await page.fill('#filter-q', tag)
		await page.selectOption('#filter-sort', 'name')
		await page.click('button:has-text("Search")')
		await page.waitForURL((url) => url.searchParams.get('sort') === 'name')
		await page.locator('.total', { hasText: '20 organizations on this page · page 1' }).waitFor()
		const first = await page.locator('#results-heading ~ .table-wrap tbody tr td:first-child').allTextContents()
		expect(first[0]).toBe(`Alpha ${tag}`)
		await screenshot(page, 'organizations-search')
		await page.click('button:has-text("Next page")')
		await page.locator('.total', { hasText: '3 organizations on this page · page 2' }).waitFor()
		const second = await page.locator('#results-heading ~ .table-wrap tbody tr td:first-child').allTextContents()
		expect(second.slice(-2)).toEqual([`Mid ${tag}`, `Zeta ${tag}`])
		expect(second.some((name) => first.includes(name))).toBe(false)
		await page.click('button:has-text("Previous page")')
		await page.locator('.total', { hasText: 'page 1' }).waitFor()
		expect(await page.locator('#results-heading ~ .table-wrap tbody tr td:first-child').allTextContents()).toEqual(first)
		expect(violations).toEqual([])
		await context.close()
	})

	test('defines an organization role, edits its permissions, and deletes it; the built-in roles offer no change', async () => {
		const name = `billing-${crypto.randomUUID().slice(0, 8)}`
		const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
		const { page, violations } = await signIn(context, '/console/organizations', 'Organizations')
		await page.locator('#roles-heading ~ .table-wrap', { hasText: 'members:manage' }).waitFor()
		expect(await page.locator('button[aria-label="Edit the role owner"]').count()).toBe(0)

		await page.fill('#role-name', name)
		await page.fill('#role-description', 'Reads the invoices')
		await page.fill('#role-permissions', 'invoices:read')
		await page.click('button:has-text("Define the role")')
		await page.locator('#announce', { hasText: `The role ${name} is defined.` }).waitFor()
		expect((await api('GET', `/api/organization-roles/${name}`)).body.data).toMatchObject({ permissions: ['invoices:read'], description: 'Reads the invoices', builtIn: false })

		// `*` is the owner's alone: a sentence naming the field.
		await page.click(`button[aria-label="Edit the role ${name}"]`)
		await page.locator('#role-form-heading', { hasText: `Edit the role ${name}` }).waitFor()
		await page.fill('#role-permissions', '*')
		await page.click('button:has-text("Save the role")')
		expect(await page.locator('#role-form-heading ~ .alert-slot [role=alert]').textContent()).toContain('Some values are not valid: permissions/0')
		await page.fill('#role-permissions', 'invoices:read\ninvoices:write')
		await page.click('button:has-text("Save the role")')
		await page.locator('#announce', { hasText: `The role ${name} is saved` }).waitFor()
		expect((await api('GET', `/api/organization-roles/${name}`)).body.data.permissions).toEqual(['invoices:read', 'invoices:write'])
		await screenshot(page, 'organizations-roles')

		await page.click(`button[aria-label="Delete the role ${name}"]`)
		expect(await page.locator('dialog').textContent()).toContain('refuses while a member holds it')
		await page.click('dialog button[data-confirm]')
		await page.locator('#announce', { hasText: `The role ${name} is deleted.` }).waitFor()
		expect((await api('GET', `/api/organization-roles/${name}`)).status).toBe(404)
		expect(violations).toEqual([])
		await context.close()
	})
})

describe('the keyboard alone', () => {
	test("changes a member's roles: the focus goes into the roles editor, Space checks a role, Enter saves; Cancel gives the focus back", async () => {
		const made = await api('POST', '/api/organizations', { name: 'Keyboard Co' })
		const id = made.body.data.id as string
		expect((await api('POST', `/api/organizations/${id}/members`, { userId: grace.id, roles: ['member'] })).status).toBe(201)
		const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
		const { page, violations } = await signIn(context, `/console/organizations/${id}`, 'Keyboard Co')
		const tabTo = async (matches: string, limit = 80) => {
			for (let i = 0; i < limit; i++) {
				await page.keyboard.press('Tab')
				if (await page.evaluate(matches)) return
			}
			throw new Error(`Tab never reached ${matches}`)
		}
		const changeButton = `document.activeElement?.getAttribute('aria-label') === ${JSON.stringify(`Change roles of ${grace.email}`)}`
		await tabTo(changeButton)
		expect(await page.evaluate('getComputedStyle(document.activeElement).outlineStyle')).not.toBe('none')
		await page.keyboard.press('Enter')
		expect(await page.evaluate('document.activeElement?.id')).toBe('editor-heading')
		await page.keyboard.press('Tab')
		expect(await page.evaluate('document.activeElement?.value')).toBe('admin')
		await page.keyboard.press('Space')
		await tabTo("document.activeElement?.textContent === 'Save the roles'", 5)
		await page.keyboard.press('Enter')
		await page.locator('#announce', { hasText: `${grace.email} now holds admin, member.` }).waitFor()
		expect(await memberRoles(id, grace.id)).toEqual(['admin', 'member'])

		// Opened again and cancelled: nothing changes, and the focus is back on the button that opened it.
		await tabTo(changeButton)
		await page.keyboard.press('Enter')
		await tabTo("document.activeElement?.textContent === 'Cancel'", 6)
		await page.keyboard.press('Enter')
		expect(await page.locator('#editor-heading').count()).toBe(0)
		expect(await page.evaluate(changeButton)).toBe(true)
		expect(violations).toEqual([])
		await context.close()
	})
})

describe('axe-core', () => {
	test('no serious or critical violation on the list, an organization, its roles editor and a confirmation, at 320 px and 1280 px, light and dark', async () => {
		const made = await api('POST', '/api/organizations', { name: 'Initech' })
		expect(made.status).toBe(201)
		const id = made.body.data.id as string
		expect((await api('POST', `/api/organizations/${id}/members`, { userId: grace.id, roles: ['member'] })).status).toBe(201)
		expect((await api('POST', `/api/organizations/${id}/invitations`, { email: uniqueEmail('invited'), roles: ['member'] })).status).toBe(201)
		const found: Record<string, string[]> = {}
		for (const state of VIEW_STATES) {
			const context = await contextIn(browser, state)
			const { page, violations } = await signIn(context, '/console/organizations', 'Organizations')
			const check = async (name: string) => {
				const label = `organizations-${name}-${state.width}-${state.scheme}`
				await screenshot(page, label)
				found[label] = await seriousViolations(page)
				expect({ label, fits: await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth') }).toEqual({ label, fits: true })
			}
			await page.locator('#roles-heading').waitFor()
			await page.locator('#results-heading ~ .table-wrap').waitFor()
			await check('list')
			await page.goto(`${base}/console/organizations/${id}`)
			await page.locator('main h1', { hasText: 'Initech' }).waitFor()
			await check('organization')
			await page.click(`button[aria-label="Change roles of ${grace.email}"]`)
			await page.locator('#editor-heading').waitFor()
			await check('editor')
			await page.click('button:has-text("Deactivate…")')
			await page.locator('dialog[open]').waitFor()
			await check('confirm')
			await page.keyboard.press('Escape')
			expect(violations).toEqual([])
			await context.close()
		}
		expect(Object.values(found).flat()).toEqual([])
	})
})
