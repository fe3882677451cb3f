import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import bcrypt from 'bcryptjs'
import { openDatabase } from '../../src/db/client'
import { startTestApp, TEST_ENV, type TestApp } from './app'
import { createTestDatabase, TEST_DATABASE_URL, type TestDatabase } from './database'

const ENTRY = join(import.meta.dir, '..', '..', 'src', 'index.ts')

export interface CliResult {
	code: number
	out: string
	err: string
}

/**
 * A database the `latchkey import` and `export` commands run against, as an operator runs them: a child process
 * with serve's settings. On PostgreSQL (TEST_DATABASE_URL) a database of this file's own, which the test app
 * reads while the commands run; on the embedded database a data directory, opened by the test app only
 * between commands (one process at a time holds it).
 */
export interface CliDatabase {
	folder: string
	/** Writes lines (objects, or raw text) as an NDJSON file in the folder; its path. */
	file(name: string, lines: Array<object | string>): string
	run(args: string[], options?: { env?: Record<string, string> }): Promise<CliResult>
	spawn(args: string[]): Bun.Subprocess<'ignore', 'pipe', 'pipe'>
	/** The test app on this database for the length of `use`. */
	withApp<T>(use: (t: TestApp) => Promise<T>): Promise<T>
	drop(): Promise<void>
}

export async function cliDatabase(): Promise<CliDatabase> {
	const folder = mkdtempSync(join(tmpdir(), 'latchkey-imports-'))
	const shared: TestDatabase | undefined = TEST_DATABASE_URL ? await createTestDatabase() : undefined
	const env: Record<string, string> = {
		PATH: process.env.PATH ?? '',
		DATA_ENCRYPTION_KEY: TEST_ENV.DATA_ENCRYPTION_KEY ?? '',
		JWT_SECRET: TEST_ENV.JWT_SECRET ?? '',
		OAUTH_SIGNING_KEY: TEST_ENV.OAUTH_SIGNING_KEY ?? '',
		...(shared?.url ? { DATABASE_URL: shared.url } : { DATA_DIR: join(folder, 'data') }),
	}
	let app: TestApp | undefined
	const spawn = (args: string[], extra: Record<string, string> = {}) =>
		Bun.spawn(['bun', ENTRY, ...args], { cwd: folder, env: { ...env, ...extra }, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' })
	return {
		folder,
		file(name, lines) {
			const path = join(folder, name)
			writeFileSync(path, lines.map((line) => (typeof line === 'string' ? line : JSON.stringify(line))).join('\n') + '\n')
			return path
		},
		async run(args, options = {}) {
			const child = spawn(args, options.env)
			const [code, out, err] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()])
			return { code, out, err }
		},
		spawn: (args) => spawn(args),
		async withApp(use) {
			if (shared) return use((app ??= await startTestApp({}, shared)))
			const handle = await openDatabase({ kind: 'pglite', dataDir: join(folder, 'data') })
			const own = await startTestApp({}, { handle, drop: () => handle.close() })
			try {
				return await use(own)
			} finally {
				await own.close()
				await handle.close()
			}
		},
		async drop() {
			await app?.close()
			await shared?.drop()
			rmSync(folder, { recursive: true, force: true })
		},
	}
}

/** bcrypt as GoTrue and Auth0 write it (the lowest cost, for speed). */
export const bcryptHash = (password: string) => bcrypt.hashSync(password, 4)
