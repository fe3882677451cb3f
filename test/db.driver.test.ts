/**
 * The PostgreSQL driver when a connection dies, which postgres.js 3.4.9 gets
 * wrong and src/db/patches/postgres@3.4.9.patch repairs: a connection lost inside a
 * transaction left its pool slot unable to connect again (every later query on
 * it ended in CONNECT_TIMEOUT, or hung), and the transaction's ROLLBACK was
 * written to the closed socket from a timer, an uncaught TypeError that ended
 * the process. test/faults.e2e.ts shows both against the binary with
 * PostgreSQL stopped under load; this reproduces them in isolation. And a connection lost
 * while the driver reads the server's array types (the first query of every new connection)
 * rejected a promise no one held: under Bun and Node an unhandled rejection, which fails the
 * test that meets it here and would end the service (porsager/postgres#1192, #1205). And a query flushed
 * from a setImmediate callback the runtime never ran stayed unsent, its connection hung for good.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import postgres from 'postgres'
import { TEST_DATABASE_URL } from './support/database'
import { TcpProxy } from './support/tcp-proxy'

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

if (url) {
	describe('the PostgreSQL driver when a new connection dies while it reads the array types', () => {
		test('the waiting query settles, nothing else is thrown, and the driver connects again once it can', async () => {
			const target = new URL(url)
			// The first connection is cut as the driver sends its pg_type query, and nothing listens for a moment after:
			// the driver's next attempt is refused.
			const proxy = new TcpProxy({ hostname: target.hostname, port: Number(target.port || 5432) }).start().cutAt('pg_catalog.pg_type', 300)
			const viaProxy = new URL(url)
			viaProxy.hostname = '127.0.0.1'
			viaProxy.port = String(proxy.port)
			const sql = postgres(viaProxy.toString(), { max: 1, connect_timeout: 2, backoff: () => 0.05, onnotice: () => {} })
			try {
				// The query waiting on the lost connection settles (refused, most likely); the driver's own read of the
				// types, unpatched, rejects with no one holding it, and bun fails this test with that rejection.
				expect(await settle(sql`select 1 as one`)).not.toBe('hang')
				expect(proxy.sprung).toBe(1)
				await Bun.sleep(400)
				const outcomes = []
				for (let i = 0; i < 3; i++) outcomes.push(await settle(sql`select 1 as one`))
				expect(outcomes.at(-1)).toBe('ok')
			} finally {
				await sql.end({ timeout: 1 })
				proxy.cut()
			}
		})
	})
}

if (url) {
	describe('the PostgreSQL driver when the runtime does not run an immediate', () => {
		// Under load Bun 1.4.5 now and then never ran a setImmediate callback. The driver flushed a query's bytes from one:
		// the query never left, and its connection, with a flush pending for good, hung every later query on it (seen in
		// the console's browser tests on PostgreSQL). The patch keeps the immediate and adds a timer behind it.
		test('queries, many at once and in a transaction, reach the server with setImmediate doing nothing', async () => {
			const sql = postgres(url, { max: 2, connect_timeout: 2, onnotice: () => {} })
			const realSetImmediate = globalThis.setImmediate
			try {
				await sql`select 1`
				globalThis.setImmediate = (() => ({})) as unknown as typeof setImmediate
				expect(await settle(Promise.all(Array.from({ length: 20 }, (_, i) => sql`select ${i}::int as n`)))).toBe('ok')
				expect(await settle(sql.begin(async (tx) => [await tx`select 1 as one`, await tx`select 2 as two`]))).toBe('ok')
			} finally {
				globalThis.setImmediate = realSetImmediate
				await sql.end({ timeout: 1 })
			}
		})
	})
}
