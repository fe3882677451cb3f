/**
 * Organization invitations (API.md "Organizations"): an owner or admin invites an address with roles they may
 * grant; the mail (through the job queue) links to INVITATION_URL with the token in the fragment; the account whose
 * verified address it names accepts it once, within 7 days, in the transaction that adds the membership; events
 * and audit go with each write. Every refusal is tested, and parallel acceptances of one token.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq, sql } from 'drizzle-orm'
import { organizationInvitations, organizationMembers, organizations, users } from '../src/db/schema'
import { problem, startTestApp, type TestApp } from './support/app'
import { signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'
import { mailJobs, SmtpSink, startAppWithSmtp } from './support/mail'
import { seedOrganization, type SeededOrganization } from './support/organization-seed'
import { WebhookReceiver } from './support/webhook-receiver'

setDefaultTimeout(60_000)

const APP_URL = 'https://app.example.test'

let t: TestApp
let sink: SmtpSink
let closeApp: () => Promise<void>
let receiver: WebhookReceiver
let owner: Account
let admin: Account
let member: Account
let outsider: Account
let org: SeededOrganization
let webhookSecret: string

const db = () => t.database.handle.db

/** An account whose address is verified (written straight in: the subject here is invitations, not verification). */
async function verifiedAccount(label = 'user'): Promise<Account> {
	const account = await signUp(t, { email: uniqueEmail(label) })
	await db().update(users).set({ emailVerifiedAt: new Date() }).where(eq(users.id, account.id))
	return account
}

const invite = (by: Account, body: Record<string, unknown>, organizationId = org.id, app = t) =>
	app.call('POST', `/api/organizations/${organizationId}/invitations`, { token: by.accessToken, json: body })
const accept = (by: Account, token: string) => t.call('POST', '/api/invitation-acceptances', { token: by.accessToken, json: { token } })

