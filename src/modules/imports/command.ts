import { closeSync, fchmodSync, openSync } from 'node:fs'
import type { Config } from '../../config/env'
import { DataKeys, UnreadableSecret } from '../../crypto/data-keys'
import { isDatabaseUnavailable, loggableError, openDatabase, type DatabaseHandle } from '../../db/client'
import { migrate } from '../../db/migrate'
import type { Logger } from '../../log'
import { AuditLog } from '../audit/service'
import { exportUsers } from './export'
import { SOURCES, type OnConflict, type SourceName, type SourceOptions } from './model'
import { ImportsService, type Counts } from './service'
import { SourceFileError } from './sources'

/** `latchkey import` and `latchkey export`: what index.ts parsed, run here. Exit codes as --help says. */
export const EXIT = { ok: 0, failure: 1, usage: 2 } as const

export interface ImportArguments {
	file: string
	from?: string
	dryRun: boolean
	onConflict?: string
	providers: string[]
	emitEvents: boolean
	firebase: { hashKey?: string; saltSeparator?: string; rounds?: string; memCost?: string }
}

/** Where the commands' messages go: stderr, and the summary to stdout (stderr too when stdout carries the export). */
export interface Terminal {
	out(line: string): void
	err(line: string): void
	/** A line drawn over itself (the progress bar), when stderr is a terminal; undefined otherwise. */
	redraw?: (line: string) => void
}

const usage = (terminal: Terminal, message: string) => {
	terminal.err(`latchkey: ${message}\nRun 'latchkey --help' for usage.`)
	return EXIT.usage
}

const CLIENT = { ip: null, userAgent: 'latchkey import', requestId: null }

/** Opens the database a command works on, closed when it ends: the configured one; the tests hand in theirs. */
export type OpenDatabase = (config: Config) => Promise<DatabaseHandle>
const configuredDatabase: OpenDatabase = (config) => openDatabase(config.database)

/** Checks the arguments (exit 2 when they are wrong), then imports the file into the configured database. */
export async function importCommand(config: Config, log: Logger, args: ImportArguments, terminal: Terminal, open = configuredDatabase): Promise<number> {
	if (args.from === undefined) return usage(terminal, `'import' needs --from ${SOURCES.join('|')}`)
	if (!(SOURCES as readonly string[]).includes(args.from)) return usage(terminal, `--from takes ${SOURCES.join(', ')} (got '${args.from}')`)
	const onConflict = args.onConflict ?? 'skip'
	if (onConflict !== 'skip' && onConflict !== 'update') return usage(terminal, `--on-conflict takes skip or update (got '${onConflict}')`)
	const providers: Record<string, string> = {}
	for (const pair of args.providers) {
		const match = /^([^=]+)=([a-z][a-z0-9-]{0,31})$/.exec(pair)
		if (!match?.[1] || !match[2]) return usage(terminal, `--provider takes SOURCE=NAME, NAME as in OIDC_PROVIDERS (got '${pair}')`)
		providers[match[1]] = match[2]
	}
	const sourceOptions: SourceOptions = { providers }
	const { hashKey, saltSeparator, rounds, memCost } = args.firebase
	if ([hashKey, saltSeparator, rounds, memCost].some((value) => value !== undefined)) {
		if (hashKey === undefined || rounds === undefined || memCost === undefined)
			return usage(terminal, 'Firebase hash parameters: give --hash-key, --rounds and --mem-cost (and --salt-separator if the project has one)')
		const [roundCount, memoryCost] = [Number(rounds), Number(memCost)]
		if (!Number.isInteger(roundCount) || roundCount < 1 || roundCount > 8) return usage(terminal, `--rounds takes a whole number from 1 to 8 (got '${rounds}')`)
		if (!Number.isInteger(memoryCost) || memoryCost < 1 || memoryCost > 14) return usage(terminal, `--mem-cost takes a whole number from 1 to 14 (got '${memCost}')`)
		sourceOptions.firebase = { hashKey, saltSeparator: saltSeparator ?? '', rounds: roundCount, memCost: memoryCost }
	}
	const file = Bun.file(args.file)
	if (!(await file.exists())) return usage(terminal, `cannot read ${args.file}: no such file`)

	const database = await open(config)
	try {
		await migrate(database.db)
		const imports = new ImportsService({ db: database.db, dataKeys: DataKeys.from(config.dataKeys, log), audit: new AuditLog(database.db, log) })
		const started = performance.now()
		const progress = progressReport(terminal, started)
		let counts: Counts
		try {
			counts = await imports.importFile(
				{ source: args.from as SourceName, file, onConflict: onConflict as OnConflict, dryRun: args.dryRun, emitEvents: args.emitEvents, sourceOptions },
				{
					resuming: (afterLine) => terminal.err(`resuming after line ${afterLine}`),
					failed: (outcome) => {
						progress.clear()
						terminal.err(`line ${outcome.line}: ${outcome.error ?? 'failed'}`)
					},
					progress: progress.update,
				},
				CLIENT,
			)
		} catch (error) {
			// The file as a whole is not the source's export (checked before any line is read): nothing was written.
			if (error instanceof SourceFileError) {
				terminal.err(`latchkey: ${args.file}: ${error.message}; nothing was imported`)
				return EXIT.failure
			}
			// The driver's words only: Drizzle's own message quotes the statement and its parameters (hashes among them).
			terminal.err(`latchkey: import stopped: ${describeFailure(error)}; what was written stays, and the same command resumes after it`)
			return EXIT.failure
		} finally {
			progress.clear()
		}
		const seconds = (performance.now() - started) / 1000
		terminal.out(`${args.dryRun ? 'dry run, nothing written: ' : ''}${summary(counts)} in ${seconds.toFixed(1)} s`)
		return counts.failed > 0 ? EXIT.failure : EXIT.ok
	} finally {
		await database.close()
	}
}

