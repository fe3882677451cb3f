import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { Secret, TOTP } from 'otpauth'
import { factors, recoveryCodes } from '../src/db/schema'
import { problem, startTestApp, type TestApp } from './support/app'
import { awayFromStepBoundary, completeWithTotp, enrollTotp, loginWithTotp, passwordStep, totpCode } from './support/factors'
import { jwtPayload, login, PASSWORD, signUp } from './support/fixtures'
import { loggedMail, proofOf, signUpVerified } from './support/mail'

setDefaultTimeout(30_000)

let t: TestApp
beforeAll(async () => {
	t = await startTestApp()
})
afterAll(() => t.close())

describe('enrolling a TOTP app', () => {
	test('answers the secret, an otpauth URI and an SVG QR code; the factor is pending until a code proves it', async () => {
		const account = await signUp(t)
		const res = await t.call('POST', '/api/users/me/factors', { json: { type: 'totp', name: 'Phone' }, token: account.accessToken })
		expect(res.status).toBe(201)
		const { factor, secret, otpauthUri, qrCodeSvg } = res.body.data
		expect(factor).toEqual({ id: expect.any(String), type: 'totp', name: 'Phone', status: 'pending', createdAt: expect.any(String), lastUsedAt: null })
		expect(secret).toMatch(/^[A-Z2-7]{32}$/)
		const uri = new URL(otpauthUri)
		expect(uri.protocol).toBe('otpauth:')
		expect(uri.searchParams.get('secret')).toBe(secret)
		expect(uri.searchParams.get('issuer')).toBe('Latchkey')
		expect(uri.searchParams.get('algorithm')).toBe('SHA1')
		expect(uri.searchParams.get('digits')).toBe('6')
		expect(uri.searchParams.get('period')).toBe('30')
		expect(decodeURIComponent(uri.pathname)).toContain(account.email)
		expect(qrCodeSvg).toStartWith('<svg')
		expect(res.headers.get('cache-control')).toBe('no-store')

		// Pending: login still needs only the password.
		const relogin = await t.call('POST', '/api/auth/login', { json: { email: account.email, password: PASSWORD } })
		expect(relogin.body.data.accessToken).toBeString()
	})

	test('a wrong code does not activate it; the right one does, with 10 recovery codes shown once', async () => {
		const account = await signUp(t)
		const created = await t.call('POST', '/api/users/me/factors', { json: { type: 'totp' }, token: account.accessToken })
		const { factor, secret } = created.body.data
		const path = `/api/users/me/factors/${factor.id}/activation`
		const wrong = await t.call('POST', path, { json: { code: '000000' === totpCode(secret) ? '111111' : '000000' }, token: account.accessToken })
		expect(wrong.status).toBe(400)
		expect(wrong.body).toEqual(problem('invalid-code', 400, path, 'The code does not prove this factor; try again'))

		await awayFromStepBoundary()
		const right = await t.call('POST', path, { json: { code: totpCode(secret) }, token: account.accessToken })
		expect(right.status).toBe(200)
		expect(right.body.data.factor).toMatchObject({ id: factor.id, status: 'active', name: 'Authenticator app' })
		expect(right.body.data.recoveryCodes).toHaveLength(10)
		expect(new Set(right.body.data.recoveryCodes).size).toBe(10)
		for (const code of right.body.data.recoveryCodes) expect(code).toMatch(/^[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}$/)

		// Stored sealed and hashed: neither the secret nor a code appears in the database.
		const [row] = await t.database.handle.db.select().from(factors).where(eq(factors.id, factor.id))
		expect(row?.totpSecret).toStartWith('v1.')
		expect(row?.totpSecret).not.toContain(secret)
		const stored = await t.database.handle.db.select().from(recoveryCodes).where(eq(recoveryCodes.userId, account.id))
		expect(stored).toHaveLength(10)
		for (const code of right.body.data.recoveryCodes) expect(JSON.stringify(stored)).not.toContain(code)

		// Activating again: it is already active.
		const again = await t.call('POST', path, { json: { code: totpCode(secret) }, token: account.accessToken })
		expect(again.status).toBe(409)
	})

	test('a second factor activated later brings no new recovery codes', async () => {
		const account = await signUp(t)
		const first = await enrollTotp(t, account)
		const session = await loginWithTotp(t, account, first.secret)
		const second = await enrollTotp(t, session, 'Tablet')
		expect(first.recoveryCodes).toHaveLength(10)
		expect(second.recoveryCodes).toEqual([])
	})

	test('another user’s factor cannot be activated, listed or removed; an admin may list and remove it', async () => {
		const owner = await signUp(t)
		const other = await signUp(t)
		const created = await t.call('POST', '/api/users/me/factors', { json: { type: 'totp' }, token: owner.accessToken })
		const factorId = created.body.data.factor.id
		const activation = await t.call('POST', `/api/users/me/factors/${factorId}/activation`, { json: { code: totpCode(created.body.data.secret) }, token: other.accessToken })
		expect(activation.status).toBe(404)
		expect((await t.call('GET', `/api/users/${owner.id}/factors`, { token: other.accessToken })).status).toBe(403)
		expect((await t.call('DELETE', `/api/users/${owner.id}/factors/${factorId}`, { token: other.accessToken })).status).toBe(403)
		expect((await t.call('GET', '/api/users/me/factors', { token: owner.accessToken })).body.data.items).toHaveLength(1)
	})
})

