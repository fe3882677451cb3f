import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { problem, startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { signUp, signUpAdmin, type Account } from './support/fixtures'
import { verified, WebhookReceiver, type ReceivedDelivery } from './support/webhook-receiver'

setDefaultTimeout(30_000)

let database: TestDatabase
let receiver: WebhookReceiver
let t: TestApp
let admin: Account
let user: Account

beforeAll(async () => {
	database = await createTestDatabase()
	receiver = await WebhookReceiver.start()
	t = await startTestApp({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, database)
	admin = await signUpAdmin(t)
	user = await signUp(t)
})
afterAll(async () => {
	await t.close()
	await receiver.stop()
	await database.drop()
})

const ISO = expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
const SECRET = expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/)

const create = (body: unknown, token = admin.accessToken) => t.call('POST', '/api/webhooks', { token, json: body })

describe('endpoints', () => {
	test('created with its secret shown once, then read, listed, replaced and deleted', async () => {
		const created = await create({ url: receiver.url, events: ['user.created', 'session.revoked'], description: 'CRM sync' })
		expect(created.status).toBe(201)
		const endpoint = created.body.data
		expect(created.body).toEqual({
			data: {
				id: expect.any(String),
				url: receiver.url,
				description: 'CRM sync',
				events: ['user.created', 'session.revoked'],
				enabled: true,
				disabledReason: null,
				failingSince: null,
				secretRotatedAt: null,
				createdAt: ISO,
				updatedAt: ISO,
				secret: SECRET,
			},
			message: expect.any(String),
			errors: [],
		})
		expect(created.headers.get('location')).toBe(`/api/webhooks/${endpoint.id}`)
		const { secret: _, ...shown } = endpoint

		const read = await t.call('GET', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken })
		expect(read.body.data).toEqual(shown)
		expect(read.text).not.toContain('whsec_')
		const listed = await t.call('GET', '/api/webhooks', { token: admin.accessToken })
		expect(listed.body.data.items).toContainEqual(shown)
		expect(listed.text).not.toContain('whsec_')

		const replaced = await t.call('PUT', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken, json: { url: `${receiver.url}/v2`, events: ['*'], enabled: false } })
		expect(replaced.status).toBe(200)
		expect(replaced.body.data).toMatchObject({ url: `${receiver.url}/v2`, events: ['*'], description: '', enabled: false, disabledReason: 'admin' })
		// A disabled endpoint cannot be pinged.
		const ping = await t.call('POST', `/api/webhooks/${endpoint.id}/pings`, { token: admin.accessToken })
		expect(ping.body).toEqual(problem('conflict', 409, `/api/webhooks/${endpoint.id}/pings`, expect.stringContaining('disabled')))

		const deleted = await t.call('DELETE', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken })
		expect(deleted.status).toBe(200)
		expect((await t.call('GET', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken })).body).toEqual(
			problem('not-found', 404, `/api/webhooks/${endpoint.id}`, 'No webhook endpoint with this id'),
		)

		const audit = await t.call('GET', `/api/audit-events?userId=${admin.id}&limit=100`, { token: admin.accessToken })
		const types = (audit.body.data.items as Array<{ type: string; details: Record<string, unknown> }>).filter((e) => e.details.endpointId === endpoint.id).map((e) => e.type)
		expect(types).toEqual(['webhook.deleted', 'webhook.updated', 'webhook.created'])
	})

	test('every route refuses a user who is not an admin (403) and a caller without a token (401)', async () => {
		const id = '01939c3e-0000-7000-8000-000000000000'
		const routes: Array<[string, string, unknown?]> = [
			['POST', '/api/webhooks', { url: receiver.url, events: ['*'] }],
			['GET', '/api/webhooks'],
			['GET', `/api/webhooks/${id}`],
			['PUT', `/api/webhooks/${id}`, { url: receiver.url, events: ['*'] }],
			['DELETE', `/api/webhooks/${id}`],
			['POST', `/api/webhooks/${id}/secrets`],
			['POST', `/api/webhooks/${id}/pings`],
			['GET', `/api/webhooks/${id}/deliveries`],
			['POST', `/api/webhooks/${id}/deliveries/${id}/attempts`],
		]
		for (const [method, path, json] of routes) {
			const asUser = await t.call(method, path, { token: user.accessToken, json })
			expect({ method, path, status: asUser.status, type: asUser.body.type }).toEqual({ method, path, status: 403, type: 'https://latchkey.dev/problems/forbidden' })
			const anonymous = await t.call(method, path, { json })
			expect({ method, path, status: anonymous.status }).toEqual({ method, path, status: 401 })
		}
	})

	test('bad input is a 422 naming the field, and nothing is stored', async () => {
		const before = (await t.call('GET', '/api/webhooks', { token: admin.accessToken })).body.data.items.length
		const cases: Array<[unknown, string]> = [
			[{ url: receiver.url, events: ['user.exploded'] }, '#/events/0'],
			[{ url: receiver.url, events: [] }, '#/events'],
			[{ url: receiver.url, events: ['user.created', 'user.created'] }, '#/events'],
			[{ url: 'not a url', events: ['*'] }, '#/url'],
			[{ url: 'ftp://example.com/hooks', events: ['*'] }, '#/url'],
			[{ url: 'https://user:pass@example.com/hooks', events: ['*'] }, '#/url'],
			[{ url: receiver.url, events: ['*'], secret: 'whsec_mine' }, '#/secret'],
			[{ events: ['*'] }, '#/url'],
		]
		for (const [body, pointer] of cases) {
			const res = await create(body)
			expect({ body, status: res.status }).toEqual({ body, status: 422 })
			expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toContain(pointer)
		}
		expect((await t.call('GET', '/api/webhooks', { token: admin.accessToken })).body.data.items).toHaveLength(before)
	})

	test('unknown ids are 404, malformed ones 422', async () => {
		const unknown = '01939c3e-0000-7000-8000-000000000000'
		expect((await t.call('POST', `/api/webhooks/${unknown}/secrets`, { token: admin.accessToken })).status).toBe(404)
		expect((await t.call('POST', `/api/webhooks/${unknown}/pings`, { token: admin.accessToken })).status).toBe(404)
		expect((await t.call('GET', `/api/webhooks/${unknown}/deliveries`, { token: admin.accessToken })).status).toBe(404)
		expect((await t.call('GET', '/api/webhooks/not-a-uuid', { token: admin.accessToken })).status).toBe(422)
		const endpoint = (await create({ url: receiver.url, events: ['user.created'] })).body.data
		const missing = await t.call('POST', `/api/webhooks/${endpoint.id}/deliveries/${unknown}/attempts`, { token: admin.accessToken })
		expect(missing.body).toEqual(problem('not-found', 404, `/api/webhooks/${endpoint.id}/deliveries/${unknown}/attempts`, 'No such delivery of this endpoint'))
		await t.call('DELETE', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken })
	})
})

