import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { and, asc, eq } from 'drizzle-orm'
import { SignJWT } from 'jose'
import { auditEvents, organizationMembers, organizationRoles, organizations, sessions } from '../src/db/schema'
import { problem, startTestApp, type TestApp } from './support/app'
import { jwtPayload, signUp, type Account } from './support/fixtures'
import { seedOrganization, type SeededOrganization } from './support/organization-seed'

// The token follows the membership (API.md, Organizations, "Tokens"): a refresh switches the session's active
// organization, the access token then carries `org`, and every request checks that claim against the
// membership as it is now. The organizations are written straight into the database (organization-seed.ts):
// the subject here is the token, not the organization routes.

setDefaultTimeout(30_000)

let t: TestApp
/** A second instance of the service on the same database. */
let other: TestApp
beforeAll(async () => {
	t = await startTestApp()
	other = await startTestApp({}, t.database)
})
afterAll(async () => {
	await other?.close()
	await t?.close()
})

const db = () => t.database.handle.db
const refresh = (refreshToken: string, organizationId?: string | null, app = t) =>
	app.call('POST', '/api/auth/refresh', { json: organizationId === undefined ? { refreshToken } : { refreshToken, organizationId } })

/** The organization the bearer guard found for this token, as GET /users/me/sessions shows it on the current session. */
async function organizationSeen(token: string, app = t) {
	const res = await app.call('GET', '/api/users/me/sessions', { token })
	expect(res.status).toBe(200)
	const current = res.body.data.items.filter((item: { current: boolean }) => item.current)
	expect(current).toHaveLength(1)
	return current[0].organization
}

/** A signed-up account, member of a new organization with `roles`, and the tokens of a refresh that switched to it. */
async function memberWithTokens(roles: string[]): Promise<{ account: Account; organization: SeededOrganization; accessToken: string; refreshToken: string }> {
	const account = await signUp(t)
	const organization = await seedOrganization(db(), [{ userId: account.id, roles }])
	const res = await refresh(account.refreshToken, organization.id)
	expect(res.status).toBe(200)
	return { account, organization, accessToken: res.body.data.accessToken, refreshToken: res.body.data.refreshToken }
}

const activeOrganizationOf = async (sessionId: string) =>
	(await db().select({ id: sessions.activeOrganizationId }).from(sessions).where(eq(sessions.id, sessionId)))[0]?.id

const NOT_A_MEMBER = 'You are not a member of an active organization with this id'