describe('logging in with TOTP', () => {
	test('the right password answers mfaRequired with a token and no tokens; a code completes it at aal2', async () => {
		const account = await signUp(t)
		const { secret } = await enrollTotp(t, account)
		const res = await t.call('POST', '/api/auth/login', { json: { email: account.email, password: PASSWORD } })
		expect(res.status).toBe(200)
		expect(res.body).toEqual({
			data: { mfaRequired: true, mfaToken: expect.any(String), methods: ['totp', 'recovery-code'] },
			message: 'Password accepted; a second factor is required',
			errors: [],
		})
		expect(res.text).not.toContain('accessToken')

		await awayFromStepBoundary()
		const done = await completeWithTotp(t, res.body.data.mfaToken, totpCode(secret, 1))
		expect(done.status).toBe(200)
		const claims = jwtPayload(done.body.data.accessToken)
		expect(claims.amr).toEqual(['pwd', 'otp', 'mfa'])
		expect(claims.aal).toBe('aal2')
		// The session keeps its level across refresh.
		const refreshed = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: done.body.data.refreshToken } })
		expect(jwtPayload(refreshed.body.data.accessToken)).toMatchObject({ amr: ['pwd', 'otp', 'mfa'], aal: 'aal2' })
	})

	for (const [label, steps] of [['the previous step', -1], ['the current step', 0], ['the next step', 1]] as const)
		test(`a code of ${label} is accepted`, async () => {
			const account = await signUp(t)
			const { secret } = await enrollTotp(t, account)
			// Activation used the current step; a fresh factor's later steps are still unused.
			const mfaToken = await passwordStep(t, account.email)
			await awayFromStepBoundary(3000)
			const code = totpCode(secret, steps)
			// The current step was spent by activation: for it, use a new factor's first login instead.
			if (steps <= 0) await t.database.handle.db.update(factors).set({ totpLastStep: null }).where(eq(factors.userId, account.id))
			expect((await completeWithTotp(t, mfaToken, code)).status).toBe(200)
		})

	for (const [label, steps] of [['two steps back', -2], ['two steps ahead', 2]] as const)
		test(`a code of ${label} is refused`, async () => {
			const account = await signUp(t)
			const { secret } = await enrollTotp(t, account)
			await t.database.handle.db.update(factors).set({ totpLastStep: null }).where(eq(factors.userId, account.id))
			const mfaToken = await passwordStep(t, account.email)
			await awayFromStepBoundary(3000)
			const res = await completeWithTotp(t, mfaToken, totpCode(secret, steps))
			expect(res.status).toBe(401)
			expect(res.body).toEqual(problem('invalid-second-factor', 401, '/api/auth/mfa', 'The code or passkey was not accepted'))
			expect(res.headers.get('www-authenticate')).toStartWith('Bearer realm=')
		})

	test('a code once accepted is refused when replayed, also with a new mfaToken and in parallel', async () => {
		const account = await signUp(t)
		const { secret } = await enrollTotp(t, account)
		await awayFromStepBoundary(3000)
		const code = totpCode(secret, 1)
		const tokens = await Promise.all(Array.from({ length: 8 }, () => passwordStep(t, account.email)))
		const results = await Promise.all(tokens.map((mfaToken) => completeWithTotp(t, mfaToken, code)))
		expect(results.filter((res) => res.status === 200)).toHaveLength(1)
		expect(results.filter((res) => res.status === 401)).toHaveLength(7)
		// An earlier step than the one used is a replay too.
		const later = await completeWithTotp(t, await passwordStep(t, account.email), totpCode(secret, 0))
		expect(later.status).toBe(401)
	})

	test('the mfaToken is single use and the fifth wrong code voids it', async () => {
		const account = await signUp(t)
		const { secret } = await enrollTotp(t, account)
		const used = await passwordStep(t, account.email)
		await awayFromStepBoundary()
		expect((await completeWithTotp(t, used, totpCode(secret, 1))).status).toBe(200)
		const reused = await t.call('POST', '/api/auth/mfa', { json: { mfaToken: used, method: 'recovery-code', code: 'x' } })
		expect(reused.body).toEqual(problem('invalid-mfa-token', 401, '/api/auth/mfa', 'The MFA token is invalid, used, expired or worn out by wrong codes; log in again'))

		const worn = await passwordStep(t, account.email)
		for (let i = 0; i < 5; i++) expect((await completeWithTotp(t, worn, '000000')).status).toBe(401)
		const sixth = await completeWithTotp(t, worn, totpCode(secret, 1))
		expect(sixth.body.type).toEndWith('/invalid-mfa-token')
	})

	test('twenty wrong codes fired at one mfaToken at once: at most five are looked at', async () => {
		const account = await signUp(t)
		await enrollTotp(t, account)
		const mfaToken = await passwordStep(t, account.email)
		const results = await Promise.all(Array.from({ length: 20 }, () => completeWithTotp(t, mfaToken, '000001')))
		const kinds = results.map((res) => String(res.body.type).split('/').pop())
		expect(kinds.filter((kind) => kind === 'invalid-second-factor')).toHaveLength(5)
		expect(kinds.filter((kind) => kind === 'invalid-mfa-token')).toHaveLength(15)
	})

	test('an unknown mfaToken and a malformed body are refused without a session', async () => {
		const unknown = await t.call('POST', '/api/auth/mfa', { json: { mfaToken: 'nope', method: 'totp', code: '123456' } })
		expect(unknown.status).toBe(401)
		expect(unknown.body.type).toEndWith('/invalid-mfa-token')
		const malformed = await t.call('POST', '/api/auth/mfa', { json: { mfaToken: 'x', method: 'sms', code: '1' } })
		expect(malformed.status).toBe(422)
	})

	test('a password change after the password step voids the mfaToken', async () => {
		const account = await signUp(t)
		const { secret } = await enrollTotp(t, account)
		const session = await loginWithTotp(t, account, secret)
		const mfaToken = await passwordStep(t, account.email)
		const changed = await t.call('PUT', '/api/users/me', {
			json: { email: account.email, name: 'Test User', password: 'a brand new passphrase', currentPassword: PASSWORD },
			token: session.accessToken,
		})
		expect(changed.status).toBe(200)
		const { recoveryCodes: [code] } = { recoveryCodes: (await t.call('POST', '/api/users/me/recovery-codes', { token: session.accessToken })).body.data?.recoveryCodes ?? [] }
		// The right second factor, but for an account whose password changed since the token was issued.
		const res = await t.call('POST', '/api/auth/mfa', { json: { mfaToken, method: 'recovery-code', code } })
		expect(res.status).toBe(401)
	})
})

