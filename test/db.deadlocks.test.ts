import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { eq, sql } from 'drizzle-orm'
import { retryingDeadlocks } from '../src/db/client'
import { users } from '../src/db/schema'
import { startTestApp, type TestApp } from './support/app'
import { signUp } from './support/fixtures'
import { TEST_DATABASE_URL } from './support/database'

/*
 * A transaction PostgreSQL picks as a deadlock's victim is rolled back whole; `retryingDeadlocks` runs it again.
 * Only PostgreSQL runs transactions at once (PGlite has one connection), so only it can deadlock: CI runs this there.
 */

let t: TestApp
beforeAll(async () => {
	t = await startTestApp()
})
afterAll(() => t.close())

describe('deadlocks', () => {
	test.if(TEST_DATABASE_URL !== undefined)('on PostgreSQL: two transactions locking two rows in opposite orders both end, the victim run again', async () => {
		const [a, b] = [await signUp(t), await signUp(t)]
		const { db } = t.database.handle
		let runs = 0
		let bothHoldOne!: () => void
		const barrier = new Promise<void>((resolve) => (bothHoldOne = resolve))
		let holding = 0
		const lockBoth = (first: string, second: string) =>
			retryingDeadlocks(() =>
				db.transaction(async (tx) => {
					runs++
					await tx.update(users).set({ name: sql`${users.name}` }).where(eq(users.id, first))
					if (++holding === 2) bothHoldOne()
					await barrier
					await tx.update(users).set({ name: sql`${users.name}` }).where(eq(users.id, second))
				}),
			)
		await Promise.all([lockBoth(a.id, b.id), lockBoth(b.id, a.id)])
		// Both finished; one of them was run a second time after PostgreSQL broke the deadlock.
		expect(runs).toBe(3)
	})

	test('any other error is not retried', async () => {
		let runs = 0
		const failing = retryingDeadlocks(async () => {
			runs++
			throw Object.assign(new Error('unique violation'), { code: '23505' })
		})
		await expect(failing).rejects.toThrow('unique violation')
		expect(runs).toBe(1)
	})
})
