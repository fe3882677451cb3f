import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { statSync } from 'node:fs'
import { join } from 'node:path'
import { eq, inArray, sql } from 'drizzle-orm'
import { factors, identities, importCheckpoints, users } from '../src/db/schema'
import { TEST_DATABASE_URL } from './support/database'
import { PASSWORD, uniqueEmail } from './support/fixtures'
import { awayFromStepBoundary, completeWithTotp, passwordStep, totpCode } from './support/factors'
import { bcryptHash, cliDatabase, messagesOf, type CliDatabase } from './support/imports'
import type { TestApp } from './support/app'

// Most commands run in this process (cli.run: the same parsing and command function as index.ts); those that only a
// process can show (exit codes, stdout as a shell sees it, index.ts's own checks, a kill) run as one (cli.runProcess),
// each opening the database and migrating (a few seconds on the embedded one).
setDefaultTimeout(90_000)

const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP'
let cli: CliDatabase

beforeAll(async () => {
	cli = await cliDatabase()
})
afterAll(() => cli.drop())

const rowsOf = (t: TestApp, emails: string[]) => t.database.handle.db.select().from(users).where(inArray(users.email, emails))
const login = (t: TestApp, email: string, password = PASSWORD) => t.call('POST', '/api/auth/login', { json: { email, password } })

