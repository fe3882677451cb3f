import { afterAll, beforeAll, describe, expect, setDefaultTimeout, setSystemTime, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { identities, signInCodes, users } from '../src/db/schema'
import { problem, startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { awayFromStepBoundary, enrollTotp, totpCode } from './support/factors'
import { jwtPayload, PASSWORD, signUp, uniqueEmail } from './support/fixtures'
import { loggedMail, proofOf } from './support/mail'
import { FlowBrowser, pkcePair, TestOpenIdProvider, type IdTokenRewrite } from './support/oidc-provider'

setDefaultTimeout(30_000)

const FRONTEND = 'http://frontend.test'
const CALLBACK_PAGE = `${FRONTEND}/auth/callback`

let database: TestDatabase
let provider: TestOpenIdProvider
let t: TestApp

const settings = (extra: Record<string, string> = {}) => ({ APP_URL: FRONTEND, OIDC_PROVIDERS: 'test', ...provider.settings('test'), ...extra })

beforeAll(async () => {
	database = await createTestDatabase()
	provider = await TestOpenIdProvider.start(['http://localhost/api/auth/providers/test/callback'])
	t = await startTestApp(settings(), database)
})
afterAll(async () => {
	await t.close()
	await provider.stop()
	await database.drop()
})

const authorizationPath = (challenge: string, redirectTo = CALLBACK_PAGE) =>
	`/api/auth/providers/test/authorization?${new URLSearchParams({ redirectTo, codeChallenge: challenge, codeChallengeMethod: 'S256' })}`

/** The whole flow as a browser goes through it; the frontend page it lands on, and the PKCE verifier. */
async function signInAtProvider(identity: { sub: string; email?: string; email_verified?: boolean; name?: string }, app = t) {
	provider.signInAs = identity
	const { verifier, challenge } = pkcePair()
	const browser = new FlowBrowser(app.app)
	const landed = await browser.follow(authorizationPath(challenge), provider.issuer)
	return { landed, verifier, browser }
}

const exchange = (code: string | null, codeVerifier: string, app = t) => app.call('POST', '/api/auth/sessions', { json: { code: code ?? '', codeVerifier } })

describe('signing in with an OpenID provider', () => {
	test('lists the configured providers', async () => {
		const res = await t.call('GET', '/api/auth/providers')
		expect(res.body.data).toEqual({ items: [{ id: 'test', label: 'Test' }] })
	})

	test('a new identity makes an account without a password; the code and verifier give tokens', async () => {
		const email = uniqueEmail('oidc-new')
		const { landed, verifier } = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true, name: 'Ada From Provider' })
		expect(landed.origin + landed.pathname).toBe(CALLBACK_PAGE)
		expect(landed.searchParams.get('error')).toBeNull()
		const res = await exchange(landed.searchParams.get('code'), verifier)
		expect(res.status).toBe(200)
		expect(res.body.data.user).toMatchObject({ email, name: 'Ada From Provider', emailVerified: true })
		// RFC 8176 has no value for a sign-in elsewhere: the provider's part is not named, and nothing is made up.
		expect(jwtPayload(res.body.data.accessToken)).toMatchObject({ amr: [], aal: 'aal1' })
		const [row] = await database.handle.db.select().from(users).where(eq(users.email, email))
		expect(row?.passwordHash).toBeNull()
		// No password: no password signs in.
		expect((await t.call('POST', '/api/auth/login', { json: { email, password: PASSWORD } })).status).toBe(401)
	})

	test('the first sign-ins of one identity racing each other make one account, and both get in', async () => {
		const email = uniqueEmail('oidc-race')
		const flows = await Promise.all(Array.from({ length: 20 }, () => signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })))
		const sessions = await Promise.all(flows.map(({ landed, verifier }) => exchange(landed.searchParams.get('code'), verifier)))
		expect(sessions.map((res) => res.status)).toEqual(Array(20).fill(200))
		expect(new Set(sessions.map((res) => res.body.data.user.id)).size).toBe(1)
		expect(await database.handle.db.select().from(identities).where(eq(identities.subject, `sub-${email}`))).toHaveLength(1)
	})

	test('a returning identity signs in to the same account', async () => {
		const email = uniqueEmail('oidc-return')
		const first = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
		const a = await exchange(first.landed.searchParams.get('code'), first.verifier)
		const second = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
		const b = await exchange(second.landed.searchParams.get('code'), second.verifier)
		expect(b.body.data.user.id).toBe(a.body.data.user.id)
		expect(await database.handle.db.select().from(identities).where(eq(identities.userId, a.body.data.user.id))).toHaveLength(1)
	})

	test('an existing account is linked by email only when both sides verified it', async () => {
		const local = await signUp(t)
		const unverified = await signInAtProvider({ sub: `sub-${local.email}`, email: local.email, email_verified: true })
		expect(Object.fromEntries(unverified.landed.searchParams)).toEqual({
			error: 'account-exists',
			error_description: 'An account with this email exists: sign in to it, then link this provider',
		})
		await database.handle.db.update(users).set({ emailVerifiedAt: new Date() }).where(eq(users.id, local.id))
		const providerUnverified = await signInAtProvider({ sub: `sub-${local.email}`, email: local.email, email_verified: false })
		expect(providerUnverified.landed.searchParams.get('error')).toBe('account-exists')
		const both = await signInAtProvider({ sub: `sub-${local.email}`, email: local.email, email_verified: true })
		const res = await exchange(both.landed.searchParams.get('code'), both.verifier)
		expect(res.body.data.user.id).toBe(local.id)
	})

	test('an account with a second factor still owes it', async () => {
		const email = uniqueEmail('oidc-mfa')
		const first = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
		const signedIn = await exchange(first.landed.searchParams.get('code'), first.verifier)
		const account = { id: signedIn.body.data.user.id, email, password: '', accessToken: signedIn.body.data.accessToken, refreshToken: '', sessionId: '' }
		await enrollTotp(t, account)
		const again = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
		const res = await exchange(again.landed.searchParams.get('code'), again.verifier)
		expect(res.body.data).toMatchObject({ mfaRequired: true, methods: ['totp', 'recovery-code'] })
	})

	test('a provider sign-in finished with a TOTP code or a recovery code says otp and mfa, never pwd, at aal2', async () => {
		const email = uniqueEmail('oidc-amr')
		const first = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
		const signedIn = await exchange(first.landed.searchParams.get('code'), first.verifier)
		const account = { id: signedIn.body.data.user.id, email, password: '', accessToken: signedIn.body.data.accessToken, refreshToken: '', sessionId: '' }
		const { secret, recoveryCodes } = await enrollTotp(t, account)
		const finish = async (body: Record<string, string>) => {
			const again = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
			const owed = await exchange(again.landed.searchParams.get('code'), again.verifier)
			const res = await t.call('POST', '/api/auth/mfa', { json: { mfaToken: owed.body.data.mfaToken, ...body } })
			expect(res.status).toBe(200)
			return res
		}
		await awayFromStepBoundary()
		const withTotp = await finish({ method: 'totp', code: totpCode(secret, 1) })
		expect(jwtPayload(withTotp.body.data.accessToken)).toMatchObject({ amr: ['otp', 'mfa'], aal: 'aal2' })
		// The session keeps it: a refreshed token says the same.
		const refreshed = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: withTotp.body.data.refreshToken } })
		expect(jwtPayload(refreshed.body.data.accessToken)).toMatchObject({ amr: ['otp', 'mfa'], aal: 'aal2' })
		const withRecoveryCode = await finish({ method: 'recovery-code', code: recoveryCodes[0] ?? '' })
		expect(jwtPayload(withRecoveryCode.body.data.accessToken)).toMatchObject({ amr: ['otp', 'mfa'], aal: 'aal2' })
	})

	test('an account made by a provider gets a password by recovery, and then signs in with it too', async () => {
		const email = uniqueEmail('oidc-recover')
		const { landed, verifier } = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
		expect((await exchange(landed.searchParams.get('code'), verifier)).status).toBe(200)
		expect((await t.call('POST', '/api/auth/recovery-requests', { json: { email } })).status).toBe(202)
		const { code } = proofOf(await loggedMail(t, email, 10_000, 'recovery'))
		expect((await t.call('POST', '/api/auth/password-resets', { json: { email, code, password: 'a password of my own now' } })).status).toBe(200)
		const login = await t.call('POST', '/api/auth/login', { json: { email, password: 'a password of my own now' } })
		expect(login.status).toBe(200)
		expect(jwtPayload(login.body.data.accessToken).amr).toEqual(['pwd'])
	})

	test('a deactivated account is refused', async () => {
		const email = uniqueEmail('oidc-off')
		const first = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
		const signedIn = await exchange(first.landed.searchParams.get('code'), first.verifier)
		expect((await t.call('DELETE', '/api/users/me', { token: signedIn.body.data.accessToken })).status).toBe(200)
		const again = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
		expect(again.landed.searchParams.get('error')).toBe('account-deactivated')
	})
})

