import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { problem, reauthenticationRequired, startTestApp, type TestApp } from './support/app'
import { ageSession, login, PASSWORD, signUp, signUpAdmin, uniqueEmail, type Account, soleActiveAdmin } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const NEW_PASSWORD = 'a brand new passphrase'

let t: TestApp
beforeAll(async () => {
	// A user's own email change applies at once here; its confirmation by mail is test/email.change.test.ts's.
	t = await startTestApp({ EMAIL_VERIFICATION: 'off' })
})
afterAll(() => t.close())

const put = (target: string, json: unknown, caller: Account) => t.call('PUT', `/api/users/${target}`, { json, token: caller.accessToken })
const me = (caller: Account) => t.call('GET', '/api/users/me', { token: caller.accessToken })

const validation = (instance: string, errors: Array<{ pointer: string; code: string; detail: string }>) =>
	problem('validation-error', 422, instance, errors.length === 1 ? '1 field is invalid' : `${errors.length} fields are invalid`, errors)

const invalidToken = (instance: string) => problem('invalid-token', 401, instance, 'The access token is invalid, expired or revoked')


describe('PUT /users/{id} replaces the editable fields', () => {
	test('a user renames themself and gets the whole updated user back', async () => {
		const user = await signUp(t)
		const before = (await me(user)).body.data
		const res = await put('me', { email: user.email, name: 'Grace Hopper' }, user)
		expect(res.status).toBe(200)
		expect(res.headers.get('content-type')).toStartWith('application/json')
		expect(res.body).toEqual({
			data: { ...before, name: 'Grace Hopper', updatedAt: expect.stringMatching(ISO_UTC) },
			message: 'User updated',
			errors: [],
		})
		expect(Date.parse(res.body.data.updatedAt)).toBeGreaterThanOrEqual(Date.parse(before.updatedAt))
		expect((await me(user)).body.data.name).toBe('Grace Hopper')
	})

	test('email and name are both required', async () => {
		const user = await signUp(t)
		const noName = await put('me', { email: user.email }, user)
		expect(noName.status).toBe(422)
		expect(noName.body).toEqual(validation('/api/users/me', [{ pointer: '#/name', code: 'required', detail: 'is required' }]))

		const noEmail = await put('me', { name: 'No Email' }, user)
		expect(noEmail.status).toBe(422)
		expect(noEmail.body).toEqual(
			validation('/api/users/me', [{ pointer: '#/email', code: 'required', detail: 'is required' }]),
		)

		const neither = await put('me', {}, user)
		expect(neither.status).toBe(422)
		expect(neither.body.errors.map((error: { pointer: string }) => error.pointer).sort()).toEqual(['#/email', '#/name'])
		expect(neither.body.detail).toBe('2 fields are invalid')
		expect((await me(user)).body.data.name).toBe('Test User')
	})

	test('an invalid email is 422 at #/email', async () => {
		const user = await signUp(t)
		const res = await put('me', { email: 'not-an-email', name: 'X', currentPassword: PASSWORD }, user)
		expect(res.status).toBe(422)
		expect(res.body).toEqual(validation('/api/users/me', [{ pointer: '#/email', code: 'format', detail: 'must be an email address' }]))
	})
})

