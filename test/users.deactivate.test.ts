import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { problem, startTestApp, type TestApp } from './support/app'
import { login, PASSWORD, signUp, signUpAdmin, type Account, soleActiveAdmin } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const LAST_ADMIN = 'The last active admin can be neither deactivated nor demoted'

let t: TestApp
beforeAll(async () => {
	t = await startTestApp()
})
afterAll(() => t.close())

const me = (caller: Account) => t.call('GET', '/api/users/me', { token: caller.accessToken })
const deactivate = (target: string, caller: Account) => t.call('DELETE', `/api/users/${target}`, { token: caller.accessToken })
const demote = (target: Account, caller: Account) =>
	t.call('PUT', `/api/users/${target.id}`, { json: { email: target.email, name: '', role: 'user' }, token: caller.accessToken })
const refresh = (account: Account) => t.call('POST', '/api/auth/refresh', { json: { refreshToken: account.refreshToken } })
const loginAttempt = (email: string, password: string) => t.call('POST', '/api/auth/login', { json: { email, password } })

/** Active admins, as an admin sees them. */
async function activeAdmins(caller: Account): Promise<Array<{ id: string; email: string; name: string }>> {
	const res = await t.call('GET', '/api/users?role=admin&status=active&limit=100', { token: caller.accessToken })
	expect(res.status).toBe(200)
	expect(res.body.data.nextCursor).toBeNull()
	return res.body.data.items
}


describe('DELETE /users/{id} deactivates, never removes', () => {
	test('a user deactivating themself gets the whole user back, now deactivated', async () => {
		const user = await signUp(t)
		const before = (await me(user)).body.data
		const res = await deactivate('me', user)
		expect(res.status).toBe(200)
		expect(res.headers.get('content-type')).toStartWith('application/json')
		expect(res.body).toEqual({
			data: {
				...before,
				status: 'deactivated',
				deactivatedAt: expect.stringMatching(ISO_UTC),
				updatedAt: expect.stringMatching(ISO_UTC),
			},
			message: 'User deactivated',
			errors: [],
		})
		expect(Date.parse(res.body.data.deactivatedAt)).toBeGreaterThanOrEqual(Date.parse(before.createdAt))
	})

	test('the account is still there for an admin to read', async () => {
		const user = await signUp(t)
		const admin = await signUpAdmin(t)
		const deactivated = await deactivate(user.id, admin)
		expect(deactivated.status).toBe(200)
		const res = await t.call('GET', `/api/users/${user.id}`, { token: admin.accessToken })
		expect(res.status).toBe(200)
		expect(res.body.data).toEqual(deactivated.body.data)
	})

	test('every session of the user is revoked at once: access tokens and refresh tokens get 401', async () => {
		const user = await signUp(t)
		const second = await login(t, user.email)
		const admin = await signUpAdmin(t)
		expect((await deactivate(user.id, admin)).status).toBe(200)

		for (const session of [user, second]) {
			const res = await me(session)
			expect(res.status).toBe(401)
			expect(res.headers.get('www-authenticate')).toBe('Bearer realm="latchkey", error="invalid_token"')
			expect(res.body).toEqual(problem('invalid-token', 401, '/api/users/me', 'The access token is invalid, expired or revoked'))

			const refreshed = await refresh(session)
			expect(refreshed.status).toBe(401)
			expect(refreshed.body).toEqual(
				problem('invalid-token', 401, '/api/auth/refresh', 'The refresh token is invalid, expired or revoked'),
			)
		}
	})

	test('the sessions are listed as none any more', async () => {
		const user = await signUp(t)
		const admin = await signUpAdmin(t)
		expect((await deactivate(user.id, admin)).status).toBe(200)
		const res = await t.call('GET', `/api/users/${user.id}/sessions`, { token: admin.accessToken })
		expect(res.status).toBe(200)
		expect(res.body.data.items).toEqual([])
	})

	test('login is refused with exactly the body a wrong password gets', async () => {
		const user = await signUp(t)
		const wrongPassword = await loginAttempt(user.email, 'not the password at all')
		expect(wrongPassword.status).toBe(401)
		expect(wrongPassword.body).toEqual(problem('invalid-credentials', 401, '/api/auth/login', 'The email or password is incorrect'))

		expect((await deactivate('me', user)).status).toBe(200)
		const deactivated = await loginAttempt(user.email, PASSWORD)
		expect(deactivated.status).toBe(401)
		const { instance: _a, ...refused } = deactivated.body
		const { instance: _b, ...wrong } = wrongPassword.body
		expect(refused).toEqual(wrong)
		expect(deactivated.headers.get('www-authenticate')).toBe(wrongPassword.headers.get('www-authenticate'))
		expect(deactivated.headers.get('content-type')).toBe(wrongPassword.headers.get('content-type'))
	})

	test('the email stays reserved: signing up with it is 409', async () => {
		const user = await signUp(t)
		expect((await deactivate('me', user)).status).toBe(200)
		const res = await t.call('POST', '/api/users', { json: { email: user.email, password: PASSWORD } })
		expect(res.status).toBe(409)
		expect(res.body).toEqual(problem('email-taken', 409, '/api/users', 'An account with this email already exists'))
	})

	test('repeating DELETE returns the same user, unchanged', async () => {
		const user = await signUp(t)
		const admin = await signUpAdmin(t)
		const first = await deactivate(user.id, admin)
		expect(first.status).toBe(200)
		const again = await deactivate(user.id, admin)
		expect(again.status).toBe(200)
		expect(again.body).toEqual(first.body)
	})

	test('an admin deactivating an id that does not exist gets 404', async () => {
		const admin = await signUpAdmin(t)
		const id = Bun.randomUUIDv7()
		const res = await deactivate(id, admin)
		expect(res.status).toBe(404)
		expect(res.body).toEqual(problem('not-found', 404, `/api/users/${id}`, 'No user with this id'))
	})

	test("deactivating one user leaves another user's sessions alone", async () => {
		const user = await signUp(t)
		const bystander = await signUp(t)
		expect((await deactivate('me', user)).status).toBe(200)
		expect((await me(bystander)).status).toBe(200)
	})
})

