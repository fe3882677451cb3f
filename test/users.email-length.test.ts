import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { problem, startTestApp, type TestApp } from './support/app'
import { PASSWORD, signUp, signUpAdmin, type Account } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

let t: TestApp
let admin: Account
beforeAll(async () => {
	t = await startTestApp()
	admin = await signUpAdmin(t)
})
afterAll(() => t.close())

let counter = 0
/** A fresh address with exactly `local` characters before the @ and `total` in all. */
function address(local: number, total = local + '@example.test'.length): string {
	const tag = `${Date.now().toString(36)}${(counter++).toString(36)}`
	// The domain: labels of 60 characters (DNS allows 63), then `.test`.
	const labels = Array.from({ length: total - local - 1 - '.test'.length }, (_, n) => (n % 61 === 60 ? '.' : 'd'))
		.join('')
		.replace(/\.$/, 'd')
	const email = `${tag}${'a'.repeat(local - tag.length)}@${labels}.test`
	expect(email.indexOf('@')).toBe(local)
	expect(email).toHaveLength(total)
	return email
}

const invalidEmail = (instance: string, code: string, detail: string) =>
	problem('validation-error', 422, instance, '1 field is invalid', [{ pointer: '#/email', code, detail }])

const LOCAL_PART_TOO_LONG = ['pattern', 'must have at most 64 characters before the @'] as const

describe('RFC 5321 length limits of an email address', () => {
	test('sign-up takes 64 characters before the @ and 254 in all, and refuses 65 before the @ with 422 at #/email', async () => {
		const longest = address(64, 254)
		const created = await t.call('POST', '/api/users', { json: { email: longest, password: PASSWORD } })
		expect(created.status).toBe(201)
		expect(created.body.data.email).toBe(longest)

		const email = address(65)
		const res = await t.call('POST', '/api/users', { json: { email, password: PASSWORD } })
		expect(res.status).toBe(422)
		expect(res.headers.get('content-type')).toBe('application/problem+json')
		expect(res.body).toEqual(invalidEmail('/api/users', ...LOCAL_PART_TOO_LONG))
		// However short the whole address; and one character over 254 in all is refused as before.
		const short = await t.call('POST', '/api/users', { json: { email: address(65, 200), password: PASSWORD } })
		expect(short.body).toEqual(invalidEmail('/api/users', ...LOCAL_PART_TOO_LONG))
		const long = await t.call('POST', '/api/users', { json: { email: address(60, 255), password: PASSWORD } })
		expect(long.body).toEqual(invalidEmail('/api/users', 'maxLength', 'must be an email address'))
	})

	test('PUT /users/{id} refuses 65 characters before the @ with 422 at #/email and changes nothing', async () => {
		const user = await signUp(t)
		const own = await t.call('PUT', '/api/users/me', {
			json: { email: address(65), name: 'Long Local', currentPassword: PASSWORD },
			token: user.accessToken,
		})
		expect(own.status).toBe(422)
		expect(own.body).toEqual(invalidEmail('/api/users/me', ...LOCAL_PART_TOO_LONG))

		const byAdmin = await t.call('PUT', `/api/users/${user.id}`, { json: { email: address(65), name: 'Long Local' }, token: admin.accessToken })
		expect(byAdmin.status).toBe(422)
		expect(byAdmin.body).toEqual(invalidEmail(`/api/users/${user.id}`, ...LOCAL_PART_TOO_LONG))

		const after = await t.call('GET', '/api/users/me', { token: user.accessToken })
		expect(after.body.data).toMatchObject({ email: user.email, name: 'Test User' })

		const longest = address(64)
		const accepted = await t.call('PUT', `/api/users/${user.id}`, { json: { email: longest, name: 'Long Local' }, token: admin.accessToken })
		expect(accepted.status).toBe(200)
		expect(accepted.body.data.email).toBe(longest)
	})

	test('the OpenAPI document states both limits', async () => {
		// `any`: the OpenAPI document is free-form JSON, read member by member.
		const document: any = await (await t.app.handle(new Request('http://localhost/api/docs/json'))).json()
		const email = document.paths['/api/users'].post.requestBody.content['application/json'].schema.properties.email
		expect(email).toMatchObject({ type: 'string', format: 'email', maxLength: 254, pattern: '^(?![^@]{65})' })
		expect(email.description).toContain('at most 64 of them before the @')
		expect(new RegExp(email.pattern).test(address(64))).toBe(true)
		expect(new RegExp(email.pattern).test(address(65))).toBe(false)
	})
})