describe('changing credentials needs the current password', () => {
	test('a user changing their own email without currentPassword, from a session signed in over 5 minutes ago, gets 403 reauthentication-required', async () => {
		const user = await signUp(t)
		await ageSession(t, user, 301)
		const res = await put('me', { email: uniqueEmail('new'), name: 'Test User' }, user)
		expect(res.status).toBe(403)
		expect(res.body).toEqual(reauthenticationRequired('/api/users/me'))
		expect((await me(user)).body.data).toMatchObject({ email: user.email, pendingEmail: null })
	})

	test('a user changing their own password without currentPassword, from a session signed in over 5 minutes ago, gets 403 reauthentication-required', async () => {
		const user = await signUp(t)
		await ageSession(t, user, 301)
		const res = await put(user.id, { email: user.email, name: 'Test User', password: NEW_PASSWORD }, user)
		expect(res.status).toBe(403)
		expect(res.body).toEqual(reauthenticationRequired(`/api/users/${user.id}`))
		expect((await login(t, user.email, PASSWORD)).id).toBe(user.id)
	})

	test('within 5 minutes of its sign-in a session changes its password without currentPassword; the right currentPassword works on an older one', async () => {
		const fresh = await signUp(t)
		expect((await put('me', { email: fresh.email, name: 'Test User', password: NEW_PASSWORD }, fresh)).status).toBe(200)
		expect((await login(t, fresh.email, NEW_PASSWORD)).id).toBe(fresh.id)

		const older = await signUp(t)
		await ageSession(t, older, 301)
		expect((await put('me', { email: older.email, name: 'Test User', password: NEW_PASSWORD, currentPassword: PASSWORD }, older)).status).toBe(200)
		expect((await login(t, older.email, NEW_PASSWORD)).id).toBe(older.id)
	})

	test('a wrong currentPassword is 422 and changes nothing', async () => {
		const user = await signUp(t)
		const newEmail = uniqueEmail('new')
		const res = await put('me', { email: newEmail, name: 'Test User', password: NEW_PASSWORD, currentPassword: 'not my password' }, user)
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			validation('/api/users/me', [{ pointer: '#/currentPassword', code: 'mismatch', detail: 'is not your current password' }]),
		)
		expect((await me(user)).body.data.email).toBe(user.email)
		expect((await login(t, user.email, PASSWORD)).id).toBe(user.id)
	})

	test('with the right currentPassword a user changes their email, stored trimmed and lower-cased', async () => {
		const user = await signUp(t)
		const newEmail = uniqueEmail('moved')
		const res = await put('me', { email: ` ${newEmail.toUpperCase()} `, name: 'Test User', currentPassword: PASSWORD }, user)
		expect(res.status).toBe(200)
		expect(res.body.data.email).toBe(newEmail)
		expect((await login(t, newEmail)).id).toBe(user.id)
		const old = await t.call('POST', '/api/auth/login', { json: { email: user.email, password: PASSWORD } })
		expect(old.status).toBe(401)
	})

	test('the same email in another case is not a change and needs no currentPassword', async () => {
		const user = await signUp(t)
		const res = await put('me', { email: user.email.toUpperCase(), name: 'Same Email' }, user)
		expect(res.status).toBe(200)
		expect(res.body.data).toMatchObject({ email: user.email, name: 'Same Email' })
	})

	test('with the right currentPassword a user changes their password', async () => {
		const user = await signUp(t)
		const res = await put('me', { email: user.email, name: 'Test User', password: NEW_PASSWORD, currentPassword: PASSWORD }, user)
		expect(res.status).toBe(200)
		expect((await login(t, user.email, NEW_PASSWORD)).id).toBe(user.id)
		const old = await t.call('POST', '/api/auth/login', { json: { email: user.email, password: PASSWORD } })
		expect(old.status).toBe(401)
	})

	test('a new password must follow the password policy', async () => {
		const user = await signUp(t)
		const short = await put('me', { email: user.email, name: 'Test User', password: 'short', currentPassword: PASSWORD }, user)
		expect(short.status).toBe(422)
		expect(short.body).toEqual(
			validation('/api/users/me', [{ pointer: '#/password', code: 'minLength', detail: 'must be at least 8 characters' }]),
		)
		const common = await put('me', { email: user.email, name: 'Test User', password: 'password1', currentPassword: PASSWORD }, user)
		expect(common.status).toBe(422)
		expect(common.body).toEqual(
			validation('/api/users/me', [{ pointer: '#/password', code: 'commonPassword', detail: 'is too common; choose another' }]),
		)
		expect((await login(t, user.email, PASSWORD)).id).toBe(user.id)
	})

	test("an admin changes another user's email and password without knowing it", async () => {
		const user = await signUp(t)
		const admin = await signUpAdmin(t)
		const newEmail = uniqueEmail('reset')
		const res = await put(user.id, { email: newEmail, name: 'Reset', password: NEW_PASSWORD }, admin)
		expect(res.status).toBe(200)
		expect(res.body.data).toMatchObject({ id: user.id, email: newEmail, name: 'Reset' })
		expect((await login(t, newEmail, NEW_PASSWORD)).id).toBe(user.id)
	})
})

