import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import bcrypt from 'bcryptjs'
import { importArguments, parseCommandLine } from '../../src/command-line'
import { loadConfig } from '../../src/config/env'
import { keepDevelopmentSecrets } from '../../src/config/secret-file'
import { openDatabase, type DatabaseHandle } from '../../src/db/client'
import { createLogger } from '../../src/log'
import { exportCommand, importCommand, type OpenDatabase, type Terminal } from '../../src/modules/imports/command'
import { startTestApp, TEST_ENV, type TestApp } from './app'
import { createTestDatabase, TEST_DATABASE_URL, type TestDatabase } from './database'

const ENTRY = join(import.meta.dir, '..', '..', 'src', 'index.ts')

export interface CliResult {
	code: number
	out: string
	err: string
}

/**
 * The lines of a command's stderr other than its progress: away from a terminal an import prints a plain
 * `importing: …` line every 10 s, which a slow or busy machine reaches with files a quiet one reads in less.
 */
export const messagesOf = (err: string) => err.split('\n').filter((line) => line !== '' && !line.startsWith('importing: '))

/**
 * A database the `latchkey import` and `export` commands run against, with serve's settings: on PostgreSQL
 * (TEST_DATABASE_URL) a database of this file's own, on the embedded database a data directory. The test app
 * reads it between commands (on the embedded database, one process at a time holds it: the test's own until a
 * command runs as a process).
 */
export interface CliDatabase {
	folder: string
	/** Writes lines (objects, or raw text) as an NDJSON file in the folder; its path. */
	file(name: string, lines: Array<object | string>): string
	/**
	 * The command run in this process: the command line parsed as index.ts parses it, then the same command function
	 * (importCommand, exportCommand) with what it prints caught, the log's warnings on stderr as the process has them.
	 * No process start (module loading, the embedded database opened) for each. What only a process shows — the exit
	 * code it ends with, stdout and stderr as a shell sees them, index.ts's own checks — is `runProcess`'s.
	 */
	run(args: string[]): Promise<CliResult>
	/** The command as an operator runs it: `bun src/index.ts …`, a process of its own. */
	runProcess(args: string[]): Promise<CliResult>
	spawn(args: string[]): Promise<Bun.Subprocess<'ignore', 'pipe', 'pipe'>>
	/** The test app on this database for the length of `use` (one app, kept between uses). */
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
	// On the embedded database: the data directory, opened once by this process and shared by the commands run in it
	// and the test app; closed (the app with it) while a command runs as a process.
	let held: Promise<DatabaseHandle> | undefined
	let app: TestApp | undefined
	const embedded = () => (held ??= openDatabase({ kind: 'pglite', dataDir: join(folder, 'data') }))
	const release = async () => {
		if (shared || !held) return
		await app?.close()
		app = undefined
		await (await held).close()
		held = undefined
	}
	// A command closes what it opened when it ends: the held database stays open for the next.
	const open: OpenDatabase | undefined = shared ? undefined : async () => ({ ...(await embedded()), close: async () => {} })
	const spawn = async (args: string[]) => {
		await release()
		return Bun.spawn(['bun', ENTRY, ...args], { cwd: folder, env, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' })
	}
	return {
		folder,
		file(name, lines) {
			const path = join(folder, name)
			writeFileSync(path, lines.map((line) => (typeof line === 'string' ? line : JSON.stringify(line))).join('\n') + '\n')
			return path
		},
		async run(args) {
			const { values, positionals } = parseCommandLine(args)
			const [command, file, ...more] = positionals
			if ((command !== 'import' && command !== 'export') || file === undefined || more.length > 0)
				throw new Error(`run: not an import or export of one file (index.ts checks that: use runProcess): ${args.join(' ')}`)
			const printed = { out: '', err: '' }
			const terminal: Terminal = {
				out: (line) => void (command === 'export' ? (printed.err += `${line}\n`) : (printed.out += `${line}\n`)),
				err: (line) => void (printed.err += `${line}\n`),
			}
			const log = createLogger('warn', { write: (line: string) => void (printed.err += line) })
			const config = keepDevelopmentSecrets(loadConfig(env), log)
			const code =
				command === 'export'
					? await exportCommand(config, log, { file, withHashes: values['with-hashes'] ?? false }, terminal, open)
					: await importCommand(config, log, importArguments(values, file), terminal, open)
			return { code, ...printed }
		},
		async runProcess(args) {
			const child = await spawn(args)
			const [code, out, err] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()])
			return { code, out, err }
		},
		spawn,
		async withApp(use) {
			app ??= await startTestApp({}, shared ?? { handle: await embedded(), drop: release })
			return use(app)
		},
		async drop() {
			if (shared) {
				await app?.close()
				await shared.drop()
			} else await release()
			rmSync(folder, { recursive: true, force: true })
		},
	}
}

/** bcrypt as GoTrue and Auth0 write it (the lowest cost, for speed). */
export const bcryptHash = (password: string) => bcrypt.hashSync(password, 4)