describe('the last active admin', () => {
	test('cannot deactivate themself: 409 last-admin, and stays active', async () => {
		const { admin, restore } = await soleActiveAdmin(t)
		try {
			const res = await deactivate('me', admin)
			expect(res.status).toBe(409)
			expect(res.headers.get('content-type')).toBe('application/problem+json')
			expect(res.body).toEqual(problem('last-admin', 409, '/api/users/me', LAST_ADMIN))
			expect((await me(admin)).body.data).toMatchObject({ role: 'admin', status: 'active', deactivatedAt: null })
		} finally {
			await restore()
		}
	})

	test('an admin may deactivate themself while another active admin remains', async () => {
		const { admin, restore } = await soleActiveAdmin(t)
		const successor = await signUpAdmin(t)
		try {
			const res = await deactivate('me', admin)
			expect(res.status).toBe(200)
			expect(res.body.data).toMatchObject({ role: 'admin', status: 'deactivated' })
			expect((await activeAdmins(successor)).map((user) => user.id)).toEqual([successor.id])
		} finally {
			await restore(successor)
		}
	})

	const actions = {
		deactivate: (target: Account, caller: Account) => deactivate(target.id, caller),
		demote,
	}
	for (const [label, first, second] of [
		['deactivating each other', 'deactivate', 'deactivate'],
		['demoting each other', 'demote', 'demote'],
		['one deactivating while the other demotes', 'deactivate', 'demote'],
	] as const) {
		test(`of two admins ${label} at the same moment exactly one succeeds, the other is refused, and one active admin remains`, async () => {
			const { admin: a, restore } = await soleActiveAdmin(t)
			const b = await signUpAdmin(t)
			try {
				const results = await Promise.all([actions[first](b, a), actions[second](a, b)])
				expect(results.filter((res) => res.status >= 500)).toEqual([])
				expect(results.filter((res) => res.status === 200)).toHaveLength(1)
				// The loser is refused as the last admin (409) or, when the winner committed before the
				// loser's request was authenticated, as no longer signed in (401) or no longer an admin (403).
				const refused = results.find((res) => res.status !== 200)
				const instance = String(refused?.body.instance)
				const allowed: Record<number, unknown> = {
					409: problem('last-admin', 409, instance, LAST_ADMIN),
					401: problem('invalid-token', 401, instance, 'The access token is invalid, expired or revoked'),
					403: problem('forbidden', 403, instance, 'You may only act on your own account'),
				}
				expect([409, 401, 403]).toContain(refused?.status ?? 0)
				expect(refused?.body).toEqual(allowed[refused?.status ?? 0])
				const winner = results[0]?.status === 200 ? a : b
				expect((await activeAdmins(winner)).map((user) => user.id)).toEqual([winner.id])
			} finally {
				// Whichever of the two is still an active admin puts the others back.
				for (const candidate of [a, b]) {
					const self = await me(candidate)
					if (self.status === 200 && self.body.data.role === 'admin') {
						await restore(candidate)
						break
					}
				}
			}
		})
	}
})
