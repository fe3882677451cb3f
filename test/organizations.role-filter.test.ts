import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { signUp, signUpAdmin, type Account } from './support/fixtures'

// The member list's `role` filter reads organization_member_roles, a row per role held that a trigger on
// organization_members keeps (migration 0025): whatever adds, changes or removes a membership, the filter
// answers the memberships as they are now, in the list's order, page after page.

setDefaultTimeout(60_000)

let database: TestDatabase
let t: TestApp
let admin: Account

beforeAll(async () => {
	database = await createTestDatabase()
	t = await startTestApp({}, database)
	admin = await signUpAdmin(t)
})
afterAll(async () => {
	await t.close()
	await database.drop()
})

interface MemberPage {
	items: Array<{ user: { id: string }; roles: string[] }>
	nextCursor: string | null
}

/** Every member a filtered list gives, following nextCursor one row at a time. */
async function allPages(path: string): Promise<Array<{ id: string; roles: string[] }>> {
	const seen: Array<{ id: string; roles: string[] }> = []
	let cursor: string | null = null
	for (let page = 0; page < 20; page++) {
		const res = await t.call('GET', `${path}&limit=1${cursor ? `&cursor=${cursor}` : ''}`, { token: admin.accessToken })
		expect(res.status).toBe(200)
		const body = res.body.data as MemberPage
		seen.push(...body.items.map((item) => ({ id: item.user.id, roles: item.roles })))
		cursor = body.nextCursor
		if (!cursor) return seen
	}
	throw new Error('more pages than members')
}

test('role= lists the holders of the role as they are now: added, changed, removed, by whatever route', async () => {
	const created = await t.call('POST', '/api/organizations', { token: admin.accessToken, json: { name: 'Role filter', slug: `role-filter-${Date.now().toString(36)}` } })
	expect(created.status).toBe(201)
	const org = created.body.data.id as string
	const path = `/api/organizations/${org}/members`
	const accounts: Account[] = []
	for (const roles of [['admin'], ['member'], ['admin', 'member'], ['member'], ['admin']]) {
		const account = await signUp(t, { name: `Holder ${accounts.length}` })
		accounts.push(account)
		expect((await t.call('POST', path, { token: admin.accessToken, json: { userId: account.id, roles } })).status).toBe(201)
	}
	const [a0, a1, a2, a3, a4] = accounts as [Account, Account, Account, Account, Account]

	// Newest first (the default), and oldest first, one row a page.
	expect(await allPages(`${path}?role=admin`)).toEqual([
		{ id: a4.id, roles: ['admin'] },
		{ id: a2.id, roles: ['admin', 'member'] },
		{ id: a0.id, roles: ['admin'] },
	])
	expect((await allPages(`${path}?role=admin&sort=joinedAt`)).map((m) => m.id)).toEqual([a0.id, a2.id, a4.id])
	expect((await allPages(`${path}?role=member`)).map((m) => m.id)).toEqual([a3.id, a2.id, a1.id])
	// The creating admin is the owner.
	expect((await allPages(`${path}?role=owner`)).map((m) => m.id)).toEqual([admin.id])

	// A change of roles moves the member between filters; a removal takes it out of every one.
	expect((await t.call('PUT', `${path}/${a0.id}`, { token: admin.accessToken, json: { roles: ['member'] } })).status).toBe(200)
	expect((await t.call('PUT', `${path}/${a1.id}`, { token: admin.accessToken, json: { roles: ['admin', 'owner'] } })).status).toBe(200)
	expect((await t.call('DELETE', `${path}/${a2.id}`, { token: admin.accessToken })).status).toBe(200)
	expect(await allPages(`${path}?role=admin`)).toEqual([
		{ id: a4.id, roles: ['admin'] },
		{ id: a1.id, roles: ['admin', 'owner'] },
	])
	expect((await allPages(`${path}?role=member`)).map((m) => m.id)).toEqual([a3.id, a0.id])
	expect((await allPages(`${path}?role=owner`)).map((m) => m.id).sort()).toEqual([admin.id, a1.id].sort())

	// With q as well: both filters hold.
	expect((await allPages(`${path}?role=admin&q=${encodeURIComponent('Holder 4')}`)).map((m) => m.id)).toEqual([a4.id])
	expect(await allPages(`${path}?role=member&q=${encodeURIComponent('Holder 4')}`)).toEqual([])
})
