/**
 * Where the OpenID Provider's time goes: one scenario of the bench's provider section (test/bench/provider.ts)
 * against the service run from source under Bun's CPU profiler, on the bench's PostgreSQL database. The profile
 * (markdown, functions by self time) is written when the service stops.
 *
 *   bun test/bench/provider-profile.ts --scenario userinfo|users-me|sso|code|refresh [--seconds 10] [--users 1000000]
 *       [--server postgres://postgres@127.0.0.1:5432/postgres] [--database latchkey_bench] [--out test-artifacts/profile]
 *
 * The other scenarios still run for a blink (their results feed the next one). The figures it prints are slower
 * than the bench's: the profiler samples every millisecond and the code is not the compiled binary.
 */
import { benchServiceEnv } from './service-env'
import { mkdirSync, openSync, readdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { prepareDatabase, SEED_PASSWORD } from './database'
import { describeProvider, providerSection, type ProviderScenario } from './provider'
import type { LoadResult } from './workload'

const ROOT = join(import.meta.dir, '..', '..')
const { values: args } = parseArgs({
	args: Bun.argv.slice(2),
	options: {
		scenario: { type: 'string', default: 'userinfo' },
		seconds: { type: 'string', default: '10' },
		users: { type: 'string', default: '1000000' },
		server: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
		database: { type: 'string', default: 'latchkey_bench' },
		out: { type: 'string', default: join(ROOT, 'test-artifacts', 'profile') },
	},
})
const SCENARIOS: ProviderScenario[] = ['sso', 'code', 'refresh', 'userinfo', 'users-me']
const scenario = args.scenario as ProviderScenario
if (!SCENARIOS.includes(scenario)) throw new Error(`--scenario takes: ${SCENARIOS.join(', ')}`)
const out = resolve(args.out)
mkdirSync(out, { recursive: true })
const log = (message: string) => console.error(`[profile ${new Date().toISOString().slice(11, 19)}] ${message}`)

const database = await prepareDatabase(args.server, args.database, Number(args.users), false)

async function freePort(): Promise<number> {
	const probe = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() })
	const port = probe.port as number
	await probe.stop(true)
	return port
}

const result = await providerSection<LoadResult, string>({
	databaseUrl: database.url,
	seconds: Number(args.seconds),
	password: SEED_PASSWORD,
	cores: navigator.hardwareConcurrency,
	log,
	scenarios: new Set([scenario]),
	measure: (_target, run) => run(),
	row: (id, _scenario, m) => `${id}: ${m.okPerSecond.toFixed(0)}/s p99 ${m.p99} ms`,
	startService: async (env) => {
		const port = await freePort()
		const url = `http://127.0.0.1:${port}`
		// As the bench starts the binary (run.ts), limits off; from source, under the profiler.
		const child = Bun.spawn([process.execPath, '--cpu-prof-md', `--cpu-prof-dir=${out}`, `--cpu-prof-name=provider-${scenario}.md`, join(ROOT, 'src', 'index.ts')], {
			cwd: out,
			env: { ...benchServiceEnv({ home: out, port, databaseUrl: database.url, logLevel: 'warn' }), ...env(url) },
			stdout: 'ignore',
			stderr: openSync(join(out, 'service.log'), 'w'),
		})
		const started = performance.now()
		for (;;) {
			if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode}; see ${join(out, 'service.log')}`)
			if (await fetch(`${url}/api/health/ready`).then((r) => r.ok, () => false)) break
			await Bun.sleep(50)
		}
		return {
			pid: child.pid,
			url,
			readyAfterMs: performance.now() - started,
			stop: async () => {
				child.kill('SIGTERM')
				await child.exited
			},
		}
	},
})
for (const line of [...result.rows, ...describeProvider(result.figures)]) console.log(line)
log(`profile: ${readdirSync(out).filter((name) => name.endsWith('.md')).map((name) => join(out, name)).join(', ')}`)
