import { Elysia, t } from 'elysia'
import type { authGuard } from '../auth/guard'
import { targetUserId } from '../auth/guard'
import { AccountId, Id } from '../../http/ids'
import { Envelope, problemResponses, withResponseHeaders } from '../../http/openapi'
import { envelope } from '../../http/problem'
import { requestContext } from '../../http/request-context'
import type { Config } from '../../config/env'
import { tokenResponses } from '../auth/sign-in'
import { AuthModel } from '../auth/model'
import { UserModel } from '../users/model'
import type { UsersService } from '../users/service'
import type { FactorRow } from '../../db/schema'
import { FactorModel, toFactorResource } from './model'

export { toFactorResource }
import type { FactorsService } from './service'

export interface FactorsModuleDeps {
	factors: FactorsService
	users: Pick<UsersService, 'get'>
	guard: ReturnType<typeof authGuard>
	jwt: Config['jwt']
}

const FactorParams = t.Object({ id: AccountId, factorId: Id() })
const OwnFactorParams = t.Object({ factorId: Id() })
/** The caller's own account only, during enrolment-only sessions too. */
const ENROLMENT = { level: 'user', duringEnrollment: true } as const

/** Second factors of an account: enrolment, activation, removal, recovery codes. */
export const factorsModule = ({ factors, users, guard }: FactorsModuleDeps) =>
	new Elysia({ name: 'factors', prefix: '/users', detail: { tags: ['Second factors'] } })
		.use(guard)
		.use(requestContext)
		.get(
			'/:id/factors',
			async ({ params, caller }) => {
				const userId = targetUserId(params.id, caller)
				if (userId !== caller.user.id) await users.get(userId)
				return envelope({ items: (await factors.list(userId)).map(toFactorResource) }, 'Factors')
			},
			{
				auth: { level: 'self', duringEnrollment: true },
				params: UserModel.idParams,
				response: { 200: Envelope(FactorModel.list), ...problemResponses(401, 403, 404, 422, 429) },
				detail: { operationId: 'listFactors', summary: "List an account's second factors (the user themself, or an admin)" },
			},
		)
		.post(
			'/me/factors',
			async ({ body, caller, client, set }) => {
				set.status = 201
				// Where the factor can be listed and removed.
				const located = <T extends { factor: FactorRow }>(enrolment: T) => {
					set.headers.location = `/api/users/${caller.user.id}/factors/${enrolment.factor.id}`
					return enrolment
				}
				if (body.type === 'totp') {
					const { factor, ...enrolment } = located(await factors.enrollTotp(caller, body.name, client))
					return envelope({ factor: toFactorResource(factor), ...enrolment }, 'Scan the code, then activate the factor with a code from the app')
				}
				const { factor, options } = located(await factors.enrollWebauthn(caller, body.name, client))
				// Typed as the schema says (checked, not cast), so that the client's types name nothing of the server's WebAuthn library.
				const enrolment: typeof FactorModel.webauthnEnrolment.static = { factor: toFactorResource(factor), options }
				return envelope(enrolment, 'Create the passkey, then activate the factor with the response')
			},
			{
				auth: ENROLMENT,
				body: FactorModel.create,
				response: {
					201: withResponseHeaders(Envelope(t.Union([FactorModel.totpEnrolment, FactorModel.webauthnEnrolment])), 'Location'),
					...problemResponses(400, 401, 'mfa-required', 'reauthentication-required', 409, 413, 415, 422, 429),
				},
				detail: {
					operationId: 'enrollFactor',
					summary: 'Start enrolling a TOTP app or a passkey',
					description:
						'TOTP: answers the secret, the `otpauth://` URI and an SVG QR code of it, shown once. WebAuthn: answers registration options for `startRegistration` of @simplewebauthn/browser (a discoverable credential, user verification required; the challenge lasts 5 minutes). Either way the factor is `pending` until POST …/activation proves it. A way in: the session must have been signed in or checked (POST /auth/reauthentication) within REAUTHENTICATION_SECONDS (default 5 minutes), else 403 `reauthentication-required`; once an account has an active factor, adding another needs an `aal2` session. Its activation sends a notice to the account’s address. At most 20 factors per account.',
				},
			},
		)
		.post(
			'/me/factors/:factorId/activation',
			async ({ params, body, caller, client }) => {
				const { factor, recoveryCodes } = await factors.activate(caller, params.factorId, body, client)
				return envelope({ factor: toFactorResource(factor), ...(recoveryCodes ? { recoveryCodes } : {}) }, 'Factor activated')
			},
			{
				auth: ENROLMENT,
				params: OwnFactorParams,
				body: FactorModel.activation,
				response: { 200: Envelope(FactorModel.activated), ...problemResponses(400, 'invalid-code', 401, 'mfa-required', 'reauthentication-required', 404, 409, 413, 415, 422, 429) },
				detail: {
					operationId: 'activateFactor',
					summary: 'Prove a pending factor: a TOTP code, or the passkey’s registration response',
					description:
						'The account’s first active factor answers 10 recovery codes, shown this once, and raises the calling session to `aal2` (its next refreshed access token says so). For a recovery’s review (RECOVERY_REVIEW_SECONDS) a way in added at `aal2` counts as added without a second factor while the account holds a factor that was itself added so within that time: an aal2 the session gave itself proves nothing.',
				},
			},
		)
		.delete(
			'/:id/factors/:factorId',
			async ({ params, caller, client }) => {
				const factor = await factors.remove(caller, targetUserId(params.id, caller), params.factorId, client)
				return envelope(toFactorResource(factor), 'Factor removed')
			},
			{
				auth: 'self',
				params: FactorParams,
				response: { 200: Envelope(FactorModel.factor), ...problemResponses(401, 403, 'mfa-required', 404, 'conflict', 422, 429) },
				detail: {
					operationId: 'removeFactor',
					summary: 'Remove a factor (the user at aal2, or an admin)',
					description: 'Removing the account’s last active factor voids its recovery codes too. An admin may remove a user’s factor (a lost device) without a second factor of the user.',
				},
			},
		)
		.post(
			'/me/recovery-codes',
			async ({ caller, client }) => envelope({ recoveryCodes: await factors.regenerateRecoveryCodes(caller, client) }, 'New recovery codes; the old ones are void'),
			{
				auth: 'user',
				response: { 200: Envelope(FactorModel.recoveryCodes), ...problemResponses(401, 403, 409, 429) },
				detail: { operationId: 'regenerateRecoveryCodes', summary: 'Replace the recovery codes (aal2)', description: 'Needs an active factor and an `aal2` session. The 10 new codes are shown this once.' },
			},
		)

