import { Elysia, t } from 'elysia'
import type { Config } from '../../config/env'
import type { authGuard } from '../../http/auth'
import { requestContext } from '../../http/request-context'
import { envelope } from '../../http/problem'
import { Envelope, problemResponses } from '../../http/openapi'
import { toUserResource } from '../users/service'
import { FactorModel } from '../factors/model'
import { AuthModel } from './model'
import type { AuthService, IssuedSession } from './service'

export interface AuthModuleDeps {
	auth: AuthService
	guard: ReturnType<typeof authGuard>
	jwt: Config['jwt']
}

/** `tokenResponse(issued)`: the body of every sign-in and refresh, with the access token signed. */
export const tokenResponses = ({ guard, jwt }: Pick<AuthModuleDeps, 'guard' | 'jwt'>) =>
	new Elysia({ name: 'token-responses' })
		.use(guard)
		.derive({ as: 'scoped' }, ({ accessTokenSigner }) => ({
			/** The response body of login and refresh: the signed pair and the user. */
			tokenResponse: async (issued: IssuedSession) => ({
				accessToken: await accessTokenSigner.sign({
					sub: issued.user.id,
					sid: issued.sessionId,
					role: issued.user.role,
					jti: issued.accessTokenId,
					amr: issued.assurance.amr,
					aal: issued.assurance.aal,
				}),
				refreshToken: issued.refreshToken,
				tokenType: 'Bearer' as const,
				expiresIn: jwt.accessTtlSeconds,
				refreshExpiresIn: jwt.refreshTtlSeconds,
				user: toUserResource(issued.user),
			}),
		}))

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
				envelope(await tokenResponse(await auth.refresh(body.refreshToken, client)), 'Tokens refreshed'),
			{
				body: AuthModel.refresh,
				response: { 200: Envelope(AuthModel.tokens), ...problemResponses(400, 'invalid-token', 413, 415, 422, 429, 503) },
				detail: {
					operationId: 'refresh',
					summary: 'Exchange a refresh token for a new pair (rotation)',
					description:
						'The presented refresh token stops working. Presenting an already rotated token again revokes the whole session, except for a retry within the grace interval.',
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

