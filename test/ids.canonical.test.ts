import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { identities } from '../src/db/schema'
import { problem, reauthenticationRequired, startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { enrollTotp, loginWithTotp } from './support/factors'
import { ageSession, login, PASSWORD, signUp, signUpAdmin, type Account } from './support/fixtures'
import { WebhookReceiver } from './support/webhook-receiver'

// API.md: "IDs are UUIDs (version 7: time-ordered), lower-case; another letter case names the same resource."
// Every id a route takes, in its path or its query, in upper case, against the same id in lower case.

setDefaultTimeout(30_000)

let database: TestDatabase
let receiver: WebhookReceiver
let t: TestApp
let admin: Account

beforeAll(async () => {
	database = await createTestDatabase()
	receiver = await WebhookReceiver.start()
	t = await startTestApp({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, database)
	admin = await signUpAdmin(t)
})
afterAll(async () => {
	await t.close()
	await receiver.stop()
	await database.drop()
})

const upper = (id: string) => id.toUpperCase()
const forbidden = (instance: string) => problem('forbidden', 403, instance, 'You may only act on your own account')
const mfaRequired = (instance: string) =>
	problem('mfa-required', 403, instance, 'This needs a session signed in with a second factor (aal2): sign in again with your factor')
const invalid = (instance: string, pointer: string, code: string, detail: string) =>
	problem('validation-error', 422, instance, '1 field is invalid', [{ pointer, code, detail }])

/** The same request with the id in lower case and in upper case: both answers, for comparing. */
async function bothCases(method: string, path: (id: string) => string, id: string, token: string) {
	const lower = await t.call(method, path(id), { token })
	const upperCase = await t.call(method, path(upper(id)), { token })
	return { lower, upper: upperCase }
}

describe('accounts: /users/{id}', () => {
	test('GET, PUT and DELETE name the same account whatever the letter case of its id', async () => {
		const user = await signUp(t)
		const read = await bothCases('GET', (id) => `/api/users/${id}`, user.id, admin.accessToken)
		expect(read.lower.status).toBe(200)
		expect(read.upper.body).toEqual(read.lower.body)

		const renamed = await t.call('PUT', `/api/users/${upper(user.id)}`, { json: { email: user.email, name: 'Renamed' }, token: admin.accessToken })
		expect(renamed.status).toBe(200)
		expect(renamed.body.data).toMatchObject({ id: user.id, name: 'Renamed' })
		expect((await t.call('GET', `/api/users/${user.id}`, { token: admin.accessToken })).body.data.name).toBe('Renamed')

		const deactivated = await t.call('DELETE', `/api/users/${upper(user.id)}`, { token: admin.accessToken })
		expect(deactivated.status).toBe(200)
		expect(deactivated.body.data).toMatchObject({ id: user.id, status: 'deactivated' })
		expect((await t.call('GET', `/api/users/${user.id}`, { token: admin.accessToken })).body.data.status).toBe('deactivated')
	})

	test('a user’s own id in upper case is their own account: read as /users/me, and a password change there still needs proof that it is them', async () => {
		const user = await signUp(t)
		const own = await t.call('GET', `/api/users/${upper(user.id)}`, { token: user.accessToken })
		expect(own.status).toBe(200)
		expect(own.body).toEqual((await t.call('GET', '/api/users/me', { token: user.accessToken })).body)

		const path = `/api/users/${upper(admin.id)}`
		await ageSession(t, admin)
		const res = await t.call('PUT', path, { json: { email: admin.email, name: '', password: 'another good passphrase' }, token: admin.accessToken })
		expect(res.body).toEqual(reauthenticationRequired(path))
	})

	test('GET /users/{id}/sessions and DELETE /users/{id}/sessions/{sessionId} name the same sessions in upper case', async () => {
		const user = await signUp(t)
		const other = await login(t, user.email)
		const listed = await bothCases('GET', (id) => `/api/users/${id}/sessions`, user.id, user.accessToken)
		expect(listed.lower.status).toBe(200)
		expect(listed.upper.body).toEqual(listed.lower.body)

		const path = `/api/users/${upper(user.id)}/sessions/${upper(other.sessionId)}`
		const revoked = await t.call('DELETE', path, { token: user.accessToken })
		expect(revoked.status).toBe(200)
		expect(revoked.body.data).toMatchObject({ id: other.sessionId, current: false, revokedAt: expect.any(String) })
		// The calling session named in upper case is still the current one.
		const current = await t.call('DELETE', `/api/users/${upper(user.id)}/sessions/${upper(user.sessionId)}`, { token: user.accessToken })
		expect(current.body.data).toMatchObject({ id: user.sessionId, current: true, revokedAt: expect.any(String) })
	})

	test('an unknown id in upper case is 404, as in lower case', async () => {
		const id = upper(Bun.randomUUIDv7())
		const res = await t.call('GET', `/api/users/${id}`, { token: admin.accessToken })
		expect(res.body).toEqual(problem('not-found', 404, `/api/users/${id}`, 'No user with this id'))
	})
})

describe('second factors: /users/{id}/factors', () => {
	test('a user’s own id in upper case lists their own factors (not 403)', async () => {
		const user = await signUp(t)
		await enrollTotp(t, user)
		const { lower, upper: upperCase } = await bothCases('GET', (id) => `/api/users/${id}/factors`, user.id, user.accessToken)
		expect(lower.status).toBe(200)
		expect(lower.body.data.items).toHaveLength(1)
		expect(upperCase.body).toEqual(lower.body)
	})

	test('an admin’s own id in upper case does not pass for another account’s: removing their active factor from an aal1 session is mfa-required', async () => {
		const own = await signUpAdmin(t)
		const aal1 = await login(t, own.email)
		const { factorId } = await enrollTotp(t, own)
		for (const id of [own.id, upper(own.id)]) {
			const path = `/api/users/${id}/factors/${factorId}`
			expect((await t.call('DELETE', path, { token: aal1.accessToken })).body).toEqual(mfaRequired(path))
		}
		const listed = await t.call('GET', `/api/users/${own.id}/factors`, { token: aal1.accessToken })
		expect(listed.body.data.items).toEqual([expect.objectContaining({ id: factorId, status: 'active' })])
	})

	test('a user’s own id in upper case at aal1 is mfa-required (not 403); at aal2 upper-case ids remove the factor, audited by its id', async () => {
		const user = await signUp(t)
		const aal1 = await login(t, user.email)
		const { factorId, secret } = await enrollTotp(t, user)
		const path = `/api/users/${upper(user.id)}/factors/${upper(factorId)}`
		expect((await t.call('DELETE', path, { token: aal1.accessToken })).body).toEqual(mfaRequired(path))

		const aal2 = await loginWithTotp(t, user, secret)
		const removed = await t.call('DELETE', path, { token: aal2.accessToken })
		expect(removed.status).toBe(200)
		expect(removed.body.data).toMatchObject({ id: factorId, status: 'active' })
		const audit = await t.call('GET', `/api/audit-events?userId=${user.id}&type=factor.removed`, { token: admin.accessToken })
		expect(audit.body.data.items).toEqual([expect.objectContaining({ actorId: user.id, subjectId: user.id, details: { factorId, type: 'totp' } })])
	})

	test('an admin lists and removes another account’s factor by upper-case ids, with no second factor of the user', async () => {
		const user = await signUp(t)
		const { factorId } = await enrollTotp(t, user)
		const listed = await bothCases('GET', (id) => `/api/users/${id}/factors`, user.id, admin.accessToken)
		expect(listed.upper.body).toEqual(listed.lower.body)
		const removed = await t.call('DELETE', `/api/users/${upper(user.id)}/factors/${upper(factorId)}`, { token: admin.accessToken })
		expect(removed.status).toBe(200)
		expect(removed.body.data).toMatchObject({ id: factorId })
	})
})

describe('identities: /users/{id}/identities', () => {
	test('a user’s own id in upper case lists and unlinks their own identities (not 403)', async () => {
		const user = await signUp(t)
		const identityId = Bun.randomUUIDv7()
		await t.database.handle.db.insert(identities).values({ id: identityId, provider: 'example', subject: `sub-${identityId}`, email: user.email, userId: user.id })
		const listed = await bothCases('GET', (id) => `/api/users/${id}/identities`, user.id, user.accessToken)
		expect(listed.lower.status).toBe(200)
		expect(listed.lower.body.data.items).toEqual([expect.objectContaining({ id: identityId, provider: 'example' })])
		expect(listed.upper.body).toEqual(listed.lower.body)

		const unlinked = await t.call('DELETE', `/api/users/${upper(user.id)}/identities/${upper(identityId)}`, { token: user.accessToken })
		expect(unlinked.status).toBe(200)
		expect(unlinked.body.data).toMatchObject({ id: identityId, provider: 'example' })
		const gone = `/api/users/${upper(user.id)}/identities/${upper(identityId)}`
		expect((await t.call('DELETE', gone, { token: user.accessToken })).body).toEqual(problem('not-found', 404, gone, expect.any(String)))
	})
})

describe('someone else’s account', () => {
	test('is still 403 for a user, whatever the letter case of its id', async () => {
		const user = await signUp(t)
		const other = await signUp(t)
		const any = upper(Bun.randomUUIDv7())
		const requests = [
			['GET', `/api/users/${upper(other.id)}`],
			['PUT', `/api/users/${upper(other.id)}`],
			['DELETE', `/api/users/${upper(other.id)}`],
			['GET', `/api/users/${upper(other.id)}/sessions`],
			['DELETE', `/api/users/${upper(other.id)}/sessions/${upper(other.sessionId)}`],
			['GET', `/api/users/${upper(other.id)}/factors`],
			['DELETE', `/api/users/${upper(other.id)}/factors/${any}`],
			['GET', `/api/users/${upper(other.id)}/identities`],
			['DELETE', `/api/users/${upper(other.id)}/identities/${any}`],
		] as const
		for (const [method, path] of requests) {
			const json = method === 'PUT' ? { email: other.email, name: 'Taken over', password: 'another good passphrase' } : undefined
			expect({ method, path, body: (await t.call(method, path, { json, token: user.accessToken })).body }).toEqual({ method, path, body: forbidden(path) })
		}
		// Nothing changed: the other account still signs in with its password.
		expect((await login(t, other.email, PASSWORD)).id).toBe(other.id)
	})
})

describe('webhooks: /webhooks/{id} and its deliveries', () => {
	test('an endpoint, its delivery log and a redelivery are named by upper-case ids as by lower-case ones', async () => {
		const created = await t.call('POST', '/api/webhooks', { token: admin.accessToken, json: { url: receiver.url, events: ['user.created'] } })
		expect(created.status).toBe(201)
		const id: string = created.body.data.id
		const read = await bothCases('GET', (i) => `/api/webhooks/${i}`, id, admin.accessToken)
		expect(read.lower.status).toBe(200)
		expect(read.upper.body).toEqual(read.lower.body)

		const replaced = await t.call('PUT', `/api/webhooks/${upper(id)}`, { token: admin.accessToken, json: { url: receiver.url, events: ['*'], description: 'upper' } })
		expect(replaced.body.data).toMatchObject({ id, description: 'upper', events: ['*'] })

		const ping = await t.call('POST', `/api/webhooks/${upper(id)}/pings`, { token: admin.accessToken })
		expect(ping.status).toBe(202)
		const { deliveryId } = ping.body.data
		await receiver.waitFor((d) => d.event.type === 'webhook.ping' && d.event.data.endpointId === id)
		// The receiver hears the ping before its attempt is recorded: both cases read the log once it says so.
		for (const deadline = Date.now() + 10_000; ; await Bun.sleep(20)) {
			const items: Array<{ id: string; status: string }> = (await t.call('GET', `/api/webhooks/${id}/deliveries`, { token: admin.accessToken })).body.data.items
			if (items.find((d) => d.id === deliveryId)?.status === 'succeeded') break
			if (Date.now() > deadline) throw new Error('the ping was never recorded as delivered')
		}
		const log = await bothCases('GET', (i) => `/api/webhooks/${i}/deliveries`, id, admin.accessToken)
		expect(log.lower.body.data.items.map((d: { id: string }) => d.id)).toContain(deliveryId)
		expect(log.upper.body).toEqual(log.lower.body)

		const again = await t.call('POST', `/api/webhooks/${upper(id)}/deliveries/${upper(deliveryId)}/attempts`, { token: admin.accessToken })
		expect(again.status).toBe(202)

		const deleted = await t.call('DELETE', `/api/webhooks/${upper(id)}`, { token: admin.accessToken })
		expect(deleted.body.data).toMatchObject({ id })
		expect((await t.call('GET', `/api/webhooks/${id}`, { token: admin.accessToken })).body).toEqual(
			problem('not-found', 404, `/api/webhooks/${id}`, 'No webhook endpoint with this id'),
		)
	})
})

describe('audit: ?userId=', () => {
	test('an upper-case userId filters the same events, and the next page’s link names the id in lower case', async () => {
		const user = await signUp(t)
		await login(t, user.email)
		const lower = await t.call('GET', `/api/audit-events?userId=${user.id}&limit=1`, { token: admin.accessToken })
		const upperCase = await t.call('GET', `/api/audit-events?userId=${upper(user.id)}&limit=1`, { token: admin.accessToken })
		expect(lower.body.data.items).toHaveLength(1)
		expect(upperCase.body).toEqual(lower.body)
		expect(upperCase.headers.get('link')).toBe(lower.headers.get('link'))
		expect(upperCase.headers.get('link')).toContain(`userId=${user.id}&`)
	})
})

describe('malformed ids', () => {
	test('stay 422 at their parameter: not a UUID, a urn:uuid: one, braces, no hyphens, and "ME"', async () => {
		const id = Bun.randomUUIDv7()
		const malformed = ['not-a-uuid', `urn:uuid:${id}`, encodeURIComponent(`{${id}}`), id.replaceAll('-', ''), 'ME']
		for (const bad of malformed) {
			const cases = [
				['GET', `/api/users/${bad}`, '#/id', 'enum', 'must be a user id (UUID) or "me"'],
				['GET', `/api/users/${bad}/factors`, '#/id', 'enum', 'must be a user id (UUID) or "me"'],
				['GET', `/api/users/${bad}/identities`, '#/id', 'enum', 'must be a user id (UUID) or "me"'],
				['DELETE', `/api/users/me/sessions/${bad}`, '#/sessionId', 'format', 'must be a UUID'],
				['DELETE', `/api/users/me/factors/${bad}`, '#/factorId', 'format', 'must be a UUID'],
				['GET', `/api/webhooks/${bad}`, '#/id', 'format', 'must be a UUID'],
				['POST', `/api/webhooks/${id}/deliveries/${bad}/attempts`, '#/deliveryId', 'format', 'must be a UUID'],
			] as const
			for (const [method, path, pointer, code, detail] of cases) {
				const res = await t.call(method, path, { token: admin.accessToken })
				expect({ path, body: res.body }).toEqual({ path, body: invalid(path, pointer, code, detail) })
			}
			const audit = await t.call('GET', `/api/audit-events?userId=${bad}`, { token: admin.accessToken })
			expect(audit.body).toEqual(invalid('/api/audit-events', '#/userId', 'format', 'must be a UUID'))
		}
	})
})
