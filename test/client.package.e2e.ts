/**
 * Both ways a frontend calls Latchkey, tried as a developer in another
 * repository would: `bun run build:client`, `npm pack`, then in a fresh folder
 * with a frontend's tsconfig (test/frontend) `npm install` of the tarball, and
 * a client generated from the served document by openapi-typescript for
 * openapi-fetch. Both programs must type-check with tsc (0 errors) and run
 * against the compiled binary. Run after `bun run build`.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import packageJson from '../package.json'
import { binaryFolder, jsonPost, startBinary, type BinaryFolder, type RunningBinary } from './support/binary'
import { createEmptyTestDatabase, TEST_DATABASE_URL } from './support/database'
import { PASSWORD, uniqueEmail } from './support/fixtures'

setDefaultTimeout(180_000)

const ROOT = join(import.meta.dir, '..')
const BIN = join(ROOT, 'node_modules', '.bin')
const ADMIN = { email: 'frontend-admin@example.test', password: 'frontend admin passphrase' }

let at: BinaryFolder
let server: RunningBinary
let frontend: string
let dropDatabase: (() => Promise<void>) | undefined
/** Every account on the server, so that the tours know what their pages must hold. */
const accounts = [ADMIN.email]

/** Runs a command, failing the test with its output when it fails. */
function run(command: string[], cwd: string) {
	const result = Bun.spawnSync(command, { cwd, stdout: 'pipe', stderr: 'pipe', env: { ...process.env, NO_UPDATE_NOTIFIER: '1', npm_config_fund: 'false', npm_config_audit: 'false' } })
	if (result.exitCode !== 0) throw new Error(`${command.join(' ')} exited ${result.exitCode}:\n${result.stdout}${result.stderr}`)
	return result.stdout.toString()
}

beforeAll(async () => {
	run(['bun', 'run', 'build:client'], ROOT)
	frontend = mkdtempSync(join(tmpdir(), 'latchkey-frontend-'))
	cpSync(join(import.meta.dir, 'frontend'), frontend, { recursive: true })
	await Bun.write(join(frontend, 'package.json'), JSON.stringify({ name: 'a-frontend', private: true, type: 'module' }))
	// As the README says it, from the repository: `npm pack ./dist/client`.
	const [packed] = JSON.parse(run(['npm', 'pack', '--json', './dist/client', '--pack-destination', frontend], ROOT)) as { filename: string }[]
	const tarball = packed?.filename ?? 'no tarball'
	run(['npm', 'install', `./${tarball}`, `openapi-fetch@${packageJson.devDependencies['openapi-fetch']}`], frontend)

	at = binaryFolder('frontend')
	const database = TEST_DATABASE_URL ? await createEmptyTestDatabase(TEST_DATABASE_URL) : undefined
	dropDatabase = database?.drop
	server = await startBinary(at, {
		...(database ? { DATABASE_URL: database.url } : {}),
		LATCHKEY_ADMIN_EMAIL: ADMIN.email,
		LATCHKEY_ADMIN_PASSWORD: ADMIN.password,
		AUTH_RATE_LIMIT_MAX: '1000',
	})
	for (const label of ['c-seed', 'd-seed', 'e-seed']) {
		const email = uniqueEmail(label)
		const signedUp = await fetch(`${server.base}/api/users`, jsonPost({ email, password: PASSWORD }))
		expect(signedUp.status).toBe(201)
		accounts.push(email)
	}
	const document = await fetch(`${server.base}/api/docs/json`)
	expect(document.status).toBe(200)
	await Bun.write(join(frontend, 'openapi.json'), await document.text())
	run([join(BIN, 'openapi-typescript'), 'openapi.json', '--output', 'schema.d.ts'], frontend)
})

afterAll(async () => {
	server?.process.kill()
	await server?.process.exited
	await dropDatabase?.()
	at?.remove()
	if (frontend) rmSync(frontend, { recursive: true, force: true })
})

/** What each program reports (test/frontend is type-checked in its own folder, against the package). */
interface Tour {
	signUp: { status: number; id: string; location: string | null }
	login: { status: number; tokenType: string; expiresIn: number }
	me: { status: number; email: string; role: string; emailVerified: boolean }
	email: {
		verificationRequest: number
		recoveryRequest: number
		wrongCode?: { status: number; type: string }
		wrongToken?: { status: number; type: string }
	}
	factors: {
		enrolled: { status: number; factorStatus: string; qrCode: boolean; uri: boolean }
		wrongCode?: { status: number; type: string }
		listed?: string[]
		removed: number
		passkeyChallenge: number
		madeUpMfa?: { status: number; type: string }
	}
	providers?: string[]
	madeUpCode?: { status: number; type: string }
	refresh: { status: number; rotated: boolean }
	problem?: { status: number; type: string; detail: string }
	pages: { first: string[]; link: string | null; second?: string[] }
	logout: { status: number; data: null; afterLogout?: number }
}

