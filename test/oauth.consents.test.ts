/**
 * Users' consents to OAuth clients (API.md "Latchkey as an OpenID Provider", "Consent"): remembered per user
 * and client with their scopes merged, listed for the user themself or an admin, and withdrawn with every
 * token, grant and code that client holds for that user — and nothing of anyone else's.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { oauthArtifacts, oauthConsents } from '../src/db/schema'
import { problem, startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { signUp, signUpAdmin, type Account } from './support/fixtures'
import { WebhookReceiver } from './support/webhook-receiver'

setDefaultTimeout(60_000)

let database: TestDatabase
let receiver: WebhookReceiver
let t: TestApp
let admin: Account
let webhookSecret: string

interface Client {
	id: string
	clientId: string
	name: string
}
let alpha: Client
let beta: Client

beforeAll(async () => {
	database = await createTestDatabase()
	receiver = await WebhookReceiver.start()
	t = await startTestApp({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, database)
	admin = await signUpAdmin(t)
	const hook = await t.call('POST', '/api/webhooks', { token: admin.accessToken, json: { url: receiver.url, events: ['consent.granted', 'consent.revoked'] } })
	expect(hook.status).toBe(201)
	webhookSecret = hook.body.data.secret
	alpha = await newClient('Alpha Notes')
	beta = await newClient('Beta Photos')
})
afterAll(async () => {
	await t.close()
	await receiver.stop()
	await database.drop()
})

const ISO = expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)

async function newClient(name: string): Promise<Client> {
	const res = await t.call('POST', '/api/oauth-clients', { token: admin.accessToken, json: { name, type: 'public', redirectUris: ['https://notes.example.com/callback'] } })
	expect(res.status).toBe(201)
	return res.body.data
}

const consents = () => t.app.decorator.oauthConsents
const db = () => t.database.handle.db

/** What the protocol library stores for a user and client: tokens, a grant, a code (and a browser session, which is no client's). */
async function artifactsFor(account: { id: string }, client: Client, tag: string) {
	const row = (model: string) => ({ model, id: `${model}-${tag}`, payload: { kind: model, accountId: account.id, clientId: client.clientId }, grantId: `grant-${tag}` })
	const rows = [row('RefreshToken'), row('AccessToken'), row('Grant'), row('AuthorizationCode'), { model: 'Session', id: `Session-${tag}`, payload: { kind: 'Session', accountId: account.id } }]
	await db().insert(oauthArtifacts).values(rows)
	return rows.map((r) => r.id)
}

const artifactIds = async () => (await db().select({ id: oauthArtifacts.id }).from(oauthArtifacts)).map((row) => row.id)

/** The deliveries of `type` about one user, verified and checked against the documented payload. */
const eventsOf = (type: string, userId: string, count: number) => receiver.documentedEvents(type, (data) => data.userId === userId, count, webhookSecret)

