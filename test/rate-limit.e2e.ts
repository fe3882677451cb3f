/**
 * Budgets per real client (issue #11), against the compiled binary: every
 * client is a socket bound to its own loopback address (127.x.y.z; all of
 * 127/8 is loopback on Linux), so the service sees a real peer, as it would
 * on a network. Run with `bun test ./test/rate-limit.e2e.ts` after `bun run build`.
 *
 * Addresses are random per run (127.<run>.<n>), so runs that share a Redis never share a budget.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { RedisClient } from 'bun'
import { binaryFolder, client, requestFrom as request, startBinary, type Answer, type BinaryFolder, type RunningBinary } from './support/binary'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(60_000)

const TEST_REDIS_URL = process.env.TEST_REDIS_URL?.trim() || undefined
const METRICS_TOKEN = 'metrics-token-for-the-e2e-test-0123'
const BUDGETS = {
	RATE_LIMIT_MAX: '5',
	AUTH_RATE_LIMIT_MAX: '3',
	RATE_LIMIT_WINDOW_SECONDS: '60',
	LOCKOUT_THRESHOLD: '0',
	PASSWORD_HASH_MEMORY_KIB: '1024',
	PASSWORD_HASH_TIME_COST: '1',
	METRICS_TOKEN,
}

// Marks for this run's forwarded addresses and names (the socket addresses come from `client()`).
const run = 1 + Math.floor(Math.random() * 250)
let next = 1

const badLogin = (base: string, from: string, headers?: Record<string, string>) =>
	request(base, from, 'POST', '/api/auth/login', { json: { email: 'nobody@example.test', password: 'not a password at all' }, headers })
const statuses = async (answers: Array<Promise<Answer>>) => (await Promise.all(answers)).map((answer) => answer.status)
/** Requests one after another (a budget is counted in order). */
async function inTurn(count: number, send: () => Promise<Answer>) {
	const seen: number[] = []
	for (let i = 0; i < count; i++) seen.push((await send()).status)
	return seen
}

let at: BinaryFolder
const running: RunningBinary[] = []
let started = 0
/** An instance on its own embedded database (budgets need no shared one). */
async function start(env: Record<string, string>) {
	const instance = await startBinary(at, { ...BUDGETS, DATA_DIR: `${at.folder}/data-${started++}`, ...env })
	running.push(instance)
	return instance
}

beforeAll(() => {
	at = binaryFolder('limits')
})
afterAll(async () => {
	for (const instance of running) {
		instance.process.kill('SIGTERM')
		await instance.process.exited
	}
	at.remove()
})

