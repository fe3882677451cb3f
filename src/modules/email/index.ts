import { Elysia, t } from 'elysia'
import type { Config } from '../../config/env'
import { Envelope, problemResponses } from '../../http/openapi'
import { envelope, reportWithSchemaErrors } from '../../http/problem'
import { requestContext } from '../../http/request-context'
import type { authGuard } from '../auth/guard'
import { AuthModel } from '../auth/model'
import { tokenResponses } from '../auth/sign-in'
import { FactorModel } from '../factors/model'
import { normalizeEmail, toUserResource, UserModel } from '../users/model'
import { EmailModel } from './model'
import type { ClientInfo } from '../audit/service'
import type { EmailCodeSignIn } from './code-sign-in'
import type { EmailService, MailRequest } from './service'

export interface EmailModuleDeps {
	email: EmailService
}

const ACCEPTED = 'If an account can use it, a mail is on its way'

/** The two 202 routes differ only in the kind of mail: the answer never depends on the address. */
const requestMail =
	(email: Pick<EmailService, 'request'>, purpose: MailRequest['purpose']) =>
	async ({ body, client, set }: { body: { email: string }; client: ClientInfo; set: { status?: number | string } }) => {
		await email.request(purpose, body.email, client)
		set.status = 202
		return envelope(null, ACCEPTED)
	}

const mailRequestOptions = (detail: { operationId: string; summary: string; description: string }) => ({
	body: EmailModel.mailRequest,
	response: { 202: Envelope(t.Null()), ...problemResponses(400, 413, 415, 422, 429, 'mail-unavailable', 503) },
	detail: { ...detail, security: [] },
})

export const emailModule = ({ email }: EmailModuleDeps) =>
	new Elysia({ name: 'email', prefix: '/auth', detail: { tags: ['Email'] } })
		.use(requestContext)
		.onTransform(({ body, request }) => {
			const candidate = body as { email?: unknown; password?: unknown } | undefined
			if (!candidate || typeof candidate !== 'object') return
			if (typeof candidate.email === 'string') candidate.email = normalizeEmail(candidate.email)
			// A weak new password is reported with the body's other problems, should the schema refuse some.
			const problem = typeof candidate.password === 'string' ? email.passwordProblem(candidate.password) : undefined
			if (problem) reportWithSchemaErrors(request, [problem])
		})
		.post(
			'/verification-requests',
			requestMail(email, 'verification'),
			mailRequestOptions({
				operationId: 'requestVerificationMail',
				summary: 'Ask for a (new) verification mail',
				description:
					'The same 202, body and time whatever the address: unknown, verified, unverified or deactivated. An active account whose address is unverified gets a mail with a link and a 6-digit code (valid `EMAIL_VERIFICATION_TTL_SECONDS`, default 24 h; older ones are voided); so does the new address of a pending email change. At most one mail of a kind per address per `MAIL_RESEND_SECONDS` (default 60): requests beyond that send nothing. The mail is sent in the background.',
			}),
		)
		.post(
			'/email-verifications',
			async ({ body, client }) => envelope(toUserResource(await email.verifyEmail(body, client)), 'Email verified'),
			{
				body: EmailModel.verification,
				response: {
					200: Envelope(UserModel.user),
					...problemResponses(400, 'invalid-code', 'code-expired', 'email-taken', 413, 415, 422, 429, 'too-many-codes', 503),
				},
				detail: {
					operationId: 'verifyEmail',
					summary: 'Prove an address with the token or code from a mail',
					description:
						'Marks the account’s email verified, or applies a pending email change (409 `email-taken` if another account took the address meanwhile). Tokens and codes work once; a new mail voids the older ones; the fifth wrong code voids it. A genuine token past its time is 400 `code-expired`; anything else refused is 400 `invalid-code`. After 10 wrong codes for an address in any 24 hours (an unknown address alike), `{ email, code }` is 429 `too-many-codes`, right code or not, with `Retry-After` until the oldest of them is 24 hours old; the link’s token still works.',
					security: [],
				},
			},
		)
		.post(
			'/recovery-requests',
			requestMail(email, 'recovery'),
			mailRequestOptions({
				operationId: 'requestRecoveryMail',
				summary: 'Ask for a password recovery mail',
				description:
					'The same 202, body and time whatever the address. An active account gets a mail with a link and a 6-digit code, valid `RECOVERY_TTL_SECONDS` (default 1 h); a new request voids the older ones. At most one per address per `MAIL_RESEND_SECONDS`. The mail is sent in the background.',
			}),
		)
		.post(
			'/password-resets',
			async ({ body, client }) => {
				await email.resetPassword(body, body.password, client)
				return envelope(null, 'Password reset; log in with the new password')
			},
			{
				body: EmailModel.passwordReset,
				response: {
					200: Envelope(t.Null()),
					...problemResponses(400, 'invalid-code', 'code-expired', 413, 415, 422, 429, 'too-many-codes', 503),
				},
				detail: {
					operationId: 'resetPassword',
					summary: 'Set a new password with the token or code from a recovery mail',
					description:
						'The password policy applies (422). Marks the email verified, revokes every session of the account, voids its other recovery tokens, cancels a pending email change and clears the email’s login lockout. It does not sign the user in. After 10 wrong recovery codes for an address in any 24 hours (an unknown address alike), `{ email, code, password }` is 429 `too-many-codes`, right code or not, with `Retry-After` until the oldest of them is 24 hours old; the link’s token still works.',
					security: [],
				},
			},
		)

