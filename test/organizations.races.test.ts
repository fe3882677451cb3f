import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { and, eq, sql } from 'drizzle-orm'
import { organizationMembers } from '../src/db/schema'
import { startTestApp, type CallResult, type TestApp } from './support/app'
import { signUp, signUpAdmin, type Account } from './support/fixtures'
import { seedOrganization } from './support/organization-seed'

// Organizations under parallel requests. The last owner can be neither removed nor demoted, also when requests race
// (API.md, Organizations): every membership change takes the organization's row lock, so the count of owners and the
// change are one step. A custom role deleted while it is being granted: one of the two wins, never both. PGlite runs one query at a time and cannot show a race: run this file on PostgreSQL too
// (TEST_DATABASE_URL), where the requests' transactions really overlap.

setDefaultTimeout(120_000)

let t: TestApp
let admin: Account
beforeAll(async () => {
	t = await startTestApp()
	admin = await signUpAdmin(t)
})
afterAll(() => t.close())

const LAST_OWNER = 'https://latchkey.dev/problems/last-owner'

async function ownersOf(organizationId: string): Promise<string[]> {
	const rows = await t.database.handle.db
		.select({ userId: organizationMembers.userId })
		.from(organizationMembers)
		.where(and(eq(organizationMembers.organizationId, organizationId), sql`'owner' = any(${organizationMembers.roles})`))
	return rows.map((row) => row.userId)
}

async function owners(count: number): Promise<{ organizationId: string; accounts: Account[] }> {
	const accounts = await Promise.all(Array.from({ length: count }, () => signUp(t)))
	const { id } = await seedOrganization(
		t.database.handle.db,
		accounts.map((account) => ({ userId: account.id, roles: ['owner'] })),
	)
	return { organizationId: id, accounts }
}

const demote = (organizationId: string, userId: string, token: string) =>
	t.call('PUT', `/api/organizations/${organizationId}/members/${userId}`, { token, json: { roles: ['member'] } })
const remove = (organizationId: string, userId: string, token: string) => t.call('DELETE', `/api/organizations/${organizationId}/members/${userId}`, { token })

/** Every answer is a success or a refusal with its problem, never a 5xx; a 409 is always `last-owner`. */
function expectOnlyDecisions(answers: CallResult[]) {
	for (const answer of answers) {
		expect([200, 403, 404, 409]).toContain(answer.status)
		if (answer.status === 409) expect(answer.body.type).toBe(LAST_OWNER)
	}
}

describe('the last owner under parallel requests', () => {
	test('two owners demoting themselves at once: one succeeds, the other is the last owner (409)', async () => {
		for (let round = 0; round < 5; round++) {
			const { organizationId, accounts } = await owners(2)
			const answers = await Promise.all(accounts.map((account) => demote(organizationId, account.id, account.accessToken)))
			expectOnlyDecisions(answers)
			expect(answers.map((answer) => answer.status).toSorted()).toEqual([200, 409])
			expect(await ownersOf(organizationId)).toHaveLength(1)
		}
	})

	test('two owners demoting each other at once: one succeeds and one owner remains', async () => {
		for (let round = 0; round < 5; round++) {
			const { organizationId, accounts } = await owners(2)
			const [a, b] = accounts as [Account, Account]
			const answers = await Promise.all([demote(organizationId, b.id, a.accessToken), demote(organizationId, a.id, b.accessToken)])
			expectOnlyDecisions(answers)
			// The second, under the lock, is either no longer an owner (403) or the other's last owner (409).
			expect(answers.filter((answer) => answer.status === 200)).toHaveLength(1)
			expect(await ownersOf(organizationId)).toHaveLength(1)
		}
	})

	test('two owners removing each other at once: one remains', async () => {
		for (let round = 0; round < 5; round++) {
			const { organizationId, accounts } = await owners(2)
			const [a, b] = accounts as [Account, Account]
			const answers = await Promise.all([remove(organizationId, b.id, a.accessToken), remove(organizationId, a.id, b.accessToken)])
			expectOnlyDecisions(answers)
			expect(answers.filter((answer) => answer.status === 200)).toHaveLength(1)
			expect(await ownersOf(organizationId)).toHaveLength(1)
		}
	})

	test('twenty racing removals and demotions of five owners, by themselves, each other and a site admin: exactly one owner remains', async () => {
		for (let round = 0; round < 3; round++) {
			const { organizationId, accounts } = await owners(5)
			const requests = Array.from({ length: 20 }, (_, n) => {
				const target = accounts[(n * 3 + 1) % 5] as Account
				// Half by the site admin (always allowed: only the last-owner rule stops it), half by the owners.
				const actor = n % 2 === 0 ? admin : (accounts[n % 5] as Account)
				const self = n % 4 === 1 ? actor : target
				return n % 3 === 0 ? remove(organizationId, self.id, actor.accessToken) : demote(organizationId, self.id, actor.accessToken)
			})
			const answers = await Promise.all(requests)
			expectOnlyDecisions(answers)
			const left = await ownersOf(organizationId)
			expect(left).toHaveLength(1)
			// The one left was refused at least once: the site admin's requests aimed at every owner.
			expect(answers.filter((answer) => answer.status === 409).length).toBeGreaterThan(0)
		}
	})
})

describe('a custom role deleted while it is granted', () => {
	test('either the grant or the delete wins, never both: no member is left holding a role that no longer exists', async () => {
		for (let round = 0; round < 8; round++) {
			const { organizationId, accounts } = await owners(1)
			const [owner] = accounts as [Account]
			const newcomer = await signUp(t)
			const name = `racing-${Date.now().toString(36)}-${round}`
			expect((await t.call('POST', '/api/organization-roles', { token: admin.accessToken, json: { name, permissions: ['reports:read'] } })).status).toBe(201)
			const [granted, deleted] = await Promise.all([
				t.call('POST', `/api/organizations/${organizationId}/members`, { token: owner.accessToken, json: { userId: newcomer.id, roles: [name] } }),
				t.call('DELETE', `/api/organization-roles/${name}`, { token: admin.accessToken }),
			])
			if (granted.status === 201) expect(deleted.status).toBe(409)
			else {
				expect(granted.status).toBe(422)
				expect(deleted.status).toBe(200)
			}
			const holders = await t.database.handle.db
				.select({ userId: organizationMembers.userId })
				.from(organizationMembers)
				.where(sql`${name} = any(${organizationMembers.roles})`)
			const exists = (await t.call('GET', `/api/organization-roles/${name}`, { token: admin.accessToken })).status === 200
			expect({ holders: holders.length, exists }).toEqual(granted.status === 201 ? { holders: 1, exists: true } : { holders: 0, exists: false })
		}
	})
})