describe('without TRUST_PROXY, in memory: each socket peer has its own budgets', () => {
	let service: RunningBinary
	beforeAll(async () => {
		service = await start({})
	})

	test('ten bad logins from one client lock out that client only, whatever X-Forwarded-For it sends', async () => {
		const attacker = client()
		expect(await inTurn(3, () => badLogin(service.base, attacker))).toEqual([401, 401, 401])
		const refused = await badLogin(service.base, attacker)
		expect(refused.status).toBe(429)
		expect(JSON.parse(refused.body).type).toBe('https://latchkey.dev/problems/rate-limited')
		expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0)
		// A forged header picks no fresh budget.
		expect(await statuses([1, 2, 3].map((i) => badLogin(service.base, attacker, { 'x-forwarded-for': `198.51.100.${i}` })))).toEqual([
			429, 429, 429,
		])
		// Everyone else still logs in, refreshes and logs out from their own address.
		expect(await statuses([client(), client(), client()].map((from) => badLogin(service.base, from)))).toEqual([401, 401, 401])
	})

	test('the mail routes and code guesses spend the same /auth budget, per client: fired in parallel, three pass', async () => {
		const guesser = client()
		const mailRoutes = [
			() => request(service.base, guesser, 'POST', '/api/auth/recovery-requests', { json: { email: 'victim@example.test' } }),
			() => request(service.base, guesser, 'POST', '/api/auth/password-resets', { json: { email: 'victim@example.test', code: '123456', password: 'a guessed passphrase' } }),
			() => request(service.base, guesser, 'POST', '/api/auth/email-verifications', { json: { email: 'victim@example.test', code: '654321' } }),
			() => request(service.base, guesser, 'POST', '/api/auth/mfa', { json: { mfaToken: 'guessed', method: 'totp', code: '123456' } }),
		]
		const answers = await statuses(Array.from({ length: 12 }, (_, i) => (mailRoutes[i % 4] as () => Promise<Answer>)()))
		expect(answers.filter((status) => status === 429)).toHaveLength(9)
		expect(answers.filter((status) => status !== 429).every((status) => [202, 400, 401].includes(status))).toBe(true)
		// Another address still has its whole budget.
		expect((await request(service.base, client(), 'POST', '/api/auth/recovery-requests', { json: { email: 'victim@example.test' } })).status).toBe(202)
	})

	test('the general budget is per client too', async () => {
		const greedy = client()
		expect(await inTurn(6, () => request(service.base, greedy, 'GET', '/api/users/me'))).toEqual([401, 401, 401, 401, 401, 429])
		expect((await request(service.base, client(), 'GET', '/api/users/me')).status).toBe(401)
	})

	test('a refused request is logged and counted as a 429', async () => {
		const greedy = client()
		expect(await inTurn(6, () => request(service.base, greedy, 'GET', '/api/no-such-route'))).toEqual([404, 404, 404, 404, 404, 429])
		// Requests are counted and logged once their answer is sent: wait for the last one's line.
		const scrape = () => request(service.base, client(), 'GET', '/metrics', { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
		const refusedAsNotFound = /latchkey_http_requests_total\{method="GET",route="\/\*",status="429"\} 1\n/
		let metrics = await scrape()
		for (let waited = 0; !refusedAsNotFound.test(metrics.body) && waited < 5000; waited += 100) {
			await Bun.sleep(100)
			metrics = await scrape()
		}
		expect(metrics.status).toBe(200)
		expect(metrics.body).toMatch(refusedAsNotFound)
		expect(metrics.body).toMatch(/latchkey_http_requests_total\{method="GET",route="\/\*",status="404"\} 5\n/)
		expect(metrics.body).toMatch(/latchkey_http_requests_total\{method="POST",route="\/api\/auth\/login",status="429"\} [1-9]/)
		expect(service.output()).toMatch(/"route":"\/\*","status":429/)
	})
})

describe('with TRUST_PROXY: X-Forwarded-For is believed from the listed proxy only', () => {
	const proxy = client()
	let service: RunningBinary
	beforeAll(async () => {
		service = await start({ TRUST_PROXY: proxy })
	})

	test('behind the proxy each forwarded client has its own budget', async () => {
		const forwarded = (address: string) => ({ 'x-forwarded-for': address })
		expect(await inTurn(4, () => badLogin(service.base, proxy, forwarded('198.51.100.10')))).toEqual([401, 401, 401, 429])
		expect((await badLogin(service.base, proxy, forwarded('198.51.100.11'))).status).toBe(401)
		// The proxy's own requests (no header) are a client of their own.
		expect((await badLogin(service.base, proxy)).status).toBe(401)
	})

	test('a client that is not the proxy cannot pick a budget through the header', async () => {
		const direct = client()
		const answers = await inTurn(6, () => badLogin(service.base, direct, { 'x-forwarded-for': `203.0.113.${next++ % 250}` }))
		expect(answers).toEqual([401, 401, 401, 429, 429, 429])
	})

	test('IPv6 clients behind the proxy are budgeted per /64', async () => {
		const forwarded = (address: string) => ({ 'x-forwarded-for': address })
		const network = `2001:db8:${run.toString(16)}:${(next++).toString(16)}`
		const sameNetwork = [`${network}::1`, `${network}::ffff`, `${network}:abcd::5`, `${network}:1:2:3:4`]
		expect(await inTurn(4, () => badLogin(service.base, proxy, forwarded(sameNetwork[next++ % 4] ?? '')))).toEqual([401, 401, 401, 429])
		expect((await badLogin(service.base, proxy, forwarded(`2001:db8:${run.toString(16)}:ffff::1`))).status).toBe(401)
	})

	test('a malformed forwarded hop is a client of its own, never the proxy', async () => {
		const garbage = { 'x-forwarded-for': `not-an-address-${run}-${next++}` }
		expect(await inTurn(4, () => badLogin(service.base, proxy, garbage))).toEqual([401, 401, 401, 429])
		// The proxy's own budget, and its other clients', are untouched.
		expect((await request(service.base, proxy, 'GET', '/api/users/me')).status).toBe(401)
		expect((await badLogin(service.base, proxy, { 'x-forwarded-for': '198.51.100.99' })).status).toBe(401)
	})
})

if (TEST_REDIS_URL) {
	describe('with Redis: two instances share each client’s budget, and only that client’s', () => {
		let first: RunningBinary
		let second: RunningBinary
		let redis: RedisClient
		const prefixKeys: string[] = []
		beforeAll(async () => {
			redis = new RedisClient(TEST_REDIS_URL)
			;[first, second] = await Promise.all([start({ REDIS_URL: TEST_REDIS_URL }), start({ REDIS_URL: TEST_REDIS_URL })])
		})
		afterAll(async () => {
			for (const key of prefixKeys) await redis.del(key)
			redis.close()
		})

		test('bad logins from one client spread over both instances spend one budget; other clients are untouched', async () => {
			const attacker = client()
			const instances = [first, second, first, second]
			const seen: number[] = []
			for (const instance of instances) seen.push((await badLogin(instance.base, attacker)).status)
			expect(seen).toEqual([401, 401, 401, 429])
			expect(await statuses([first, second].map((instance) => badLogin(instance.base, client())))).toEqual([401, 401])
			const key = `latchkey:rate:auth:${attacker}`
			prefixKeys.push(key, `latchkey:rate:general:${attacker}`)
			expect(Number(await redis.get(key))).toBe(4)
			// Nobody shares the old catch-all budget any more.
			expect(await redis.exists('latchkey:rate:auth:unknown')).toBe(false)
		})
	})
}

describe('the provider’s token endpoint: one client’s secret guessed from many addresses at once', () => {
	// The client named in the Authorization header, or in the form body (the budget reads it from the body the parse hook read).
	for (const method of ['client_secret_basic', 'client_secret_post'] as const)
		test(`fired together from eight addresses, exactly AUTH_RATE_LIMIT_MAX guesses reach the secret check; another client keeps its own budget (${method})`, async () => {
			const admin = { email: `admin-${run}-${next}@example.test`, password: 'correct horse battery staple' }
			const service = await start({ LATCHKEY_ADMIN_EMAIL: admin.email, LATCHKEY_ADMIN_PASSWORD: admin.password })
			const operator = client()
			const login = await request(service.base, operator, 'POST', '/api/auth/login', { json: admin })
			expect(login.status).toBe(200)
			const authorization = `Bearer ${JSON.parse(login.body).data.accessToken}`
			const register = async (name: string) => {
				const created = await request(service.base, operator, 'POST', '/api/oauth-clients', {
					json: { name, type: 'confidential', redirectUris: ['https://app.example.test/callback'], grantTypes: ['client_credentials'], tokenEndpointAuthMethod: method },
					headers: { authorization },
				})
				expect(created.status).toBe(201)
				return JSON.parse(created.body).data.clientId as string
			}
			const target = await register('Target')
			const other = await register('Other')
			const guess = (clientId: string, from: string) =>
				method === 'client_secret_basic'
					? request(service.base, from, 'POST', '/oauth2/token', {
							form: { grant_type: 'client_credentials' },
							headers: { authorization: `Basic ${Buffer.from(`${clientId}:guess-${from}`).toString('base64')}` },
						})
					: request(service.base, from, 'POST', '/oauth2/token', { form: { grant_type: 'client_credentials', client_id: clientId, client_secret: `guess-${from}` } })
			const answers = await statuses(Array.from({ length: 8 }, () => guess(target, client())))
			expect(answers.filter((status) => status === 401)).toHaveLength(3)
			expect(answers.filter((status) => status === 429)).toHaveLength(5)
			expect((await guess(other, client())).status).toBe(401)
			// Refused in the protocol's own JSON (RFC 6749 §5.2), as an OAuth library reads it; never problem+json.
			const refused = await guess(target, client())
			expect(refused.status).toBe(429)
			expect(refused.headers['content-type']).toBe('application/json; charset=utf-8')
			expect(JSON.parse(refused.body)).toEqual({ error: 'temporarily_unavailable', error_description: `Too many requests; try again in ${refused.headers['retry-after']} seconds` })
		})
})
