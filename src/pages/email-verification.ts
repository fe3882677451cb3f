import { Elysia } from 'elysia'
import { AppError } from '../http/problem'
import { chargeAuthBudget } from '../http/rate-limit'
import { requestContext, type ClientInfo } from '../http/request-context'
import type { EmailService, Proof } from '../modules/email/service'
import { isEmailAddress, normalizeEmail } from '../modules/users/model'
import { formOf, signInAction, type Form, type PageKit } from './kit'
import type { PageView } from './render'

export const EMAIL_VERIFICATION_PATHS = { page: '/email-verification' } as const

export interface EmailVerificationDeps {
	/** POST /auth/email-verifications and /auth/verification-requests: the proof's rules (single use, 5 tries, expiry) are the service's. */
	email: Pick<EmailService, 'verifyEmail' | 'request'>
}

/** What the page says was sent: after a sign-up (sign-in waits for the address, or not), or a new mail asked for here. */
type Sent = 'required' | 'optional' | 'resent'

/**
 * The page of a mail's proof, as a form: the link's token (put in by /pages/link-token.js), or the address and
 * the mail's code. Also what a sign-up ends on when a verification mail follows it.
 */
export function emailVerificationForm(
	{ renderer, formPage }: PageKit,
	request: Request,
	{ email = '', sent, error, proofInvalid = false, status = 200 }: { email?: string; sent?: Sent; error?: string; proofInvalid?: boolean; status?: number },
) {
	const language = renderer.languageOf(request)
	const sentKey = { required: 'emailVerification.sent', optional: 'emailVerification.sentSignInAllowed', resent: 'emailVerification.resent' } as const
	const view: PageView = {
		action: signInAction(request, undefined, EMAIL_VERIFICATION_PATHS.page),
		heading: renderer.text(language, sent ? 'emailVerification.sentHeading' : 'emailVerification.heading'),
		sent: sent ? renderer.text(language, sentKey[sent], { email }) : undefined,
		signIn: sent === 'optional' ? signInAction(request) : undefined,
		email,
		error,
		proofInvalid,
		focusEmail: !error && !email,
		focusCode: !error && !!email,
	}
	return formPage(request, 'email-verification', view, { title: 'emailVerification.title', status })
}

/** The proof a form carries: the link's token, or the address and its 6-digit code; undefined when it has neither. */
export function proofOf(form: Form, email: string): Proof | undefined {
	const token = (form.token ?? '').trim().slice(0, 512)
	if (token) return { token }
	const code = (form.code ?? '').replace(/\s/g, '')
	return isEmailAddress(email) && /^\d{6}$/.test(code) ? { email, code } : undefined
}

/** The problems of a mail's proof its form shows again, as the page's sentences. */
export const PROOF_PROBLEMS: Record<string, string> = {
	'invalid-code': 'mail-code-refused',
	'code-expired': 'code-expired',
	'too-many-codes': 'too-many-codes',
	'email-taken': 'email-change-taken',
}

/** /email-verification: confirms an address, by the link's token or the mail's code; or sends a new mail. */
export function emailVerificationPages({ email: mail }: EmailVerificationDeps, kit: PageKit) {
	const { renderer, problemText, messagePage, shown, refusal, crossSitePage } = kit
	const form = (request: Request, options: Parameters<typeof emailVerificationForm>[2]) => emailVerificationForm(kit, request, options)

	/** "Send me a new email": the same answer whatever the address (MAIL_RESEND_SECONDS keeps a second one from going). */
	const resend = async (request: Request, email: string, client: ClientInfo) => {
		if (!isEmailAddress(email)) return form(request, { email, error: problemText(request, 'invalid-email'), proofInvalid: true, status: 422 })
		try {
			await mail.request('verification', email, client)
		} catch (error) {
			if (!(error instanceof AppError) || error.kind !== 'mail-unavailable') throw error
			return form(request, { email, error: problemText(request, 'mail-unavailable-request'), status: 503 })
		}
		return form(request, { email, sent: 'resent' })
	}

	return new Elysia({ name: 'pages-email-verification', normalize: false, detail: { hide: true } })
		.use(requestContext)
		.get(EMAIL_VERIFICATION_PATHS.page, ({ request }) => form(request, {}))
		.post(
			EMAIL_VERIFICATION_PATHS.page,
			async ({ request, body, client }) => {
				const posted = formOf(body)
				const email = normalizeEmail((posted.email ?? '').slice(0, 320))
				const refused = refusal(request, posted)
				if (refused === 'cross-site') return crossSitePage(request)
				if (refused) return form(request, { email, error: problemText(request, refused), status: 403 })
				if (posted.resend !== undefined) return resend(request, email, client)
				const proof = proofOf(posted, email)
				if (!proof) return form(request, { email, error: problemText(request, 'missing-mail-code'), proofInvalid: true, status: 422 })
				let confirmed: Awaited<ReturnType<EmailService['verifyEmail']>>
				try {
					confirmed = await mail.verifyEmail(proof, client)
				} catch (error) {
					const sentence = error instanceof AppError ? PROOF_PROBLEMS[error.kind] : undefined
					if (!(error instanceof AppError) || !sentence) throw error
					const { status, text, retryAfter } = shown(request, error, client.requestId)
					// too-many-codes says how long to wait (its Retry-After); the others have sentences of their own here.
					const page = form(request, { email, error: error.kind === 'too-many-codes' ? text : problemText(request, sentence), proofInvalid: true, status })
					if (retryAfter) page.headers.set('retry-after', retryAfter)
					return page
				}
				// A first proof of the address, or a change's, ends every session (API.md): the way on is sign-in.
				const language = renderer.languageOf(request)
				const signIn = signInAction(request)
				const next = { href: `${signIn}${signIn.includes('?') ? '&' : '?'}${new URLSearchParams({ login_hint: confirmed.email })}`, label: renderer.text(language, 'emailVerification.signIn') }
				return messagePage(request, {
					title: 'emailVerification.title',
					heading: renderer.text(language, 'emailVerification.doneHeading'),
					body: renderer.text(language, 'emailVerification.doneBody', { email: confirmed.email }),
					next,
				})
			},
			// Checks a token or a code, or sends a mail: the /auth budget, as POST /api/auth/email-verifications.
			{ transform: ({ request }) => chargeAuthBudget(request) },
		)
}
