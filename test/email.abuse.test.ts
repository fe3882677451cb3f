import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { RedisCounterStore } from '../src/db/counters'
import { createLogger } from '../src/log'
import { problem, startTestApp, type CallResult, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { PASSWORD, signUp, signUpAdmin, uniqueEmail } from './support/fixtures'
import { countJobs, mailJobs, proofOf, SmtpSink, SUBJECT } from './support/mail'

setDefaultTimeout(60_000)

const TEST_REDIS_URL = process.env.TEST_REDIS_URL?.trim() || undefined
const APP_URL = 'https://app.example.test'
const NEW_PASSWORD = 'a brand new passphrase'
const ACCEPTED = { data: null, message: 'If an account can use it, a mail is on its way', errors: [] }
const INVALID = 'The token or code is wrong, used or replaced by a newer one; ask for a new mail'
const REQUEST_ROUTES = ['/api/auth/verification-requests', '/api/auth/recovery-requests'] as const

// One database and one SMTP server for the file. Each describe runs its own app, closed before the next one
// starts: two live apps on one database would each run the other's jobs, with their own settings.
let database: TestDatabase
let sink: SmtpSink
beforeAll(async () => {
	database = await createTestDatabase()
	sink = await SmtpSink.start()
})
afterAll(async () => {
	await sink.stop()
	await database.drop()
})

/** An app for one describe: started before its tests, closed after them. */
function appFor(env: Record<string, string>) {
	const holder: { t: TestApp } = {} as { t: TestApp }
	beforeAll(async () => {
		holder.t = await startTestApp({ SMTP_URL: sink.url, APP_URL, ...env }, database)
	})
	afterAll(() => holder.t.close())
	return holder
}

const requestMail = (t: TestApp, path: string, json: unknown, headers: Record<string, string> = {}) => t.call('POST', path, { json, headers })
const verify = (t: TestApp, json: unknown) => t.call('POST', '/api/auth/email-verifications', { json })
const reset = (t: TestApp, json: unknown) => t.call('POST', '/api/auth/password-resets', { json })
const otherCode = (code: string, step = 1) => String((Number(code) + step) % 1_000_000).padStart(6, '0')

/** Headers as a plain object, without the ones that differ from request to request by design. */
function stableHeaders(res: CallResult): Record<string, string> {
	const headers = Object.fromEntries(res.headers.entries())
	expect(headers['x-request-id']).toBeTruthy()
	delete headers['x-request-id']
	delete headers.date
	return headers
}

describe('no enumeration: the two request routes answer alike for every address', () => {
	const app = appFor({ MAIL_RESEND_SECONDS: '0' })
	const accounts: Record<'unknown' | 'verified' | 'unverified' | 'deactivated', string> = { unknown: '', verified: '', unverified: '', deactivated: '' }

	beforeAll(async () => {
		const { t } = app
		const admin = await signUpAdmin(t)
		accounts.unknown = uniqueEmail('unknown')
		const verified = await signUp(t)
		const { token } = proofOf(await sink.waitFor(verified.email, { subject: SUBJECT.verification }))
		expect((await verify(t, { token })).status).toBe(200)
		accounts.verified = verified.email
		accounts.unverified = (await signUp(t)).email
		const deactivated = await signUp(t)
		expect((await t.call('DELETE', `/api/users/${deactivated.id}`, { token: admin.accessToken })).body.data.status).toBe('deactivated')
		accounts.deactivated = deactivated.email
		await t.app.decorator.jobs.idle()
		await sink.waitFor(accounts.unverified, { subject: SUBJECT.verification })
		await sink.waitFor(accounts.deactivated, { subject: SUBJECT.verification })
	})

	const expectedMail: Record<(typeof REQUEST_ROUTES)[number], { subject: string; receivers: Array<keyof typeof accounts> }> = {
		'/api/auth/verification-requests': { subject: SUBJECT.verification, receivers: ['unverified'] },
		'/api/auth/recovery-requests': { subject: SUBJECT.recovery, receivers: ['verified', 'unverified'] },
	}

	for (const path of REQUEST_ROUTES)
		test(`${path}: the same status, body and headers for an unknown, a verified, an unverified and a deactivated address; one request job each; mail only where an active account can use it`, async () => {
			const { t } = app
			const kinds = Object.keys(accounts) as Array<keyof typeof accounts>
			const mailsBefore = Object.fromEntries(kinds.map((kind) => [kind, sink.to(accounts[kind]).length]))
			const outboxBefore = await countJobs(database, 'mail')
			const answers: CallResult[] = []
			for (const kind of kinds) {
				const before = await countJobs(database, 'mail-request')
				answers.push(await requestMail(t, path, { email: accounts[kind] }))
				expect(await countJobs(database, 'mail-request')).toBe(before + 1)
			}

			const [first, ...rest] = answers as [CallResult, ...CallResult[]]
			expect(first.status).toBe(202)
			expect(first.body).toEqual(ACCEPTED)
			expect(first.headers.get('content-type')).toBe('application/json;charset=utf-8')
			for (const answer of rest) {
				expect(answer.status).toBe(first.status)
				expect(answer.text).toBe(first.text)
				expect([...answer.headers.keys()].sort()).toEqual([...first.headers.keys()].sort())
				expect(stableHeaders(answer)).toEqual(stableHeaders(first))
			}

			await t.app.decorator.jobs.idle()
			const { subject, receivers } = expectedMail[path]
			for (const kind of receivers) await sink.waitFor(accounts[kind], { count: (mailsBefore[kind] as number) + 1 })
			await t.app.decorator.jobs.idle()
			const received = Object.fromEntries(kinds.map((kind) => [kind, sink.to(accounts[kind]).length - (mailsBefore[kind] as number)]))
			expect(received).toEqual(Object.fromEntries(kinds.map((kind) => [kind, receivers.includes(kind) ? 1 : 0])))
			for (const kind of receivers) expect(sink.to(accounts[kind]).at(-1)?.subject).toContain(subject)
			// Not even queued for the others: the outbox grew by the mails that went.
			expect(await countJobs(database, 'mail')).toBe(outboxBefore + receivers.length)
			expect(await mailJobs(database, path.includes('recovery') ? 'recovery' : 'verification', accounts.unknown)).toEqual([])
		})

	test('an address in another letter case or with spaces is the same address, and gets the same answer', async () => {
		const { t } = app
		const count = sink.to(accounts.verified, SUBJECT.recovery).length
		const res = await requestMail(t, '/api/auth/recovery-requests', { email: `  ${accounts.verified.toUpperCase()} ` })
		expect(res.status).toBe(202)
		expect(res.body).toEqual(ACCEPTED)
		const mail = await sink.waitFor(accounts.verified, { subject: SUBJECT.recovery, count: count + 1 })
		expect(mail.to).toBe(accounts.verified)
	})

	test('with MAIL_RESEND_SECONDS=0 two requests in a row send two mails, and only the newer one’s code works', async () => {
		const { t } = app
		const user = await signUp(t)
		for (let i = 0; i < 2; i++) expect((await requestMail(t, '/api/auth/recovery-requests', { email: user.email })).status).toBe(202)
		const second = await sink.waitFor(user.email, { subject: SUBJECT.recovery, count: 2 })
		await t.app.decorator.jobs.idle()
		expect(sink.to(user.email, SUBJECT.recovery)).toHaveLength(2)
		const first = sink.to(user.email, SUBJECT.recovery)[0] as { text: string }
		const older = proofOf(first)
		const newer = proofOf(second)
		expect(newer.token).not.toBe(older.token)
		expect((await reset(t, { token: older.token, password: NEW_PASSWORD })).status).toBe(400)
		expect((await reset(t, { token: newer.token, password: NEW_PASSWORD })).status).toBe(200)
	})
})

describe('a body that is not one email address', () => {
	const app = appFor({ MAIL_RESEND_SECONDS: '0' })
	const cases: Array<[string, unknown, Array<{ pointer: string; code: string; detail: string }>]> = [
		['not an address', { email: 'nope' }, [{ pointer: '#/email', code: 'format', detail: 'must be an email address' }]],
		['empty', { email: '' }, [{ pointer: '#/email', code: 'format', detail: 'must be an email address' }]],
		['a number', { email: 5 }, [{ pointer: '#/email', code: 'type', detail: 'must be an email address' }]],
		['an array of addresses', { email: ['a@example.test', 'b@example.test'] }, [{ pointer: '#/email', code: 'type', detail: 'must be an email address' }]],
		['missing', {}, [{ pointer: '#/email', code: 'required', detail: 'is required' }]],
		['with an extra member', { email: 'a@example.test', name: 'x' }, [{ pointer: '#/name', code: 'additionalProperties', detail: 'is not a recognised field' }]],
		['not an object', ['a@example.test'], [{ pointer: '#', code: 'type', detail: 'must be a JSON object' }]],
	]
	for (const path of REQUEST_ROUTES)
		for (const [what, body, errors] of cases)
			test(`${path}, email ${what}: 422 problem+json naming the field, and nothing queued`, async () => {
				const before = await countJobs(database, 'mail-request')
				const res = await requestMail(app.t, path, body)
				expect(res.status).toBe(422)
				expect(res.headers.get('content-type')).toBe('application/problem+json')
				expect(res.body).toEqual(problem('validation-error', 422, path, '1 field is invalid', errors))
				expect(await countJobs(database, 'mail-request')).toBe(before)
			})
})

describe('the resend limit (MAIL_RESEND_SECONDS, default 60)', () => {
	const app = appFor({})

	test('two recovery requests in a row: one mail, and the second request voids nothing', async () => {
		const { t } = app
		const user = await signUp(t)
		const requestsBefore = await countJobs(database, 'mail-request')
		for (let i = 0; i < 2; i++) expect((await requestMail(t, '/api/auth/recovery-requests', { email: user.email })).body).toEqual(ACCEPTED)
		expect(await countJobs(database, 'mail-request')).toBe(requestsBefore + 2)
		const mail = await sink.waitFor(user.email, { subject: SUBJECT.recovery })
		await t.app.decorator.jobs.idle()
		expect(sink.to(user.email, SUBJECT.recovery)).toHaveLength(1)
		expect(await mailJobs(database, 'recovery', user.email)).toHaveLength(1)
		expect((await reset(t, { token: proofOf(mail).token, password: NEW_PASSWORD })).status).toBe(200)
	})

	test('the limit is per kind: the sign-up mail holds back a verification request, not a recovery request', async () => {
		const { t } = app
		const user = await signUp(t)
		await sink.waitFor(user.email, { subject: SUBJECT.verification })
		expect((await requestMail(t, '/api/auth/verification-requests', { email: user.email })).status).toBe(202)
		expect((await requestMail(t, '/api/auth/recovery-requests', { email: user.email })).status).toBe(202)
		await sink.waitFor(user.email, { subject: SUBJECT.recovery })
		await t.app.decorator.jobs.idle()
		expect(sink.to(user.email, SUBJECT.verification)).toHaveLength(1)
		expect(sink.to(user.email, SUBJECT.recovery)).toHaveLength(1)
	})

	test('and per address: another account’s request still gets its mail', async () => {
		const { t } = app
		const [one, two] = [await signUp(t), await signUp(t)]
		for (const user of [one, two, one, two]) expect((await requestMail(t, '/api/auth/recovery-requests', { email: user.email })).status).toBe(202)
		await sink.waitFor(one.email, { subject: SUBJECT.recovery })
		await sink.waitFor(two.email, { subject: SUBJECT.recovery })
		await t.app.decorator.jobs.idle()
		expect([sink.to(one.email, SUBJECT.recovery).length, sink.to(two.email, SUBJECT.recovery).length]).toEqual([1, 1])
	})

	test('20 requests at once for one address: 20 answers of 202, 20 request jobs, exactly one mail', async () => {
		const { t } = app
		const user = await signUp(t)
		const requestsBefore = await countJobs(database, 'mail-request')
		const answers = await Promise.all(Array.from({ length: 20 }, () => requestMail(t, '/api/auth/recovery-requests', { email: user.email })))
		expect(answers.map((answer) => answer.status)).toEqual(Array(20).fill(202))
		expect(new Set(answers.map((answer) => answer.text)).size).toBe(1)
		expect(await countJobs(database, 'mail-request')).toBe(requestsBefore + 20)
		const mail = await sink.waitFor(user.email, { subject: SUBJECT.recovery })
		await t.app.decorator.jobs.idle()
		expect(sink.to(user.email, SUBJECT.recovery)).toHaveLength(1)
		expect(await mailJobs(database, 'recovery', user.email)).toHaveLength(1)
		expect((await reset(t, { email: user.email, code: proofOf(mail).code, password: NEW_PASSWORD })).status).toBe(200)
	})
})

describe('code guessing', () => {
	const app = appFor({ MAIL_RESEND_SECONDS: '0' })

	test('four wrong codes leave the right one working: the fifth wrong one is what voids it', async () => {
		const { t } = app
		const user = await signUp(t)
		expect((await requestMail(t, '/api/auth/recovery-requests', { email: user.email })).status).toBe(202)
		const { code } = proofOf(await sink.waitFor(user.email, { subject: SUBJECT.recovery }))
		for (let i = 1; i <= 4; i++)
			expect((await reset(t, { email: user.email, code: otherCode(code, i), password: NEW_PASSWORD })).body).toEqual(
				problem('invalid-code', 400, '/api/auth/password-resets', INVALID),
			)
		expect((await reset(t, { email: user.email, code, password: NEW_PASSWORD })).status).toBe(200)
	})

	test('wrong codes at /auth/email-verifications spend the verification code only, never a recovery code of the same address', async () => {
		const { t } = app
		const user = await signUp(t)
		const verification = proofOf(await sink.waitFor(user.email, { subject: SUBJECT.verification }))
		expect((await requestMail(t, '/api/auth/recovery-requests', { email: user.email })).status).toBe(202)
		const recovery = proofOf(await sink.waitFor(user.email, { subject: SUBJECT.recovery }))
		const wrong = ['000000', '000001', '000002'].find((c) => c !== verification.code && c !== recovery.code) as string
		for (let i = 0; i < 5; i++) expect((await verify(t, { email: user.email, code: wrong })).status).toBe(400)
		expect((await verify(t, { email: user.email, code: verification.code })).body).toEqual(
			problem('invalid-code', 400, '/api/auth/email-verifications', INVALID),
		)
		expect((await reset(t, { email: user.email, code: recovery.code, password: NEW_PASSWORD })).status).toBe(200)
	})

	test('a code voided by guessing is replaced by asking for a new mail, whose code has its own five tries', async () => {
		const { t } = app
		const user = await signUp(t)
		const first = proofOf(await sink.waitFor(user.email, { subject: SUBJECT.verification }))
		for (let i = 1; i <= 5; i++) expect((await verify(t, { email: user.email, code: otherCode(first.code, i) })).status).toBe(400)
		expect((await verify(t, { email: user.email, code: first.code })).status).toBe(400)
		expect((await requestMail(t, '/api/auth/verification-requests', { email: user.email })).status).toBe(202)
		const second = proofOf(await sink.waitFor(user.email, { subject: SUBJECT.verification, count: 2 }))
		const res = await verify(t, { email: user.email, code: second.code })
		expect(res.status).toBe(200)
		expect(res.body.data).toMatchObject({ email: user.email, emailVerified: true })
	})
})

describe('the /auth rate limit covers the email routes', () => {
	const app = appFor({ MAIL_RESEND_SECONDS: '0', RATE_LIMIT_MAX: '100', AUTH_RATE_LIMIT_MAX: '4', TRUST_PROXY: '10.0.0.0/8' })
	const from = (ip: string) => ({ 'x-forwarded-for': ip })

	test('every email route spends the budget whatever its answer; then each is 429 with Retry-After, queues nothing and counts no guess', async () => {
		const { t } = app
		const email = uniqueEmail('limited')
		const created = await t.call('POST', '/api/users', { json: { email, password: PASSWORD, name: 'Lim' }, headers: from('192.0.2.200') })
		expect(created.status).toBe(201)
		const { code } = proofOf(await sink.waitFor(email, { subject: SUBJECT.verification }))
		const wrong = otherCode(code)

		const attacker = from('192.0.2.201')
		const spent = [
			await t.call('POST', '/api/auth/verification-requests', { json: { email: uniqueEmail('nobody') }, headers: attacker }),
			await t.call('POST', '/api/auth/recovery-requests', { json: { email: 'nope' }, headers: attacker }),
			await t.call('POST', '/api/auth/email-verifications', { json: { email, code: wrong }, headers: attacker }),
			await t.call('POST', '/api/auth/password-resets', { json: { email, code: wrong, password: NEW_PASSWORD }, headers: attacker }),
		]
		expect(spent.map((res) => [res.status, res.headers.get('ratelimit-limit'), res.headers.get('ratelimit-remaining')])).toEqual([
			[202, '4', '3'],
			[422, '4', '2'],
			[400, '4', '1'],
			[400, '4', '0'],
		])

		const requestsBefore = await countJobs(database, 'mail-request')
		const refused: Array<[string, unknown]> = [
			['/api/auth/verification-requests', { email }],
			['/api/auth/recovery-requests', { email }],
			...Array.from({ length: 5 }, (_, i): [string, unknown] => ['/api/auth/email-verifications', { email, code: otherCode(code, i + 2) }]),
			['/api/auth/password-resets', { email, code: wrong, password: NEW_PASSWORD }],
		]
		for (const [path, json] of refused) {
			const res = await t.call('POST', path, { json, headers: attacker })
			expect(res.status).toBe(429)
			expect(res.headers.get('content-type')).toBe('application/problem+json')
			const retryAfter = Number(res.headers.get('retry-after'))
			expect(retryAfter).toBeGreaterThan(0)
			expect(retryAfter).toBeLessThanOrEqual(60)
			expect(res.headers.get('ratelimit-remaining')).toBe('0')
			expect(res.body).toEqual(problem('rate-limited', 429, path, `Too many requests; try again in ${retryAfter} seconds`))
		}
		expect(await countJobs(database, 'mail-request')).toBe(requestsBefore)

		// Another client is not held back; and the refused guesses never reached the code: one wrong try so far, so it still works.
		const other = from('192.0.2.202')
		const verified = await t.call('POST', '/api/auth/email-verifications', { json: { email, code }, headers: other })
		expect(verified.status).toBe(200)
		expect(verified.headers.get('ratelimit-remaining')).toBe('3')
	})

	if (TEST_REDIS_URL)
		test('with Redis, two instances share the budget on the email routes', async () => {
			const prefix = `latchkey-test-${crypto.randomUUID()}:`
			const stores = [0, 1].map(() => new RedisCounterStore(TEST_REDIS_URL, createLogger('silent'), prefix))
			const env = { SMTP_URL: sink.url, APP_URL, MAIL_RESEND_SECONDS: '0', RATE_LIMIT_MAX: '100', AUTH_RATE_LIMIT_MAX: '4', TRUST_PROXY: '10.0.0.0/8' }
			const [a, b] = [await startTestApp(env, database, { counters: stores[0] }), await startTestApp(env, database, { counters: stores[1] })] as [TestApp, TestApp]
			try {
				const statuses = []
				for (const instance of [a, b, a, b, a, b])
					statuses.push((await requestMail(instance, '/api/auth/recovery-requests', { email: uniqueEmail('shared') }, from('192.0.2.210'))).status)
				expect(statuses).toEqual([202, 202, 202, 202, 429, 429])
			} finally {
				await a.close()
				await b.close()
				for (const store of stores) await store?.close()
			}
		})
})