describe('recovery codes', () => {
	test('each completes a login once; typed in any case with or without dashes', async () => {
		const account = await signUp(t)
		const { recoveryCodes: codes } = await enrollTotp(t, account)
		const [first = '', second = ''] = codes
		const res = await t.call('POST', '/api/auth/mfa', { json: { mfaToken: await passwordStep(t, account.email), method: 'recovery-code', code: first } })
		expect(res.status).toBe(200)
		expect(jwtPayload(res.body.data.accessToken)).toMatchObject({ aal: 'aal2', amr: ['pwd', 'otp', 'mfa'] })
		const again = await t.call('POST', '/api/auth/mfa', { json: { mfaToken: await passwordStep(t, account.email), method: 'recovery-code', code: first } })
		expect(again.status).toBe(401)
		const loose = second.replaceAll('-', '').toUpperCase()
		expect((await t.call('POST', '/api/auth/mfa', { json: { mfaToken: await passwordStep(t, account.email), method: 'recovery-code', code: loose } })).status).toBe(200)
	})

	test('one code raced by ten logins completes exactly one', async () => {
		const account = await signUp(t)
		const { recoveryCodes: [code = ''] } = await enrollTotp(t, account)
		const tokens = await Promise.all(Array.from({ length: 10 }, () => passwordStep(t, account.email)))
		const results = await Promise.all(tokens.map((mfaToken) => t.call('POST', '/api/auth/mfa', { json: { mfaToken, method: 'recovery-code', code } })))
		expect(results.filter((res) => res.status === 200)).toHaveLength(1)
	})

	test('new codes void the old set', async () => {
		const account = await signUp(t)
		const { secret, recoveryCodes: old } = await enrollTotp(t, account)
		const session = await loginWithTotp(t, account, secret)
		const res = await t.call('POST', '/api/users/me/recovery-codes', { token: session.accessToken })
		expect(res.status).toBe(200)
		expect(res.body.data.recoveryCodes).toHaveLength(10)
		const stale = await t.call('POST', '/api/auth/mfa', { json: { mfaToken: await passwordStep(t, account.email), method: 'recovery-code', code: old[0] } })
		expect(stale.status).toBe(401)
		const fresh = await t.call('POST', '/api/auth/mfa', { json: { mfaToken: await passwordStep(t, account.email), method: 'recovery-code', code: res.body.data.recoveryCodes[0] } })
		expect(fresh.status).toBe(200)
	})

	test('without an active factor there are none to make (409)', async () => {
		const account = await signUp(t)
		const res = await t.call('POST', '/api/users/me/recovery-codes', { token: account.accessToken })
		expect(res.status).toBe(409)
	})
})

