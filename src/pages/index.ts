import { Elysia } from 'elysia'
import { AppError } from '../http/problem'
import { PROBLEM_KINDS, type PageProblemRenderer } from '../http/problem-catalogue'
import { chargeAuthBudget } from '../http/rate-limit'
import { requestContext, type ClientInfo } from '../http/request-context'
import type { AuthService } from '../modules/auth/service'
import type { MfaMethod } from '../modules/auth/sign-in'
import type { FactorsService } from '../modules/factors/service'
import type { BrowserSessions } from './browser-sessions'
import { formToken, formTokenMatches, isCrossSite } from './csrf'
import type { PageRenderer, PageView } from './render'
import { asksForLogin, clientIdOf, DEFAULT_RETURN_TO, localPath } from './return-to'
import type { PageSettings } from './settings'

export { BrowserSessions, SESSION_COOKIE, type BrowserSession } from './browser-sessions'
export { pageHeaders, PageRenderer, PageSetupError } from './render'
export type { PageSettings } from './settings'
export { consentPage, providerPages } from './provider'

/**
 * Every path the pages answer: HTML (no JSON negotiation), bodies are HTML forms, problems are pages
 * (app.ts hands this to the security checks, the rate limits and the problem handler). A page added on
 * this layer (/consent, /device) adds its path here.
 */
export const PAGE_PATHS = new Set(['/sign-in', '/sign-out', '/account', '/consent', '/pages/styles.css', '/pages/theme.css'])

export interface PagesDeps {
	renderer: PageRenderer
	settings: PageSettings
	auth: Pick<AuthService, 'login' | 'logout'>
	factors: Pick<FactorsService, 'completeMfa'>
	browserSessions: BrowserSessions
	/** How long a session lives (REFRESH_TOKEN_TTL): the session cookie's Max-Age. */
	sessionTtlSeconds: number
}

/** A posted form: the fields as strings (security.ts reads them), or nothing. */
type Form = Record<string, string | undefined>
const formOf = (body: unknown): Form => (typeof body === 'object' && body !== null ? (body as Form) : {})

/** Where this sign-in goes next, and whether it asks for a new one whatever the browser's session. */
function signInRequest(request: Request) {
	const query = new URL(request.url).searchParams
	const returnTo = localPath(query.get('return_to')) ?? DEFAULT_RETURN_TO
	const force = query.get('force') === '1' || (query.get('prompt') ?? '').split(' ').includes('login') || asksForLogin(returnTo)
	const loginHint = (query.get('login_hint') ?? '').slice(0, 320)
	return { query, returnTo, force, loginHint }
}

/** The form's action: /sign-in with what the sign-in came with (return_to, ui_locales), so a refusal can render it again. */
function signInAction(request: Request): string {
	const query = new URL(request.url).searchParams
	const kept = new URLSearchParams()
	const returnTo = localPath(query.get('return_to'))
	if (returnTo) kept.set('return_to', returnTo)
	const locales = query.get('ui_locales')
	if (locales) kept.set('ui_locales', locales.slice(0, 100))
	const search = kept.toString()
	return search ? `/sign-in?${search}` : '/sign-in'
}

const redirect = (location: string, cookies: string[] = []) => {
	const headers = new Headers({ location, 'cache-control': 'no-store' })
	for (const value of cookies) headers.append('set-cookie', value)
	return new Response(null, { status: 303, headers })
}

/** The problems of a sign-in that its form shows again (the others end on the problem page). */
const FORM_PROBLEMS = new Set(['invalid-credentials', 'login-locked', 'rate-limited', 'email-not-verified', 'invalid-mfa-token', 'too-many-codes'])

