import { expect } from 'bun:test'
import { eq, sql } from 'drizzle-orm'
import { sessions } from '../../src/db/schema'
import { PasswordHasher } from '../../src/modules/auth/password'
import { createAdmin } from '../../src/modules/users/bootstrap'
import type { TestApp } from './app'

export const PASSWORD = 'correct horse battery staple'

let counter = 0
/** A fresh email for each call, so tests never collide on shared data. */
export const uniqueEmail = (label = 'user') => `${label}-${Date.now().toString(36)}-${(counter++).toString(36)}@example.test`

export interface Account {
	id: string
	email: string
	password: string
	accessToken: string
	refreshToken: string
	sessionId: string
}

/** Decodes a JWT's payload without verifying it (tests only). */
export const jwtPayload = (token: string) =>
	JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()) as Record<string, unknown>
export const jwtHeader = (token: string) =>
	JSON.parse(Buffer.from(token.split('.')[0] ?? '', 'base64url').toString()) as Record<string, unknown>

export async function login(t: TestApp, email: string, password = PASSWORD): Promise<Account> {
	const res = await t.call('POST', '/api/auth/login', { json: { email, password } })
	expect(res.status).toBe(200)
	const { accessToken, refreshToken, user } = res.body.data
	return { id: user.id, email, password, accessToken, refreshToken, sessionId: String(jwtPayload(accessToken).sid) }
}

/** Signs up through the API and logs in. */
export async function signUp(t: TestApp, fields: { email?: string; password?: string; name?: string } = {}): Promise<Account> {
	const email = fields.email ?? uniqueEmail()
	const password = fields.password ?? PASSWORD
	const res = await t.call('POST', '/api/users', { json: { email, password, name: fields.name ?? 'Test User' } })
	expect(res.status).toBe(201)
	return login(t, email, password)
}

/**
 * Moves a session's last check of its owner `seconds` into the past, as if it had been signed in that long ago:
 * past REAUTHENTICATION_SECONDS it may add or change no way in until POST /auth/reauthentication.
 */
export async function ageSession(t: TestApp, account: Pick<Account, 'sessionId'>, seconds = 3600): Promise<void> {
	await t.database.handle.db
		.update(sessions)
		.set({ authenticatedAt: sql`now() - ${seconds} * interval '1 second'` })
		.where(eq(sessions.id, account.sessionId))
}

/** An admin, created the way an operator would (the bootstrap path), then logged in. */
export async function signUpAdmin(t: TestApp, email = uniqueEmail('admin')): Promise<Account> {
	await createAdmin(t.database.handle.db, new PasswordHasher(t.config.password), { email, password: PASSWORD }, t.config.password.minLength)
	return login(t, email)
}

/**
 * An admin who is, for the length of one test, the only active admin: every
 * other active admin is demoted, and `restore` promotes them again.
 */
export async function soleActiveAdmin(t: TestApp): Promise<{ admin: Account; restore(by?: Account): Promise<void> }> {
	const admin = await signUpAdmin(t)
	const list = await t.call('GET', '/api/users?role=admin&status=active&limit=100', { token: admin.accessToken })
	expect(list.status).toBe(200)
	expect(list.body.data.nextCursor).toBeNull()
	const others = (list.body.data.items as Array<{ id: string; email: string; name: string }>).filter((user) => user.id !== admin.id)
	const setRole = (user: { id: string; email: string; name: string }, role: string, by: Account) =>
		t.call('PUT', `/api/users/${user.id}`, { json: { email: user.email, name: user.name, role }, token: by.accessToken })
	for (const other of others) expect((await setRole(other, 'user', admin)).status).toBe(200)
	return {
		admin,
		async restore(by = admin) {
			for (const other of others) expect((await setRole(other, 'admin', by)).status).toBe(200)
		},
	}
}

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

/** The whole body of a successful login or refresh, for a default-configured app. */
export const tokenEnvelope = (user: { id: string; email: string; name: string }, message: string) => ({
	data: {
		accessToken: expect.any(String),
		refreshToken: expect.any(String),
		tokenType: 'Bearer',
		expiresIn: 900,
		refreshExpiresIn: 2_592_000,
		user: {
			id: user.id,
			email: user.email,
			name: user.name,
			role: 'user',
			status: 'active',
			createdAt: expect.stringMatching(ISO_UTC),
			updatedAt: expect.stringMatching(ISO_UTC),
			deactivatedAt: null,
			emailVerified: false,
			pendingEmail: null,
			metadata: {},
			appMetadata: {},
		},
	},
	message,
	errors: [],
})