describe('changing the password ends the other sessions', () => {
	test("the user's other sessions are revoked at once and the current one keeps working", async () => {
		const user = await signUp(t)
		const other = await login(t, user.email)
		const res = await put('me', { email: user.email, name: 'Test User', password: NEW_PASSWORD, currentPassword: PASSWORD }, user)
		expect(res.status).toBe(200)

		const refused = await me(other)
		expect(refused.status).toBe(401)
		expect(refused.headers.get('www-authenticate')).toBe('Bearer realm="latchkey", error="invalid_token"')
		expect(refused.body).toEqual(invalidToken('/api/users/me'))
		const refresh = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: other.refreshToken } })
		expect(refresh.status).toBe(401)

		expect((await me(user)).status).toBe(200)
		const refreshed = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: user.refreshToken } })
		expect(refreshed.status).toBe(200)
	})

	test("an admin resetting a user's password ends every session of that user", async () => {
		const user = await signUp(t)
		const admin = await signUpAdmin(t)
		const res = await put(user.id, { email: user.email, name: 'Test User', password: NEW_PASSWORD }, admin)
		expect(res.status).toBe(200)
		expect((await me(user)).status).toBe(401)
		expect((await me(admin)).status).toBe(200)
	})

	test('changing only the name keeps every session', async () => {
		const user = await signUp(t)
		const other = await login(t, user.email)
		expect((await put('me', { email: user.email, name: 'Only Name' }, user)).status).toBe(200)
		expect((await me(other)).status).toBe(200)
	})
})

describe('role and status belong to admins', () => {
	test('a non-admin sending the admin role is 403 and stays a user', async () => {
		const user = await signUp(t)
		const res = await put('me', { email: user.email, name: 'Test User', role: 'admin' }, user)
		expect(res.status).toBe(403)
		expect(res.body).toEqual(problem('forbidden', 403, '/api/users/me', 'Only admins may change a role'))
		expect((await me(user)).body.data.role).toBe('user')
	})

	test('a non-admin sending status deactivated is 403 and stays active', async () => {
		const user = await signUp(t)
		const res = await put('me', { email: user.email, name: 'Test User', status: 'deactivated' }, user)
		expect(res.status).toBe(403)
		expect(res.body).toEqual(problem('forbidden', 403, '/api/users/me', 'Only admins may change an account status'))
		expect((await me(user)).body.data.status).toBe('active')
	})

	test('a non-admin sending their current role and status is fine', async () => {
		const user = await signUp(t)
		const res = await put('me', { email: user.email, name: 'Unchanged Role', role: 'user', status: 'active' }, user)
		expect(res.status).toBe(200)
		expect(res.body.data).toMatchObject({ name: 'Unchanged Role', role: 'user', status: 'active' })
	})

	test('an admin promotes a user to admin', async () => {
		const user = await signUp(t)
		const admin = await signUpAdmin(t)
		const res = await put(user.id, { email: user.email, name: 'Promoted', role: 'admin' }, admin)
		expect(res.status).toBe(200)
		expect(res.body.data).toMatchObject({ id: user.id, role: 'admin', status: 'active' })
		const promoted = await login(t, user.email)
		expect((await t.call('GET', '/api/users', { token: promoted.accessToken })).status).toBe(200)
	})

	test('an admin deactivates a user through status, which ends their sessions', async () => {
		const user = await signUp(t)
		const admin = await signUpAdmin(t)
		const res = await put(user.id, { email: user.email, name: 'Test User', status: 'deactivated' }, admin)
		expect(res.status).toBe(200)
		expect(res.body.data).toMatchObject({ id: user.id, status: 'deactivated', deactivatedAt: expect.stringMatching(ISO_UTC) })
		expect((await me(user)).status).toBe(401)
		const loginRes = await t.call('POST', '/api/auth/login', { json: { email: user.email, password: PASSWORD } })
		expect(loginRes.status).toBe(401)
	})

	test('an admin reactivates a deactivated user, who can log in again', async () => {
		const user = await signUp(t)
		const admin = await signUpAdmin(t)
		const deactivated = await t.call('DELETE', `/api/users/${user.id}`, { token: admin.accessToken })
		expect(deactivated.body.data.status).toBe('deactivated')

		const res = await put(user.id, { email: user.email, name: 'Test User', status: 'active' }, admin)
		expect(res.status).toBe(200)
		expect(res.body.data).toMatchObject({ id: user.id, status: 'active', deactivatedAt: null })
		const again = await login(t, user.email)
		expect((await me(again)).body.data).toMatchObject({ id: user.id, status: 'active', deactivatedAt: null })
		// Sessions revoked by the deactivation stay revoked.
		expect((await me(user)).status).toBe(401)
	})
})

