/**
 * The same tour with a client generated from the served OpenAPI document
 * (openapi-typescript writes ./schema.d.ts, openapi-fetch calls): the way
 * for callers that do not use Eden. Type-checked and run by
 * test/client.package.e2e.ts.
 */
import createClient from 'openapi-fetch'
import type { components, paths } from './schema'
import type { Account } from './eden-client'

type Problem = components['schemas']['Problem']

const bearer = (accessToken: string) => ({ authorization: `Bearer ${accessToken}` })

export async function tourWithGeneratedClient(baseUrl: string, admin: Account, newcomer: Account) {
	const api = createClient<paths>({ baseUrl })

	const signedUp = await api.POST('/api/users', { body: { ...newcomer, name: 'Generated Client' } })
	if (!signedUp.data) throw new Error(`sign-up: ${signedUp.response.status}`)

	const loggedIn = await api.POST('/api/auth/login', { body: newcomer })
	if (!loggedIn.data) throw new Error(`login: ${loggedIn.response.status}`)
	if ('mfaRequired' in loggedIn.data.data) throw new Error('login: this account has no second factor')
	const tokens = loggedIn.data.data

	const me = await api.GET('/api/users/{id}', { params: { path: { id: 'me' } }, headers: bearer(tokens.accessToken) })
	if (!me.data) throw new Error(`me: ${me.response.status}`)
	const role: 'user' | 'admin' = me.data.data.role

	const emailVerified: boolean = me.data.data.emailVerified

	const verificationAsked = await api.POST('/api/auth/verification-requests', { body: { email: newcomer.email } })
	const recoveryAsked = await api.POST('/api/auth/recovery-requests', { body: { email: newcomer.email } })
	const wrongCode = await api.POST('/api/auth/email-verifications', { body: { email: newcomer.email, code: '000000' } })
	const wrongToken = await api.POST('/api/auth/password-resets', { body: { token: 'not-a-token-from-any-mail', password: 'a brand new passphrase' } })

	const enrolled = await api.POST('/api/users/me/factors', { body: { type: 'totp', name: 'Phone' }, headers: bearer(tokens.accessToken) })
	if (!enrolled.data) throw new Error(`enrol: ${enrolled.response.status}`)
	const enrolment = enrolled.data.data
	if (!('secret' in enrolment)) throw new Error('enrol: no TOTP secret')
	const factorId = enrolment.factor.id
	const wrongTotp = await api.POST('/api/users/me/factors/{factorId}/activation', { params: { path: { factorId } }, body: { code: '12345' }, headers: bearer(tokens.accessToken) })
	const listed = await api.GET('/api/users/{id}/factors', { params: { path: { id: 'me' } }, headers: bearer(tokens.accessToken) })
	const removed = await api.DELETE('/api/users/{id}/factors/{factorId}', { params: { path: { id: 'me', factorId } }, headers: bearer(tokens.accessToken) })
	const passkeyChallenge = await api.POST('/api/auth/passkey/challenges')
	const providers = await api.GET('/api/auth/providers')
	const madeUpCode = await api.POST('/api/auth/sessions', { body: { code: 'made-up', codeVerifier: 'a-verifier-of-at-least-forty-three-characters-long' } })
	const madeUpMfa = await api.POST('/api/auth/mfa', { body: { mfaToken: 'made-up', method: 'totp', code: '123456' } })

	const refreshed = await api.POST('/api/auth/refresh', { body: { refreshToken: tokens.refreshToken } })
	if (!refreshed.data) throw new Error(`refresh: ${refreshed.response.status}`)
	const fresh = refreshed.data.data

	const refused = await api.POST('/api/auth/login', { body: { email: newcomer.email, password: 'not the password at all' } })
	const problem: Problem | undefined = refused.error

	const adminLogin = await api.POST('/api/auth/login', { body: admin })
	if (!adminLogin.data) throw new Error(`admin login: ${adminLogin.response.status}`)
	if ('mfaRequired' in adminLogin.data.data) throw new Error('admin login: a second factor is owed')
	const asAdmin = bearer(adminLogin.data.data.accessToken)
	const firstPage = await api.GET('/api/users', { params: { query: { limit: 2, sort: 'email' } }, headers: asAdmin })
	if (!firstPage.data) throw new Error(`first page: ${firstPage.response.status}`)
	const cursor = firstPage.data.data.nextCursor
	const secondPage = cursor === null ? undefined : await api.GET('/api/users', { params: { query: { limit: 2, sort: 'email', cursor } }, headers: asAdmin })

	const loggedOut = await api.POST('/api/auth/logout', { body: { scope: 'local' }, headers: bearer(fresh.accessToken) })
	if (!loggedOut.data) throw new Error(`logout: ${loggedOut.response.status}`)
	const afterLogout = await api.GET('/api/users/{id}', { params: { path: { id: 'me' } }, headers: bearer(fresh.accessToken) })

	return {
		signUp: { status: signedUp.response.status, id: signedUp.data.data.id, location: signedUp.response.headers.get('location') },
		login: { status: loggedIn.response.status, tokenType: tokens.tokenType, expiresIn: tokens.expiresIn },
		me: { status: me.response.status, email: me.data.data.email, role, emailVerified },
		email: {
			verificationRequest: verificationAsked.response.status,
			recoveryRequest: recoveryAsked.response.status,
			wrongCode: wrongCode.error && { status: wrongCode.error.status, type: wrongCode.error.type },
			wrongToken: wrongToken.error && { status: wrongToken.error.status, type: wrongToken.error.type },
		},
		factors: {
			enrolled: { status: enrolled.response.status, factorStatus: enrolment.factor.status, qrCode: enrolment.qrCodeSvg.startsWith('<svg'), uri: enrolment.otpauthUri.startsWith('otpauth://totp/') },
			wrongCode: wrongTotp.error && { status: wrongTotp.error.status, type: wrongTotp.error.type },
			listed: listed.data?.data.items.map((factor) => factor.status),
			removed: removed.response.status,
			passkeyChallenge: passkeyChallenge.response.status,
			madeUpMfa: madeUpMfa.error && { status: madeUpMfa.error.status, type: madeUpMfa.error.type },
		},
		providers: providers.data?.data.items.map((provider) => provider.id),
		madeUpCode: madeUpCode.error && { status: madeUpCode.error.status, type: madeUpCode.error.type },
		refresh: { status: refreshed.response.status, rotated: fresh.refreshToken !== tokens.refreshToken },
		problem: problem && { status: problem.status, type: problem.type, detail: problem.detail },
		pages: {
			first: firstPage.data.data.items.map((user) => user.email),
			link: firstPage.response.headers.get('link'),
			second: secondPage?.data?.data.items.map((user) => user.email),
		},
		logout: { status: loggedOut.response.status, data: loggedOut.data.data, afterLogout: afterLogout.error?.status },
	}
}

/** Values outside the contract's enums do not compile (never called: tsc is the test). */
export function valuesOutsideTheContract(api: ReturnType<typeof createClient<paths>>) {
	// @ts-expect-error: `name` is not a sort order
	void api.GET('/api/users', { params: { query: { sort: 'name' } } })
	// @ts-expect-error: the logout scopes are `local`, `others` and `global`
	void api.POST('/api/auth/logout', { body: { scope: 'everywhere' } })
}
