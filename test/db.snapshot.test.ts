/**
 * The snapshot a first start unpacks (src/db/snapshot.ts) must be the database the migrations make:
 * the same tables, columns, indexes, constraints, triggers, functions, extensions and recorded
 * migrations. Made here, so that the test needs no build and no `bun install` script.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'drizzle-orm'
import type { PGlite } from '@electric-sql/pglite'
import { createPglite, openDatabase, pgliteHandle, type Database } from '../src/db/client'
import { migrateAndDump } from '../src/db/make-snapshot'
import { migrate } from '../src/db/migrate'
import { unpackSnapshotIfEmpty } from '../src/db/snapshot'

setDefaultTimeout(60_000)

let snapshot: Blob
/**
 * The database the migrations make, from initdb on (no snapshot): the snapshot is made of it as migratedSnapshot
 * makes one (migrateAndDump), and the first test compares what the snapshot unpacks to with it.
 */
let migrated: PGlite
let folder: string
beforeAll(async () => {
	migrated = await createPglite('memory://')
	snapshot = await migrateAndDump(migrated)
	folder = mkdtempSync(join(tmpdir(), 'latchkey-snapshot-'))
})
afterAll(async () => {
	await migrated.close()
	rmSync(folder, { recursive: true, force: true })
})

const rowsOf = (result: unknown) => ((result as { rows?: unknown[] }).rows ?? (result as unknown[])) as Record<string, unknown>[]

/** Everything the migrations define, as plain rows in a stable order. */
async function schemaOf(db: Database) {
	const query = async (statement: ReturnType<typeof sql>) => rowsOf(await db.execute(statement))
	return {
		columns: await query(sql`select table_schema, table_name, column_name, data_type, is_nullable, column_default
			from information_schema.columns where table_schema in ('public', 'drizzle') order by 1, 2, 3`),
		indexes: await query(sql`select schemaname, tablename, indexname, indexdef from pg_indexes
			where schemaname in ('public', 'drizzle') order by 1, 2, 3`),
		constraints: await query(sql`select conrelid::regclass::text as "table", conname, pg_get_constraintdef(oid) as definition
			from pg_constraint where connamespace = 'public'::regnamespace order by 1, 2`),
		triggers: await query(sql`select tgrelid::regclass::text as "table", tgname, tgenabled, pg_get_triggerdef(oid) as definition
			from pg_trigger where not tgisinternal order by 1, 2`),
		functions: await query(sql`select proname, prosrc from pg_proc where pronamespace = 'public'::regnamespace order by 1`),
		extensions: await query(sql`select extname, extversion from pg_extension order by 1`),
		migrations: await query(sql`select hash, created_at from drizzle.__drizzle_migrations order by created_at`),
		rows: await query(sql`select (select count(*) from users) as users, (select count(*) from sessions) as sessions,
			(select count(*) from audit_events) as audit_events`),
	}
}

describe('the database snapshot', () => {
	test('unpacked into an empty DATA_DIR, it is the database the migrations make, with nothing left to apply', async () => {
		const dataDir = join(folder, 'first-start')
		mkdirSync(dataDir)
		expect(await unpackSnapshotIfEmpty(dataDir, snapshot)).toBe(true)
		expect(existsSync(join(dataDir, 'PG_VERSION'))).toBe(true)
		expect(readdirSync(dataDir).filter((name) => name.startsWith('.latchkey-unpacking-'))).toEqual([])

		const fromSnapshot = await openDatabase({ kind: 'pglite', dataDir })
		try {
			expect(await migrate(fromSnapshot.db)).toEqual([])
			const expected = await schemaOf(pgliteHandle(migrated, 'migrated from initdb').db)
			expect(expected.columns.length).toBeGreaterThan(20)
			expect(expected.extensions.map((row) => row.extname)).toContain('pg_trgm')
			expect(await schemaOf(fromSnapshot.db)).toEqual(expected)
			// It is a working database: the append-only trigger and the email rules hold in it.
			await fromSnapshot.db.execute(sql`insert into users (id, email, password_hash) values (${Bun.randomUUIDv7()}, 'snap@example.test', 'x')`)
			await expect(fromSnapshot.db.execute(sql`insert into users (id, email, password_hash) values (${Bun.randomUUIDv7()}, 'Snap@example.test', 'x')`).then(() => 'inserted')).rejects.toThrow()
		} finally {
			await fromSnapshot.close()
		}
	})

	test('a DATA_DIR that holds anything is never overwritten; an interrupted unpacking is cleared and done again', async () => {
		const used = join(folder, 'used')
		mkdirSync(used)
		writeFileSync(join(used, 'notes.txt'), 'mine')
		expect(await unpackSnapshotIfEmpty(used, snapshot)).toBe(false)
		expect(readdirSync(used)).toEqual(['notes.txt'])

		const interrupted = join(folder, 'interrupted')
		mkdirSync(join(interrupted, '.latchkey-unpacking-old', 'base'), { recursive: true })
		mkdirSync(join(interrupted, 'lost+found'))
		expect(await unpackSnapshotIfEmpty(interrupted, snapshot)).toBe(true)
		expect(readdirSync(interrupted)).toContain('PG_VERSION')
		expect(readdirSync(interrupted).filter((name) => name.startsWith('.latchkey-unpacking-'))).toEqual([])
	})

	test('a DATA_DIR that holds only the development keys (made before the database) is still unpacked into, keys kept', async () => {
		const dataDir = join(folder, 'keys-first')
		mkdirSync(join(dataDir, 'keys'), { recursive: true })
		writeFileSync(join(dataDir, 'keys', 'jwt-secret'), 'kept')
		expect(await unpackSnapshotIfEmpty(dataDir, snapshot)).toBe(true)
		expect(readdirSync(dataDir)).toContain('PG_VERSION')
		expect(readdirSync(join(dataDir, 'keys'))).toEqual(['jwt-secret'])
	})

	test('an unreadable snapshot costs only time: nothing is unpacked and the directory stays empty', async () => {
		const dataDir = join(folder, 'unreadable')
		mkdirSync(dataDir)
		expect(await unpackSnapshotIfEmpty(dataDir, new Blob(['not a tarball']))).toBe(false)
		expect(readdirSync(dataDir)).toEqual([])
	})
})

describe('the embedded database', () => {
	test('starts with the settings that keep it light: 4 MB of buffers and shared memory for 10 connections, not 100', async () => {
		const setting = async (name: string) => Object.values((await migrated.query(`show ${name}`)).rows[0] as Record<string, string>)[0]
		expect(await setting('shared_buffers')).toBe('4MB')
		expect(await setting('max_connections')).toBe('10')
		// 15MB at 8MB and 100 connections (measured); all of it is zeroed inside PGlite's memory at start and stays resident.
		expect(await setting('shared_memory_size')).toBe('8MB')
	})
})
