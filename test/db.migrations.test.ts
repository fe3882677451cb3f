import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
import journal from '../drizzle/meta/_journal.json'
import { openDatabase, rowsOf, sqlState } from '../src/db/client'
import { bundledMigrations, migrate } from '../src/db/migrate'
import { createTestDatabase, TEST_DATABASE_URL } from './support/database'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)


/** How a statement that must fail failed: its SQLSTATE, constraint and the driver's message (under Drizzle's). */
async function failureOf(statement: Promise<unknown>): Promise<{ code?: string; constraint?: string; message?: string }> {
	try {
		await statement
	} catch (error) {
		let deepest = error
		while (deepest instanceof Error && deepest.cause instanceof Error) deepest = deepest.cause
		return { ...sqlState(error), message: (deepest as Error).message }
	}
	throw new Error('the statement succeeded')
}

describe('migrations', () => {
	test('every migration drizzle-kit wrote is bundled into the binary', () => {
		const files = readdirSync(join(import.meta.dir, '..', 'drizzle')).filter((name) => name.endsWith('.sql'))
		expect(bundledMigrations().map((m) => `${m.tag}.sql`)).toEqual(files.sort())
		expect(bundledMigrations().map((m) => m.tag)).toEqual(journal.entries.map((entry) => entry.tag))
	})

	test('a migrated database records each migration once, and migrating again applies nothing', async () => {
		const database = await createTestDatabase()
		try {
			expect(await migrate(database.handle.db)).toEqual([])
			const recorded = rowsOf<Record<string, unknown>>(await database.handle.db.execute(sql`select hash from drizzle.__drizzle_migrations order by created_at`))
			expect(recorded.map((row) => row.hash)).toEqual(bundledMigrations().map((m) => m.hash))
		} finally {
			await database.drop()
		}
	})

	test('0008 renames the audit event types and login failure reasons stored under their old snake_case names, and the trail is append-only again after it', async () => {
		const database = await createTestDatabase()
		const { db } = database.handle
		try {
			// A trail written before 0008: store the old names, then run 0008 as migrate() runs it, in one
			// transaction. (Forgetting that 0008 ran would not do: the migrations after it make migrate() skip it.)
			const renames = bundledMigrations().find((migration) => migration.tag === '0008_audit_event_names')
			if (!renames) throw new Error('0008 is not bundled')
			const stored = [
				['user.signed_up', {}],
				['token.reuse_detected', { sessionId: 'x' }],
				['login.failed', { email: 'a@example.test', reason: 'wrong_password' }],
				['login.failed', { email: 'a@example.test', reason: 'unknown_email' }],
				['login.failed', { email: 'a@example.test', reason: 'locked' }],
			] as const
			for (const [type, details] of stored)
				await db.execute(sql`insert into audit_events (id, type, details) values (${Bun.randomUUIDv7()}, ${type}, ${JSON.stringify(details)}::jsonb)`)
			await db.transaction(async (tx) => {
				for (const statement of renames.statements) await tx.execute(sql.raw(statement))
			})
			const rows = rowsOf<Record<string, unknown>>(await db.execute(sql`select type, details from audit_events order by id`))
			expect(rows.map((row) => [row.type, row.details])).toEqual([
				['user.signed-up', {}],
				['token.reuse-detected', { sessionId: 'x' }],
				['login.failed', { email: 'a@example.test', reason: 'wrong-password' }],
				['login.failed', { email: 'a@example.test', reason: 'unknown-email' }],
				['login.failed', { email: 'a@example.test', reason: 'locked' }],
			])
			expect(await failureOf(db.execute(sql`update audit_events set type = 'x'`))).toMatchObject({ code: 'P0001', message: 'audit_events is append-only' })
		} finally {
			await database.drop()
		}
	})

	test('0017 drops "ext" (not an RFC 8176 value) from the amr of sessions stored before it, and keeps every other value', async () => {
		const database = await createTestDatabase()
		const { db } = database.handle
		try {
			const migration = bundledMigrations().find((m) => m.tag === '0017_mfa_token_amr')
			if (!migration) throw new Error('0017 is not bundled')
			const userId = Bun.randomUUIDv7()
			await db.execute(sql`insert into users (id, email, password_hash) values (${userId}, ${`amr-${userId}@example.test`}, 'x')`)
			const stored = [['ext'], ['pwd'], ['pwd', 'otp', 'mfa'], ['ext', 'otp', 'mfa']]
			for (const amr of stored)
				await db.execute(sql`insert into sessions (id, user_id, expires_at, amr) values (${Bun.randomUUIDv7()}, ${userId}, now() + interval '1 day', ${`{${amr.join(',')}}`}::text[])`)
			// Its update again, as migrate() ran it (the column it adds is there already): rows written before it.
			const update = migration.statements.find((statement) => statement.includes('UPDATE'))
			if (!update) throw new Error('0017 has no UPDATE')
			await db.execute(sql.raw(update))
			const rows = rowsOf<Record<string, unknown>>(await db.execute(sql`select amr from sessions where user_id = ${userId} order by id`))
			expect(rows.map((row) => row.amr)).toEqual([[], ['pwd'], ['pwd', 'otp', 'mfa'], ['otp', 'mfa']])
		} finally {
			await database.drop()
		}
	})

	test('the database enforces normalised, unique emails itself', async () => {
		const database = await createTestDatabase()
		try {
			const insert = async (email: string) => {
				await database.handle.db.execute(
					sql`insert into users (id, email, password_hash) values (${Bun.randomUUIDv7()}, ${email}, 'x')`,
				)
			}
			await insert('same@example.test')
			expect(await failureOf(insert('same@example.test'))).toMatchObject({ code: '23505', constraint: 'users_email_key' })
			expect(await failureOf(insert('Upper@Example.test'))).toMatchObject({ code: '23514', constraint: 'users_email_normalised' })
			expect(await failureOf(insert(' padded@example.test'))).toMatchObject({ code: '23514', constraint: 'users_email_normalised' })
		} finally {
			await database.drop()
		}
	})

	if (TEST_DATABASE_URL) {
		test('instances migrating the same empty database at once do not collide', async () => {
			const empty = await createTestDatabase()
			const url = empty.url ?? ''
			await empty.handle.db.execute(sql`drop schema public cascade`)
			await empty.handle.db.execute(sql`create schema public`)
			await empty.handle.db.execute(sql`drop schema drizzle cascade`)
			const handles = await Promise.all([1, 2, 3].map(() => openDatabase({ kind: 'postgres', url, poolMax: 2 })))
			try {
				const applied = await Promise.all(handles.map((handle) => migrate(handle.db)))
				expect(applied.filter((tags) => tags.length > 0)).toEqual([bundledMigrations().map((m) => m.tag)])
			} finally {
				await Promise.all(handles.map((handle) => handle.close()))
				await empty.drop()
			}
		})
	}
})
