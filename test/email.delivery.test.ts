import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { problem, startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { closedAfterEachTest } from './support/running'
import { eq } from 'drizzle-orm'
import { jobs } from '../src/db/schema'
import { login, PASSWORD, signUp, uniqueEmail } from './support/fixtures'
import { countJobs, loggedMail, mailJobs, proofOf, SmtpSink, SUBJECT, waitForMailJob } from './support/mail'

setDefaultTimeout(60_000)

const APP_URL = 'https://app.example.test'
/** Fast retries and polls (every tenth of a second), so that a refused mail is tried again as soon as its second is up. */
const FAST_JOBS = { JOB_RETRY_SECONDS: '1', JOB_POLL_SECONDS: '0.1', MAIL_RESEND_SECONDS: '0', EMAIL_VERIFICATION: 'off', APP_URL }
/**
 * Retries a quarter second apart (then half, then one). A test that leaves its mail failing removes it from the
 * outbox at its end (forget): the next test's app, on the same database, would otherwise retry it meanwhile.
 */
const QUICK_RETRIES = { JOB_RETRY_SECONDS: '0.25' }

/** Takes a mail that is still failing out of the outbox (see QUICK_RETRIES). */
const forget = (job: { id: string }) => database.handle.db.delete(jobs).where(eq(jobs.id, job.id))

// One database for the file; each test runs its own app and SMTP server on it, closed before the next starts.
let database: TestDatabase
beforeAll(async () => {
	database = await createTestDatabase()
})
const closeAfterTest = closedAfterEachTest()
afterAll(() => database.drop())

async function sinkAndApp(options: Parameters<typeof SmtpSink.start>[0] = {}, env: Record<string, string> = {}) {
	const sink = await SmtpSink.start(options)
	closeAfterTest({ close: () => sink.stop() })
	const t = await startTestApp({ SMTP_URL: sink.url, ...FAST_JOBS, ...env }, database)
	closeAfterTest(t)
	return { sink, t }
}

const requestRecovery = (t: TestApp, email: string) => t.call('POST', '/api/auth/recovery-requests', { json: { email } })

/** The recovery mail's outbox row once an attempt has failed and the next is scheduled (no attempt in flight). */
const failedAtLeast = (attempts: number) => (job: { attempts: number; lastError: string | null; lockedUntil: Date | null }) =>
	job.attempts >= attempts && job.lastError !== null && job.lockedUntil === null

/** After delivery: the row is finished as done, its payload (which held the link) gone, its last error cleared. */
function expectDelivered(job: Awaited<ReturnType<typeof mailJobs>>[number] | undefined, minAttempts: number) {
	expect(job).toMatchObject({ queue: 'mail', outcome: 'done', payload: null, lastError: null, lockedUntil: null })
	expect(job?.attempts).toBeGreaterThanOrEqual(minAttempts)
	expect(job?.finishedAt).toBeInstanceOf(Date)
}

describe('an SMTP server that refuses for a while', () => {
	for (const code of [451, 550]) {
		test(`a ${code} refusal is retried, and once the server accepts, the mail arrives exactly once`, async () => {
			const { sink, t } = await sinkAndApp({}, QUICK_RETRIES)
			const user = await signUp(t)
			sink.refuseWith = code
			expect((await requestRecovery(t, user.email)).status).toBe(202)

			const refused = await waitForMailJob(database, 'recovery', user.email, failedAtLeast(2))
			// Still pending, with the reply code kept as the reason and the mail still to send.
			expect(refused).toMatchObject({ outcome: null, finishedAt: null, lastError: expect.stringContaining(`SMTP ${code}`) })
			expect(refused.payload).toMatchObject({ kind: 'recovery', to: user.email })
			expect(sink.to(user.email)).toHaveLength(0)

			sink.refuseWith = undefined
			const mail = await sink.waitFor(user.email, { subject: SUBJECT.recovery })
			await t.app.decorator.jobs.idle()
			const [job, ...more] = await mailJobs(database, 'recovery', user.email)
			expect(more).toHaveLength(0)
			expectDelivered(job, 3)
			expect(sink.to(user.email)).toHaveLength(1)
			// The mail that finally went is the one that was asked for: its code resets the password.
			const { code: proof } = proofOf(mail)
			const reset = await t.call('POST', '/api/auth/password-resets', { json: { email: user.email, code: proof, password: 'a brand new passphrase' } })
			expect(reset.status).toBe(200)
		})
	}
})

describe('an SMTP server that is down', () => {
	test('the request is still a 202; the mail waits in the outbox and arrives exactly once when the server is back', async () => {
		const { sink, t } = await sinkAndApp({}, QUICK_RETRIES)
		const user = await signUp(t)
		await sink.stop()
		expect((await requestRecovery(t, user.email)).status).toBe(202)
		const waiting = await waitForMailJob(database, 'recovery', user.email, failedAtLeast(1))
		expect(waiting.outcome).toBeNull()
		expect(waiting.lastError).not.toContain(user.email)

		await sink.restart()
		await sink.waitFor(user.email, { subject: SUBJECT.recovery })
		await t.app.decorator.jobs.idle()
		const [job, ...more] = await mailJobs(database, 'recovery', user.email)
		expect(more).toHaveLength(0)
		expectDelivered(job, 2)
		expect(sink.to(user.email)).toHaveLength(1)
	})

	test('a mail queued while the service was stopped is sent by the next one to start', async () => {
		const { sink, t } = await sinkAndApp({}, QUICK_RETRIES)
		const user = await signUp(t)
		await sink.stop()
		expect((await requestRecovery(t, user.email)).status).toBe(202)
		await waitForMailJob(database, 'recovery', user.email, failedAtLeast(1))
		await t.close()

		await sink.restart()
		const next = await startTestApp({ SMTP_URL: sink.url, ...FAST_JOBS }, database)
		closeAfterTest(next)
		await sink.waitFor(user.email, { subject: SUBJECT.recovery })
		await next.app.decorator.jobs.idle()
		expectDelivered((await mailJobs(database, 'recovery', user.email))[0], 2)
		expect(sink.to(user.email)).toHaveLength(1)
	})
})

describe('TLS and credentials', () => {
	test('smtp:// with credentials upgrades with STARTTLS and logs in', async () => {
		const { sink, t } = await sinkAndApp({ credentials: { user: 'latchkey', pass: 'smtp-secret-1' } })
		expect(sink.url).toStartWith('smtp://latchkey:smtp-secret-1@')
		const user = await signUp(t)
		expect((await requestRecovery(t, user.email)).status).toBe(202)
		const mail = await sink.waitFor(user.email, { subject: SUBJECT.recovery })
		expect(mail.secure).toBe(true)
		expect(mail.user).toBe('latchkey')
		expect(sink.logins).toEqual([{ user: 'latchkey', secure: true }])
	})

	test('smtp:// with credentials to a server that offers no STARTTLS sends nothing: the password never crosses in clear', async () => {
		const { sink, t } = await sinkAndApp({ credentials: { user: 'latchkey', pass: 'smtp-secret-2' }, startTls: false }, QUICK_RETRIES)
		const user = await signUp(t)
		expect((await requestRecovery(t, user.email)).status).toBe(202)
		const job = await waitForMailJob(database, 'recovery', user.email, failedAtLeast(2))
		expect(job).toMatchObject({ outcome: null, lastError: expect.stringMatching(/^ETLS\b/) })
		expect(sink.logins).toEqual([])
		expect(sink.to(user.email)).toHaveLength(0)
		await forget(job)
	})

	test('smtps:// is TLS from the first byte', async () => {
		const { sink, t } = await sinkAndApp({ secure: true })
		expect(sink.url).toStartWith('smtps://')
		const user = await signUp(t)
		expect((await requestRecovery(t, user.email)).status).toBe(202)
		const mail = await sink.waitFor(user.email, { subject: SUBJECT.recovery })
		expect(mail.secure).toBe(true)
		expect(mail.user).toBeUndefined()
	})

	test('wrong credentials: the mail is retried, and neither the stored error nor any log line holds the address or the password', async () => {
		const password = 'wrong-smtp-password-7f3a'
		const sink = await SmtpSink.start({ credentials: { user: 'latchkey', pass: 'the-right-one' } })
		closeAfterTest({ close: () => sink.stop() })
		const t = await startTestApp(
			{ SMTP_URL: sink.url.replace('the-right-one', password), ...FAST_JOBS, ...QUICK_RETRIES, EMAIL_VERIFICATION: 'off' },
			database,
		)
		closeAfterTest(t)
		expect(t.config.mail.smtpUrl).toContain(password)
		const user = await signUp(t)
		expect((await requestRecovery(t, user.email)).status).toBe(202)

		const job = await waitForMailJob(database, 'recovery', user.email, failedAtLeast(2))
		expect(job.outcome).toBeNull()
		expect(job.lastError).toBe('EAUTH SMTP 535 after AUTH')
		expect(sink.to(user.email)).toHaveLength(0)
		const retries = t.logs.filter((line) => line.includes('job failed; retrying later'))
		expect(retries.length).toBeGreaterThanOrEqual(1)
		expect(JSON.parse(retries[0] as string)).toMatchObject({ queue: 'mail', error: 'EAUTH SMTP 535 after AUTH', retryInSeconds: 0.25 })
		for (const line of t.logs) {
			expect(line).not.toContain(password)
			expect(line).not.toContain(user.email)
		}
		await forget(job)
	})
})

describe('without SMTP_URL', () => {
	test('in development each mail is written to the log, link and code included, and the outbox row finishes', async () => {
		const t = await startTestApp({ NODE_ENV: 'development', APP_URL, MAIL_RESEND_SECONDS: '0', EMAIL_VERIFICATION: 'off' }, database)
		closeAfterTest(t)
		const user = await signUp(t)
		expect((await requestRecovery(t, user.email)).status).toBe(202)
		const mail = await loggedMail(t, user.email)
		expect(mail).toMatchObject({ kind: 'recovery', subject: 'Reset your Latchkey password' })
		const { link, code } = proofOf(mail)
		expect(link).toStartWith(`${APP_URL}/reset-password#token=`)
		await t.app.decorator.jobs.idle()
		expectDelivered((await mailJobs(database, 'recovery', user.email))[0], 1)
		const reset = await t.call('POST', '/api/auth/password-resets', { json: { email: user.email, code, password: 'a brand new passphrase' } })
		expect(reset.status).toBe(200)
	})

	test('in production the request routes answer 503 mail-unavailable and queue nothing; sign-up queues no mail', async () => {
		const t = await startTestApp({ NODE_ENV: 'production' }, database)
		closeAfterTest(t)
		const mailsBefore = await countJobs(database, 'mail')
		const requestsBefore = await countJobs(database, 'mail-request')
		const email = uniqueEmail('production')
		expect((await t.call('POST', '/api/users', { json: { email, password: PASSWORD, name: 'Prod' } })).status).toBe(201)
		for (const path of ['/api/auth/recovery-requests', '/api/auth/verification-requests']) {
			for (const address of [email, uniqueEmail('unknown')]) {
				const res = await t.call('POST', path, { json: { email: address } })
				expect(res.status).toBe(503)
				expect(res.headers.get('content-type')).toBe('application/problem+json')
				expect(res.body).toEqual(
					problem('mail-unavailable', 503, path, 'This service cannot send mail now (no SMTP server is configured); try again later or contact its operator'),
				)
			}
		}
		await t.app.decorator.jobs.idle()
		expect(await countJobs(database, 'mail-request')).toBe(requestsBefore)
		expect(await countJobs(database, 'mail')).toBe(mailsBefore)
		// Everything else still works: the account signs in.
		await login(t, email)
		expect(t.logs.some((line) => line.includes('mail written to the log'))).toBe(false)
	})
})
