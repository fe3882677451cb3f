import postgres from 'postgres'
import { openDatabase, type DatabaseHandle } from '../../src/db/client'
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
	if (!TEST_DATABASE_URL) {
		const handle = await openDatabase({ kind: 'pglite', dataDir: 'memory://' }, { loadDataDir: await snapshotTarball() })
		await migrate(handle.db)
		return { handle, drop: dropping(handle, () => handle.close()) }
	}
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

function dropping(handle: DatabaseHandle, drop: () => Promise<void>): () => Promise<void> {
	let dropped: Promise<void> | undefined
	return () =>
		(dropped ??= (async () => {
			await stopRunningOn(handle)
			await drop()
		})())
}

let tarball: Promise<Blob | undefined> | undefined
/**
 * The migrated snapshot `bun install` made, unzipped once per process: PGlite loads it in a
 * fraction of a second where initdb and the migrations take seconds. Without one (no install
 * step ran) each database is made from scratch, only slower.
 */
function snapshotTarball(): Promise<Blob | undefined> {
	return (tarball ??= findSnapshot().then(async (snapshot) => (snapshot ? new Blob([Bun.gunzipSync(await snapshot.bytes())]) : undefined)))
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