describe('conflicts', () => {
	test("changing the email to another account's is 409 email-taken", async () => {
		const user = await signUp(t)
		const other = await signUp(t)
		const res = await put('me', { email: other.email.toUpperCase(), name: 'Test User', currentPassword: PASSWORD }, user)
		expect(res.status).toBe(409)
		expect(res.body).toEqual(problem('email-taken', 409, '/api/users/me', 'An account with this email already exists'))
		expect((await me(user)).body.data.email).toBe(user.email)
	})

	test("an admin moving a user onto a deactivated account's email gets 409 too", async () => {
		const user = await signUp(t)
		const gone = await signUp(t)
		const admin = await signUpAdmin(t)
		expect((await t.call('DELETE', '/api/users/me', { token: gone.accessToken })).status).toBe(200)
		const res = await put(user.id, { email: gone.email, name: 'Test User' }, admin)
		expect(res.status).toBe(409)
		expect(res.body).toEqual(problem('email-taken', 409, `/api/users/${user.id}`, 'An account with this email already exists'))
	})

	test('the last active admin cannot be demoted', async () => {
		const { admin, restore } = await soleActiveAdmin(t)
		try {
			const res = await put('me', { email: admin.email, name: '', role: 'user' }, admin)
			expect(res.status).toBe(409)
			expect(res.body).toEqual(
				problem('last-admin', 409, '/api/users/me', 'The last active admin can be neither deactivated nor demoted'),
			)
			expect((await me(admin)).body.data.role).toBe('admin')
		} finally {
			await restore()
		}
	})

	test('the last active admin cannot be deactivated through status', async () => {
		const { admin, restore } = await soleActiveAdmin(t)
		try {
			const res = await put(admin.id, { email: admin.email, name: '', status: 'deactivated' }, admin)
			expect(res.status).toBe(409)
			expect(res.body).toEqual(
				problem('last-admin', 409, `/api/users/${admin.id}`, 'The last active admin can be neither deactivated nor demoted'),
			)
			expect((await me(admin)).body.data.status).toBe('active')
		} finally {
			await restore()
		}
	})

	test('an admin may step down while another active admin remains', async () => {
		const { admin, restore } = await soleActiveAdmin(t)
		const successor = await signUpAdmin(t)
		try {
			const res = await put('me', { email: admin.email, name: '', role: 'user' }, admin)
			expect(res.status).toBe(200)
			expect(res.body.data.role).toBe('user')
			expect((await t.call('GET', '/api/users', { token: successor.accessToken })).status).toBe(200)
			expect((await t.call('GET', '/api/users', { token: admin.accessToken })).status).toBe(403)
		} finally {
			await restore(successor)
		}
	})
})

describe('an id in another letter case names the same account', () => {
	test('the self check holds: an admin changing their own password under the upper-case id still needs proof that it is them', async () => {
		const admin = await signUpAdmin(t)
		await ageSession(t, admin)
		const res = await put(admin.id.toUpperCase(), { email: admin.email, name: '', password: 'a brand new passphrase 7' }, admin)
		expect(res.status).toBe(403)
		expect(res.body.type).toEndWith('/reauthentication-required')
		expect((await me(admin)).status).toBe(200)
	})

	test('a user reaches their own account under the upper-case id, and nobody else’s', async () => {
		const user = await signUp(t)
		const other = await signUp(t)
		expect((await t.call('GET', `/api/users/${user.id.toUpperCase()}`, { token: user.accessToken })).body.data.id).toBe(user.id)
		expect((await t.call('GET', `/api/users/${other.id.toUpperCase()}`, { token: user.accessToken })).status).toBe(403)
	})

	test('the last-admin guard holds: the only active admin can neither demote nor deactivate itself under the upper-case id', async () => {
		const { admin, restore } = await soleActiveAdmin(t)
		const upper = admin.id.toUpperCase()
		try {
			const demoted = await put(upper, { email: admin.email, name: '', role: 'user' }, admin)
			expect(demoted.body).toEqual(problem('last-admin', 409, `/api/users/${upper}`, 'The last active admin can be neither deactivated nor demoted'))
			const deactivatedByPut = await put(upper, { email: admin.email, name: '', status: 'deactivated' }, admin)
			expect(deactivatedByPut.status).toBe(409)
			const deactivated = await t.call('DELETE', `/api/users/${upper}`, { token: admin.accessToken })
			expect(deactivated.status).toBe(409)
			expect((await me(admin)).body.data).toMatchObject({ role: 'admin', status: 'active' })
		} finally {
			await restore()
		}
	})

	test('a session id in upper case revokes that session', async () => {
		const user = await signUp(t)
		const other = await login(t, user.email)
		const res = await t.call('DELETE', `/api/users/me/sessions/${other.sessionId.toUpperCase()}`, { token: user.accessToken })
		expect(res.status).toBe(200)
		expect(res.body.data.id).toBe(other.sessionId)
		expect((await me(other)).status).toBe(401)
	})
})