describe('consents', () => {
	test('a grant is remembered per user and client, new scopes merge in, and the user or an admin lists them', async () => {
		const user = await signUp(t)
		const first = await consents().grant(user.id, alpha.id, ['openid', 'profile'])
		expect(first).toEqual({ clientId: alpha.clientId, clientName: 'Alpha Notes', scopes: ['openid', 'profile'], grantedAt: ISO })
		// Nothing new: nothing written, no event.
		expect(await consents().grant(user.id, alpha.id, ['openid'])).toEqual(first)
		const widened = await consents().grant(user.id, alpha.id, ['openid', 'email', 'offline_access'])
		expect(widened.scopes).toEqual(['openid', 'profile', 'email', 'offline_access'])
		await consents().grant(user.id, beta.id, ['openid'])
		expect(await db().select().from(oauthConsents).where(eq(oauthConsents.userId, user.id))).toHaveLength(2)

		const mine = await t.call('GET', '/api/users/me/consents', { token: user.accessToken })
		expect(mine.status).toBe(200)
		expect(mine.headers.get('cache-control')).toBe('no-store')
		expect(mine.body).toEqual({
			data: {
				items: [
					{ clientId: beta.clientId, clientName: 'Beta Photos', scopes: ['openid'], grantedAt: ISO },
					{ clientId: alpha.clientId, clientName: 'Alpha Notes', scopes: ['openid', 'profile', 'email', 'offline_access'], grantedAt: ISO },
				],
			},
			message: 'Consents',
			errors: [],
		})
		expect((await t.call('GET', `/api/users/${user.id}/consents`, { token: user.accessToken })).body).toEqual(mine.body)
		expect((await t.call('GET', `/api/users/${user.id.toUpperCase()}/consents`, { token: admin.accessToken })).body).toEqual(mine.body)
		expect((await t.call('GET', '/api/users/me/consents', { token: admin.accessToken })).body.data).toEqual({ items: [] })

		const granted = await eventsOf('consent.granted', user.id, 3)
		expect(granted.map((event) => event.data)).toEqual([
			{ userId: user.id, consent: { clientId: alpha.clientId, clientName: 'Alpha Notes', scopes: ['openid', 'profile'], grantedAt: ISO } },
			{ userId: user.id, consent: { clientId: alpha.clientId, clientName: 'Alpha Notes', scopes: ['openid', 'profile', 'email', 'offline_access'], grantedAt: ISO } },
			{ userId: user.id, consent: { clientId: beta.clientId, clientName: 'Beta Photos', scopes: ['openid'], grantedAt: ISO } },
		])
	})

	test('revoking deletes the consent and that client’s tokens, grants and codes for that user only', async () => {
		const user = await signUp(t)
		const other = await signUp(t)
		await consents().grant(user.id, alpha.id, ['openid', 'offline_access'])
		await consents().grant(user.id, beta.id, ['openid'])
		await consents().grant(other.id, alpha.id, ['openid'])
		const gone = await artifactsFor(user, alpha, `${user.id}-alpha`)
		const kept = [...(await artifactsFor(user, beta, `${user.id}-beta`)), ...(await artifactsFor(other, alpha, `${other.id}-alpha`))]
		const session = gone.pop() as string

		const path = `/api/users/me/consents/${alpha.clientId}`
		const revoked = await t.call('DELETE', path, { token: user.accessToken })
		expect(revoked.status).toBe(200)
		expect(revoked.body).toEqual({ data: { clientId: alpha.clientId, clientName: 'Alpha Notes', scopes: ['openid', 'offline_access'], grantedAt: ISO }, message: 'Consent revoked', errors: [] })
		const left = await artifactIds()
		for (const id of gone) expect({ id, left: left.includes(id) }).toEqual({ id, left: false })
		for (const id of [...kept, session]) expect({ id, left: left.includes(id) }).toEqual({ id, left: true })

		expect((await t.call('GET', '/api/users/me/consents', { token: user.accessToken })).body.data.items.map((item: { clientId: string }) => item.clientId)).toEqual([beta.clientId])
		expect((await t.call('GET', '/api/users/me/consents', { token: other.accessToken })).body.data.items.map((item: { clientId: string }) => item.clientId)).toEqual([alpha.clientId])
		// Once gone, it is not there to revoke.
		expect((await t.call('DELETE', path, { token: user.accessToken })).body).toEqual(problem('not-found', 404, path, 'This user has given no consent to this client'))

		// An admin revokes another user's consent.
		const byAdmin = await t.call('DELETE', `/api/users/${user.id}/consents/${beta.clientId}`, { token: admin.accessToken })
		expect(byAdmin.body.data).toMatchObject({ clientId: beta.clientId, scopes: ['openid'] })
		expect(await artifactIds()).not.toContain(`RefreshToken-${user.id}-beta`)
		expect(await artifactIds()).toContain(`RefreshToken-${other.id}-alpha`)

		const events = await eventsOf('consent.revoked', user.id, 2)
		expect(events.map((event) => event.data.consent.clientId)).toEqual([alpha.clientId, beta.clientId])
		const audit = await t.call('GET', `/api/audit-events?userId=${user.id}&limit=100`, { token: admin.accessToken })
		const rows = (audit.body.data.items as Array<{ type: string; actorId: string; subjectId: string; details: Record<string, unknown> }>).filter((event) => event.type.startsWith('consent.'))
		expect(rows.map((row) => [row.type, row.actorId, row.details.clientId])).toEqual([
			['consent.revoked', admin.id, beta.clientId],
			['consent.revoked', user.id, alpha.clientId],
			['consent.granted', user.id, beta.clientId],
			['consent.granted', user.id, alpha.clientId],
		])
	})

	test('unknown users, clients and consents are 404; malformed ids are 422', async () => {
		const user = await signUp(t)
		const unknownUser = '01939c3e-0000-7000-8000-000000000000'
		expect((await t.call('GET', `/api/users/${unknownUser}/consents`, { token: admin.accessToken })).body).toEqual(problem('not-found', 404, `/api/users/${unknownUser}/consents`, 'No user with this id'))
		expect((await t.call('DELETE', `/api/users/${unknownUser}/consents/${alpha.clientId}`, { token: admin.accessToken })).status).toBe(404)
		const noClient = `/api/users/me/consents/no-such-client`
		expect((await t.call('DELETE', noClient, { token: user.accessToken })).body).toEqual(problem('not-found', 404, noClient, 'This user has given no consent to this client'))
		expect((await t.call('DELETE', `/api/users/me/consents/${beta.clientId}`, { token: user.accessToken })).status).toBe(404)
		expect((await t.call('GET', '/api/users/not-a-uuid/consents', { token: admin.accessToken })).status).toBe(422)
		const badClientId = await t.call('DELETE', '/api/users/me/consents/bad%20id', { token: user.accessToken })
		expect(badClientId.status).toBe(422)
		expect(badClientId.body.errors.map((error: { pointer: string }) => error.pointer)).toEqual(['#/clientId'])
	})
})

