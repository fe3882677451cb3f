import { eq } from 'drizzle-orm'
import { importCheckpoints } from '../../db/schema'
import type { AuditLog, ClientInfo } from '../audit/service'
import type { ImportOutcome, ImportUser, OnConflict, SourceName, SourceOptions } from './model'
import { SOURCE_READERS } from './sources'
import { countInto, noCounts, prepareLine, writeBatch, writeLines, type Counts, type PreparedLine, type WriteOptions, type WriterDeps } from './writer'

export type { Counts } from './writer'

/** Lines a transaction writes: big enough that a million lines take few round trips, small enough to hold little. */
export const IMPORT_BATCH_LINES = 2000

export interface ImportRun {
	source: SourceName
	file: Blob
	onConflict: OnConflict
	dryRun: boolean
	emitEvents: boolean
	sourceOptions: SourceOptions
	batchLines?: number
}

/** What a run tells whoever started it, as it goes. */
export interface ImportReport {
	/** A checkpoint of an earlier run of the same source and file was found: its lines up to `afterLine` are written. */
	resuming(afterLine: number): void
	/** A line that failed (its number and the reason). */
	failed(outcome: ImportOutcome): void
	/** After each batch: the last line read, the counts so far, and the file's lines when the source has one user a line. */
	progress(lastLine: number, counts: Counts, totalLines?: number): void
}

export interface ImportsServiceDeps extends WriterDeps {
	audit: AuditLog
}

/** Thrown out of a dry run's one transaction to roll it back. */
const DRY_RUN = Symbol('dry run')

/**
 * Imports: a file through its source's reader (the command), or lines of Latchkey's format (POST /user-imports),
 * checked and written by the one writer (writer.ts).
 */
export class ImportsService {
	constructor(private readonly deps: ImportsServiceDeps) {}

	/**
	 * Reads the file line by line and writes it in batches, each batch in one transaction with the run's checkpoint
	 * (keyed by the source and the file's SHA-256): the same run again after a crash resumes after the last batch
	 * written, and the checkpoint goes when the run ends. A dry run does every check and lookup in one transaction
	 * that is rolled back: it writes nothing, not even a checkpoint.
	 */
	async importFile(run: ImportRun, report: ImportReport, client: ClientInfo): Promise<Counts> {
		const reader = SOURCE_READERS[run.source]
		const { db } = this.deps
		const options: WriteOptions = { onConflict: run.onConflict, emitEvents: run.emitEvents }
		const batchLines = run.batchLines ?? IMPORT_BATCH_LINES
		const digest = await sha256(run.file)
		const key = `${run.source}:${digest.hex}`
		const totalLines = run.source === 'latchkey' ? digest.lines : undefined
		let counts = noCounts()
		let resumeAfter = 0
		if (!run.dryRun) {
			const [saved] = await db.select().from(importCheckpoints).where(eq(importCheckpoints.key, key))
			if (saved) {
				resumeAfter = saved.lastLine
				counts = { ...noCounts(), ...saved.counts }
				report.resuming(resumeAfter)
			}
		}

		const readAndWrite = async (write: (batch: Array<PreparedLine | ImportOutcome>, lastLine: number) => Promise<ImportOutcome[]>) => {
			// One batch is written while the next is read and checked; batches commit in order.
			let writing: Promise<void> = Promise.resolve()
			const flush = async (batch: Array<PreparedLine | ImportOutcome>, lastLine: number) => {
				await writing
				writing = write(batch, lastLine).then((outcomes) => {
					countInto(counts, outcomes)
					for (const outcome of outcomes) if (outcome.status === 'failed') report.failed(outcome)
					report.progress(lastLine, counts, totalLines)
				})
				// Awaited at the next flush or at the end; a failure meanwhile must not count as unhandled.
				writing.catch(() => {})
			}
			let batch: Array<PreparedLine | ImportOutcome> = []
			let lastLine = resumeAfter
			for await (const line of reader(run.file, run.sourceOptions)) {
				if (line.line <= resumeAfter) continue
				batch.push(await prepareLine(line, this.deps))
				lastLine = line.line
				if (batch.length >= batchLines) {
					await flush(batch, lastLine)
					batch = []
				}
			}
			if (batch.length > 0) await flush(batch, lastLine)
			await writing
		}

		if (run.dryRun) {
			await db
				.transaction(async (outer) => {
					await readAndWrite((batch) => outer.transaction((savepoint) => writeLines(savepoint, batch, options)))
					throw DRY_RUN
				})
				.catch((error: unknown) => {
					if (error !== DRY_RUN) throw error
				})
			return counts
		}
		await readAndWrite((batch, lastLine) => writeBatch(db, batch, options, { key, lastLine, counts }))
		await db.delete(importCheckpoints).where(eq(importCheckpoints.key, key))
		await this.deps.audit.record('users.imported', client, { details: { source: run.source, ...counts } })
		return counts
	}

	/** POST /user-imports: up to 1,000 lines of Latchkey's format in one transaction, with what became of each. */
	async importLines(lines: ImportUser[], options: WriteOptions, actorId: string, client: ClientInfo): Promise<ImportOutcome[]> {
		const prepared = await Promise.all(lines.map((user, index) => prepareLine({ line: index + 1, user }, this.deps)))
		const outcomes = await writeBatch(this.deps.db, prepared, options)
		await this.deps.audit.record('users.imported', client, { actorId, details: { source: 'api', ...countInto(noCounts(), outcomes) } })
		return outcomes
	}
}

/** The file's SHA-256 (hex), read as a stream: what names a run's checkpoint; and its lines, for the progress bar. */
async function sha256(file: Blob): Promise<{ hex: string; lines: number }> {
	const hasher = new Bun.CryptoHasher('sha256')
	let lines = 0
	let last = 0x0a
	for await (const chunk of file.stream()) {
		hasher.update(chunk)
		for (let at = chunk.indexOf(0x0a); at !== -1; at = chunk.indexOf(0x0a, at + 1)) lines++
		if (chunk.byteLength > 0) last = chunk[chunk.byteLength - 1] ?? last
	}
	return { hex: hasher.digest('hex'), lines: last === 0x0a ? lines : lines + 1 }
}
