/**
 * Ways in, played as an attacker would (API.md "Ways in, and proof that it is really the owner"): what an
 * intruder added before the owner proved the address, or from a stolen password within RECOVERY_REVIEW_SECONDS,
 * does not survive the owner's verification or recovery; what the owner added at aal2 does; every change is mailed.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq, sql } from 'drizzle-orm'
import { factors, identities } from '../src/db/schema'
import { problem, startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { enrollTotp, loginWithTotp } from './support/factors'
import { login, PASSWORD, signUp, signUpAdmin, uniqueEmail } from './support/fixtures'
import { loggedMail, proofOf, signUpVerified } from './support/mail'
import { FlowBrowser, pkcePair, TestOpenIdProvider } from './support/oidc-provider'
import { SoftAuthenticator } from './support/soft-authenticator'
import { WebhookReceiver } from './support/webhook-receiver'
import { accountOf, addPasskey, CALLBACK_PAGE, eventsOf, linkIdentity, mailsTo, OWNER_PASSWORD, providerSignIn, recoverByMail, waitForMails } from './support/ways-in'

setDefaultTimeout(60_000)

const ORIGIN = 'https://app.example.test'
const RP_ID = 'app.example.test'

let database: TestDatabase
let alpha: TestOpenIdProvider
let receiver: WebhookReceiver
let t: TestApp

beforeAll(async () => {
	database = await createTestDatabase()
	alpha = await TestOpenIdProvider.start(['http://localhost/api/auth/providers/alpha/callback'])
	receiver = await WebhookReceiver.start()
	t = await startTestApp(
		{
			APP_URL: 'http://frontend.test',
			OIDC_PROVIDERS: 'alpha',
			...alpha.settings('alpha'),
			WEBAUTHN_RP_ID: RP_ID,
			WEBAUTHN_ORIGINS: ORIGIN,
			WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
		},
		database,
	)
	// An endpoint for every event, so that the outbox keeps them.
	const admin = await signUpAdmin(t)
	expect((await t.call('POST', '/api/webhooks', { token: admin.accessToken, json: { url: receiver.url, events: ['*'] } })).status).toBe(201)
})
afterAll(async () => {
	await t.close()
	await alpha.stop()
	await receiver.stop()
	await database.drop()
})

const identitiesOf = async (token: string) => (await t.call('GET', '/api/users/me/identities', { token })).body.data.items
const factorsOf = async (token: string) => (await t.call('GET', '/api/users/me/factors', { token })).body.data.items

/** Dates a factor's addition `days` back, as if enrolled then: past RECOVERY_REVIEW_SECONDS (7 days) it is no longer under review. */
const ageFactor = (factorId: string, days = 8) =>
	t.database.handle.db
		.update(factors)
		.set({ createdAt: sql`now() - ${days} * interval '1 day'`, activatedAt: sql`now() - ${days} * interval '1 day'` })
		.where(eq(factors.id, factorId))

/** The owner's sign-in after a recovery: tokens at once, no second factor asked. */
async function ownerSignsIn(email: string) {
	const res = await t.call('POST', '/api/auth/login', { json: { email, password: OWNER_PASSWORD } })
	expect(res.status).toBe(200)
	expect(res.body.data.mfaRequired).toBeUndefined()
	return accountOf(res.body.data, OWNER_PASSWORD)
}

