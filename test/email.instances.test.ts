import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { uniqueEmail } from './support/fixtures'
import { SmtpSink, SUBJECT } from './support/mail'

setDefaultTimeout(60_000)

let sink: SmtpSink
let database: TestDatabase
let first: TestApp
let second: TestApp

beforeAll(async () => {
	sink = await SmtpSink.start()
	database = await createTestDatabase()
	const env = { SMTP_URL: sink.url, APP_URL: 'https://app.example.test', MAIL_RESEND_SECONDS: '0', JOB_POLL_SECONDS: '1' }
	first = await startTestApp(env, database)
	second = await startTestApp(env, database)
})
afterAll(async () => {
	await first.close()
	await second.close()
	await database.drop()
	await sink.stop()
})

test('two instances on one database send each mail once, whichever instance queued it', async () => {
	// Each sign-up goes through one instance; both workers claim from the same table at once.
	const emails = Array.from({ length: 30 }, () => uniqueEmail('twice'))
	sink.delayMs = 20
	await Promise.all(emails.map((email, i) => (i % 2 ? first : second).call('POST', '/api/users', { json: { email, password: 'a long enough passphrase' } })))
	for (const email of emails) await sink.waitFor(email, { subject: SUBJECT.verification })
	await Promise.all([first.app.decorator.jobs.idle(), second.app.decorator.jobs.idle()])
	for (const email of emails) expect(sink.to(email, SUBJECT.verification)).toHaveLength(1)
	const rows = await database.handle.db.execute(sql`select count(*)::int as n from jobs where queue = 'mail' and (outcome is distinct from 'done')`)
	const pending = ((rows as unknown as { rows?: { n: number }[] }).rows ?? (rows as unknown as { n: number }[]))[0]?.n
	expect(pending).toBe(0)
})