describe('switching at a refresh', () => {
	test('a refresh with organizationId switches the session: the access token carries org with roles and their permissions', async () => {
		const { account, organization, accessToken } = await memberWithTokens(['admin'])
		expect(jwtPayload(accessToken).org).toEqual({
			id: organization.id,
			slug: organization.slug,
			roles: ['admin'],
			permissions: ['invitations:manage', 'members:manage'],
		})
		expect(jwtPayload(accessToken).sid).toBe(account.sessionId)
		expect(await activeOrganizationOf(account.sessionId)).toBe(organization.id)
		expect(await organizationSeen(accessToken)).toEqual(jwtPayload(accessToken).org)
		// Login tokens carry none, and the current session shows none for them.
		expect(jwtPayload(account.accessToken).org).toBeUndefined()
		expect(await organizationSeen(account.accessToken)).toBeUndefined()
	})

	test('an owner’s permissions are `*`; several roles give the union of their permissions', async () => {
		const owner = await memberWithTokens(['owner'])
		expect(jwtPayload(owner.accessToken).org).toMatchObject({ roles: ['owner'], permissions: ['*'] })
		const role = `billing-${crypto.randomUUID().slice(0, 8)}`
		await db().insert(organizationRoles).values({ name: role, permissions: ['invoices:read', 'members:manage'] })
		const both = await memberWithTokens(['admin', role])
		expect(jwtPayload(both.accessToken).org).toMatchObject({
			roles: [role, 'admin'].sort(),
			permissions: ['invitations:manage', 'invoices:read', 'members:manage'],
		})
		const plain = await memberWithTokens(['member'])
		expect(jwtPayload(plain.accessToken).org).toMatchObject({ roles: ['member'], permissions: [] })
	})

	test('an omitted organizationId keeps the active organization; null clears it', async () => {
		const { account, organization, refreshToken } = await memberWithTokens(['member'])
		const kept = await refresh(refreshToken)
		expect(kept.status).toBe(200)
		expect(jwtPayload(kept.body.data.accessToken).org).toMatchObject({ id: organization.id })

		const cleared = await refresh(kept.body.data.refreshToken, null)
		expect(cleared.status).toBe(200)
		expect(jwtPayload(cleared.body.data.accessToken).org).toBeUndefined()
		expect(await activeOrganizationOf(account.sessionId)).toBeNull()
		expect(await organizationSeen(cleared.body.data.accessToken)).toBeUndefined()
		// And it stays cleared.
		const after = await refresh(cleared.body.data.refreshToken)
		expect(jwtPayload(after.body.data.accessToken).org).toBeUndefined()
	})

	test('an id in upper case names the same organization', async () => {
		const account = await signUp(t)
		const organization = await seedOrganization(db(), [{ userId: account.id, roles: ['member'] }])
		const res = await refresh(account.refreshToken, organization.id.toUpperCase())
		expect(res.status).toBe(200)
		expect(jwtPayload(res.body.data.accessToken).org).toMatchObject({ id: organization.id })
	})

	test('the refresh’s audit record names the organization switched to (null: none)', async () => {
		const { account, organization, refreshToken } = await memberWithTokens(['member'])
		await refresh(refreshToken, null)
		const rows = await db()
			.select({ details: auditEvents.details })
			.from(auditEvents)
			.where(and(eq(auditEvents.subjectId, account.id), eq(auditEvents.type, 'token.refreshed')))
			.orderBy(asc(auditEvents.id))
		expect(rows.map((row) => row.details)).toEqual([
			{ sessionId: account.sessionId, organizationId: organization.id },
			{ sessionId: account.sessionId, organizationId: null },
		])
	})

	test('a check of the session’s owner (POST /auth/reauthentication) renews the pair with the same org', async () => {
		const { account, organization, accessToken } = await memberWithTokens(['admin'])
		const res = await t.call('POST', '/api/auth/reauthentication', { json: { password: account.password }, token: accessToken })
		expect(res.status).toBe(200)
		expect(jwtPayload(res.body.data.accessToken).org).toEqual(jwtPayload(accessToken).org)
		expect(jwtPayload(res.body.data.accessToken).org).toMatchObject({ id: organization.id })
	})

	test('switching from one organization to another', async () => {
		const { account, refreshToken } = await memberWithTokens(['member'])
		const second = await seedOrganization(db(), [{ userId: account.id, roles: ['owner'] }], { name: 'Beta' })
		const res = await refresh(refreshToken, second.id)
		expect(res.status).toBe(200)
		expect(jwtPayload(res.body.data.accessToken).org).toEqual({ id: second.id, slug: second.slug, roles: ['owner'], permissions: ['*'] })
		expect(await activeOrganizationOf(account.sessionId)).toBe(second.id)
	})
})

describe('refused switches', () => {
	test('an organization the caller is not a member of is 403 not-a-member, and the refresh token is not spent', async () => {
		const account = await signUp(t)
		const stranger = await signUp(t)
		const organization = await seedOrganization(db(), [{ userId: stranger.id, roles: ['owner'] }])
		const res = await refresh(account.refreshToken, organization.id)
		expect(res.status).toBe(403)
		expect(res.headers.get('content-type')).toStartWith('application/problem+json')
		expect(res.body).toEqual(problem('not-a-member', 403, '/api/auth/refresh', NOT_A_MEMBER))
		expect(await activeOrganizationOf(account.sessionId)).toBeNull()
		// Nothing changed: the same refresh token still works (the rotation was rolled back with the switch).
		const retried = await refresh(account.refreshToken)
		expect(retried.status).toBe(200)
		expect(jwtPayload(retried.body.data.accessToken).org).toBeUndefined()
	})

	test('an unknown organization and a deactivated one are answered alike', async () => {
		const account = await signUp(t)
		const unknown = await refresh(account.refreshToken, Bun.randomUUIDv7())
		expect(unknown.status).toBe(403)
		expect(unknown.body).toEqual(problem('not-a-member', 403, '/api/auth/refresh', NOT_A_MEMBER))

		const organization = await seedOrganization(db(), [{ userId: account.id, roles: ['owner'] }])
		await db().update(organizations).set({ status: 'deactivated', deactivatedAt: new Date() }).where(eq(organizations.id, organization.id))
		const deactivated = await refresh(account.refreshToken, organization.id)
		expect(deactivated.status).toBe(403)
		expect(deactivated.body).toEqual(problem('not-a-member', 403, '/api/auth/refresh', NOT_A_MEMBER))
	})

	test('an organizationId that is not a UUID is 422, not a 500', async () => {
		const account = await signUp(t)
		for (const organizationId of ['acme', 42, {}, '']) {
			const res = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: account.refreshToken, organizationId } })
			expect(res.status).toBe(422)
			expect(res.body.type).toBe('https://latchkey.dev/problems/validation-error')
		}
		expect((await refresh(account.refreshToken)).status).toBe(200)
	})

	test('a reused refresh token is reuse whatever organization it asks for', async () => {
		const { account, organization } = await memberWithTokens(['member'])
		// The login's refresh token was rotated by memberWithTokens: presenting it again (past no grace) is reuse.
		const strict = await startTestApp({ REFRESH_REUSE_GRACE_SECONDS: '0' }, t.database)
		try {
			const res = await refresh(account.refreshToken, organization.id, strict)
			expect(res.status).toBe(401)
			expect(res.body.type).toBe('https://latchkey.dev/problems/invalid-token')
		} finally {
			await strict.close()
		}
	})
})