describe('the TOTP library agrees with RFC 6238', () => {
	test('the RFC’s SHA-1 test vector (59 s → 94287082, last 6 digits)', () => {
		const secret = Secret.fromLatin1('12345678901234567890')
		expect(new TOTP({ secret, algorithm: 'SHA1', digits: 8, period: 30 }).generate({ timestamp: 59_000 })).toBe('94287082')
	})
})

describe('the login helper of earlier tests', () => {
	test('an account without a factor still gets tokens straight from the password, at aal1 with amr pwd', async () => {
		const account = await signUp(t)
		const again = await login(t, account.email)
		expect(jwtPayload(again.accessToken)).toMatchObject({ amr: ['pwd'], aal: 'aal1' })
	})
})

describe('aal2 for sensitive changes once a factor is active', () => {
	/** An account with an active factor, a password-only session from before (aal1), and an aal2 one. */
	async function accountWithFactor() {
		const account = await signUp(t)
		const before = await login(t, account.email)
		const enrolment = await enrollTotp(t, account)
		const aal2 = await loginWithTotp(t, account, enrolment.secret)
		return { account, aal1: before, aal2, ...enrolment }
	}
	const mfaRequiredProblem = (instance: string) =>
		problem('mfa-required', 403, instance, 'This needs a session signed in with a second factor (aal2): sign in again with your factor')

	test('the session that activated the first factor is raised to aal2; one from before stays aal1', async () => {
		const { account, aal1 } = await accountWithFactor()
		const sessions = await t.call('GET', '/api/users/me/sessions', { token: aal1.accessToken })
		expect(sessions.status).toBe(200)
		const enrolling = await t.call('POST', '/api/users/me/recovery-codes', { token: account.accessToken })
		expect(enrolling.status).toBe(200)
		expect((await t.call('POST', '/api/users/me/recovery-codes', { token: aal1.accessToken })).body).toEqual(mfaRequiredProblem('/api/users/me/recovery-codes'))
	})

	test('at aal1: password change, email change, factor removal, new recovery codes and another factor are refused (403 mfa-required)', async () => {
		const { account, aal1, aal2, factorId } = await accountWithFactor()
		const refusals = [
			['PUT', '/api/users/me', { email: account.email, name: 'Test User', password: 'another good passphrase', currentPassword: PASSWORD }],
			['PUT', '/api/users/me', { email: `new-${account.email}`, name: 'Test User', currentPassword: PASSWORD }],
			['DELETE', `/api/users/me/factors/${factorId}`, undefined],
			['POST', '/api/users/me/recovery-codes', undefined],
			['POST', '/api/users/me/factors', { type: 'totp' }],
		] as const
		for (const [method, path, json] of refusals) {
			const res = await t.call(method, path, { json, token: aal1.accessToken })
			expect(res.body).toEqual(mfaRequiredProblem(path))
		}
		// A factor enrolled at aal2 cannot be activated from the aal1 session either.
		const pending = await t.call('POST', '/api/users/me/factors', { json: { type: 'totp' }, token: aal2.accessToken })
		const activation = `/api/users/me/factors/${pending.body.data.factor.id}/activation`
		expect((await t.call('POST', activation, { json: { code: totpCode(pending.body.data.secret) }, token: aal1.accessToken })).body).toEqual(mfaRequiredProblem(activation))
		// A name change touches no credential: allowed at aal1.
		expect((await t.call('PUT', '/api/users/me', { json: { email: account.email, name: 'Renamed' }, token: aal1.accessToken })).status).toBe(200)
	})

	test('at aal2 the same changes go through; removing the last factor voids the recovery codes', async () => {
		const { account, aal2, factorId, recoveryCodes: codes } = await accountWithFactor()
		const removed = await t.call('DELETE', `/api/users/me/factors/${factorId}`, { token: aal2.accessToken })
		expect(removed.status).toBe(200)
		expect(removed.body.data).toMatchObject({ id: factorId, type: 'totp', status: 'active' })
		expect(await t.database.handle.db.select().from(recoveryCodes).where(eq(recoveryCodes.userId, account.id))).toEqual([])
		// Back to a password alone.
		expect((await login(t, account.email)).accessToken).toBeString()
		expect(codes).toHaveLength(10)
		const changed = await t.call('PUT', '/api/users/me', {
			json: { email: account.email, name: 'Test User', password: 'another good passphrase', currentPassword: PASSWORD },
			token: aal2.accessToken,
		})
		expect(changed.status).toBe(200)
	})

	test('an admin removes a user’s factor (a lost phone) without a second factor of the user; the user then logs in with the password', async () => {
		const { account, factorId } = await accountWithFactor()
		const admin = await signUpAdminHere()
		const list = await t.call('GET', `/api/users/${account.id}/factors`, { token: admin.accessToken })
		expect(list.body.data.items).toEqual([expect.objectContaining({ id: factorId, status: 'active' })])
		const removed = await t.call('DELETE', `/api/users/${account.id}/factors/${factorId}`, { token: admin.accessToken })
		expect(removed.status).toBe(200)
		const audit = await t.call('GET', `/api/audit-events?userId=${account.id}&type=factor.removed`, { token: admin.accessToken })
		expect(audit.body.data.items).toEqual([expect.objectContaining({ actorId: admin.id, subjectId: account.id, details: { factorId, type: 'totp' } })])
		expect(jwtPayload((await login(t, account.email)).accessToken).aal).toBe('aal1')
	})

	test('recovery by email resets the password but leaves the factor (added after the address was proved): the next login still asks for it', async () => {
		const account = await signUpVerified(t)
		const { recoveryCodes: codes } = await enrollTotp(t, account)
		expect((await t.call('POST', '/api/auth/recovery-requests', { json: { email: account.email } })).status).toBe(202)
		const mail = await loggedMail(t, account.email, 10_000, 'recovery')
		const { code } = proofOf(mail)
		const reset = await t.call('POST', '/api/auth/password-resets', { json: { email: account.email, code, password: 'a recovered passphrase' } })
		expect(reset.status).toBe(200)
		expect(reset.text).not.toContain('accessToken')
		const mfaToken = await passwordStep(t, account.email, 'a recovered passphrase')
		const done = await t.call('POST', '/api/auth/mfa', { json: { mfaToken, method: 'recovery-code', code: codes[0] } })
		expect(done.status).toBe(200)
		const factorsLeft = await t.database.handle.db.select().from(factors).where(eq(factors.userId, account.id))
		expect(factorsLeft).toEqual([expect.objectContaining({ status: 'active' })])
	})

	async function signUpAdminHere() {
		const { signUpAdmin } = await import('./support/fixtures')
		return signUpAdmin(t)
	}
})

describe('audit', () => {
	test('enrolment, activation, the mfa step, a wrong code and new recovery codes are recorded, never with a secret or code', async () => {
		const account = await signUp(t)
		const { secret, recoveryCodes: codes } = await enrollTotp(t, account)
		const mfaToken = await passwordStep(t, account.email)
		await completeWithTotp(t, mfaToken, '000000')
		const admin = await (await import('./support/fixtures')).signUpAdmin(t)
		const res = await t.call('GET', `/api/audit-events?userId=${account.id}&limit=100`, { token: admin.accessToken })
		const types = res.body.data.items.map((item: { type: string }) => item.type)
		for (const type of ['factor.enrolled', 'factor.activated', 'login.mfa-required', 'mfa.failed']) expect(types).toContain(type)
		for (const value of [secret, mfaToken, ...codes]) expect(res.text).not.toContain(value)
	})
})
