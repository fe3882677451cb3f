import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { openDatabase } from '../src/db/client'
import { MemoryCounterStore } from '../src/db/counters'
import { problem, startTestApp } from './support/app'
import { TEST_DATABASE_URL, createTestDatabase } from './support/database'
import { PASSWORD, uniqueEmail } from './support/fixtures'
import { TcpProxy } from './support/tcp-proxy'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

/** A port on which nothing listens: bind one, note it, close it. */
function closedPort(): number {
	const listener = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
	const { port } = listener
	listener.stop(true)
	return port
}

const unavailable = (instance: string) =>
	problem('service-unavailable', 503, instance, 'The database is unreachable; try again shortly')

describe('when the database is unreachable', () => {
	test('readiness is 503 and requests that need the database get 503 problem+json, promptly', async () => {
		const handle = await openDatabase({ kind: 'postgres', url: `postgres://postgres@127.0.0.1:${closedPort()}/none`, poolMax: 2 })
		const t = await startTestApp({}, { handle, drop: () => handle.close() })
		try {
			const ready = await t.call('GET', '/api/health/ready')
			expect(ready.status).toBe(503)
			expect(ready.body).toEqual(problem('service-unavailable', 503, '/api/health/ready', 'The database does not answer'))
			expect(ready.headers.get('retry-after')).toBe('5')

			const live = await t.call('GET', '/api/health')
			expect(live.status).toBe(200)

			const login = await t.call('POST', '/api/auth/login', { json: { email: 'a@example.test', password: PASSWORD } })
			expect(login.status).toBe(503)
			expect(login.body).toEqual(unavailable('/api/auth/login'))
			expect(login.headers.get('retry-after')).toBe('5')
			expect(login.text).not.toContain('ECONNREFUSED')
		} finally {
			await t.close()
			await handle.close()
		}
	})

	test('logins cut short by the outage reach no verdict: they neither count toward the lockout nor lock the account', async () => {
		const counters = new MemoryCounterStore()
		const email = uniqueEmail('outage')
		const handle = await openDatabase({ kind: 'postgres', url: `postgres://postgres@127.0.0.1:${closedPort()}/none`, poolMax: 2 })
		const down = await startTestApp({ LOCKOUT_THRESHOLD: '2' }, { handle, drop: () => handle.close() }, { counters })
		const up = await startTestApp({ LOCKOUT_THRESHOLD: '2' }, undefined, { counters })
		try {
			const during = []
			for (let i = 0; i < 5; i++) during.push((await down.call('POST', '/api/auth/login', { json: { email, password: PASSWORD } })).status)
			expect(during).toEqual([503, 503, 503, 503, 503])
			// The same counters, a database that answers: the account is not locked, and still counts from zero.
			expect((await up.call('POST', '/api/users', { json: { email, password: PASSWORD } })).status).toBe(201)
			expect((await up.call('POST', '/api/auth/login', { json: { email, password: 'not the password' } })).status).toBe(401)
			expect((await up.call('POST', '/api/auth/login', { json: { email, password: PASSWORD } })).status).toBe(200)
		} finally {
			await down.close()
			await handle.close()
			await up.close()
			await counters.close()
		}
	})

	if (TEST_DATABASE_URL) {
		const serverUrl = TEST_DATABASE_URL
		// PostgreSQL only: PGlite has no connections to refuse.
		test('a server that refuses the connection itself (the database closed to connections: FATAL 55000) is 503 too, and the service recovers', async () => {
			const database = await createTestDatabase()
			const name = new URL(database.url ?? '').pathname.slice(1)
			const admin = await openDatabase({ kind: 'postgres', url: serverUrl, poolMax: 1 })
			const t = await startTestApp({}, database)
			try {
				const email = uniqueEmail('closed')
				expect((await t.call('POST', '/api/users', { json: { email, password: PASSWORD } })).status).toBe(201)
				await admin.db.execute(`alter database "${name}" allow_connections false`)
				await admin.db.execute(`select pg_terminate_backend(pid) from pg_stat_activity where datname = '${name}' and pid <> pg_backend_pid()`)
				// Once the pool has seen its connections end, each new one is refused by the server itself.
				await Bun.sleep(200)
				for (let attempt = 0; attempt < 3; attempt++) {
					const login = await t.call('POST', '/api/auth/login', { json: { email, password: PASSWORD } })
					expect(login.status).toBe(503)
					expect(login.body).toEqual(unavailable('/api/auth/login'))
					expect(login.headers.get('retry-after')).toBe('5')
				}

				await admin.db.execute(`alter database "${name}" allow_connections true`)
				expect((await t.call('POST', '/api/auth/login', { json: { email, password: PASSWORD } })).status).toBe(200)
			} finally {
				await admin.db.execute(`alter database "${name}" allow_connections true`).catch(() => {})
				await admin.close()
				await t.close()
				await database.drop()
			}
		})

		test('the service recovers by itself when the database is back, and acknowledged writes are kept', async () => {
			const database = await createTestDatabase()
			const target = new URL(database.url ?? '')
			const proxy = new TcpProxy({ hostname: target.hostname, port: Number(target.port) }).start()
			const viaProxy = new URL(target)
			viaProxy.port = String(proxy.port)
			const handle = await openDatabase({ kind: 'postgres', url: viaProxy.toString(), poolMax: 4 })
			const t = await startTestApp({}, { handle, drop: () => handle.close() })
			try {
				const before = uniqueEmail('before')
				expect((await t.call('POST', '/api/users', { json: { email: before, password: PASSWORD } })).status).toBe(201)

				proxy.cut()
				const down = await t.call('POST', '/api/users', { json: { email: uniqueEmail('down'), password: PASSWORD } })
				expect(down.status).toBe(503)
				expect((await t.call('GET', '/api/health/ready')).status).toBe(503)

				proxy.start()
				expect((await t.call('GET', '/api/health/ready')).status).toBe(200)
				const after = await t.call('POST', '/api/auth/login', { json: { email: before, password: PASSWORD } })
				expect(after.status).toBe(200)
			} finally {
				proxy.cut()
				await t.close()
				await handle.close()
				await database.drop()
			}
		})
	}
})
