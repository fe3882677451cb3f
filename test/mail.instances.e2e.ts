/**
 * Two compiled binaries on one PostgreSQL database, one SMTP server: every mail queued by either is sent
 * once, by one of them (FOR UPDATE SKIP LOCKED and the lease, across processes). Runs when
 * TEST_DATABASE_URL is set (the embedded database belongs to one process); `bun test ./test/mail.instances.e2e.ts`
 * after `bun run build`.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import postgres from 'postgres'
import { binaryFolder, jsonPost, startBinary, type BinaryFolder, type RunningBinary } from './support/binary'
import { createEmptyTestDatabase, TEST_DATABASE_URL } from './support/database'
import { SmtpSink, SUBJECT } from './support/mail'

setDefaultTimeout(120_000)

const ACCOUNTS = 30

if (TEST_DATABASE_URL) {
	const serverUrl = TEST_DATABASE_URL
	describe('two binaries on one PostgreSQL', () => {
		let at: BinaryFolder
		let sink: SmtpSink
		let database: { url: string; drop(): Promise<void> }
		const instances: RunningBinary[] = []

		beforeAll(async () => {
			at = binaryFolder('mail-instances')
			sink = await SmtpSink.start()
			database = await createEmptyTestDatabase(serverUrl)
			const env = {
				DATABASE_URL: database.url,
				DATABASE_POOL_MAX: '4',
				SMTP_URL: sink.url,
				APP_URL: 'https://app.example.test',
				EMAIL_VERIFICATION: 'off',
				MAIL_RESEND_SECONDS: '0',
				JOB_POLL_SECONDS: '1',
				AUTH_RATE_LIMIT_MAX: '0',
				RATE_LIMIT_MAX: '0',
				PASSWORD_HASH_MEMORY_KIB: '1024',
				PASSWORD_HASH_TIME_COST: '1',
				LOG_LEVEL: 'debug',
			}
			// One after the other: the first migrates, the second finds the schema up to date.
			instances.push(await startBinary(at, env))
			instances.push(await startBinary(at, env))
		})
		afterAll(async () => {
			for (const instance of instances) {
				instance.process.kill('SIGTERM')
				await instance.process.exited
			}
			await sink?.stop().catch(() => {})
			await database?.drop()
			at?.remove()
		})

		test(`recovery mails for ${ACCOUNTS} accounts, asked of both at once: each arrives once, and both instances sent some`, async () => {
			const [one, two] = instances as [RunningBinary, RunningBinary]
			const emails = Array.from({ length: ACCOUNTS }, (_, i) => `twice-${i}-${Bun.randomUUIDv7().slice(-8)}@example.test`)
			for (const [i, email] of emails.entries()) {
				const res = await fetch(`${(i % 2 ? two : one).base}/api/users`, jsonPost({ email, password: 'a long enough passphrase' }))
				expect(res.status).toBe(201)
			}
			// Every request to both instances at once; each queues the lookup, whichever instance's worker runs it.
			const asked = await Promise.all(
				emails.flatMap((email) => [one, two].map((instance) => fetch(`${instance.base}/api/auth/recovery-requests`, jsonPost({ email })))),
			)
			expect(asked.every((res) => res.status === 202)).toBe(true)

			for (const email of emails) await sink.waitFor(email, { subject: SUBJECT.recovery, count: 2, timeoutMs: 60_000 })
			// Two more polls: a mail sent twice would arrive by now.
			await Bun.sleep(2500)
			// Two requests per address (MAIL_RESEND_SECONDS=0), so two mails each: never three, never one lost.
			for (const email of emails) expect(sink.to(email, SUBJECT.recovery)).toHaveLength(2)
			expect(sink.mails).toHaveLength(ACCOUNTS * 2)

			const sql = postgres(database.url, { max: 1, onnotice: () => {} })
			try {
				const [left] = await sql<Array<{ unfinished: number; failed: number }>>`
					select count(*) filter (where finished_at is null)::int as unfinished, count(*) filter (where outcome = 'failed')::int as failed from jobs`
				expect(left).toEqual({ unfinished: 0, failed: 0 })
			} finally {
				await sql.end()
			}
			// The work was shared: each instance logged mail jobs of its own.
			for (const instance of instances) expect(instance.output()).toMatch(/"queue":"mail"[^\n]*"msg":"job done"/)
		})
	})
}
