#!/usr/bin/env bun
// @simplewebauthn/server's certificate checks need this polyfill before tsyringe loads. It imports it itself, but in
// the compiled binary a module graph loaded by import() (the service's, below) may run tsyringe first: so, here.
import 'reflect-metadata'
import packageJson from '../package.json'
import { importArguments, parseCommandLine } from './command-line'
import { ConfigError, EnvSchema, loadConfig, type Config } from './config/env'
import { keepDevelopmentSecrets, SecretFileError } from './config/secret-file'
import { compilePgliteWasm, openDatabase } from './db/client'
import { migrate } from './db/migrate'
import { createLogger, type Logger } from './log'
import { DataKeys } from './crypto/data-keys'
import { loadOAuthSigningKey, OAuthKeyError, type OAuthSigningKey } from './crypto/oauth-signing-key'
import { KeyConfigError, loadTokenKeys, type TokenKeys } from './modules/auth/keys'
import { PasswordHasher } from './modules/auth/password'
import type { Terminal } from './modules/imports/command'
import { isCompiledBinary } from './runtime'
import { MailTemplates, TemplateError } from './mail/templates'
import type { PageRenderer } from './pages'

const HELP = `latchkey ${packageJson.version} — accounts and authentication over a JSON API

Usage:
  latchkey [serve]      start the HTTP service (applies pending migrations first)
  latchkey migrate      apply pending database migrations, then exit
  latchkey admin create --email EMAIL [--name NAME] [--password-file FILE]
                        create an admin account; the password is read from
                        FILE, or else from standard input (never an argument)
  latchkey import FILE --from latchkey|supabase|auth0|keycloak|firebase|better-auth
                [--dry-run] [--on-conflict skip|update] [--provider SOURCE=NAME]...
                [--emit-events] [--hash-key B64 --salt-separator B64 --rounds N --mem-cost N]
                        import users (their password hashes, identities, TOTP
                        secrets) from another service's export or Latchkey's
                        own; resumes after a crash when run again on the same
                        file; one line per failed line on stderr, then a summary
  latchkey export FILE [--with-hashes]
                        write every user as Latchkey's NDJSON to FILE (mode
                        0600; '-' for standard output); --with-hashes adds the
                        password hashes and TOTP secrets
  latchkey --help       show this help
  latchkey --version    print the version

Configuration comes from the environment (and a .env file in the working
directory). Settings: ${Object.keys(EnvSchema.properties).join(', ')}.

Exit codes: 0 success · 1 bad configuration or a runtime failure
(including 'admin create' refused: email taken, weak password; 'import'
with any line failed, the others written) · 2 bad usage.`

/** Exit codes, as documented in --help and docs/operations.md. */
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
	const transfer = positionals[0] === 'import' || positionals[0] === 'export' ? positionals[0] : undefined
	if (transfer && positionals.length !== 2) {
		console.error(`latchkey: '${transfer}' takes one FILE\nRun 'latchkey --help' for usage.`)
		return EXIT.usage
	}
	const command = transfer ?? (positionals.join(' ') || 'serve')
	if (command !== 'serve' && command !== 'migrate' && command !== 'admin create' && !transfer) {
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
	if (config.database.kind === 'pglite') void compilePgliteWasm()
	if (command === 'migrate') return runMigrations(config, log)
	if (transfer) {
		// Standard output may carry the export: the log goes to standard error, warnings only.
		const quiet = createLogger('warn', { write: (line: string) => void process.stderr.write(line) })
		try {
			config = keepDevelopmentSecrets(config, quiet)
		} catch (error) {
			if (!(error instanceof SecretFileError)) throw error
			console.error(`latchkey: configuration: ${error.message}`)
			return EXIT.failure
		}
		const terminal: Terminal = {
			out: (line) => (transfer === 'export' ? console.error(line) : console.log(line)),
			err: (line) => console.error(line),
			redraw: process.stderr.isTTY ? (line) => void process.stderr.write(`\r\x1b[2K${line}`) : undefined,
		}
		const file = positionals[1] ?? ''
		const { exportCommand, importCommand } = await import('./modules/imports/command')
		if (transfer === 'export') return exportCommand(config, quiet, { file, withHashes: values['with-hashes'] ?? false }, terminal)
		return importCommand(config, quiet, importArguments(values, file), terminal)
	}
	if (command === 'admin create') {
		if (!values.email) {
			console.error("latchkey: 'admin create' needs --email\nRun 'latchkey --help' for usage.")
			return EXIT.usage
		}
		const passwordFile = values['password-file'] ? Bun.file(values['password-file']) : undefined
		// As for import: a file that is not there is bad usage (2), said plainly.
		if (passwordFile && !(await passwordFile.exists())) {
			console.error(`latchkey: cannot read ${values['password-file']}: no such file\nRun 'latchkey --help' for usage.`)
			return EXIT.usage
		}
		const password = passwordFile ? await passwordFile.text() : await Bun.stdin.text()
		return createAdminCommand(config, log, { email: values.email, name: values.name, password: password.replace(/\r?\n$/, '') })
	}
	return serve(config, log)
}