describe('what an attacker tries', () => {
	test('the code works once, only with its verifier, and a wrong verifier spends it', async () => {
		const email = uniqueEmail('oidc-code')
		const { landed, verifier } = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
		const code = landed.searchParams.get('code')
		const wrong = await exchange(code, pkcePair().verifier)
		expect(wrong.body).toEqual(problem('invalid-code', 400, '/api/auth/sessions', 'The code is unknown, used, expired, or not for this code verifier: sign in again'))
		expect((await exchange(code, verifier)).status).toBe(400)

		const next = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
		const nextCode = next.landed.searchParams.get('code')
		expect((await exchange(nextCode, next.verifier)).status).toBe(200)
		expect((await exchange(nextCode, next.verifier)).status).toBe(400)
	})

	test('a callback planted in another browser (login CSRF), replayed, or with a made-up state ends in invalid-state, and a planted one does not burn the flow', async () => {
		// The attacker signs in with their own identity and stops at the callback URL, code and state in it…
		provider.signInAs = { sub: 'sub-attacker', email: uniqueEmail('oidc-attacker'), email_verified: true }
		const attacker = new FlowBrowser(t.app)
		const atCallback = await attacker.follow(authorizationPath(pkcePair().challenge), provider.issuer, (url) => url.pathname.endsWith('/callback'))
		expect(atCallback.searchParams.get('state')).toBeString()
		// …and gets the victim's browser to open it: that browser never started this flow.
		const victim = new FlowBrowser(t.app)
		const planted = await victim.follow(atCallback.href, provider.issuer)
		expect(planted.origin).toBe(FRONTEND)
		expect(planted.searchParams.get('error')).toBe('invalid-state')
		expect(planted.searchParams.get('code')).toBeNull()
		// Nor did the victim's browser burn the flow: it is still its own browser's (here, the attacker's), once.
		const own = await attacker.follow(atCallback.href, provider.issuer)
		expect(own.searchParams.get('code')).toBeString()
		const replayed = await attacker.follow(atCallback.href, provider.issuer)
		expect(replayed.searchParams.get('error')).toBe('invalid-state')

		const madeUp = await t.app.handle(new Request('http://localhost/api/auth/providers/test/callback?code=x&state=made-up'))
		const location = new URL(madeUp.headers.get('location') ?? '')
		expect(location.origin).toBe(FRONTEND)
		expect(location.searchParams.get('error')).toBe('invalid-state')
	})

	test('a code older than its 60 seconds is refused', async () => {
		const email = uniqueEmail('oidc-late')
		const { landed, verifier } = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
		await database.handle.db.update(signInCodes).set({ expiresAt: new Date(Date.now() - 1000) }).where(eq(signInCodes.provider, 'test'))
		expect((await exchange(landed.searchParams.get('code'), verifier)).status).toBe(400)
	})

	test('a redirectTo outside REDIRECT_URLS is a 400 with no redirect', async () => {
		const { challenge } = pkcePair()
		for (const redirectTo of ['https://evil.example/cb', 'http://frontend.test.evil.example/cb', 'http://user@frontend.test/cb', 'http://frontend.test:8080/cb', 'javascript:alert(1)']) {
			const res = await t.call('GET', authorizationPath(challenge, redirectTo))
			expect(res.status).toBe(400)
			expect(res.headers.get('location')).toBeNull()
			expect(res.body.type).toEndWith('/redirect-not-allowed')
		}
	})

	test('an unknown provider is 404, a bad challenge 422', async () => {
		expect((await t.call('GET', authorizationPath(pkcePair().challenge).replace('/test/', '/nope/'))).status).toBe(404)
		expect((await t.call('GET', authorizationPath('short'))).status).toBe(422)
	})
})

