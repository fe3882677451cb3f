import { Value } from '@sinclair/typebox/value'
import { Elysia } from 'elysia'
import { AppError } from '../http/problem'
import { chargeAuthBudget } from '../http/rate-limit'
import { requestContext } from '../http/request-context'
import type { EmailService } from '../modules/email/service'
import { normalizeEmail, UserModel } from '../modules/users/model'
import type { UsersService } from '../modules/users/service'
import { emailVerificationForm } from './email-verification'
import { formOf, signInAction, type PageKit } from './kit'
import type { PageView } from './render'

export const SIGN_UP_PATHS = { page: '/sign-up' } as const

export interface SignUpDeps {
	/** POST /users's service: sign-up's rules (open or not, the password policy, a taken address) are its own. */
	users: Pick<UsersService, 'create' | 'passwordProblem'>
	/** Whether a verification mail follows a sign-up (EMAIL_VERIFICATION), and whether sign-in waits for it. */
	email: Pick<EmailService, 'verification'>
	/** SIGNUP_ENABLED: whether the page is offered at all (the service refuses a sign-up when it is closed). */
	signupEnabled: boolean
	passwordMinLength: number
}

/** The problems of a sign-up its form shows again. */
const SIGN_UP_PROBLEMS = new Set(['validation-error', 'email-taken'])

type Field = 'email' | 'name' | 'password'

/** /sign-up: name, address and password, as POST /users takes them; then what to do next. */
export function signUpPages({ users, email: mail, signupEnabled, passwordMinLength }: SignUpDeps, kit: PageKit) {
	const { renderer, problemText, formPage, problemPage, messagePage, shown, refusal, crossSitePage } = kit

	const signUpForm = (
		request: Request,
		{ email = '', name = '', error, invalid = [], status = 200 }: { email?: string; name?: string; error?: string; invalid?: Field[]; status?: number } = {},
	) => {
		const language = renderer.languageOf(request)
		const view: PageView = {
			action: signInAction(request, undefined, SIGN_UP_PATHS.page),
			signIn: signInAction(request),
			email,
			name,
			error,
			focusName: !error,
			emailInvalid: invalid.includes('email'),
			nameInvalid: invalid.includes('name'),
			passwordInvalid: invalid.includes('password'),
			passwordHint: renderer.text(language, 'signUp.passwordHint', { min: passwordMinLength }),
		}
		return formPage(request, 'sign-up', view, { title: 'signUp.title', status })
	}

	/** A field problem (the schema's or the password policy's) as a sentence of the catalogue. */
	const fieldProblem = (request: Request, field: Field, code: string) =>
		field === 'password' ? problemText(request, `password-${code}`, { values: { min: passwordMinLength } }) : problemText(request, field === 'email' ? 'invalid-email' : 'name-too-long')

	const closed = (request: Request, status: number) => problemPage(request, status, problemText(request, 'signup-closed'))

	return new Elysia({ name: 'pages-sign-up', normalize: false, detail: { hide: true } })
		.use(requestContext)
		.get(SIGN_UP_PATHS.page, ({ request }) => (signupEnabled ? signUpForm(request) : closed(request, 404)))
		.post(
			SIGN_UP_PATHS.page,
			async ({ request, body, client }) => {
				const form = formOf(body)
				const email = normalizeEmail((form.email ?? '').slice(0, 320))
				const name = (form.name ?? '').trim().slice(0, 1000)
				const password = (form.password ?? '').slice(0, 1024)
				const refused = refusal(request, form)
				if (refused === 'cross-site') return crossSitePage(request)
				if (refused) return signUpForm(request, { email, name, error: problemText(request, refused), status: 403 })
				// POST /users's own schema, then the service's policy: every field's problem at once, as the API reports them.
				const input = { email, password, ...(name ? { name } : {}) }
				const problems = new Map<Field, string>()
				for (const error of Value.Errors(UserModel.create, input)) {
					const field = error.path.slice(1) as Field
					if ((field === 'email' || field === 'name') && !problems.has(field)) problems.set(field, fieldProblem(request, field, ''))
				}
				const weak = users.passwordProblem(password)
				if (weak) problems.set('password', fieldProblem(request, 'password', weak.code))
				if (problems.size > 0) {
					const fields = (['email', 'name', 'password'] as const).filter((field) => problems.has(field))
					return signUpForm(request, { email, name, error: fields.map((field) => problems.get(field)).join(' '), invalid: fields, status: 422 })
				}
				try {
					await users.create(input, null, client)
				} catch (error) {
					if (!(error instanceof AppError)) throw error
					if (error.kind === 'forbidden') return closed(request, 403)
					if (!SIGN_UP_PROBLEMS.has(error.kind)) throw error
					if (error.kind === 'email-taken') return signUpForm(request, { email, name, error: shown(request, error, client.requestId).text, invalid: ['email'], status: 409 })
					// The service's own field problems (the checks above are its schema and policy: met only should they change).
					const fields = (error.options.errors ?? []).map(({ pointer, code }) => ({ field: (pointer.replace(/^#?\//, '') || 'email') as Field, code }))
					return signUpForm(request, { email, name, error: fields.map(({ field, code }) => fieldProblem(request, field, code)).join(' '), invalid: fields.map(({ field }) => field), status: 422 })
				}
				// What next: confirm the address (the mail's code here, or its link), or sign in at once.
				if (mail.verification !== 'off') return emailVerificationForm(kit, request, { email, sent: mail.verification === 'required' ? 'required' : 'optional' })
				const language = renderer.languageOf(request)
				const signIn = signInAction(request)
				return messagePage(request, {
					title: 'signUp.title',
					heading: renderer.text(language, 'signUp.readyHeading'),
					body: renderer.text(language, 'signUp.readyBody', { email }),
					next: { href: `${signIn}${signIn.includes('?') ? '&' : '?'}${new URLSearchParams({ login_hint: email })}`, label: renderer.text(language, 'signUp.signInNow') },
				})
			},
			// Computes a password hash: the /auth budget, as POST /users.
			{ transform: ({ request }) => chargeAuthBudget(request) },
		)
}