/** The pages: sign-in (password, then the second factor owed), the account's landing, sign-out; and their stylesheets. */
export function pages({ renderer, settings, auth, factors, browserSessions, sessionTtlSeconds }: PagesDeps) {
	/** A problem's sentence in the request's language. */
	const problemText = (request: Request, kind: string, extra: { retryAfterSeconds?: number; requestId?: string } = {}) => {
		const language = renderer.languageOf(request)
		const wait = renderer.wait(language, extra.retryAfterSeconds ?? 60)
		const key = `problem.${kind}`
		const text = renderer.text(language, key, { wait, requestId: extra.requestId ?? '' })
		return text === key ? renderer.text(language, 'problem.default') : text
	}

	/** The sign-in form, with what was typed (never the password) and a problem if there was one. */
	const signInForm = (request: Request, { email = '', error, status = 200 }: { email?: string; error?: string; status?: number } = {}) => {
		const csrf = formToken(request)
		const view: PageView = { action: signInAction(request), csrf: csrf.token, email, error, focusEmail: !error && !email, focusPassword: !error && !!email }
		return renderer.page(request, 'sign-in', view, { title: 'signIn.title', status, cookies: csrf.setCookie ? [csrf.setCookie] : [] })
	}

	/** The second step: the code form, carrying the half-done sign-in's mfaToken. */
	const secondFactorForm = (request: Request, { email, mfaToken, methods, error, status = 200 }: { email: string; mfaToken: string; methods?: MfaMethod[]; error?: string; status?: number }) => {
		const language = renderer.languageOf(request)
		const csrf = formToken(request)
		const intro =
			!methods || methods.includes('totp')
				? renderer.text(language, 'secondFactor.intro')
				: methods.includes('recovery-code')
					? renderer.text(language, 'secondFactor.introRecoveryOnly')
					: renderer.text(language, 'secondFactor.passkeyOnly')
		const view: PageView = {
			action: signInAction(request),
			restart: `${signInAction(request)}${signInAction(request).includes('?') ? '&' : '?'}force=1`,
			csrf: csrf.token,
			mfaToken,
			email,
			signingInAs: email ? renderer.text(language, 'secondFactor.signingInAs', { email }) : undefined,
			intro,
			error,
			focusField: !error,
		}
		return renderer.page(request, 'second-factor', view, { title: 'secondFactor.title', status, cookies: csrf.setCookie ? [csrf.setCookie] : [] })
	}

	/** The problem page: a sentence, and a way back to sign-in. */
	const problemPage = (request: Request, status: number, error: string) => {
		const back = new URL(request.url).pathname === '/sign-in' ? signInAction(request) : '/sign-in'
		return renderer.page(request, 'problem', { error, back }, { title: 'problem.title', status })
	}

	/** What an AppError of a sign-in step means on the page: its status, and its sentence. */
	const shown = (request: Request, error: AppError, requestId: string | null) => {
		const retryAfter = Number(error.options.headers?.['retry-after'])
		const status = PROBLEM_KINDS[error.kind].status
		return { status, text: problemText(request, error.kind, { retryAfterSeconds: Number.isFinite(retryAfter) ? retryAfter : undefined, requestId: requestId ?? '' }), retryAfter: Number.isFinite(retryAfter) ? String(retryAfter) : undefined }
	}

	/**
	 * Refusals every POST shares: another site (403, a page saying so), or a form without the browser's token
	 * (403: the form again, with a fresh token, as it expired or came from elsewhere).
	 */
	const refusal = (request: Request, form: Form): 'cross-site' | 'form-expired' | undefined => {
		if (isCrossSite(request, settings.publicUrl)) return 'cross-site'
		if (!formTokenMatches(request, form.csrf)) return 'form-expired'
		return undefined
	}
	const crossSitePage = (request: Request) => problemPage(request, 403, problemText(request, 'cross-site'))

	/** After a finished sign-in: the browser's former session (if any) ends, the new one's cookie is set, and on to `returnTo`. */
	const signedIn = async (request: Request, client: ClientInfo, token: string, returnTo: string) => {
		await browserSessions.end(request, client)
		return redirect(returnTo, [browserSessions.cookie(token, sessionTtlSeconds)])
	}

	const secondStep = async (request: Request, form: Form, client: ClientInfo, returnTo: string) => {
		const email = (form.email ?? '').slice(0, 320)
		const mfaToken = (form.mfaToken ?? '').slice(0, 200)
		const typed = (form.code ?? '').trim()
		if (!typed) return secondFactorForm(request, { email, mfaToken, error: problemText(request, 'missing-code'), status: 422 })
		const digits = typed.replace(/\s/g, '')
		const method: MfaMethod = /^\d{6}$/.test(digits) ? 'totp' : 'recovery-code'
		const { token, binding } = browserSessions.newBinding(clientIdOf(returnTo))
		try {
			await factors.completeMfa({ mfaToken, method, code: method === 'totp' ? digits : typed.slice(0, 64) }, client, binding)
		} catch (error) {
			if (!(error instanceof AppError)) throw error
			const { status, text, retryAfter } = shown(request, error, client.requestId)
			const page =
				error.kind === 'invalid-mfa-token' ? signInForm(request, { email, error: text, status }) : secondFactorForm(request, { email, mfaToken, error: text, status })
			if (retryAfter) page.headers.set('retry-after', retryAfter)
			return page
		}
		return signedIn(request, client, token, returnTo)
	}

	return (
		new Elysia({ name: 'pages', normalize: false, detail: { hide: true } })
			.use(requestContext)
			.get('/pages/styles.css', () => new Response(renderer.styles, { headers: { 'content-type': 'text/css; charset=utf-8', 'cache-control': 'public, max-age=300' } }))
			.get('/pages/theme.css', () => new Response(renderer.theme, { headers: { 'content-type': 'text/css; charset=utf-8', 'cache-control': 'public, max-age=300' } }))
			.get('/sign-in', async ({ request }) => {
				const { returnTo, force, loginHint } = signInRequest(request)
				if (!force && (await browserSessions.current(request))) return redirect(returnTo)
				return signInForm(request, { email: loginHint })
			})
			.post(
				'/sign-in',
				async ({ request, body, client }) => {
					const form = formOf(body)
					const { returnTo } = signInRequest(request)
					const email = (form.email ?? '').trim().slice(0, 320)
					const refused = refusal(request, form)
					if (refused === 'cross-site') return crossSitePage(request)
					if (refused) {
						const error = problemText(request, refused)
						return form.mfaToken
							? secondFactorForm(request, { email, mfaToken: form.mfaToken.slice(0, 200), error, status: 403 })
							: signInForm(request, { email, error, status: 403 })
					}
					if (form.mfaToken !== undefined) return secondStep(request, form, client, returnTo)
					const password = form.password ?? ''
					if (!email || !password) return signInForm(request, { email, error: problemText(request, 'missing-credentials'), status: 422 })
					const { token, binding } = browserSessions.newBinding(clientIdOf(returnTo))
					let result: Awaited<ReturnType<AuthService['login']>>
					try {
						result = await auth.login(email, password.slice(0, 1024), client, binding)
					} catch (error) {
						if (!(error instanceof AppError) || !FORM_PROBLEMS.has(error.kind)) throw error
						const { status, text, retryAfter } = shown(request, error, client.requestId)
						const page = signInForm(request, { email, error: text, status })
						if (retryAfter) page.headers.set('retry-after', retryAfter)
						return page
					}
					if ('mfaRequired' in result) return secondFactorForm(request, { email, mfaToken: result.mfaToken, methods: result.methods })
					return signedIn(request, client, token, returnTo)
				},
				// Checks a password (or a code): the stricter /auth budget per client address, as POST /api/auth/login.
				{ transform: ({ request }) => chargeAuthBudget(request) },
			)
			.get('/account', async ({ request }) => {
				const session = await browserSessions.current(request)
				if (!session) return redirect(`/sign-in?${new URLSearchParams({ return_to: '/account' })}`)
				const language = renderer.languageOf(request)
				const csrf = formToken(request)
				const view: PageView = { csrf: csrf.token, signedInAs: renderer.text(language, 'account.signedInAs', { email: session.user.email }) }
				return renderer.page(request, 'account', view, { title: 'account.title', cookies: csrf.setCookie ? [csrf.setCookie] : [] })
			})
			.get('/sign-out', async ({ request }) => signOutPage(request, await browserSessions.current(request)))
			.post('/sign-out', async ({ request, body, client }) => {
				const refused = refusal(request, formOf(body))
				if (refused === 'cross-site') return crossSitePage(request)
				if (refused) return signOutPage(request, await browserSessions.current(request), problemText(request, refused), 403)
				return redirect('/sign-out', [await browserSessions.end(request, client)])
			})
	)

	function signOutPage(request: Request, session: { user: { email: string } } | undefined, error?: string, status = 200) {
		const language = renderer.languageOf(request)
		const csrf = formToken(request)
		const view: PageView = session
			? {
					signedIn: true,
					csrf: csrf.token,
					confirmHeading: renderer.text(language, 'signOut.confirmHeading'),
					confirmBody: renderer.text(language, 'signOut.confirmBody', { email: session.user.email }),
					error,
				}
			: { signedIn: false, body: renderer.text(language, 'signOut.body'), error }
		return renderer.page(request, 'sign-out', view, { title: 'signOut.title', status, cookies: csrf.setCookie ? [csrf.setCookie] : [] })
	}
}

