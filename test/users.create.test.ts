import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { problem, startTestApp, type TestApp } from './support/app'
import { login, PASSWORD, signUp, signUpAdmin, uniqueEmail } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

let t: TestApp
/** The same database served with SIGNUP_ENABLED=false (no second database is created). */
let closed: TestApp
beforeAll(async () => {
	t = await startTestApp()
	closed = await startTestApp({ SIGNUP_ENABLED: 'false' }, t.database)
})
afterAll(async () => {
	await closed.close()
	await t.close()
})

const signUpRequest = (json: unknown, token?: string) => t.call('POST', '/api/users', { json, token })

const validation = (errors: Array<{ pointer: string; code: string; detail: string }>) =>
	problem(
		'validation-error',
		422,
		'/api/users',
		errors.length === 1 ? '1 field is invalid' : `${errors.length} fields are invalid`,
		errors,
	)

const emailTaken = problem('email-taken', 409, '/api/users', 'An account with this email already exists')

describe('POST /users creates an account', () => {
	test('sign-up answers 201 with a Location header and the whole user', async () => {
		const email = uniqueEmail('ada')
		const res = await signUpRequest({ email, password: PASSWORD, name: 'Ada Lovelace' })
		expect(res.status).toBe(201)
		expect(res.headers.get('content-type')).toStartWith('application/json')
		expect(res.headers.get('cache-control')).toBe('no-store')
		expect(res.body).toEqual({
			data: {
				id: expect.stringMatching(UUID_V7),
				email,
				name: 'Ada Lovelace',
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
			message: 'User created',
			errors: [],
		})
		expect(res.body.data.updatedAt).toBe(res.body.data.createdAt)
		expect(res.headers.get('location')).toBe(`/api/users/${res.body.data.id}`)
	})

	test('the Location of a new account serves that same account to its owner', async () => {
		const email = uniqueEmail()
		const created = await signUpRequest({ email, password: PASSWORD, name: 'Owner' })
		const account = await login(t, email)
		const res = await t.call('GET', String(created.headers.get('location')), { token: account.accessToken })
		expect(res.status).toBe(200)
		expect(res.body).toEqual({ data: created.body.data, message: 'User', errors: [] })
	})

	test('the name is optional and defaults to an empty string', async () => {
		const res = await signUpRequest({ email: uniqueEmail(), password: PASSWORD })
		expect(res.status).toBe(201)
		expect(res.body.data.name).toBe('')
	})

	test('the email is stored trimmed and lower-cased, and logs in in any case', async () => {
		const email = uniqueEmail('mixed')
		const res = await signUpRequest({ email: `  ${email.toUpperCase()}\t`, password: PASSWORD })
		expect(res.status).toBe(201)
		expect(res.body.data.email).toBe(email)
		const account = await login(t, ` ${email.toUpperCase()} `)
		expect(account.id).toBe(res.body.data.id)
	})
})

describe('an email belongs to one account', () => {
	test('signing up with a taken email is 409 email-taken', async () => {
		const email = uniqueEmail()
		expect((await signUpRequest({ email, password: PASSWORD })).status).toBe(201)
		const res = await signUpRequest({ email, password: PASSWORD })
		expect(res.status).toBe(409)
		expect(res.headers.get('content-type')).toBe('application/problem+json')
		expect(res.body).toEqual(emailTaken)
	})

	test('the same email in another case or with spaces around it is taken too', async () => {
		const email = uniqueEmail()
		expect((await signUpRequest({ email, password: PASSWORD })).status).toBe(201)
		for (const variant of [email.toUpperCase(), ` ${email} `, email.replace(/^./, (c) => c.toUpperCase())]) {
			const res = await signUpRequest({ email: variant, password: PASSWORD })
			expect(res.status).toBe(409)
			expect(res.body).toEqual(emailTaken)
		}
	})

	test("a deactivated account's email stays taken", async () => {
		const account = await signUp(t)
		expect((await t.call('DELETE', '/api/users/me', { token: account.accessToken })).status).toBe(200)
		const res = await signUpRequest({ email: account.email.toUpperCase(), password: PASSWORD })
		expect(res.status).toBe(409)
		expect(res.body).toEqual(emailTaken)
	})

	test('of 20 parallel sign-ups with one email exactly one succeeds and the others are 409', async () => {
		const email = uniqueEmail('race')
		const variants = Array.from({ length: 20 }, (_, n) => (n % 2 === 0 ? email : email.toUpperCase()))
		const results = await Promise.all(variants.map((variant) => signUpRequest({ email: variant, password: PASSWORD })))
		const statuses = results.map((res) => res.status)
		expect(statuses.filter((status) => status >= 500)).toEqual([])
		expect(statuses.filter((status) => status === 201)).toHaveLength(1)
		expect(statuses.filter((status) => status === 409)).toHaveLength(19)
		for (const res of results.filter((r) => r.status === 409)) expect(res.body).toEqual(emailTaken)
		const winner = results.find((res) => res.status === 201)
		expect((await login(t, email)).id).toBe(winner?.body.data.id)
	})
})

describe('sign-up validation: one errors entry per invalid field', () => {
	test('an email that is not an email address is 422 at #/email', async () => {
		const res = await signUpRequest({ email: 'not-an-email', password: PASSWORD })
		expect(res.status).toBe(422)
		expect(res.headers.get('content-type')).toBe('application/problem+json')
		expect(res.body).toEqual(validation([{ pointer: '#/email', code: 'format', detail: 'must be an email address' }]))
	})

	test('a password shorter than 8 characters is 422 at #/password', async () => {
		const res = await signUpRequest({ email: uniqueEmail(), password: 'short12' })
		expect(res.status).toBe(422)
		expect(res.body).toEqual(validation([{ pointer: '#/password', code: 'minLength', detail: 'must be at least 8 characters' }]))
	})

	test('a password of exactly 8 characters is accepted', async () => {
		const res = await signUpRequest({ email: uniqueEmail(), password: 'qz8-vlk!' })
		expect(res.status).toBe(201)
	})

	test('password length counts code points, not UTF-16 units', async () => {
		// Seven keys are 14 UTF-16 units but 7 characters: too short.
		const short = await signUpRequest({ email: uniqueEmail(), password: '🔑'.repeat(7) })
		expect(short.status).toBe(422)
		expect(short.body).toEqual(validation([{ pointer: '#/password', code: 'minLength', detail: 'must be at least 8 characters' }]))
		// 256 keys are 512 UTF-16 units but exactly the 256 characters allowed.
		const email = uniqueEmail()
		const longest = await signUpRequest({ email, password: '🔑'.repeat(256) })
		expect(longest.status).toBe(201)
		expect((await login(t, email, '🔑'.repeat(256))).id).toBe(longest.body.data.id)
	})

	test('a password of more than 256 code points is 422 at #/password', async () => {
		const res = await signUpRequest({ email: uniqueEmail(), password: '🔑'.repeat(257) })
		expect(res.status).toBe(422)
		expect(res.body).toEqual(validation([{ pointer: '#/password', code: 'maxLength', detail: 'must be at most 256 characters' }]))
	})

	test('a very long password is refused with the same 256-character limit', async () => {
		const res = await signUpRequest({ email: uniqueEmail(), password: 'x'.repeat(2000) })
		expect(res.status).toBe(422)
		expect(res.body).toEqual(validation([{ pointer: '#/password', code: 'maxLength', detail: 'must be at most 256 characters' }]))
	})

	for (const common of ['password1', 'Password1', 'qwerty123']) {
		test(`a common password such as "${common}" is refused`, async () => {
			const res = await signUpRequest({ email: uniqueEmail(), password: common })
			expect(res.status).toBe(422)
			expect(res.body).toEqual(validation([{ pointer: '#/password', code: 'commonPassword', detail: 'is too common; choose another' }]))
		})
	}

	test('a malformed email and a too-short password are reported together, in one 422', async () => {
		const both = await signUpRequest({ email: 'not-an-email', password: 'short' })
		expect(both.status).toBe(422)
		expect(both.body).toEqual(
			validation([
				{ pointer: '#/email', code: 'format', detail: 'must be an email address' },
				{ pointer: '#/password', code: 'minLength', detail: 'must be at least 8 characters' },
			]),
		)
		const common = await signUpRequest({ email: 'still-not-an-email', password: 'password123', name: 7 })
		expect(common.body.errors).toEqual([
			{ pointer: '#/email', code: 'format', detail: 'must be an email address' },
			{ pointer: '#/name', code: 'type', detail: 'must be a string' },
			{ pointer: '#/password', code: 'commonPassword', detail: 'is too common; choose another' },
		])
		const policy = await signUpRequest({ email: uniqueEmail(), password: 'short' })
		expect(policy.body).toEqual(
			validation([{ pointer: '#/password', code: 'minLength', detail: 'must be at least 8 characters' }]),
		)
	})

	test('missing email and password are one entry each', async () => {
		const res = await signUpRequest({ name: 'Nobody' })
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			validation([
				{ pointer: '#/email', code: 'required', detail: 'is required' },
				{ pointer: '#/password', code: 'required', detail: 'is required' },
			]),
		)
	})

	test('members of the wrong JSON type are one entry each', async () => {
		const res = await signUpRequest({ email: 5, password: true, name: 7 })
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			validation([
				{ pointer: '#/email', code: 'type', detail: 'must be an email address' },
				{ pointer: '#/password', code: 'type', detail: 'must be a string' },
				{ pointer: '#/name', code: 'type', detail: 'must be a string' },
			]),
		)
	})

	test('a role that is neither user nor admin is 422 at #/role', async () => {
		const res = await signUpRequest({ email: uniqueEmail(), password: PASSWORD, role: 'owner' })
		expect(res.status).toBe(422)
		expect(res.body).toEqual(validation([{ pointer: '#/role', code: 'enum', detail: 'must be one of "user", "admin"' }]))
	})

	test('a JSON array instead of an object is 422 at the root', async () => {
		const res = await signUpRequest([{ email: uniqueEmail(), password: PASSWORD }])
		expect(res.status).toBe(422)
		expect(res.body).toEqual(validation([{ pointer: '#', code: 'type', detail: 'must be a JSON object' }]))
	})

	test('a refused sign-up creates no account', async () => {
		const email = uniqueEmail()
		expect((await signUpRequest({ email, password: 'password1' })).status).toBe(422)
		expect((await signUpRequest({ email, password: PASSWORD })).status).toBe(201)
	})
})

