import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { and, eq, inArray, sql } from 'drizzle-orm'
import { auditEvents, identities, users, webhookEvents } from '../src/db/schema'
import { problem, startTestApp, type TestApp } from './support/app'
import { PASSWORD, signUp, signUpAdmin, soleActiveAdmin, uniqueEmail, type Account } from './support/fixtures'
import { bcryptHash } from './support/imports'
import { WebhookReceiver } from './support/webhook-receiver'

setDefaultTimeout(30_000)

let t: TestApp
let admin: Account
let receiver: WebhookReceiver

beforeAll(async () => {
	receiver = await WebhookReceiver.start()
	t = await startTestApp({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' })
	admin = await signUpAdmin(t)
	expect((await t.call('POST', '/api/webhooks', { token: admin.accessToken, json: { url: receiver.url, events: ['user.created'] } })).status).toBe(201)
})
afterAll(async () => {
	await t.close()
	await receiver.stop()
})

const importUsers = (body: unknown, token = admin.accessToken) => t.call('POST', '/api/user-imports', { json: body, token })

describe('POST /api/user-imports', () => {
	test('without a token is 401, and for a user who is not an admin 403; nothing is written', async () => {
		const email = uniqueEmail('nobody')
		const anonymous = await t.call('POST', '/api/user-imports', { json: { users: [{ email }] } })
		expect(anonymous.status).toBe(401)
		expect(anonymous.body).toMatchObject({ type: 'https://latchkey.dev/problems/unauthorized', status: 401, instance: '/api/user-imports' })
		const user = await signUp(t)
		const refused = await importUsers({ users: [{ email }] }, user.accessToken)
		expect(refused.body).toEqual(problem('forbidden', 403, '/api/user-imports', expect.any(String)))
		expect(await t.database.handle.db.select().from(users).where(eq(users.email, email))).toEqual([])
	})

	test('answers each line in order: created, skipped, updated, failed (with the reason, nothing of it written); an audit event counts them', async () => {
		const [ada, bob, carol] = [uniqueEmail('ada'), uniqueEmail('bob'), uniqueEmail('carol')]
		const subject = `s-${Bun.randomUUIDv7()}`
		const first = await importUsers({
			users: [
				{ email: ada, name: 'Ada', passwordHash: bcryptHash(PASSWORD), identities: [{ provider: 'google', subject }] },
				{ email: bob },
				// The same email again: the account the first line made is met, and skipped.
				{ email: ada.toUpperCase(), name: 'Again' },
				{ email: carol, identities: [{ provider: 'google', subject }] },
				{ email: uniqueEmail('hash'), passwordHash: '$2b$04$tooshort' },
			],
		})
		expect(first.status).toBe(200)
		const [adaRow] = await t.database.handle.db.select().from(users).where(eq(users.email, ada))
		const [bobRow] = await t.database.handle.db.select().from(users).where(eq(users.email, bob))
		expect(first.body).toEqual({
			data: {
				items: [
					{ line: 1, status: 'created', id: adaRow?.id },
					{ line: 2, status: 'created', id: bobRow?.id },
					{ line: 3, status: 'skipped', id: adaRow?.id },
					{ line: 4, status: 'failed', error: 'an identity of this line (provider and subject) is already linked to another account' },
					{ line: 5, status: 'failed', error: 'passwordHash is not a hash in a scheme Latchkey verifies (read as bcrypt: malformed)' },
				],
			},
			message: 'Users imported',
			errors: [],
		})
		// Carol's line failed whole: no account without its identity.
		expect(await t.database.handle.db.select().from(users).where(eq(users.email, carol))).toEqual([])
		expect((await t.database.handle.db.select().from(identities).where(eq(identities.subject, subject))).map((row) => row.userId)).toEqual([adaRow?.id ?? 'none'])

		const second = await importUsers({ users: [{ email: bob, name: 'Bob', role: 'admin', metadata: { team: 'x' } }], onConflict: 'update' })
		expect(second.body.data.items).toEqual([{ line: 1, status: 'updated', id: bobRow?.id }])
		const bobAfter = await t.call('GET', `/api/users/${bobRow?.id}`, { token: admin.accessToken })
		expect(bobAfter.body.data).toMatchObject({ name: 'Bob', role: 'admin', metadata: { team: 'x' } })

		const audit = await t.database.handle.db
			.select()
			.from(auditEvents)
			.where(and(eq(auditEvents.type, 'users.imported'), eq(auditEvents.actorId, admin.id)))
			.orderBy(auditEvents.id)
		expect(audit.slice(-2).map((event) => event.details)).toEqual([
			{ source: 'api', created: 2, updated: 0, skipped: 1, failed: 2 },
			{ source: 'api', created: 0, updated: 1, skipped: 0, failed: 0 },
		])

		// Skipping too checks that the line's id and email are one account.
		const mixed = await importUsers({ users: [{ id: bobRow?.id, email: ada }, { id: adaRow?.id, email: uniqueEmail('new-address') }] })
		expect(mixed.body.data.items).toEqual([
			{ line: 1, status: 'failed', error: 'id and email belong to two different accounts' },
			{ line: 2, status: 'skipped', id: adaRow?.id },
		])
	})

	test('an imported bcrypt user signs in with the old password through POST /auth/login, and the hash becomes argon2id', async () => {
		const email = uniqueEmail('bcrypt')
		expect((await importUsers({ users: [{ email, passwordHash: bcryptHash(PASSWORD) }] })).body.data.items[0].status).toBe('created')
		expect((await t.call('POST', '/api/auth/login', { json: { email, password: 'not the password' } })).status).toBe(401)
		const login = await t.call('POST', '/api/auth/login', { json: { email, password: PASSWORD } })
		expect(login.status).toBe(200)
		const [row] = await t.database.handle.db.select().from(users).where(eq(users.email, email))
		expect(row?.passwordHash).toStartWith('$argon2id$')
	})

	test('takes up to 1,000 users in a body beyond the usual limit (up to 8 MiB); 1,001 users is 422, a bigger body 413', async () => {
		const prefix = `bulk-${Bun.randomUUIDv7().slice(-8)}`
		const many = Array.from({ length: 1000 }, (_, n) => ({ email: `${prefix}-${n}@example.test`, metadata: { note: 'n'.repeat(200) } }))
		expect(JSON.stringify({ users: many }).length).toBeGreaterThan(t.config.bodyLimitBytes)
		const bulk = await importUsers({ users: many })
		expect(bulk.status).toBe(200)
		expect(bulk.body.data.items.filter((item: { status: string }) => item.status === 'created')).toHaveLength(1000)
		const stored = await t.database.handle.db.select({ email: users.email }).from(users).where(inArray(users.email, many.map((user) => user.email)))
		expect(stored).toHaveLength(1000)

		const tooMany = await importUsers({ users: [...many, { email: uniqueEmail() }] })
		expect(tooMany.status).toBe(422)
		expect(tooMany.body).toMatchObject({ type: 'https://latchkey.dev/problems/validation-error', errors: [expect.objectContaining({ pointer: '#/users' })] })

		const huge = await importUsers({ users: Array.from({ length: 1000 }, (_, n) => ({ email: `${prefix}-big-${n}@example.test`, metadata: { note: 'n'.repeat(8500) } })) })
		expect(huge.status).toBe(413)
		expect(huge.body).toEqual(problem('payload-too-large', 413, '/api/user-imports', `The request body exceeds ${8 * 1024 * 1024} bytes`))

		// Other routes keep the usual limit.
		const elsewhere = await t.call('POST', '/api/users', { json: { email: uniqueEmail(), password: PASSWORD, metadata: { note: 'n'.repeat(70_000) } } })
		expect(elsewhere.status).toBe(413)
	})

	test('user.created goes to the webhooks only with emitEvents', async () => {
		const [quiet, loud] = [uniqueEmail('quiet'), uniqueEmail('loud')]
		expect((await importUsers({ users: [{ email: quiet }] })).body.data.items[0].status).toBe('created')
		expect((await importUsers({ users: [{ email: loud }], emitEvents: true })).body.data.items[0].status).toBe('created')
		const about = (email: string) =>
			t.database.handle.db
				.select({ type: webhookEvents.type })
				.from(webhookEvents)
				.where(sql`${webhookEvents.body}::jsonb #>> '{data,user,email}' = ${email}`)
		expect(await about(quiet)).toEqual([])
		expect(await about(loud)).toEqual([{ type: 'user.created' }])
	})

	test('a line the schema refuses is 422 for the request, naming the member, and nothing is written', async () => {
		const email = uniqueEmail('schema')
		const res = await importUsers({ users: [{ email }, { email: uniqueEmail(), totpSecrets: [{ name: 'Phone', secret: 'not base32!' }] }] })
		expect(res.status).toBe(422)
		expect(res.body.errors).toEqual([expect.objectContaining({ pointer: '#/users/1/totpSecrets/0/secret' })])
		expect(await t.database.handle.db.select().from(users).where(eq(users.email, email))).toEqual([])
	})

	test('an update never demotes or deactivates the last active admin: that line fails, the others are written', async () => {
		const { admin: sole, restore } = await soleActiveAdmin(t)
		const other = uniqueEmail('other')
		const res = await importUsers(
			{ users: [{ email: sole.email, role: 'user' }, { email: other, name: 'Other' }, { email: sole.email, status: 'deactivated' }], onConflict: 'update' },
			sole.accessToken,
		)
		expect(res.body.data.items).toEqual([
			{ line: 1, status: 'failed', error: 'The last active admin can be neither deactivated nor demoted' },
			{ line: 2, status: 'created', id: expect.any(String) },
			{ line: 3, status: 'failed', error: 'The last active admin can be neither deactivated nor demoted' },
		])
		const [row] = await t.database.handle.db.select().from(users).where(eq(users.id, sole.id))
		expect(row).toMatchObject({ role: 'admin', status: 'active' })
		await restore()
	})
})
