import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { type TestApp } from './support/app'
import { login, PASSWORD, signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'
import { proofOf, SmtpSink, SUBJECT, startAppWithSmtp } from './support/mail'

setDefaultTimeout(60_000)

let sink: SmtpSink
let t: TestApp

let closeApp: () => Promise<void>

beforeAll(async () => {
	;({ t, sink, close: closeApp } = await startAppWithSmtp())
})
afterAll(() => closeApp())

const changeOwnEmail = (user: Account, email: string) =>
	t.call('PUT', '/api/users/me', { json: { email, name: 'Test User', currentPassword: PASSWORD }, token: user.accessToken })
const verify = (body: Record<string, unknown>) => t.call('POST', '/api/auth/email-verifications', { json: body })

describe('a user changing their own email', () => {
	test('keeps the old address until the new one confirms; the old one gets a notice; then the new one signs in', async () => {
		const user = await signUp(t)
		const newEmail = uniqueEmail('moved')
		const res = await changeOwnEmail(user, newEmail)
		expect(res.status).toBe(200)
		expect(res.body.data).toMatchObject({ email: user.email, pendingEmail: newEmail })

		const notice = await sink.waitFor(user.email, { subject: SUBJECT.notice })
		expect(notice.text).toContain(newEmail)
		expect(() => proofOf(notice)).toThrow()
		const mail = await sink.waitFor(newEmail, { subject: SUBJECT.change })
		const { link, token } = proofOf(mail)
		expect(link).toStartWith('https://app.example.test/verify-email#token=')
		// Until then the old address is the one that signs in.
		await login(t, user.email)
		expect((await t.call('POST', '/api/auth/login', { json: { email: newEmail, password: PASSWORD } })).status).toBe(401)

		const confirmed = await verify({ token })
		expect(confirmed.status).toBe(200)
		expect(confirmed.body.data).toMatchObject({ id: user.id, email: newEmail, pendingEmail: null, emailVerified: true })
		await login(t, newEmail)
		expect((await t.call('POST', '/api/auth/login', { json: { email: user.email, password: PASSWORD } })).status).toBe(401)
		expect((await verify({ token })).status).toBe(400)
	})

	test('the code sent to the new address confirms it', async () => {
		const user = await signUp(t)
		const newEmail = uniqueEmail('moved')
		await changeOwnEmail(user, newEmail)
		const { code } = proofOf(await sink.waitFor(newEmail, { subject: SUBJECT.change }))
		expect((await verify({ email: newEmail, code })).body.data).toMatchObject({ email: newEmail })
	})

	test('an address another account took meanwhile is 409 at confirmation, and nothing changes', async () => {
		const user = await signUp(t)
		const newEmail = uniqueEmail('contested')
		await changeOwnEmail(user, newEmail)
		const { token } = proofOf(await sink.waitFor(newEmail, { subject: SUBJECT.change }))
		await signUp(t, { email: newEmail })
		const res = await verify({ token })
		expect(res.status).toBe(409)
		expect(res.body.type).toEndWith('/email-taken')
		const me = await t.call('GET', '/api/users/me', { token: user.accessToken })
		expect(me.body.data).toMatchObject({ email: user.email, pendingEmail: newEmail })
	})

	test('an address taken already is 409 at once, and no mail goes', async () => {
		const user = await signUp(t)
		const other = await signUp(t)
		const res = await changeOwnEmail(user, other.email)
		expect(res.status).toBe(409)
		await t.app.decorator.jobs.idle()
		expect(sink.to(other.email, SUBJECT.change)).toHaveLength(0)
		expect(sink.to(user.email, SUBJECT.notice)).toHaveLength(0)
	})

	test('a second change voids the first one’s token; asking again for the new address resends its mail', async () => {
		const user = await signUp(t)
		const first = uniqueEmail('first')
		const second = uniqueEmail('second')
		await changeOwnEmail(user, first)
		const firstProof = proofOf(await sink.waitFor(first, { subject: SUBJECT.change }))
		await changeOwnEmail(user, second)
		await sink.waitFor(second, { subject: SUBJECT.change })
		expect((await verify({ token: firstProof.token })).status).toBe(400)
		expect((await t.call('POST', '/api/auth/verification-requests', { json: { email: second } })).status).toBe(202)
		const resent = proofOf(await sink.waitFor(second, { subject: SUBJECT.change, count: 2 }))
		expect((await verify({ token: resent.token })).body.data.email).toBe(second)
	})

	test('recovery of the old address cancels a pending change', async () => {
		const user = await signUp(t)
		const newEmail = uniqueEmail('intruder')
		await changeOwnEmail(user, newEmail)
		const { token: changeToken } = proofOf(await sink.waitFor(newEmail, { subject: SUBJECT.change }))
		await t.call('POST', '/api/auth/recovery-requests', { json: { email: user.email } })
		const { token } = proofOf(await sink.waitFor(user.email, { subject: SUBJECT.recovery }))
		expect((await t.call('POST', '/api/auth/password-resets', { json: { token, password: 'a brand new passphrase' } })).status).toBe(200)
		expect((await verify({ token: changeToken })).status).toBe(400)
		const me = await login(t, user.email, 'a brand new passphrase')
		expect((await t.call('GET', '/api/users/me', { token: me.accessToken })).body.data).toMatchObject({ email: user.email, pendingEmail: null })
	})
})

describe('an admin changing someone’s email', () => {
	test('applies at once and marks the address unverified; no mail asks for confirmation', async () => {
		const admin = await signUpAdmin(t)
		const email = uniqueEmail('verified')
		await t.call('POST', '/api/users', { json: { email, password: PASSWORD } })
		const created = await login(t, email)
		await verify({ token: proofOf(await sink.waitFor(email, { subject: SUBJECT.verification })).token })
		const newEmail = uniqueEmail('by-admin')
		const res = await t.call('PUT', `/api/users/${created.id}`, { json: { email: newEmail, name: 'Moved' }, token: admin.accessToken })
		expect(res.body.data).toMatchObject({ email: newEmail, emailVerified: false, pendingEmail: null })
		await t.app.decorator.jobs.idle()
		expect(sink.to(newEmail)).toHaveLength(0)
		await login(t, newEmail)
	})
})
