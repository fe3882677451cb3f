/**
 * Development keeps its keys: JWT_SECRET, DATA_ENCRYPTION_KEY and OAUTH_SIGNING_KEY, when the environment
 * leaves them unset, are generated once and kept in DATA_DIR/keys, so a restart keeps sessions, TOTP factors,
 * webhook secrets and the key that verifies ID tokens. `bun src/index.ts` started and stopped as a developer would; on PostgreSQL with TEST_DATABASE_URL
 * (DATA_DIR still keeps the keys), else on the embedded database.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createPublicKey, generateKeyPairSync } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../src/config/env'
import { keepDevelopmentSecrets } from '../src/config/secret-file'
import { createLogger } from '../src/log'
import { startProcess, type RunningBinary } from './support/binary'
import { createEmptyTestDatabase, TEST_DATABASE_URL } from './support/database'
import { awayFromStepBoundary, totpCode } from './support/factors'
import { PASSWORD, uniqueEmail } from './support/fixtures'
import { TEST_OAUTH_SIGNING_KEY } from './support/oauth-key'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(90_000)

const ENTRY = join(import.meta.dir, '..', 'src', 'index.ts')
const RACER = join(import.meta.dir, 'support', 'secret-file-race.ts')
const DATA_KEY = Buffer.alloc(32, 7).toString('base64')
const JWT_SECRET = 'a-development-secret-of-more-than-32-bytes'
let folder: string

beforeAll(() => {
	folder = mkdtempSync(join(tmpdir(), 'latchkey-devkeys-'))
})
afterAll(() => rmSync(folder, { recursive: true, force: true }))

/** What a developer sets: nothing secret. The working directory is the temporary folder (no .env of the repository). */
const environment = (extra: Record<string, string>) => ({
	PATH: process.env.PATH ?? '',
	HOME: folder,
	HOST: '127.0.0.1',
	PORT: '0',
	LOG_LEVEL: 'info',
	PASSWORD_HASH_MEMORY_KIB: '1024',
	PASSWORD_HASH_TIME_COST: '1',
	...extra,
})
const start = (extra: Record<string, string>) => startProcess(['bun', ENTRY], folder, environment(extra))
/** Runs the service to its end (a start refused by its configuration); asynchronously, so the other tests go on meanwhile. */
async function run(extra: Record<string, string>) {
	const child = Bun.spawn(['bun', ENTRY], { cwd: folder, env: environment(extra), stdout: 'pipe', stderr: 'pipe', timeout: 30_000 })
	const [exitCode, stdout, stderr] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()])
	return { exitCode, stdout, stderr }
}

async function stop(service: RunningBinary) {
	service.process.kill('SIGTERM')
	expect(await service.process.exited).toBe(0)
}

async function call(service: RunningBinary, method: string, path: string, json?: unknown, token?: string) {
	const headers: Record<string, string> = { connection: 'close' }
	if (json !== undefined) headers['content-type'] = 'application/json'
	if (token) headers.authorization = `Bearer ${token}`
	const res = await fetch(`${service.base}${path}`, { method, headers, body: json === undefined ? undefined : JSON.stringify(json) })
	return { status: res.status, body: (await res.json()) as any }
}

/** What the key files hold (undefined for one that is missing). */
const contents = (keys: string) => {
	const read = (name: string) => (existsSync(join(keys, name)) ? readFileSync(join(keys, name), 'utf8') : undefined)
	return { jwt: read('jwt-secret'), data: read('data-encryption-key'), oauth: read('oauth-signing-key') }
}

/** The provider's RSA key as a running service publishes it. */
async function publishedOAuthKey(service: RunningBinary) {
	const jwks = (await (await fetch(`${service.base}/.well-known/jwks.json`, { headers: { connection: 'close' } })).json()) as { keys: Record<string, unknown>[] }
	const rsa = jwks.keys.filter((key) => key.kty === 'RSA')
	expect(rsa).toHaveLength(1)
	return rsa[0]
}

const permissions = (path: string) => (statSync(path).mode & 0o777).toString(8)

/**
 * Starts `count` contenders (support/secret-file-race.ts) and, once every one has loaded and said so, tells them
 * all to go at once (a line on each one's standard input): the same moment, without a start time far enough
 * ahead for the slowest to load under any load. Their exit codes, standard output after `ready`, and errors.
 */
