/**
 * Start-up on the embedded database: spawn → `/api/health/ready` 200, polled every 10 ms, for a first start
 * on an empty DATA_DIR (the snapshot unpacked) and a restart on the directory it left, for the compiled
 * binary and for `bun run start`. Medians of `runs` starts each. Part of `bun run bench`; alone:
 *
 *   bun test/bench/startup.ts [--runs 7]     (after `bun run build`)
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'

const ROOT = join(import.meta.dir, '..', '..')

export interface StartupFigures {
	runs: number
	binaryFirstMs: number
	binaryRestartMs: number
	sourceFirstMs: number
	sourceRestartMs: number
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN

/** Milliseconds from spawn until the readiness probe answers 200; the process is stopped afterwards. */
async function timeToReady(command: string[], dataDir: string, port: number): Promise<number> {
	const started = performance.now()
	const child = Bun.spawn(command, {
		cwd: ROOT,
		env: { HOME: process.env.HOME ?? tmpdir(), PATH: process.env.PATH ?? '', PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
		stdout: 'ignore',
		stderr: 'ignore',
	})
	try {
		for (;;) {
			if (child.exitCode !== null) throw new Error(`${command.join(' ')} exited with ${child.exitCode} before it was ready`)
			const ready = await fetch(`http://127.0.0.1:${port}/api/health/ready`).then((response) => response.ok, () => false)
			if (ready) return performance.now() - started
			if (performance.now() - started > 60_000) throw new Error(`${command.join(' ')} was not ready within 60 s`)
			await Bun.sleep(10)
		}
	} finally {
		child.kill('SIGTERM')
		await child.exited
	}
}

async function firstAndRestart(command: string[], runs: number, port: number) {
	const first: number[] = []
	const restart: number[] = []
	for (let run = 0; run < runs; run++) {
		const dataDir = mkdtempSync(join(tmpdir(), 'latchkey-startup-'))
		try {
			first.push(await timeToReady(command, dataDir, port))
			restart.push(await timeToReady(command, dataDir, port))
		} finally {
			rmSync(dataDir, { recursive: true, force: true })
		}
	}
	return { first: Math.round(median(first)), restart: Math.round(median(restart)) }
}

export async function measureStartups(runs: number, port: number): Promise<StartupFigures> {
	// What `bun install` leaves for `bun run start` (it is there already unless scripts were skipped).
	const snapshot = Bun.spawnSync([process.execPath, 'src/db/make-snapshot.ts', 'install'], { cwd: ROOT })
	if (snapshot.exitCode !== 0) throw new Error(`no snapshot for runs from source: ${snapshot.stderr}`)
	const binary = await firstAndRestart([join(ROOT, 'dist', 'latchkey')], runs, port)
	const source = await firstAndRestart([process.execPath, 'run', 'src/index.ts'], runs, port)
	return { runs, binaryFirstMs: binary.first, binaryRestartMs: binary.restart, sourceFirstMs: source.first, sourceRestartMs: source.restart }
}

if (import.meta.main) {
	const { values } = parseArgs({ args: Bun.argv.slice(2), options: { runs: { type: 'string', default: '7' }, port: { type: 'string', default: '39117' } } })
	console.log(await measureStartups(Number(values.runs), Number(values.port)))
}
