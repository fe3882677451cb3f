#!/usr/bin/env bun
import { parseArgs } from 'node:util'
import packageJson from '../package.json'
import { createApp } from './app'
import { ConfigError, EnvSchema, loadConfig, type Config } from './config/env'
import { openDatabase } from './db/client'
import { migrate } from './db/migrate'
import { createLogger, type Logger } from './log'
import { loadTokenKeys } from './modules/auth/keys'

const HELP = `latchkey ${packageJson.version} — accounts and authentication over a JSON API

Usage:
  latchkey [serve]      start the HTTP service (applies pending migrations first)
  latchkey migrate      apply pending database migrations, then exit
  latchkey --help       show this help
  latchkey --version    print the version

Configuration comes from the environment (and a .env file in the working
directory). Settings: ${Object.keys(EnvSchema.properties).join(', ')}.

Exit codes: 0 success · 1 bad configuration or a runtime failure · 2 bad usage.`

/** Exit codes, as documented in --help and the README. */
const EXIT = { ok: 0, failure: 1, usage: 2 } as const

async function main(argv: string[]): Promise<number> {
	let parsed: ReturnType<typeof parseCommandLine>
	try {
		parsed = parseCommandLine(argv)
	} catch (error) {
		console.error(`latchkey: ${(error as Error).message}\nRun 'latchkey --help' for usage.`)
		return EXIT.usage
	}
	const { values, positionals } = parsed
	if (values.help) {
		console.log(HELP)
		return EXIT.ok
	}
	if (values.version) {
		console.log(packageJson.version)
		return EXIT.ok
	}
	const command = positionals.join(' ') || 'serve'
	if (command !== 'serve' && command !== 'migrate') {
		console.error(`latchkey: unknown command '${command}'\nRun 'latchkey --help' for usage.`)
		return EXIT.usage
	}

	let config: Config
	try {
		config = loadConfig()
	} catch (error) {
		if (!(error instanceof ConfigError)) throw error
		for (const problem of error.problems) console.error(`latchkey: configuration: ${problem}`)
		return EXIT.failure
	}
	const log = createLogger(config.logLevel)
	if (command === 'migrate') return runMigrations(config, log)
	return serve(config, log)
}

function parseCommandLine(argv: string[]) {
	return parseArgs({
		args: argv,
		allowPositionals: true,
		strict: true,
		options: { help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'v' } },
	})
}

async function runMigrations(config: Config, log: Logger): Promise<number> {
	const database = await openDatabase(config.database)
	try {
		const applied = await migrate(database.db)
		log.info({ database: database.description, applied }, applied.length ? 'migrations applied' : 'database is up to date')
		return EXIT.ok
	} finally {
		await database.close()
	}
}

async function serve(config: Config, log: Logger): Promise<number> {
	const database = await openDatabase(config.database)
	log.info({ database: database.description }, `using ${database.description}`)
	const applied = await migrate(database.db)
	if (applied.length) log.info({ applied }, 'migrations applied')

	const keys = await loadTokenKeys(config.jwt, log)
	const app = createApp({ config, database, keys, log }).listen({
		port: config.port,
		hostname: config.host,
		// Bun's own cap is only a backstop; the app answers 413 problem+json below it.
		maxRequestBodySize: Math.max(config.bodyLimitBytes * 2, 1 << 20),
	})
	log.info({ host: config.host, port: app.server?.port }, `listening on http://${config.host}:${app.server?.port}`)

	const { promise: stopped, resolve } = Promise.withResolvers<number>()
	let stopping = false
	const shutdown = async (signal: string) => {
		if (stopping) return
		stopping = true
		log.info({ signal }, 'shutting down: finishing in-flight requests')
		const deadline = Bun.sleep(config.shutdownTimeoutSeconds * 1000).then(() => 'timeout' as const)
		const outcome = await Promise.race([app.stop(false).then(() => 'drained' as const), deadline])
		if (outcome === 'timeout') {
			log.warn({ timeoutSeconds: config.shutdownTimeoutSeconds }, 'shutdown timeout: closing remaining connections')
			await app.stop(true)
		}
		await database.close()
		log.info('stopped')
		log.flush()
		resolve(EXIT.ok)
	}
	process.on('SIGTERM', () => void shutdown('SIGTERM'))
	process.on('SIGINT', () => void shutdown('SIGINT'))
	return stopped
}

main(Bun.argv.slice(2)).then(
	(code) => process.exit(code),
	(error: unknown) => {
		console.error(`latchkey: fatal: ${error instanceof Error ? error.message : 'unknown error'}`)
		process.exit(EXIT.failure)
	},
)