describe('ID tokens that fail a check end in invalid-response, and no account is made', () => {
	const now = () => Math.floor(Date.now() / 1000)
	const cases: Array<[string, IdTokenRewrite]> = [
		['a broken signature', 'break-signature'],
		['another nonce', (claims) => ({ ...claims, nonce: 'a-nonce-of-another-flow' })],
		['another audience', (claims) => ({ ...claims, aud: 'some-other-client' })],
		['another issuer', (claims) => ({ ...claims, iss: 'https://evil.example' })],
		['an expired token', (claims) => ({ ...claims, iat: now() - 7200, exp: now() - 3600 })],
	]
	for (const [label, rewrite] of cases)
		test(label, async () => {
			const email = uniqueEmail('oidc-bad-token')
			provider.rewriteIdToken = rewrite
			try {
				const { landed } = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
				expect(Object.fromEntries(landed.searchParams)).toEqual({
					error: 'invalid-response',
					error_description: 'The provider’s answer did not pass the checks (signature, issuer, audience, nonce or expiry)',
				})
			} finally {
				provider.rewriteIdToken = undefined
			}
			expect(await database.handle.db.select().from(users).where(eq(users.email, email))).toEqual([])
		})

	test('the same provider signing correctly again is accepted (the rewrite was the only fault)', async () => {
		const email = uniqueEmail('oidc-good-token')
		provider.rewriteIdToken = (claims) => claims
		try {
			const { landed, verifier } = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
			expect((await exchange(landed.searchParams.get('code'), verifier)).status).toBe(200)
		} finally {
			provider.rewriteIdToken = undefined
		}
	})
})

