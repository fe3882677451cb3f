import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import { eq, sql } from 'drizzle-orm'
import { jobs } from '../src/db/schema'
import { claimDueJobs, enqueue } from '../src/jobs/queue'
import { createTestDatabase, TEST_DATABASE_URL, type TestDatabase } from './support/database'

// Hooks that make or drop a database get 30 s, not the 5 s default: a loaded machine can take longer.
const DATABASE_HOOK_MS = 30_000

let database: TestDatabase
beforeAll(async () => {
	database = await createTestDatabase()
}, DATABASE_HOOK_MS)
beforeEach(async () => {
	await database.handle.db.delete(jobs)
})
// Unset when making it failed: nothing to drop then.
afterAll(() => database?.drop(), DATABASE_HOOK_MS)

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

	// Only PostgreSQL can show the race (CI runs the suite there too): PGlite runs one query at a time, so
	// concurrent claims never overlap there and the test could not fail.
	test.if(TEST_DATABASE_URL !== undefined)('on PostgreSQL: claims made at the same time never share a job, and together take every due one', async () => {
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