describe('pre-account hijacking (Sudhodanan and Paverd, USENIX Security 2022)', () => {
	for (const by of ['token', 'code'] as const)
		test(`an attacker who signed up with the victim’s address and linked their own provider loses it when the victim recovers by ${by}`, async () => {
			const victimEmail = uniqueEmail('victim')
			const attacker = await signUp(t, { email: victimEmail, password: 'the attacker’s password' })
			const sub = `attacker-${crypto.randomUUID()}`
			const attackerAddress = uniqueEmail('attacker')
			const { started, finish } = await linkIdentity(t, attacker, alpha, 'alpha', { sub, email: attackerAddress, email_verified: true })
			expect(started.status).toBe(200)
			expect((await finish()).exchanged?.body.data.user.id).toBe(attacker.id)

			// The victim comes to sign up: the address is taken.
			const signup = await t.call('POST', '/api/users', { json: { email: victimEmail, password: OWNER_PASSWORD, name: 'Victim' } })
			expect(signup.body).toEqual(problem('email-taken', 409, '/api/users', 'An account with this email already exists'))
			// So they recover it by mail, and use it.
			const reset = await recoverByMail(t, victimEmail, { by })
			expect(reset.status).toBe(200)
			const victim = await ownerSignsIn(victimEmail)
			expect(victim.id).toBe(attacker.id)
			expect(await identitiesOf(victim.accessToken)).toEqual([])
			const [unlinked, ...more] = await eventsOf(t, 'identity.unlinked', victim.id)
			expect(more).toEqual([])
			expect(unlinked?.data.identity).toMatchObject({ provider: 'alpha', subject: sub })

			// The attacker's provider no longer opens the victim's account: it makes one of its own.
			const again = await providerSignIn(t, alpha, 'alpha', { sub, email: attackerAddress, email_verified: true })
			const exchanged = await again.exchange()
			expect(exchanged.status).toBe(200)
			expect(exchanged.body.data.user.id).not.toBe(victim.id)
			expect(exchanged.body.data.user.email).toBe(attackerAddress)
			// Nor does the attacker's old session or password.
			expect((await t.call('GET', '/api/users/me', { token: attacker.accessToken })).status).toBe(401)
			expect((await t.call('POST', '/api/auth/login', { json: { email: victimEmail, password: 'the attacker’s password' } })).status).toBe(401)
		})

	test('a provider that vouches for nothing (email_verified: false) makes an account the victim then recovers; the provider no longer lands in it', async () => {
		const victimEmail = uniqueEmail('victim-unverified')
		const sub = `attacker-${crypto.randomUUID()}`
		const made = await providerSignIn(t, alpha, 'alpha', { sub, email: victimEmail, email_verified: false })
		const attacker = await made.exchange()
		expect(attacker.status).toBe(200)
		expect(attacker.body.data.user).toMatchObject({ email: victimEmail, emailVerified: false })

		expect((await t.call('POST', '/api/users', { json: { email: victimEmail, password: OWNER_PASSWORD } })).status).toBe(409)
		expect((await recoverByMail(t, victimEmail)).status).toBe(200)
		const victim = await ownerSignsIn(victimEmail)
		expect(victim.id).toBe(attacker.body.data.user.id)
		expect(await identitiesOf(victim.accessToken)).toEqual([])
		expect((await t.call('GET', '/api/users/me', { token: attacker.body.data.accessToken })).status).toBe(401)

		const again = await providerSignIn(t, alpha, 'alpha', { sub, email: victimEmail, email_verified: false })
		expect(again.code).toBeNull()
		expect(again.landed.searchParams.get('error')).toBe('account-exists')
	})

	test('a link the attacker started before the recovery and finishes after it links nothing', async () => {
		const victimEmail = uniqueEmail('victim-late-link')
		const attacker = await signUp(t, { email: victimEmail, password: 'the attacker’s password' })
		const sub = `late-${crypto.randomUUID()}`
		// The authorization URL is taken while the attacker's session is fresh; the provider step waits.
		const { started, finish } = await linkIdentity(t, attacker, alpha, 'alpha', { sub, email: uniqueEmail('late'), email_verified: true })
		expect(started.status).toBe(200)
		expect((await recoverByMail(t, victimEmail)).status).toBe(200)
		const { landed, exchanged } = await finish()
		expect(landed.searchParams.get('error')).toBe('invalid-state')
		expect(exchanged).toBeUndefined()
		const victim = await ownerSignsIn(victimEmail)
		expect(await identitiesOf(victim.accessToken)).toEqual([])
	})

	test('a link code the attacker got before the owner proved the address is refused after it', async () => {
		const account = await signUp(t)
		const { token } = proofOf(await loggedMail(t, account.email, 10_000, 'verification'))
		const { verifier, challenge } = pkcePair()
		const started = await t.call('POST', '/api/users/me/identities', { json: { provider: 'alpha', redirectTo: CALLBACK_PAGE, codeChallenge: challenge }, token: account.accessToken })
		alpha.signInAs = { sub: `early-${account.id}` }
		const landed = await new FlowBrowser(t.app).follow(started.body.data.authorizationUrl, alpha.issuer)
		const code = landed.searchParams.get('code')
		expect(code).not.toBeNull()
		expect((await t.call('POST', '/api/auth/email-verifications', { json: { token } })).status).toBe(200)
		const exchanged = await t.call('POST', '/api/auth/sessions', { json: { code, codeVerifier: verifier } })
		expect(exchanged.body).toEqual(problem('invalid-code', 400, '/api/auth/sessions', 'The code is unknown, used, expired, or not for this code verifier: sign in again'))
		expect(await t.database.handle.db.select().from(identities).where(eq(identities.userId, account.id))).toEqual([])
	})
})