export interface EmailCodeSignInModuleDeps {
	codeSignIn: EmailCodeSignIn
	guard: ReturnType<typeof authGuard>
	jwt: Config['jwt']
}

/** Sign-in with a code by mail (API.md "Pages"); app.ts leaves it out under EMAIL_CODE_SIGN_IN=false, so both routes are unknown then. */
export const emailCodeSignInModule = ({ codeSignIn, guard, jwt }: EmailCodeSignInModuleDeps) =>
	new Elysia({ name: 'email-code-sign-in', prefix: '/auth', detail: { tags: ['Authentication'] } })
		.use(guard)
		.use(tokenResponses({ guard, jwt }))
		.use(requestContext)
		.onTransform(({ body }) => {
			const candidate = body as { email?: unknown } | undefined
			if (candidate && typeof candidate === 'object' && typeof candidate.email === 'string') candidate.email = normalizeEmail(candidate.email)
		})
		.post(
			'/sign-in-codes',
			async ({ body, client, set }) => {
				await codeSignIn.request(body.email, client)
				set.status = 202
				return envelope(null, ACCEPTED)
			},
			mailRequestOptions({
				operationId: 'requestSignInCode',
				summary: 'Ask for a sign-in code by mail',
				description:
					'The same 202, body and time whatever the address: unknown, deactivated or active. An active account gets a mail with a 6-digit code, valid 10 minutes; a new one voids the older. At most one per address per `MAIL_RESEND_SECONDS` (default 60): requests beyond that send nothing. The mail is sent in the background. Absent (404) under `EMAIL_CODE_SIGN_IN=false`.',
			}),
		)
		.post(
			'/email-code',
			async ({ body, client, tokenResponse }) => {
				const outcome = await codeSignIn.signIn(body.email, body.code, client)
				return 'mfaRequired' in outcome
					? envelope(outcome, 'Code accepted; a second factor is required')
					: envelope(await tokenResponse(outcome), 'Logged in')
			},
			{
				body: EmailModel.codeSignIn,
				response: {
					200: Envelope(t.Union([AuthModel.tokens, FactorModel.secondFactorOwed])),
					...problemResponses(400, 'invalid-code', 413, 415, 422, 'rate-limited', 'login-locked', 'too-many-codes', 503),
				},
				detail: {
					operationId: 'signInWithEmailCode',
					summary: 'Sign in with the code from a sign-in mail',
					description:
						'Answers as POST /auth/login does: the tokens (`amr: []`, `aal1`: RFC 8176 has no value for a mailed code), or `{ mfaRequired: true, mfaToken, methods }` for an account with an active second factor (finish with POST /auth/mfa). A code works once and for 10 minutes; the fifth wrong one voids it. A wrong, used, expired or voided code, an unknown address and a deactivated account all get the same 400 `invalid-code`. Wrong codes count toward the email’s login lockout as wrong passwords do (429 `login-locked`), and after 10 for an address in any 24 hours the route is 429 `too-many-codes`, right code or not, with `Retry-After`. The code proves the address: an unverified one is verified by it (as a verification would, removing what was added before). Absent (404) under `EMAIL_CODE_SIGN_IN=false`.',
					security: [],
				},
			},
		)
