/**
 * The PostgreSQL driver when a connection dies, which postgres.js 3.4.9 gets
 * wrong and patches/postgres@3.4.9.patch repairs: a connection lost inside a
 * transaction left its pool slot unable to connect again (every later query on
 * it ended in CONNECT_TIMEOUT, or hung), and the transaction's ROLLBACK was
 * written to the closed socket from a timer, an uncaught TypeError that ended
 * the process. test/faults.e2e.ts shows both against the binary with
 * PostgreSQL stopped under load; this reproduces them in isolation.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import postgres from 'postgres'
import { TEST_DATABASE_URL } from './support/database'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

/** The query's outcome, or 'hang' when it has none within the bound. */
const settle = (query: Promise<unknown>, withinMs = 4000) =>
	Promise.race([
		query.then(
			() => 'ok',
			(error: { code?: string }) => `error ${error.code}`,
		),
		Bun.sleep(withinMs).then(() => 'hang'),
	])

const url = TEST_DATABASE_URL
if (url) {
	describe('the PostgreSQL driver when a connection dies inside a transaction', () => {
		// One connection, so that every query after the loss uses the slot that lost it.
		const sql = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} })
		const killer = postgres(url, { max: 1, onnotice: () => {} })
		afterAll(async () => {
			await sql.end({ timeout: 1 })
			await killer.end({ timeout: 1 })
		})

		test('the transaction fails with a connection error and the pool connects again for the next queries', async () => {
			const transaction = sql.begin(async (tx) => {
				const [row] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`
				// Only this test's own backend is terminated.
				await killer`select pg_terminate_backend(${row?.pid ?? 0})`
				await tx`select 1`
			})
			expect(await settle(transaction)).toBe('error CONNECTION_CLOSED')
			// The first query may still meet the old backend's farewell (57P01); after that, every one succeeds.
			const outcomes = []
			for (let i = 0; i < 4; i++) outcomes.push(await settle(sql`select 1 as one`))
			expect(outcomes.slice(1)).toEqual(['ok', 'ok', 'ok'])
			expect(['ok', 'error 57P01']).toContain(outcomes[0] ?? '')
		})
	})
}
