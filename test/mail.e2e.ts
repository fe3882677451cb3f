/**
 * The compiled binary killed (SIGKILL) with mails queued: the next start sends each of them, once.
 * Embedded database in a DATA_DIR that outlives the process; a real SMTP server that is down when the
 * mails are first tried, so they wait in the jobs table for their retry (unclaimed) when the kill comes.
 * Run with `bun test ./test/mail.e2e.ts` after `bun run build`.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test'
import { join } from 'node:path'
import { binaryFolder, jsonPost, startBinary, type BinaryFolder } from './support/binary'
import { SmtpSink, SUBJECT } from './support/mail'

setDefaultTimeout(180_000)

let folder: BinaryFolder
let sink: SmtpSink

beforeAll(async () => {
	folder = binaryFolder('mail')
	sink = await SmtpSink.start()
})
afterAll(async () => {
	await sink.stop().catch(() => {})
	folder.remove()
})

test('mails queued when the service is killed are sent after the restart, each once', async () => {
	const env = { DATA_DIR: join(folder.folder, 'data'), SMTP_URL: sink.url, APP_URL: 'https://app.example.test', JOB_RETRY_SECONDS: '3', AUTH_RATE_LIMIT_MAX: '0' }
	await sink.stop()
	const first = await startBinary(folder, env)
	const emails = Array.from({ length: 5 }, (_, i) => `killed-${i}-${Bun.randomUUIDv7().slice(-8)}@example.test`)
	for (const email of emails) {
		const res = await fetch(`${first.base}/api/users`, jsonPost({ email, password: 'a long enough passphrase' }))
		expect(res.status).toBe(201)
	}
	// Each mail was tried once against the stopped server and now waits for its retry.
	await Bun.sleep(1000)
	first.process.kill('SIGKILL')
	await first.process.exited
	expect(sink.mails).toHaveLength(0)

	await sink.restart()
	const second = await startBinary(folder, env)
	try {
		// A job claimed at the very moment of the kill waits for its lease (30 s, no longer renewed): within 60 s.
		for (const email of emails) await sink.waitFor(email, { subject: SUBJECT.verification, timeoutMs: 60_000 })
		await Bun.sleep(2000)
		for (const email of emails) expect(sink.to(email, SUBJECT.verification)).toHaveLength(1)
	} finally {
		second.process.kill('SIGTERM')
		await second.process.exited
	}
})