describe('recovery reviews the ways in added recently from a session without a second factor', () => {
	test('a passkey an intruder added from a password-only session goes; the owner’s password then signs in without a factor', async () => {
		const owner = await signUpVerified(t)
		const intruder = await login(t, owner.email)
		const { factorId } = await addPasskey(t, intruder, new SoftAuthenticator(ORIGIN, RP_ID), 'Intruder key')
		expect((await t.call('POST', '/api/auth/login', { json: { email: owner.email, password: PASSWORD } })).body.data.mfaRequired).toBe(true)

		expect((await recoverByMail(t, owner.email)).status).toBe(200)
		const back = await ownerSignsIn(owner.email)
		expect(await factorsOf(back.accessToken)).toEqual([])
		expect((await eventsOf(t, 'factor.removed', owner.id)).map((event) => event.data.factor.id)).toEqual([factorId])
		// Its recovery codes went with it.
		expect((await t.call('POST', '/api/users/me/recovery-codes', { token: back.accessToken })).status).toBe(409)
	})

	test('a second passkey added by the session its first passkey raised to aal2 goes too: that aal2 proved nothing', async () => {
		const owner = await signUpVerified(t)
		const intruder = await login(t, owner.email)
		await addPasskey(t, intruder, new SoftAuthenticator(ORIGIN, RP_ID), 'Intruder key 1')
		await addPasskey(t, intruder, new SoftAuthenticator(ORIGIN, RP_ID), 'Intruder key 2')
		expect(await factorsOf(intruder.accessToken)).toHaveLength(2)
		expect((await recoverByMail(t, owner.email)).status).toBe(200)
		const back = await ownerSignsIn(owner.email)
		expect(await factorsOf(back.accessToken)).toEqual([])
	})

	test('a passkey added at aal2 through a TOTP factor the intruder added at aal1 goes; the TOTP factor stays', async () => {
		const owner = await signUpVerified(t)
		const intruder = await login(t, owner.email)
		const { factorId: totpId, secret } = await enrollTotp(t, intruder, 'Intruder app')
		// A fresh sign-in with the intruder's own TOTP code is aal2 too: it proves only the intruder.
		const aal2 = await loginWithTotp(t, owner, secret)
		await addPasskey(t, aal2, new SoftAuthenticator(ORIGIN, RP_ID), 'Intruder key')
		const linked = await linkIdentity(t, aal2, alpha, 'alpha', { sub: `laundered-${owner.id}` })
		expect((await linked.finish()).exchanged?.body.data.mfaRequired).toBe(true)
		expect((await recoverByMail(t, owner.email)).status).toBe(200)
		const rows = await t.database.handle.db.select({ id: factors.id }).from(factors).where(eq(factors.userId, owner.id))
		expect(rows).toEqual([{ id: totpId }])
		expect(await t.database.handle.db.select().from(identities).where(eq(identities.userId, owner.id))).toEqual([])
	})

	test('a TOTP factor, and a passkey added from an aal2 session, stay', async () => {
		const owner = await signUpVerified(t)
		const { factorId: totpId, secret } = await enrollTotp(t, owner, 'Phone')
		// The owner's authenticator app of last month: the aal2 it gives proves the owner.
		await ageFactor(totpId)
		const aal2 = await loginWithTotp(t, owner, secret)
		const { factorId: passkeyId } = await addPasskey(t, aal2, new SoftAuthenticator(ORIGIN, RP_ID), 'Owner key')
		expect((await recoverByMail(t, owner.email)).status).toBe(200)
		// The factors remain, so the password alone is not enough.
		const res = await t.call('POST', '/api/auth/login', { json: { email: owner.email, password: OWNER_PASSWORD } })
		expect(res.body.data).toMatchObject({ mfaRequired: true, methods: ['totp', 'webauthn', 'recovery-code'] })
		const rows = await t.database.handle.db.select({ id: factors.id }).from(factors).where(eq(factors.userId, owner.id)).orderBy(factors.createdAt)
		expect(rows.map((row) => row.id)).toEqual([totpId, passkeyId])
		expect(await eventsOf(t, 'factor.removed', owner.id)).toEqual([])
	})

	test('a passkey added longer ago than RECOVERY_REVIEW_SECONDS stays', async () => {
		const owner = await signUpVerified(t)
		const { factorId } = await addPasskey(t, owner, new SoftAuthenticator(ORIGIN, RP_ID), 'Old key')
		await ageFactor(factorId)
		expect((await recoverByMail(t, owner.email)).status).toBe(200)
		expect((await t.call('POST', '/api/auth/login', { json: { email: owner.email, password: OWNER_PASSWORD } })).body.data.mfaRequired).toBe(true)
		expect(await eventsOf(t, 'factor.removed', owner.id)).toEqual([])
	})

	test('an identity linked from a password-only session goes; one linked at aal2 stays', async () => {
		const owner = await signUpVerified(t)
		const weak = await linkIdentity(t, owner, alpha, 'alpha', { sub: `weak-${owner.id}` })
		expect((await weak.finish()).exchanged?.status).toBe(200)
		const { secret, factorId } = await enrollTotp(t, await login(t, owner.email))
		await ageFactor(factorId)
		const aal2 = await loginWithTotp(t, owner, secret)
		const strong = await linkIdentity(t, aal2, alpha, 'alpha', { sub: `strong-${owner.id}` })
		expect((await strong.finish()).exchanged?.status).toBe(200)
		expect((await recoverByMail(t, owner.email)).status).toBe(200)
		const rows = await t.database.handle.db.select({ subject: identities.subject }).from(identities).where(eq(identities.userId, owner.id))
		expect(rows).toEqual([{ subject: `strong-${owner.id}` }])
	})

	test('with RECOVERY_REVIEW_SECONDS=0 a recovery removes nothing by review', async () => {
		// A database of its own: another app's job worker on this one would send (and log) its mails.
		const noReview = await startTestApp({ WEBAUTHN_RP_ID: RP_ID, WEBAUTHN_ORIGINS: ORIGIN, RECOVERY_REVIEW_SECONDS: '0' })
		try {
			const owner = await signUpVerified(noReview)
			await addPasskey(noReview, await login(noReview, owner.email), new SoftAuthenticator(ORIGIN, RP_ID))
			expect((await recoverByMail(noReview, owner.email)).status).toBe(200)
			expect((await noReview.call('POST', '/api/auth/login', { json: { email: owner.email, password: OWNER_PASSWORD } })).body.data.mfaRequired).toBe(true)
		} finally {
			await noReview.close()
		}
	})
})