describe('checked on every request', () => {
	test('a member removed: the next request is served without org, and the next refresh drops the claim', async () => {
		const { account, organization, accessToken, refreshToken } = await memberWithTokens(['admin'])
		expect(await organizationSeen(accessToken)).toMatchObject({ id: organization.id })
		await db()
			.delete(organizationMembers)
			.where(and(eq(organizationMembers.organizationId, organization.id), eq(organizationMembers.userId, account.id)))
		// The same token, still within its lifetime: still valid, but no longer speaking for the organization.
		expect(await organizationSeen(accessToken)).toBeNull()
		const next = await refresh(refreshToken)
		expect(next.status).toBe(200)
		expect(jwtPayload(next.body.data.accessToken).org).toBeUndefined()
		expect(await activeOrganizationOf(account.sessionId)).toBeNull()
		// Added back later, the session does not speak for it again by itself.
		await db().insert(organizationMembers).values({ organizationId: organization.id, userId: account.id, roles: ['member'] })
		const later = await refresh(next.body.data.refreshToken)
		expect(jwtPayload(later.body.data.accessToken).org).toBeUndefined()
	})

	test('roles changed: the next request sees the current roles and permissions; the next refresh carries them', async () => {
		const { account, organization, accessToken, refreshToken } = await memberWithTokens(['admin'])
		await db()
			.update(organizationMembers)
			.set({ roles: ['member'] })
			.where(and(eq(organizationMembers.organizationId, organization.id), eq(organizationMembers.userId, account.id)))
		expect(await organizationSeen(accessToken)).toEqual({ id: organization.id, slug: organization.slug, roles: ['member'], permissions: [] })
		const next = await refresh(refreshToken)
		expect(jwtPayload(next.body.data.accessToken).org).toEqual({ id: organization.id, slug: organization.slug, roles: ['member'], permissions: [] })
	})

	test('a role’s permissions changed: seen at the next request', async () => {
		const role = `support-${crypto.randomUUID().slice(0, 8)}`
		await db().insert(organizationRoles).values({ name: role, permissions: ['tickets:read'] })
		const { accessToken } = await memberWithTokens([role])
		expect(jwtPayload(accessToken).org).toMatchObject({ permissions: ['tickets:read'] })
		await db().update(organizationRoles).set({ permissions: ['tickets:read', 'tickets:write'] }).where(eq(organizationRoles.name, role))
		expect(await organizationSeen(accessToken)).toMatchObject({ roles: [role], permissions: ['tickets:read', 'tickets:write'] })
	})

	test('an organization deactivated: served as if no org, and the next refresh drops it', async () => {
		const { account, organization, accessToken, refreshToken } = await memberWithTokens(['owner'])
		await db().update(organizations).set({ status: 'deactivated', deactivatedAt: new Date() }).where(eq(organizations.id, organization.id))
		expect(await organizationSeen(accessToken)).toBeNull()
		const next = await refresh(refreshToken)
		expect(next.status).toBe(200)
		expect(jwtPayload(next.body.data.accessToken).org).toBeUndefined()
		expect(await activeOrganizationOf(account.sessionId)).toBeNull()
	})

	test('a slug changed: the current slug is shown', async () => {
		const { organization, accessToken } = await memberWithTokens(['member'])
		const slug = `renamed-${crypto.randomUUID().slice(0, 8)}`
		await db().update(organizations).set({ slug }).where(eq(organizations.id, organization.id))
		expect(await organizationSeen(accessToken)).toMatchObject({ id: organization.id, slug })
	})

	test('a token’s org is the membership of the caller, never of another account', async () => {
		// Another account's membership of the same organization lends the caller nothing.
		const { organization, accessToken, account } = await memberWithTokens(['owner'])
		const stranger = await signUp(t)
		await db().insert(organizationMembers).values({ organizationId: organization.id, userId: stranger.id, roles: ['owner'] })
		await db()
			.delete(organizationMembers)
			.where(and(eq(organizationMembers.organizationId, organization.id), eq(organizationMembers.userId, account.id)))
		expect(await organizationSeen(accessToken)).toBeNull()
	})

	test('under MFA_REQUIRED the same check holds (the query that also asks about factors)', async () => {
		const strictFactors = await startTestApp({ MFA_REQUIRED: 'admins' }, t.database)
		try {
			const { account, organization, accessToken } = await memberWithTokens(['admin'])
			expect(await organizationSeen(accessToken, strictFactors)).toMatchObject({ id: organization.id, roles: ['admin'] })
			await db()
				.delete(organizationMembers)
				.where(and(eq(organizationMembers.organizationId, organization.id), eq(organizationMembers.userId, account.id)))
			expect(await organizationSeen(accessToken, strictFactors)).toBeNull()
		} finally {
			await strictFactors.close()
		}
	})

	test('a token whose org is not a well-formed id is served without org, never a 500', async () => {
		// Only this service signs its tokens: this is the guard's own care for a claim it did not expect.
		const { accessToken } = await memberWithTokens(['member'])
		for (const org of [{ id: 'acme' }, 'acme', null, 42, { id: 7 }]) {
			const token = await new SignJWT({ ...jwtPayload(accessToken), org })
				.setProtectedHeader({ alg: t.keys.algorithm, typ: 'at+jwt', kid: t.keys.kid })
				.sign(t.keys.signingKey)
			expect(await organizationSeen(token)).toBeUndefined()
		}
	})

	test('revocation still wins: a revoked session’s token with org is refused', async () => {
		const { accessToken } = await memberWithTokens(['member'])
		expect((await t.call('POST', '/api/auth/logout', { token: accessToken })).status).toBe(200)
		const res = await t.call('GET', '/api/users/me', { token: accessToken })
		expect(res.status).toBe(401)
	})
})

