import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { startTestApp, type TestApp } from './support/app'
import { selfSignedCertificate } from './support/certificates'
import { createTestDatabase, type TestDatabase } from './support/database'
import { closedAfterEachTest } from './support/running'
import { signUp } from './support/fixtures'
import { sendFailureCause } from '../src/mail/mailer'
import { SmtpSink } from './support/mail'

setDefaultTimeout(60_000)

/** Fast retries and polls, so that a failed send is logged within a second or two. */
const FAST_JOBS = { JOB_RETRY_SECONDS: '1', JOB_POLL_SECONDS: '1', MAIL_RESEND_SECONDS: '0', EMAIL_VERIFICATION: 'off', APP_URL: 'https://app.example.test' }

// One database for the file; each test runs its own app and SMTP server on it, closed before the next starts.
let database: TestDatabase
beforeAll(async () => {
	database = await createTestDatabase()
})
const closeAfterTest = closedAfterEachTest()
afterAll(() => database.drop())

async function sink(options: Parameters<typeof SmtpSink.start>[0] = {}) {
	const started = await SmtpSink.start(options)
	closeAfterTest({ close: () => started.stop() })
	return started
}

async function app(smtpUrl: string) {
	const t = await startTestApp({ SMTP_URL: smtpUrl, ...FAST_JOBS }, database)
	closeAfterTest(t)
	return t
}

/** Asks for a recovery mail and waits for the job's first failure line in the log. */
async function firstFailure(t: TestApp): Promise<Record<string, unknown>> {
	const user = await signUp(t)
	expect((await t.call('POST', '/api/auth/recovery-requests', { json: { email: user.email } })).status).toBe(202)
	const deadline = Date.now() + 20_000
	for (;;) {
		const line = t.logs.find((entry) => entry.includes('job failed; retrying later'))
		if (line) {
			expect(line).not.toContain(user.email)
			return JSON.parse(line)
		}
		if (Date.now() > deadline) throw new Error('no failed mail job in the log')
		await Bun.sleep(50)
	}
}

const trusting = (cert: string) => `tls.ca=${encodeURIComponent(cert)}`

describe('a mail that cannot be sent names its cause in the job’s log line', () => {
	test('STARTTLS to a server whose certificate has expired', async () => {
		const certificate = selfSignedCertificate({ expired: true })
		const server = await sink({ certificate })
		// The certificate is trusted: its expiry is all that is wrong with it.
		const t = await app(`smtp://127.0.0.1:${server.port}?${trusting(certificate.cert)}`)
		expect(await firstFailure(t)).toMatchObject({ queue: 'mail', error: 'ESOCKET after CONN', cause: 'TLS: the server’s certificate has expired' })
		expect(server.mails).toHaveLength(0)
	})

	test('STARTTLS to a server whose self-signed certificate is not trusted', async () => {
		const server = await sink({ certificate: selfSignedCertificate() })
		const t = await app(`smtp://127.0.0.1:${server.port}`)
		expect(await firstFailure(t)).toMatchObject({ error: 'ESOCKET after CONN', cause: 'TLS: the server’s certificate is self-signed and not trusted' })
	})

	test('a certificate made out to another host', async () => {
		const certificate = selfSignedCertificate({ host: 'mail.example.test' })
		const server = await sink({ certificate })
		const t = await app(`smtp://127.0.0.1:${server.port}?${trusting(certificate.cert)}`)
		expect(await firstFailure(t)).toMatchObject({ error: 'ESOCKET after CONN', cause: 'TLS: the server’s certificate does not name the host in SMTP_URL' })
	})

	test('a server that refuses connections', async () => {
		const server = await sink()
		await server.stop()
		const t = await app(server.url)
		expect(await firstFailure(t)).toMatchObject({ error: 'ESOCKET after CONN', cause: 'connection refused' })
	})

	test('a server that rejects the login: the cause, and neither the password nor the address', async () => {
		const password = 'wrong-smtp-password-91c2'
		const server = await sink({ credentials: { user: 'latchkey', pass: 'the-right-one' } })
		const t = await app(server.url.replace('the-right-one', password))
		expect(await firstFailure(t)).toMatchObject({ error: 'EAUTH SMTP 535 after AUTH', cause: 'authentication failed' })
		for (const line of t.logs) expect(line).not.toContain(password)
	})

	test('a server that requires STARTTLS it does not offer', async () => {
		const server = await sink({ credentials: { user: 'latchkey', pass: 'smtp-secret-3' }, startTls: false })
		const t = await app(server.url)
		expect(await firstFailure(t)).toMatchObject({ error: expect.stringMatching(/^ETLS\b/), cause: 'TLS: the server does not offer STARTTLS, which is required' })
	})
})

test('refusals read from nodemailer’s codes: a rejected recipient or sender, a timeout, a code not known here', () => {
	expect(sendFailureCause({ code: 'EENVELOPE', command: 'RCPT TO', responseCode: 550 })).toBe('recipient rejected (for good)')
	expect(sendFailureCause({ code: 'EENVELOPE', command: 'MAIL FROM', responseCode: 451 })).toBe('sender rejected (for now)')
	expect(sendFailureCause({ code: 'EMESSAGE', command: 'DATA', responseCode: 554 })).toBe('message refused (for good)')
	expect(sendFailureCause({ code: 'ETIMEDOUT', command: 'CONN' })).toBe('timed out connecting or waiting for the greeting')
	expect(sendFailureCause({ code: 'ESOCKET', originalCode: 'SOMETHING_NEW', command: 'CONN' })).toBe('SOMETHING_NEW')
	expect(sendFailureCause(new Error('anything at all'))).toBe('unknown')
})

describe('the mail transport is logged at start', () => {
	const transportLine = (t: TestApp) => JSON.parse(t.logs.find((line) => line.includes('mail goes over SMTP')) ?? '{}').smtp

	test('host, port, STARTTLS required with a login, and no password', async () => {
		const t = await app('smtp://latchkey:start-secret-5@127.0.0.1:2525')
		expect(transportLine(t)).toEqual({ host: '127.0.0.1', port: 2525, tls: 'STARTTLS required', certificatesChecked: true, auth: true })
		for (const line of t.logs) expect(line).not.toContain('start-secret-5')
	})

	test('the other TLS modes, and certificates not checked', async () => {
		expect(transportLine(await app('smtps://mail.example.test'))).toEqual({ host: 'mail.example.test', port: 465, tls: 'implicit TLS', certificatesChecked: true, auth: false })
		expect(transportLine(await app('smtp://127.0.0.1:1025?tls.rejectUnauthorized=false'))).toEqual({
			host: '127.0.0.1',
			port: 1025,
			tls: 'STARTTLS if offered',
			certificatesChecked: false,
			auth: false,
		})
		expect(transportLine(await app('smtp://127.0.0.1:1025?ignoreTLS=true'))).toMatchObject({ tls: 'no TLS', certificatesChecked: false })
	})

	test('without SMTP_URL in development, the start says mail only goes to the log', async () => {
		const t = await startTestApp({ ...FAST_JOBS }, database)
		closeAfterTest(t)
		expect(t.logs.some((line) => line.includes('mail is written to the log, not sent: no SMTP_URL'))).toBe(true)
		expect(t.logs.some((line) => line.includes('mail goes over SMTP'))).toBe(false)
	})
})
