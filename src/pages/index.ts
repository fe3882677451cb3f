import { Value } from '@sinclair/typebox/value'
import { Elysia } from 'elysia'
import { digestOf, newOpaqueToken } from '../crypto/opaque-tokens'
import { AppError } from '../http/problem'
import { PROBLEM_KINDS, type PageProblemRenderer } from '../http/problem-catalogue'
import { chargeAuthBudget } from '../http/rate-limit'
import { requestContext, type ClientInfo } from '../http/request-context'
import type { AuthService } from '../modules/auth/service'
import type { MfaMethod } from '../modules/auth/sign-in'
import type { EmailCodeSignIn } from '../modules/email/code-sign-in'
import { FactorModel } from '../modules/factors/model'
import type { FactorsService } from '../modules/factors/service'
import { PAGES_PROVIDER_RETURN_PATH, type ProviderSignIn } from '../modules/oidc/service'
import { isEmailAddress } from '../modules/users/model'
import type { BrowserSessions } from './browser-sessions'
import { cookie, readCookie } from './cookies'
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
export const PAGE_PATHS = new Set([
	'/sign-in',
	'/sign-in/email-code',
	'/sign-in/passkey',
	'/sign-in/provider',
	PAGES_PROVIDER_RETURN_PATH,
	'/sign-out',
	'/account',
	'/consent',
	'/pages/styles.css',
	'/pages/theme.css',
	'/pages/sign-in.js',
])

/**
 * A provider sign-in started at /sign-in: the PKCE verifier the page keeps for the code it gets back (as a
 * frontend keeps one), and where the sign-in goes next. HttpOnly, SameSite=Lax: the provider's redirect back
 * is a top-level navigation, which brings it.
 */
const PROVIDER_FLOW_COOKIE = '__Host-latchkey-provider-flow'
/** As long as a flow may sit at the provider (oidc/service.ts). */
const PROVIDER_FLOW_SECONDS = 600

