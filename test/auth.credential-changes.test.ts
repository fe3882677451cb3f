import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { users } from '../src/db/schema'
import { startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { PASSWORD, signUp, signUpAdmin, type Account } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(60_000)

const NEW_PASSWORD = 'an entirely new passphrase 42'
// Real argon2 cost, so that each check takes long enough for the requests below to overlap.
const SLOW_HASHING = { PASSWORD_HASH_MEMORY_KIB: '19456', PASSWORD_HASH_TIME_COST: '2' }

let database: TestDatabase
beforeAll(async () => {
	database = await createTestDatabase()
})
afterAll(() => database.drop())

const loginWith = (t: TestApp, email: string, password: string) => t.call('POST', '/api/auth/login', { json: { email, password } })
const me = (t: TestApp, token: string) => t.call('GET', '/api/users/me', { token })

/** Logins with the old password, fired together with a password change; every one that got tokens must have lost them. */
async function raceLoginsAgainst(t: TestApp, user: Account, change: () => Promise<{ status: number }>) {
	const logins = Array.from({ length: 8 }, () => loginWith(t, user.email, PASSWORD))
	const [changed, ...results] = await Promise.all([Bun.sleep(5).then(change), ...logins])
	expect(changed?.status).toBe(200)
	for (const res of results) {
		expect([200, 401]).toContain(res.status)
		if (res.status !== 200) continue
		expect((await me(t, res.body.data.accessToken)).status).toBe(401)
		expect((await t.call('POST', '/api/auth/refresh', { json: { refreshToken: res.body.data.refreshToken } })).status).toBe(401)
	}
	expect((await loginWith(t, user.email, PASSWORD)).status).toBe(401)
	expect((await loginWith(t, user.email, NEW_PASSWORD)).status).toBe(200)
}

describe('a password change wins over logins with the old password that overlap it', () => {
	let t: TestApp
	beforeAll(async () => {
		t = await startTestApp(SLOW_HASHING, database)
	})

	test('a change by the user themself: no login with the old password ends with a live session', async () => {
		const user = await signUp(t)
		await raceLoginsAgainst(t, user, () =>
			t.call('PUT', '/api/users/me', {
				json: { email: user.email, name: '', password: NEW_PASSWORD, currentPassword: PASSWORD },
				token: user.accessToken,
			}),
		)
	})

	test('a change by an admin: no login with the old password ends with a live session', async () => {
		const admin = await signUpAdmin(t)
		const user = await signUp(t)
		await raceLoginsAgainst(t, user, () =>
			t.call('PUT', `/api/users/${user.id}`, { json: { email: user.email, name: '', password: NEW_PASSWORD }, token: admin.accessToken }),
		)
	})

	test('deactivation: no login that overlaps it ends with a session', async () => {
		const admin = await signUpAdmin(t)
		const user = await signUp(t)
		const logins = Array.from({ length: 8 }, () => loginWith(t, user.email, PASSWORD))
		const [deactivated, ...results] = await Promise.all([
			Bun.sleep(5).then(() => t.call('DELETE', `/api/users/${user.id}`, { token: admin.accessToken })),
			...logins,
		])
		expect(deactivated?.status).toBe(200)
		for (const res of results.filter((res) => res.status === 200))
			expect((await t.call('POST', '/api/auth/refresh', { json: { refreshToken: res.body.data.refreshToken } })).status).toBe(401)
	})
})

describe('the hash upgrade at login never writes over a hash changed meanwhile', () => {
	test('an account hashed with older settings, changed by an admin while it logs in with the old password, keeps the new password', async () => {
		// The account is made under cheaper settings; the app that logs it in upgrades such hashes.
		const old = await startTestApp({ PASSWORD_HASH_MEMORY_KIB: '1024', PASSWORD_HASH_TIME_COST: '1' }, database)
		const user = await signUp(old)
		const t = await startTestApp(SLOW_HASHING, database)
		const admin = await signUpAdmin(t)
		await raceLoginsAgainst(t, user, () =>
			t.call('PUT', `/api/users/${user.id}`, { json: { email: user.email, name: '', password: NEW_PASSWORD }, token: admin.accessToken }),
		)
		const [row] = await database.handle.db.select({ hash: users.passwordHash }).from(users).where(eq(users.id, user.id))
		expect(await Bun.password.verify(NEW_PASSWORD, row?.hash ?? '')).toBe(true)
	})

	test('without a change, the upgrade happens: the stored hash moves to the current settings', async () => {
		const old = await startTestApp({ PASSWORD_HASH_MEMORY_KIB: '1024', PASSWORD_HASH_TIME_COST: '1' }, database)
		const user = await signUp(old)
		const t = await startTestApp(SLOW_HASHING, database)
		expect((await loginWith(t, user.email, PASSWORD)).status).toBe(200)
		const [row] = await database.handle.db.select({ hash: users.passwordHash }).from(users).where(eq(users.id, user.id))
		expect(row?.hash).toStartWith('$argon2id$v=19$m=19456,t=2,')
		expect((await loginWith(t, user.email, PASSWORD)).status).toBe(200)
	})
})

describe('no password hash is computed inside a transaction that holds locks', () => {
	test('while a dozen password changes are hashing, an admin renames another account and it is read, at once', async () => {
		// Accounts made cheaply; the changes pay the real cost (tokens are good on both apps: one secret).
		const setup = await startTestApp({}, database)
		const admin = await signUpAdmin(setup)
		const targets = await Promise.all(Array.from({ length: 12 }, () => signUp(setup)))
		const bystander = await signUp(setup)
		const t = await startTestApp({ PASSWORD_HASH_MEMORY_KIB: '65536', PASSWORD_HASH_TIME_COST: '3' }, database)
		const order: string[] = []
		const changes = targets.map((user) =>
			t
				.call('PUT', `/api/users/${user.id}`, { json: { email: user.email, name: '', password: NEW_PASSWORD }, token: admin.accessToken })
				.then((res) => order.push(`change ${res.status}`)),
		)
		// Started after every change has begun: before the fix each change held the row locks of every admin (and a
		// pooled connection) through its hash, and any other admin update queued behind all of them.
		await Bun.sleep(50)
		const rename = t
			.call('PUT', `/api/users/${bystander.id}`, { json: { email: bystander.email, name: 'Renamed' }, token: admin.accessToken })
			.then((res) => order.push(`rename ${res.status}`))
		const read = me(t, bystander.accessToken).then((res) => order.push(`read ${res.status}`))
		await Promise.all([...changes, rename, read])
		expect(order.slice(0, 2).sort()).toEqual(['read 200', 'rename 200'])
		expect(order.filter((entry) => entry === 'change 200')).toHaveLength(12)
	})
})