/** Sign-in with a second factor or a passkey: the other ways to finish what /auth/login starts. */
export const secondFactorSignIn = ({ factors, guard, jwt }: Omit<FactorsModuleDeps, 'users'>) =>
	new Elysia({ name: 'second-factor-sign-in', prefix: '/auth', detail: { tags: ['Authentication'] } })
		.use(tokenResponses({ guard, jwt }))
		.use(requestContext)
		.post(
			'/mfa',
			async ({ body, client, tokenResponse }) =>
				envelope(await tokenResponse(await factors.completeMfa(body, client)), 'Logged in'),
			{
				body: FactorModel.mfa,
				response: {
					200: Envelope(AuthModel.tokens),
					...problemResponses(400, 'invalid-mfa-token', 'invalid-second-factor', 'email-not-verified', 413, 415, 422, 'rate-limited', 'login-locked', 503),
				},
				detail: {
					operationId: 'completeMfa',
					summary: 'Finish a login with a TOTP code, a recovery code or a passkey',
					description:
						'`mfaToken` comes from POST /auth/login or POST /auth/sessions (a provider sign-in); it lasts 5 minutes, is single use, and its fifth wrong code voids it. Wrong codes also count toward a per-account lockout apart from the password one (LOCKOUT_* settings): then `429 login-locked` with `Retry-After`. A TOTP code of a time step already used is refused (replay). The tokens carry `aal: "aal2"` and an `amr` of the first step’s methods, the factor’s and `mfa`: `["pwd", "otp", "mfa"]` after a password, `["otp", "mfa"]` after a provider (never `pwd`: no password was used); a recovery code counts as `otp`, a passkey as `hwk`.',
					security: [],
				},
			},
		)
		.post('/mfa/challenges', async ({ body }) => envelope(await factors.mfaChallenge(body.mfaToken), 'Sign the challenge with a passkey'), {
			body: FactorModel.mfaChallengeRequest,
			response: { 200: Envelope(FactorModel.webauthnOptions), ...problemResponses(400, 'invalid-mfa-token', 409, 413, 415, 422, 429, 503) },
			detail: {
				operationId: 'createMfaChallenge',
				summary: 'WebAuthn options for finishing a login with a passkey',
				description: 'For `startAuthentication` of @simplewebauthn/browser; the answer goes to POST /auth/mfa with `method: "webauthn"`. One challenge per `mfaToken` at a time.',
				security: [],
			},
		})
		.post('/passkey/challenges', async () => envelope(await factors.passkeyChallenge(), 'Sign the challenge with a passkey'), {
			response: { 200: Envelope(FactorModel.webauthnOptions), ...problemResponses(429, 503) },
			detail: {
				operationId: 'createPasskeyChallenge',
				summary: 'WebAuthn options for passwordless sign-in with a discoverable passkey',
				description: 'No account is named: any passkey of this relying party may answer. The challenge is single use and lasts 5 minutes.',
				security: [],
			},
		})
		.post(
			'/passkey',
			async ({ body, client, tokenResponse }) => envelope(await tokenResponse(await factors.signInWithPasskey(body.response, client)), 'Logged in'),
			{
				body: FactorModel.passkey,
				response: { 200: Envelope(AuthModel.tokens), ...problemResponses(400, 'invalid-credentials', 'email-not-verified', 413, 415, 422, 429, 503) },
				detail: {
					operationId: 'signInWithPasskey',
					summary: 'Sign in with a passkey alone',
					description: 'A passkey with user verification counts as two factors: the tokens carry `amr: ["hwk", "mfa"]` and `aal: "aal2"`. An unknown or removed credential, a wrong origin, a used challenge and a signature counter that went backwards (a cloned authenticator) all get the same 401.',
					security: [],
				},
			},
		)