export interface PagesDeps {
	renderer: PageRenderer
	settings: PageSettings
	auth: Pick<AuthService, 'login' | 'logout'>
	factors: Pick<FactorsService, 'completeMfa' | 'signInWithPasskey'>
	/** "Email me a code" (POST /auth/sign-in-codes and /auth/email-code); none under EMAIL_CODE_SIGN_IN=false: no button. */
	codeSignIn?: Pick<EmailCodeSignIn, 'request' | 'signIn'>
	/** The identity providers (a button each), their flow's return to the pages, and the code it brings. */
	providers: Pick<ProviderSignIn, 'list' | 'exchange' | 'pagesReturnUrl'>
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

/**
 * A form's action: `path` (/sign-in by default) with what the sign-in came with (return_to, ui_locales), so a
 * refusal can render it again; `returnTo` where the request's URL does not carry it (a provider's return).
 */
function signInAction(request: Request, returnTo?: string, path = '/sign-in'): string {
	const query = new URL(request.url).searchParams
	const kept = new URLSearchParams()
	const next = returnTo ?? localPath(query.get('return_to'))
	if (next) kept.set('return_to', next)
	const locales = query.get('ui_locales')
	if (locales) kept.set('ui_locales', locales.slice(0, 100))
	const search = kept.toString()
	return search ? `${path}?${search}` : path
}

const redirect = (location: string, cookies: string[] = []) => {
	const headers = new Headers({ location, 'cache-control': 'no-store' })
	for (const value of cookies) headers.append('set-cookie', value)
	return new Response(null, { status: 303, headers })
}

/** The problems of a sign-in that its form shows again (the others end on the problem page). */
const FORM_PROBLEMS = new Set(['invalid-credentials', 'login-locked', 'rate-limited', 'email-not-verified', 'invalid-mfa-token', 'too-many-codes'])
/** The problems of a code by mail that its page shows again. */
const EMAIL_CODE_PROBLEMS = new Set(['invalid-code', 'login-locked', 'rate-limited', 'email-not-verified', 'too-many-codes', 'mail-unavailable'])

/** A passkey's answer as the page's script posts it (AuthenticationResponseJSON), or undefined when it is not one. */
function passkeyAnswer(raw: string | undefined) {
	try {
		const parsed: unknown = JSON.parse(raw ?? '')
		return Value.Check(FactorModel.authenticationResponse, parsed) ? parsed : undefined
	} catch {
		return undefined
	}
}

/** The page's provider flow, from its cookie: the verifier and where to go next (undefined when missing or malformed). */
function providerFlowOf(request: Request): { verifier: string; returnTo: string } | undefined {
	const [verifier, encoded] = (readCookie(request, PROVIDER_FLOW_COOKIE) ?? '').split('.')
	if (!verifier || !/^[A-Za-z0-9_-]{43}$/.test(verifier)) return undefined
	return { verifier, returnTo: localPath(Buffer.from(encoded ?? '', 'base64url').toString()) ?? DEFAULT_RETURN_TO }
}

/** The pages: sign-in (password, then the second factor owed), the account's landing, sign-out; and their stylesheets. */
export function pages({ renderer, settings, auth, factors, codeSignIn, providers, browserSessions, sessionTtlSeconds }: PagesDeps) {
	/** A problem's sentence in the request's language. */
	const problemText = (request: Request, kind: string, extra: { retryAfterSeconds?: number; requestId?: string } = {}) => {
		const language = renderer.languageOf(request)
		const wait = renderer.wait(language, extra.retryAfterSeconds ?? 60)
		const key = `problem.${kind}`
		const text = renderer.text(language, key, { wait, requestId: extra.requestId ?? '' })
		return text === key ? renderer.text(language, 'problem.default') : text
	}

	/**
	 * The sign-in form, with what was typed (never the password) and a problem if there was one; beside it the
	 * other ways in: a code by mail (when on), a passkey (shown by its script), the identity providers.
	 * `aside`: the problem is not the fields' (a provider's or a passkey's), which are then not marked invalid.
	 */
	const signInForm = (
		request: Request,
		{ email = '', error, status = 200, returnTo, aside = false }: { email?: string; error?: string; status?: number; returnTo?: string; aside?: boolean } = {},
	) => {
		const csrf = formToken(request)
		const listed = providers.list()
		const view: PageView = {
			action: signInAction(request, returnTo),
			emailCodeAction: codeSignIn ? signInAction(request, returnTo, '/sign-in/email-code') : undefined,
			passkeyAction: signInAction(request, returnTo, '/sign-in/passkey'),
			providerAction: listed.length > 0 ? signInAction(request, returnTo, '/sign-in/provider') : undefined,
			providers: listed.map(({ id, label }) => ({ id, label: renderer.text(renderer.languageOf(request), 'signIn.withProvider', { provider: label }) })),
			csrf: csrf.token,
			email,
			error,
			fieldsInvalid: !!error && !aside,
			focusEmail: !error && !email,
			focusPassword: !error && !!email,
		}
		return renderer.page(request, 'sign-in', view, { title: 'signIn.title', status, cookies: csrf.setCookie ? [csrf.setCookie] : [] })
	}

	/** The page of a code by mail: where it went, the code's field, another code, and the way back. */
	const emailCodeForm = (request: Request, { email, error, status = 200 }: { email: string; error?: string; status?: number }) => {
		const language = renderer.languageOf(request)
		const csrf = formToken(request)
		const view: PageView = {
			action: signInAction(request, undefined, '/sign-in/email-code'),
			back: signInAction(request),
			csrf: csrf.token,
			email,
			sent: renderer.text(language, 'emailCode.sent', { email }),
			error,
			focusField: !error,
		}
		return renderer.page(request, 'email-code', view, { title: 'emailCode.title', status, cookies: csrf.setCookie ? [csrf.setCookie] : [] })
	}

	/** The second step: the code form, carrying the half-done sign-in's mfaToken. */
	const secondFactorForm = (
		request: Request,
		{
			email,
			mfaToken,
			methods,
			passkey = methods?.includes('webauthn') ?? false,
			error,
			status = 200,
			returnTo,
		}: { email: string; mfaToken: string; methods?: MfaMethod[]; passkey?: boolean; error?: string; status?: number; returnTo?: string },
	) => {
		const language = renderer.languageOf(request)
		const csrf = formToken(request)
		const intro =
			!methods || methods.includes('totp')
				? renderer.text(language, 'secondFactor.intro')
				: methods.includes('webauthn')
					? renderer.text(language, 'secondFactor.passkeyOnly')
					: renderer.text(language, 'secondFactor.introRecoveryOnly')
		const view: PageView = {
			action: signInAction(request, returnTo),
			restart: `${signInAction(request, returnTo)}${signInAction(request, returnTo).includes('?') ? '&' : '?'}force=1`,
			csrf: csrf.token,
			mfaToken,
			email,
			signingInAs: email ? renderer.text(language, 'secondFactor.signingInAs', { email }) : undefined,
			intro,
			// The account has a passkey: its button (shown by /pages/sign-in.js), and the flag that keeps it across a refusal.
			passkey,
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

	/** Why a provider sign-in ended without one (the flow's `error`), as a sentence of the catalogue. */
	const providerProblem = (request: Request, error: string) => {
		const language = renderer.languageOf(request)
		const key = `providerProblem.${/^[a-z-]{1,40}$/.test(error) ? error : 'provider-error'}`
		const text = renderer.text(language, key)
		return text === key ? renderer.text(language, 'providerProblem.provider-error') : text
	}

	/** After a finished sign-in: the browser's former session (if any) ends, the new one's cookie is set, and on to `returnTo`. */
	const signedIn = async (request: Request, client: ClientInfo, token: string, returnTo: string) => {
		await browserSessions.end(request, client)
		return redirect(returnTo, [browserSessions.cookie(token, sessionTtlSeconds)])
	}

	/** The second step: a code typed, or a passkey's answer posted by the page's script. */
	const secondStep = async (request: Request, form: Form, client: ClientInfo, returnTo: string) => {
		const email = (form.email ?? '').slice(0, 320)
		const mfaToken = (form.mfaToken ?? '').slice(0, 200)
		const passkey = form.passkey === '1'
		let proof: Omit<Parameters<FactorsService['completeMfa']>[0], 'mfaToken'>
		if (form.response !== undefined) {
			const response = passkeyAnswer(form.response)
			if (!response) return secondFactorForm(request, { email, mfaToken, passkey, error: problemText(request, 'passkey-refused'), status: 422 })
			proof = { method: 'webauthn', response }
		} else {
			const typed = (form.code ?? '').trim()
			if (!typed) return secondFactorForm(request, { email, mfaToken, passkey, error: problemText(request, 'missing-code'), status: 422 })
			const digits = typed.replace(/\s/g, '')
			proof = /^\d{6}$/.test(digits) ? { method: 'totp', code: digits } : { method: 'recovery-code', code: typed.slice(0, 64) }
		}
		const { token, binding } = browserSessions.newBinding(clientIdOf(returnTo))
		try {
			await factors.completeMfa({ mfaToken, ...proof }, client, binding)
		} catch (error) {
			if (!(error instanceof AppError)) throw error
			const { status, text: said, retryAfter } = shown(request, error, client.requestId)
			const text = proof.method === 'webauthn' && error.kind === 'invalid-second-factor' ? problemText(request, 'passkey-refused') : said
			const page =
				error.kind === 'invalid-mfa-token' ? signInForm(request, { email, error: text, status }) : secondFactorForm(request, { email, mfaToken, passkey, error: text, status })
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
			.get('/pages/sign-in.js', () => new Response(renderer.signInScript, { headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, max-age=300' } }))
			.get('/sign-in', async ({ request }) => {
				const { query, returnTo, force, loginHint } = signInRequest(request)
				if (!force && (await browserSessions.current(request))) return redirect(returnTo)
				// A provider flow whose state this browser does not hold ends here (the API's fallback without APP_URL).
				const failed = query.get('error')
				return signInForm(request, { email: loginHint, error: failed ? providerProblem(request, failed) : undefined, aside: true })
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
							? secondFactorForm(request, { email, mfaToken: form.mfaToken.slice(0, 200), passkey: form.passkey === '1', error, status: 403 })
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
			.post(
				'/sign-in/email-code',
				async ({ request, body, client }) => {
					if (!codeSignIn) return problemPage(request, 404, problemText(request, 'not-found'))
					const form = formOf(body)
					const { returnTo } = signInRequest(request)
					const email = (form.email ?? '').trim().slice(0, 320)
					// From the sign-in form (the address), or the code's page (the code, or "send another").
					const onCodePage = form.code !== undefined || form.resend !== undefined
					const refused = refusal(request, form)
					if (refused === 'cross-site') return crossSitePage(request)
					if (refused) {
						const error = problemText(request, refused)
						return onCodePage ? emailCodeForm(request, { email, error, status: 403 }) : signInForm(request, { email, error, status: 403 })
					}
					if (form.code === undefined || form.resend !== undefined) {
						if (!isEmailAddress(email)) return signInForm(request, { email, error: problemText(request, 'missing-email'), status: 422 })
						try {
							// One answer whatever the address; MAIL_RESEND_SECONDS keeps a second request from sending again.
							await codeSignIn.request(email, client)
						} catch (error) {
							if (!(error instanceof AppError) || !EMAIL_CODE_PROBLEMS.has(error.kind)) throw error
							const { status, text } = shown(request, error, client.requestId)
							return signInForm(request, { email, error: text, status })
						}
						return emailCodeForm(request, { email })
					}
					const code = form.code.replace(/\s/g, '')
					if (!/^\d{6}$/.test(code)) return emailCodeForm(request, { email, error: problemText(request, 'missing-email-code'), status: 422 })
					const { token, binding } = browserSessions.newBinding(clientIdOf(returnTo))
					let outcome: Awaited<ReturnType<EmailCodeSignIn['signIn']>>
					try {
						outcome = await codeSignIn.signIn(email, code, client, binding)
					} catch (error) {
						if (!(error instanceof AppError) || !EMAIL_CODE_PROBLEMS.has(error.kind)) throw error
						const { status, text, retryAfter } = shown(request, error, client.requestId)
						const page = emailCodeForm(request, { email, error: text, status })
						if (retryAfter) page.headers.set('retry-after', retryAfter)
						return page
					}
					if ('mfaRequired' in outcome) return secondFactorForm(request, { email, mfaToken: outcome.mfaToken, methods: outcome.methods })
					return signedIn(request, client, token, returnTo)
				},
				// Sends a mail or checks a code: the /auth budget, as POST /api/auth/sign-in-codes and /api/auth/email-code.
				{ transform: ({ request }) => chargeAuthBudget(request) },
			)
			.post(
				'/sign-in/passkey',
				async ({ request, body, client }) => {
					const form = formOf(body)
					const { returnTo } = signInRequest(request)
					const refused = refusal(request, form)
					if (refused === 'cross-site') return crossSitePage(request)
					if (refused) return signInForm(request, { error: problemText(request, refused), status: 403 })
					const response = passkeyAnswer(form.response)
					if (!response) return signInForm(request, { error: problemText(request, 'passkey-refused'), status: 422, aside: true })
					const { token, binding } = browserSessions.newBinding(clientIdOf(returnTo))
					try {
						await factors.signInWithPasskey(response, client, binding)
					} catch (error) {
						if (!(error instanceof AppError) || !FORM_PROBLEMS.has(error.kind)) throw error
						const { status, text } = shown(request, error, client.requestId)
						return signInForm(request, { error: error.kind === 'invalid-credentials' ? problemText(request, 'passkey-refused') : text, status, aside: true })
					}
					return signedIn(request, client, token, returnTo)
				},
				// A signature checked: the /auth budget, as POST /api/auth/passkey.
				{ transform: ({ request }) => chargeAuthBudget(request) },
			)
			.post('/sign-in/provider', async ({ request, body }) => {
				const form = formOf(body)
				const { returnTo } = signInRequest(request)
				const refused = refusal(request, form)
				if (refused === 'cross-site') return crossSitePage(request)
				if (refused) return signInForm(request, { error: problemText(request, refused), status: 403 })
				const provider = providers.list().find(({ id }) => id === form.provider)
				if (!provider) return signInForm(request, { error: providerProblem(request, 'unknown-provider'), status: 422, aside: true })
				// The page is the flow's frontend: its PKCE verifier stays in this browser, the API's own route does the rest.
				const verifier = newOpaqueToken()
				const start = new URLSearchParams({ redirectTo: providers.pagesReturnUrl, codeChallenge: digestOf(verifier, 'base64url'), codeChallengeMethod: 'S256' })
				const flow = cookie(PROVIDER_FLOW_COOKIE, `${verifier}.${Buffer.from(returnTo).toString('base64url')}`, PROVIDER_FLOW_SECONDS)
				return redirect(`/api/auth/providers/${encodeURIComponent(provider.id)}/authorization?${start}`, [flow])
			})
			.get(PAGES_PROVIDER_RETURN_PATH, async ({ request, client }) => {
				const query = new URL(request.url).searchParams
				const flow = providerFlowOf(request)
				const returnTo = flow?.returnTo ?? DEFAULT_RETURN_TO
				const done = cookie(PROVIDER_FLOW_COOKIE, '', 0)
				const code = query.get('code')
				const failed = query.get('error') ?? (!code || !flow ? 'invalid-state' : undefined)
				let page: Response
				if (failed || !code || !flow) page = signInForm(request, { error: providerProblem(request, failed ?? 'invalid-state'), status: 400, returnTo, aside: true })
				else {
					const { token, binding } = browserSessions.newBinding(clientIdOf(returnTo))
					let outcome: Awaited<ReturnType<ProviderSignIn['exchange']>> | undefined
					let failure: { status: number; text: string } | undefined
					try {
						outcome = await providers.exchange(code.slice(0, 200), flow.verifier, client, binding)
					} catch (error) {
						if (!(error instanceof AppError) || (error.kind !== 'invalid-code' && !FORM_PROBLEMS.has(error.kind))) throw error
						const { status, text } = shown(request, error, client.requestId)
						// The code expired or was spent, or the account changed meanwhile: start again.
						failure = error.kind === 'invalid-code' ? { status: 400, text: providerProblem(request, 'invalid-state') } : { status, text }
					}
					page = !outcome
						? signInForm(request, { error: failure?.text, status: failure?.status ?? 400, returnTo, aside: true })
						: 'mfaRequired' in outcome
							? secondFactorForm(request, { email: '', mfaToken: outcome.mfaToken, methods: outcome.methods, returnTo })
							: await signedIn(request, client, token, returnTo)
				}
				page.headers.append('set-cookie', done)
				return page
			})
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
			const view: PageView = { action: signInAction(request), csrf: csrf.token, email: '', error, fieldsInvalid: true }
			const page = renderer.page(request, 'sign-in', view, { title: 'signIn.title', status, cookies: csrf.setCookie ? [csrf.setCookie] : [] })
			if (retryAfterSeconds) page.headers.set('retry-after', String(retryAfterSeconds))
			return page
		}
		// The sign-in's own paths carry where it goes next (return_to): the way back keeps it.
		const page = renderer.page(request, 'problem', { error, back: path.startsWith('/sign-in') ? signInAction(request) : '/sign-in' }, { title: 'problem.title', status })
		if (retryAfterSeconds) page.headers.set('retry-after', String(retryAfterSeconds))
		return page
	}
}
