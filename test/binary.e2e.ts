/**
 * The shipped artifact: `bun run build` → dist/latchkey, copied alone into an
 * empty folder and run with a bare environment (no Bun, no node_modules),
 * then called over TCP. Run with `bun test ./test/binary.e2e.ts` after building.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import packageJson from '../package.json'
import { createTestDatabase, TEST_DATABASE_URL, type TestDatabase } from './support/database'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const BUILT = join(import.meta.dir, '..', 'dist', 'latchkey')
let folder: string
let binary: string

beforeAll(() => {
	if (!existsSync(BUILT)) {
		const build = Bun.spawnSync(['bun', 'run', 'build'], { cwd: join(import.meta.dir, '..') })
		if (build.exitCode !== 0) throw new Error(`build failed: ${build.stderr.toString()}`)
	}
	folder = mkdtempSync(join(tmpdir(), 'latchkey-bin-'))
	binary = join(folder, 'latchkey')
	copyFileSync(BUILT, binary)
	Bun.spawnSync(['chmod', '+x', binary])
})
afterAll(() => rmSync(folder, { recursive: true, force: true }))

/** Only what an operator would set: no PATH to Bun, nothing inherited. */
const bareEnv = (extra: Record<string, string>) => ({ HOME: folder, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...extra })

interface Running {
	base: string
	process: ReturnType<typeof Bun.spawn>
	output: () => string
}

async function start(env: Record<string, string>): Promise<Running> {
	const child = Bun.spawn([binary], { cwd: folder, env: bareEnv(env), stdout: 'pipe', stderr: 'pipe' })
	let output = ''
	const decoder = new TextDecoder()
	const reader = (child.stdout as ReadableStream<Uint8Array>).getReader()
	const deadline = Date.now() + 60_000
	while (Date.now() < deadline) {
		const { value, done } = await reader.read()
		if (done) break
		output += decoder.decode(value)
		const match = /"port":(\d+)/.exec(output)
		if (match) {
			void (async () => {
				for (;;) {
					const next = await reader.read()
					if (next.done) break
					output += decoder.decode(next.value)
				}
			})()
			return { base: `http://127.0.0.1:${match[1]}`, process: child, output: () => output }
		}
	}
	child.kill()
	throw new Error(`the binary did not start: ${output}${await new Response(child.stderr as ReadableStream).text()}`)
}

const json = (body: unknown) => ({
	method: 'POST',
	headers: { 'content-type': 'application/json' },
	body: JSON.stringify(body),
})

describe('the compiled binary', () => {
	test('answers --version and --help without starting the server', () => {
		const version = Bun.spawnSync([binary, '--version'], { cwd: folder, env: bareEnv({}) })
		expect(version.exitCode).toBe(0)
		expect(version.stdout.toString().trim()).toBe(packageJson.version)
		const help = Bun.spawnSync([binary, '--help'], { cwd: folder, env: bareEnv({}) })
		expect(help.exitCode).toBe(0)
		expect(help.stdout.toString()).toContain('latchkey admin create')
		expect(readdirSync(folder)).toEqual(['latchkey'])
	})

	test('refuses a bad setting with exit code 1 and a line naming it', () => {
		const run = Bun.spawnSync([binary], { cwd: folder, env: bareEnv({ PORT: 'eighty' }) })
		expect(run.exitCode).toBe(1)
		expect(run.stderr.toString()).toContain('PORT: expected a whole number from 0 to 65535')
	})

	test('runs on its embedded database from a folder holding only itself, and stops cleanly on SIGTERM', async () => {
		const server = await start({})
		try {
			const health = await fetch(`${server.base}/api/health/ready`)
			expect(health.status).toBe(200)
			expect(await health.json()).toEqual({ data: { status: 'ok' }, message: 'Database answers', errors: [] })

			const email = `bin-${Date.now()}@example.test`
			const created = await fetch(`${server.base}/api/users`, json({ email, password: 'a long enough passphrase' }))
			expect(created.status).toBe(201)
			const login = await fetch(`${server.base}/api/auth/login`, json({ email, password: 'a long enough passphrase' }))
			expect(login.status).toBe(200)
			const { accessToken } = ((await login.json()) as { data: { accessToken: string } }).data
			const me = await fetch(`${server.base}/api/users/me`, { headers: { authorization: `Bearer ${accessToken}` } })
			expect(((await me.json()) as { data: { email: string } }).data.email).toBe(email)
			expect(server.output()).toContain('embedded PostgreSQL (PGlite) in ./data')
		} finally {
			server.process.kill('SIGTERM')
		}
		expect(await server.process.exited).toBe(0)
		expect(server.output()).toContain('"msg":"stopped"')
		expect(readdirSync(folder).sort()).toEqual(['data', 'latchkey'])
	})

	if (TEST_DATABASE_URL) {
		let database: TestDatabase
		beforeAll(async () => {
			database = await createTestDatabase()
		})
		afterAll(() => database.drop())

		test('runs against real PostgreSQL when DATABASE_URL is set', async () => {
			const server = await start({ DATABASE_URL: database.url ?? '' })
			try {
				const ready = await fetch(`${server.base}/api/health/ready`)
				expect(ready.status).toBe(200)
				expect(server.output()).toContain('PostgreSQL at 127.0.0.1:5432')
			} finally {
				server.process.kill('SIGTERM')
			}
			expect(await server.process.exited).toBe(0)
		})
	}
})
