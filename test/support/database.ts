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
	const name = `latchkey_test_${Bun.randomUUIDv7().replaceAll('-', '').slice(-16)}`
	const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} })
	await admin.unsafe(`create database ${name}`)
	const url = new URL(TEST_DATABASE_URL)
	url.pathname = `/${name}`
	const handle = await openDatabase({ kind: 'postgres', url: url.toString(), poolMax: 10 })
	await migrate(handle.db)
	return {
		handle,
		url: url.toString(),
		drop: async () => {
			await handle.close()
			await admin.unsafe(`drop database if exists ${name} with (force)`)
			await admin.end()
		},
	}
}
