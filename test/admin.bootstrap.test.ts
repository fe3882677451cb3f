import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { and, eq } from 'drizzle-orm'
import { openDatabase } from '../src/db/client'
import { users } from '../src/db/schema'
import { createLogger } from '../src/log'
import { PasswordHasher } from '../src/modules/auth/password'
import { ensureActiveAdmin, NO_ACTIVE_ADMIN } from '../src/modules/users/bootstrap'
import { startTestApp, type TestApp } from './support/app'
import { login, uniqueEmail } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const ENTRY = join(import.meta.dir, '..', 'src', 'index.ts')
const ADMIN_PASSWORD = 'bootstrap passphrase 9f3k'
let folder: string

beforeAll(() => {
	folder = mkdtempSync(join(tmpdir(), 'latchkey-admin-'))
})
afterAll(() => rmSync(folder, { recursive: true, force: true }))

const run = async (args: string[], options: { stdin?: string; env?: Record<string, string> } = {}) => {
	const child = Bun.spawn(['bun', ENTRY, ...args], {
		cwd: folder,
		env: { PATH: process.env.PATH ?? '', DATA_DIR: join(folder, 'data'), PASSWORD_HASH_MEMORY_KIB: '1024', ...options.env },
		stdin: options.stdin === undefined ? 'ignore' : Buffer.from(options.stdin),
		stdout: 'pipe',
		stderr: 'pipe',
	})
	const [code, out, err] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()])
	return { code, out: out + err }
}

describe('latchkey admin create', () => {
	test('creates an admin from a password on standard input, and never prints it', async () => {
		const created = await run(['admin', 'create', '--email', 'Root@Example.test', '--name', 'Root'], { stdin: `${ADMIN_PASSWORD}\n` })
		expect(created).toEqual({ code: 0, out: expect.stringContaining('created admin root@example.test') })
		expect(created.out).not.toContain(ADMIN_PASSWORD)

		const fromFile = join(folder, 'password.txt')
		writeFileSync(fromFile, `${ADMIN_PASSWORD}-two\n`)
		const second = await run(['admin', 'create', '--email', 'second@example.test', '--password-file', fromFile])
		expect(second.code).toBe(0)

		const database = await openDatabase({ kind: 'pglite', dataDir: join(folder, 'data') })
		try {
			const rows = await database.db.select({ email: users.email, role: users.role, name: users.name }).from(users)
			expect(rows).toEqual([
				{ email: 'root@example.test', role: 'admin', name: 'Root' },
				{ email: 'second@example.test', role: 'admin', name: '' },
			])
			const [root] = await database.db.select().from(users).where(eq(users.email, 'root@example.test'))
			expect(await Bun.password.verify(ADMIN_PASSWORD, root?.passwordHash ?? '')).toBe(true)
		} finally {
			await database.close()
		}
	})

	test('refuses a taken email and a weak password with exit code 1, and a missing --email or password file with 2', async () => {
		expect(await run(['admin', 'create', '--email', 'root@example.test'], { stdin: 'another passphrase 123' })).toEqual({
			code: 1,
			out: 'latchkey: admin not created: an account with the email root@example.test already exists\n',
		})
		expect((await run(['admin', 'create', '--email', 'weak@example.test'], { stdin: 'password1' })).code).toBe(1)
		expect((await run(['admin', 'create'], { stdin: ADMIN_PASSWORD })).code).toBe(2)
		expect(await run(['admin', 'create', '--email', 'nofile@example.test', '--password-file', 'no-such-file'])).toEqual({
			code: 2,
			out: "latchkey: cannot read no-such-file: no such file\nRun 'latchkey --help' for usage.\n",
		})
	})
})

describe('LATCHKEY_ADMIN_EMAIL and LATCHKEY_ADMIN_PASSWORD', () => {
	let t: TestApp
	beforeAll(async () => {
		t = await startTestApp()
	})
	afterAll(() => t.close())

	const bootstrap = (email: string | undefined, lines: string[] = []) =>
		ensureActiveAdmin(
			t.database.handle.db,
			new PasswordHasher(t.config.password),
			email === undefined ? undefined : { email, password: ADMIN_PASSWORD },
			t.config.password.minLength,
			createLogger('info', { write: (line: string) => void lines.push(line) }),
		)

	test('create the first admin when there is none, and nothing once one exists', async () => {
		const first = uniqueEmail('first-admin')
		await Promise.all([bootstrap(first), bootstrap(first)])
		const admin = await login(t, first, ADMIN_PASSWORD)
		expect((await t.call('GET', '/api/users?role=admin', { token: admin.accessToken })).body.data.items).toHaveLength(1)

		await bootstrap(uniqueEmail('later-admin'))
		expect((await t.call('GET', '/api/users?role=admin', { token: admin.accessToken })).body.data.items).toHaveLength(1)
	})

	test('with no active admin left (the only one deactivated), start-up creates the configured one, or says what to do', async () => {
		// The API never lets the last active admin go; an operator's SQL or an old release could have.
		await t.database.handle.db
			.update(users)
			.set({ status: 'deactivated', deactivatedAt: new Date() })
			.where(and(eq(users.role, 'admin'), eq(users.status, 'active')))
		const silent: string[] = []
		await bootstrap(undefined, silent)
		expect(silent.join('\n')).toContain(NO_ACTIVE_ADMIN)

		// The deactivated admin's own email is taken: never reactivated from the environment, and start-up goes on.
		const [former] = await t.database.handle.db.select({ email: users.email }).from(users).where(eq(users.role, 'admin')).limit(1)
		const taken: string[] = []
		await bootstrap(String(former?.email), taken)
		expect(taken.join('\n')).toContain('never promoted or reactivated')
		expect(taken.join('\n')).toContain(NO_ACTIVE_ADMIN)

		const replacement = uniqueEmail('replacement-admin')
		const created: string[] = []
		await bootstrap(replacement, created)
		expect(created.join('\n')).toContain('created the first admin from LATCHKEY_ADMIN_EMAIL')
		const admin = await login(t, replacement, ADMIN_PASSWORD)
		expect((await t.call('GET', '/api/users/me', { token: admin.accessToken })).body.data).toMatchObject({ role: 'admin', status: 'active' })
	})

	test('are applied when the service starts, without logging the password', async () => {
		const child = Bun.spawn(['bun', ENTRY], {
			cwd: folder,
			env: {
				PATH: process.env.PATH ?? '',
				DATA_DIR: join(folder, 'serve-data'),
				PORT: '0',
				HOST: '127.0.0.1',
				PASSWORD_HASH_MEMORY_KIB: '1024',
				LATCHKEY_ADMIN_EMAIL: 'ops@example.test',
				LATCHKEY_ADMIN_PASSWORD: ADMIN_PASSWORD,
			},
			stdout: 'pipe',
			stderr: 'pipe',
		})
		const reader = (child.stdout as ReadableStream<Uint8Array>).getReader()
		let output = ''
		while (!output.includes('listening on')) {
			const { value, done } = await reader.read()
			if (done) break
			output += new TextDecoder().decode(value)
		}
		child.kill('SIGTERM')
		await child.exited
		expect(output).toContain('created the first admin from LATCHKEY_ADMIN_EMAIL')
		expect(output).not.toContain(ADMIN_PASSWORD)
		const database = await openDatabase({ kind: 'pglite', dataDir: join(folder, 'serve-data') })
		try {
			const rows = await database.db.select({ email: users.email, role: users.role }).from(users)
			expect(rows).toEqual([{ email: 'ops@example.test', role: 'admin' }])
		} finally {
			await database.close()
		}
	})
})
