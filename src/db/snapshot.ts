/**
 * The embedded database's head start: a PGlite data directory with every
 * migration applied, made ahead of time (`bun run build` embeds one in the
 * binary; `bun install` writes one for `bun run start`). A first start on an
 * empty DATA_DIR unpacks it instead of running initdb, pg_trgm and each
 * migration, which takes seconds. The migrator still runs after it, so a
 * snapshot is only ever a shortcut to the same schema.
 */
import { existsSync, readdirSync } from 'node:fs'
import { mkdtemp, rename, rm } from 'node:fs/promises'
import { join } from 'node:path'
import pglitePackage from '../../node_modules/@electric-sql/pglite/package.json'
import { bundledMigrations } from './migrate'
import { isCompiledBinary } from '../runtime'
import { KEYS_FOLDER } from '../config/secret-file'

const NAME = 'pglite-snapshot'
// Part of the key: a snapshot written in an earlier layout is never read as this one.
const FORMAT = 'tar.gz by Bun, 1'

/** Names a snapshot by what made it: the PGlite version and the migrations it holds. */
export function snapshotKey(): string {
	const hasher = new Bun.CryptoHasher('sha256').update(FORMAT).update(pglitePackage.version)
	for (const migration of bundledMigrations()) hasher.update(migration.hash)
	return hasher.digest('hex').slice(0, 16)
}

/** Where `bun install` leaves the snapshot for runs from source: git-ignored, and gone with node_modules. */
export const sourceSnapshotPath = () => join(import.meta.dir, '..', '..', 'node_modules', '.cache', 'latchkey', `${NAME}-${snapshotKey()}.tar.gz`)

/** The file `bun run build` embeds in the binary (an entry point of `bun build --compile`). */
export const buildSnapshotPath = () => join(import.meta.dir, '..', '..', 'dist', `${NAME}.tar.gz`)

/** The snapshot for this code, if there is one: embedded in the binary, or made by `bun install`. */
export async function findSnapshot(): Promise<Blob | undefined> {
	if (isCompiledBinary) return Bun.embeddedFiles.find((file) => (file as Blob & { name: string }).name.startsWith(NAME))
	const path = sourceSnapshotPath()
	// Read whole: Bun.Archive takes bytes or a Blob, not a lazily read file.
	return existsSync(path) ? new Blob([await Bun.file(path).bytes()]) : undefined
}

/** Where an interrupted unpacking left its files: removed before the next one. */
const UNPACKING = '.latchkey-unpacking-'

/**
 * Unpacks the snapshot into `dataDir` when the directory holds nothing yet (but an interrupted unpacking,
 * a volume's lost+found, or the keys/ folder of development secrets). Files land in a folder inside it and move up with PG_VERSION last, so that a start cut off
 * halfway never leaves what looks like a database.
 */
export async function unpackSnapshotIfEmpty(dataDir: string, snapshot?: Blob): Promise<boolean> {
	const present = readdirSync(dataDir)
	const leftovers = present.filter((name) => name.startsWith(UNPACKING))
	// A fresh volume's lost+found does not make the directory a database, nor do the development keys made before it.
	if (present.some((name) => !name.startsWith(UNPACKING) && name !== 'lost+found' && name !== KEYS_FOLDER)) return false
	const archive = snapshot ?? (await findSnapshot())
	if (!archive) return false
	for (const leftover of leftovers) await rm(join(dataDir, leftover), { recursive: true, force: true })
	const staging = await mkdtemp(join(dataDir, UNPACKING))
	try {
		await new Bun.Archive(archive).extract(staging)
	} catch {
		// An unreadable snapshot costs only time: PGlite initialises the directory itself, as without one.
		await rm(staging, { recursive: true, force: true })
		return false
	}
	const entries = readdirSync(staging).sort((a, b) => Number(a === 'PG_VERSION') - Number(b === 'PG_VERSION'))
	for (const entry of entries) await rename(join(staging, entry), join(dataDir, entry))
	await rm(staging, { recursive: true, force: true })
	return true
}
