import { Elysia } from 'elysia'
import { AppError } from '../http/problem'
import { chargeAuthBudget } from '../http/rate-limit'
import { requestContext } from '../http/request-context'
import type { EmailService } from '../modules/email/service'
import { isEmailAddress, normalizeEmail } from '../modules/users/model'
import { PROOF_PROBLEMS, proofOf } from './email-verification'
import { formOf, signInAction, type PageKit } from './kit'
import type { PageView } from './render'

export const RECOVERY_PATHS = { request: '/recovery', reset: '/password-reset' } as const

export interface RecoveryDeps {
	/** POST /auth/recovery-requests and /auth/password-resets: the mail, the proof and the password policy are the service's. */
	email: Pick<EmailService, 'request' | 'resetPassword' | 'passwordProblem'>
	passwordMinLength: number
}

/** /recovery (a recovery mail for an address) and /password-reset (a new password, by the link's token or the mail's code). */
export function recoveryPages({ email: mail, passwordMinLength }: RecoveryDeps, kit: PageKit) {
	const { renderer, problemText, formPage, messagePage, shown, refusal, crossSitePage } = kit

	const recoveryForm = (request: Request, { email = '', error, status = 200 }: { email?: string; error?: string; status?: number } = {}) =>
		formPage(request, 'recovery', { action: signInAction(request, undefined, RECOVERY_PATHS.request), signIn: signInAction(request), email, error }, { title: 'recovery.title', status })

	const resetForm = (
		request: Request,
		{
			email = '',
			code = '',
			sent = false,
			error,
			proofInvalid = false,
			passwordInvalid = false,
			status = 200,
		}: { email?: string; code?: string; sent?: boolean; error?: string; proofInvalid?: boolean; passwordInvalid?: boolean; status?: number } = {},
	) => {
		const language = renderer.languageOf(request)
		const view: PageView = {
			action: signInAction(request, undefined, RECOVERY_PATHS.reset),
			recovery: signInAction(request, undefined, RECOVERY_PATHS.request),
			sent: sent ? renderer.text(language, 'passwordReset.sent', { email }) : undefined,
			email,
			code,
			error,
			proofInvalid,
			passwordInvalid,
			focusEmail: !error && !email,
			focusCode: !error && !!email,
			passwordHint: renderer.text(language, 'passwordReset.passwordHint', { min: passwordMinLength }),
		}
		return formPage(request, 'password-reset', view, { title: 'passwordReset.title', status })
	}

	const passwordSentence = (request: Request, code: string) => problemText(request, `password-${code}`, { values: { min: passwordMinLength } })

	return new Elysia({ name: 'pages-recovery', normalize: false, detail: { hide: true } })
		.use(requestContext)
		.get(RECOVERY_PATHS.request, ({ request }) => recoveryForm(request))
		.post(
			RECOVERY_PATHS.request,
			async ({ request, body, client }) => {
				const form = formOf(body)
				const email = normalizeEmail((form.email ?? '').slice(0, 320))
				const refused = refusal(request, form)
				if (refused === 'cross-site') return crossSitePage(request)
				if (refused) return recoveryForm(request, { email, error: problemText(request, refused), status: 403 })
				if (!isEmailAddress(email)) return recoveryForm(request, { email, error: problemText(request, 'invalid-email'), status: 422 })
				try {
					// One answer whatever the address; MAIL_RESEND_SECONDS keeps a second request from sending again.
					await mail.request('recovery', email, client)
				} catch (error) {
					if (!(error instanceof AppError) || error.kind !== 'mail-unavailable') throw error
					return recoveryForm(request, { email, error: problemText(request, 'mail-unavailable-request'), status: 503 })
				}
				return resetForm(request, { email, sent: true })
			},
			// Sends a mail: the /auth budget, as POST /api/auth/recovery-requests.
			{ transform: ({ request }) => chargeAuthBudget(request) },
		)
		.get(RECOVERY_PATHS.reset, ({ request }) => resetForm(request))
		.post(
			RECOVERY_PATHS.reset,
			async ({ request, body, client }) => {
				const form = formOf(body)
				const email = normalizeEmail((form.email ?? '').slice(0, 320))
				const password = (form.password ?? '').slice(0, 1024)
				const refused = refusal(request, form)
				if (refused === 'cross-site') return crossSitePage(request)
				if (refused) return resetForm(request, { email, error: problemText(request, refused), status: 403 })
				const proof = proofOf(form, email)
				if (!proof) {
					// Every problem at once, as the API reports them: the missing proof, and the password's if it has one.
					const weak = mail.passwordProblem(password)
					const error = [problemText(request, 'missing-mail-code'), ...(weak ? [passwordSentence(request, weak.code)] : [])].join(' ')
					return resetForm(request, { email, error, proofInvalid: true, passwordInvalid: !!weak, status: 422 })
				}
				try {
					await mail.resetPassword(proof, password, client)
				} catch (error) {
					if (!(error instanceof AppError)) throw error
					if (error.kind === 'validation-error') {
						const sentences = (error.options.errors ?? []).map(({ code }) => passwordSentence(request, code)).join(' ')
						// The proof was not spent: the code typed stays, only the password is asked again.
						return resetForm(request, { email, code: 'code' in proof ? proof.code : '', error: sentences, passwordInvalid: true, status: 422 })
					}
					const sentence = PROOF_PROBLEMS[error.kind]
					if (!sentence) throw error
					const { status, text, retryAfter } = shown(request, error, client.requestId)
					const page = resetForm(request, { email, error: error.kind === 'too-many-codes' ? text : problemText(request, sentence), proofInvalid: true, status })
					if (retryAfter) page.headers.set('retry-after', retryAfter)
					return page
				}
				const language = renderer.languageOf(request)
				const signIn = signInAction(request)
				const known = 'email' in proof ? `${signIn.includes('?') ? '&' : '?'}${new URLSearchParams({ login_hint: proof.email })}` : ''
				return messagePage(request, {
					title: 'passwordReset.title',
					heading: renderer.text(language, 'passwordReset.doneHeading'),
					body: renderer.text(language, 'passwordReset.doneBody'),
					next: { href: `${signIn}${known}`, label: renderer.text(language, 'passwordReset.signIn') },
				})
			},
			// Checks a token or a code and hashes a password: the /auth budget, as POST /api/auth/password-resets.
			{ transform: ({ request }) => chargeAuthBudget(request) },
		)
}
