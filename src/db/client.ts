import { PGlite } from '@electric-sql/pglite'
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import { existsSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
// PGlite's runtime files, embedded in the compiled binary so it runs from an empty folder.
import initdbWasmPath from '../../node_modules/@electric-sql/pglite/dist/initdb.wasm' with { type: 'file' }
import fsBundlePath from '../../node_modules/@electric-sql/pglite/dist/pglite.data' with { type: 'file' }
import pgliteWasmPath from '../../node_modules/@electric-sql/pglite/dist/pglite.wasm' with { type: 'file' }
import pgTrgmBundlePath from '../../node_modules/@electric-sql/pglite/dist/pg_trgm.tar.gz' with { type: 'file' }
import { pathToFileURL } from 'node:url'
import type { Config } from '../config/env'
import * as schema from './schema'
import { withNamedStatements } from './pglite-statements'
import { unpackSnapshotIfEmpty } from './snapshot'

/** The rows of `db.execute`, whichever driver answered: postgres.js gives the rows, PGlite a result that holds them. */
export const rowsOf = <T>(result: unknown): T[] => ((result as { rows?: T[] }).rows ?? (result as T[])) as T[]

/** The one Drizzle handle type; both drivers produce it. */
export type Database = PgDatabase<PgQueryResultHKT, typeof schema>

/** A Drizzle handle or an open transaction on it. */
export type Queryable = Pick<Database, 'select' | 'insert' | 'update' | 'delete' | 'execute'>

export interface DatabaseHandle {
	db: Database
	kind: 'postgres' | 'pglite'
	/** For the start-up log: which database, never credentials. */
	description: string
	ping(): Promise<void>
	/**
	 * Calls `onNotify` with the payload at each NOTIFY on `channel` (sent by any instance, on commit), and `onListen`
	 * each time the listening starts, again after a lost connection (what was sent meanwhile never arrives); resolves
	 * to the unlisten.
	 */
	listen(channel: string, onNotify: (payload: string) => void, onListen?: () => void): Promise<() => Promise<void>>
	close(): Promise<void>
}

const compileWasm = (path: string) => Bun.file(path).arrayBuffer().then((bytes) => WebAssembly.compile(bytes))

let pgliteCompiled: Promise<WebAssembly.Module> | undefined
/**
 * Compiles PGlite's WebAssembly (about 0.4 s, on other threads) once per process. Called as soon as the
 * configuration says the embedded database will be used, so that it overlaps the rest of the start.
 */
export const compilePgliteWasm = () => (pgliteCompiled ??= compileWasm(pgliteWasmPath))

let initdbCompiled: Promise<WebAssembly.Module> | undefined
/** initdb's, compiled only for a directory with no database yet: once compiled, its module would be held for good (a few MiB). */
const compileInitdbWasm = () => (initdbCompiled ??= compileWasm(initdbWasmPath))

/**
 * PGlite reads extension bundles with node:fs streams, which cannot see the
 * files embedded in a compiled binary; copy the bundle to the temp folder once.
 */
async function pgTrgmBundleOnDisk(): Promise<string> {
	const bytes = await Bun.file(pgTrgmBundlePath).bytes()
	const target = join(tmpdir(), `latchkey-pg_trgm-${new Bun.CryptoHasher('sha256').update(bytes).digest('hex').slice(0, 16)}.tar.gz`)
	if (!(await Bun.file(target).exists())) await Bun.write(target, bytes)
	return target
}

/**
 * PostgreSQL settings for the embedded database, after PGlite's own (which `startParams` replaces). Its shared
 * memory lives inside PGlite's WebAssembly memory and is zeroed at start, so every megabyte of it is held for good:
 * - shared_buffers: initdb writes PostgreSQL's 128MB (an idle service held about 330 MiB, against under 100 MiB on
 *   PostgreSQL). One process on one connection needs far less; a page it misses is read from the data directory
 *   through the operating system's cache, as PostgreSQL itself does. 4MB measured no slower than 8MB.
 * - max_connections: PGlite serves one connection, yet sizes its lock table and process slots for initdb's 100.
 * Together 8MB of shared memory instead of 15MB at 8MB and 100. Given on the command line, so no data directory is
 * rewritten (see test/bench/memory.ts for the figures, docs/performance.md for the runs).
 */
const PGLITE_SETTINGS = ['shared_buffers=4MB', 'max_connections=10']

/** An embedded PostgreSQL in `dataDir` (`memory://` for none), with pg_trgm; started from `loadDataDir` (a tarball of a data directory) instead of initdb when given. */
export async function createPglite(dataDir: string, loadDataDir?: Blob): Promise<PGlite> {
	// `memory://` or an empty folder, with no data directory to load: PGlite runs initdb first.
	const needsInitdb = loadDataDir === undefined && !existsSync(join(dataDir, 'PG_VERSION'))
	const [pgliteWasmModule, initdbWasmModule] = await Promise.all([compilePgliteWasm(), needsInitdb ? compileInitdbWasm() : undefined])
	return PGlite.create({
		dataDir,
		loadDataDir,
		startParams: [...PGlite.defaultStartParams, ...PGLITE_SETTINGS.flatMap((setting) => ['-c', setting])],
		// pg_trgm (trigram indexes for the `q` search), from the embedded bundle rather than a path beside the module.
		extensions: { pg_trgm: { name: 'pg_trgm', setup: async () => ({ bundlePath: pathToFileURL(await pgTrgmBundleOnDisk()) }) } },
		pgliteWasmModule,
		initdbWasmModule,
		fsBundle: Bun.file(fsBundlePath),
	})
}

export interface OpenOptions {
	/**
	 * PGlite: a tarball of a data directory (PGlite's `dumpDataDir`) for an in-memory database to start
	 * from instead of running initdb; the tests start each database from the migrated snapshot.
	 */
	loadDataDir?: Blob
	/**
	 * PostgreSQL: the wait before a connection that failed is tried again (default 0.1 s, see below). A test of
	 * answers during an outage sets less: each of its requests then fails at once instead of waiting it out.
	 */
	reconnectSeconds?: number
}

export async function openDatabase(config: Config['database'], options: OpenOptions = {}): Promise<DatabaseHandle> {
	if (config.kind === 'postgres') {
		const reconnectSeconds = options.reconnectSeconds ?? 0.1
		const client = postgres(config.url, {
			max: config.poolMax,
			connect_timeout: 5,
			// postgres.js queues queries while its connections reconnect, backing off up to 20 s by default,
			// so during an outage requests waited that long (some never settled). A short constant backoff
			// lets each queued query fail at once with the connection error, which the API answers with
			// 503, and reconnects as soon as the server is back (test/faults.e2e.ts).
			backoff: () => reconnectSeconds,
			idle_timeout: 60,
			onnotice: () => {},
			connection: { application_name: 'latchkey' },
		})
		const db = drizzlePostgres({ client, schema }) as unknown as Database
		const url = new URL(config.url)
		return {
			db,
			kind: 'postgres',
			description: `PostgreSQL at ${url.hostname}:${url.port || 5432}${url.pathname}`,
			ping: async () => {
				await client`select 1`
			},
			// postgres.js keeps one connection for it and listens again after a reconnect.
			listen: async (channel, onNotify, onListen) => {
				const { unlisten } = await client.listen(channel, (payload) => onNotify(payload), onListen)
				return unlisten
			},
			close: () => client.end({ timeout: 5 }),
		}
	}
	const inMemory = config.dataDir.startsWith('memory://')
	if (!inMemory) mkdirSync(config.dataDir, { recursive: true })
	// The WebAssembly compiles on other threads meanwhile (index.ts may have started it already).
	const compiling = compilePgliteWasm()
	// A first start unpacks the migrated database made at build time instead of running initdb and every migration.
	if (!inMemory) await unpackSnapshotIfEmpty(config.dataDir)
	await compiling
	const client = await createPglite(config.dataDir, options.loadDataDir)
	return pgliteHandle(client, inMemory ? 'embedded PostgreSQL (PGlite) in memory' : `embedded PostgreSQL (PGlite) in ${config.dataDir}`)
}

/** The handle over an open PGlite (the tests lend one PGlite to several files in turn: test/support/database.ts). */
export function pgliteHandle(client: PGlite, description: string): DatabaseHandle {
	return {
		db: drizzlePglite({ client: withNamedStatements(client) as unknown as PGlite, schema }) as unknown as Database,
		kind: 'pglite',
		description,
		ping: async () => {
			await client.query('select 1')
		},
		// One process, one connection: the listening never has to start again.
		listen: async (channel, onNotify, onListen) => {
			const unlisten = await client.listen(channel, (payload) => onNotify(payload))
			onListen?.()
			return unlisten
		},
		close: () => client.close(),
	}
}

const UNAVAILABLE_CODES = new Set([
	'ECONNREFUSED',
	'ECONNRESET',
	'ETIMEDOUT',
	'EPIPE',
	'ENOTFOUND',
	'EAI_AGAIN',
	'CONNECT_TIMEOUT',
	'CONNECTION_CLOSED',
	'CONNECTION_ENDED',
	'CONNECTION_DESTROYED',
	'57P01', // admin_shutdown
	'57P02', // crash_shutdown
	'57P03', // cannot_connect_now
	'53300', // too_many_connections
])

/**
 * True when an error (or its cause: Drizzle wraps driver errors) means the database is out of reach: a network
 * failure, a connection error (class 08), a server going down, or any error PostgreSQL raises as FATAL — which ends
 * the session, as when it refuses the connection itself (a database not accepting connections, 55000; one dropped).
 */
export function isDatabaseUnavailable(error: unknown): boolean {
	for (let current = error, depth = 0; current && depth < 5; depth++) {
		const { code, severity } = current as { code?: unknown; severity?: unknown }
		if (typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || code.startsWith('08'))) return true
		if (severity === 'FATAL' || severity === 'PANIC') return true
		current = (current as { cause?: unknown }).cause
	}
	return false
}