describe('refused URLs', () => {
	test('loopback, private, link-local and metadata addresses are refused unless WEBHOOK_ALLOW_PRIVATE_NETWORKS=true', async () => {
		const strict = await startTestApp({}, database)
		try {
			const strictAdmin = await signUpAdmin(strict)
			const refused = [
				'http://127.0.0.1:8080/hooks',
				'http://localhost/hooks',
				'http://2130706433/hooks',
				'http://0x7f.1/hooks',
				'http://10.1.2.3/hooks',
				'http://192.168.0.10/hooks',
				'http://100.64.0.1/hooks',
				'http://169.254.10.10/hooks',
				'http://[::1]/hooks',
				'http://[fe80::1]/hooks',
				'http://[fd12:3456::1]/hooks',
				'http://[::ffff:127.0.0.1]/hooks',
				'http://[::7f00:1]/hooks',
				'http://0.0.0.0/hooks',
				// The same addresses in the other IPv6 forms that lead to them: translated, NAT64, 6to4, Teredo.
				'http://[::ffff:0:7f00:1]/hooks',
				'http://[64:ff9b::7f00:1]/hooks',
				'http://[64:ff9b::10.1.2.3]/hooks',
				'http://[64:ff9b:1:7f00:0:100::]/hooks',
				'http://[2002:7f00:1::]/hooks',
				'http://[2002:c0a8:a::1]/hooks',
				'http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/hooks',
			]
			for (const url of refused) {
				const res = await strict.call('POST', '/api/webhooks', { token: strictAdmin.accessToken, json: { url, events: ['*'] } })
				expect({ url, status: res.status, errors: res.body.errors }).toEqual({
					url,
					status: 422,
					errors: [{ pointer: '#/url', code: 'refused', detail: 'the host resolves to a loopback, private or link-local address' }],
				})
			}
			// A public IPv4 address through NAT64 (what DNS64 answers for an IPv4-only host) is judged as that address.
			const nat64 = await strict.call('POST', '/api/webhooks', { token: strictAdmin.accessToken, json: { url: 'http://[64:ff9b::93.184.215.14]/hooks', events: ['*'] } })
			expect(nat64.status).toBe(201)
			expect(nat64.body.data.url).toBe('http://[64:ff9b::5db8:d70e]/hooks')
			await strict.call('DELETE', `/api/webhooks/${nat64.body.data.id}`, { token: strictAdmin.accessToken })
		} finally {
			await strict.close()
		}
	})

	test('cloud metadata addresses are refused even where private networks are allowed, in every spelling', async () => {
		const spellings = [
			'http://169.254.169.254/latest/meta-data',
			'http://169.254.170.2/v2/credentials',
			'http://100.100.100.200/latest/meta-data',
			'http://[fd00:ec2::254]/',
			'http://[fd00:ec2:0:0::0254]/',
			'http://[::ffff:a9fe:a9fe]/',
			'http://[::ffff:169.254.170.2]/',
			'http://[::169.254.169.254]/',
			'http://[::ffff:0:a9fe:a9fe]/',
			'http://[64:ff9b::a9fe:a9fe]/',
			'http://[64:ff9b::100.100.100.200]/',
			'http://[64:ff9b:1:a9fe:a9:fe00::]/',
			'http://[2002:a9fe:a9fe::]/',
			'http://[2002:a9fe:aa02:1::1]/',
			'http://[2001:0:4136:e378:8000:63bf:5601:5601]/',
			'http://0xa9fea9fe/',
			'http://169.254.43518/',
		]
		for (const url of spellings) {
			const res = await create({ url, events: ['*'] })
			expect({ url, status: res.status, errors: res.body.errors }).toEqual({
				url,
				status: 422,
				errors: [{ pointer: '#/url', code: 'refused', detail: 'the host resolves to a cloud metadata address' }],
			})
		}
	})

	test('http is refused in production; https is required', async () => {
		const production = await startTestApp({ NODE_ENV: 'production', DATA_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'), WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, database)
		try {
			const productionAdmin = await signUpAdmin(production)
			const res = await production.call('POST', '/api/webhooks', { token: productionAdmin.accessToken, json: { url: receiver.url, events: ['*'] } })
			expect(res.body.errors).toEqual([{ pointer: '#/url', code: 'refused', detail: 'must be an https URL' }])
			const https = await production.call('POST', '/api/webhooks', { token: productionAdmin.accessToken, json: { url: 'https://127.0.0.1/hooks', events: ['*'] } })
			expect(https.status).toBe(201)
			await production.call('DELETE', `/api/webhooks/${https.body.data.id}`, { token: productionAdmin.accessToken })
		} finally {
			await production.close()
		}
	})
})

describe('pings and the delivery log', () => {
	test('a ping reaches the endpoint; the log pages newest first with a Link to the next page', async () => {
		const endpoint = (await create({ url: receiver.url, events: ['user.created'] })).body.data
		const pings = []
		for (const _ of [1, 2, 3]) {
			const res = await t.call('POST', `/api/webhooks/${endpoint.id}/pings`, { token: admin.accessToken })
			expect(res.status).toBe(202)
			expect(res.body.data).toEqual({ deliveryId: expect.any(String), eventId: expect.any(String) })
			pings.push(res.body.data)
		}
		const received = await receiver.waitFor((d) => d.event.type === 'webhook.ping' && d.event.data.endpointId === endpoint.id, 3)
		expect(verified(received[0] as ReceivedDelivery, endpoint.secret)).toEqual({ type: 'webhook.ping', timestamp: ISO, data: { endpointId: endpoint.id } })
		await t.app.decorator.webhookJobs.idle()

		const first = await t.call('GET', `/api/webhooks/${endpoint.id}/deliveries?limit=2`, { token: admin.accessToken })
		expect(first.status).toBe(200)
		expect(first.body.data.items.map((d: { id: string }) => d.id)).toEqual([pings[2]?.deliveryId, pings[1]?.deliveryId])
		expect(first.body.data.items[0]).toEqual({
			id: pings[2]?.deliveryId,
			eventId: pings[2]?.eventId,
			eventType: 'webhook.ping',
			status: 'succeeded',
			createdAt: ISO,
			nextAttemptAt: null,
			payload: { type: 'webhook.ping', timestamp: ISO, data: { endpointId: endpoint.id } },
			attempts: [{ attemptedAt: ISO, durationMs: expect.any(Number), statusCode: 204, succeeded: true, error: null }],
		})
		const link = first.headers.get('link')
		expect(link).toMatch(/^<\/api\/webhooks\/[0-9a-f-]+\/deliveries\?limit=2&cursor=[A-Za-z0-9_-]+>; rel="next"$/)
		const next = await t.call('GET', link?.slice(1, link.indexOf('>')) as string, { token: admin.accessToken })
		expect(next.body.data.items.map((d: { id: string }) => d.id)).toEqual([pings[0]?.deliveryId])
		expect(next.body.data.nextCursor).toBeNull()
		expect((await t.call('GET', `/api/webhooks/${endpoint.id}/deliveries?status=failed`, { token: admin.accessToken })).body.data.items).toEqual([])
		const badCursor = await t.call('GET', `/api/webhooks/${endpoint.id}/deliveries?cursor=nope`, { token: admin.accessToken })
		expect(badCursor.status).toBe(400)
		await t.call('DELETE', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken })
	})
})

describe('a new attempt of a delivery whose job waits for its retry', () => {
	test('moves that job to now and answers 202 — on PostgreSQL 15 as on PGlite (its wake-up once named an unaliased subquery, a 500 there)', async () => {
		// An address nothing answers at (WEBHOOK_TIMEOUT_SECONDS caps the wait): the first attempt fails and its job waits for the retry.
		const endpoint = (await create({ url: 'https://93.184.215.14/hooks', events: ['user.reactivated'] })).body.data
		const ping = await t.call('POST', `/api/webhooks/${endpoint.id}/pings`, { token: admin.accessToken })
		expect(ping.status).toBe(202)
		t.app.decorator.webhookJobs.wake()
		await t.app.decorator.webhookJobs.idle()
		const again = await t.call('POST', `/api/webhooks/${endpoint.id}/deliveries/${ping.body.data.deliveryId}/attempts`, { token: admin.accessToken })
		expect(again.status).toBe(202)
	})
})
