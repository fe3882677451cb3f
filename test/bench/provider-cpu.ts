/**
 * userinfo against /users/me by the CPU each request costs, which a machine shared with other work moves far less
 * than it moves their rates: the bench's provider section (test/bench/provider.ts) with only those two scenarios,
 * against a built binary, reporting per request the service's CPU, its PostgreSQL backends' CPU and the driver's own.
 * With every core busy, throughput is the cores ÷ the sum of the three, so their sums compare the two requests.
 *
 *   bun test/bench/provider-cpu.ts [--binary dist/latchkey | --source] [--seconds 5] [--database latchkey_bench_speed]
 *       [--users 1000000] [--server postgres://postgres@127.0.0.1:5432/postgres] [--all | --only sso,code,…]
 *
 * `--all` runs every scenario of the section before the two reads, in the bench's order (sign-ins, pages, code
 * exchanges and refreshes write the tables the reads then read), and prints every scenario's row. `--only` measures
 * the scenarios named (`sso` is both SSO rows, 16 at once and one at a time). `--source` runs src/index.ts instead of
 * a binary: no build between two changes (its figures are not the binary's, but two runs of it compare).
 */
import { benchServiceEnv } from './service-env'
import { mkdirSync, openSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import postgres from 'postgres'
import { freePort } from '../support/ports'
import { prepareDatabase, SEED_PASSWORD } from './database'
import { cpuSeconds, machineCpu } from './proc'
import { providerSection, type ProviderScenario } from './provider'
import type { LoadResult } from './workload'

const ROOT = join(import.meta.dir, '..', '..')
const { values: args } = parseArgs({
	args: Bun.argv.slice(2),
	options: {
		binary: { type: 'string', default: join(ROOT, 'dist', 'latchkey') },
		seconds: { type: 'string', default: '5' },
		users: { type: 'string', default: '1000000' },
		server: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
		database: { type: 'string', default: 'latchkey_bench_speed' },
		all: { type: 'boolean', default: false },
		only: { type: 'string' },
		source: { type: 'boolean', default: false },
	},
})
const artifacts = join(ROOT, 'test-artifacts')
mkdirSync(artifacts, { recursive: true })
const database = await prepareDatabase(args.server, args.database, Number(args.users), false)
const admin = postgres(args.server, { max: 1, onnotice: () => {} })
const backends = async () =>
	(await admin`select pid from pg_stat_activity where datname = ${args.database} and backend_type = 'client backend' and pid <> pg_backend_pid()`).map((row) => row.pid as number)
const pidCpu = (pid: number) => {
	try {
		const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
		const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
		return (Number(fields[11]) + Number(fields[12])) / 100
	} catch {
		return 0
	}
}
type Measured = LoadResult & { serviceUs: number; postgresUs: number; driverUs: number; busy: number }
let servicePid = 0
const result = await providerSection<Measured, string>({
	databaseUrl: database.url,
	seconds: Number(args.seconds),
	password: SEED_PASSWORD,
	cores: navigator.hardwareConcurrency,
	log: (message) => console.error(`[cpu ${new Date().toISOString().slice(11, 19)}] ${message}`),
	scenarios: args.all ? undefined : new Set((args.only?.split(',') ?? ['userinfo', 'users-me']) as ProviderScenario[]),
	measure: async (_target, run) => {
		const pids = await backends()
		const postgres0 = pids.map(pidCpu)
		const service0 = cpuSeconds(servicePid)
		const driver0 = process.cpuUsage()
		const machine0 = machineCpu()
		const load = await run()
		const n = Math.max(1, load.requests - load.non2xx)
		const machine1 = machineCpu()
		const driver = process.cpuUsage(driver0)
		return {
			...load,
			serviceUs: ((cpuSeconds(servicePid) - service0) * 1e6) / n,
			postgresUs: (pids.reduce((sum, pid, i) => sum + pidCpu(pid) - (postgres0[i] ?? 0), 0) * 1e6) / n,
			driverUs: (driver.user + driver.system) / n,
			busy: (machine1.busy - machine0.busy) / (machine1.total - machine0.total),
		}
	},
	row: (id, _scenario, m) =>
		`${id.padEnd(24)} ${m.okPerSecond.toFixed(0).padStart(6)}/s  CPU per request: service ${m.serviceUs.toFixed(0)} µs, PostgreSQL ${m.postgresUs.toFixed(0)} µs, driver ${m.driverUs.toFixed(0)} µs, sum ${(m.serviceUs + m.postgresUs + m.driverUs).toFixed(0)} µs; machine ${(m.busy * 100).toFixed(0)}% busy`,
	startService: async (env) => {
		const port = await freePort()
		const url = `http://127.0.0.1:${port}`
		// As the bench starts the binary (run.ts): limits off, the request log written and not kept.
		const child = Bun.spawn(args.source ? [process.execPath, join(ROOT, 'src', 'index.ts')] : [resolve(args.binary)], {
			cwd: artifacts,
			env: { ...benchServiceEnv({ home: artifacts, port, databaseUrl: database.url, logLevel: 'info' }), ...env(url) },
			stdout: 'ignore',
			stderr: openSync(join(artifacts, 'bench-service-provider-cpu.log'), 'w'),
		})
		servicePid = child.pid
		for (;;) {
			if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode}`)
			if (await fetch(`${url}/api/health/ready`).then((r) => r.ok, () => false)) break
			await Bun.sleep(50)
		}
		return { pid: child.pid, url, readyAfterMs: 0, stop: async () => { child.kill('SIGTERM'); await child.exited } }
	},
})
const printed = args.all ? [''] : args.only ? args.only.split(',').map((name) => `provider-${name}`) : ['provider-users-me', 'provider-userinfo']
for (const line of result.rows.filter((row) => printed.some((prefix) => row.startsWith(prefix)))) console.log(line)
if (!args.only) console.log(`userinfo ÷ /users/me: ${(result.figures.userinfoRatio * 100).toFixed(0)}% by rate; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} at the end`)
await admin.end()