/** What both programs must have seen: the same contract whichever client calls it. */
function expectTheTour(tour: Tour, newcomer: { email: string }) {
	expect(tour.signUp).toEqual({ status: 201, id: expect.stringMatching(/^[0-9a-f-]{36}$/), location: `/api/users/${tour.signUp.id}` })
	expect(tour.login).toEqual({ status: 200, tokenType: 'Bearer', expiresIn: 900 })
	expect(tour.me).toEqual({ status: 200, email: newcomer.email, role: 'user', emailVerified: false })
	expect(tour.email).toEqual({
		verificationRequest: 202,
		recoveryRequest: 202,
		wrongCode: { status: 400, type: expect.stringMatching(/\/problems\/invalid-code$/) },
		wrongToken: { status: 400, type: expect.stringMatching(/\/problems\/invalid-code$/) },
	})
	expect(tour.factors).toEqual({
		enrolled: { status: 201, factorStatus: 'pending', qrCode: true, uri: true },
		wrongCode: { status: 400, type: expect.stringMatching(/\/problems\/invalid-code$/) },
		listed: ['pending'],
		removed: 200,
		passkeyChallenge: 200,
		madeUpMfa: { status: 401, type: expect.stringMatching(/\/problems\/invalid-mfa-token$/) },
	})
	expect(tour.providers).toEqual([])
	expect(tour.madeUpCode).toEqual({ status: 400, type: expect.stringMatching(/\/problems\/invalid-code$/) })
	expect(tour.refresh).toEqual({ status: 200, rotated: true })
	expect(tour.problem).toEqual({ status: 401, type: expect.stringMatching(/\/problems\/invalid-credentials$/), detail: expect.any(String) })
	const everyone = [...accounts].sort()
	expect(tour.pages.first).toEqual(everyone.slice(0, 2))
	expect(tour.pages.link).toContain('rel="next"')
	expect(tour.pages.second).toEqual(everyone.slice(2, 4))
	expect(tour.logout).toEqual({ status: 200, data: null, afterLogout: 401 })
}

describe('a frontend in another repository', () => {
	test('installs @latchkey/client from its tarball with its peers only: nothing of the server runtime', () => {
		const installed = readdirSync(join(frontend, 'node_modules'))
		expect(installed).toContain('elysia')
		for (const serverOnly of ['@electric-sql', '@scalar', 'pino', 'postgres', 'drizzle-orm', 'jose', '@types']) expect(installed).not.toContain(serverOnly)
		const files = readdirSync(join(frontend, 'node_modules', '@latchkey', 'client')).sort()
		expect(files).toEqual(['README.md', 'index.d.ts', 'index.js', 'package.json', 'routes.d.ts'])
		// The declarations name nothing of the server: no Bun globals, workers, embedded files or server modules.
		for (const file of ['index.d.ts', 'routes.d.ts']) {
			const declarations = readFileSync(join(frontend, 'node_modules', '@latchkey', 'client', file), 'utf8')
			expect(declarations).not.toMatch(/\bBun\b|BunFile|\bWorker\b|\.wasm|\.sql|node_modules|import\(|drizzle|pino|PGlite/)
		}
		const { peerDependencies, dependencies } = JSON.parse(readFileSync(join(frontend, 'node_modules', '@latchkey', 'client', 'package.json'), 'utf8'))
		expect(Object.keys(peerDependencies).sort()).toEqual(['@elysiajs/eden', 'elysia'])
		expect(dependencies).toBeUndefined()
	})

	test('type-checks both client programs with its own tsconfig: 0 errors, wrong literals refused', () => {
		// The @ts-expect-error probes in the programs fail the check if a wrong literal compiles.
		const output = run([join(BIN, 'tsc'), '--noEmit', '--strict', '-p', 'tsconfig.json'], frontend)
		expect(output.trim()).toBe('')
	})

	test('runs the Eden client and the generated client against the compiled binary', async () => {
		const eden = await import(join(frontend, 'eden-client.ts'))
		const generated = await import(join(frontend, 'openapi-client.ts'))
		const edenNewcomer = { email: uniqueEmail('a-eden'), password: PASSWORD }
		accounts.push(edenNewcomer.email)
		expectTheTour(await eden.tourOfTheApi(server.base, ADMIN, edenNewcomer), edenNewcomer)

		const generatedNewcomer = { email: uniqueEmail('b-generated'), password: PASSWORD }
		accounts.push(generatedNewcomer.email)
		expectTheTour(await generated.tourWithGeneratedClient(server.base, ADMIN, generatedNewcomer), generatedNewcomer)
	})
})
