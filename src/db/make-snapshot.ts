/**
 * Writes the embedded database's snapshot (see snapshot.ts):
 *   bun src/db/make-snapshot.ts build     dist/pglite-snapshot.tar.gz, for `bun run build` to embed
 *   bun src/db/make-snapshot.ts install   node_modules/.cache, for `bun run start` (run by `bun install`)
 * The install step never fails the install: without a snapshot a first start is only slower.
 */
import { mkdir } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { PGlite } from '@electric-sql/pglite'
import { drizzle } from 'drizzle-orm/pglite'
import { createPglite, type Database } from './client'
import { migrate } from './migrate'
import * as schema from './schema'
import { buildSnapshotPath, sourceSnapshotPath } from './snapshot'

/** A fresh in-memory database with every migration applied, as a gzipped tarball of its data directory. */
export async function migratedSnapshot(): Promise<Blob> {
	const client = await createPglite('memory://')
	try {
		return await migrateAndDump(client)
	} finally {
		await client.close()
	}
}

/**
 * Applies every migration to `client`, a fresh database, and returns its data directory as migratedSnapshot does;
 * the database stays open (test/db.snapshot.test.ts compares the snapshot with it).
 */
export async function migrateAndDump(client: PGlite): Promise<Blob> {
	await migrate(drizzle({ client, schema }) as unknown as Database)
	// A checkpoint, so the tarball holds the pages themselves rather than a WAL to replay at every first start.
	await client.query('checkpoint')
	// Gzipped by Bun: Bun.Archive unpacks it natively, and does not read PGlite's own gzip.
	return new Blob([Bun.gzipSync(await (await client.dumpDataDir('none')).bytes())])
}

export async function writeSnapshot(path: string): Promise<void> {
	await mkdir(dirname(path), { recursive: true })
	await Bun.write(path, await migratedSnapshot())
}

if (import.meta.main) {
	const target = process.argv[2]
	if (target === 'build') await writeSnapshot(buildSnapshotPath())
	else if (target === 'install') {
		const path = sourceSnapshotPath()
		try {
			if (!(await Bun.file(path).exists())) await writeSnapshot(path)
		} catch (error) {
			console.warn(`latchkey: no database snapshot (${(error as Error).message}); the first start will initialise the database itself`)
		}
	} else {
		console.error('usage: bun src/db/make-snapshot.ts build|install')
		process.exit(2)
	}
}
