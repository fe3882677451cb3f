/**
 * Password hashing runs on a pool of worker threads (src/modules/auth/password.ts):
 * one per core, at a lowered scheduling priority, so that a login flood queues
 * there and yields the cores to request handling.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { readdirSync, readFileSync } from 'node:fs'
import { startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { PASSWORD, signUp } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

let database: TestDatabase
let t: TestApp
beforeAll(async () => {
	database = await createTestDatabase()
	t = await startTestApp({}, database)
})
afterAll(() => database.drop())

const CORES = navigator.hardwareConcurrency

describe('the hashing pool', () => {
	test('more concurrent logins than hashing threads all succeed: the surplus queues', async () => {
		const account = await signUp(t)
		const logins = await Promise.all(
			Array.from({ length: CORES * 3 }, (_, i) =>
				t.call('POST', '/api/auth/login', { json: { email: account.email, password: i % 2 ? PASSWORD : 'a wrong passphrase' } }),
			),
		)
		expect(logins.map((res) => res.status)).toEqual(Array.from({ length: CORES * 3 }, (_, i) => (i % 2 ? 200 : 401)))
	})

	test('stores standard argon2id hashes with the configured cost, which Bun.password verifies', async () => {
		const account = await signUp(t)
		const [row] = await database.handle.db.query.users.findMany({ where: (users, { eq }) => eq(users.id, account.id) })
		expect(row?.passwordHash).toStartWith('$argon2id$v=19$m=1024,t=1,')
		expect(await Bun.password.verify(PASSWORD, row?.passwordHash ?? '')).toBe(true)
	})

	if (process.platform === 'linux') {
		test('hashing threads run at PASSWORD_HASH_NICENESS (10), the rest of the process at its own priority', async () => {
			await signUp(t) // the pool starts with the first hash
			const threads = readdirSync('/proc/self/task').map((id) => {
				const stat = readFileSync(`/proc/self/task/${id}/stat`, 'utf8')
				const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
				return { name: readFileSync(`/proc/self/task/${id}/comm`, 'utf8').trim(), nice: Number(fields[16]) }
			})
			const workers = threads.filter((thread) => thread.name === 'Worker')
			expect(workers.length).toBeGreaterThanOrEqual(1)
			expect(workers.length).toBeLessThanOrEqual(CORES)
			expect(workers.every((thread) => thread.nice === 10)).toBe(true)
			expect(threads.find((thread) => thread.name !== 'Worker')?.nice).toBe(0)
		})
	}
})
