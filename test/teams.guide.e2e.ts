/**
 * The teams guide (docs/guides/teams.md), run as a new user would, against the compiled binary: its key is made
 * with the guide's `openssl` line, the binary started with the settings of its ```sh start block, and every
 * ```sh run:<step> block run by bash, in order, each seeing the variables the ones before it set (ADA_TOKEN,
 * ORG_ID, BOB…). The two values the guide has you copy from a mail (CODE, INVITATION_TOKEN) come from a real
 * SMTP server on loopback (smtp-server). The invoices app (```ts run:invoices-app) is written to a file and run
 * with `bun`, as the guide says; the typed-client block is type-checked (strict) against the package
 * `bun run build:client` makes, and run. What the guide says each command answers is checked against what it
 * answered. Run with `bun run build && bun test ./test/teams.guide.e2e.ts` (TEST_DATABASE_URL: on PostgreSQL).
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { buildClientPackage } from '../src/client/package'
import { binaryFolder, jsonPost, startBinary, type BinaryFolder, type RunningBinary } from './support/binary'
import { createEmptyTestDatabase, TEST_DATABASE_URL } from './support/database'
import { SmtpSink } from './support/mail'
import { freePort } from './support/ports'

setDefaultTimeout(120_000)

const ROOT = join(import.meta.dir, '..')
const GUIDE = readFileSync(join(ROOT, 'docs/guides/teams.md'), 'utf8')
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** The guide's block fenced ```<info>, as written. */
function block(info: string): string {
	const match = new RegExp('```' + info.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '\\n([\\s\\S]*?)\\n```').exec(GUIDE)
	if (!match?.[1]) throw new Error(`docs/guides/teams.md has no block ${info}`)
	return match[1]
}

