import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { problem, startTestApp, type CallResult, type TestApp } from './support/app'
import { login, PASSWORD, signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

let t: TestApp
beforeAll(async () => {
	t = await startTestApp()
})
afterAll(() => t.close())

/**
 * One row of the Users table in API.md: how to call it on behalf of `owner`
 * (whose id is in the path as `target`), and what a success looks like.
 */
interface Row {
	method: string
	path: string
	call(caller: Account | undefined, owner: Account, target: string): Promise<CallResult>
	succeeded(res: CallResult, owner: Account): void
}

const userBody = (owner: Account) => ({ email: owner.email, name: 'Renamed' })

const rows: Row[] = [
	{
		method: 'GET',
		path: '/users/{id}',
		call: (caller, _owner, target) => t.call('GET', `/api/users/${target}`, { token: caller?.accessToken }),
		succeeded(res, owner) {
			expect(res.status).toBe(200)
			expect(res.body.data).toMatchObject({ id: owner.id, email: owner.email })
		},
	},
	{
		method: 'PUT',
		path: '/users/{id}',
		call: (caller, owner, target) => t.call('PUT', `/api/users/${target}`, { json: userBody(owner), token: caller?.accessToken }),
		succeeded(res, owner) {
			expect(res.status).toBe(200)
			expect(res.body.data).toMatchObject({ id: owner.id, email: owner.email, name: 'Renamed' })
		},
	},
	{
		method: 'DELETE',
		path: '/users/{id}',
		call: (caller, _owner, target) => t.call('DELETE', `/api/users/${target}`, { token: caller?.accessToken }),
		succeeded(res, owner) {
			expect(res.status).toBe(200)
			expect(res.body.data).toMatchObject({ id: owner.id, status: 'deactivated' })
		},
	},
	{
		method: 'GET',
		path: '/users/{id}/sessions',
		call: (caller, _owner, target) => t.call('GET', `/api/users/${target}/sessions`, { token: caller?.accessToken }),
		succeeded(res, owner) {
			expect(res.status).toBe(200)
			expect(res.body.data.items.map((session: { id: string }) => session.id)).toContain(owner.sessionId)
		},
	},
	{
		method: 'DELETE',
		path: '/users/{id}/sessions/{sessionId}',
		call: (caller, owner, target) =>
			t.call('DELETE', `/api/users/${target}/sessions/${owner.sessionId}`, { token: caller?.accessToken }),
		succeeded(res, owner) {
			expect(res.status).toBe(200)
			expect(res.body.data).toMatchObject({ id: owner.sessionId, revokedAt: expect.any(String) })
		},
	},
]

/** The path a request went to, as `instance` reports it. */
const pathOf = (row: Row, owner: Account, target: string) =>
	`/api${row.path.replace('{id}', target).replace('{sessionId}', owner.sessionId)}`

describe('every /users/{id} route', () => {
	for (const row of rows) {
		describe(`${row.method} ${row.path}`, () => {
			test('is 401 without a token, with WWW-Authenticate: Bearer realm="latchkey"', async () => {
				const owner = await signUp(t)
				const res = await row.call(undefined, owner, owner.id)
				expect(res.status).toBe(401)
				expect(res.headers.get('www-authenticate')).toBe('Bearer realm="latchkey"')
				expect(res.body).toEqual(
					problem('unauthorized', 401, pathOf(row, owner, owner.id), 'Send an access token: Authorization: Bearer <token>'),
				)
			})

			test('is 401 for `me` without a token', async () => {
				const owner = await signUp(t)
				const res = await row.call(undefined, owner, 'me')
				expect(res.status).toBe(401)
				expect(res.headers.get('www-authenticate')).toBe('Bearer realm="latchkey"')
			})

			test('is 401 with error="invalid_token" for a token that is not valid', async () => {
				const owner = await signUp(t)
				const res = await row.call({ ...owner, accessToken: `${owner.accessToken}x` }, owner, owner.id)
				expect(res.status).toBe(401)
				expect(res.headers.get('www-authenticate')).toBe('Bearer realm="latchkey", error="invalid_token"')
				expect(res.body).toEqual(
					problem('invalid-token', 401, pathOf(row, owner, owner.id), 'The access token is invalid, expired or revoked'),
				)
			})

			test('is 403 for another non-admin user, and changes nothing', async () => {
				const owner = await signUp(t)
				const stranger = await signUp(t)
				const res = await row.call(stranger, owner, owner.id)
				expect(res.status).toBe(403)
				expect(res.body).toEqual(problem('forbidden', 403, pathOf(row, owner, owner.id), 'You may only act on your own account'))
				// The owner's account and session are untouched.
				const self = await t.call('GET', '/api/users/me', { token: owner.accessToken })
				expect(self.status).toBe(200)
				expect(self.body.data).toMatchObject({ name: 'Test User', status: 'active' })
			})

			test('is allowed for the user themself by id', async () => {
				const owner = await signUp(t)
				row.succeeded(await row.call(owner, owner, owner.id), owner)
			})

			test('is allowed for the user themself as `me`', async () => {
				const owner = await signUp(t)
				row.succeeded(await row.call(owner, owner, 'me'), owner)
			})

			test('is allowed for an admin', async () => {
				const owner = await signUp(t)
				const admin = await signUpAdmin(t)
				row.succeeded(await row.call(admin, owner, owner.id), owner)
			})
		})
	}
})

describe('GET /users (admins only)', () => {
	test('is 401 without a token', async () => {
		const res = await t.call('GET', '/api/users')
		expect(res.status).toBe(401)
		expect(res.headers.get('www-authenticate')).toBe('Bearer realm="latchkey"')
		expect(res.body).toEqual(problem('unauthorized', 401, '/api/users', 'Send an access token: Authorization: Bearer <token>'))
	})

	test('is 403 for a non-admin user', async () => {
		const user = await signUp(t)
		const res = await t.call('GET', '/api/users', { token: user.accessToken })
		expect(res.status).toBe(403)
		expect(res.body).toEqual(problem('forbidden', 403, '/api/users', 'This requires an admin'))
	})

	test('is allowed for an admin', async () => {
		const admin = await signUpAdmin(t)
		const res = await t.call('GET', '/api/users', { token: admin.accessToken })
		expect(res.status).toBe(200)
		expect(res.body.data.items.map((user: { id: string }) => user.id)).toContain(admin.id)
	})

	test('is 403 for an admin who has been demoted, at once', async () => {
		const demoted = await signUpAdmin(t)
		const admin = await signUpAdmin(t)
		const res = await t.call('PUT', `/api/users/${demoted.id}`, { json: { email: demoted.email, name: '', role: 'user' }, token: admin.accessToken })
		expect(res.status).toBe(200)
		const list = await t.call('GET', '/api/users', { token: demoted.accessToken })
		expect(list.status).toBe(403)
		expect(list.body).toEqual(problem('forbidden', 403, '/api/users', 'This requires an admin'))
	})
})

describe('POST /users (anyone while sign-up is open, admins always)', () => {
	test('is allowed without a token', async () => {
		const res = await t.call('POST', '/api/users', { json: { email: uniqueEmail(), password: PASSWORD } })
		expect(res.status).toBe(201)
		expect(res.body.data.role).toBe('user')
	})

	test('is allowed for a signed-in non-admin creating a plain user', async () => {
		const user = await signUp(t)
		const email = uniqueEmail()
		const res = await t.call('POST', '/api/users', { json: { email, password: PASSWORD }, token: user.accessToken })
		expect(res.status).toBe(201)
		expect(res.body.data).toMatchObject({ email, role: 'user' })
	})

	test('is 403 for a non-admin asking for the admin role', async () => {
		const user = await signUp(t)
		const res = await t.call('POST', '/api/users', { json: { email: uniqueEmail(), password: PASSWORD, role: 'admin' }, token: user.accessToken })
		expect(res.status).toBe(403)
		expect(res.body).toEqual(problem('forbidden', 403, '/api/users', 'Only admins may assign a role'))
	})

	test('is allowed for an admin, role included', async () => {
		const admin = await signUpAdmin(t)
		const email = uniqueEmail()
		const res = await t.call('POST', '/api/users', { json: { email, password: PASSWORD, role: 'admin' }, token: admin.accessToken })
		expect(res.status).toBe(201)
		expect(res.body.data).toMatchObject({ email, role: 'admin' })
		expect((await login(t, email)).id).toBe(res.body.data.id)
	})

	test('is 401 with a token that is not valid, rather than an anonymous sign-up', async () => {
		const user = await signUp(t)
		const res = await t.call('POST', '/api/users', { json: { email: uniqueEmail(), password: PASSWORD }, token: `${user.accessToken}x` })
		expect(res.status).toBe(401)
		expect(res.headers.get('www-authenticate')).toBe('Bearer realm="latchkey", error="invalid_token"')
		expect(res.body).toEqual(problem('invalid-token', 401, '/api/users', 'The access token is invalid, expired or revoked'))
	})
})

describe('acting on another account', () => {
	test("a non-admin revoking another user's session through `me` gets 404 and that session lives on", async () => {
		const owner = await signUp(t)
		const stranger = await signUp(t)
		const res = await t.call('DELETE', `/api/users/me/sessions/${owner.sessionId}`, { token: stranger.accessToken })
		expect(res.status).toBe(404)
		expect(res.body).toEqual(problem('not-found', 404, `/api/users/me/sessions/${owner.sessionId}`, 'No such session for this user'))
		expect((await t.call('GET', '/api/users/me', { token: owner.accessToken })).status).toBe(200)
	})

	test('an admin reading an id that does not exist gets 404', async () => {
		const admin = await signUpAdmin(t)
		const id = Bun.randomUUIDv7()
		const res = await t.call('GET', `/api/users/${id}`, { token: admin.accessToken })
		expect(res.status).toBe(404)
		expect(res.body).toEqual(problem('not-found', 404, `/api/users/${id}`, 'No user with this id'))
	})

	test('an id that is neither a UUID nor `me` is 422 at #/id', async () => {
		const user = await signUp(t)
		const res = await t.call('GET', '/api/users/someone', { token: user.accessToken })
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			problem('validation-error', 422, '/api/users/someone', '1 field is invalid', [
				{ pointer: '#/id', code: 'enum', detail: 'must be a user id (UUID) or "me"' },
			]),
		)
	})
})