/** The token of the invitation mail to `address` (the `count`-th one), read out of its link. */
async function mailedToken(address: string, count = 1): Promise<{ link: string; token: string; text: string; subject: string }> {
	const mail = await sink.waitFor(address, { subject: 'invited', count })
	const link = /^(https?:\/\/\S+#token=[A-Za-z0-9_-]+)$/m.exec(mail.text)?.[1]
	if (!link) throw new Error(`no link in mail:\n${mail.text}`)
	return { link, token: link.slice(link.indexOf('#token=') + 7), text: mail.text, subject: mail.subject }
}

/** Invites a fresh verified account (by the owner, as `member` unless told) and returns it with the mailed token. */
async function invited(roles = ['member']) {
	const invitee = await verifiedAccount('invitee')
	const res = await invite(owner, { email: invitee.email, roles })
	expect(res.status).toBe(201)
	const { token } = await mailedToken(invitee.email)
	return { invitee, token, invitation: res.body.data }
}

beforeAll(async () => {
	receiver = await WebhookReceiver.start()
	;({ t, sink, close: closeApp } = await startAppWithSmtp({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }))
	const siteAdmin = await signUpAdmin(t)
	const hook = await t.call('POST', '/api/webhooks', {
		token: siteAdmin.accessToken,
		json: { url: receiver.url, events: ['invitation.created', 'invitation.accepted', 'member.added'] },
	})
	expect(hook.status).toBe(201)
	webhookSecret = hook.body.data.secret
	owner = await verifiedAccount('owner')
	admin = await verifiedAccount('admin')
	member = await verifiedAccount('member')
	outsider = await verifiedAccount('outsider')
	org = await seedOrganization(db(), [
		{ userId: owner.id, roles: ['owner'] },
		{ userId: admin.id, roles: ['admin'] },
		{ userId: member.id, roles: ['member'] },
	])
})
afterAll(async () => {
	await closeApp()
	await receiver.stop()
})

describe('inviting', () => {
	test('an owner invites an address: 201 with the invitation, and a mail through the queue links to INVITATION_URL with the token in the fragment', async () => {
		const email = uniqueEmail('Guest').toUpperCase()
		const res = await invite(owner, { email, roles: ['admin', 'member'] })
		expect(res.status).toBe(201)
		const address = email.toLowerCase()
		expect(res.body).toEqual({
			data: {
				id: expect.any(String),
				organizationId: org.id,
				email: address,
				roles: ['admin', 'member'],
				status: 'pending',
				invitedBy: owner.id,
				createdAt: expect.any(String),
				expiresAt: expect.any(String),
				acceptedAt: null,
				acceptedBy: null,
				revokedAt: null,
			},
			message: 'Invitation sent',
			errors: [],
		})
		expect(res.headers.get('location')).toBe(`/api/organizations/${org.id}/invitations/${res.body.data.id}`)
		// Seven days.
		expect(Date.parse(res.body.data.expiresAt) - Date.parse(res.body.data.createdAt)).toBe(7 * 24 * 3600 * 1000)
		const mail = await mailedToken(address)
		expect(mail.link).toStartWith(`${APP_URL}/invitation#token=`)
		expect(mail.subject).toBe('You are invited to join Acme on Latchkey')
		expect(mail.text).toContain('as admin, member')
		expect(mail.text).toContain('valid for 168 hours')
		// Never the token in the API's answer, nor its digest.
		expect(JSON.stringify(res.body)).not.toContain(mail.token)
		const [row] = await db().select().from(organizationInvitations).where(eq(organizationInvitations.id, res.body.data.id))
		expect(row?.tokenHash).not.toContain(mail.token)
	})

	test('the answer is the same whether or not the address has an account', async () => {
		const known = await invite(owner, { email: outsider.email, roles: ['member'] })
		const unknown = await invite(owner, { email: uniqueEmail('nobody'), roles: ['member'] })
		expect(known.status).toBe(201)
		expect(unknown.status).toBe(201)
		expect(Object.keys(known.body.data)).toEqual(Object.keys(unknown.body.data))
		expect(known.body.message).toBe(unknown.body.message)
		await mailedToken(outsider.email)
	})

	test('an admin invites with any role but owner: owner is 403; an owner may grant owner', async () => {
		expect((await invite(admin, { email: uniqueEmail(), roles: ['admin'] })).status).toBe(201)
		const refused = await invite(admin, { email: uniqueEmail(), roles: ['member', 'owner'] })
		expect(refused.body).toEqual(problem('forbidden', 403, `/api/organizations/${org.id}/invitations`, 'Only an owner may grant the owner role'))
		expect((await invite(owner, { email: uniqueEmail(), roles: ['owner'] })).status).toBe(201)
	})

	test('a member who is not an admin is refused (403)', async () => {
		const res = await invite(member, { email: uniqueEmail(), roles: ['member'] })
		expect(res.body).toEqual(problem('forbidden', 403, `/api/organizations/${org.id}/invitations`, "Only an organization's owner or admin may invite"))
		expect((await t.call('GET', `/api/organizations/${org.id}/invitations`, { token: member.accessToken })).status).toBe(403)
	})

	test('a non-member gets the same 404 as for an unknown organization, for every route', async () => {
		const unknownId = Bun.randomUUIDv7()
		const hidden = await invite(outsider, { email: uniqueEmail(), roles: ['member'] })
		const missing = await invite(outsider, { email: uniqueEmail(), roles: ['member'] }, unknownId)
		expect(hidden.body).toEqual(problem('not-found', 404, `/api/organizations/${org.id}/invitations`, 'No organization has this id'))
		expect(missing.body).toEqual(problem('not-found', 404, `/api/organizations/${unknownId}/invitations`, 'No organization has this id'))
		const { invitation } = await invited()
		for (const [method, path] of [
			['GET', `/api/organizations/${org.id}/invitations`],
			['GET', `/api/organizations/${org.id}/invitations/${invitation.id}`],
			['DELETE', `/api/organizations/${org.id}/invitations/${invitation.id}`],
		] as const) {
			const res = await t.call(method, path, { token: outsider.accessToken })
			expect(res.body).toEqual(problem('not-found', 404, path, 'No organization has this id'))
		}
	})

	test('a role that does not exist is 422, naming it', async () => {
		const res = await invite(owner, { email: uniqueEmail(), roles: ['member', 'wizard'] })
		expect(res.body).toEqual(
			problem('validation-error', 422, `/api/organizations/${org.id}/invitations`, '1 field is invalid', [
				{ pointer: '#/roles', detail: 'names no organization role: wizard', code: 'unknown-role' },
			]),
		)
	})

	test('bad bodies are 422 problems, never 500', async () => {
		for (const body of [{ email: 'not an address', roles: ['member'] }, { email: uniqueEmail(), roles: [] }, { email: uniqueEmail() }, { email: uniqueEmail(), roles: ['member'], extra: 1 }]) {
			const res = await invite(owner, body)
			expect(res.status).toBe(422)
			expect(res.body.type).toEndWith('/validation-error')
		}
		expect((await t.call('POST', '/api/organizations/not-a-uuid/invitations', { token: owner.accessToken, json: { email: uniqueEmail(), roles: ['member'] } })).status).toBe(422)
	})

	test('a deactivated organization takes no invitation (409)', async () => {
		const closed = await seedOrganization(db(), [{ userId: owner.id, roles: ['owner'] }], { name: 'Closed' })
		await db().update(organizations).set({ status: 'deactivated' }).where(eq(organizations.id, closed.id))
		const res = await invite(owner, { email: uniqueEmail(), roles: ['member'] }, closed.id)
		expect(res.body).toEqual(problem('conflict', 409, `/api/organizations/${closed.id}/invitations`, 'This organization is deactivated'))
	})

	test('inviting the same address again replaces its pending invitation: a new link, the old one revoked', async () => {
		const invitee = await verifiedAccount('again')
		const first = await invite(owner, { email: invitee.email, roles: ['member'] })
		const { token: firstToken } = await mailedToken(invitee.email)
		const second = await invite(owner, { email: invitee.email, roles: ['admin'] })
		expect(second.body.data.id).not.toBe(first.body.data.id)
		const { token: secondToken } = await mailedToken(invitee.email, 2)
		expect((await accept(invitee, firstToken)).body.type).toEndWith('/invalid-code')
		const accepted = await accept(invitee, secondToken)
		expect(accepted.status).toBe(200)
		expect(accepted.body.data.roles).toEqual(['admin'])
	})

	test('within MAIL_RESEND_SECONDS the same address is answered the same and no second mail goes', async () => {
		const held = await startTestApp({ MAIL_RESEND_SECONDS: '600' }, t.database)
		try {
			const address = uniqueEmail('held')
			const first = await invite(owner, { email: address, roles: ['member'] }, org.id, held)
			const second = await invite(owner, { email: address, roles: ['member'] }, org.id, held)
			expect(first.status).toBe(201)
			expect(second.status).toBe(201)
			expect(second.body).toEqual(first.body)
			expect(await mailJobs(t.database, 'invitation', `${org.id}:${address}`)).toHaveLength(1)
			// Another organization's invitation of the same address has an interval of its own.
			const other = await seedOrganization(db(), [{ userId: owner.id, roles: ['owner'] }])
			expect((await invite(owner, { email: address, roles: ['member'] }, other.id, held)).status).toBe(201)
			expect(await mailJobs(t.database, 'invitation', `${other.id}:${address}`)).toHaveLength(1)
		} finally {
			await held.close()
		}
	})
})

describe('listing, reading and revoking', () => {
	test('owners and admins list invitations newest first, a keyset page with a Link header, and filter by status', async () => {
		const listed = await seedOrganization(db(), [
			{ userId: owner.id, roles: ['owner'] },
			{ userId: admin.id, roles: ['admin'] },
		])
		const ids: string[] = []
		for (let i = 0; i < 3; i++) ids.push((await invite(owner, { email: uniqueEmail('listed'), roles: ['member'] }, listed.id)).body.data.id)
		const first = await t.call('GET', `/api/organizations/${listed.id}/invitations?limit=2`, { token: admin.accessToken })
		expect(first.status).toBe(200)
		expect(first.body.data.items.map((item: { id: string }) => item.id)).toEqual([ids[2], ids[1]])
		expect(first.body.data.limit).toBe(2)
		expect(first.headers.get('link')).toBe(`</api/organizations/${listed.id}/invitations?limit=2&cursor=${first.body.data.nextCursor}>; rel="next"`)
		const second = await t.call('GET', `/api/organizations/${listed.id}/invitations?limit=2&cursor=${first.body.data.nextCursor}`, { token: admin.accessToken })
		expect(second.body.data.items.map((item: { id: string }) => item.id)).toEqual([ids[0]])
		expect(second.body.data.nextCursor).toBeNull()
		expect(second.headers.get('link')).toBeNull()

		await t.call('DELETE', `/api/organizations/${listed.id}/invitations/${ids[0]}`, { token: owner.accessToken })
		const revoked = await t.call('GET', `/api/organizations/${listed.id}/invitations?status=revoked`, { token: owner.accessToken })
		expect(revoked.body.data.items.map((item: { id: string }) => item.id)).toEqual([ids[0]])
		const pending = await t.call('GET', `/api/organizations/${listed.id}/invitations?status=pending`, { token: owner.accessToken })
		expect(pending.body.data.items.map((item: { id: string }) => item.id)).toEqual([ids[2], ids[1]])

		const bad = await t.call('GET', `/api/organizations/${listed.id}/invitations?cursor=nonsense`, { token: owner.accessToken })
		expect(bad.status).toBe(400)
		expect(bad.body.type).toEndWith('/bad-request')
	})

	test('one invitation is read by its id; another organization’s id is 404', async () => {
		const { invitation } = await invited()
		const res = await t.call('GET', `/api/organizations/${org.id}/invitations/${invitation.id}`, { token: admin.accessToken })
		expect(res.status).toBe(200)
		expect(res.body.data).toEqual(invitation)
		const other = await seedOrganization(db(), [{ userId: owner.id, roles: ['owner'] }])
		const path = `/api/organizations/${other.id}/invitations/${invitation.id}`
		expect((await t.call('GET', path, { token: owner.accessToken })).body).toEqual(problem('not-found', 404, path, 'No invitation of this organization has this id'))
	})

	test('a revoked invitation is 400 invalid-code; revoking again answers the same; an accepted one cannot be revoked (409)', async () => {
		const { invitee, token, invitation } = await invited()
		const path = `/api/organizations/${org.id}/invitations/${invitation.id}`
		const revoked = await t.call('DELETE', path, { token: admin.accessToken })
		expect(revoked.status).toBe(200)
		expect(revoked.body.data.status).toBe('revoked')
		expect((await t.call('DELETE', path, { token: admin.accessToken })).body.data).toEqual(revoked.body.data)
		expect((await accept(invitee, token)).body).toEqual(
			problem('invalid-code', 400, '/api/invitation-acceptances', 'The token or code is wrong, used or replaced by a newer one; ask for a new mail'),
		)
		expect((await t.call('DELETE', path, { token: member.accessToken })).status).toBe(403)

		const other = await invited()
		expect((await accept(other.invitee, other.token)).status).toBe(200)
		const acceptedPath = `/api/organizations/${org.id}/invitations/${other.invitation.id}`
		expect((await t.call('DELETE', acceptedPath, { token: owner.accessToken })).body.type).toEndWith('/conflict')
	})
})

describe('accepting', () => {
	test('the verified invited address accepts once: 200 with the membership, events and audit in its transaction; a second time is 400', async () => {
		const { invitee, token, invitation } = await invited(['admin'])
		const res = await accept(invitee, token)
		expect(res.status).toBe(200)
		expect(res.body).toEqual({
			data: { organization: { id: org.id, name: 'Acme', slug: org.slug }, userId: invitee.id, roles: ['admin'], joinedAt: expect.any(String) },
			message: 'Invitation accepted',
			errors: [],
		})
		const [membership] = await db().select().from(organizationMembers).where(eq(organizationMembers.userId, invitee.id))
		expect(membership?.roles).toEqual(['admin'])
		const read = await t.call('GET', `/api/organizations/${org.id}/invitations/${invitation.id}`, { token: owner.accessToken })
		expect(read.body.data).toMatchObject({ status: 'accepted', acceptedBy: invitee.id })

		const again = await accept(invitee, token)
		expect(again.body).toEqual(problem('invalid-code', 400, '/api/invitation-acceptances', 'The token or code is wrong, used or replaced by a newer one; ask for a new mail'))

		// Signed, once each, and holding the payload the OpenAPI document declares for their type.
		const [created] = await receiver.documentedEvents('invitation.created', (data) => data.invitation.id === invitation.id, 1, webhookSecret)
		expect(created?.data.invitation).toMatchObject({ id: invitation.id, organizationId: org.id, email: invitee.email, roles: ['admin'], status: 'pending' })
		const [acceptedEvent] = await receiver.documentedEvents('invitation.accepted', (data) => data.invitation.id === invitation.id, 1, webhookSecret)
		expect(acceptedEvent?.data).toMatchObject({ userId: invitee.id, invitation: { status: 'accepted' } })
		const [added] = await receiver.documentedEvents('member.added', (data) => data.member.user.id === invitee.id, 1, webhookSecret)
		expect(added?.data).toEqual({ organizationId: org.id, member: { user: { id: invitee.id, email: invitee.email, name: expect.any(String) }, roles: ['admin'], joinedAt: expect.any(String) } })
		// Nothing in any event carries the token.
		expect(receiver.received.some((d) => d.body.includes(token))).toBe(false)

		const audit = await db().execute(sql`select type from audit_events where actor_id = ${invitee.id} order by id`)
		const types = (Array.isArray(audit) ? audit : (audit as { rows: unknown[] }).rows).map((row) => (row as { type: string }).type)
		expect(types).toEqual(expect.arrayContaining(['invitation.accepted', 'member.added']))
	})

	test('another account, even verified, is 403; so is the invited address while unverified', async () => {
		const { invitee, token } = await invited()
		expect((await accept(outsider, token)).body).toEqual(
			problem('forbidden', 403, '/api/invitation-acceptances', 'This invitation names another email address: sign in with the account of the invited address'),
		)
		await db().update(users).set({ emailVerifiedAt: null }).where(eq(users.id, invitee.id))
		expect((await accept(invitee, token)).body).toEqual(
			problem('forbidden', 403, '/api/invitation-acceptances', 'Verify your email address first: an invitation is accepted only by the verified address it names'),
		)
		// Neither refusal spent it.
		await db().update(users).set({ emailVerifiedAt: new Date() }).where(eq(users.id, invitee.id))
		expect((await accept(invitee, token)).status).toBe(200)
	})

	test('an expired invitation is 400 code-expired', async () => {
		const { invitee, token, invitation } = await invited()
		await db().update(organizationInvitations).set({ expiresAt: sql`now() - interval '1 second'` }).where(eq(organizationInvitations.id, invitation.id))
		expect((await accept(invitee, token)).body).toEqual(problem('code-expired', 400, '/api/invitation-acceptances', 'The invitation has expired; ask for a new one'))
		const read = await t.call('GET', `/api/organizations/${org.id}/invitations/${invitation.id}`, { token: owner.accessToken })
		expect(read.body.data.status).toBe('expired')
	})

	test('an unknown or malformed token is 400 invalid-code; a missing one 422; signed out 401', async () => {
		for (const token of ['A'.repeat(43), 'short', '../../etc/passwd', 'x'.repeat(512)])
			expect((await accept(outsider, token)).body.type).toEndWith('/invalid-code')
		expect((await t.call('POST', '/api/invitation-acceptances', { token: outsider.accessToken, json: {} })).status).toBe(422)
		expect((await t.call('POST', '/api/invitation-acceptances', { json: { token: 'A'.repeat(43) } })).status).toBe(401)
	})

	test('of parallel acceptances of one invitation exactly one succeeds; the others are 400 invalid-code', async () => {
		const { invitee, token } = await invited()
		const answers = await Promise.all(Array.from({ length: 12 }, () => accept(invitee, token)))
		expect(answers.filter((res) => res.status === 200)).toHaveLength(1)
		const refused = answers.filter((res) => res.status !== 200)
		expect(refused).toHaveLength(11)
		for (const res of refused) expect(res.body.type).toEndWith('/invalid-code')
		const rows = await db().select().from(organizationMembers).where(eq(organizationMembers.userId, invitee.id))
		expect(rows).toHaveLength(1)
		const added = await receiver.waitFor((d) => d.event.type === 'member.added' && d.event.data.member.user.id === invitee.id)
		expect(added).toHaveLength(1)
	})

	test('an existing member keeps their roles and gains the invitation’s (no member.added)', async () => {
		const res = await invite(owner, { email: member.email, roles: ['admin'] })
		expect(res.status).toBe(201)
		const { token } = await mailedToken(member.email)
		const accepted = await accept(member, token)
		expect(accepted.status).toBe(200)
		expect(accepted.body.data.roles).toEqual(['member', 'admin'])
		await receiver.waitFor((d) => d.event.type === 'invitation.accepted' && d.event.data.invitation.id === res.body.data.id)
		expect(receiver.received.some((d) => d.event.type === 'member.added' && d.event.data.member.user.id === member.id)).toBe(false)
	})

	test('an invitation of an organization deactivated since is 409', async () => {
		const closing = await seedOrganization(db(), [{ userId: owner.id, roles: ['owner'] }], { name: 'Closing' })
		const invitee = await verifiedAccount('closing')
		expect((await invite(owner, { email: invitee.email, roles: ['member'] }, closing.id)).status).toBe(201)
		const { token } = await mailedToken(invitee.email)
		await db().update(organizations).set({ status: 'deactivated' }).where(eq(organizations.id, closing.id))
		const res = await accept(invitee, token)
		expect(res.body).toEqual(problem('conflict', 409, '/api/invitation-acceptances', 'This organization is deactivated: its invitations can no longer be accepted'))
	})
})

describe('INVITATION_URL', () => {
	test('defaults to the /invitation page at PUBLIC_URL without APP_URL, and may be set', async () => {
		const plain = await startTestApp({}, t.database)
		const set = await startTestApp({ INVITATION_URL: 'https://front.example.test/join' }, t.database)
		try {
			expect(plain.config.mail.invitationUrl).toBe('http://localhost/invitation')
			expect(t.config.mail.invitationUrl).toBe(`${APP_URL}/invitation`)
			expect(set.config.mail.invitationUrl).toBe('https://front.example.test/join')
		} finally {
			await plain.close()
			await set.close()
		}
	})
})

describe('the /invitation page over HTTP', () => {
	test('GET is HTML under the pages’ policy with no inline script, and a sentence for browsers without script', async () => {
		const res = await t.app.handle(new Request('http://localhost/invitation'))
		expect(res.status).toBe(200)
		expect(res.headers.get('content-security-policy')).toContain("script-src 'self'")
		expect(res.headers.get('cache-control')).toBe('no-store')
		const html = await res.text()
		expect(html).toContain('<script src="/pages/invitation.js" defer></script>')
		expect(html).not.toMatch(/<script>(?!<)/)
		expect(html).toContain('<noscript><p>This page reads the invitation from its link with script')
		const script = await t.app.handle(new Request('http://localhost/pages/invitation.js'))
		expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8')
	})

	test('a POST without a session goes to sign-in, and comes back to /invitation', async () => {
		const res = await t.app.handle(
			new Request('http://localhost/invitation', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://localhost' }, body: 'token=x' }),
		)
		expect(res.status).toBe(303)
		expect(res.headers.get('location')).toBe('/sign-in?return_to=%2Finvitation')
	})
})