describe('roles at sign-up', () => {
	test('an anonymous caller asking for the admin role is 403', async () => {
		const email = uniqueEmail()
		const res = await signUpRequest({ email, password: PASSWORD, role: 'admin' })
		expect(res.status).toBe(403)
		expect(res.body).toEqual(problem('forbidden', 403, '/api/users', 'Only admins may assign a role'))
		// Nothing was created: the email is still free.
		expect((await signUpRequest({ email, password: PASSWORD })).status).toBe(201)
	})

	test('a signed-in non-admin asking for the admin role is 403', async () => {
		const user = await signUp(t)
		const res = await signUpRequest({ email: uniqueEmail(), password: PASSWORD, role: 'admin' }, user.accessToken)
		expect(res.status).toBe(403)
		expect(res.body).toEqual(problem('forbidden', 403, '/api/users', 'Only admins may assign a role'))
	})

	test('anyone may ask for the user role explicitly', async () => {
		const res = await signUpRequest({ email: uniqueEmail(), password: PASSWORD, role: 'user' })
		expect(res.status).toBe(201)
		expect(res.body.data.role).toBe('user')
	})

	test('an admin may create another admin, who then has admin rights', async () => {
		const admin = await signUpAdmin(t)
		const email = uniqueEmail('new-admin')
		const res = await signUpRequest({ email, password: PASSWORD, name: 'Second Admin', role: 'admin' }, admin.accessToken)
		expect(res.status).toBe(201)
		expect(res.body.data).toMatchObject({ email, name: 'Second Admin', role: 'admin', status: 'active' })
		const created = await login(t, email)
		expect((await t.call('GET', '/api/users', { token: created.accessToken })).status).toBe(200)
	})
})

