/**
 * Webhooks from the compiled binary: events queued when the service is killed are delivered after the
 * restart (embedded database in a DATA_DIR that outlives the process), and two binaries on one PostgreSQL
 * deliver each event once (when TEST_DATABASE_URL is set). Receivers are real HTTP servers on loopback.
 * Run with `bun test ./test/webhooks.e2e.ts` after `bun run build`.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { join } from 'node:path'
import { binaryFolder, jsonPost, startBinary, type BinaryFolder, type RunningBinary } from './support/binary'
import { createEmptyTestDatabase, TEST_DATABASE_URL } from './support/database'
import { verified, WebhookReceiver, type ReceivedDelivery } from './support/webhook-receiver'

setDefaultTimeout(180_000)

const ADMIN = { LATCHKEY_ADMIN_EMAIL: 'ops@example.test', LATCHKEY_ADMIN_PASSWORD: 'an operator passphrase' }
const COMMON = {
	...ADMIN,
	// Shared by every process and restart, as in production: the endpoints' secrets are sealed with it.
	DATA_ENCRYPTION_KEY: Buffer.alloc(32, 'webhooks-e2e').toString('base64'),
	JWT_SECRET: 'webhooks-e2e-signing-secret-of-more-than-32-bytes',
	WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
	AUTH_RATE_LIMIT_MAX: '0',
	RATE_LIMIT_MAX: '0',
	EMAIL_VERIFICATION: 'off',
	PASSWORD_HASH_MEMORY_KIB: '1024',
	PASSWORD_HASH_TIME_COST: '1',
}

async function adminToken(instance: RunningBinary): Promise<string> {
	const res = await fetch(`${instance.base}/api/auth/login`, jsonPost({ email: ADMIN.LATCHKEY_ADMIN_EMAIL, password: ADMIN.LATCHKEY_ADMIN_PASSWORD }))
	expect(res.status).toBe(200)
	return ((await res.json()) as { data: { accessToken: string } }).data.accessToken
}

async function subscribe(instance: RunningBinary, url: string): Promise<string> {
	const res = await fetch(`${instance.base}/api/webhooks`, jsonPost({ url, events: ['user.created'] }, { authorization: `Bearer ${await adminToken(instance)}` }))
	expect(res.status).toBe(201)
	return ((await res.json()) as { data: { secret: string } }).data.secret
}

async function signUp(instance: RunningBinary, email: string) {
	const res = await fetch(`${instance.base}/api/users`, jsonPost({ email, password: 'a long enough passphrase' }))
	expect(res.status).toBe(201)
}

const createdFor = (email: string) => (delivery: ReceivedDelivery) => delivery.event.type === 'user.created' && delivery.event.data.user.email === email

async function stop(instance: RunningBinary) {
	instance.process.kill('SIGTERM')
	await instance.process.exited
}

describe('a killed service', () => {
	let folder: BinaryFolder
	let receiver: WebhookReceiver
	beforeAll(async () => {
		folder = binaryFolder('webhooks')
		receiver = await WebhookReceiver.start()
	})
	afterAll(async () => {
		await receiver.stop()
		folder.remove()
	})

	test('events queued when the service is killed are delivered after the restart, each once', async () => {
		const env = { ...COMMON, DATA_DIR: join(folder.folder, 'data'), WEBHOOK_RETRY_SCHEDULE: '3,3,3,3,3,3' }
		const first = await startBinary(folder, env)
		const secret = await subscribe(first, receiver.url)
		await receiver.stop()
		const emails = Array.from({ length: 5 }, (_, i) => `killed-${i}-${Bun.randomUUIDv7().slice(-8)}@example.test`)
		for (const email of emails) await signUp(first, email)
		// Each event was tried once against the receiver that is down and now waits for its retry.
		await Bun.sleep(1000)
		first.process.kill('SIGKILL')
		await first.process.exited
		expect(receiver.received).toHaveLength(0)

		receiver.listen()
		const second = await startBinary(folder, env)
		try {
			// A delivery claimed at the very moment of the kill waits for its lease (30 s, no longer renewed): within 60 s.
			for (const email of emails) await receiver.waitFor(createdFor(email), 1, 60_000)
			await Bun.sleep(4000)
			for (const email of emails) {
				const [delivery, ...again] = receiver.received.filter(createdFor(email))
				expect(again).toHaveLength(0)
				expect(verified(delivery as ReceivedDelivery, secret).data.user.email).toBe(email)
			}
		} finally {
			await stop(second)
		}
	})
})

if (TEST_DATABASE_URL) {
	const serverUrl = TEST_DATABASE_URL
	describe('two binaries on one PostgreSQL', () => {
		let at: BinaryFolder
		let receiver: WebhookReceiver
		let database: { url: string; drop(): Promise<void> }
		const instances: RunningBinary[] = []

		beforeAll(async () => {
			at = binaryFolder('webhook-instances')
			receiver = await WebhookReceiver.start()
			database = await createEmptyTestDatabase(serverUrl)
			const env = { ...COMMON, DATABASE_URL: database.url, DATABASE_POOL_MAX: '4', JOB_POLL_SECONDS: '30', LOG_LEVEL: 'debug' }
			// One after the other: the first migrates, the second finds the schema up to date.
			instances.push(await startBinary(at, env))
			instances.push(await startBinary(at, env))
		})
		afterAll(async () => {
			for (const instance of instances) await stop(instance)
			await receiver?.stop()
			await database?.drop()
			at?.remove()
		})

		test('sign-ups on both at once: each event delivered once, promptly, by one of them, and both delivered some', async () => {
			const [one, two] = instances as [RunningBinary, RunningBinary]
			const secret = await subscribe(one, receiver.url)
			const emails = Array.from({ length: 40 }, (_, i) => `twice-${i}-${Bun.randomUUIDv7().slice(-8)}@example.test`)
			await Promise.all(emails.map((email, i) => signUp(i % 2 ? two : one, email)))
			// Polls are 30 s apart here: only the NOTIFY of each commit wakes the workers of both instances in time.
			try {
				for (const email of emails) await receiver.waitFor(createdFor(email), 1, 20_000)
			} catch (error) {
				for (const instance of instances) console.log(instance.output().split('\n').filter((line) => /webhook|job|listen|warn|error/i.test(line)).slice(-30).join('\n'))
				throw error
			}
			await Bun.sleep(2000)
			for (const email of emails) {
				const [delivery, ...again] = receiver.received.filter(createdFor(email))
				expect(again).toHaveLength(0)
				expect(verified(delivery as ReceivedDelivery, secret).data.user.email).toBe(email)
			}
			for (const instance of instances) expect(instance.output()).toMatch(/"queue":"webhook"[^\n]*"msg":"job done"/)
		})
	})
}

if (TEST_DATABASE_URL) {
	const serverUrl = TEST_DATABASE_URL
	describe('an instance killed mid-delivery', () => {
		let at: BinaryFolder
		let receiver: WebhookReceiver
		let database: { url: string; drop(): Promise<void> }
		const instances: RunningBinary[] = []

		beforeAll(async () => {
			at = binaryFolder('webhook-killed-claim')
			receiver = await WebhookReceiver.start()
			database = await createEmptyTestDatabase(serverUrl)
		})
		afterAll(async () => {
			for (const instance of instances) await stop(instance)
			await receiver?.stop()
			await database?.drop()
			at?.remove()
		})

		test('a delivery claimed by an instance that is killed is made by another within 60 s, once', async () => {
			const env = { ...COMMON, DATABASE_URL: database.url, DATABASE_POOL_MAX: '4' }
			const first = await startBinary(at, env)
			instances.push(first)
			const secret = await subscribe(first, receiver.url)
			// The first attempt hangs, so the first instance holds the claim when it is killed.
			receiver.replies = ['hang']
			const email = `claimed-${Bun.randomUUIDv7().slice(-8)}@example.test`
			await signUp(first, email)
			const deadline = Date.now() + 20_000
			while (receiver.mostHanging === 0 && Date.now() < deadline) await Bun.sleep(20)
			expect(receiver.mostHanging).toBe(1)
			instances.push(await startBinary(at, env))
			first.process.kill('SIGKILL')
			await first.process.exited
			instances.shift()
			const [delivery] = await receiver.waitFor(createdFor(email), 1, 60_000)
			expect(verified(delivery as ReceivedDelivery, secret).data.user.email).toBe(email)
			await Bun.sleep(2000)
			expect(receiver.received.filter(createdFor(email))).toHaveLength(1)
		})
	})
}