/**
 * `work` (a whole transaction), run again when PostgreSQL chose it as a deadlock's victim: it was rolled back
 * entirely, so running it again is safe, and the other transaction has moved on meanwhile.
 */
export async function retryingDeadlocks<T>(work: () => Promise<T>, retries = 2): Promise<T> {
	for (let attempt = 0; ; attempt++) {
		try {
			return await work()
		} catch (error) {
			if (attempt >= retries || sqlState(error).code !== '40P01') throw error
		}
	}
}

/** The SQLSTATE of a database error, looking through Drizzle's wrapper. */
export function sqlState(error: unknown): { code?: string; constraint?: string } {
	for (let current = error, depth = 0; current && depth < 5; depth++) {
		const { code, constraint, constraint_name } = current as Record<string, unknown>
		if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code))
			return { code, constraint: (constraint_name ?? constraint) as string | undefined }
		current = (current as { cause?: unknown }).cause
	}
	return {}
}

/**
 * An error for the log without the SQL and parameters that Drizzle puts in its own message:
 * its class, the SQLSTATE and the message of its deepest cause (the driver's, which has no SQL).
 */
export function loggableError(error: unknown) {
	let deepest = error
	while (deepest instanceof Error && deepest.cause instanceof Error) deepest = deepest.cause
	const driverMessage = deepest !== error && deepest instanceof Error ? deepest.message : undefined
	return { name: error instanceof Error ? error.name : typeof error, code: sqlState(error).code, message: driverMessage }
}