describe('discovery and keys', () => {
	test('the discovery document is fetched once for many flows; a rotated signing key is fetched when a token names it', async () => {
		const rotating = await TestOpenIdProvider.start(['http://localhost/api/auth/providers/rotating/callback'])
		const app = await startTestApp({ APP_URL: FRONTEND, OIDC_PROVIDERS: 'rotating', ...rotating.settings('rotating') }, database)
		try {
			const signIn = async () => {
				const email = uniqueEmail('oidc-rotating')
				rotating.signInAs = { sub: `sub-${email}`, email, email_verified: true }
				const { verifier, challenge } = pkcePair()
				const landed = await new FlowBrowser(app.app).follow(authorizationPath(challenge).replace('/test/', '/rotating/'), rotating.issuer)
				const code = landed.searchParams.get('code')
				return code ? (await exchange(code, verifier, app)).status : landed.searchParams.get('error')
			}
			for (let i = 0; i < 3; i++) expect(await signIn()).toBe(200)
			expect(rotating.requests.get('/.well-known/openid-configuration')).toBe(1)
			expect(rotating.requests.get('/jwks')).toBe(1)
			await rotating.rotate()
			// A made-up kid does not make the key set be fetched again and again: not within a minute of the last fetch…
			expect(await signIn()).toBe('invalid-response')
			expect(rotating.requests.get('/jwks')).toBe(1)
			// …and after it, the unknown kid fetches the key set once more, and the rotated key is found.
			setSystemTime(new Date(Date.now() + 61_000))
			try {
				expect(await signIn()).toBe(200)
			} finally {
				setSystemTime()
			}
			expect(rotating.requests.get('/jwks')).toBe(2)
			expect(rotating.requests.get('/.well-known/openid-configuration')).toBe(1)
		} finally {
			await app.close()
			await rotating.stop()
		}
	})
})

describe('a provider that is down', () => {
	test('its flow ends with provider-unavailable, and everything else works', async () => {
		const down = await TestOpenIdProvider.start(['http://localhost/api/auth/providers/down/callback'])
		const app = await startTestApp({ APP_URL: FRONTEND, OIDC_PROVIDERS: 'down', ...down.settings('down') }, database)
		try {
			await down.stop()
			const res = await app.app.handle(new Request(`http://localhost${authorizationPath(pkcePair().challenge).replace('/test/', '/down/')}`))
			expect(res.status).toBe(302)
			const location = new URL(res.headers.get('location') ?? '')
			expect(location.origin + location.pathname).toBe(CALLBACK_PAGE)
			expect(location.searchParams.get('error')).toBe('provider-unavailable')
			const account = await signUp(app)
			expect((await app.call('GET', '/api/users/me', { token: account.accessToken })).status).toBe(200)
		} finally {
			await app.close()
			await down.stop()
		}
	})
})