async function race(count: number, args: string[]) {
	const contenders = Array.from({ length: count }, () =>
		Bun.spawn(['bun', RACER, ...args], { env: { PATH: process.env.PATH ?? '' }, stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' }),
	)
	const outputs = contenders.map(async (child) => {
		const decoder = new TextDecoder()
		let out = ''
		let ready!: () => void
		const isReady = new Promise<void>((resolve) => (ready = resolve))
		const reading = (async () => {
			for await (const chunk of child.stdout) {
				out += decoder.decode(chunk, { stream: true })
				if (out.startsWith('ready\n')) ready()
			}
			ready()
		})()
		return { child, isReady, reading, out: () => out }
	})
	const started = await Promise.all(outputs)
	await Promise.all(started.map(({ isReady }) => isReady))
	for (const { child } of started) {
		child.stdin.write('go\n')
		child.stdin.end()
	}
	return Promise.all(
		started.map(async ({ child, reading, out }) => {
			const code = await child.exited
			await reading
			return { code, out: out().replace(/^ready\n/, ''), err: await new Response(child.stderr).text() }
		}),
	)
}

// Every test works in its own folder and its own processes: they run at once, the processes on the other core
// while this one waits for them.
describe.concurrent('in development', () => {
	test('a restart on the same DATA_DIR keeps sessions, TOTP factors and the ID tokens\' key: the keys made at the first start are kept there, 0600', async () => {
		const dataDir = join(folder, 'restart', 'data')
		const keys = join(dataDir, 'keys')
		const database = TEST_DATABASE_URL ? await createEmptyTestDatabase(TEST_DATABASE_URL) : undefined
		const settings = { DATA_DIR: dataDir, ...(database ? { DATABASE_URL: database.url } : {}) }
		try {
			const first = await start(settings)
			const email = uniqueEmail('devkeys')
			expect((await call(first, 'POST', '/api/users', { email, password: PASSWORD })).status).toBe(201)
			const login = await call(first, 'POST', '/api/auth/login', { email, password: PASSWORD })
			const token: string = login.body.data.accessToken
			const created = await call(first, 'POST', '/api/users/me/factors', { type: 'totp', name: 'Phone' }, token)
			expect(created.status).toBe(201)
			await awayFromStepBoundary()
			const activated = await call(first, 'POST', `/api/users/me/factors/${created.body.data.factor.id}/activation`, { code: totpCode(created.body.data.secret) }, token)
			expect(activated.status).toBe(200)
			const firstOAuthKey = await publishedOAuthKey(first)
			await stop(first)
			const keptByFirst = contents(keys)

			// On PostgreSQL the second start runs two workers: each reads the same files.
			const second = await start({ ...settings, ...(database ? { WORKERS: '2' } : {}) })
			try {
				if (database) await until(() => (second.output().match(/"msg":"listening on/g) ?? []).length === 2)
				const reads = await Promise.all(Array.from({ length: database ? 10 : 1 }, () => call(second, 'GET', '/api/users/me', undefined, token)))
				for (const read of reads) expect({ status: read.status, email: read.body.data?.email }).toEqual({ status: 200, email })
				// Every worker publishes the key the first start made.
				for (const published of await Promise.all(Array.from({ length: database ? 10 : 1 }, () => publishedOAuthKey(second))))
					expect(published).toEqual(firstOAuthKey)

				const password = await call(second, 'POST', '/api/auth/login', { email, password: PASSWORD })
				expect(password.body.data.mfaRequired).toBe(true)
				await awayFromStepBoundary()
				const mfa = await call(second, 'POST', '/api/auth/mfa', { mfaToken: password.body.data.mfaToken, method: 'totp', code: totpCode(created.body.data.secret, 1) })
				expect(mfa.status).toBe(200)
			} finally {
				await stop(second)
			}
			// Made once, readable by the owner only; DATA_DIR (made by this start) and its keys/ too.
			expect(readdirSync(keys).sort()).toEqual(['data-encryption-key', 'jwt-secret', 'oauth-signing-key'])
			expect([
				permissions(dataDir),
				permissions(keys),
				permissions(join(keys, 'jwt-secret')),
				permissions(join(keys, 'data-encryption-key')),
				permissions(join(keys, 'oauth-signing-key')),
			]).toEqual(['700', '700', '600', '600', '600'])
			expect(keptByFirst.oauth).toStartWith('-----BEGIN PRIVATE KEY-----\n')
			expect(firstOAuthKey).toMatchObject({ kty: 'RSA', alg: 'RS256', use: 'sig', kid: expect.any(String) })
			const kept = contents(keys)
			expect(kept).toEqual(keptByFirst)
			const firstLog = first.output()
			expect(firstLog).toContain(`"msg":"JWT_SECRET is not set: generated one and kept it in ${keys}/jwt-secret (development only; production requires JWT_SECRET)"`)
			expect(firstLog).toContain(
				`"msg":"DATA_ENCRYPTION_KEY is not set: generated one and kept it in ${keys}/data-encryption-key (development only; production requires DATA_ENCRYPTION_KEY)"`,
			)
			expect(firstLog).toContain(
				`"msg":"OAUTH_SIGNING_KEY is not set: generated one and kept it in ${keys}/oauth-signing-key (development only; production requires OAUTH_SIGNING_KEY)"`,
			)

			const secondLog = second.output()
			expect(secondLog).toContain(`"msg":"JWT_SECRET is not set: read it from ${keys}/jwt-secret"`)
			expect(secondLog).toContain(`"msg":"DATA_ENCRYPTION_KEY is not set: read it from ${keys}/data-encryption-key"`)
			expect(secondLog).toContain(`"msg":"OAUTH_SIGNING_KEY is not set: read it from ${keys}/oauth-signing-key"`)
			expect(secondLog).not.toContain('generated one')
			// The log names the files, never what is in them.
			for (const log of [firstLog, secondLog])
				for (const secret of Object.values(kept)) {
					expect(secret).toBeString()
					// A PEM line by line (64 characters of base64 each), not only as a whole.
					for (const line of (secret ?? '').trim().split('\n').filter((part) => part.length >= 16 && !part.startsWith('-----'))) expect(log).not.toContain(line)
				}
		} finally {
			await database?.drop()
		}
	})

	test('a damaged key file stops the start: exit code 1 and a line naming the file, never its content', async () => {
		const dataDir = join(folder, 'damaged')
		const keys = join(dataDir, 'keys')
		mkdirSync(keys, { recursive: true, mode: 0o700 })
		writeFileSync(join(keys, 'jwt-secret'), 'cut-short-secret\n', { mode: 0o600 })
		const short = await run({ DATA_DIR: dataDir })
		expect({ code: short.exitCode, stderr: short.stderr }).toEqual({
			code: 1,
			stderr: `latchkey: configuration: JWT_SECRET: ${keys}/jwt-secret is damaged (expected at least 32 bytes in base64url); restore it, or set JWT_SECRET, or delete the file to make a new one (what the old one signed or sealed is then lost)\n`,
		})

		writeFileSync(join(keys, 'jwt-secret'), `${'x'.repeat(64)}\n`)
		writeFileSync(join(keys, 'data-encryption-key'), Buffer.alloc(31, 1).toString('base64'), { mode: 0o600 })
		const wrongSize = await run({ DATA_DIR: dataDir })
		expect({ code: wrongSize.exitCode, stderr: wrongSize.stderr }).toEqual({
			code: 1,
			stderr: `latchkey: configuration: DATA_ENCRYPTION_KEY: ${keys}/data-encryption-key is damaged (expected 32 bytes in base64); restore it, or set DATA_ENCRYPTION_KEY, or delete the file to make a new one (what the old one signed or sealed is then lost)\n`,
		})
		expect(wrongSize.stdout).not.toContain(Buffer.alloc(31, 1).toString('base64'))

		// The RSA key: a key of another kind, or one too short, is as damaged as text that is no key.
		writeFileSync(join(keys, 'data-encryption-key'), `${DATA_KEY}\n`)
		const damagedKey = `oauth-signing-key is damaged (expected an RSA private key of at least 2048 bits in PEM); restore it, or set OAUTH_SIGNING_KEY, or delete the file to make a new one (what the old one signed or sealed is then lost)\n`
		const shortKey = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
		const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
		for (const content of ['not a key', shortKey, ec]) {
			writeFileSync(join(keys, 'oauth-signing-key'), content, { mode: 0o600 })
			const refused = await run({ DATA_DIR: dataDir })
			expect({ code: refused.exitCode, stderr: refused.stderr }).toEqual({
				code: 1,
				stderr: `latchkey: configuration: OAUTH_SIGNING_KEY: ${keys}/${damagedKey}`,
			})
			expect(refused.stdout).not.toContain('PRIVATE KEY')
		}
	})

	test('the environment wins over the files: a set key is used as it is, and no file is made for it', () => {
		const dataDir = join(folder, 'environment')
		const log = createLogger('silent')
		const all = { JWT_SECRET, DATA_ENCRYPTION_KEY: DATA_KEY, OAUTH_SIGNING_KEY: TEST_OAUTH_SIGNING_KEY }
		const both = keepDevelopmentSecrets(loadConfig({ DATA_DIR: dataDir, ...all }), log)
		expect({ secret: both.jwt.secret, dataKey: both.dataKeys.current, oauthKey: both.oauth.signingKey.pem, made: existsSync(dataDir) }).toEqual({
			secret: JWT_SECRET,
			dataKey: DATA_KEY,
			oauthKey: TEST_OAUTH_SIGNING_KEY.trim(),
			made: false,
		})
		// A key file named in the environment is the environment's too: nothing is made for it.
		const fromFile = keepDevelopmentSecrets(loadConfig({ DATA_DIR: dataDir, JWT_SECRET, DATA_ENCRYPTION_KEY: DATA_KEY, OAUTH_SIGNING_KEY_FILE: '/etc/latchkey/oauth.pem' }), log)
		expect({ signingKey: fromFile.oauth.signingKey, made: existsSync(dataDir) }).toEqual({ signingKey: { pem: undefined, file: '/etc/latchkey/oauth.pem' }, made: false })

		const one = keepDevelopmentSecrets(loadConfig({ DATA_DIR: dataDir, JWT_SECRET, OAUTH_SIGNING_KEY: TEST_OAUTH_SIGNING_KEY }), log)
		expect(one.jwt.secret).toBe(JWT_SECRET)
		expect(readdirSync(join(dataDir, 'keys'))).toEqual(['data-encryption-key'])
		expect(one.dataKeys.current).toBe(readFileSync(join(dataDir, 'keys', 'data-encryption-key'), 'utf8').trim())

		// With EdDSA/ES256 there is no HS256 secret to keep.
		const eddsa = keepDevelopmentSecrets(loadConfig({ DATA_DIR: dataDir, JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY_FILE: '/nowhere', OAUTH_SIGNING_KEY: TEST_OAUTH_SIGNING_KEY }), log)
		expect(eddsa.jwt.secret).toBeUndefined()
		expect(readdirSync(join(dataDir, 'keys'))).toEqual(['data-encryption-key'])

		// The RSA key is kept like the others, and read back as it was written.
		const rsa = keepDevelopmentSecrets(loadConfig({ DATA_DIR: dataDir, JWT_SECRET }), log)
		expect(readdirSync(join(dataDir, 'keys')).sort()).toEqual(['data-encryption-key', 'oauth-signing-key'])
		expect(rsa.oauth.signingKey).toEqual({ pem: readFileSync(join(dataDir, 'keys', 'oauth-signing-key'), 'utf8').trim(), file: undefined })
		expect(keepDevelopmentSecrets(loadConfig({ DATA_DIR: dataDir, JWT_SECRET }), log).oauth.signingKey.pem).toBe(rsa.oauth.signingKey.pem)

		// memory:// keeps nothing, as the database it names: each process makes its own (and says so).
		const memory = loadConfig({ DATA_DIR: 'memory://' })
		expect(keepDevelopmentSecrets(memory, log)).toBe(memory)
	})

	test('a key file other users can read is used, with a warning that names it and how to fix it', () => {
		const dataDir = join(folder, 'open')
		const keys = join(dataDir, 'keys')
		mkdirSync(keys, { recursive: true })
		writeFileSync(join(keys, 'jwt-secret'), `${'s'.repeat(64)}\n`)
		chmodSync(join(keys, 'jwt-secret'), 0o644)
		const lines: string[] = []
		const config = keepDevelopmentSecrets(
			loadConfig({ DATA_DIR: dataDir, DATA_ENCRYPTION_KEY: DATA_KEY, OAUTH_SIGNING_KEY: TEST_OAUTH_SIGNING_KEY }),
			createLogger('debug', { write: (line: string) => void lines.push(line) }),
		)
		expect(config.jwt.secret).toBe('s'.repeat(64))
		const logged = lines.map((line) => {
			const { time: _time, ...rest } = JSON.parse(line)
			return rest
		})
		expect(logged).toEqual([
			{ level: 'info', setting: 'JWT_SECRET', file: `${keys}/jwt-secret`, msg: `JWT_SECRET is not set: read it from ${keys}/jwt-secret` },
			{
				level: 'warn',
				setting: 'JWT_SECRET',
				file: `${keys}/jwt-secret`,
				mode: '0644',
				msg: `JWT_SECRET: ${keys}/jwt-secret can be read or changed by other users; chmod 600 it`,
			},
		])
	})

	test('processes starting at the same moment on empty folders end with one key per folder, made by one of them', async () => {
		const root = join(folder, 'race')
		const folders = 200
		const outputs = await race(4, [root, String(folders)])
		for (const output of outputs) expect({ code: output.code, err: output.err }).toEqual({ code: 0, err: '' })
		const results = outputs.map((output) => output.out.trim().split('\n').map((line) => JSON.parse(line) as { folder: number; digest: string; created: boolean }))
		for (let i = 0; i < folders; i++) {
			const seen = results.map((lines) => lines[i])
			const file = readFileSync(join(root, String(i), 'jwt-secret'), 'utf8').trim()
			expect({
				folder: i,
				creators: seen.filter((line) => line?.created).length,
				digests: [...new Set(seen.map((line) => line?.digest))],
				left: readdirSync(join(root, String(i))),
			}).toEqual({ folder: i, creators: 1, digests: [new Bun.CryptoHasher('sha256').update(file).digest('hex')], left: ['jwt-secret'] })
		}
	})

	test('the RSA key too: contenders that each take a tenth of a second to make one still end with one key per folder', async () => {
		const root = join(folder, 'race-oauth')
		const folders = 6
		const outputs = await race(3, [root, String(folders), 'oauth'])
		for (const output of outputs) expect({ code: output.code, err: output.err }).toEqual({ code: 0, err: '' })
		const results = outputs.map((output) => output.out.trim().split('\n').map((line) => JSON.parse(line) as { folder: number; digest: string; created: boolean }))
		for (let i = 0; i < folders; i++) {
			const seen = results.map((lines) => lines[i])
			const file = readFileSync(join(root, String(i), 'oauth-signing-key'), 'utf8').trim()
			expect(file).toStartWith('-----BEGIN PRIVATE KEY-----')
			expect({
				folder: i,
				creators: seen.filter((line) => line?.created).length,
				digests: [...new Set(seen.map((line) => line?.digest))],
				left: readdirSync(join(root, String(i))),
			}).toEqual({ folder: i, creators: 1, digests: [new Bun.CryptoHasher('sha256').update(file).digest('hex')], left: ['oauth-signing-key'] })
		}
	})
})

describe.concurrent('in production', () => {
	test('JWT_SECRET, DATA_ENCRYPTION_KEY and OAUTH_SIGNING_KEY come from the environment only: without them it exits 1 naming them, even beside key files', async () => {
		const dataDir = join(folder, 'production')
		const keys = join(dataDir, 'keys')
		mkdirSync(keys, { recursive: true, mode: 0o700 })
		writeFileSync(join(keys, 'jwt-secret'), `${'p'.repeat(64)}\n`, { mode: 0o600 })
		writeFileSync(join(keys, 'data-encryption-key'), `${DATA_KEY}\n`, { mode: 0o600 })
		writeFileSync(join(keys, 'oauth-signing-key'), TEST_OAUTH_SIGNING_KEY, { mode: 0o600 })
		const refused = await run({ NODE_ENV: 'production', DATA_DIR: dataDir, PUBLIC_URL: 'https://auth.example.test' })
		expect({ code: refused.exitCode, stderr: refused.stderr.trim().split('\n') }).toEqual({
			code: 1,
			stderr: [
				'latchkey: configuration: JWT_SECRET: required when NODE_ENV=production (at least 32 bytes)',
				'latchkey: configuration: DATA_ENCRYPTION_KEY: required when NODE_ENV=production (32 random bytes, base64: openssl rand -base64 32)',
				'latchkey: configuration: OAUTH_SIGNING_KEY: required (or OAUTH_SIGNING_KEY_FILE) when NODE_ENV=production (an RSA private key of at least 2048 bits, PEM: openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048)',
			],
		})
	})

	test('with all set it starts, publishes the RSA key it was given, and writes no key file', async () => {
		const dataDir = join(folder, 'production-set')
		const keyFile = join(folder, 'oauth-signing-key.pem')
		writeFileSync(keyFile, TEST_OAUTH_SIGNING_KEY, { mode: 0o600 })
		const service = await start({ NODE_ENV: 'production', DATA_DIR: dataDir, JWT_SECRET, DATA_ENCRYPTION_KEY: DATA_KEY, OAUTH_SIGNING_KEY_FILE: keyFile, PUBLIC_URL: 'https://auth.example.test' })
		expect((await fetch(`${service.base}/api/health`)).status).toBe(200)
		const expected = createPublicKey(TEST_OAUTH_SIGNING_KEY).export({ format: 'jwk' })
		expect(await publishedOAuthKey(service)).toMatchObject({ kty: 'RSA', n: expected.n, e: expected.e, alg: 'RS256', use: 'sig' })
		await stop(service)
		expect(existsSync(join(dataDir, 'keys'))).toBe(false)
		expect(service.output()).not.toContain('is not set')
	})
})

async function until(condition: () => boolean) {
	for (let i = 0; i < 200 && !condition(); i++) await Bun.sleep(100)
	expect(condition()).toBe(true)
}