/** What went wrong, for a person: the database's message and SQLSTATE, never a statement or its parameters. */
function describeFailure(error: unknown): string {
	if (error instanceof UnreadableSecret) return `a TOTP secret does not open with DATA_ENCRYPTION_KEY (${error.message})`
	const { name, code, message } = loggableError(error)
	if (isDatabaseUnavailable(error)) return `the database is unreachable${code ? ` (${code})` : ''}`
	return [message ?? name, code && `SQLSTATE ${code}`].filter(Boolean).join(', ')
}

const number = (value: number) => value.toLocaleString('en-US')
const summary = (counts: Counts) => `created ${number(counts.created)}, updated ${number(counts.updated)}, skipped ${number(counts.skipped)}, failed ${number(counts.failed)}`

/** A bar redrawn on a terminal (lines done, lines a second, the counts); on anything else a plain line every 10 s. */
function progressReport(terminal: Terminal, started: number) {
	let drawn = false
	let lastPlain = started
	let first: { line: number; at: number } | undefined
	return {
		update(lastLine: number, counts: Counts, totalLines?: number) {
			const now = performance.now()
			// The rate of this run's lines (a resumed run starts after its checkpoint).
			first ??= { line: lastLine - (counts.created + counts.updated + counts.skipped + counts.failed), at: started }
			const rate = Math.round((lastLine - first.line) / Math.max(0.001, (now - first.at) / 1000))
			const done = totalLines ? `${number(lastLine)}/${number(totalLines)} lines` : `${number(lastLine)} lines`
			const text = `${done} · ${number(rate)} lines/s · ${summary(counts)}`
			if (terminal.redraw) {
				const filled = totalLines ? Math.min(30, Math.round((30 * lastLine) / totalLines)) : 0
				terminal.redraw(totalLines ? `[${'#'.repeat(filled)}${'.'.repeat(30 - filled)}] ${text}` : text)
				drawn = true
			} else if (now - lastPlain >= 10_000) {
				terminal.err(`importing: ${text}`)
				lastPlain = now
			}
		},
		clear() {
			if (drawn && terminal.redraw) terminal.redraw('')
			drawn = false
		},
	}
}

/** `latchkey export FILE [--with-hashes]`: every user as Latchkey's NDJSON, to FILE (mode 0600) or `-` (stdout). */
export async function exportCommand(config: Config, log: Logger, args: { file: string; withHashes: boolean }, terminal: Terminal, open = configuredDatabase): Promise<number> {
	let fd: number
	try {
		fd = args.file === '-' ? 1 : openSync(args.file, 'w', 0o600)
		// An existing file keeps its mode through open; the export may hold hashes.
		if (args.file !== '-') fchmodSync(fd, 0o600)
	} catch (error) {
		return usage(terminal, `cannot write ${args.file}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`)
	}
	const sink = Bun.file(fd).writer()
	const database = await open(config)
	try {
		await migrate(database.db)
		const started = performance.now()
		const count = await exportUsers(database.db, DataKeys.from(config.dataKeys, log), { withHashes: args.withHashes }, async (chunk) => {
			sink.write(chunk)
			await sink.flush()
		})
		await sink.end()
		terminal.err(`exported ${number(count)} users${args.withHashes ? ' with their password hashes and TOTP secrets' : ''} in ${((performance.now() - started) / 1000).toFixed(1)} s`)
		return EXIT.ok
	} catch (error) {
		terminal.err(`latchkey: export stopped: ${describeFailure(error)}`)
		return EXIT.failure
	} finally {
		if (fd !== 1)
			try {
				closeSync(fd)
			} catch {
				// Closed with the sink already.
			}
		await database.close()
	}
}
