/**
 * Rows that no writer of this version would make — left by older versions or brought in by an import —
 * must never turn a response into a 500 (API.md: "nothing stored can make a response fail its own
 * schema"). They are written here straight into the database, as such a deployment would hold them.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { Value } from '@sinclair/typebox/value'
import { eq } from 'drizzle-orm'
import { identities, users } from '../src/db/schema'
import { UserModel } from '../src/modules/users/model'
import { WEBHOOK_PAYLOADS, webhookBody } from '../src/modules/webhooks/model'
import { startTestApp, type CallResult, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { jwtPayload, PASSWORD, signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'
import { verified, WebhookReceiver } from './support/webhook-receiver'

setDefaultTimeout(60_000)

const SORTS = ['createdAt', '-createdAt', 'email', '-email'] as const
const TAG = Date.now().toString(36)
/** What the database's own checks allow (trimmed, lower-case, non-empty) but sign-up would refuse. */
const STORED = [`no-at-sign-${TAG}`, `x-${TAG}@localhost`, `ädä-${TAG}@exämple.test`, `${'a'.repeat(65)}-${TAG}@example.test`]

let database: TestDatabase
let receiver: WebhookReceiver
let t: TestApp
let admin: Account
let secret: string
const legacy: Array<{ id: string; email: string }> = []

beforeAll(async () => {
	database = await createTestDatabase()
	receiver = await WebhookReceiver.start()
	t = await startTestApp({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, database)
	admin = await signUpAdmin(t)
	const created = await t.call('POST', '/api/webhooks', { token: admin.accessToken, json: { url: receiver.url, events: ['*'] } })
	expect(created.status).toBe(201)
	secret = created.body.data.secret
	// A real hash of PASSWORD, so that the stored accounts can log in.
	const donor = await signUp(t)
	const [{ passwordHash } = { passwordHash: null }] = await database.handle.db.select({ passwordHash: users.passwordHash }).from(users).where(eq(users.id, donor.id))
	for (const [i, email] of STORED.entries()) {
		const id = Bun.randomUUIDv7()
		await database.handle.db.insert(users).values({
			id,
			email,
			name: `Stored\u0001${i}\n\u0007`,
			passwordHash,
			pendingEmail: i === 0 ? `pending-${TAG}@localhost` : null,
		})
		await database.handle.db.insert(identities).values({ id: Bun.randomUUIDv7(), provider: 'gone', subject: `s-${i}`, email: `also not an address ${i}`, userId: id })
		legacy.push({ id, email })
	}
	for (let i = 0; i < 3; i++) await signUp(t, { email: uniqueEmail(`fine-${TAG}`) })
})
afterAll(async () => {
	await t.close()
	await receiver.stop()
	await database.drop()
})

/** Every page of a query, following nextCursor; every page must answer 200 with the list's own schema. */
async function walk(query: Record<string, string>) {
	const seen: string[] = []
	let cursor: string | null = null
	do {
		const params: URLSearchParams = new URLSearchParams({ ...query, limit: '2', ...(cursor ? { cursor } : {}) })
		const res: CallResult = await t.call('GET', `/api/users?${params}`, { token: admin.accessToken })
		expect({ query: params.toString(), status: res.status, type: res.body.type }).toEqual({ query: params.toString(), status: 200, type: undefined })
		expect(Value.Check(UserModel.page, res.body.data)).toBe(true)
		seen.push(...res.body.data.items.map((user: { email: string }) => user.email))
		cursor = res.body.data.nextCursor
	} while (cursor)
	return seen
}

describe('accounts stored with an address sign-up would refuse', () => {
	test('every page of the list holds them, in every sort, and with every filter', async () => {
		for (const sort of SORTS) expect(await walk({ sort })).toEqual(expect.arrayContaining(STORED))
		for (const email of STORED) {
			expect(await walk({ q: email.slice(0, 12) })).toContain(email)
			expect(await walk({ email, sort: 'email' })).toEqual([email])
		}
		expect(await walk({ q: TAG, role: 'user', status: 'active', sort: '-email', createdAfter: '2000-01-01T00:00:00.000Z' })).toEqual(expect.arrayContaining(STORED))
	})

	test('GET /users/{id} shows each as stored', async () => {
		for (const { id, email } of legacy) {
			const res = await t.call('GET', `/api/users/${id}`, { token: admin.accessToken })
			expect(res.status).toBe(200)
			expect(res.body.data).toMatchObject({ id, email, emailVerified: false })
		}
		const first = await t.call('GET', `/api/users/${legacy[0]?.id}`, { token: admin.accessToken })
		expect(first.body.data.pendingEmail).toBe(`pending-${TAG}@localhost`)
	})

	test('they log in, see themselves, their sessions and identities, and a session.created event carries them', async () => {
		for (const { id, email } of legacy) {
			const login = await t.call('POST', '/api/auth/login', { json: { email, password: PASSWORD } })
			expect(login.status).toBe(200)
			expect(login.body.data.user).toMatchObject({ id, email })
			const token = login.body.data.accessToken
			expect(jwtPayload(token).sub).toBe(id)
			const refreshed = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: login.body.data.refreshToken } })
			expect(refreshed.status).toBe(200)
			expect(refreshed.body.data.user.email).toBe(email)
			expect((await t.call('GET', '/api/users/me', { token: refreshed.body.data.accessToken })).body.data.email).toBe(email)
			expect((await t.call('GET', '/api/users/me/sessions', { token: refreshed.body.data.accessToken })).status).toBe(200)
			const listed = await t.call('GET', `/api/users/${id}/identities`, { token: admin.accessToken })
			expect(listed.status).toBe(200)
			expect(listed.body.data.items).toEqual([expect.objectContaining({ provider: 'gone', email: expect.stringMatching(/^also not an address/) })])
		}
	})

	test('deactivating them answers 200, and every webhook payload about them matches its declared schema', async () => {
		for (const { id } of legacy) {
			const off = await t.call('DELETE', `/api/users/${id}`, { token: admin.accessToken })
			expect(off.status).toBe(200)
			expect(off.body.data.status).toBe('deactivated')
		}
		const ids = new Set(legacy.map(({ id }) => id))
		const about = (event: { data: Record<string, any> }) => ids.has(event.data.user?.id ?? event.data.userId ?? event.data.session?.userId)
		await receiver.waitFor((d) => d.event.type === 'user.deactivated' && about(d.event), legacy.length)
		const events = receiver.received.filter((d) => about(d.event)).map((d) => verified(d, secret))
		expect(events.map((event) => event.type)).toEqual(expect.arrayContaining(['user.updated', 'user.deactivated']))
		for (const event of events) expect([...Value.Errors(webhookBody(event.type as keyof typeof WEBHOOK_PAYLOADS), event)].map(({ path, message }) => `${event.type} ${path} ${message}`)).toEqual([])
	})
})
