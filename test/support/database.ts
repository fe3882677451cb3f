import postgres from 'postgres'
import { openDatabase, type DatabaseHandle } from '../../src/db/client'
import { migrate } from '../../src/db/migrate'

/** Set to run every suite against real PostgreSQL instead of the embedded PGlite. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL?.trim() || undefined

export interface TestDatabase {
	handle: DatabaseHandle
	/** URL of this file's own database on real PostgreSQL; undefined on PGlite. */
	url?: string
	drop(): Promise<void>
}

/**
 * A fresh, migrated database for one test file: an in-memory PGlite, or, with
 * TEST_DATABASE_URL, a new database on that server, dropped afterwards.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
	if (!TEST_DATABASE_URL) {
		const handle = await openDatabase({ kind: 'pglite', dataDir: 'memory://' })
		await migrate(handle.db)
		return { handle, drop: () => handle.close() }
	}
	const empty = await createEmptyTestDatabase(TEST_DATABASE_URL)
	const handle = await openDatabase({ kind: 'postgres', url: empty.url, poolMax: 10 })
	await migrate(handle.db)
	return {
		handle,
		url: empty.url,
		drop: async () => {
			await handle.close()
			await empty.drop()
		},
	}
}

/**
 * A new database on the server of `serverUrl`, not migrated, for tests that
 * start the service against it and watch it migrate; dropped (connections
 * and all) by `drop`.
 */
export async function createEmptyTestDatabase(serverUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
	const name = `latchkey_test_${Bun.randomUUIDv7().replaceAll('-', '').slice(-16)}`
	const admin = postgres(serverUrl, { max: 1, onnotice: () => {} })
	await admin.unsafe(`create database ${name}`)
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