describe('a provider that goes down during the flow', () => {
	test('the callback cannot reach its token endpoint: provider-unavailable, and a retry once it is back works', async () => {
		const email = uniqueEmail('oidc-midway')
		provider.signInAs = { sub: `sub-${email}`, email, email_verified: true }
		const { challenge } = pkcePair()
		const browser = new FlowBrowser(t.app)
		const atCallback = await browser.follow(authorizationPath(challenge), provider.issuer, (url) => url.pathname.endsWith('/callback'))
		await provider.stop()
		try {
			const landed = await browser.follow(atCallback.href, provider.issuer)
			expect(landed.searchParams.get('error')).toBe('provider-unavailable')
		} finally {
			await provider.restart()
		}
		const retry = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
		expect((await exchange(retry.landed.searchParams.get('code'), retry.verifier)).status).toBe(200)
	})
})

describe('sign-up closed', () => {
	test('no account is made from a provider either', async () => {
		const closed = await startTestApp(settings({ SIGNUP_ENABLED: 'false' }), database)
		try {
			const email = uniqueEmail('oidc-closed')
			const { landed } = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true }, closed)
			expect(landed.searchParams.get('error')).toBe('signup-disabled')
			expect(await database.handle.db.select().from(users).where(eq(users.email, email))).toEqual([])
		} finally {
			await closed.close()
		}
	})
})

describe('claims that sign-up would refuse', () => {
	const INVALID_EMAIL = { error: 'invalid-email', error_description: 'The provider gave an address that is not a valid email; use another way to sign in' }

	for (const [label, email] of [
		['no @ at all', 'no-at-sign'],
		['a host without a dot', 'x@localhost'],
		['letters outside ASCII', 'ädä@exämple.test'],
		['65 characters before the @', `${'a'.repeat(65)}@example.test`],
		['more than 254 characters', `a@${'b'.repeat(250)}.test`],
		['spaces around it', ' padded@example.test '],
	] as const)
		test(`an address with ${label} ends the flow with invalid-email, and makes no account and no identity`, async () => {
			const sub = `sub-invalid-${Bun.randomUUIDv7()}`
			const { landed } = await signInAtProvider({ sub, email, email_verified: true, name: 'Not Stored' })
			expect(landed.origin + landed.pathname).toBe(CALLBACK_PAGE)
			expect(Object.fromEntries(landed.searchParams)).toEqual(INVALID_EMAIL)
			expect(await database.handle.db.select().from(identities).where(eq(identities.subject, sub))).toEqual([])
			expect(await database.handle.db.select().from(users).where(eq(users.email, email.trim().toLowerCase()))).toEqual([])
		})

	test('an identity already linked is refused too when its provider now sends an address that is not valid', async () => {
		const email = uniqueEmail('oidc-went-bad')
		const first = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true })
		expect((await exchange(first.landed.searchParams.get('code'), first.verifier)).status).toBe(200)
		const again = await signInAtProvider({ sub: `sub-${email}`, email: 'no-at-sign', email_verified: true })
		expect(Object.fromEntries(again.landed.searchParams)).toEqual(INVALID_EMAIL)
	})

	test('a name with control characters or beyond 200 characters is kept on one line, cleaned and cut, and the exchange answers 200', async () => {
		const email = uniqueEmail('oidc-name')
		const name = `Ada\u0000\nLovelace\u0007\t${'é'.repeat(300)}`
		const { landed, verifier } = await signInAtProvider({ sub: `sub-${email}`, email, email_verified: true, name })
		const res = await exchange(landed.searchParams.get('code'), verifier)
		expect(res.status).toBe(200)
		expect(res.body.data.user.name).toBe(`Ada Lovelace ${'é'.repeat(200 - 'Ada Lovelace '.length)}`)
	})

	test('an upper-case address is taken, stored lower-cased as sign-up stores it', async () => {
		const email = uniqueEmail('oidc-case')
		const { landed, verifier } = await signInAtProvider({ sub: `sub-${email}`, email: email.toUpperCase(), email_verified: true })
		const res = await exchange(landed.searchParams.get('code'), verifier)
		expect(res.status).toBe(200)
		expect(res.body.data.user.email).toBe(email)
	})
})
