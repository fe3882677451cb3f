/**
 * Second factors against the compiled binary, as an operator runs it: production settings, the
 * encryption key from the environment across a restart, and the second-factor lockout attacked
 * from many client addresses at once (sockets bound to 127.x.y.z: the service sees real peers).
 * On PostgreSQL with TEST_DATABASE_URL, else on the embedded database.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { DataKeys } from '../src/crypto/data-keys'
import { binaryFolder, bareEnv, client, requestFrom, startBinary, type BinaryFolder, type RunningBinary } from './support/binary'
import { createEmptyTestDatabase, TEST_DATABASE_URL } from './support/database'
import { awayFromStepBoundary, totpCode } from './support/factors'
import { PASSWORD, uniqueEmail } from './support/fixtures'
import { TEST_OAUTH_SIGNING_KEY } from './support/oauth-key'

setDefaultTimeout(90_000)

const LOCKOUT_THRESHOLD = 3
let at: BinaryFolder
let env: Record<string, string>
let dropDatabase: (() => Promise<void>) | undefined
let service: RunningBinary | undefined

beforeAll(async () => {
	at = binaryFolder('factors')
	const database = TEST_DATABASE_URL ? await createEmptyTestDatabase(TEST_DATABASE_URL) : undefined
	dropDatabase = database?.drop
	env = {
		NODE_ENV: 'production',
		...(database ? { DATABASE_URL: database.url } : { DATA_DIR: `${at.folder}/data` }),
		JWT_SECRET: Buffer.from(crypto.getRandomValues(new Uint8Array(48))).toString('base64'),
		DATA_ENCRYPTION_KEY: DataKeys.generate(),
		OAUTH_SIGNING_KEY: TEST_OAUTH_SIGNING_KEY,
		PUBLIC_URL: 'https://auth.example.test',
		PASSWORD_HASH_MEMORY_KIB: '1024',
		PASSWORD_HASH_TIME_COST: '1',
		AUTH_RATE_LIMIT_MAX: '1000',
		RATE_LIMIT_MAX: '1000',
		LOCKOUT_THRESHOLD: String(LOCKOUT_THRESHOLD),
	}
})

afterAll(async () => {
	await stop()
	await dropDatabase?.()
	at?.remove()
})

async function stop() {
	service?.process.kill('SIGTERM')
	await service?.process.exited
	service = undefined
}

/** A JSON call from a client address of its own. */
async function call(method: string, path: string, json?: unknown, token?: string) {
	if (!service) throw new Error('the service is not running')
	const answer = await requestFrom(service.base, client(), method, path, { json, headers: token ? { authorization: `Bearer ${token}` } : {} })
	return { status: answer.status, headers: answer.headers, body: answer.body ? JSON.parse(answer.body) : undefined }
}

/** Signs up, enrols and activates a TOTP factor; the secret and the recovery codes. */
async function accountWithTotp() {
	const email = uniqueEmail('e2e-mfa')
	expect((await call('POST', '/api/users', { email, password: PASSWORD })).status).toBe(201)
	const login = await call('POST', '/api/auth/login', { email, password: PASSWORD })
	const token = login.body.data.accessToken
	const created = await call('POST', '/api/users/me/factors', { type: 'totp' }, token)
	expect(created.status).toBe(201)
	await awayFromStepBoundary()
	const activated = await call('POST', `/api/users/me/factors/${created.body.data.factor.id}/activation`, { code: totpCode(created.body.data.secret) }, token)
	expect(activated.status).toBe(200)
	return { email, secret: created.body.data.secret as string, recoveryCodes: activated.body.data.recoveryCodes as string[] }
}

const passwordStep = async (email: string) => {
	const res = await call('POST', '/api/auth/login', { email, password: PASSWORD })
	expect(res.body.data.mfaRequired).toBe(true)
	return res.body.data.mfaToken as string
}

describe('the binary in production', () => {
	test('refuses to start without DATA_ENCRYPTION_KEY: exit code 1 and a line naming it', async () => {
		const { DATA_ENCRYPTION_KEY: _key, ...withoutKey } = env
		const child = Bun.spawn([at.binary], { cwd: at.folder, env: bareEnv(at.folder, withoutKey), stdout: 'pipe', stderr: 'pipe' })
		expect(await child.exited).toBe(1)
		expect(await new Response(child.stderr).text()).toContain(
			'latchkey: configuration: DATA_ENCRYPTION_KEY: required when NODE_ENV=production (32 random bytes, base64: openssl rand -base64 32)',
		)
	})

	test('a TOTP factor enrolled before a restart signs in after it: the key comes from the environment', async () => {
		service = await startBinary(at, env)
		const { email, secret } = await accountWithTotp()
		await stop()
		service = await startBinary(at, env)
		const mfaToken = await passwordStep(email)
		await awayFromStepBoundary()
		const done = await call('POST', '/api/auth/mfa', { mfaToken, method: 'totp', code: totpCode(secret, 1) })
		expect(done.status).toBe(200)
		const claims = JSON.parse(Buffer.from(done.body.data.accessToken.split('.')[1], 'base64url').toString())
		expect(claims).toMatchObject({ amr: ['pwd', 'otp', 'mfa'], aal: 'aal2' })
		// Nothing of the secret reached the log.
		expect(service.output()).not.toContain(secret)
	})

	test(`wrong codes from ten addresses at once: ${LOCKOUT_THRESHOLD} are looked at, the rest locked, and then the right code is locked out too`, async () => {
		service ??= await startBinary(at, env)
		const { email, recoveryCodes } = await accountWithTotp()
		const tokens: string[] = []
		for (let i = 0; i < 10; i++) tokens.push(await passwordStep(email))
		const answers = await Promise.all(tokens.map((mfaToken) => call('POST', '/api/auth/mfa', { mfaToken, method: 'totp', code: '000000' })))
		const statuses = answers.map((answer) => answer.status).sort()
		expect(statuses).toEqual([...Array(LOCKOUT_THRESHOLD).fill(401), ...Array(10 - LOCKOUT_THRESHOLD).fill(429)])
		const locked = answers.find((answer) => answer.status === 429)
		expect(Number(locked?.headers['retry-after'])).toBeGreaterThan(0)
		const right = await call('POST', '/api/auth/mfa', { mfaToken: await passwordStep(email), method: 'recovery-code', code: recoveryCodes[0] })
		expect(right.status).toBe(429)
		expect(right.body.type).toEndWith('/login-locked')
	})
})
