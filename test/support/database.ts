import type { PGlite } from '@electric-sql/pglite'
import postgres from 'postgres'
import { createPglite, openDatabase, pgliteHandle, type DatabaseHandle } from '../../src/db/client'
import { migrate } from '../../src/db/migrate'
import { findSnapshot, snapshotKey } from '../../src/db/snapshot'
import { stopRunningOn } from './running'

/** Set to run every suite against real PostgreSQL instead of the embedded PGlite. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL?.trim() || undefined

export interface TestDatabase {
	handle: DatabaseHandle
	/** URL of this file's own database on real PostgreSQL; undefined on PGlite. */
	url?: string
	/** Stops the apps still running on it (see running.ts), then drops it; once, however often called. */
	drop(): Promise<void>
}

/**
 * A fresh, migrated database for one test file: an in-memory PGlite started from the
 * migrated snapshot, or, with TEST_DATABASE_URL, a copy of a migrated template database
 * on that server, dropped afterwards. Either way migrate() still runs (and applies nothing),
 * so a test database always has every migration, snapshot or not.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
	if (!TEST_DATABASE_URL) return createEmbeddedTestDatabase()
	const copy = await createEmptyTestDatabase(TEST_DATABASE_URL, await migratedTemplate(TEST_DATABASE_URL))
	const handle = await openDatabase({ kind: 'postgres', url: copy.url, poolMax: 10 })
	await migrate(handle.db)
	return {
		handle,
		url: copy.url,
		drop: dropping(handle, async () => {
			await handle.close()
			await copy.drop()
		}),
	}
}

/** A migrated in-memory PGlite, with or without TEST_DATABASE_URL: for tests of what only the embedded database does. */
export async function createEmbeddedTestDatabase(): Promise<TestDatabase> {
	return lend(spares.pop() ?? (await freshPglite()))
}

function dropping(handle: DatabaseHandle, drop: () => Promise<void>): () => Promise<void> {
	let dropped: Promise<void> | undefined
	return () =>
		(dropped ??= (async () => {
			await stopRunningOn(handle)
			await drop()
		})())
}

/**
 * PGlite databases given back by the files that were done with them, emptied, for the next files to
 * borrow: loading the snapshot costs about 0.2 s a database, emptying one a few milliseconds. A database
 * comes back only if its schema is still the migrated one (a test that drops a table or adds a trigger
 * gives back nothing), and every way to it the former borrower kept is cut.
 */
const spares: PGlite[] = []
const SPARES_KEPT = 4
/** What a migrated database's schema looks like, and its tables: taken from the first one opened. */
let pristine: Promise<{ fingerprint: string; tables: string[]; seeds: Array<{ table: string; rows: string }> }> | undefined

async function freshPglite(): Promise<PGlite> {
	const client = await createPglite('memory://', await snapshotTarball())
	await migrate(pgliteHandle(client, 'test database').db)
	// The statements that handle named go with it: each borrower's handle names its own.
	await client.exec('deallocate all')
	pristine ??= (async () => {
		const tables = (await client.query<{ name: string }>(`select format('%I.%I', schemaname, relname) as name from pg_stat_user_tables where schemaname = 'public'`)).rows.map((row) => row.name)
		// Rows the migrations write (the built-in organization roles): put back after a given-back database is emptied.
		const seeds: Array<{ table: string; rows: string }> = []
		for (const table of tables) {
			const [row] = (await client.query<{ rows: string | null }>(`select json_agg(t)::text as rows from ${table} as t`)).rows
			if (row?.rows) seeds.push({ table, rows: row.rows })
		}
		return { fingerprint: await schemaFingerprint(client), tables, seeds }
	})()
	await pristine
	return client
}

/**
 * One borrower's database: its handle reaches the PGlite through a proxy revoked when the database is
 * dropped (a query left running by the former borrower then fails, as on a closed database, instead of
 * landing in the next file's data). Closing the handle closes the PGlite for good (db.unavailable does).
 */
function lend(client: PGlite): TestDatabase {
	// Methods bound once, not at every call (every query goes through here).
	const bound = new Map<PropertyKey, { of: Function; bound: Function }>()
	const { proxy, revoke } = Proxy.revocable(client, {
		get: (target, key) => {
			const value = Reflect.get(target, key, target)
			if (typeof value !== 'function') return value
			const known = bound.get(key)
			if (known && known.of === value) return known.bound
			const method = { of: value, bound: value.bind(target) }
			bound.set(key, method)
			return method.bound
		},
	})
	const channels = new Set<string>()
	const lent = pgliteHandle(proxy, 'embedded PostgreSQL (PGlite) in memory')
	const handle: DatabaseHandle = {
		...lent,
		listen: (channel, onNotify) => {
			channels.add(channel)
			return lent.listen(channel, onNotify)
		},
	}
	return {
		handle,
		drop: dropping(handle, async () => {
			revoke()
			if (!client.closed && spares.length < SPARES_KEPT && (await emptied(client, channels))) spares.push(client)
			else if (!client.closed) await client.close().catch(() => {})
		}),
	}
}

/** Empties a given-back database for the next borrower; false when it cannot be (its schema changed, or it does not answer). */
async function emptied(client: PGlite, channels: Set<string>): Promise<boolean> {
	const work = (async () => {
		const { fingerprint, tables, seeds } = await pristine!
		for (const channel of channels) await client.unlisten(channel)
		if ((await schemaFingerprint(client)) !== fingerprint) return false
		// Replica mode skips the foreign keys' triggers, so the tables empty in any order.
		await client.exec(`reset all; deallocate all; select pg_advisory_unlock_all(); set session_replication_role = replica; ${tables.map((table) => `delete from ${table};`).join(' ')} reset session_replication_role;`)
		for (const { table, rows } of seeds) await client.query(`insert into ${table} select * from json_populate_recordset(null::${table}, $1::json)`, [rows])
		return true
	})().catch(() => false)
	// A transaction the former borrower left open would hold the database: then it is not given back.
	return Promise.race([work, Bun.sleep(2_000).then(() => false)])
}