describe('with sign-up closed (SIGNUP_ENABLED=false)', () => {
	test('an anonymous sign-up is 403', async () => {
		const res = await closed.call('POST', '/api/users', { json: { email: uniqueEmail(), password: PASSWORD } })
		expect(res.status).toBe(403)
		expect(res.body).toEqual(problem('forbidden', 403, '/api/users', 'Sign-up is closed; ask an administrator for an account'))
	})

	test('a signed-in non-admin cannot create accounts either', async () => {
		const user = await signUp(t)
		const res = await closed.call('POST', '/api/users', { json: { email: uniqueEmail(), password: PASSWORD }, token: user.accessToken })
		expect(res.status).toBe(403)
		expect(res.body).toEqual(problem('forbidden', 403, '/api/users', 'Sign-up is closed; ask an administrator for an account'))
	})

	test('an admin still creates accounts', async () => {
		const admin = await signUpAdmin(t)
		const email = uniqueEmail()
		const res = await closed.call('POST', '/api/users', { json: { email, password: PASSWORD }, token: admin.accessToken })
		expect(res.status).toBe(201)
		expect(res.body.data).toMatchObject({ email, role: 'user', status: 'active' })
		expect(res.headers.get('location')).toBe(`/api/users/${res.body.data.id}`)
	})
})

describe('Unicode passwords', () => {
	test('a Unicode password is accepted and logs in', async () => {
		const email = uniqueEmail('unicode')
		const password = 'pässwörd-ünïcode'
		const res = await signUpRequest({ email, password })
		expect(res.status).toBe(201)
		const account = await login(t, email, password)
		expect(account.id).toBe(res.body.data.id)
	})

	test('a Unicode password typed in decomposed form logs in too', async () => {
		const email = uniqueEmail('nfd')
		const composed = 'pässwörd-ünïcode'.normalize('NFC')
		expect((await signUpRequest({ email, password: composed })).status).toBe(201)
		const decomposed = composed.normalize('NFD')
		expect(decomposed).not.toBe(composed)
		expect((await login(t, email, decomposed)).email).toBe(email)
	})

	test('a Unicode password does not log in when one accent is left out', async () => {
		const email = uniqueEmail('lookalike')
		expect((await signUpRequest({ email, password: 'pässwörd-ünïcode' })).status).toBe(201)
		const res = await t.call('POST', '/api/auth/login', { json: { email, password: 'pässwörd-unïcode' } })
		expect(res.status).toBe(401)
	})
})
