/**
 * The shipped artifact: `bun run build` → dist/latchkey, copied alone into an
 * empty folder and run with a bare environment (no Bun, no node_modules),
 * then called over TCP. Run with `bun test ./test/binary.e2e.ts` after building.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import packageJson from '../package.json'
import { bareEnv as bareEnvIn, binaryFolder, jsonPost as json, startBinary, type BinaryFolder } from './support/binary'
import { createTestDatabase, TEST_DATABASE_URL, type TestDatabase } from './support/database'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

let at: BinaryFolder
let folder: string
let binary: string

beforeAll(() => {
	at = binaryFolder()
	folder = at.folder
	binary = at.binary
})
afterAll(() => at.remove())

const bareEnv = (extra: Record<string, string>) => bareEnvIn(folder, extra)
const start = (env: Record<string, string>) => startBinary(at, env)

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
			// The first start unpacked the migrated database embedded at build time: nothing was left to migrate.
			expect(server.output()).not.toContain('migrations applied')
			expect(readdirSync(join(folder, 'data'))).toContain('PG_VERSION')
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
