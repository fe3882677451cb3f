/**
 * `bun run bench --only import`: a million users in Latchkey's NDJSON imported by the compiled binary into a
 * fresh PostgreSQL database (issue 27, point 5: under two minutes, no hashing at import), then exported again.
 * The file is made once per size and kept in test-artifacts/: bcrypt hashes made once and reused, an identity on
 * every tenth user, metadata on every fifth, a TOTP secret on every 500th.
 */
import { existsSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import bcrypt from 'bcryptjs'
import postgres from 'postgres'
import { rssMiB } from './proc'
import { benchServiceEnv } from './service-env'

export interface ImportFigures {
	users: number
	fileMiB: number
	importSeconds: number
	usersPerSecond: number
	importPeakRssMiB: number
	importSummary: string
	stored: number
	exportSeconds: number
	exportPeakRssMiB: number
	exportedLines: number
	goalSeconds: number
	met: boolean
}

const GOAL_SECONDS = 120

/** The bench file of `count` users, written once (its name says its size and shape's version). */
async function benchFile(artifacts: string, count: number): Promise<string> {
	const path = join(artifacts, `bench-import-v1-${count}.ndjson`)
	if (existsSync(path)) return path
	const hashes = ['password one', 'password two', 'password three', 'password four'].map((password) => bcrypt.hashSync(password, 10))
	const writer = Bun.file(`${path}.partial`).writer()
	const start = Date.parse('2020-01-01T00:00:00Z')
	for (let n = 0; n < count; n++) {
		const line: Record<string, unknown> = {
			email: `import-${n}@example.test`,
			name: `Imported User ${n}`,
			emailVerified: n % 2 === 0,
			createdAt: new Date(start + n * 1000).toISOString(),
			passwordHash: hashes[n % hashes.length],
		}
		if (n % 10 === 0) line.identities = [{ provider: 'google', subject: `google-${n}`, email: `import-${n}@example.test` }]
		if (n % 5 === 0) line.metadata = { plan: n % 3 === 0 ? 'pro' : 'free', n }
		if (n % 100 === 0) line.appMetadata = { claims: { tenant: `t${n % 7}` } }
		if (n % 500 === 0) line.totpSecrets = [{ name: 'Phone', secret: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP' }]
		writer.write(`${JSON.stringify(line)}\n`)
		if (n % 10_000 === 0) await writer.flush()
	}
	await writer.end()
	await Bun.write(path, Bun.file(`${path}.partial`))
	rmSync(`${path}.partial`)
	return path
}

/** Runs the binary to its end, sampling the RSS of its process every 100 ms. */
async function timed(command: string[], env: Record<string, string>) {
	const started = performance.now()
	const child = Bun.spawn(command, { env, stdout: 'pipe', stderr: 'pipe' })
	let peak = 0
	const timer = setInterval(() => {
		peak = Math.max(peak, rssMiB(child.pid))
	}, 100)
	const [code, out, err] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()])
	clearInterval(timer)
	const seconds = (performance.now() - started) / 1000
	if (code !== 0) throw new Error(`${command.slice(1).join(' ')} exited ${code}: ${err.slice(0, 2000)}`)
	return { seconds, peak, out, err }
}

export async function measureImport({ binary, server, artifacts, users, log }: { binary: string; server: string; artifacts: string; users: number; log: (message: string) => void }): Promise<ImportFigures> {
	log(`import: the file of ${users} users`)
	const file = await benchFile(artifacts, users)
	const name = 'latchkey_bench_import'
	const admin = postgres(server, { max: 1, onnotice: () => {} })
	try {
		await admin.unsafe(`drop database if exists ${name} with (force)`)
		await admin.unsafe(`create database ${name}`)
		const url = new URL(server)
		url.pathname = `/${name}`
		const env = { ...benchServiceEnv({ home: artifacts, port: 0, databaseUrl: url.toString() }), PUBLIC_URL: 'https://auth.example.test' }
		log('import: latchkey import (compiled binary) into a fresh database')
		const imported = await timed([binary, 'import', file, '--from', 'latchkey'], env)
		const database = postgres(url.toString(), { max: 1, onnotice: () => {} })
		const [row] = await database<{ count: number }[]>`select count(*)::int as count from users`
		await database.end()
		log(`import: ${imported.out.trim()} (${imported.seconds.toFixed(1)} s wall, peak RSS ${imported.peak.toFixed(0)} MiB)`)
		const exportPath = join(artifacts, 'bench-export.ndjson')
		const exported = await timed([binary, 'export', exportPath, '--with-hashes'], env)
		const exportedLines = (await Bun.file(exportPath).text()).split('\n').length - 1
		rmSync(exportPath)
		log(`export: ${exportedLines} lines in ${exported.seconds.toFixed(1)} s, peak RSS ${exported.peak.toFixed(0)} MiB`)
		return {
			users,
			fileMiB: Math.round(statSync(file).size / 2 ** 20),
			importSeconds: Number(imported.seconds.toFixed(1)),
			usersPerSecond: Math.round(users / imported.seconds),
			importPeakRssMiB: Math.round(imported.peak),
			importSummary: imported.out.trim(),
			stored: row?.count ?? 0,
			exportSeconds: Number(exported.seconds.toFixed(1)),
			exportPeakRssMiB: Math.round(exported.peak),
			exportedLines,
			goalSeconds: GOAL_SECONDS,
			met: imported.seconds < GOAL_SECONDS && row?.count === users,
		}
	} finally {
		await admin.unsafe(`drop database if exists ${name} with (force)`).catch(() => {})
		await admin.end()
	}
}

export const describeImport = (figures: ImportFigures) =>
	`import: ${figures.users} users (${figures.fileMiB} MiB NDJSON) in ${figures.importSeconds} s = ${figures.usersPerSecond} users/s, peak RSS ${figures.importPeakRssMiB} MiB; ` +
	`stored ${figures.stored}; goal < ${figures.goalSeconds} s: ${figures.met ? 'met' : 'NOT met'}. export: ${figures.exportedLines} lines in ${figures.exportSeconds} s, peak RSS ${figures.exportPeakRssMiB} MiB`
