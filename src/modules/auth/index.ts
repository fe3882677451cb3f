import type { AuthenticationResponseJSON, PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/server'
import { Elysia, t } from 'elysia'
import type { Config } from '../../config/env'
import type { authGuard } from './guard'
import { requestContext } from '../../http/request-context'
import { envelope } from '../../http/problem'
import { Envelope, problemResponses } from '../../http/openapi'
import { FactorModel } from '../factors/model'
import { AuthModel } from './model'
import type { AuthService } from './service'
import type { Caller, ClientInfo, Queryable } from './sessions'
import { tokenResponses, type IssuedSession, type MfaMethod } from './sign-in'

export interface AuthModuleDeps {
	auth: AuthService
	guard: ReturnType<typeof authGuard>
	jwt: Config['jwt']
}

export const authModule = ({ auth, guard, jwt }: AuthModuleDeps) =>
	new Elysia({ name: 'auth', prefix: '/auth', detail: { tags: ['Authentication'] } })
		.use(guard)
		.use(tokenResponses({ guard, jwt }))
		.use(requestContext)
		.post(
			'/login',
			async ({ body, client, tokenResponse }) => {
				const outcome = await auth.login(body.email, body.password, client)
				return 'mfaRequired' in outcome
					? envelope(outcome, 'Password accepted; a second factor is required')
					: envelope(await tokenResponse(outcome), 'Logged in')
			},
			{
				body: AuthModel.login,
				response: {
					200: Envelope(t.Union([AuthModel.tokens, FactorModel.secondFactorOwed])),
					...problemResponses(400, 'invalid-credentials', 413, 415, 422, 'rate-limited', 'login-locked', 503),
				},
				detail: {
					operationId: 'login',
					summary: 'Log in with email and password',
					description:
						'Wrong password, unknown email and a deactivated account all get the same 401, in about the same time. For an account with an active second factor, the right password answers `{ mfaRequired: true, mfaToken, methods }` and no tokens: finish with POST /auth/mfa.',
					security: [],
				},
			},
		)
		.post(
			'/refresh',
			async ({ body, client, tokenResponse }) =>
				envelope(await tokenResponse(await auth.refresh(body.refreshToken, client, body.organizationId)), 'Tokens refreshed'),
			{
				body: AuthModel.refresh,
				response: { 200: Envelope(AuthModel.tokens), ...problemResponses(400, 'invalid-token', 'not-a-member', 413, 415, 422, 429, 503) },
				detail: {
					operationId: 'refresh',
					summary: 'Exchange a refresh token for a new pair (rotation)',
					description:
						'The presented refresh token stops working. Presenting an already rotated token again revokes the whole session, except for a retry within the grace interval. `organizationId` switches the session’s active organization in the same step (`null`: none): the new access token carries `org` for it, 403 `not-a-member` when the caller is not a member of an active organization with that id.',
					security: [],
				},
			},
		)
		.post(
			'/logout',
			async ({ body, caller, client }) => {
				await auth.logout(caller, body?.scope ?? 'local', client)
				return envelope(null, 'Logged out')
			},
			{
				auth: { level: 'user', duringEnrollment: true },
				body: AuthModel.logout,
				response: { 200: Envelope(t.Null()), ...problemResponses(400, 401, 413, 415, 422, 429, 503) },
				detail: {
					operationId: 'logout',
					summary: 'Revoke this session, the others, or all',
					description: 'The revoked sessions’ access and refresh tokens are refused from that moment on.',
				},
			},
		)


/** A check of the session's owner with a second factor: what the factors module gives at composition. */
export interface FactorCheck {
	reauthenticate(caller: Caller, input: { method: MfaMethod; code?: string; response?: AuthenticationResponseJSON }, client: ClientInfo): Promise<IssuedSession>
	reauthenticationChallenge(caller: Caller): Promise<PublicKeyCredentialRequestOptionsJSON>
	hasSecondFactor(userId: string): Promise<boolean>
}

/** A check of the session's owner with a code mailed to the account: what the email module gives at composition. */
export interface MailedCodeCheck {
	sendReauthenticationCode(user: Caller['user'], hasSecondFactor: boolean, client: ClientInfo): Promise<void>
	/** What spends the code, when it is right (in the renewal's transaction). */
	checkReauthenticationCode(user: Caller['user'], code: string, client: ClientInfo): Promise<(tx: Queryable) => Promise<boolean>>
}

export interface ReauthenticationDeps extends Pick<AuthModuleDeps, 'auth' | 'guard' | 'jwt'> {
	factors: FactorCheck
	email: MailedCodeCheck
}

/** Seen by the tokens' `auth_time`: a check proves the session's owner again, for adding or changing a way in. */
export const reauthentication = ({ auth, factors, email, guard, jwt }: ReauthenticationDeps) =>
	new Elysia({ name: 'reauthentication', prefix: '/auth/reauthentication', detail: { tags: ['Authentication'] } })
		.use(guard)
		.use(tokenResponses({ guard, jwt }))
		.use(requestContext)
		.post(
			'',
			async ({ body, caller, client, tokenResponse }) => {
				let renewed: IssuedSession
				if ('password' in body) renewed = await auth.reauthenticateWithPassword(caller, body.password, client)
				else if (body.method === 'email') {
					const spend = await email.checkReauthenticationCode(caller.user, body.code, client)
					renewed = await auth.reauthenticateWithMailedCode(caller, spend, client)
				} else renewed = await factors.reauthenticate(caller, body, client)
				return envelope(await tokenResponse(renewed), 'It is you: this session may add or change a way in for the next minutes')
			},
			{
				// An enrolment-only session proves itself too: enrolling needs a recent check.
				auth: { level: 'user', duringEnrollment: true },
				body: AuthModel.reauthentication,
				response: {
					200: Envelope(AuthModel.tokens),
					...problemResponses(400, 'invalid-code', 'invalid-credentials', 'invalid-second-factor', 403, 409, 413, 415, 422, 'rate-limited', 'login-locked', 'too-many-codes', 503),
				},
				detail: {
					operationId: 'reauthenticate',
					summary: 'Prove again that it is the session’s owner (a “sudo” check)',
					description:
						'With the password, a TOTP or recovery code, a passkey (options from POST /auth/reauthentication/challenges) or a code mailed by that route (accounts with neither password nor factor). Answers the login body for the same session: `sid` unchanged, a fresh `auth_time`, and a new refresh token (the old one counts as rotated). For REAUTHENTICATION_SECONDS (default 300) the session may add or change a way in (factors, identities, password and email without `currentPassword`), with the access token this answers or a later one: a token issued before the check keeps its older `auth_time` and gains nothing from it. A second factor also raises the session to `aal2`. Wrong answers count toward the same lockouts as sign-in, and the route counts against the `/auth` budget. Mailed codes: after 10 wrong ones for the account in any 24 hours, 429 `too-many-codes` with `Retry-After`.',
				},
			},
		)
		.post(
			'/challenges',
			async ({ body, caller, client }) => {
				if (body.method === 'webauthn') return envelope(await factors.reauthenticationChallenge(caller), 'Sign the challenge with one of your passkeys')
				await email.sendReauthenticationCode(caller.user, await factors.hasSecondFactor(caller.user.id), client)
				return envelope(null, 'A code is on its way to your address')
			},
			{
				auth: { level: 'user', duringEnrollment: true },
				body: AuthModel.reauthenticationChallenge,
				response: {
					200: Envelope(t.Union([FactorModel.webauthnOptions, t.Null()])),
					...problemResponses(400, 401, 403, 409, 413, 415, 422, 429, 'mail-unavailable', 503),
				},
				detail: {
					operationId: 'createReauthenticationChallenge',
					summary: 'Options for a passkey check, or a code by mail',
					description:
						'`webauthn`: options for `startAuthentication` listing the account’s passkeys (409 without one); the challenge is single use, 5 minutes, for this session only. `email`: a 6-digit code (10 minutes) to the account’s address, for accounts with neither a password nor a second factor (409 otherwise); at most one mail per MAIL_RESEND_SECONDS, answered alike.',
				},
			},
		)