describe('every instance', () => {
	test('a member removed through one instance is seen at once by another on the same database', async () => {
		const { account, organization, accessToken } = await memberWithTokens(['admin'])
		// Both instances serve the token with its organization (each has verified and remembered it).
		expect(await organizationSeen(accessToken, t)).toMatchObject({ id: organization.id, roles: ['admin'] })
		expect(await organizationSeen(accessToken, other)).toMatchObject({ id: organization.id, roles: ['admin'] })
		await db()
			.delete(organizationMembers)
			.where(and(eq(organizationMembers.organizationId, organization.id), eq(organizationMembers.userId, account.id)))
		expect(await organizationSeen(accessToken, other)).toBeNull()
		expect(await organizationSeen(accessToken, t)).toBeNull()
	})

	test('a role changed and an organization deactivated are seen by the other instance at its next request', async () => {
		const { account, organization, accessToken, refreshToken } = await memberWithTokens(['owner'])
		expect(await organizationSeen(accessToken, other)).toMatchObject({ roles: ['owner'], permissions: ['*'] })
		await db()
			.update(organizationMembers)
			.set({ roles: ['member'] })
			.where(and(eq(organizationMembers.organizationId, organization.id), eq(organizationMembers.userId, account.id)))
		expect(await organizationSeen(accessToken, other)).toMatchObject({ roles: ['member'], permissions: [] })
		await db().update(organizations).set({ status: 'deactivated', deactivatedAt: new Date() }).where(eq(organizations.id, organization.id))
		expect(await organizationSeen(accessToken, other)).toBeNull()
		// The refresh on the other instance drops it too.
		const next = await refresh(refreshToken, undefined, other)
		expect(next.status).toBe(200)
		expect(jwtPayload(next.body.data.accessToken).org).toBeUndefined()
	})
})