/**
 * What a problem met at one of the pages shows (a refused budget, a form too large, a route's 404 or
 * 405, an unexpected error): at /sign-in the form again with the sentence, elsewhere the problem page.
 * Undefined for any other path, which gets problem+json.
 */
export function pageProblems(renderer: PageRenderer): PageProblemRenderer {
	return (request, { kind, status, retryAfterSeconds, requestId }) => {
		const path = new URL(request.url).pathname
		if (!PAGE_PATHS.has(path)) return undefined
		const language = renderer.languageOf(request)
		const key = `problem.${kind}`
		const found = renderer.text(language, key, { wait: renderer.wait(language, retryAfterSeconds ?? 60), requestId })
		const error = found === key ? renderer.text(language, 'problem.default') : found
		if (path === '/sign-in' && FORM_PROBLEMS.has(kind)) {
			const csrf = formToken(request)
			const view: PageView = { action: signInAction(request), csrf: csrf.token, email: '', error }
			const page = renderer.page(request, 'sign-in', view, { title: 'signIn.title', status, cookies: csrf.setCookie ? [csrf.setCookie] : [] })
			if (retryAfterSeconds) page.headers.set('retry-after', String(retryAfterSeconds))
			return page
		}
		const page = renderer.page(request, 'problem', { error, back: path === '/sign-in' ? signInAction(request) : '/sign-in' }, { title: 'problem.title', status })
		if (retryAfterSeconds) page.headers.set('retry-after', String(retryAfterSeconds))
		return page
	}
}
