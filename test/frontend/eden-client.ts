/**
 * A frontend's program, type-checked in a fresh folder against the installed
 * @latchkey/client package (see test/client.package.e2e.ts), then run against
 * the compiled binary. It returns what it saw for the test to check.
 */
import { createClient, type LatchkeyClient } from '@latchkey/client'

export interface Account {
	email: string
	password: string
}

const bearer = (accessToken: string) => ({ headers: { authorization: `Bearer ${accessToken}` } })

export async function tourOfTheApi(baseUrl: string, admin: Account, newcomer: Account) {
	const api = createClient(baseUrl)

	const signedUp = await api.api.users.post({ ...newcomer, name: 'Frontend Developer' })
	if (signedUp.error) throw new Error(`sign-up: ${signedUp.error.status}`)
	const location = signedUp.response.headers.get('location')

	const loggedIn = await api.api.auth.login.post(newcomer)
	if (loggedIn.error) throw new Error(`login: ${loggedIn.error.status}`)
	// The type makes a frontend handle both answers: tokens, or a second factor owed.
	if ('mfaRequired' in loggedIn.data.data) throw new Error('login: this account has no second factor')
	const tokens = loggedIn.data.data

	const me = await api.api.users({ id: 'me' }).get(bearer(tokens.accessToken))
	if (me.error) throw new Error(`me: ${me.error.status}`)
	const role: 'user' | 'admin' = me.data.data.role

	const emailVerified: boolean = me.data.data.emailVerified

	// The email routes: the two requests answer 202 whatever the address; a wrong code is a typed 400.
	const verificationAsked = await api.api.auth['verification-requests'].post({ email: newcomer.email })
	const recoveryAsked = await api.api.auth['recovery-requests'].post({ email: newcomer.email })
	const wrongCode = await api.api.auth['email-verifications'].post({ email: newcomer.email, code: '000000' })
	const wrongToken = await api.api.auth['password-resets'].post({ token: 'not-a-token-from-any-mail', password: 'a brand new passphrase' })

	// Second factors: a TOTP enrolment answers the secret and a QR code; a wrong code does not activate it;
	// the pending factor is listed and removed; a passkey challenge needs no account; a made-up mfaToken is refused.
	const enrolled = await api.api.users.me.factors.post({ type: 'totp', name: 'Phone' }, bearer(tokens.accessToken))
	if (enrolled.error) throw new Error(`enrol: ${enrolled.error.status}`)
	const enrolment = enrolled.data.data
	if (!('secret' in enrolment)) throw new Error('enrol: no TOTP secret')
	const factorId = enrolment.factor.id
	const wrongTotp = await api.api.users.me.factors({ factorId }).activation.post({ code: '12345' }, bearer(tokens.accessToken))
	const listed = await api.api.users({ id: 'me' }).factors.get(bearer(tokens.accessToken))
	const removed = await api.api.users({ id: 'me' }).factors({ factorId }).delete(undefined, bearer(tokens.accessToken))
	const passkeyChallenge = await api.api.auth.passkey.challenges.post()
	const providers = await api.api.auth.providers.get()
	const madeUpCode = await api.api.auth.sessions.post({ code: 'made-up', codeVerifier: 'a-verifier-of-at-least-forty-three-characters-long' })
	const madeUpMfa = await api.api.auth.mfa.post({ mfaToken: 'made-up', method: 'totp', code: '123456' })

	const refreshed = await api.api.auth.refresh.post({ refreshToken: tokens.refreshToken })
	if (refreshed.error) throw new Error(`refresh: ${refreshed.error.status}`)
	const fresh = refreshed.data.data

	// A problem is a typed error: its status narrows it, its body is RFC 9457.
	const refused = await api.api.auth.login.post({ email: newcomer.email, password: 'not the password at all' })
	let problem: { status: number; type: string; detail: string } | undefined
	if (refused.error?.status === 401) problem = { status: refused.error.value.status, type: refused.error.value.type, detail: refused.error.value.detail }

	// An admin pages through the users, two at a time, sorted by email.
	const adminLogin = await api.api.auth.login.post(admin)
	if (adminLogin.error) throw new Error(`admin login: ${adminLogin.error.status}`)
	if ('mfaRequired' in adminLogin.data.data) throw new Error('admin login: a second factor is owed')
	const asAdmin = bearer(adminLogin.data.data.accessToken)
	const firstPage = await api.api.users.get({ query: { limit: 2, sort: 'email' }, ...asAdmin })
	if (firstPage.error) throw new Error(`first page: ${firstPage.error.status}`)
	const cursor = firstPage.data.data.nextCursor
	const secondPage = cursor === null ? undefined : await api.api.users.get({ query: { limit: 2, sort: 'email', cursor }, ...asAdmin })
	if (secondPage?.error) throw new Error(`second page: ${secondPage.error.status}`)

	const loggedOut = await api.api.auth.logout.post({ scope: 'local' }, bearer(fresh.accessToken))
	if (loggedOut.error) throw new Error(`logout: ${loggedOut.error.status}`)
	const afterLogout = await api.api.users({ id: 'me' }).get(bearer(fresh.accessToken))

	return {
		signUp: { status: signedUp.status, id: signedUp.data.data.id, location },
		login: { status: loggedIn.status, tokenType: tokens.tokenType, expiresIn: tokens.expiresIn },
		me: { status: me.status, email: me.data.data.email, role, emailVerified },
		email: {
			verificationRequest: verificationAsked.status,
			recoveryRequest: recoveryAsked.status,
			wrongCode: wrongCode.error && { status: wrongCode.error.status, type: wrongCode.error.value.type },
			wrongToken: wrongToken.error && { status: wrongToken.error.status, type: wrongToken.error.value.type },
		},
		factors: {
			enrolled: { status: enrolled.status, factorStatus: enrolment.factor.status, qrCode: enrolment.qrCodeSvg.startsWith('<svg'), uri: enrolment.otpauthUri.startsWith('otpauth://totp/') },
			wrongCode: wrongTotp.error && { status: wrongTotp.error.status, type: wrongTotp.error.value.type },
			listed: listed.data?.data.items.map((factor) => factor.status),
			removed: removed.status,
			passkeyChallenge: passkeyChallenge.status,
			madeUpMfa: madeUpMfa.error && { status: madeUpMfa.error.status, type: madeUpMfa.error.value.type },
		},
		providers: providers.data?.data.items.map((provider) => provider.id),
		madeUpCode: madeUpCode.error && { status: madeUpCode.error.status, type: madeUpCode.error.value.type },
		refresh: { status: refreshed.status, rotated: fresh.refreshToken !== tokens.refreshToken },
		problem,
		pages: {
			first: firstPage.data.data.items.map((user) => user.email),
			link: firstPage.response.headers.get('link'),
			second: secondPage?.data?.data.items.map((user) => user.email),
		},
		logout: { status: loggedOut.status, data: loggedOut.data.data, afterLogout: afterLogout.error?.status },
	}
}

/** Values outside the contract's literals do not compile (never called: tsc is the test). */
export function valuesOutsideTheContract(api: LatchkeyClient) {
	// @ts-expect-error: `name` is not a sort order
	void api.api.users.get({ query: { sort: 'name' } })
	// @ts-expect-error: the roles are `user` and `admin`
	void api.api.users.get({ query: { role: 'owner' } })
	// @ts-expect-error: the statuses are `active` and `deactivated`
	void api.api.users.get({ query: { status: 'banned' } })
	// @ts-expect-error: the logout scopes are `local`, `others` and `global`
	void api.api.auth.logout.post({ scope: 'everywhere' })
	// @ts-expect-error: audit event types are kebab-case
	void api.api['audit-events'].get({ query: { type: 'user.signed_up' } })
	// @ts-expect-error: admins set the role to `user` or `admin` only
	void api.api.users({ id: 'me' }).put({ email: 'a@example.com', name: 'A', role: 'superuser' })
	// The right literals compile.
	void api.api.users.get({ query: { sort: '-email', role: 'admin', status: 'deactivated' } })
	void api.api['audit-events'].get({ query: { type: 'user.signed-up' } })
}