/** The environment the ```sh start block gives the binary: its NAME=value words, quotes removed. */
function startSettings(): Record<string, string> {
	const command = block('sh start').replace(/\\\n/g, ' ')
	expect(command.trim().endsWith('./dist/latchkey')).toBe(true)
	return Object.fromEntries([...command.matchAll(/\b([A-Z_]+)=('[^']*'|\S+)/g)].map(([, name, value]) => [name as string, (value as string).replace(/^'|'$/g, '')]))
}

let folder: BinaryFolder
let latchkey: RunningBinary
let dropDatabase: (() => Promise<void>) | undefined
let sink: SmtpSink
let invoices: ReturnType<typeof Bun.spawn> | undefined
let invoicesBase: string
const artifacts = join(ROOT, 'test-artifacts', 'guide', `teams-${crypto.randomUUID()}`)

/** Runs the guide's ```sh run:<name> block with bash; the variables it sets are kept for the next. Answers its stdout. */
function step(name: string, extra: Record<string, string> = {}): string {
	const state = join(folder.folder, 'state.sh')
	const script = `set -a\n[ -f ${state} ] && . ${state}\nset -euo pipefail\n${block(`sh run:${name}`)}\nexport -p > ${state}\n`
	const result = Bun.spawnSync(['bash', '-c', script], {
		cwd: folder.folder,
		env: { PATH: process.env.PATH ?? '', HOME: folder.folder, ...(latchkey ? { LATCHKEY: latchkey.base, INVOICES: invoicesBase } : {}), ...extra },
		stdout: 'pipe',
		stderr: 'pipe',
	})
	const stdout = result.stdout.toString()
	if (result.exitCode !== 0) throw new Error(`run:${name} exited ${result.exitCode}:\n${stdout}${result.stderr}`)
	return stdout
}

/** A variable the steps so far have set. */
function variable(name: string): string {
	const state = readFileSync(join(folder.folder, 'state.sh'), 'utf8')
	const result = Bun.spawnSync(['bash', '-c', `. ./state.sh; printf %s "$${name}"`], { cwd: folder.folder, env: {}, stdout: 'pipe' })
	if (!state.includes(`declare -x ${name}=`)) throw new Error(`no ${name} set yet`)
	return result.stdout.toString()
}

const claims = (token: string) => JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()) as { org?: Record<string, unknown> }
const invitationToken = (text: string) => {
	const token = /#token=([A-Za-z0-9_-]+)/.exec(text)?.[1]
	if (!token) throw new Error(`no invitation link in:\n${text}`)
	return token
}
const verificationCode = (text: string) => {
	const code = /\b(\d{6})\b/.exec(text)?.[1]
	if (!code) throw new Error(`no code in:\n${text}`)
	return code
}

beforeAll(async () => {
	sink = await SmtpSink.start()
	folder = binaryFolder('teams')
	// The guide builds dist/latchkey and runs it from the clone; the test runs the same file, copied alone.
	step('key')
	const database = TEST_DATABASE_URL ? await createEmptyTestDatabase(TEST_DATABASE_URL) : undefined
	dropDatabase = database?.drop
	const settings = startSettings()
	expect(settings).toMatchObject({ ORGANIZATION_CREATION: 'all', JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY_FILE: 'signing-key.pem' })
	latchkey = await startBinary(folder, {
		...settings,
		// Replaced: the mail server is the test's, the database and port this run's own.
		SMTP_URL: sink.url,
		DATA_DIR: join(folder.folder, 'data'),
		...(database ? { DATABASE_URL: database.url, DATABASE_POOL_MAX: '4' } : {}),
		// Faster hashing, and every caller here is 127.0.0.1 where in life they are several: the /auth budget
		// of 10 a minute per address would refuse the walk's own logins and refreshes.
		PASSWORD_HASH_MEMORY_KIB: '1024',
		PASSWORD_HASH_TIME_COST: '1',
		AUTH_RATE_LIMIT_MAX: '100',
	})
	invoicesBase = `http://127.0.0.1:${await freePort()}`
	mkdirSync(artifacts, { recursive: true })
})

afterAll(async () => {
	if (process.env.TEAMS_E2E_LOG) await Bun.write(process.env.TEAMS_E2E_LOG, latchkey?.output() ?? '')
	invoices?.kill()
	await invoices?.exited
	if (latchkey) {
		latchkey.process.kill('SIGTERM')
		await latchkey.process.exited
	}
	await dropDatabase?.()
	await sink?.stop().catch(() => {})
	folder?.remove()
	rmSync(artifacts, { recursive: true, force: true })
})

describe('the teams guide, run as written against the binary', () => {
	test('2. Ada signs up and makes an organization', () => {
		const out = step('ada')
		expect(out).toContain('"email":"ada@example.com"')
		expect(variable('ORG_ID')).toMatch(UUID)
		expect(out.trim().split('\n').at(-1)).toBe(variable('ORG_ID'))
	})

	test('3. the site admin defines the role accountant', () => {
		const out = step('role')
		expect(JSON.parse(out).data).toMatchObject({ name: 'accountant', permissions: ['invoices:read', 'invoices:approve'], builtIn: false })
	})

	test('4. Ada invites Bob: a pending invitation, and a mail', async () => {
		const out = step('invite')
		expect(JSON.parse(out).data).toMatchObject({ email: 'bob@example.com', roles: ['accountant'], status: 'pending' })
		const mail = await sink.waitFor('bob@example.com', { subject: 'You are invited to join Acme Books' })
		expect(mail.text).toContain('/invitation#token=')
	})

	test('5. Bob signs up, proves his address with the code and accepts with the link’s token', async () => {
		step('bob-signs-up')
		const code = verificationCode((await sink.waitFor('bob@example.com', { subject: 'Confirm your email' })).text)
		const token = invitationToken((await sink.waitFor('bob@example.com', { subject: 'You are invited' })).text)
		const out = step('bob-accepts', { CODE: code, INVITATION_TOKEN: token })
		const lines = out.trim().split('\n')
		expect(JSON.parse(lines[0] as string).data).toMatchObject({ email: 'bob@example.com', emailVerified: true })
		expect(JSON.parse(lines.at(-1) as string).data).toMatchObject({ organization: { id: variable('ORG_ID'), name: 'Acme Books', slug: 'acme-books' }, roles: ['accountant'] })
		// "The token works once".
		const again = await fetch(`${latchkey.base}/api/invitation-acceptances`, jsonPost({ token }, { authorization: `Bearer ${variable('BOB_TOKEN')}` }))
		expect(again.status).toBe(400)
		expect(((await again.json()) as { type: string }).type).toEndWith('/problems/invalid-code')
	})

	test('6. a refresh with organizationId: the token carries the org claim the guide shows', () => {
		const out = step('switch')
		const org = claims(variable('BOB_TOKEN')).org
		const shown = JSON.parse(`{${block('json')}}`).org as Record<string, unknown>
		expect(org).toEqual({ ...shown, id: variable('ORG_ID') })
		expect(out).toContain('slug: "acme-books"')
	})

	test('7. the invoices app verifies the token with the JWKS and checks the permission', async () => {
		const file = join(artifacts, 'invoices.ts')
		writeFileSync(file, block('ts run:invoices-app'))
		invoices = Bun.spawn(['bun', file], { cwd: artifacts, env: { PATH: process.env.PATH ?? '', LATCHKEY_URL: latchkey.base, PORT: new URL(invoicesBase).port }, stdout: 'pipe', stderr: 'pipe' })
		for (let i = 0; ; i++) {
			const answer = await fetch(`${invoicesBase}/invoices`).catch(() => undefined)
			if (answer) break
			if (i > 200) throw new Error('the invoices app did not start')
			await Bun.sleep(50)
		}
		const out = step('check').trim().split('\n')
		expect(out).toEqual(['{"organization":"acme-books","invoices":[]}', '{"approved":"42","organization":"acme-books"}', '{"error":"invoices:read is not granted"}'])
		const status = await fetch(`${invoicesBase}/invoices`, { headers: { authorization: `Bearer ${variable('ADA_TOKEN')}` } })
		expect(status.status).toBe(403)
		// A forged token (another key) is refused the same way.
		const [header, payload] = variable('BOB_TOKEN').split('.')
		const forged = await fetch(`${invoicesBase}/invoices`, { headers: { authorization: `Bearer ${header}.${payload}.${'A'.repeat(86)}` } })
		expect(forged.status).toBe(403)
	})

	test('8. Ada removes Bob: Latchkey sees it at once, the offline check at the next refresh', async () => {
		const out = step('remove').trim().split('\n')
		expect(JSON.parse(out[0] as string).data).toMatchObject({ user: { email: 'bob@example.com' }, roles: ['accountant'] })
		expect(out[1]).toBe('null')
		// The app that verifies offline still accepts the token, as the guide says.
		expect(out[2]).toBe('{"organization":"acme-books","invoices":[]}')
		expect(step('refresh-after-removal').trim()).toBe('{"error":"invoices:read is not granted"}')
		expect(claims(variable('BOB_TOKEN')).org).toBeUndefined()
		// The checks the guide recommends for what must not outlive a removal: 404 for the member.
		const member = await fetch(`${latchkey.base}/api/organizations/${variable('ORG_ID')}/members/${variable('BOB_ID')}`, { headers: { authorization: `Bearer ${variable('ADA_TOKEN')}` } })
		expect(member.status).toBe(404)
	})

	test('the typed client: Cy accepts an invitation and switches, with the snippet as written (type-checked, then run)', async () => {
		const client = join(artifacts, 'client')
		await buildClientPackage(join(client, 'node_modules', '@latchkey', 'client'))
		const file = join(client, 'accept.ts')
		writeFileSync(file, block('ts run:typed-client'))
		// Under a service's strict settings (Bun's types: the snippet reads process.env); the package's peers resolve from the clone.
		writeFileSync(
			join(client, 'tsconfig.json'),
			JSON.stringify({ compilerOptions: { target: 'ES2022', lib: ['ES2022', 'DOM'], module: 'ESNext', moduleResolution: 'bundler', strict: true, noEmit: true, skipLibCheck: true, types: ['bun'], typeRoots: [join(ROOT, 'node_modules', '@types')] }, files: ['accept.ts'] }),
		)
		const checked = Bun.spawnSync([join(ROOT, 'node_modules', '.bin', 'tsc'), '-p', 'tsconfig.json'], { cwd: client, stdout: 'pipe', stderr: 'pipe' })
		expect(`${checked.stdout}${checked.stderr}`.trim()).toBe('')

		const headers = { authorization: `Bearer ${variable('ADA_TOKEN')}` }
		const invited = await fetch(`${latchkey.base}/api/organizations/${variable('ORG_ID')}/invitations`, jsonPost({ email: 'cy@example.com', roles: ['member', 'accountant'] }, headers))
		expect(invited.status).toBe(201)
		expect((await fetch(`${latchkey.base}/api/users`, jsonPost({ email: 'cy@example.com', password: 'a third horse battery staple', name: 'Cy' }))).status).toBe(201)
		const code = verificationCode((await sink.waitFor('cy@example.com', { subject: 'Confirm your email' })).text)
		const token = invitationToken((await sink.waitFor('cy@example.com', { subject: 'You are invited' })).text)
		expect((await fetch(`${latchkey.base}/api/auth/email-verifications`, jsonPost({ email: 'cy@example.com', code }))).status).toBe(200)
		const login = await fetch(`${latchkey.base}/api/auth/login`, jsonPost({ email: 'cy@example.com', password: 'a third horse battery staple' }))
		const tokens = ((await login.json()) as { data: { accessToken: string; refreshToken: string } }).data

		process.env.LATCHKEY_URL = latchkey.base
		const snippet = (await import(file)) as { acceptInvitation(tokens: { accessToken: string; refreshToken: string }, invitationToken: string): Promise<{ organization: { slug: string }; roles: string[]; tokens: { accessToken: string }; memberOf: string[] }> }
		const joined = await snippet.acceptInvitation(tokens, token)
		expect(joined.organization.slug).toBe('acme-books')
		expect(joined.roles).toEqual(['member', 'accountant'])
		expect(joined.memberOf).toEqual(['acme-books'])
		expect(claims(joined.tokens.accessToken).org).toMatchObject({ id: variable('ORG_ID'), slug: 'acme-books', roles: ['accountant', 'member'] })
		const approved = await fetch(`${invoicesBase}/invoices/7/approval`, { method: 'POST', headers: { authorization: `Bearer ${joined.tokens.accessToken}` } })
		expect(await approved.json()).toEqual({ approved: '7', organization: 'acme-books' })
		// The same token again: the typed 400 becomes the snippet's error.
		await expect(snippet.acceptInvitation(tokens, token)).rejects.toThrow()
	}, 300_000)
})