describe('latchkey import --from latchkey', () => {
	test('creates, skips and fails lines as the file says: one stderr line per failure, a summary, exit 1; a failed line writes nothing of itself', async () => {
		const [ada, bob, carol, dave] = [uniqueEmail('ada'), uniqueEmail('bob'), uniqueEmail('carol'), uniqueEmail('dave')]
		const subject = `g-${Bun.randomUUIDv7()}`
		const file = cli.file('first.ndjson', [
			{ email: ada.toUpperCase(), name: 'Ada', passwordHash: bcryptHash(PASSWORD), identities: [{ provider: 'google', subject }], metadata: { plan: 'pro' } },
			'',
			{ email: bob, emailVerified: true, role: 'admin', status: 'deactivated', createdAt: '2020-01-02T03:04:05.678Z' },
			'not json',
			{ email: 'not an address' },
			{ email: ada },
			// Its identity is Ada's: the line fails and no account of Carol's is left without it.
			{ email: carol, identities: [{ provider: 'google', subject }] },
			{ email: dave, passwordHash: 'plaintext-password' },
			{ email: uniqueEmail('big'), metadata: { blob: 'x'.repeat(9000) } },
		])
		const first = await cli.run(['import', file, '--from', 'latchkey'])
		expect(first.err).toBe(
			[
				'line 4: the line is not JSON',
				'line 5: email must be an email address of at most 254 characters, at most 64 of them before the @',
				'line 7: an identity of this line (provider and subject) is already linked to another account',
				'line 8: passwordHash is not a hash in a scheme Latchkey verifies (read as unknown: malformed)',
				'line 9: metadata must be at most 8192 bytes as JSON (UTF-8); this is 9011',
				'',
			].join('\n'),
		)
		expect(first.out).toMatch(/^created 2, updated 0, skipped 1, failed 5 in \d+\.\d s\n$/)
		expect(first.code).toBe(1)

		await cli.withApp(async (t) => {
			const rows = await rowsOf(t, [ada, bob, carol, dave])
			expect(rows.map((row) => row.email).sort()).toEqual([ada, bob].sort() as string[])
			const adaRow = rows.find((row) => row.email === ada)
			const bobRow = rows.find((row) => row.email === bob)
			expect(adaRow).toMatchObject({ name: 'Ada', role: 'user', status: 'active', metadata: { plan: 'pro' }, emailVerifiedAt: null })
			expect(bobRow).toMatchObject({ role: 'admin', status: 'deactivated', passwordHash: null, createdAt: new Date('2020-01-02T03:04:05.678Z') })
			expect(bobRow?.emailVerifiedAt).toBeInstanceOf(Date)
			expect(bobRow?.deactivatedAt).toBeInstanceOf(Date)
			const links = await t.database.handle.db.select().from(identities).where(eq(identities.subject, subject))
			expect(links.map((link) => link.userId)).toEqual([adaRow?.id ?? 'no account'])
			// The old bcrypt password signs in, and is stored again as argon2id.
			expect((await login(t, ada)).status).toBe(200)
			const [after] = await rowsOf(t, [ada])
			expect(after?.passwordHash).toStartWith('$argon2id$')
		})

		// The same file again, as an operator runs it: every account is there now; the summary on stdout, the same
		// failed lines on stderr, and exit code 1 from the process.
		const again = await cli.runProcess(['import', file, '--from', 'latchkey'])
		expect(again.out).toMatch(/^created 0, updated 0, skipped 3, failed 5 in \d+\.\d s\n$/)
		expect(again.err).toBe(first.err)
		expect(again.code).toBe(1)
	})

	test('--dry-run checks every line and looks every account up, and writes nothing at all', async () => {
		const [fresh, taken] = [uniqueEmail('dry'), uniqueEmail('dry-taken')]
		await cli.run(['import', cli.file('dry-seed.ndjson', [{ email: taken }]), '--from', 'latchkey'])
		const file = cli.file('dry.ndjson', [{ email: fresh, totpSecrets: [{ name: 'Phone', secret: SECRET }] }, { email: taken, name: 'Changed' }, { email: 'nope' }])
		const dry = await cli.run(['import', file, '--from', 'latchkey', '--dry-run', '--on-conflict', 'update'])
		expect(dry).toEqual({
			code: 1,
			out: expect.stringMatching(/^dry run, nothing written: created 1, updated 1, skipped 0, failed 1 in /),
			err: 'line 3: email must be an email address of at most 254 characters, at most 64 of them before the @\n',
		})
		await cli.withApp(async (t) => {
			const rows = await rowsOf(t, [fresh, taken])
			expect(rows.map((row) => [row.email, row.name])).toEqual([[taken, '']])
			const [checkpoints] = await t.database.handle.db.select({ count: sql<number>`count(*)::int` }).from(importCheckpoints)
			expect(checkpoints?.count).toBe(0)
		})
	})

	test('the same email twice in one file creates the account once: the later line meets it (skipped, or applied with --on-conflict update)', async () => {
		const email = uniqueEmail('twice')
		const file = cli.file('twice.ndjson', [{ email, name: 'First' }, { email: email.toUpperCase(), name: 'Second' }])
		expect((await cli.run(['import', file, '--from', 'latchkey'])).out).toStartWith('created 1, updated 0, skipped 1, failed 0')
		const updateFile = cli.file('twice-update.ndjson', [{ email, name: 'Third' }, { email, name: 'Fourth' }])
		expect((await cli.run(['import', updateFile, '--from', 'latchkey', '--on-conflict', 'update'])).out).toStartWith('created 0, updated 2, skipped 0, failed 0')
		await cli.withApp(async (t) => expect((await rowsOf(t, [email])).map((row) => row.name)).toEqual(['Fourth']))
	})

	test('--on-conflict update replaces what the line carries (identities and TOTP secrets included) and a new hash ends the sessions; id and email of two accounts fail', async () => {
		const [email, other] = [uniqueEmail('upd'), uniqueEmail('upd-other')]
		const seed = cli.file('upd-seed.ndjson', [
			{ email, name: 'Before', passwordHash: bcryptHash(PASSWORD), metadata: { keep: true }, identities: [{ provider: 'github', subject: `gh-${email}` }] },
			{ email: other },
		])
		expect((await cli.run(['import', seed, '--from', 'latchkey'])).code).toBe(0)
		const session = await cli.withApp(async (t) => {
			const res = await login(t, email)
			expect(res.status).toBe(200)
			return res.body.data.refreshToken as string
		})
		const otherId = await cli.withApp(async (t) => (await rowsOf(t, [other]))[0]?.id)
		const newPassword = 'a brand new passphrase 77'
		const update = cli.file('upd.ndjson', [
			{ email, name: 'After', passwordHash: bcryptHash(newPassword), identities: [{ provider: 'google', subject: `g-${email}` }], totpSecrets: [{ name: 'Phone', secret: SECRET }] },
			{ id: otherId, email },
		])
		const result = await cli.run(['import', update, '--from', 'latchkey', '--on-conflict', 'update'])
		expect(result).toEqual({ code: 1, out: expect.stringMatching(/^created 0, updated 1, skipped 0, failed 1 /), err: 'line 2: id and email belong to two different accounts\n' })
		await cli.withApp(async (t) => {
			const [row] = await rowsOf(t, [email])
			expect(row).toMatchObject({ name: 'After', metadata: { keep: true }, credentialsVersion: 1 })
			const links = await t.database.handle.db.select().from(identities).where(eq(identities.userId, row?.id ?? ''))
			expect(links.map((link) => link.provider)).toEqual(['google'])
			// The session of the old password is over.
			expect((await t.call('POST', '/api/auth/refresh', { json: { refreshToken: session } })).status).toBe(401)
			expect((await login(t, email)).status).toBe(401)
			// The new password, then the carried TOTP secret's code.
			const mfaToken = await passwordStep(t, email, newPassword)
			await awayFromStepBoundary()
			expect((await completeWithTotp(t, mfaToken, totpCode(SECRET))).status).toBe(200)
		})
	})

	test('export writes every user as NDJSON (mode 0600); imported into an empty database the same users sign in with the same password and authenticator', async () => {
		const email = uniqueEmail('trip')
		const argon2i = await Bun.password.hash(PASSWORD, { algorithm: 'argon2i', memoryCost: 1024, timeCost: 1 })
		const seed = cli.file('trip-seed.ndjson', [
			{ email, name: 'Trip', emailVerified: true, passwordHash: argon2i, metadata: { a: [1, 2] }, appMetadata: { claims: { tenant: 't1' } }, identities: [{ provider: 'google', subject: `g-${email}`, email }], totpSecrets: [{ name: 'Phone', secret: SECRET }] },
		])
		expect((await cli.run(['import', seed, '--from', 'latchkey'])).code).toBe(0)
		const exported = join(cli.folder, 'export.ndjson')
		const withHashes = await cli.run(['export', exported, '--with-hashes'])
		expect(withHashes).toEqual({ code: 0, out: '', err: expect.stringMatching(/^exported \d+ users with their password hashes and TOTP secrets in /) })
		expect(statSync(exported).mode & 0o777).toBe(0o600)
		const lines = (await Bun.file(exported).text()).trimEnd().split('\n').map((line) => JSON.parse(line))
		const line = lines.find((candidate) => candidate.email === email)
		expect(line).toEqual({
			id: expect.any(String),
			email,
			emailVerified: true,
			name: 'Trip',
			role: 'user',
			status: 'active',
			createdAt: expect.any(String),
			metadata: { a: [1, 2] },
			appMetadata: { claims: { tenant: 't1' } },
			identities: [{ id: expect.any(String), provider: 'google', subject: `g-${email}`, email, createdAt: expect.any(String) }],
			passwordHash: argon2i,
			totpSecrets: [{ name: 'Phone', secret: SECRET }],
		})
		// Without --with-hashes: no hash, no secret; to standard output (of a process: this one's is the test run's).
		const plain = await cli.runProcess(['export', '-'])
		expect(plain.code).toBe(0)
		expect(plain.out).toContain(`"email":"${email}"`)
		expect(plain.out).not.toContain('passwordHash')
		expect(plain.out).not.toContain(SECRET)

		const target = await cliDatabase()
		try {
			const result = await target.run(['import', exported, '--from', 'latchkey'])
			expect(result).toEqual({ code: 0, out: expect.stringMatching(new RegExp(`^created ${lines.length}, updated 0, skipped 0, failed 0 in `)), err: '' })
			const again = join(target.folder, 'again.ndjson')
			expect((await target.run(['export', again, '--with-hashes'])).code).toBe(0)
			const strip = (text: string) => text.trimEnd().split('\n').map((each) => ({ ...JSON.parse(each), identities: JSON.parse(each).identities.map(({ id: _, ...rest }: { id: string }) => rest) }))
			expect(strip(await Bun.file(again).text())).toEqual(strip(await Bun.file(exported).text()))
			await target.withApp(async (t) => {
				const mfaToken = await passwordStep(t, email)
				await awayFromStepBoundary()
				const signedIn = await completeWithTotp(t, mfaToken, totpCode(SECRET))
				expect(signedIn.status).toBe(200)
				expect(signedIn.body.data.user).toMatchObject({ id: line.id, email, emailVerified: true, createdAt: line.createdAt })
			})
		} finally {
			await target.drop()
		}
	})

	test('--provider SOURCE=NAME renames the providers of the file’s identities', async () => {
		const email = uniqueEmail('renamed')
		const file = cli.file('renamed.ndjson', [{ email, identities: [{ provider: 'google-oauth2', subject: `g-${email}` }, { provider: 'github', subject: `gh-${email}` }] }])
		expect((await cli.run(['import', file, '--from', 'latchkey', '--provider', 'google-oauth2=google'])).code).toBe(0)
		await cli.withApp(async (t) => {
			const [row] = await rowsOf(t, [email])
			const links = await t.database.handle.db.select().from(identities).where(eq(identities.userId, row?.id ?? ''))
			expect(links.map((link) => link.provider).sort()).toEqual(['github', 'google'])
		})
	})

	test('bad usage exits 2 with the reason, before touching the database', async () => {
		const file = cli.file('usage.ndjson', [{ email: uniqueEmail() }])
		// Two as a process: the exit code a shell sees, from the command's checks and from index.ts's own.
		const cases: Array<[string[], string, 'as a process'?]> = [
			[['import', file], "'import' needs --from", 'as a process'],
			[['import', file, '--from', 'okta'], '--from takes latchkey, supabase'],
			[['import', file, '--from', 'latchkey', '--on-conflict', 'replace'], '--on-conflict takes skip or update'],
			[['import', file, '--from', 'latchkey', '--provider', 'Google'], '--provider takes SOURCE=NAME'],
			[['import', join(cli.folder, 'missing.ndjson'), '--from', 'latchkey'], 'no such file'],
			[['import', '--from', 'latchkey'], "'import' takes one FILE", 'as a process'],
			[['import', file, '--from', 'firebase', '--rounds', '8'], 'Firebase hash parameters'],
		]
		for (const [args, message, how] of cases) {
			const result = how ? await cli.runProcess(args) : await cli.run(args)
			expect({ args, code: result.code, err: result.err }).toEqual({ args, code: 2, err: expect.stringContaining(message) })
		}
	})
})

