import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq, sql } from 'drizzle-orm'
import { jobs, webhookEndpoints } from '../src/db/schema'
import { claimDueJobs, enqueue } from '../src/jobs/queue'
import { JobFailure, type JobHandler } from '../src/jobs/handler'
import { JobWorker } from '../src/jobs/worker'
import { createLogger } from '../src/log'
import { startTestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { signUp, signUpAdmin } from './support/fixtures'
import { WebhookReceiver } from './support/webhook-receiver'

setDefaultTimeout(30_000)

const QUEUE = 'lease-test'

let database: TestDatabase
let workers: JobWorker[] = []
let logs: string[] = []
beforeAll(async () => {
	database = await createTestDatabase()
})
beforeEach(async () => {
	// Each test's own jobs, and no endpoint of an earlier test to deliver to.
	await database.handle.db.delete(webhookEndpoints)
	await database.handle.db.delete(jobs)
	logs = []
})
afterEach(async () => {
	for (const worker of workers.splice(0)) await worker.stop()
})
afterAll(() => database.drop())

/** A worker of the lease-test queue, as another instance would run it: leases of `leaseSeconds`, polls five times a second. */
function worker(handler: JobHandler, leaseSeconds?: number) {
	const started = new JobWorker({
		db: database.handle.db,
		log: createLogger('info', { write: (line: string) => void logs.push(line) }),
		handlers: { [QUEUE]: handler },
		queues: [QUEUE],
		pollSeconds: 0.2,
		retrySeconds: 60,
		...(leaseSeconds === undefined ? {} : { leaseSeconds }),
	})
	started.start()
	workers.push(started)
	return started
}

/** A handler that records each run and ends only when told. */
function gated() {
	const runs: string[] = []
	let open: (outcome?: Error) => void = () => {}
	const handler: JobHandler = (payload) => {
		runs.push(String(payload.n))
		return new Promise<void>((resolve, reject) => (open = (outcome) => (outcome ? reject(outcome) : resolve())))
	}
	return { runs, handler, end: (outcome?: Error) => open(outcome) }
}

const row = async (id: string) => {
	const [found] = await database.handle.db
		.select({
			attempts: jobs.attempts,
			outcome: jobs.outcome,
			claimId: jobs.claimId,
			lockedUntil: jobs.lockedUntil,
			leaseLeft: sql<number>`extract(epoch from ${jobs.lockedUntil} - now())::float8`,
			lastError: jobs.lastError,
		})
		.from(jobs)
		.where(eq(jobs.id, id))
	if (!found) throw new Error('no such job')
	return found
}

async function until<T>(what: () => Promise<T>, ready: (value: T) => boolean, timeoutMs = 10_000): Promise<T> {
	const deadline = Date.now() + timeoutMs
	for (;;) {
		const value = await what()
		if (ready(value)) return value
		if (Date.now() > deadline) throw new Error(`not ready: ${JSON.stringify(value)}`)
		await Bun.sleep(25)
	}
}

const warnings = () => logs.map((line) => JSON.parse(line) as { level: string; msg: string }).filter((line) => line.level === 'warn').map((line) => line.msg)

describe('leases', () => {
	test('a worker claims a job for 30 s at most, so one whose instance died is tried again within 60 s', async () => {
		const { db } = database.handle
		const id = await enqueue(db, { queue: QUEUE, payload: { n: 1 } })
		const running = gated()
		worker(running.handler)
		await until(async () => running.runs, (runs) => runs.length === 1)
		try {
			const claimed = await row(id)
			expect(claimed.leaseLeft).toBeGreaterThan(25)
			expect(claimed.leaseLeft).toBeLessThanOrEqual(30)
		} finally {
			running.end()
		}
	})

	test('a job claimed by an instance that died is claimed by another once its lease ends, and run once more', async () => {
		const { db } = database.handle
		const id = await enqueue(db, { queue: QUEUE, payload: { n: 1 } })
		// Claimed as a worker does, by an instance that then died: nobody renews the lease (half a second, the wait here).
		const [dead] = await claimDueJobs(db, 1, 0.5, [QUEUE])
		expect(dead?.id).toBe(id)
		const runs: string[] = []
		worker(async (payload) => void runs.push(String(payload.n)), 1)
		const done = await until(() => row(id), (job) => job.outcome === 'done')
		expect(runs).toEqual(['1'])
		expect(done).toMatchObject({ attempts: 2, outcome: 'done', lockedUntil: null, lastError: null })
		expect(done.claimId).not.toBe(dead?.claimId as string)
	})

	test('a running job keeps its lease past the lease length: no other worker takes it, and it runs once', async () => {
		const { db } = database.handle
		const id = await enqueue(db, { queue: QUEUE, payload: { n: 1 } })
		const running = gated()
		worker(running.handler, 1)
		await until(async () => running.runs, (runs) => runs.length === 1)
		const first = await row(id)
		// A second instance polls all along.
		const other = gated()
		worker(other.handler, 1)
		// Three times the lease, renewed each third of it.
		const renewed = await until(() => row(id), (job) => (job.lockedUntil?.getTime() ?? 0) > (first.lockedUntil?.getTime() ?? 0) + 2000, 10_000)
		expect(renewed).toMatchObject({ attempts: 1, outcome: null, claimId: first.claimId })
		expect(renewed.leaseLeft).toBeGreaterThan(0)
		running.end()
		expect(await until(() => row(id), (job) => job.outcome !== null)).toMatchObject({ attempts: 1, outcome: 'done', lockedUntil: null })
		expect(running.runs).toEqual(['1'])
		expect(other.runs).toEqual([])
	})

	test('a worker whose lease another claim took meanwhile neither finishes, fails nor releases the job', async () => {
		const { db } = database.handle
		const finished = await enqueue(db, { queue: QUEUE, payload: { n: 1 } })
		const failed = await enqueue(db, { queue: QUEUE, payload: { n: 2 } })
		const stalled = gated()
		const first = gated()
		const handlers: Record<string, ReturnType<typeof gated>> = { '1': stalled, '2': first }
		worker((payload, job) => (handlers[String(payload.n)] as ReturnType<typeof gated>).handler(payload, job), 30)
		await until(async () => [...stalled.runs, ...first.runs], (runs) => runs.length === 2)
		// Both leases ended while their worker still ran them (as after a long stall), and another instance claimed
		// them, as claimDueJobs does (in one statement: this worker polls meanwhile).
		const taken = await db
			.update(jobs)
			.set({ lockedUntil: sql`now() + interval '60 seconds'`, claimId: sql`gen_random_uuid()`, attempts: sql`${jobs.attempts} + 1` })
			.returning({ id: jobs.id, claimId: jobs.claimId })
		expect(taken.map((job) => job.id).sort()).toEqual([finished, failed].sort())
		const holders = Object.fromEntries(taken.map((job) => [job.id, job.claimId]))

		stalled.end()
		first.end(new JobFailure('HTTP 500'))
		await until(async () => warnings(), (said) => said.length >= 1)
		await Bun.sleep(200)
		for (const id of [finished, failed]) {
			const now = await row(id)
			// Still the new claim's: not finished, not put back, its lease intact.
			expect({ outcome: now.outcome, claimId: now.claimId, lastError: now.lastError, attempts: now.attempts }).toEqual({ outcome: null, claimId: holders[id] as string, lastError: null, attempts: 2 })
			expect(now.leaseLeft).toBeGreaterThan(50)
		}
		expect(warnings()).toContain('job ran to its end after its lease was lost; another claim holds it now')
	})
})

describe('webhook deliveries', () => {
	test('the webhook worker holds a delivery for 30 s at most while its receiver hangs', async () => {
		const receiver = await WebhookReceiver.start()
		receiver.otherwise = 'hang'
		const t = await startTestApp({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_TIMEOUT_SECONDS: '15' }, database)
		try {
			const admin = await signUpAdmin(t)
			const created = await t.call('POST', '/api/webhooks', { token: admin.accessToken, json: { url: receiver.url, events: ['user.created'] } })
			expect(created.status).toBe(201)
			await signUp(t)
			await until(async () => receiver.mostHanging, (hanging) => hanging >= 1)
			const [delivery] = await database.handle.db.select({ id: jobs.id }).from(jobs).where(eq(jobs.queue, 'webhook'))
			const held = await row(delivery?.id as string)
			expect(held.leaseLeft).toBeGreaterThan(0)
			// A dead instance's delivery is claimed again within the lease and a poll: within 60 s.
			expect(held.leaseLeft + t.config.jobs.pollSeconds).toBeLessThanOrEqual(31)
		} finally {
			await receiver.stop()
			await t.close()
		}
	})
	test('a delivery whose lease another claim took mid-attempt is recorded but not finished by the old claim; the new one sends nothing more', async () => {
		const receiver = await WebhookReceiver.start()
		receiver.replies = ['hang']
		const t = await startTestApp({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, database)
		try {
			const admin = await signUpAdmin(t)
			const created = await t.call('POST', '/api/webhooks', { token: admin.accessToken, json: { url: receiver.url, events: ['user.created'] } })
			expect(created.status).toBe(201)
			await signUp(t)
			await until(async () => receiver.mostHanging, (hanging) => hanging >= 1)
			const { db } = database.handle
			// The worker stalled past its lease and another instance claimed the delivery (then stalled itself).
			const [taken] = await db
				.update(jobs)
				.set({ lockedUntil: sql`now() + interval '60 seconds'`, claimId: sql`gen_random_uuid()`, attempts: sql`${jobs.attempts} + 1` })
				.where(eq(jobs.queue, 'webhook'))
				.returning({ id: jobs.id, claimId: jobs.claimId })
			// The receiver answers the first attempt at last (204).
			receiver.answerHanging()
			const delivered = await until(
				() => t.call('GET', `/api/webhooks/${created.body.data.id}/deliveries`, { token: admin.accessToken }),
				(res) => res.body.data.items[0]?.status === 'succeeded',
			)
			expect(delivered.body.data.items[0].attempts).toHaveLength(1)
			await t.app.decorator.webhookJobs.idle()
			expect(await row(taken?.id as string)).toMatchObject({ outcome: null, claimId: taken?.claimId as string, attempts: 2 })
			// That claim's lease ends: the next claim finds the delivery made, and finishes the job without a send.
			await db.update(jobs).set({ lockedUntil: sql`now() - interval '1 second'` }).where(eq(jobs.id, taken?.id as string))
			t.app.decorator.webhookJobs.wake()
			expect(await until(() => row(taken?.id as string), (job) => job.outcome !== null)).toMatchObject({ outcome: 'done', attempts: 3, lastError: null })
			expect(receiver.received).toHaveLength(0)
		} finally {
			await receiver.stop()
			await t.close()
		}
	})
})