/** The schema as the tests could change it: relations and their columns, constraints, triggers, functions, and the migrations applied. */
async function schemaFingerprint(client: PGlite): Promise<string> {
	const { rows } = await client.query<{ fingerprint: string }>(`
		select md5(string_agg(item, ',' order by item)) as fingerprint from (
			select format('%s %s.%s %s', c.relkind, n.nspname, c.relname, c.relnatts) as item from pg_class c join pg_namespace n on n.oid = c.relnamespace
			 where n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast')
			union all select format('column %s.%s %s', attrelid::regclass, attname, atttypid::regtype) from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
			 where n.nspname = 'public' and a.attnum > 0 and not a.attisdropped
			union all select format('constraint %s %s', conname, md5(pg_get_constraintdef(oid))) from pg_constraint where connamespace = 'public'::regnamespace
			union all select format('trigger %s %s %s', tgname, tgrelid::regclass, tgenabled) from pg_trigger
			union all select format('function %s %s', p.proname, md5(p.prosrc)) from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname not in ('pg_catalog', 'information_schema')
			union all select format('migration %s %s', id, hash) from drizzle.__drizzle_migrations
		) items`)
	return rows[0]!.fingerprint
}

let tarball: Promise<Blob | undefined> | undefined
/**
 * The migrated snapshot `bun install` made, unzipped once per process: PGlite loads it in a
 * fraction of a second where initdb and the migrations take seconds. Without one (no install
 * step ran) each database is made from scratch, only slower.
 */
function snapshotTarball(): Promise<Blob | undefined> {
	return (tarball ??= findSnapshot().then(async (snapshot) => (snapshot ? new Blob([withoutTemplates(Bun.gunzipSync(await snapshot.bytes()))]) : undefined)))
}

/**
 * template1 and template0 (fixed OIDs 1 and 4 since PostgreSQL 15; `postgres`, the one PGlite opens, is 5):
 * PostgreSQL reads a database's files only when connected to it, and PGlite never connects to them. Left out
 * of the test databases, they spare each start two thirds of the files PGlite unpacks (about 0.1 s of 0.4).
 */
const TEMPLATE_FILES = /^\/?base\/(1|4)(\/|$)/

/** The snapshot's tar (PGlite writes plain ustar: a 512-byte header per entry, the data padded to 512) without the template databases. */
function withoutTemplates(tar: Uint8Array): Uint8Array {
	const text = new TextDecoder()
	const field = (at: number, length: number) => text.decode(tar.subarray(at, at + length)).replace(/\0.*$/s, '')
	const kept: Uint8Array[] = []
	let at = 0
	while (at + 512 <= tar.length && tar[at] !== 0) {
		const end = at + 512 + Math.ceil(parseInt(field(at + 124, 12).trim() || '0', 8) / 512) * 512
		const name = [field(at + 345, 155), field(at, 100)].filter(Boolean).join('/')
		if (!TEMPLATE_FILES.test(name)) kept.push(tar.subarray(at, end))
		at = end
	}
	kept.push(new Uint8Array(1024)) // the end-of-archive marker
	return Buffer.concat(kept)
}

let template: Promise<string> | undefined
/**
 * The name of a migrated database on the server to copy each test database from (CREATE DATABASE …
 * TEMPLATE copies files, where migrating runs every statement). Named by the migrations it holds, made
 * once per server under an advisory lock, so that test processes starting together (`--parallel`, other
 * checkouts) make it once and never copy one half made: it gets its name only once migrated and closed.
 */
function migratedTemplate(serverUrl: string): Promise<string> {
	return (template ??= (async () => {
		const name = `latchkey_template_${snapshotKey()}`
		const admin = postgres(serverUrl, { max: 1, onnotice: () => {} })
		try {
			await admin`select pg_advisory_lock(hashtext('latchkey test template'))`
			const [found] = await admin`select 1 from pg_database where datname = ${name}`
			if (!found) {
				const building = `${name}_${Bun.randomUUIDv7().replaceAll('-', '').slice(-8)}`
				await admin.unsafe(`create database ${building}`)
				try {
					const url = new URL(serverUrl)
					url.pathname = `/${building}`
					const handle = await openDatabase({ kind: 'postgres', url: url.toString(), poolMax: 1 })
					try {
						await migrate(handle.db)
					} finally {
						await handle.close()
					}
					await admin.unsafe(`alter database ${building} rename to ${name}`)
				} catch (error) {
					await admin.unsafe(`drop database if exists ${building} with (force)`)
					throw error
				}
			}
			return name
		} finally {
			await admin.end()
		}
	})())
}

/**
 * A new database on the server of `serverUrl`, not migrated (or a copy of `template`), for tests that
 * start the service against it and watch it migrate; dropped (connections and all) by `drop`.
 */
export async function createEmptyTestDatabase(serverUrl: string, template?: string): Promise<{ url: string; drop(): Promise<void> }> {
	const name = `latchkey_test_${Bun.randomUUIDv7().replaceAll('-', '').slice(-16)}`
	const admin = postgres(serverUrl, { max: 1, onnotice: () => {} })
	await admin.unsafe(template ? `create database ${name} template ${template}` : `create database ${name}`)
	const url = new URL(serverUrl)
	url.pathname = `/${name}`
	return {
		url: url.toString(),
		drop: async () => {
			await admin.unsafe(`drop database if exists ${name} with (force)`)
			await admin.end()
		},
	}
}
