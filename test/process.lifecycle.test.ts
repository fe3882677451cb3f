import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createTestDatabase, TEST_DATABASE_URL, type TestDatabase } from './support/database'
import { PASSWORD, uniqueEmail } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const ENTRY = join(import.meta.dir, '..', 'src', 'index.ts')
let folder: string
beforeAll(() => {
	folder = mkdtempSync(join(tmpdir(), 'latchkey-life-'))
})
afterAll(() => rmSync(folder, { recursive: true, force: true }))

async function start(env: Record<string, string>) {
	const child = Bun.spawn(['bun', ENTRY], {
		cwd: folder,
		env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
		stdout: 'pipe',
		stderr: 'pipe',
	})
	const reader = (child.stdout as ReadableStream<Uint8Array>).getReader()
	let output = ''
	let port: string | undefined
	while (!port) {
		const { value, done } = await reader.read()
		if (done) throw new Error(`did not start: ${output}${await new Response(child.stderr as ReadableStream).text()}`)
		output += new TextDecoder().decode(value)
		port = /"port":(\d+)/.exec(output)?.[1]
	}
	const rest = (async () => {
		for (;;) {
			const { value, done } = await reader.read()
			if (done) return output
			output += new TextDecoder().decode(value)
		}
	})()
	return { child, base: `http://127.0.0.1:${port}`, output: () => rest }
}

/** The unread bytes of each established connection to local `port` (Linux's /proc/net/tcp, IPv4). */
function serverConnections(port: number): number[] {
	const local = `:${port.toString(16).toUpperCase().padStart(4, '0')}`
	return readFileSync('/proc/net/tcp', 'utf8')
		.split('\n')
		.slice(1)
		.map((line) => line.trim().split(/\s+/))
		.filter(([, localAddress, , state]) => localAddress?.endsWith(local) && state === '01')
		.map(([, , , , queues]) => Number.parseInt(queues?.split(':')[1] ?? '0', 16))
}

const post = (url: string, body: unknown) =>
	fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })

describe('graceful shutdown', () => {
	test('SIGTERM lets in-flight requests finish, then closes the database and exits 0', async () => {
		// Real argon2 cost, so that each login is still running when the signal arrives.
		// Eight logins of one account at once: more checks in flight than the lockout lets run together.
		// A shutdown timeout far above what eight logins take, even on a loaded machine (3 CPU hogs on 2 cores: over 10 s).
		const server = await start({ DATA_DIR: join(folder, 'data'), PORT: '0', AUTH_RATE_LIMIT_MAX: '0', LOCKOUT_THRESHOLD: '0', SHUTDOWN_TIMEOUT_SECONDS: '60' })
		const email = uniqueEmail('drain')
		expect((await post(`${server.base}/api/users`, { email, password: PASSWORD })).status).toBe(201)
		const inFlight = Array.from({ length: 8 }, () => post(`${server.base}/api/auth/login`, { email, password: PASSWORD }))
		// In flight means read by the server, not only sent: bytes still waiting in a socket when the server stops are
		// reset, which no server could help (a load balancer stops sending first). A loaded machine takes longer to
		// read them than any fixed wait, so the test waits until the kernel holds no unread byte for the server.
		const port = Number(new URL(server.base).port)
		for (const deadline = Date.now() + 10_000; Date.now() < deadline; await Bun.sleep(5)) {
			const connections = serverConnections(port)
			if (connections.length >= 8 && connections.every((unread) => unread === 0)) break
		}
		await Bun.sleep(30)
		server.child.kill('SIGTERM')
		const statuses = await Promise.all(inFlight.map((request) => request.then((res) => res.status)))
		expect(statuses).toEqual(Array(8).fill(200))
		expect(await server.child.exited).toBe(0)
		const output = await server.output()
		expect(output).toContain('"msg":"shutting down: finishing in-flight requests"')
		expect(output).toContain('"msg":"stopped"')
		// No new connections after the signal.
		await expect(fetch(`${server.base}/api/health`)).rejects.toThrow()
	}, 90_000) // the eight real-cost logins take over 20 s on a loaded machine
})

describe('WORKERS', () => {
	test('more than one worker on the embedded database is refused with a clear message', () => {
		const run = Bun.spawnSync(['bun', ENTRY], { cwd: folder, env: { PATH: process.env.PATH ?? '', WORKERS: '2' } })
		expect(run.exitCode).toBe(1)
		expect(run.stderr.toString()).toContain('WORKERS: the embedded database belongs to one process; set DATABASE_URL')
	})

	if (TEST_DATABASE_URL) {
		let database: TestDatabase
		beforeAll(async () => {
			database = await createTestDatabase()
		})
		afterAll(() => database.drop())

		test('several workers share the port and one signing secret, and all stop on SIGTERM', async () => {
			const port = String(20_000 + Math.floor(Math.random() * 20_000))
			const server = await start({ DATABASE_URL: database.url ?? '', WORKERS: '2', PORT: port, PASSWORD_HASH_MEMORY_KIB: '1024' })
			await Bun.sleep(500) // the second worker
			const email = uniqueEmail('workers')
			expect((await post(`${server.base}/api/users`, { email, password: PASSWORD })).status).toBe(201)
			const login = (await (await post(`${server.base}/api/auth/login`, { email, password: PASSWORD })).json()) as {
				data: { accessToken: string }
			}
			const statuses = await Promise.all(
				Array.from({ length: 30 }, () =>
					fetch(`${server.base}/api/users/me`, { headers: { authorization: `Bearer ${login.data.accessToken}`, connection: 'close' } }).then(
						(res) => res.status,
					),
				),
			)
			expect(statuses).toEqual(Array(30).fill(200))
			server.child.kill('SIGTERM')
			expect(await server.child.exited).toBe(0)
			expect((await server.output()).match(/"msg":"stopped"/g)).toHaveLength(2)
		})
	}
})
