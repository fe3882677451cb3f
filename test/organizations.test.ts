import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { asc, sql } from 'drizzle-orm'
import { auditEvents, organizationMembers, users } from '../src/db/schema'
import { problem, startTestApp, type CallResult, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { signUp, signUpAdmin, type Account } from './support/fixtures'
import { seedOrganization } from './support/organization-seed'
import { WebhookReceiver } from './support/webhook-receiver'

// Organizations, members and organization roles through HTTP (API.md, Organizations): who may do what, each
// refusal with its problem, the lists, and the events and audit rows of each change. The last owner under
// parallel requests is organizations.races.test.ts.

setDefaultTimeout(60_000)

let database: TestDatabase
let receiver: WebhookReceiver
let t: TestApp
let admin: Account
let webhookSecret: string

beforeAll(async () => {
	database = await createTestDatabase()
	receiver = await WebhookReceiver.start()
	t = await startTestApp({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, database)
	admin = await signUpAdmin(t)
	const events = ['organization.created', 'organization.updated', 'organization.deactivated', 'member.added', 'member.updated', 'member.removed']
	const hook = await t.call('POST', '/api/webhooks', { token: admin.accessToken, json: { url: receiver.url, events } })
	expect(hook.status).toBe(201)
	webhookSecret = hook.body.data.secret
})
afterAll(async () => {
	await t.close()
	await receiver.stop()
	await database.drop()
})

const ISO = expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
const UNKNOWN = '01939c3e-0000-7000-8000-000000000000'
let slugs = 0
const uniqueSlug = (label = 'org') => `${label}-${Date.now().toString(36)}-${(slugs++).toString(36)}`

interface Organization {
	id: string
	name: string
	slug: string
	status: string
	createdAt: string
	deactivatedAt: string | null
}

async function createOrganization(token = admin.accessToken, body: Record<string, unknown> = {}): Promise<Organization> {
	const res = await t.call('POST', '/api/organizations', { token, json: { name: 'Acme', slug: uniqueSlug(), ...body } })
	expect(res.status).toBe(201)
	return res.body.data
}

const addMember = (orgId: string, userId: string, roles: string[], token = admin.accessToken) =>
	t.call('POST', `/api/organizations/${orgId}/members`, { token, json: { userId, roles } })
const setRoles = (orgId: string, userId: string, roles: string[], token = admin.accessToken) =>
	t.call('PUT', `/api/organizations/${orgId}/members/${userId}`, { token, json: { roles } })
const removeMember = (orgId: string, userId: string, token = admin.accessToken) => t.call('DELETE', `/api/organizations/${orgId}/members/${userId}`, { token })

/** An organization made by an admin, with an owner, an admin and a plain member (each signed in), the site admin not a member. */
async function team() {
	const [owner, manager, member, outsider] = await Promise.all([signUp(t), signUp(t), signUp(t), signUp(t)])
	const org = await createOrganization()
	for (const [account, roles] of [
		[owner, ['owner']],
		[manager, ['admin']],
		[member, ['member']],
	] as const)
		expect((await addMember(org.id, account.id, [...roles])).status).toBe(201)
	// The creating admin leaves: from here on a site admin who is not a member.
	expect((await removeMember(org.id, admin.id)).status).toBe(200)
	return { org, owner, manager, member, outsider }
}

const notFound = (instance: string) => problem('not-found', 404, instance, 'No organization has this id')
const forbidden = (instance: string, detail: string) => problem('forbidden', 403, instance, detail)
const unknownRole = (instance: string, names: string, pointer = '#/roles') =>
	problem('validation-error', 422, instance, '1 field is invalid', [{ pointer, code: 'unknown-role', detail: `names no organization role: ${names}` }])
const lastOwner = (instance: string) =>
	problem('last-owner', 409, instance, 'The last owner of an organization can be neither removed nor demoted; make another member an owner first')
const deactivated = (instance: string) => problem('conflict', 409, instance, 'This organization is deactivated')

describe('creating organizations', () => {
	test('an admin creates one and is its first owner; Location names it and the slug comes from the name when left out', async () => {
		const name = `Café Ünïon ${uniqueSlug()}`
		const res = await t.call('POST', '/api/organizations', { token: admin.accessToken, json: { name } })
		expect(res.status).toBe(201)
		const expectedSlug = name.normalize('NFKD').replace(/[\u0300-\u036f]/g, '').toLowerCase().replace(/[^a-z0-9]+/g, '-')
		expect(res.body).toEqual({
			data: { id: expect.any(String), name, slug: expectedSlug, status: 'active', createdAt: ISO, updatedAt: ISO, deactivatedAt: null },
			message: 'Organization created',
			errors: [],
		})
		expect(res.headers.get('location')).toBe(`/api/organizations/${res.body.data.id}`)
		const members = await t.call('GET', `/api/organizations/${res.body.data.id}/members`, { token: admin.accessToken })
		expect(members.body.data.items).toEqual([{ user: { id: admin.id, email: admin.email, name: expect.any(String) }, roles: ['owner'], joinedAt: ISO }])
	})

	test('a user may not create one while ORGANIZATION_CREATION=admins (the default)', async () => {
		const user = await signUp(t)
		const res = await t.call('POST', '/api/organizations', { token: user.accessToken, json: { name: 'Mine' } })
		expect(res.body).toEqual(forbidden('/api/organizations', 'Only admins may create organizations'))
		expect(res.status).toBe(403)
	})

	test('with ORGANIZATION_CREATION=all any signed-in user creates one and owns it', async () => {
		const open = await startTestApp({ ORGANIZATION_CREATION: 'all' }, database)
		try {
			const user = await signUp(open)
			const res = await open.call('POST', '/api/organizations', { token: user.accessToken, json: { name: 'Mine', slug: uniqueSlug('mine') } })
			expect(res.status).toBe(201)
			const mine = await open.call('GET', `/api/users/me/organizations`, { token: user.accessToken })
			expect(mine.body.data.items).toEqual([{ organization: res.body.data, roles: ['owner'], joinedAt: ISO }])
		} finally {
			await open.close()
		}
	})

	test('a slug another organization has is 409 slug-taken; a slug that is not kebab-case, or a name without one, is 422', async () => {
		const org = await createOrganization()
		const taken = await t.call('POST', '/api/organizations', { token: admin.accessToken, json: { name: 'Other', slug: org.slug } })
		expect(taken.body).toEqual(problem('slug-taken', 409, '/api/organizations', 'Another organization has this slug'))
		for (const slug of ['Upper', 'two--hyphens', '-edge', 'a'.repeat(65), 'spa ce']) {
			const res = await t.call('POST', '/api/organizations', { token: admin.accessToken, json: { name: 'X', slug } })
			expect({ slug, status: res.status, pointer: res.body.errors[0]?.pointer }).toEqual({ slug, status: 422, pointer: '#/slug' })
		}
		const noSlug = await t.call('POST', '/api/organizations', { token: admin.accessToken, json: { name: '日本' } })
		expect(noSlug.body).toEqual(
			problem('validation-error', 422, '/api/organizations', '1 field is invalid', [
				{ pointer: '#/slug', code: 'required', detail: 'is required: the name gives no slug (no letter or digit from a-z, 0-9)' },
			]),
		)
		for (const name of ['', '   ', 'x'.repeat(201)]) {
			const res = await t.call('POST', '/api/organizations', { token: admin.accessToken, json: { name, slug: uniqueSlug() } })
			expect({ name, status: res.status, pointer: res.body.errors[0]?.pointer }).toEqual({ name, status: 422, pointer: '#/name' })
		}
	})

	test('a session held to enrolment (MFA_REQUIRED) reaches no organization route', async () => {
		const strict = await startTestApp({ MFA_REQUIRED: 'admins' }, database)
		try {
			const enrolling = await signUpAdmin(strict)
			for (const [method, path] of [
				['GET', '/api/organizations'],
				['POST', '/api/organizations'],
				['GET', '/api/organization-roles'],
				['GET', `/api/users/${enrolling.id}/organizations`],
			] as const) {
				const res = await strict.call(method, path, { token: enrolling.accessToken, json: method === 'POST' ? { name: 'X' } : undefined })
				expect({ path, status: res.status, type: res.body.type }).toEqual({ path, status: 403, type: 'https://latchkey.dev/problems/mfa-enrollment-required' })
			}
		} finally {
			await strict.close()
		}
	})
})

describe('reading, changing and deactivating an organization', () => {
	test('members read it, a site admin too; a non-member gets the very 404 of an unknown id', async () => {
		const { org, member, outsider } = await team()
		for (const token of [member.accessToken, admin.accessToken]) {
			const res = await t.call('GET', `/api/organizations/${org.id}`, { token })
			expect(res.status).toBe(200)
			expect(res.body.data).toEqual({ ...org, updatedAt: ISO })
		}
		const hidden = await t.call('GET', `/api/organizations/${org.id}`, { token: outsider.accessToken })
		const unknown = await t.call('GET', `/api/organizations/${UNKNOWN}`, { token: outsider.accessToken })
		expect(hidden.body).toEqual(notFound(`/api/organizations/${org.id}`))
		expect(unknown.body).toEqual(notFound(`/api/organizations/${UNKNOWN}`))
		expect([hidden.status, unknown.status]).toEqual([404, 404])
		// Nothing else of it either: its members, changes, roles of members.
		for (const [method, path, json] of [
			['GET', `/api/organizations/${org.id}/members`, undefined],
			['PUT', `/api/organizations/${org.id}`, { name: 'Mine now' }],
			['DELETE', `/api/organizations/${org.id}`, undefined],
			['POST', `/api/organizations/${org.id}/members`, { userId: outsider.id, roles: ['owner'] }],
			['PUT', `/api/organizations/${org.id}/members/${member.id}`, { roles: ['owner'] }],
			['DELETE', `/api/organizations/${org.id}/members/${member.id}`, undefined],
		] as const) {
			const res = await t.call(method, path, { token: outsider.accessToken, json })
			expect({ method, path, body: res.body }).toEqual({ method, path, body: notFound(path) })
		}
	})

	test('its owners and admins rename it (and change its slug), site admins too; a member may not', async () => {
		const { org, owner, manager, member } = await team()
		const path = `/api/organizations/${org.id}`
		const refused = await t.call('PUT', path, { token: member.accessToken, json: { name: 'Nope' } })
		expect(refused.body).toEqual(forbidden(path, "Only an organization's owner or admin may change it"))
		const slug = uniqueSlug('renamed')
		const byOwner = await t.call('PUT', path, { token: owner.accessToken, json: { name: 'Renamed', slug } })
		expect(byOwner.status).toBe(200)
		expect(byOwner.body.data).toMatchObject({ name: 'Renamed', slug })
		const byManager = await t.call('PUT', path, { token: manager.accessToken, json: { name: 'Renamed again' } })
		expect(byManager.body.data).toMatchObject({ name: 'Renamed again', slug })
		const byAdmin = await t.call('PUT', path, { token: admin.accessToken, json: { name: 'By the site admin' } })
		expect(byAdmin.body.data.name).toBe('By the site admin')
		const other = await createOrganization()
		const taken = await t.call('PUT', path, { token: owner.accessToken, json: { name: 'X', slug: other.slug } })
		expect(taken.body).toEqual(problem('slug-taken', 409, path, 'Another organization has this slug'))
	})

	test('its owners deactivate it (site admins too), not its admins; it then takes no change but can still be read', async () => {
		const { org, owner, manager, member, outsider } = await team()
		const path = `/api/organizations/${org.id}`
		const refused = await t.call('DELETE', path, { token: manager.accessToken })
		expect(refused.body).toEqual(forbidden(path, "Only an organization's owner may deactivate it"))
		const res = await t.call('DELETE', path, { token: owner.accessToken })
		expect(res.status).toBe(200)
		expect(res.body).toEqual({ data: { ...org, status: 'deactivated', updatedAt: ISO, deactivatedAt: ISO }, message: 'Organization deactivated', errors: [] })
		const again = await t.call('DELETE', path, { token: admin.accessToken })
		expect(again.body.data).toEqual(res.body.data)
		expect((await t.call('GET', path, { token: member.accessToken })).body.data.status).toBe('deactivated')
		expect((await t.call('PUT', path, { token: owner.accessToken, json: { name: 'Back' } })).body).toEqual(deactivated(path))
		expect((await addMember(org.id, outsider.id, ['member'], owner.accessToken)).body).toEqual(deactivated(`${path}/members`))
		expect((await setRoles(org.id, member.id, ['admin'], owner.accessToken)).body).toEqual(deactivated(`${path}/members/${member.id}`))
		expect((await removeMember(org.id, member.id, owner.accessToken)).body).toEqual(deactivated(`${path}/members/${member.id}`))
		expect((await removeMember(org.id, member.id, member.accessToken)).body).toEqual(deactivated(`${path}/members/${member.id}`))
		const site = await t.call('DELETE', `/api/organizations/${(await createOrganization()).id}`, { token: admin.accessToken })
		expect(site.body.data.status).toBe('deactivated')
	})
})

describe('members', () => {
	test("an owner and an admin add members; the admin grants any role but owner; a member adds no one", async () => {
		const { org, owner, manager, member, outsider } = await team()
		const path = `/api/organizations/${org.id}/members`
		const byMember = await addMember(org.id, outsider.id, ['member'], member.accessToken)
		expect(byMember.body).toEqual(forbidden(path, "Only an organization's owner or admin may add members"))
		const ownerByManager = await addMember(org.id, outsider.id, ['owner'], manager.accessToken)
		expect(ownerByManager.body).toEqual(forbidden(path, 'Only an owner may grant the owner role'))
		const added = await addMember(org.id, outsider.id, ['admin'], manager.accessToken)
		expect(added.status).toBe(201)
		expect(added.body.data).toEqual({ user: { id: outsider.id, email: outsider.email, name: 'Test User' }, roles: ['admin'], joinedAt: ISO })
		expect(added.headers.get('location')).toBe(`${path}/${outsider.id}`)
		const located = await t.call('GET', `${path}/${outsider.id}`, { token: member.accessToken })
		expect(located.body).toEqual({ data: added.body.data, message: 'Member', errors: [] })
		expect((await t.call('GET', `${path}/${UNKNOWN}`, { token: member.accessToken })).body).toEqual(
			problem('not-found', 404, `${path}/${UNKNOWN}`, 'This account is not a member of this organization'),
		)
		expect((await t.call('GET', `${path}/${member.id}`, { token: (await signUp(t)).accessToken })).body).toEqual(notFound(`${path}/${member.id}`))
		const twice = await addMember(org.id, outsider.id, ['member'], owner.accessToken)
		expect(twice.body).toEqual(problem('conflict', 409, path, 'This account is already a member; change its roles with PUT instead'))
		const another = await signUp(t)
		expect((await addMember(org.id, another.id, ['owner'], owner.accessToken)).status).toBe(201)
	})

	test('an unknown role is 422 wherever it is named; an unknown or deactivated account is 422', async () => {
		const { org, owner, member } = await team()
		const path = `/api/organizations/${org.id}/members`
		const newcomer = await signUp(t)
		expect((await addMember(org.id, newcomer.id, ['member', 'no-such-role'], owner.accessToken)).body).toEqual(unknownRole(path, 'no-such-role'))
		expect((await setRoles(org.id, member.id, ['no-such-role'], owner.accessToken)).body).toEqual(unknownRole(`${path}/${member.id}`, 'no-such-role'))
		const filter = await t.call('GET', `${path}?role=no-such-role`, { token: member.accessToken })
		expect(filter.body).toEqual(
			problem('validation-error', 422, path, '1 field is invalid', [{ pointer: '#/role', code: 'unknown-role', detail: 'names no organization role: no-such-role' }]),
		)
		const nobody = await addMember(org.id, UNKNOWN, ['member'], owner.accessToken)
		expect(nobody.body).toEqual(problem('validation-error', 422, path, '1 field is invalid', [{ pointer: '#/userId', code: 'unknown-user', detail: 'names no account' }]))
		const gone = await signUp(t)
		expect((await t.call('DELETE', `/api/users/${gone.id}`, { token: admin.accessToken })).status).toBe(200)
		const refused = await addMember(org.id, gone.id, ['member'], owner.accessToken)
		expect(refused.body.errors).toEqual([{ pointer: '#/userId', code: 'deactivated', detail: 'names a deactivated account' }])
		for (const roles of [[], ['member', 'member'], ['Not A Role']]) {
			const res = await addMember(org.id, newcomer.id, roles, owner.accessToken)
			expect({ roles, status: res.status, pointer: res.body.errors[0]?.pointer }).toEqual({ roles, status: 422, pointer: expect.stringMatching(/^#\/roles/) })
		}
	})

	test("an admin changes members' roles but not an owner's, and makes no owner; a member changes none", async () => {
		const { org, owner, manager, member } = await team()
		const at = (userId: string) => `/api/organizations/${org.id}/members/${userId}`
		expect((await setRoles(org.id, manager.id, ['member'], member.accessToken)).body).toEqual(forbidden(at(manager.id), "Only an organization's owner or admin may change members' roles"))
		expect((await setRoles(org.id, member.id, ['admin'], member.accessToken)).status).toBe(403)
		expect((await setRoles(org.id, member.id, ['owner'], manager.accessToken)).body).toEqual(forbidden(at(member.id), 'Only an owner may grant the owner role'))
		expect((await setRoles(org.id, owner.id, ['member'], manager.accessToken)).body).toEqual(forbidden(at(owner.id), "Only an owner may change an owner's roles"))
		const promoted = await setRoles(org.id, member.id, ['admin', 'member'], manager.accessToken)
		expect(promoted.status).toBe(200)
		expect(promoted.body.data).toEqual({ user: { id: member.id, email: member.email, name: 'Test User' }, roles: ['admin', 'member'], joinedAt: ISO })
		expect((await setRoles(org.id, member.id, ['owner'], owner.accessToken)).body.data.roles).toEqual(['owner'])
		expect((await setRoles(org.id, member.id, ['member'], admin.accessToken)).body.data.roles).toEqual(['member'])
	})

	test('members leave by themselves; an admin removes members but not an owner; a member removes no one else', async () => {
		const { org, owner, manager, member } = await team()
		const at = (userId: string) => `/api/organizations/${org.id}/members/${userId}`
		expect((await removeMember(org.id, manager.id, member.accessToken)).body).toEqual(forbidden(at(manager.id), "Only an organization's owner or admin may remove members"))
		expect((await removeMember(org.id, owner.id, manager.accessToken)).body).toEqual(forbidden(at(owner.id), 'Only an owner may remove an owner'))
		const left = await removeMember(org.id, member.id, member.accessToken)
		expect(left.body).toEqual({ data: { user: { id: member.id, email: member.email, name: 'Test User' }, roles: ['member'], joinedAt: ISO }, message: 'Member removed', errors: [] })
		// Gone: the organization is now as hidden from them as from anyone.
		expect((await t.call('GET', `/api/organizations/${org.id}`, { token: member.accessToken })).status).toBe(404)
		expect((await removeMember(org.id, member.id, owner.accessToken)).body).toEqual(problem('not-found', 404, at(member.id), 'This account is not a member of this organization'))
		expect((await removeMember(org.id, manager.id, owner.accessToken)).status).toBe(200)
	})

	test('the last owner can be neither demoted nor removed, by themself, another owner or a site admin (409 last-owner)', async () => {
		const { org, owner, manager } = await team()
		const at = `/api/organizations/${org.id}/members/${owner.id}`
		expect((await setRoles(org.id, owner.id, ['admin'], owner.accessToken)).body).toEqual(lastOwner(at))
		expect((await removeMember(org.id, owner.id, owner.accessToken)).body).toEqual(lastOwner(at))
		expect((await removeMember(org.id, owner.id)).body).toEqual(lastOwner(at))
		expect((await setRoles(org.id, owner.id, ['member'])).status).toBe(409)
		// Keeping `owner` among other roles is no demotion.
		expect((await setRoles(org.id, owner.id, ['owner', 'admin'], owner.accessToken)).status).toBe(200)
		// With a second owner, the first may go.
		expect((await setRoles(org.id, manager.id, ['owner'], owner.accessToken)).status).toBe(200)
		expect((await removeMember(org.id, owner.id, owner.accessToken)).status).toBe(200)
		expect((await removeMember(org.id, manager.id, manager.accessToken)).body).toEqual(lastOwner(`/api/organizations/${org.id}/members/${manager.id}`))
	})
})

describe('lists', () => {
	const PREFIX = `list-${Date.now().toString(36)}`
	const COUNT = 27
	let user: Account
	let made: Organization[] = []

	beforeAll(async () => {
		user = await signUp(t)
		made = []
		for (let n = 0; n < COUNT; n++) {
			// Names out of creation order, some equal (the id breaks the tie).
			made.push(await createOrganization(admin.accessToken, { name: `${PREFIX} ${String((n * 7) % 10).padStart(2, '0')}`, slug: `${PREFIX}-${n}` }))
		}
		for (const org of made.slice(0, 5)) expect((await addMember(org.id, user.id, ['member'])).status).toBe(201)
	})

	/** Every page of a list, following nextCursor and checking the Link header on the way. */
	async function walk(path: string, query: Record<string, string>, token: string): Promise<Array<Record<string, any>>> {
		const items: Array<Record<string, any>> = []
		let cursor: string | null = null
		let pages = 0
		do {
			const params = new URLSearchParams(query)
			if (cursor) params.set('cursor', cursor)
			const res: CallResult = await t.call('GET', `${path}?${params}`, { token })
			expect(res.status).toBe(200)
			items.push(...res.body.data.items)
			cursor = res.body.data.nextCursor
			// The same query (its defaults written out), the cursor replaced.
			if (cursor) expect(res.headers.get('link')).toMatch(new RegExp(`^<${path}\\?(.*&)?cursor=${cursor}>; rel="next"$`))
			else expect(res.headers.get('link')).toBeNull()
			expect(++pages).toBeLessThan(100)
		} while (cursor)
		return items
	}

	const byName = (a: Organization, b: Organization) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.id < b.id ? -1 : 1)
	const byCreated = (a: Organization, b: Organization) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : 1)

	test('an admin pages through every organization in each sort (default newest first), q matching name or slug', async () => {
		const ids = (items: Array<Record<string, any>>) => items.map((item) => item.id)
		const expected = {
			name: made.toSorted(byName),
			'-name': made.toSorted(byName).reverse(),
			createdAt: made.toSorted(byCreated),
			'-createdAt': made.toSorted(byCreated).reverse(),
		}
		for (const [sort, orgs] of Object.entries(expected)) expect(ids(await walk('/api/organizations', { q: PREFIX, sort, limit: '4' }, admin.accessToken))).toEqual(ids(orgs))
		expect(ids(await walk('/api/organizations', { q: PREFIX, limit: '10' }, admin.accessToken))).toEqual(ids(expected['-createdAt']))
		// q: the slug only (`-1` ends slugs 1, 10–19), a name only (` 03`, names of n with n*7 % 10 = 3), case-insensitive, % and _ literal.
		const slugHits = await walk('/api/organizations', { q: `${PREFIX}-1`, sort: 'createdAt' }, admin.accessToken)
		expect(slugHits.map((org) => org.slug)).toEqual(made.filter((org) => org.slug.startsWith(`${PREFIX}-1`)).map((org) => org.slug))
		const nameHits = await walk('/api/organizations', { q: `${PREFIX.toUpperCase()} 03`, sort: 'createdAt' }, admin.accessToken)
		expect(ids(nameHits)).toEqual(ids(made.filter((org) => org.name.endsWith(' 03'))))
		expect(await walk('/api/organizations', { q: `${PREFIX}%` }, admin.accessToken)).toEqual([])
		expect(await walk('/api/organizations', { q: `${PREFIX}_0` }, admin.accessToken)).toEqual([])
	})

	test('a user lists only their own organizations, and the same with their roles at /users/{id}/organizations (themself or an admin)', async () => {
		const own = await walk('/api/organizations', { sort: 'name', limit: '2' }, user.accessToken)
		expect(own.map((org) => org.id)).toEqual(made.slice(0, 5).toSorted(byName).map((org) => org.id))
		const memberships = await walk(`/api/users/${user.id}/organizations`, { sort: 'createdAt', limit: '2' }, user.accessToken)
		expect(memberships).toEqual(made.slice(0, 5).map((org) => ({ organization: { ...org, updatedAt: ISO }, roles: ['member'], joinedAt: ISO })))
		expect(await walk(`/api/users/me/organizations`, { sort: 'createdAt', limit: '2' }, user.accessToken)).toEqual(memberships)
		expect(await walk(`/api/users/${user.id}/organizations`, { sort: 'createdAt', limit: '2' }, admin.accessToken)).toEqual(memberships)
		const other = await signUp(t)
		const refused = await t.call('GET', `/api/users/${user.id}/organizations`, { token: other.accessToken })
		expect(refused.body).toEqual(forbidden(`/api/users/${user.id}/organizations`, 'You may only act on your own account'))
		// An id no account has is 404 for an admin, as GET /users/{id} is, not an empty page.
		const nobody = Bun.randomUUIDv7()
		const unknown = await t.call('GET', `/api/users/${nobody}/organizations`, { token: admin.accessToken })
		expect({ status: unknown.status, type: unknown.body.type }).toEqual({ status: 404, type: 'https://latchkey.dev/problems/not-found' })
	})

	test('a cursor of another sort, or no cursor at all, is 400; an unknown sort or parameter is 422', async () => {
		const first = await t.call('GET', `/api/organizations?q=${PREFIX}&sort=name&limit=2`, { token: admin.accessToken })
		const cursor = first.body.data.nextCursor as string
		for (const bad of [`sort=-name&cursor=${cursor}`, 'cursor=nonsense', `cursor=${Buffer.from('{"s":"-createdAt","k":"2026-02-31T00:00:00.000Z","i":"x"}').toString('base64url')}`]) {
			const res = await t.call('GET', `/api/organizations?${bad}`, { token: admin.accessToken })
			expect({ bad, status: res.status, type: res.body.type }).toEqual({ bad, status: 400, type: 'https://latchkey.dev/problems/bad-request' })
		}
		for (const bad of ['sort=slug', 'limit=0', 'limit=101', 'colour=red', 'status=gone']) {
			const res = await t.call('GET', `/api/organizations?${bad}`, { token: admin.accessToken })
			expect({ bad, status: res.status }).toEqual({ bad, status: 422 })
		}
	})

	test('members page in joining order either way, with q on email or name and a role filter, at any size', async () => {
		const SIZE = 45
		const prefix = `mem-${Date.now().toString(36)}`
		const now = Date.now()
		const rows = Array.from({ length: SIZE }, (_, n) => ({
			id: Bun.randomUUIDv7(),
			email: `${prefix}-${n}@example.test`,
			name: n % 3 === 0 ? `Third ${n}` : `Person ${n}`,
			role: 'user' as const,
			passwordHash: null,
			createdAt: new Date(now),
			updatedAt: new Date(now),
		}))
		const db = t.database.handle.db
		await db.insert(users).values(rows)
		const member = await signUp(t)
		const org = await seedOrganization(db, [
			{ userId: member.id, roles: ['member'] },
			...rows.map((row, n) => ({ userId: row.id, roles: n % 5 === 0 ? ['admin'] : ['member'] })),
		])
		// Many joined at the very same millisecond: the user id orders them.
		await db.update(organizationMembers).set({ joinedAt: new Date(now) })
		const path = `/api/organizations/${org.id}/members`
		const all = await walk(path, { limit: '7', sort: 'joinedAt' }, member.accessToken)
		expect(all).toHaveLength(SIZE + 1)
		const newestFirst = await walk(path, { limit: '6' }, member.accessToken)
		expect(newestFirst).toEqual(all.toReversed())
		const key = (item: Record<string, any>) => `${item.joinedAt} ${item.user.id}`
		expect(all.map(key)).toEqual(all.map(key).toSorted())
		const thirds = await walk(path, { q: 'THIRD', limit: '4', sort: 'joinedAt' }, member.accessToken)
		expect(thirds.map((item) => item.user.name).toSorted()).toEqual(rows.filter((_, n) => n % 3 === 0).map((row) => row.name).toSorted())
		const byEmail = await walk(path, { q: `${prefix}-1`, sort: 'joinedAt' }, member.accessToken)
		expect(byEmail.map((item) => item.user.email).toSorted()).toEqual(rows.filter((row) => row.email.startsWith(`${prefix}-1`)).map((row) => row.email).toSorted())
		const admins = await walk(path, { role: 'admin', limit: '3' }, member.accessToken)
		expect(admins.map((item) => item.user.id).toSorted()).toEqual(rows.filter((_, n) => n % 5 === 0).map((row) => row.id).toSorted())
		expect(admins.every((item) => item.roles.includes('admin'))).toBe(true)
	})
})

describe('organization roles', () => {
	test('everyone signed in reads the roles, the built-in ones too', async () => {
		const user = await signUp(t)
		const res = await t.call('GET', '/api/organization-roles', { token: user.accessToken })
		expect(res.status).toBe(200)
		const builtIn = (res.body.data.items as Array<Record<string, unknown>>).filter((role) => role.builtIn)
		expect(builtIn.map(({ name, permissions }) => ({ name, permissions }))).toEqual([
			{ name: 'admin', permissions: ['members:manage', 'invitations:manage'] },
			{ name: 'member', permissions: [] },
			{ name: 'owner', permissions: ['*'] },
		])
		expect((await t.call('GET', '/api/organization-roles/owner', { token: user.accessToken })).body.data).toEqual({
			name: 'owner',
			description: expect.any(String),
			permissions: ['*'],
			builtIn: true,
			createdAt: ISO,
			updatedAt: ISO,
		})
		expect((await t.call('GET', '/api/organization-roles/nope', { token: user.accessToken })).body).toEqual(
			problem('not-found', 404, '/api/organization-roles/nope', 'No organization role has this name'),
		)
		expect((await t.call('GET', '/api/organization-roles')).status).toBe(401)
	})

	test('only admins define, change and delete roles; the built-in ones cannot be changed or deleted', async () => {
		const user = await signUp(t)
		const name = uniqueSlug('billing')
		const body = { name, permissions: ['invoices:read', 'invoices:write'], description: 'Billing' }
		expect((await t.call('POST', '/api/organization-roles', { token: user.accessToken, json: body })).body).toEqual(forbidden('/api/organization-roles', 'This requires an admin'))
		const created = await t.call('POST', '/api/organization-roles', { token: admin.accessToken, json: body })
		expect(created.status).toBe(201)
		expect(created.body.data).toEqual({ ...body, builtIn: false, createdAt: ISO, updatedAt: ISO })
		expect(created.headers.get('location')).toBe(`/api/organization-roles/${name}`)
		expect((await t.call('POST', '/api/organization-roles', { token: admin.accessToken, json: body })).status).toBe(409)
		expect((await t.call('POST', '/api/organization-roles', { token: admin.accessToken, json: { ...body, name: 'owner' } })).status).toBe(409)
		const path = `/api/organization-roles/${name}`
		expect((await t.call('PUT', path, { token: user.accessToken, json: { permissions: [] } })).status).toBe(403)
		const changed = await t.call('PUT', path, { token: admin.accessToken, json: { permissions: ['invoices:read'] } })
		expect(changed.body.data).toEqual({ ...body, permissions: ['invoices:read'], builtIn: false, createdAt: ISO, updatedAt: ISO })
		const immutable = 'The built-in roles (owner, admin, member) cannot be changed or deleted'
		for (const builtIn of ['owner', 'admin', 'member']) {
			expect((await t.call('PUT', `/api/organization-roles/${builtIn}`, { token: admin.accessToken, json: { permissions: [] } })).body).toEqual(forbidden(`/api/organization-roles/${builtIn}`, immutable))
			expect((await t.call('DELETE', `/api/organization-roles/${builtIn}`, { token: admin.accessToken })).body).toEqual(forbidden(`/api/organization-roles/${builtIn}`, immutable))
		}
		expect((await t.call('PUT', '/api/organization-roles/nope', { token: admin.accessToken, json: { permissions: [] } })).status).toBe(404)
		for (const bad of [{ name: 'Bad Name', permissions: [] }, { name: 'ok', permissions: ['Not Valid'] }, { name: 'ok', permissions: ['a', 'a'] }]) {
			expect((await t.call('POST', '/api/organization-roles', { token: admin.accessToken, json: bad })).status).toBe(422)
		}
		expect((await t.call('DELETE', path, { token: user.accessToken })).status).toBe(403)
		const deleted = await t.call('DELETE', path, { token: admin.accessToken })
		expect(deleted.status).toBe(200)
		expect((await t.call('GET', path, { token: admin.accessToken })).status).toBe(404)
	})

	test('a role a member holds cannot be deleted (409) until no one holds it; a custom role is granted like any other', async () => {
		const { org, owner, member } = await team()
		const name = uniqueSlug('auditor')
		expect((await t.call('POST', '/api/organization-roles', { token: admin.accessToken, json: { name, permissions: ['reports:read'] } })).status).toBe(201)
		expect((await setRoles(org.id, member.id, ['member', name], owner.accessToken)).body.data.roles).toEqual(['member', name])
		const path = `/api/organization-roles/${name}`
		expect((await t.call('DELETE', path, { token: admin.accessToken })).body).toEqual(
			problem('conflict', 409, path, 'This role is held by members or named by pending invitations; change their roles first'),
		)
		expect((await setRoles(org.id, member.id, ['member'], owner.accessToken)).status).toBe(200)
		expect((await t.call('DELETE', path, { token: admin.accessToken })).status).toBe(200)
		expect((await setRoles(org.id, member.id, [name], owner.accessToken)).body).toEqual(unknownRole(`/api/organizations/${org.id}/members/${member.id}`, name))
	})
})

describe('events and audit', () => {
	const eventsOf = (type: string, organizationId: string, count: number) =>
		receiver.documentedEvents(type, (data) => (data.organization?.id ?? data.organizationId) === organizationId, count, webhookSecret)

	test('each change sends its event and writes its audit row in its transaction; a refused change sends none', async () => {
		const newcomer = await signUp(t)
		const org = await createOrganization(admin.accessToken, { name: 'Evented' })
		const [created] = await eventsOf('organization.created', org.id, 1)
		expect(created?.data).toEqual({ organization: org })
		const member = (account: Account, roles: string[]) => ({ user: { id: account.id, email: account.email, name: expect.any(String) }, roles, joinedAt: ISO })
		// Refused: no event, no audit row.
		expect((await addMember(org.id, newcomer.id, ['no-such-role'])).status).toBe(422)
		expect((await addMember(org.id, newcomer.id, ['member'])).status).toBe(201)
		expect((await setRoles(org.id, newcomer.id, ['owner'])).status).toBe(200)
		expect((await setRoles(org.id, admin.id, ['admin'])).status).toBe(200)
		const renamed = await t.call('PUT', `/api/organizations/${org.id}`, { token: admin.accessToken, json: { name: 'Renamed' } })
		expect((await removeMember(org.id, admin.id)).status).toBe(200)
		const deactivated = await t.call('DELETE', `/api/organizations/${org.id}`, { token: newcomer.accessToken })

		const added = await eventsOf('member.added', org.id, 2)
		expect(added.map((event) => event.data)).toEqual([
			{ organizationId: org.id, member: member(admin, ['owner']) },
			{ organizationId: org.id, member: member(newcomer, ['member']) },
		])
		const updated = await eventsOf('member.updated', org.id, 2)
		expect(updated.map((event) => event.data)).toEqual([
			{ organizationId: org.id, member: member(newcomer, ['owner']), previousRoles: ['member'] },
			{ organizationId: org.id, member: member(admin, ['admin']), previousRoles: ['owner'] },
		])
		expect((await eventsOf('organization.updated', org.id, 1))[0]?.data).toEqual({ organization: renamed.body.data, changed: ['name'] })
		expect((await eventsOf('member.removed', org.id, 1))[0]?.data).toEqual({ organizationId: org.id, member: member(admin, ['admin']) })
		expect((await eventsOf('organization.deactivated', org.id, 1))[0]?.data).toEqual({ organization: deactivated.body.data })

		const mine = await t.database.handle.db
			.select()
			.from(auditEvents)
			.where(sql`${auditEvents.details}->>'organizationId' = ${org.id}`)
			.orderBy(asc(auditEvents.id))
		expect(mine.map(({ type, actorId, subjectId, details }) => ({ type, actorId, subjectId, details }))).toEqual([
			{ type: 'organization.created', actorId: admin.id, subjectId: null, details: { organizationId: org.id, slug: org.slug } },
			{ type: 'member.added', actorId: admin.id, subjectId: admin.id, details: { organizationId: org.id, roles: 'owner' } },
			{ type: 'member.added', actorId: admin.id, subjectId: newcomer.id, details: { organizationId: org.id, roles: 'member' } },
			{ type: 'member.updated', actorId: admin.id, subjectId: newcomer.id, details: { organizationId: org.id, from: 'member', to: 'owner' } },
			{ type: 'member.updated', actorId: admin.id, subjectId: admin.id, details: { organizationId: org.id, from: 'owner', to: 'admin' } },
			{ type: 'organization.updated', actorId: admin.id, subjectId: null, details: { organizationId: org.id, changed: 'name', slug: org.slug } },
			{ type: 'member.removed', actorId: admin.id, subjectId: admin.id, details: { organizationId: org.id, roles: 'admin', self: true } },
			{ type: 'organization.deactivated', actorId: newcomer.id, subjectId: null, details: { organizationId: org.id } },
		])
	})
})
