import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { createClient, type LatchkeyClient } from '../src/client'
import { startTestApp, type TestApp } from './support/app'
import { jwtPayload, PASSWORD, signUpAdmin, uniqueEmail } from './support/fixtures'
import { loggedMail, signUpVerified } from './support/mail'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

let t: TestApp
let api: LatchkeyClient
beforeAll(async () => {
	t = await startTestApp({ WEBHOOK_TIMEOUT_SECONDS: '1' })
	t.app.listen({ port: 0, hostname: '127.0.0.1' })
	api = createClient(`http://127.0.0.1:${t.app.server!.port}`)
})
afterAll(async () => {
	await t?.app.stop()
	await t?.close()
})

const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } })

describe('the Eden Treaty client against a listening server', () => {
	test('drives sign-up, login, reading and updating self, refresh and logout, all typed', async () => {
		const email = uniqueEmail('eden')

		// Sign up.
		const signedUp = await api.api.users.post({ email, password: PASSWORD, name: 'Eden Client' })
		expect(signedUp.error).toBeNull()
		expect(signedUp.status).toBe(201)
		expect(signedUp.response.headers.get('location')).toBe(`/api/users/${signedUp.data?.data.id}`)
		const userId = signedUp.data!.data.id
		expect(signedUp.data!.data).toMatchObject({ email, name: 'Eden Client', role: 'user', status: 'active' })
		expect(signedUp.data!.message).toBe('User created')

		// Log in.
		const loggedIn = await api.api.auth.login.post({ email: email.toUpperCase(), password: PASSWORD })
		expect(loggedIn.error).toBeNull()
		expect(loggedIn.status).toBe(200)
		const outcome = loggedIn.data!.data
		// The type tells a frontend to handle both answers: tokens, or a second factor owed.
		if ('mfaRequired' in outcome) throw new Error('this account has no second factor')
		const tokens = outcome
		expect(tokens.tokenType).toBe('Bearer')
		expect(tokens.expiresIn).toBe(900)
		expect(tokens.user.id).toBe(userId)
		expect(jwtPayload(tokens.accessToken).sub).toBe(userId)

		// Read self.
		const self = await api.api.users({ id: 'me' }).get(bearer(tokens.accessToken))
		expect(self.error).toBeNull()
		expect(self.status).toBe(200)
		expect(self.data!.data.id).toBe(userId)
		expect(self.data!.data.email).toBe(email)

		// Update the name (PUT replaces the editable representation).
		const updated = await api.api.users({ id: 'me' }).put({ email, name: 'Ada via Eden' }, bearer(tokens.accessToken))
		expect(updated.error).toBeNull()
		expect(updated.status).toBe(200)
		expect(updated.data!.data.name).toBe('Ada via Eden')
		expect(updated.data!.message).toBe('User updated')
		const reread = await api.api.users({ id: userId }).get(bearer(tokens.accessToken))
		expect(reread.data!.data.name).toBe('Ada via Eden')

		// Refresh: a new pair for the same session.
		const refreshed = await api.api.auth.refresh.post({ refreshToken: tokens.refreshToken })
		expect(refreshed.error).toBeNull()
		expect(refreshed.status).toBe(200)
		const renewed = refreshed.data!.data
		expect(renewed.refreshToken).not.toBe(tokens.refreshToken)
		expect(jwtPayload(renewed.accessToken).sid).toBe(jwtPayload(tokens.accessToken).sid)
		expect(renewed.user.name).toBe('Ada via Eden')

		// Log out this session.
		const loggedOut = await api.api.auth.logout.post({ scope: 'local' }, bearer(renewed.accessToken))
		expect(loggedOut.error).toBeNull()
		expect(loggedOut.status).toBe(200)
		expect(loggedOut.data).toEqual({ data: null, message: 'Logged out', errors: [] })

		// The session's access tokens are refused from now on, as is its refresh token.
		for (const accessToken of [renewed.accessToken, tokens.accessToken]) {
			const refused = await api.api.users({ id: 'me' }).get(bearer(accessToken))
			expect(refused.data).toBeNull()
			expect(refused.status).toBe(401)
			expect(refused.error?.status).toBe(401)
			expect(refused.response.headers.get('www-authenticate')).toBe('Bearer realm="latchkey", error="invalid_token"')
			expect(refused.error?.value).toMatchObject({
				type: 'https://latchkey.dev/problems/invalid-token',
				status: 401,
				data: null,
				errors: [],
			})
		}
		const stale = await api.api.auth.refresh.post({ refreshToken: renewed.refreshToken })
		expect(stale.status).toBe(401)
	})

	test('a wrong password comes back as a typed 401 error', async () => {
		const res = await api.api.auth.login.post({ email: uniqueEmail('nobody'), password: PASSWORD })
		expect(res.data).toBeNull()
		expect(res.status).toBe(401)
		expect(res.error?.status).toBe(401)
		expect(res.error?.value).toMatchObject({
			type: 'https://latchkey.dev/problems/invalid-credentials',
			status: 401,
			detail: 'The email or password is incorrect',
			instance: '/api/auth/login',
		})
	})

	test('a value outside the contract\'s literals does not compile, and the server refuses it with a 422', async () => {
		const email = uniqueEmail('literals')
		await api.api.users.post({ email, password: PASSWORD })
		const { data } = await api.api.auth.login.post({ email, password: PASSWORD })
		const token = data && 'accessToken' in data.data ? data.data.accessToken : ''
		const refusals = [
			// @ts-expect-error: `name` is not a sort order
			await api.api.users.get({ query: { sort: 'name' }, ...bearer(token) }),
			// @ts-expect-error: the roles are `user` and `admin`
			await api.api.users.get({ query: { role: 'owner' }, ...bearer(token) }),
			// @ts-expect-error: the statuses are `active` and `deactivated`
			await api.api.users.get({ query: { status: 'banned' }, ...bearer(token) }),
			// @ts-expect-error: audit event types are kebab-case
			await api.api['audit-events'].get({ query: { type: 'user.signed_up' }, ...bearer(token) }),
			// @ts-expect-error: the logout scopes are `local`, `others` and `global`
			await api.api.auth.logout.post({ scope: 'everywhere' }, bearer(token)),
			// @ts-expect-error: the roles are `user` and `admin`
			await api.api.users({ id: 'me' }).put({ email, name: 'Literal', role: 'superuser' }, bearer(token)),
		]
		// A 422 before any permission check: the value is refused for what it is, whoever sends it.
		expect(refusals.map((refusal) => refusal.status)).toEqual([422, 422, 422, 422, 422, 422])
		for (const refusal of refusals) expect(refusal.error?.value).toMatchObject({ type: 'https://latchkey.dev/problems/validation-error' })
	})

	test('an admin manages webhook endpoints, typed: create with the secret, ping, read the delivery log, rotate, delete', async () => {
		const admin = await signUpAdmin(t)
		const auth = bearer(admin.accessToken)
		const created = await api.api.webhooks.post({ url: 'https://93.184.215.14/hooks', events: ['user.created', 'session.revoked'], description: 'CRM' }, auth)
		expect(created.status).toBe(201)
		const endpoint = created.data!.data
		expect(endpoint.secret).toMatch(/^whsec_/)
		expect(endpoint.events).toEqual(['user.created', 'session.revoked'])

		const pinged = await api.api.webhooks({ id: endpoint.id }).pings.post(undefined, auth)
		expect(pinged.status).toBe(202)
		const log = await api.api.webhooks({ id: endpoint.id }).deliveries.get({ query: { limit: 10 }, ...auth })
		expect(log.status).toBe(200)
		expect(log.data!.data.items.map((delivery) => delivery.id)).toEqual([pinged.data!.data.deliveryId])
		expect(log.data!.data.items[0]?.eventType).toBe('webhook.ping')

		const rotated = await api.api.webhooks({ id: endpoint.id }).secrets.post(undefined, auth)
		expect(rotated.status).toBe(201)
		expect(rotated.data!.data.secret).not.toBe(endpoint.secret)
		// @ts-expect-error: the event types are the contract's (user.created, …), not made-up ones
		const refused = await api.api.webhooks.post({ url: 'https://93.184.215.14/hooks', events: ['user.exploded'] }, auth)
		expect(refused.status).toBe(422)
		const deleted = await api.api.webhooks({ id: endpoint.id }).delete(undefined, auth)
		expect(deleted.status).toBe(200)
		expect(deleted.data!.data.id).toBe(endpoint.id)
	})

	test('an admin creates an organization, adds a member and sets its roles, typed; the last owner comes back as a typed 409', async () => {
		const admin = await signUpAdmin(t)
		const auth = bearer(admin.accessToken)
		const created = await api.api.organizations.post({ name: 'Eden Org', slug: `eden-${Date.now().toString(36)}` }, auth)
		expect(created.status).toBe(201)
		const organization = created.data!.data
		expect(organization.status).toBe('active')
		const email = uniqueEmail('eden-member')
		const member = await api.api.users.post({ email, password: PASSWORD })
		const added = await api.api.organizations({ id: organization.id }).members.post({ userId: member.data!.data.id, roles: ['member'] }, auth)
		expect(added.status).toBe(201)
		expect(added.data!.data.user.email).toBe(email)
		const promoted = await api.api.organizations({ id: organization.id }).members({ userId: member.data!.data.id }).put({ roles: ['admin'] }, auth)
		expect(promoted.data!.data.roles).toEqual(['admin'])
		const page = await api.api.organizations({ id: organization.id }).members.get({ ...auth, query: { sort: 'joinedAt' } })
		expect(page.data!.data.items.map((item) => item.roles)).toEqual([['owner'], ['admin']])
		const refused = await api.api.organizations({ id: organization.id }).members({ userId: admin.id }).delete(undefined, auth)
		expect(refused.status).toBe(409)
		expect(refused.error?.status).toBe(409)
		const roles = await api.api['organization-roles'].get(auth)
		expect(roles.data!.data.items.map((role) => role.name)).toContain('owner')
	})

	test('an organization role, an invitation accepted and a refresh that switches the organization, typed', async () => {
		const admin = await signUpAdmin(t)
		const auth = bearer(admin.accessToken)
		const name = `eden-role-${Date.now().toString(36)}`
		const role = await api.api['organization-roles'].post({ name, permissions: ['invoices:read'], description: 'Eden' }, auth)
		expect(role.status).toBe(201)
		expect(role.data!.data.builtIn).toBe(false)
		const replaced = await api.api['organization-roles']({ name }).put({ permissions: ['invoices:read', 'invoices:approve'] }, auth)
		expect(replaced.data!.data.permissions).toEqual(['invoices:read', 'invoices:approve'])
		const unknown = await api.api['organization-roles']({ name: 'no-such-role' }).get(auth)
		expect(unknown.error?.status).toBe(404)

		const created = await api.api.organizations.post({ name: 'Eden Team' }, auth)
		const organization = created.data!.data
		const invitee = await signUpVerified(t)
		const invited = await api.api.organizations({ id: organization.id }).invitations.post({ email: invitee.email, roles: [name] }, auth)
		expect(invited.status).toBe(201)
		expect(invited.data!.data.status).toBe('pending')
		const listed = await api.api.organizations({ id: organization.id }).invitations.get({ ...auth, query: { status: 'pending' } })
		expect(listed.data!.data.items.map((item) => item.id)).toEqual([invited.data!.data.id])
		const read = await api.api.organizations({ id: organization.id }).invitations({ invitationId: invited.data!.data.id }).get(auth)
		expect(read.data!.data.email).toBe(invitee.email)
		const unknownRole = await api.api.organizations({ id: organization.id }).invitations.post({ email: uniqueEmail('eden-x'), roles: ['no-such-role'] }, auth)
		expect(unknownRole.error?.status).toBe(422)

		const link = (await loggedMail(t, invitee.email, 10_000, 'invitation')).text
		const token = /#token=([A-Za-z0-9_-]+)/.exec(link)![1]!
		const accepted = await api.api['invitation-acceptances'].post({ token }, bearer(invitee.accessToken))
		expect(accepted.status).toBe(200)
		expect(accepted.data!.data).toMatchObject({ organization: { id: organization.id, slug: organization.slug }, userId: invitee.id, roles: [name] })
		const spent = await api.api['invitation-acceptances'].post({ token }, bearer(invitee.accessToken))
		expect(spent.error?.status).toBe(400)

		const mine = await api.api.users({ id: 'me' }).organizations.get(bearer(invitee.accessToken))
		expect(mine.data!.data.items.map((item) => item.organization.id)).toEqual([organization.id])
		const switched = await api.api.auth.refresh.post({ refreshToken: invitee.refreshToken, organizationId: organization.id })
		expect(switched.status).toBe(200)
		const tokens = switched.data!.data
		expect(jwtPayload(tokens.accessToken).org).toEqual({ id: organization.id, slug: organization.slug, roles: [name], permissions: ['invoices:approve', 'invoices:read'] })
		const notMember = await api.api.auth.refresh.post({ refreshToken: tokens.refreshToken, organizationId: crypto.randomUUID() })
		expect(notMember.error?.status).toBe(403)
		const cleared = await api.api.auth.refresh.post({ refreshToken: tokens.refreshToken, organizationId: null })
		expect(jwtPayload(cleared.data!.data.accessToken).org).toBeUndefined()

		const second = await api.api.organizations({ id: organization.id }).invitations.post({ email: uniqueEmail('eden-y'), roles: ['member'] }, auth)
		const revoked = await api.api.organizations({ id: organization.id }).invitations({ invitationId: second.data!.data.id }).delete(undefined, auth)
		expect(revoked.data!.data.status).toBe('revoked')
		const removed = await api.api.organizations({ id: organization.id }).members({ userId: invitee.id }).delete(undefined, auth)
		expect(removed.status).toBe(200)
		const roleDeleted = await api.api['organization-roles']({ name }).delete(undefined, auth)
		expect(roleDeleted.status).toBe(200)
	})
})
