/**
 * The shipped artifact: `bun run build` → dist/latchkey, copied alone into an
 * empty folder and run with a bare environment (no Bun, no node_modules),
 * then called over TCP. Run with `bun test ./test/binary.e2e.ts` after building.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { createHash } from 'node:crypto'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import packageJson from '../package.json'
import { bareEnv as bareEnvIn, binaryFolder, jsonPost as json, startBinary, type BinaryFolder } from './support/binary'
import { digestOf, newOpaqueToken } from '../src/crypto/opaque-tokens'
import { sessions } from '../src/db/schema'
import { createTestDatabase, TEST_DATABASE_URL, type TestDatabase } from './support/database'
import { REDIRECT_URI, registerClient } from './support/oauth'
import { freePort } from './support/ports'

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

	test('serves the console from the bundle it embeds: the page, its script and stylesheet, gzipped, nothing read from disk', async () => {
		const server = await start({})
		try {
			const page = await fetch(`${server.base}/console/users`, { headers: { accept: 'text/html' } })
			expect(page.status).toBe(200)
			expect(page.headers.get('content-security-policy')).toContain("script-src 'self'")
			const assets = [...(await page.text()).matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((match) => match[1] ?? '')
			expect(assets).toHaveLength(2)
			let compressed = 0
			for (const path of assets) {
				const asset = await fetch(`${server.base}${path}`, { headers: { 'accept-encoding': 'gzip' }, decompress: false })
				expect(asset.status).toBe(200)
				expect(asset.headers.get('content-encoding')).toBe('gzip')
				compressed += (await asset.arrayBuffer()).byteLength
			}
			expect(compressed).toBeLessThan(300 * 1024)
			expect(readdirSync(folder).sort()).toEqual(['data', 'latchkey'])
		} finally {
			server.process.kill('SIGTERM')
		}
		expect(await server.process.exited).toBe(0)
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

		test('issues an ID token for a signed-in browser\'s code (the bundle keeps the class names oidc-provider reads)', async () => {
			const port = await freePort()
			const issuer = `http://127.0.0.1:${port}`
			const server = await start({ DATABASE_URL: database.url ?? '', PORT: String(port), PUBLIC_URL: issuer })
			try {
				const email = `bin-oauth-${Date.now()}@example.test`
				const created = await fetch(`${server.base}/api/users`, json({ email, password: 'a long enough passphrase' }))
				expect(created.status).toBe(201)
				const userId = ((await created.json()) as { data: { id: string } }).data.id
				const client = await registerClient({ database }, { type: 'confidential', firstParty: true })
				const cookie = newOpaqueToken()
				await database.handle.db.insert(sessions).values({ id: Bun.randomUUIDv7(), userId, expiresAt: new Date(Date.now() + 3_600_000), browserTokenHash: digestOf(cookie) })
				const verifier = newOpaqueToken()
				const query = new URLSearchParams({
					client_id: client.clientId,
					redirect_uri: REDIRECT_URI,
					response_type: 'code',
					scope: 'openid email',
					code_challenge: createHash('sha256').update(verifier).digest('base64url'),
					code_challenge_method: 'S256',
					prompt: 'none',
				})
				const authorized = await fetch(`${issuer}/oauth2/authorization?${query}`, { headers: { cookie: `__Host-latchkey-session=${cookie}` }, redirect: 'manual' })
				expect(authorized.status).toBe(303)
				const code = new URL(authorized.headers.get('location') ?? '').searchParams.get('code')
				expect(code).toBeString()
				const exchanged = await fetch(`${issuer}/oauth2/token`, {
					method: 'POST',
					headers: { authorization: `Basic ${btoa(`${client.clientId}:${client.clientSecret}`)}`, 'content-type': 'application/x-www-form-urlencoded' },
					body: new URLSearchParams({ grant_type: 'authorization_code', code: code ?? '', redirect_uri: REDIRECT_URI, code_verifier: verifier }),
				})
				expect(exchanged.status).toBe(200)
				const tokens = (await exchanged.json()) as { id_token: string }
				const claims = JSON.parse(Buffer.from(tokens.id_token.split('.')[1] ?? '', 'base64url').toString()) as Record<string, unknown>
				expect(claims).toMatchObject({ iss: issuer, sub: userId, aud: client.clientId, acr: 'aal1' })
			} finally {
				server.process.kill('SIGTERM')
			}
			expect(await server.process.exited).toBe(0)
		})
	}
})

