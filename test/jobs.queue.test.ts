import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import { eq, sql } from 'drizzle-orm'
import { jobs } from '../src/db/schema'
import { claimDueJobs, enqueue } from '../src/jobs/queue'
import { createTestDatabase, type TestDatabase } from './support/database'

let database: TestDatabase
beforeAll(async () => {
	database = await createTestDatabase()
})
beforeEach(async () => {
	await database.handle.db.delete(jobs)
})
afterAll(() => database.drop())

describe('claiming due jobs', () => {
	test('a higher-priority job queued after a backlog is claimed before it; equal priorities go oldest first', async () => {
		const { db } = database.handle
		const backlog: string[] = []
		for (let i = 0; i < 20; i++) {
			const id = await enqueue(db, { queue: 'mail-request', payload: { i } })
			// Due a second apart, oldest first, so their order cannot hang on the clock's resolution.
			await db.update(jobs).set({ runAt: sql`now() - make_interval(secs => ${20 - i})` }).where(eq(jobs.id, id))
			backlog.push(id)
		}
		const urgent = await enqueue(db, { queue: 'mail', payload: { to: 'a@example.test' }, priority: 1 })

		const [first] = await claimDueJobs(db, 1, 60)
		expect(first?.id).toBe(urgent)
		const next = await claimDueJobs(db, 3, 60)
		expect(next.map((job) => job.id).sort()).toEqual(backlog.slice(0, 3))
	})

	test('claims made at the same time never share a job, and together take every due one', async () => {
		const { db } = database.handle
		const queued = new Set<string>()
		for (let i = 0; i < 40; i++) queued.add(await enqueue(db, { queue: 'mail', payload: { i }, priority: i % 2 }))

		const claims = await Promise.all(Array.from({ length: 10 }, () => claimDueJobs(db, 5, 60)))
		const claimed = claims.flat().map((job) => job.id)
		expect(new Set(claimed).size).toBe(claimed.length)
		// Whatever the interleaving, nothing is claimed twice and a second round picks up any left over.
		const rest = await claimDueJobs(db, 40, 60)
		expect(new Set([...claimed, ...rest.map((job) => job.id)])).toEqual(queued)
		expect(await claimDueJobs(db, 40, 60)).toEqual([])
	})
})
