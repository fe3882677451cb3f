import { expect } from 'bun:test'
import { Secret, TOTP } from 'otpauth'
import type { TestApp } from './app'
import { jwtPayload, PASSWORD, type Account } from './fixtures'

/** The code an authenticator app would show `steps` time steps from now (the library's own RFC 6238). */
export const totpCode = (secret: string, steps = 0, now = Date.now()) =>
	new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 }).generate({ timestamp: now + steps * 30_000 })

/**
 * Waits, when needed, until at least `margin` ms remain in the current 30-second step, so that a code computed
 * for "the previous step" or "two steps ahead" is still that when the server checks it. The default covers
 * the one request that follows (a few milliseconds to tens in the suite), many times over; a test that spends
 * a code over several requests, or whose verdict turns on the step, asks for more. (Every margin ms is a wait
 * 1 call in 30000/margin of about margin/2: 3 s cost the suite about 15 s of sleep a run, 1.5 s about 4 s.)
 */
export async function awayFromStepBoundary(margin = 500) {
	const left = 30_000 - (Date.now() % 30_000)
	if (left < margin) await Bun.sleep(left + 100)
}

export interface TotpEnrolment {
	factorId: string
	secret: string
	recoveryCodes: string[]
}

/** Enrols and activates a TOTP factor for `account` through the API. */
/** `activationStep`: the step (from now) of the activation's code; -1 leaves the current and next steps unspent for two sign-ins in a row. */
export async function enrollTotp(t: TestApp, account: Account, name = 'Phone', activationStep = 0): Promise<TotpEnrolment> {
	const created = await t.call('POST', '/api/users/me/factors', { json: { type: 'totp', name }, token: account.accessToken })
	expect(created.status).toBe(201)
	const { factor, secret } = created.body.data
	await awayFromStepBoundary()
	const activated = await t.call('POST', `/api/users/me/factors/${factor.id}/activation`, { json: { code: totpCode(secret, activationStep) }, token: account.accessToken })
	expect(activated.status).toBe(200)
	return { factorId: factor.id, secret, recoveryCodes: activated.body.data.recoveryCodes ?? [] }
}

/** A login that owes a second factor: its mfaToken. */
export async function passwordStep(t: TestApp, email: string, password = PASSWORD): Promise<string> {
	const res = await t.call('POST', '/api/auth/login', { json: { email, password } })
	expect(res.status).toBe(200)
	expect(res.body.data.mfaRequired).toBe(true)
	return res.body.data.mfaToken
}

/** Logs in with password and a TOTP code from `secret` at `steps` from now; the whole response. */
export async function completeWithTotp(t: TestApp, mfaToken: string, code: string) {
	return t.call('POST', '/api/auth/mfa', { json: { mfaToken, method: 'totp', code } })
}

/** An aal2 session: password, then a fresh TOTP code (waiting for the next step when this one's is spent). */
export async function loginWithTotp(t: TestApp, account: Pick<Account, 'email' | 'password'>, secret: string): Promise<Account> {
	const mfaToken = await passwordStep(t, account.email, account.password)
	await awayFromStepBoundary()
	let res = await completeWithTotp(t, mfaToken, totpCode(secret, 1))
	expect(res.status).toBe(200)
	const { accessToken, refreshToken, user } = res.body.data
	return { id: user.id, email: account.email, password: account.password, accessToken, refreshToken, sessionId: String(jwtPayload(accessToken).sid) }
}