describe('proving the address removes what was added while it was not', () => {
	test('TOTP, passkey and identity added while unverified go at verification, with every session, an event and a notice each', async () => {
		const account = await signUp(t)
		const { token } = proofOf(await loggedMail(t, account.email, 10_000, 'verification'))
		const { factorId: totpId } = await enrollTotp(t, account, 'Phone')
		const { factorId: passkeyId } = await addPasskey(t, account, new SoftAuthenticator(ORIGIN, RP_ID), 'Laptop')
		const linked = await linkIdentity(t, account, alpha, 'alpha', { sub: `unverified-${account.id}` })
		expect((await linked.finish()).exchanged?.status).toBe(200)

		expect((await t.call('POST', '/api/auth/email-verifications', { json: { token } })).status).toBe(200)
		expect((await t.call('GET', '/api/users/me', { token: account.accessToken })).status).toBe(401)
		const again = await t.call('POST', '/api/auth/login', { json: { email: account.email, password: PASSWORD } })
		expect(again.body.data.mfaRequired).toBeUndefined()
		const fresh = accountOf(again.body.data)
		expect(await factorsOf(fresh.accessToken)).toEqual([])
		expect(await identitiesOf(fresh.accessToken)).toEqual([])
		expect((await eventsOf(t, 'factor.removed', account.id)).map((event) => event.data.factor.id).sort()).toEqual([totpId, passkeyId].sort())
		expect((await eventsOf(t, 'identity.unlinked', account.id)).map((event) => event.data.identity.subject)).toEqual([`unverified-${account.id}`])
		// The recovery codes went with the last factor: their owner hears of that too. The notices of the additions
		// go through the same queue and may still be arriving: only the removals are counted.
		const removals = () => mailsTo(t, account.email, 'way-in-notice').map((mail) => mail.subject.replace(/^Latchkey: /, '')).filter((subject) => subject.endsWith(' removed'))
		for (const deadline = Date.now() + 10_000; removals().length < 4; await Bun.sleep(20))
			if (Date.now() > deadline) throw new Error(`${removals().length} of 4 removal notices within 10 s`)
		expect(removals().sort()).toEqual(
			['An authenticator app “Phone” was removed', 'A passkey “Laptop” was removed', 'Your recovery codes were removed', 'A linked sign-in “alpha” was removed'].sort(),
		)
	})

	test('a factor added after the verification survives a later recovery', async () => {
		const owner = await signUpVerified(t)
		const { secret, factorId } = await enrollTotp(t, owner)
		await ageFactor(factorId)
		const aal2 = await loginWithTotp(t, owner, secret)
		await addPasskey(t, aal2, new SoftAuthenticator(ORIGIN, RP_ID))
		expect((await recoverByMail(t, owner.email)).status).toBe(200)
		expect(await t.database.handle.db.select({ id: factors.id }).from(factors).where(eq(factors.userId, owner.id))).toHaveLength(2)
	})
})