describe('latchkey import on PostgreSQL', () => {
	test.if(TEST_DATABASE_URL !== undefined)('on PostgreSQL: killed (SIGKILL) in the middle of a run, the same command resumes after the last batch written; every user exists once', async () => {
		const prefix = `resume-${Bun.randomUUIDv7().slice(-8)}`
		const total = 40_000
		const file = cli.file('resume.ndjson', Array.from({ length: total }, (_, n) => ({ email: `${prefix}-${n}@example.test`, metadata: { n } })))
		const child = await cli.spawn(['import', file, '--from', 'latchkey'])
		const reached = await cli.withApp(async (t) => {
			for (;;) {
				const [saved] = await t.database.handle.db.select().from(importCheckpoints).where(sql`${importCheckpoints.key} like 'latchkey:%'`)
				if (saved && saved.lastLine > 0) return saved.lastLine
				if (child.exitCode !== null) throw new Error('the import ended before it could be killed')
				await Bun.sleep(10)
			}
		})
		child.kill('SIGKILL')
		expect(await child.exited).not.toBe(0)
		expect(reached).toBeLessThan(total)

		const resumed = await cli.runProcess(['import', file, '--from', 'latchkey'])
		const after = Number(/^resuming after line (\d+)$/m.exec(resumed.err)?.[1])
		expect(after).toBeGreaterThanOrEqual(reached)
		expect(after % 2000).toBe(0)
		expect({ ...resumed, err: messagesOf(resumed.err) }).toEqual({
			code: 0,
			out: expect.stringMatching(new RegExp(`^created ${total.toLocaleString('en-US')}, updated 0, skipped 0, failed 0 in `)),
			err: [`resuming after line ${after}`],
		})
		await cli.withApp(async (t) => {
			const [row] = await t.database.handle.db
				.select({ count: sql<number>`count(*)::int`, distinct: sql<number>`count(distinct (metadata->>'n'))::int` })
				.from(users)
				.where(sql`${users.email} like ${`${prefix}-%`}`)
			expect(row).toEqual({ count: total, distinct: total })
			const [left] = await t.database.handle.db.select({ count: sql<number>`count(*)::int` }).from(importCheckpoints)
			expect(left?.count).toBe(0)
		})
	})

	test.if(TEST_DATABASE_URL !== undefined)('on PostgreSQL: two imports of overlapping files at once create each user once', async () => {
		const prefix = `overlap-${Bun.randomUUIDv7().slice(-8)}`
		const line = (n: number) => ({ email: `${prefix}-${n}@example.test`, identities: [{ provider: 'google', subject: `${prefix}-${n}` }] })
		const first = cli.file('overlap-a.ndjson', Array.from({ length: 6000 }, (_, n) => line(n)))
		// The second file holds half of the first's users, in reverse order, and others.
		const second = cli.file('overlap-b.ndjson', Array.from({ length: 6000 }, (_, n) => line(8999 - n)))
		const [a, b] = await Promise.all([cli.runProcess(['import', first, '--from', 'latchkey']), cli.runProcess(['import', second, '--from', 'latchkey'])])
		expect([a.code, b.code, messagesOf(a.err), messagesOf(b.err)]).toEqual([0, 0, [], []])
		const created = (result: { out: string }) => Number(/^created (\d+)/.exec(result.out.replaceAll(',', ''))?.[1])
		const skipped = (result: { out: string }) => Number(/skipped (\d+)/.exec(result.out.replaceAll(',', ''))?.[1])
		expect(created(a) + created(b)).toBe(9000)
		expect(skipped(a) + skipped(b)).toBe(3000)
		await cli.withApp(async (t) => {
			const [row] = await t.database.handle.db
				.select({ count: sql<number>`count(*)::int`, links: sql<number>`(select count(*)::int from identities i where i.user_id = any(array_agg(users.id)))` })
				.from(users)
				.where(sql`${users.email} like ${`${prefix}-%`}`)
			expect(row).toEqual({ count: 9000, links: 9000 })
		})
	})
})

describe('imported factors', () => {
	test('an imported TOTP factor is active with no pending state, sealed for its own row', async () => {
		const email = uniqueEmail('sealed')
		expect((await cli.run(['import', cli.file('sealed.ndjson', [{ email, totpSecrets: [{ name: 'Phone', secret: SECRET }] }]), '--from', 'latchkey'])).code).toBe(0)
		await cli.withApp(async (t) => {
			const [row] = await rowsOf(t, [email])
			const [factor] = await t.database.handle.db.select().from(factors).where(eq(factors.userId, row?.id ?? ''))
			expect(factor).toMatchObject({ type: 'totp', status: 'active', name: 'Phone' })
			expect(factor?.totpSecret).toStartWith('v1.')
			expect(factor?.totpSecret).not.toContain(SECRET)
		})
	})
})
