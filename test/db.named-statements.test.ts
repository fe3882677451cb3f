/**
 * The embedded database's named statements (src/db/pglite-statements.ts): each SQL text Drizzle sends is parsed once
 * and then only bound and run. Always on PGlite, with or without TEST_DATABASE_URL: PostgreSQL over the network goes
 * through postgres.js, which prepares statements itself.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { eq, sql } from 'drizzle-orm'
import { rowsOf } from '../src/db/client'
import { users } from '../src/db/schema'
import { startTestApp, type TestApp } from './support/app'
import { createEmbeddedTestDatabase, type TestDatabase } from './support/database'
import { PASSWORD, signUp, uniqueEmail } from './support/fixtures'

let database: TestDatabase
let t: TestApp
beforeAll(async () => {
	database = await createEmbeddedTestDatabase()
	t = await startTestApp({}, database)
})
afterAll(async () => {
	await t.close()
	await database.drop()
})

/** The statements this handle named (a query without parameters goes unnamed, as this one). */
const named = async () => {
	const rows = rowsOf<{ name: string }>(await database.handle.db.execute(sql`select name from pg_prepared_statements where name like 'latchkey\_statement\_%' order by name`))
	return rows.map((row) => row.name)
}

describe('named statements on the embedded database', () => {
	test('a request made again runs the statements its first time parsed: none is added, and the answers are the same', async () => {
		const account = await signUp(t)
		const read = () => t.call('GET', '/api/users/me', { token: account.accessToken })
		expect((await read()).body.data.email).toBe(account.email)
		const after = await named()
		expect(after.length).toBeGreaterThan(0)
		for (let i = 0; i < 20; i++) expect((await read()).body.data).toMatchObject({ id: account.id, email: account.email })
		expect(await named()).toEqual(after)
	})

	test('at most 200 are kept: the least recently used are closed, and a closed one is parsed again when it comes back', async () => {
		const { db } = database.handle
		const distinct = async (i: number) => rowsOf(await db.execute(sql`select ${i}::int + 1 as ${sql.identifier(`n${i}`)}`))
		for (let i = 0; i < 260; i++) expect(await distinct(i)).toEqual([{ [`n${i}`]: i + 1 }])
		expect((await named()).length).toBe(200)
		expect(await distinct(0)).toEqual([{ n0: 1 }])
		expect((await named()).length).toBe(200)
	})

	test('a statement that fails at its parameters or as it runs leaves the database as it was, in a transaction and out', async () => {
		const { db } = database.handle
		const badUuid = await db.execute(sql`select ${'not-a-uuid'}::uuid`).catch((error: { cause?: { code?: string } }) => error.cause?.code)
		expect(badUuid).toBe('22P02')
		const email = uniqueEmail('rolled-back')
		const failed = await db
			.transaction(async (tx) => {
				await tx.insert(users).values({ id: Bun.randomUUIDv7(), email })
				await tx.execute(sql`select 1 / ${0}`)
			})
			.catch((error: { cause?: { code?: string } }) => error.cause?.code)
		expect(failed).toBe('22012')
		expect(await db.select({ id: users.id }).from(users).where(eq(users.email, email))).toEqual([])
		// The same statements again, now with good values: they run.
		expect(rowsOf(await db.execute(sql`select ${'01935f2c-5a35-7000-8000-000000000000'}::uuid as id`))).toEqual([{ id: '01935f2c-5a35-7000-8000-000000000000' }])
		expect((await t.call('POST', '/api/users', { json: { email, password: PASSWORD } })).status).toBe(201)
	})

	test('a statement the database dropped, or whose result a change of the schema altered, is parsed again: outside a transaction at once, in one from the next query', async () => {
		const { db } = database.handle
		const account = await signUp(t)
		const read = () => db.select({ email: users.email }).from(users).where(eq(users.id, account.id))
		expect(await read()).toEqual([{ email: account.email }])
		// As an operator's SQL could (no parameters: this one goes as PGlite sends it).
		await db.execute(sql`deallocate all`)
		expect(await read()).toEqual([{ email: account.email }])

		await db.execute(sql`deallocate all`)
		const inTransaction = () => db.transaction((tx) => tx.select({ email: users.email }).from(users).where(eq(users.id, account.id)))
		expect(await inTransaction().catch((error: { cause?: { code?: string } }) => error.cause?.code)).toBe('26000')
		expect(await inTransaction()).toEqual([{ email: account.email }])

		await db.execute(sql`create temporary table scratch (id int primary key, v int)`)
		try {
			await db.execute(sql`insert into scratch values (1, 7)`)
			const scratch = async () => rowsOf(await db.execute(sql`select v from scratch where id = ${1}`))
			expect(await scratch()).toEqual([{ v: 7 }])
			await db.execute(sql`alter table scratch alter column v type bigint`)
			// bigint comes back as text from PGlite's parsers: the point is that it comes back at all.
			expect(await scratch()).toEqual([{ v: expect.anything() }])
		} finally {
			await db.execute(sql`drop table scratch`)
		}
	})

	test('a query outside a transaction waits for the transaction in progress instead of running inside it', async () => {
		const { db } = database.handle
		const email = uniqueEmail('uncommitted')
		let inserted!: () => void
		const insertedNow = new Promise<void>((resolve) => (inserted = resolve))
		const transaction = db
			.transaction(async (tx) => {
				await tx.insert(users).values({ id: Bun.randomUUIDv7(), email })
				inserted()
				await Bun.sleep(100)
				throw new Error('roll back')
			})
			.then(
				() => 'committed',
				(error: Error) => (error.message === 'roll back' ? 'rolled back' : `failed: ${error.message}`),
			)
		await Promise.race([insertedNow, transaction])
		// The embedded database is one session: run inside the open transaction, this would see its uncommitted row.
		expect(await db.select({ id: users.id }).from(users).where(eq(users.email, email))).toEqual([])
		expect(await transaction).toBe('rolled back')
	})
})
