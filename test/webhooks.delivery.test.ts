import { afterAll, afterEach, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { and, desc, eq, gte, sql } from 'drizzle-orm'
import { jobs, webhookAttempts, webhookDeliveries, webhookEvents } from '../src/db/schema'
import { purgeWebhookLogStep } from '../src/modules/webhooks/delivery'
import { recordWebhookEvents } from '../src/modules/webhooks/outbox'
import { startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { login, signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'
import { expectNotVerified, verified, WebhookReceiver, type ReceivedDelivery } from './support/webhook-receiver'

setDefaultTimeout(60_000)

/** Receivers on loopback, retries a second apart, each run as soon as it is due (a poll every tenth of a second, not every second). */
const WEBHOOK_ENV = { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETRY_SCHEDULE: '1,1,1', JOB_POLL_SECONDS: '0.1' }
/** For tests that wait out a retry and do nothing meanwhile (a receiver that is down for a while needs the seconds above). */
const QUICK_RETRIES = '0.25,0.25,0.25'
/** A first retry a quarter second on, for a receiver back by then; whole seconds after it, should it be slower to come back. */
const QUICK_THEN_SECONDS = '0.25,1,1'

// One database for the file; each test runs its own app and receivers on it, closed before the next starts
// (an app left running would deliver the next test's events too).
let database: TestDatabase
let running: Array<{ close(): Promise<void> } | { stop(): Promise<void> }> = []
beforeAll(async () => {
	database = await createTestDatabase()
})
afterEach(async () => {
	for (const thing of running.reverse()) await ('close' in thing ? thing.close() : thing.stop())
	running = []
	// Endpoints of one test must not receive the next one's events.
	await database.handle.db.execute(sql`delete from webhook_endpoints`)
})
afterAll(() => database.drop())

async function receiver() {
	const started = await WebhookReceiver.start()
	running.push(started)
	return started
}

async function app(env: Record<string, string> = {}, extra: Parameters<typeof startTestApp>[2] = {}) {
	const t = await startTestApp({ ...WEBHOOK_ENV, ...env }, database, extra)
	running.push(t)
	return { t, admin: await signUpAdmin(t) }
}

async function subscribe(t: TestApp, admin: Account, url: string, events: string[] = ['user.created']) {
	const res = await t.call('POST', '/api/webhooks', { token: admin.accessToken, json: { url, events } })
	expect(res.status).toBe(201)
	return res.body.data as { id: string; secret: string }
}

async function deliveries(t: TestApp, admin: Account, endpointId: string) {
	const res = await t.call('GET', `/api/webhooks/${endpointId}/deliveries`, { token: admin.accessToken })
	expect(res.status).toBe(200)
	return res.body.data.items as Array<{ id: string; eventId: string; eventType: string; status: string; nextAttemptAt: string | null; attempts: Array<{ statusCode: number | null; succeeded: boolean; error: string | null; durationMs: number }> }>
}

/** Polls the delivery log until the one delivery of `eventId` satisfies `ready`. */
async function deliveryOnceItIs(t: TestApp, admin: Account, endpointId: string, eventId: string | undefined, ready: (d: Awaited<ReturnType<typeof deliveries>>[number]) => boolean) {
	const deadline = Date.now() + 20_000
	for (;;) {
		const found = (await deliveries(t, admin, endpointId)).find((d) => eventId === undefined || d.eventId === eventId)
		if (found && ready(found)) return found
		if (Date.now() > deadline) throw new Error(`delivery not as expected: ${JSON.stringify(found)}`)
		await Bun.sleep(50)
	}
}

const createdFor = (user: { id: string }) => (d: ReceivedDelivery) => d.event.type === 'user.created' && d.event.data.user.id === user.id

describe('retries', () => {
	test('a receiver answering 500, then 200, gets the event on the retry, with the same webhook-id and a valid signature', async () => {
		const hooks = await receiver()
		const { t, admin } = await app({ WEBHOOK_RETRY_SCHEDULE: QUICK_RETRIES })
		const endpoint = await subscribe(t, admin, hooks.url)
		hooks.replies = [500, 200]
		const user = await signUp(t)
		const [first, second] = await hooks.waitFor(createdFor(user), 2)
		expect(second?.id).toBe(first?.id as string)
		expect(verified(second as ReceivedDelivery, endpoint.secret).data.user.id).toBe(user.id)
		const delivery = await deliveryOnceItIs(t, admin, endpoint.id, first?.id, (d) => d.status === 'succeeded')
		expect(delivery.attempts.map(({ statusCode, succeeded, error }) => ({ statusCode, succeeded, error }))).toEqual([
			{ statusCode: 500, succeeded: false, error: 'HTTP 500' },
			{ statusCode: 200, succeeded: true, error: null },
		])
	})

	test('a receiver that never answers times out and is tried again; the request that caused the event never waits for it', async () => {
		const hooks = await receiver()
		const { t, admin } = await app({ WEBHOOK_TIMEOUT_SECONDS: '2', WEBHOOK_RETRY_SCHEDULE: QUICK_RETRIES })
		const endpoint = await subscribe(t, admin, hooks.url)
		hooks.replies = ['hang']
		const user = await signUp(t)
		// The sign-up (and its login) answered while the first attempt was still waiting for the receiver.
		expect((await deliveries(t, admin, endpoint.id))[0]).toMatchObject({ status: 'pending', attempts: [] })
		const [delivery] = await hooks.waitFor(createdFor(user))
		const logged = await deliveryOnceItIs(t, admin, endpoint.id, delivery?.id, (d) => d.status === 'succeeded')
		expect(logged.attempts[0]).toMatchObject({ statusCode: null, succeeded: false, error: 'no answer within 2 s' })
		expect(logged.attempts[0]?.durationMs).toBeGreaterThanOrEqual(1900)
		expect(logged.attempts[1]).toMatchObject({ statusCode: 204, succeeded: true })
	})

	test('a receiver that is down, then up, gets each event once', async () => {
		const hooks = await receiver()
		const { t, admin } = await app({ WEBHOOK_RETRY_SCHEDULE: QUICK_THEN_SECONDS })
		const endpoint = await subscribe(t, admin, hooks.url)
		await hooks.stop()
		const users = await Promise.all([signUp(t), signUp(t), signUp(t)])
		const refused = await deliveryOnceItIs(t, admin, endpoint.id, undefined, (d) => d.attempts.length >= 1)
		expect(refused.attempts[0]).toMatchObject({ statusCode: null, succeeded: false, error: 'connection refused' })
		hooks.listen()
		for (const user of users) await hooks.waitFor(createdFor(user))
		await t.app.decorator.webhookJobs.idle()
		for (const user of users) expect(hooks.received.filter(createdFor(user))).toHaveLength(1)
	})

	test('after the last retry the delivery is failed; a redelivery sends it again with the same webhook-id', async () => {
		const hooks = await receiver()
		const { t, admin } = await app({ WEBHOOK_RETRY_SCHEDULE: '0.25' })
		const endpoint = await subscribe(t, admin, hooks.url)
		hooks.replies = [503, 503]
		const user = await signUp(t)
		const [first] = await hooks.waitFor(createdFor(user), 2)
		const failed = await deliveryOnceItIs(t, admin, endpoint.id, first?.id, (d) => d.status === 'failed')
		expect(failed.attempts).toHaveLength(2)
		expect(failed.nextAttemptAt).toBeNull()

		const again = await t.call('POST', `/api/webhooks/${endpoint.id}/deliveries/${failed.id}/attempts`, { token: admin.accessToken })
		expect(again.status).toBe(202)
		const all = await hooks.waitFor(createdFor(user), 3)
		expect(new Set(all.map((d) => d.id))).toEqual(new Set([first?.id as string]))
		const succeeded = await deliveryOnceItIs(t, admin, endpoint.id, first?.id, (d) => d.status === 'succeeded')
		expect(succeeded.attempts.map((a) => a.statusCode)).toEqual([503, 503, 204])
	})
})

describe('isolation', () => {
	test('a receiver that hangs holds at most its share of the delivery slots; the others keep going', async () => {
		const slow = await receiver()
		const fast = await receiver()
		// 4 slots; a slow endpoint may hold 1 of them.
		const { t, admin } = await app({ WEBHOOK_CONCURRENCY: '4', WEBHOOK_TIMEOUT_SECONDS: '1', WEBHOOK_RETRY_SCHEDULE: '30' })
		await subscribe(t, admin, slow.url)
		slow.otherwise = 'hang'
		// Its first attempt takes the whole timeout: it is known slow from then on.
		await signUp(t)
		await deliveryOnceItIs(t, admin, (await t.call('GET', '/api/webhooks', { token: admin.accessToken })).body.data.items[0].id, undefined, (d) => d.attempts.length === 1)
		slow.mostHanging = 0
		await subscribe(t, admin, fast.url)
		const users = await Promise.all(Array.from({ length: 12 }, () => signUp(t)))
		// Every event reached the healthy receiver, while the slow one was never sent more than one at a time
		// (without the cap, its attempts would take all 4 slots for 1 s at each claim).
		for (const user of users) await fast.waitFor(createdFor(user), 1, 10_000)
		expect(slow.mostHanging).toBe(1)
		const pending = await database.handle.db.select({ n: sql<number>`count(*)::int` }).from(webhookDeliveries).where(sql`status = 'pending' and endpoint_id = (select id from webhook_endpoints where url = ${slow.url})`)
		expect(pending[0]?.n).toBeGreaterThanOrEqual(11)
		// Seen: the slow receiver answers from now on, so that closing the app does not wait out the attempt it holds.
		slow.otherwise = 204
		slow.answerHanging()
	})

	test('dozens of events at once are each delivered once', async () => {
		const hooks = await receiver()
		const { t, admin } = await app()
		await subscribe(t, admin, hooks.url)
		const emails = Array.from({ length: 40 }, () => uniqueEmail('burst'))
		const created = await Promise.all(emails.map((email) => t.call('POST', '/api/users', { json: { email, password: 'correct horse battery staple' } })))
		expect(created.map((res) => res.status)).toEqual(emails.map(() => 201))
		await hooks.waitFor((d) => d.event.type === 'user.created' && emails.includes(d.event.data.user.email), 40)
		await t.app.decorator.webhookJobs.idle()
		const ids = hooks.received.filter((d) => emails.includes(d.event.data.user?.email)).map((d) => d.id)
		expect(ids).toHaveLength(40)
		expect(new Set(ids).size).toBe(40)
	})
})

describe('the outbox', () => {
	test('a change that rolls back emits nothing; the same change committed is delivered', async () => {
		const hooks = await receiver()
		const { t, admin } = await app()
		await subscribe(t, admin, hooks.url, ['session.created'])
		const user = await signUp(t)
		await hooks.waitFor((d) => d.event.data.session?.userId === user.id)
		const { db } = database.handle
		// The login's transaction fails after its session (and the session's event) were written: it must all go.
		await db.execute(sql.raw(`create function refuse_tokens() returns trigger language plpgsql as $$ begin raise exception 'refused by the test'; end $$`))
		await db.execute(sql.raw(`create trigger refuse_tokens before insert on refresh_tokens for each row execute function refuse_tokens()`))
		try {
			const refused = await t.call('POST', '/api/auth/login', { json: { email: user.email, password: 'correct horse battery staple' } })
			expect(refused.status).toBe(500)
		} finally {
			await db.execute(sql.raw('drop trigger refuse_tokens on refresh_tokens'))
			await db.execute(sql.raw('drop function refuse_tokens'))
		}
		const next = await login(t, user.email)
		await hooks.waitFor((d) => d.event.data.session?.id === next.sessionId)
		await t.app.decorator.webhookJobs.idle()
		// The sign-up's login and the last one; nothing of the rolled-back one, in the receiver or in the outbox.
		expect(hooks.received.filter((d) => d.event.data.session?.userId === user.id).map((d) => d.event.data.session.id)).toEqual([user.sessionId, next.sessionId])
		const stored = await db.select({ id: webhookEvents.id }).from(webhookEvents).where(sql`${webhookEvents.body}::jsonb #>> '{data,session,userId}' = ${user.id}`)
		expect(stored).toHaveLength(2)
	})

	test('events written in a transaction that is rolled back are never stored or sent', async () => {
		const hooks = await receiver()
		const { t, admin } = await app()
		const endpoint = await subscribe(t, admin, hooks.url, ['login.locked'])
		const { db } = database.handle
		const marker = uniqueEmail('rolled-back')
		await db
			.transaction(async (tx) => {
				await recordWebhookEvents(tx, [{ type: 'login.locked', data: { email: marker, userId: null } }])
				throw new Error('roll back')
			})
			.catch(() => {})
		await recordWebhookEvents(db, [{ type: 'login.locked', data: { email: `${marker}.kept`, userId: null } }])
		await hooks.waitFor((d) => d.event.data.email === `${marker}.kept`)
		await t.app.decorator.webhookJobs.idle()
		expect(hooks.received.filter((d) => d.event.data.email === marker)).toHaveLength(0)
		expect(await db.select().from(webhookDeliveries).where(eq(webhookDeliveries.endpointId, endpoint.id))).toHaveLength(1)
	})
})

describe('the delivery log', () => {
	test('events past 30 days go with their deliveries and attempts; those still owed, and newer ones, stay', async () => {
		const hooks = await receiver()
		const { t, admin } = await app()
		const endpoint = await subscribe(t, admin, hooks.url)
		const [old, owed, recent] = [await signUp(t), await signUp(t), await signUp(t)]
		for (const user of [old, owed, recent]) await hooks.waitFor(createdFor(user))
		await t.app.decorator.webhookJobs.idle()
		const { db } = database.handle
		const eventOf = (user: Account) => sql`(select id from webhook_events where body::jsonb #>> '{data,user,id}' = ${user.id})`
		await db.execute(sql`update webhook_events set created_at = now() - interval '31 days' where id in (${eventOf(old)}, ${eventOf(owed)})`)
		await db.execute(sql`update webhook_deliveries set status = 'pending' where event_id = ${eventOf(owed)}`)
		const [oldDelivery] = await db.select({ id: webhookDeliveries.id }).from(webhookDeliveries).where(sql`${webhookDeliveries.eventId} = ${eventOf(old)}`)
		expect(await db.select().from(webhookAttempts).where(eq(webhookAttempts.deliveryId, oldDelivery?.id as string))).toHaveLength(1)
		expect(await purgeWebhookLogStep(db)).toBe(1)
		expect(await purgeWebhookLogStep(db)).toBe(0)
		const left = (await deliveries(t, admin, endpoint.id)).map((d) => d.eventId)
		expect(left).toHaveLength(2)
		const [gone] = await db.select().from(webhookEvents).where(sql`${webhookEvents.body}::jsonb #>> '{data,user,id}' = ${old.id}`)
		expect(gone).toBeUndefined()
		expect(await db.select().from(webhookAttempts).where(eq(webhookAttempts.deliveryId, oldDelivery?.id as string))).toHaveLength(0)
	})
})

describe('secrets', () => {
	test('after a rotation each delivery verifies with the new secret and, for 24 hours, with the old one', async () => {
		const hooks = await receiver()
		const { t, admin } = await app()
		const endpoint = await subscribe(t, admin, hooks.url)
		const rotated = await t.call('POST', `/api/webhooks/${endpoint.id}/secrets`, { token: admin.accessToken })
		expect(rotated.status).toBe(201)
		const { secret } = rotated.body.data
		expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
		expect(secret).not.toBe(endpoint.secret)
		const user = await signUp(t)
		const [delivery] = await hooks.waitFor(createdFor(user))
		expect(delivery?.signature.split(' ')).toHaveLength(2)
		expect(verified(delivery as ReceivedDelivery, secret).data.user.id).toBe(user.id)
		expect(verified(delivery as ReceivedDelivery, endpoint.secret).data.user.id).toBe(user.id)
		expectNotVerified(delivery as ReceivedDelivery, `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64')}`)

		// Past the 24 hours, only the new secret signs.
		await database.handle.db.execute(sql`update webhook_endpoints set previous_secret_expires_at = now() - interval '1 second' where id = ${endpoint.id}`)
		const later = await signUp(t)
		const [next] = await hooks.waitFor(createdFor(later))
		expect(next?.signature.split(' ')).toHaveLength(1)
		expect(verified(next as ReceivedDelivery, secret).data.user.id).toBe(later.id)
		expectNotVerified(next as ReceivedDelivery, endpoint.secret)
	})
})

describe('refused destinations at every attempt', () => {
	test('a name that resolved to a public address at creation and to loopback later (DNS rebinding) is never connected to', async () => {
		const hooks = await receiver()
		let answer = '93.184.215.14'
		const { t, admin } = await app({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' }, { resolveHost: async () => [{ address: answer, family: 4 }] })
		const endpoint = await subscribe(t, admin, `http://hooks.example.test:${hooks.port}/hooks`)
		answer = '127.0.0.1'
		await signUp(t)
		const refused = await deliveryOnceItIs(t, admin, endpoint.id, undefined, (d) => d.attempts.length >= 1)
		expect(refused.attempts[0]).toMatchObject({ statusCode: null, succeeded: false, error: 'destination refused: the host resolves to a loopback, private or link-local address' })
		expect(hooks.received).toHaveLength(0)
	})

	/** Each address in turn is what the endpoint's name resolves to at the attempt (it resolved to a public one when saved). */
	async function refusedAtTheAttempt(env: Record<string, string>, addresses: string[], error: string) {
		const hooks = await receiver()
		let answer = { address: '93.184.215.14', family: 4 }
		const { t, admin } = await app(env, { resolveHost: async () => [answer] })
		for (const address of addresses) {
			answer = { address: '93.184.215.14', family: 4 }
			const endpoint = await subscribe(t, admin, `http://hooks.example.test:${hooks.port}/hooks`)
			answer = { address, family: address.includes(':') ? 6 : 4 }
			await signUp(t)
			const refused = await deliveryOnceItIs(t, admin, endpoint.id, undefined, (d) => d.attempts.length >= 1)
			const { statusCode, succeeded, error: said } = refused.attempts[0] ?? {}
			expect({ address, statusCode, succeeded, error: said }).toEqual({ address, statusCode: null, succeeded: false, error: `destination refused: ${error}` })
			await t.call('DELETE', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken })
		}
		expect(hooks.received).toHaveLength(0)
	}

	test('an address that leads to loopback in another IPv6 spelling is refused at the attempt', () =>
		refusedAtTheAttempt({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' }, ['64:ff9b::7f00:1', '::ffff:0:7f00:1', '2002:7f00:1::'], 'the host resolves to a loopback, private or link-local address'))

	test('an address that leads to cloud metadata in any spelling is refused at the attempt, private networks allowed or not', () =>
		refusedAtTheAttempt(
			{ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' },
			['169.254.170.2', '::ffff:0:a9fe:a9fe', '64:ff9b::a9fe:aa02', '2002:a9fe:a9fe::', '::169.254.169.254'],
			'the host resolves to a cloud metadata address',
		))

	test('a redirect is not followed: the attempt fails and the place it points to hears nothing', async () => {
		const elsewhere = await receiver()
		const hooks = await receiver()
		const { t, admin } = await app({ WEBHOOK_RETRY_SCHEDULE: QUICK_RETRIES })
		const endpoint = await subscribe(t, admin, hooks.url)
		hooks.replies = [{ redirectTo: elsewhere.url }]
		const user = await signUp(t)
		const [first] = await hooks.waitFor(createdFor(user), 2)
		const logged = await deliveryOnceItIs(t, admin, endpoint.id, first?.id, (d) => d.status === 'succeeded')
		expect(logged.attempts[0]).toMatchObject({ statusCode: 302, succeeded: false, error: 'HTTP 302: redirects are not followed' })
		expect(elsewhere.received).toHaveLength(0)
	})
})

describe('endpoint health', () => {
	test('an endpoint failing for WEBHOOK_DISABLE_AFTER_SECONDS is disabled, with an audit event and a metric; turned on again it receives', async () => {
		const hooks = await receiver()
		// Retries every quarter second: the endpoint reaches its 1 s of failing (the least the setting takes) with at most a quarter second over.
		const { t, admin } = await app({ WEBHOOK_DISABLE_AFTER_SECONDS: '1', WEBHOOK_RETRY_SCHEDULE: Array(12).fill('0.25').join(','), METRICS_ENABLED: 'true' })
		const endpoint = await subscribe(t, admin, hooks.url)
		hooks.otherwise = 500
		await signUp(t)
		const deadline = Date.now() + 20_000
		let shown = (await t.call('GET', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken })).body.data
		while (shown.enabled && Date.now() < deadline) {
			await Bun.sleep(100)
			shown = (await t.call('GET', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken })).body.data
		}
		expect(shown).toMatchObject({ enabled: false, disabledReason: 'failing', failingSince: expect.any(String) })
		const audit = await t.call('GET', '/api/audit-events?type=webhook.disabled', { token: admin.accessToken })
		expect(audit.body.data.items[0]).toMatchObject({ type: 'webhook.disabled', actorId: null, details: { endpointId: endpoint.id, reason: 'failing' } })
		const metrics = await t.call('GET', '/metrics')
		expect(metrics.text).toMatch(/^latchkey_webhook_endpoints_disabled_total 1$/m)
		// Deliveries owed to it end as failed without another attempt; new events are not even queued.
		await t.app.decorator.webhookJobs.idle()
		const before = hooks.received.length
		await signUp(t)
		// Three retry intervals: long enough for an attempt that should not happen to be made.
		await Bun.sleep(750)
		expect(hooks.received).toHaveLength(before)

		hooks.otherwise = 204
		const enabled = await t.call('PUT', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken, json: { url: hooks.url, events: ['user.created'], enabled: true } })
		expect(enabled.body.data).toMatchObject({ enabled: true, disabledReason: null, failingSince: null })
		const user = await signUp(t)
		await hooks.waitFor(createdFor(user))
	})
})

describe('endpoints deleted meanwhile', () => {
	test('sign-ups while subscribed endpoints are created and deleted all commit; deliveries go only to endpoints that exist', async () => {
		const hooks = await receiver()
		const { t, admin } = await app()
		const kept = await subscribe(t, admin, hooks.url)
		const since = new Date()
		let signingUp = true
		const churned: string[] = []
		// Endpoints subscribed to the same event come and go while the sign-ups write it.
		const churn = async () => {
			while (signingUp) {
				const endpoint = await subscribe(t, admin, `${hooks.url}/churn`)
				churned.push(endpoint.id)
				const deleted = await t.call('DELETE', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken })
				expect(deleted.status).toBe(200)
			}
		}
		const churning = [churn(), churn(), churn()]
		// Waves of parallel sign-ups, so that they overlap many creations and deletions.
		const emails: string[] = []
		const created: Awaited<ReturnType<typeof t.call>>[] = []
		for (let wave = 0; wave < 8; wave++) {
			const batch = Array.from({ length: 16 }, () => uniqueEmail('churn'))
			emails.push(...batch)
			created.push(...(await Promise.all(batch.map((email) => t.call('POST', '/api/users', { json: { email, password: 'correct horse battery staple' } })))))
		}
		signingUp = false
		await Promise.all(churning)
		expect(churned.length).toBeGreaterThan(10)
		expect(created.filter((res) => res.status !== 201).map((res) => res.body)).toEqual([])

		await hooks.waitFor((d) => d.event.type === 'user.created' && emails.includes(d.event.data.user.email), emails.length)
		await t.app.decorator.webhookJobs.idle()
		const { db } = database.handle
		// Every sign-up committed with its event, delivered to the endpoint that stayed, once.
		const toKept = await db
			.select({ email: sql<string>`${webhookEvents.body}::jsonb #>> '{data,user,email}'` })
			.from(webhookDeliveries)
			.innerJoin(webhookEvents, eq(webhookEvents.id, webhookDeliveries.eventId))
			.where(eq(webhookDeliveries.endpointId, kept.id))
		expect(toKept.map((row) => row.email).filter((email) => emails.includes(email)).sort()).toEqual([...emails].sort())
		// Nothing left of the deleted endpoints; every delivery job ended cleanly (a delivery gone with its endpoint is done).
		expect(await db.select({ id: webhookDeliveries.id }).from(webhookDeliveries).where(sql`${webhookDeliveries.endpointId} <> ${kept.id}`)).toEqual([])
		const unfinished = await db
			.select({ outcome: jobs.outcome, lastError: jobs.lastError })
			.from(jobs)
			.where(and(eq(jobs.queue, 'webhook'), gte(jobs.createdAt, since), sql`${jobs.outcome} is distinct from 'done'`))
		expect(unfinished).toEqual([])
		expect(t.logs.filter((line) => /"level":"(warn|error|fatal)"/.test(line))).toEqual([])
	})

	test('an attempt in flight when its endpoint is deleted ends its job cleanly, once, without a retry', async () => {
		const hooks = await receiver()
		const { t, admin } = await app()
		const endpoint = await subscribe(t, admin, hooks.url)
		hooks.replies = ['hang']
		await signUp(t)
		const deadline = Date.now() + 10_000
		while (hooks.mostHanging === 0 && Date.now() < deadline) await Bun.sleep(20)
		expect(hooks.mostHanging).toBe(1)
		const deleted = await t.call('DELETE', `/api/webhooks/${endpoint.id}`, { token: admin.accessToken })
		expect(deleted.status).toBe(200)
		// The receiver answers now: the attempt was made, but its delivery is gone.
		await hooks.stop()
		await t.app.decorator.webhookJobs.idle()
		const { db } = database.handle
		const rows = await db
			.select({ outcome: jobs.outcome, attempts: jobs.attempts, lastError: jobs.lastError })
			.from(jobs)
			.where(eq(jobs.queue, 'webhook'))
			.orderBy(desc(jobs.createdAt))
			.limit(1)
		expect(rows).toEqual([{ outcome: 'done', attempts: 1, lastError: null }])
		expect(t.logs.filter((line) => /"level":"(warn|error|fatal)"/.test(line))).toEqual([])
	})
})