describe('permissions', () => {
	test('another user gets 403, a caller without a token 401, and the consent stays', async () => {
		const user = await signUp(t)
		const other = await signUp(t)
		await consents().grant(user.id, alpha.id, ['openid'])
		const routes: Array<[string, string]> = [
			['GET', `/api/users/${user.id}/consents`],
			['DELETE', `/api/users/${user.id}/consents/${alpha.clientId}`],
		]
		for (const [method, path] of routes) {
			const asOther = await t.call(method, path, { token: other.accessToken })
			expect({ method, body: asOther.body }).toEqual({ method, body: problem('forbidden', 403, path, 'You may only act on your own account') })
			const anonymous = await t.call(method, path)
			expect({ method, status: anonymous.status, type: anonymous.body.type }).toEqual({ method, status: 401, type: 'https://latchkey.dev/problems/unauthorized' })
		}
		expect((await t.call('GET', '/api/users/me/consents', { token: user.accessToken })).body.data.items).toHaveLength(1)
	})

	test('an admin held to enrolment (MFA_REQUIRED=admins) reads and revokes no one else’s consents', async () => {
		const held = await startTestApp({ MFA_REQUIRED: 'admins' }, database)
		try {
			const heldAdmin = await signUpAdmin(held)
			const user = await signUp(held)
			await consents().grant(user.id, alpha.id, ['openid'])
			const HELD = (instance: string) => problem('mfa-enrollment-required', 403, instance, 'Enrol a second factor first: this session serves only enrolment')
			for (const [method, path] of [
				['GET', `/api/users/${user.id}/consents`],
				['DELETE', `/api/users/${user.id}/consents/${alpha.clientId}`],
			] as const) {
				const res = await held.call(method, path, { token: heldAdmin.accessToken })
				expect({ method, body: res.body }).toEqual({ method, body: HELD(path) })
			}
			expect((await held.call('GET', '/api/users/me/consents', { token: user.accessToken })).body.data.items).toHaveLength(1)
		} finally {
			await held.close()
		}
	})
})
