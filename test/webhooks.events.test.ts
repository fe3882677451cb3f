import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { Value } from '@sinclair/typebox/value'
import { sql } from 'drizzle-orm'
import { WEBHOOK_PAYLOADS, webhookBody } from '../src/modules/webhooks/model'
import { startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { enrollTotp, passwordStep } from './support/factors'
import { login, PASSWORD, signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'
import { loggedMail, proofOf } from './support/mail'
import { FlowBrowser, pkcePair, TestOpenIdProvider } from './support/oidc-provider'
import { verified, WebhookReceiver, type ReceivedDelivery } from './support/webhook-receiver'

setDefaultTimeout(60_000)

const FRONTEND = 'http://frontend.test'

let database: TestDatabase
let provider: TestOpenIdProvider
let receiver: WebhookReceiver
let t: TestApp
let admin: Account
let secret: string

beforeAll(async () => {
	database = await createTestDatabase()
	receiver = await WebhookReceiver.start()
	provider = await TestOpenIdProvider.start(['http://localhost/api/auth/providers/acme/callback'])
	t = await startTestApp(
		{ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', LOCKOUT_THRESHOLD: '2', APP_URL: FRONTEND, OIDC_PROVIDERS: 'acme', ...provider.settings('acme') },
		database,
	)
	admin = await signUpAdmin(t)
	const created = await t.call('POST', '/api/webhooks', { token: admin.accessToken, json: { url: receiver.url, events: ['*'] } })
	expect(created.status).toBe(201)
	secret = created.body.data.secret
})
afterAll(async () => {
	await t.close()
	await provider.stop()
	await receiver.stop()
	await database.drop()
})

const ISO = expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)

/** The one delivery of `type` about `userId` (waited for), verified with the endpoint's secret as a receiver would. */
async function eventOf(type: string, userId: string, count = 1): Promise<ReceivedDelivery['event']> {
	const about = (delivery: ReceivedDelivery) =>
		delivery.event.type === type && (delivery.event.data.user?.id ?? delivery.event.data.userId ?? delivery.event.data.session?.userId) === userId
	const found = await receiver.waitFor(about, count)
	await Bun.sleep(50)
	// Each event once: nothing delivered twice.
	expect(receiver.received.filter(about)).toHaveLength(count)
	const event = verified(found[count - 1] as ReceivedDelivery, secret)
	expect(event).toEqual({ type, timestamp: ISO, data: expect.any(Object) })
	// The payload the OpenAPI document's `webhooks` section declares for this type.
	expect([...Value.Errors(webhookBody(type as keyof typeof WEBHOOK_PAYLOADS), event)].map(({ path, message }) => `${path} ${message}`)).toEqual([])
	// Resources as the API shows them: never a password, hash, token or secret.
	expect(JSON.stringify(event)).not.toMatch(/"(password\w*|\w*hash|\w*token|secret)"\s*:|\$argon2|whsec_/i)
	return event
}

const USER = (account: { id: string; email: string }, fields: Record<string, unknown> = {}) => ({
	id: account.id,
	email: account.email,
	name: expect.any(String),
	role: 'user',
	status: 'active',
	createdAt: ISO,
	updatedAt: ISO,
	deactivatedAt: null,
	emailVerified: false,
	pendingEmail: null,
	metadata: {},
	appMetadata: {},
	...fields,
})

const SESSION = (userId: string, fields: Record<string, unknown> = {}) => ({
	id: expect.any(String),
	userId,
	createdAt: ISO,
	lastUsedAt: ISO,
	expiresAt: ISO,
	revokedAt: null,
	ip: expect.any(String),
	userAgent: null,
	amr: ['pwd'],
	aal: 'aal1',
	...fields,
})

describe('every event type arrives signed, with the documented payload', () => {
	test('an account from sign-up to deactivation and back', async () => {
		let user = await signUp(t, { name: 'Webhook Walker' })
		expect((await eventOf('user.created', user.id)).data).toEqual({ user: USER(user, { name: 'Webhook Walker' }) })
		expect((await eventOf('session.created', user.id)).data).toEqual({ session: SESSION(user.id, { id: user.sessionId }) })

		// The address proved from the mail's link.
		const { token } = proofOf(await loggedMail(t, user.email, 10_000, 'verification'))
		expect((await t.call('POST', '/api/auth/email-verifications', { json: { token } })).status).toBe(200)
		expect((await eventOf('user.email-verified', user.id)).data).toEqual({ user: USER(user, { name: 'Webhook Walker', emailVerified: true }) })
		expect((await eventOf('user.updated', user.id)).data).toEqual({ user: USER(user, { name: 'Webhook Walker', emailVerified: true }), changed: ['emailVerified'] })
		// A proved address signs every earlier session out: whoever made them could not read this mailbox.
		const unproved = await eventOf('session.revoked', user.id)
		expect(unproved.data).toEqual({ session: SESSION(user.id, { id: user.sessionId, revokedAt: ISO }), reason: 'email-verified' })
		user = await login(t, user.email)

		// A new name, then a new password (the other session ends with it).
		const other = await login(t, user.email)
		expect((await t.call('PUT', '/api/users/me', { token: user.accessToken, json: { email: user.email, name: 'Renamed' } })).status).toBe(200)
		expect((await eventOf('user.updated', user.id, 2)).data).toEqual({ user: USER(user, { name: 'Renamed', emailVerified: true }), changed: ['name'] })
		const changed = await t.call('PUT', '/api/users/me', { token: user.accessToken, json: { email: user.email, name: 'Renamed', password: 'another good passphrase', currentPassword: PASSWORD } })
		expect(changed.status).toBe(200)
		expect((await eventOf('user.password-changed', user.id)).data).toEqual({ user: USER(user, { name: 'Renamed', emailVerified: true }) })
		const revokedByChange = await eventOf('session.revoked', user.id, 2)
		expect(revokedByChange.data).toEqual({ session: SESSION(user.id, { id: other.sessionId, revokedAt: ISO }), reason: 'password-changed' })

		// A factor added and (by an admin) removed.
		const totp = await enrollTotp(t, user)
		const added = await eventOf('factor.added', user.id)
		expect(added.data).toEqual({ userId: user.id, factor: { id: totp.factorId, type: 'totp', name: 'Phone', status: 'active', createdAt: ISO, lastUsedAt: ISO } })
		expect((await t.call('DELETE', `/api/users/${user.id}/factors/${totp.factorId}`, { token: admin.accessToken })).status).toBe(200)
		expect((await eventOf('factor.removed', user.id)).data).toEqual(added.data)

		// Logged out; then deactivated by an admin (its sessions with it), and reactivated.
		const again = await login(t, user.email, 'another good passphrase')
		expect((await t.call('POST', '/api/auth/logout', { token: again.accessToken })).status).toBe(200)
		const loggedOut = await receiver.waitFor((d) => d.event.type === 'session.revoked' && d.event.data.session.id === again.sessionId)
		expect(verified(loggedOut[0] as ReceivedDelivery, secret).data).toEqual({ session: SESSION(user.id, { id: again.sessionId, revokedAt: ISO }), reason: 'logout' })

		expect((await t.call('DELETE', `/api/users/${user.id}`, { token: admin.accessToken })).status).toBe(200)
		expect((await eventOf('user.deactivated', user.id)).data).toEqual({ user: USER(user, { name: 'Renamed', emailVerified: true, status: 'deactivated', deactivatedAt: ISO }) })
		const ended = await receiver.waitFor((d) => d.event.type === 'session.revoked' && d.event.data.reason === 'deactivated' && d.event.data.session.userId === user.id)
		expect(ended.map((d) => d.event.data.session.id)).toEqual([user.sessionId])

		const back = await t.call('PUT', `/api/users/${user.id}`, { token: admin.accessToken, json: { email: user.email, name: 'Renamed', status: 'active' } })
		expect(back.status).toBe(200)
		expect((await eventOf('user.reactivated', user.id)).data).toEqual({ user: USER(user, { name: 'Renamed', emailVerified: true }) })
	})

	test('login.locked: the failure that locks an existing account, with that account', async () => {
		const user = await signUp(t)
		for (const _ of [1, 2]) expect((await t.call('POST', '/api/auth/login', { json: { email: user.email.toUpperCase(), password: 'not the password' } })).status).toBe(401)
		expect((await eventOf('login.locked', user.id)).data).toEqual({ user: USER(user), email: user.email, userId: user.id, reason: 'password' })
	})

	test('login.locked is not sent for text no account has (a password typed as the email), which is locked all the same and kept nowhere', async () => {
		const typed = `hunter2-my-password-${Bun.randomUUIDv7()}`
		for (const _ of [1, 2]) expect((await t.call('POST', '/api/auth/login', { json: { email: typed, password: 'not the password' } })).status).toBe(401)
		// Locked as an account would be: nothing tells that no account has it.
		const locked = await t.call('POST', '/api/auth/login', { json: { email: typed, password: 'not the password' } })
		expect(locked.status).toBe(429)
		expect(locked.body.type).toBe('https://latchkey.dev/problems/login-locked')
		// A later event, so that anything queued before it has been delivered too.
		const after = await signUp(t)
		await eventOf('user.created', after.id)
		await t.app.decorator.webhookJobs.idle()
		expect(receiver.received.filter((d) => d.event.type === 'login.locked' && d.event.data.userId === null)).toEqual([])
		expect(receiver.received.filter((d) => JSON.stringify(d.event).toLowerCase().includes('hunter2'))).toEqual([])
		const stored = await database.handle.db.execute(sql`select (select count(*) from webhook_events where body::text ilike '%hunter2%') as events, (select count(*) from audit_events where details::text ilike '%hunter2%') as audit`)
		const [counts] = ((stored as { rows?: unknown[] }).rows ?? stored) as Array<{ events: unknown; audit: unknown }>
		expect({ events: Number(counts?.events), audit: Number(counts?.audit) }).toEqual({ events: 0, audit: 0 })
	})

	test('login.locked of the second factor carries the account too', async () => {
		const account = await signUp(t)
		await enrollTotp(t, account)
		for (const _ of [1, 2]) {
			const res = await t.call('POST', '/api/auth/mfa', { json: { mfaToken: await passwordStep(t, account.email), method: 'totp', code: '000000' } })
			expect(res.status).toBe(401)
		}
		expect((await eventOf('login.locked', account.id)).data).toEqual({ user: USER(account), email: account.email, userId: account.id, reason: 'second-factor' })
	})

	test('login.locked once per lock, when twenty wrong passwords arrive at once', async () => {
		const user = await signUp(t)
		const answers = await Promise.all(Array.from({ length: 20 }, () => t.call('POST', '/api/auth/login', { json: { email: user.email, password: 'not the password' } })))
		// The lockout reserves each check before hashing: 2 are judged (401), the rest are refused as locked.
		expect(answers.filter((res) => res.status === 401)).toHaveLength(2)
		expect(answers.filter((res) => res.status === 429)).toHaveLength(18)
		await eventOf('login.locked', user.id)
		await t.app.decorator.webhookJobs.idle()
		expect(receiver.received.filter((d) => d.event.type === 'login.locked' && d.event.data.userId === user.id)).toHaveLength(1)
	})

	test('identity.linked and identity.unlinked, and the account a provider creates', async () => {
		const sub = `sub-${Bun.randomUUIDv7()}`
		const email = uniqueEmail('provider')
		provider.signInAs = { sub, email, email_verified: true }
		const { verifier, challenge } = pkcePair()
		const landed = await new FlowBrowser(t.app).follow(
			`/api/auth/providers/acme/authorization?${new URLSearchParams({ redirectTo: `${FRONTEND}/cb`, codeChallenge: challenge, codeChallengeMethod: 'S256' })}`,
			provider.issuer,
		)
		const exchanged = await t.call('POST', '/api/auth/sessions', { json: { code: landed.searchParams.get('code'), codeVerifier: verifier } })
		expect(exchanged.status).toBe(200)
		const account = { id: exchanged.body.data.user.id as string, email, accessToken: exchanged.body.data.accessToken as string }
		expect((await eventOf('user.created', account.id)).data).toEqual({ user: USER(account, { emailVerified: true }) })
		const linked = await eventOf('identity.linked', account.id)
		expect(linked.data).toEqual({ userId: account.id, identity: { id: expect.any(String), provider: 'acme', subject: sub, email, createdAt: ISO } })
		expect((await eventOf('session.created', account.id)).data).toEqual({ session: SESSION(account.id, { amr: [] }) })

		// A passwordless account cannot drop its only identity; an admin removes a second one? Give it a password by admin first.
		const identityId = linked.data.identity.id
		const passworded = await t.call('PUT', `/api/users/${account.id}`, { token: admin.accessToken, json: { email, name: '', password: 'an admin-set passphrase' } })
		expect(passworded.status).toBe(200)
		expect((await t.call('DELETE', `/api/users/${account.id}/identities/${identityId}`, { token: admin.accessToken })).status).toBe(200)
		expect((await eventOf('identity.unlinked', account.id)).data).toEqual(linked.data)
	})
})