describe('notices of every way in added or removed', () => {
	const CLIENT_LINE = 'From: 10.0.0.1, an unknown client'
	const subjects = (email: string) => mailsTo(t, email, 'way-in-notice').map((mail) => mail.subject.replace(/^Latchkey: /, ''))

	test('activation, new recovery codes, removal, link, unlink and a password change each mail the address, none held back', async () => {
		const account = await signUpVerified(t)
		const { factorId } = await enrollTotp(t, account, 'Phone')
		await waitForMails(t, account.email, 'way-in-notice', 1)
		// aal2 since the activation: this session may make codes and remove the factor.
		expect((await t.call('POST', '/api/users/me/recovery-codes', { token: account.accessToken })).status).toBe(200)
		expect((await t.call('DELETE', `/api/users/me/factors/${factorId}`, { token: account.accessToken })).status).toBe(200)
		const linked = await linkIdentity(t, account, alpha, 'alpha', { sub: `notice-${account.id}` })
		expect((await linked.finish()).exchanged?.status).toBe(200)
		const [identity] = await identitiesOf(account.accessToken)
		expect((await t.call('DELETE', `/api/users/me/identities/${identity.id}`, { token: account.accessToken })).status).toBe(200)
		const changed = await t.call('PUT', '/api/users/me', { token: account.accessToken, json: { email: account.email, name: 'Test User', password: 'another good passphrase', currentPassword: PASSWORD } })
		expect(changed.status).toBe(200)

		const mails = await waitForMails(t, account.email, 'way-in-notice', 6)
		// Sent by the job worker, not necessarily in the order queued.
		expect(subjects(account.email).sort()).toEqual(
			[
				'An authenticator app “Phone” was added',
				'New recovery codes were made (the old ones no longer work)',
				'An authenticator app “Phone” was removed',
				'A linked sign-in “alpha” was added',
				'A linked sign-in “alpha” was removed',
				'Your password was changed',
			].sort(),
		)
		for (const mail of mails) expect(mail.text).toContain(CLIENT_LINE)
	})

	test('the recovery review lists what was removed and what remains', async () => {
		const owner = await signUpVerified(t)
		const intruder = await login(t, owner.email)
		await addPasskey(t, intruder, new SoftAuthenticator(ORIGIN, RP_ID), 'Intruder key')
		expect((await recoverByMail(t, owner.email)).status).toBe(200)
		const [review, ...more] = await waitForMails(t, owner.email, 'recovery-review', 1)
		expect(more).toEqual([])
		expect(review?.text).toContain('were removed:\n- passkey “Intruder key”\n- recovery codes\n\nThe ways into your account now:\n- password\n- email address “')
		// Removed with the intruder's passkey, they are no way in that remains.
		expect(review?.text.split('The ways into your account now:')[1]).not.toContain('recovery codes')
		expect(review?.text).toContain(CLIENT_LINE)
	})

})