async function createAdminCommand(config: Config, log: Logger, input: { email: string; name?: string; password: string }) {
	const { BootstrapError, createAdmin } = await import('./modules/users/bootstrap')
	const database = await openDatabase(config.database)
	try {
		await migrate(database.db)
		const admin = await createAdmin(database.db, new PasswordHasher(config.password), input, config.password.minLength)
		console.log(`created admin ${admin.email} (${admin.id})`)
		return EXIT.ok
	} catch (error) {
		if (!(error instanceof BootstrapError)) throw error
		console.error(`latchkey: admin not created: ${error.message}`)
		return EXIT.failure
	} finally {
		await database.close()
	}
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
	let keys: TokenKeys
	try {
		config = keepDevelopmentSecrets(config, log)
	} catch (error) {
		if (!(error instanceof SecretFileError)) throw error
		console.error(`latchkey: configuration: ${error.message}`)
		return EXIT.failure
	}
	try {
		keys = await loadTokenKeys(config.jwt, log)
	} catch (error) {
		if (!(error instanceof KeyConfigError)) throw error
		console.error(`latchkey: configuration: ${error.message}`)
		return EXIT.failure
	}
	let oauthKey: OAuthSigningKey
	try {
		oauthKey = await loadOAuthSigningKey(config.oauth.signingKey, log)
	} catch (error) {
		if (!(error instanceof OAuthKeyError)) throw error
		console.error(`latchkey: configuration: ${error.message}`)
		return EXIT.failure
	}
	let templates: MailTemplates
	try {
		templates = new MailTemplates(config.mail.templatesDir)
	} catch (error) {
		if (!(error instanceof TemplateError)) throw error
		console.error(`latchkey: configuration: ${error.message}`)
		return EXIT.failure
	}
	// Loaded here, not at the top: the other commands (import, export, admin create, migrate, --version), and a start
	// refused for its settings above, end without loading the service's modules, in a fraction of the time.
	const [{ createApp, pageSettings }, { PageRenderer, PageSetupError }, { BootstrapError, ensureActiveAdmin }, { ensureConsoleClient }, { USER_IMPORTS_BODY_LIMIT_BYTES }] =
		await Promise.all([import('./app'), import('./pages'), import('./modules/users/bootstrap'), import('./modules/oauth/clients'), import('./modules/imports/model')])
	let pageRenderer: PageRenderer
	try {
		pageRenderer = new PageRenderer(pageSettings(config))
	} catch (error) {
		if (!(error instanceof PageSetupError)) throw error
		console.error(`latchkey: configuration: ${error.message}`)
		return EXIT.failure
	}
	const dataKeys = DataKeys.from(config.dataKeys, log)
	if (config.production && config.mail.smtpUrl === undefined)
		log.warn('no SMTP_URL: verification, recovery and email change answer 503 mail-unavailable until one is set')
	const database = await openDatabase(config.database)
	log.info({ database: database.description }, `using ${database.description}`)
	const applied = await migrate(database.db)
	if (applied.length) log.info({ applied }, 'migrations applied')
	try {
		await ensureActiveAdmin(database.db, new PasswordHasher(config.password), config.bootstrapAdmin, config.password.minLength, log)
		// The console's own OAuth client, as PUBLIC_URL says it must be (an upsert: instances starting at once agree).
		await ensureConsoleClient(database.db, config.publicUrl)
	} catch (error) {
		if (!(error instanceof BootstrapError)) throw error
		console.error(`latchkey: configuration: LATCHKEY_ADMIN_EMAIL: ${error.message}`)
		await database.close()
		return EXIT.failure
	}

	if (config.workers > 1 && !process.env[WORKER_MARK]) {
		// The primary only migrated and bootstrapped; the workers serve.
		await database.close()
		return superviseWorkers(config.workers, { keys, dataKeys, oauthKey }, log)
	}

	const app = createApp({ config, database, keys, oauthKey, dataKeys, log, templates, pageRenderer }).listen({
		port: config.port,
		hostname: config.host,
		// Workers share the port; the kernel spreads connections among them.
		reusePort: config.workers > 1,
		// Bun's own cap is only a backstop; the app answers 413 problem+json below it.
		maxRequestBodySize: Math.max(config.bodyLimitBytes * 2, 1 << 20, USER_IMPORTS_BODY_LIMIT_BYTES * 2),
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
		// Mails and webhooks being sent finish (each is bounded); the rest wait in the outbox for the next start.
		// An upkeep round in progress ends after its current step.
		await Promise.all([app.decorator.backgroundJobs.stop(), app.decorator.schedule.stop()])
		await database.close()
		log.info('stopped')
		log.flush()
		resolve(EXIT.ok)
	}
	process.on('SIGTERM', () => void shutdown('SIGTERM'))
	process.on('SIGINT', () => void shutdown('SIGINT'))
	return stopped
}

const WORKER_MARK = 'LATCHKEY_WORKER'

/**
 * WORKERS > 1 (PostgreSQL only): start that many copies of this process,
 * each listening on the same port with SO_REUSEPORT, forward SIGTERM/SIGINT
 * to them, and exit once all have stopped (with 1 if any failed).
 */
async function superviseWorkers(
	count: number,
	{ keys, dataKeys, oauthKey }: { keys: TokenKeys; dataKeys: DataKeys; oauthKey: OAuthSigningKey },
	log: Logger,
): Promise<number> {
	// In a compiled binary the entry is embedded: run the binary itself; otherwise `bun <script>`.
	const command = isCompiledBinary ? [process.execPath] : [process.execPath, Bun.main]
	const args = Bun.argv.slice(2)
	const workers = Array.from({ length: count }, (_, index) =>
		Bun.spawn([...command, ...args], {
			env: {
				...process.env,
				[WORKER_MARK]: String(index + 1),
				// A secret the primary made up for itself (DATA_DIR=memory://) must be the same in every worker;
				// one kept in DATA_DIR each worker reads from there.
				...(keys.developmentSecret ? { JWT_SECRET: keys.developmentSecret } : {}),
				...(dataKeys.developmentKey ? { DATA_ENCRYPTION_KEY: dataKeys.developmentKey } : {}),
				...(oauthKey.developmentPem ? { OAUTH_SIGNING_KEY: oauthKey.developmentPem } : {}),
			},
			stdio: ['ignore', 'inherit', 'inherit'],
		}),
	)
	log.info({ workers: count }, `started ${count} workers`)
	const forward = (signal: NodeJS.Signals) => () => {
		for (const worker of workers) worker.kill(signal)
	}
	process.on('SIGTERM', forward('SIGTERM'))
	process.on('SIGINT', forward('SIGINT'))
	const codes = await Promise.all(workers.map((worker) => worker.exited))
	return codes.every((code) => code === 0) ? EXIT.ok : EXIT.failure
}

main(Bun.argv.slice(2)).then(
	(code) => process.exit(code),
	(error: unknown) => {
		console.error(`latchkey: fatal: ${error instanceof Error ? error.message : 'unknown error'}`)
		process.exit(EXIT.failure)
	},
)
