import { Value } from '@sinclair/typebox/value'
import { Elysia } from 'elysia'
import { digestOf, newOpaqueToken } from '../crypto/opaque-tokens'
import { AppError } from '../http/problem'
import { chargeAuthBudget } from '../http/rate-limit'
import { requestContext, type ClientInfo } from '../http/request-context'
import type { AuthService } from '../modules/auth/service'
import type { MfaMethod } from '../modules/auth/sign-in'
import type { EmailCodeSignIn } from '../modules/email/code-sign-in'
import { FactorModel } from '../modules/factors/model'
import type { FactorsService } from '../modules/factors/service'
import { PAGES_PROVIDER_RETURN_PATH, type ProviderSignIn } from '../modules/oidc/service'
import { isEmailAddress } from '../modules/users/model'
import { cookie, readCookie } from './cookies'
import { formOf, redirect, signInAction, signInRequest, type Form, type PageKit } from './kit'
import type { PageView } from './render'
import { clientIdOf, DEFAULT_RETURN_TO, localPath } from './return-to'

/** The sign-in's paths: the form and its second step, the other ways in, and a provider's return. */
export const SIGN_IN_PATHS = {
	form: '/sign-in',
	emailCode: '/sign-in/email-code',
	passkey: '/sign-in/passkey',
	provider: '/sign-in/provider',
	providerReturn: PAGES_PROVIDER_RETURN_PATH,
} as const

/**
 * A provider sign-in started at /sign-in: the PKCE verifier the page keeps for the code it gets back (as a
 * frontend keeps one), and where the sign-in goes next. HttpOnly, SameSite=Lax: the provider's redirect back
 * is a top-level navigation, which brings it.
 */
const PROVIDER_FLOW_COOKIE = '__Host-latchkey-provider-flow'
/** As long as a flow may sit at the provider (oidc/service.ts). */
const PROVIDER_FLOW_SECONDS = 600

/** The problems of a sign-in that its form shows again (the others end on the problem page). */
export const FORM_PROBLEMS = new Set(['invalid-credentials', 'login-locked', 'rate-limited', 'email-not-verified', 'invalid-mfa-token', 'too-many-codes'])
/** The problems of a code by mail that its page shows again. */
const EMAIL_CODE_PROBLEMS = new Set(['invalid-code', 'login-locked', 'rate-limited', 'email-not-verified', 'too-many-codes', 'mail-unavailable'])

export interface SignInDeps {
	auth: Pick<AuthService, 'login'>
	factors: Pick<FactorsService, 'completeMfa' | 'signInWithPasskey'>
	/** "Email me a code" (POST /auth/sign-in-codes and /auth/email-code); none under EMAIL_CODE_SIGN_IN=false: no button. */
	codeSignIn?: Pick<EmailCodeSignIn, 'request' | 'signIn'>
	/** The identity providers (a button each), their flow's return to the pages, and the code it brings. */
	providers: Pick<ProviderSignIn, 'list' | 'exchange' | 'pagesReturnUrl'>
	/** SIGNUP_ENABLED: the form links to /sign-up while it is open. */
	signupEnabled: boolean
}

/** A passkey's answer as the page's script posts it (AuthenticationResponseJSON), or undefined when it is not one. */
function passkeyAnswer(raw: string | undefined) {
	try {
		const parsed: unknown = JSON.parse(raw ?? '')
		return Value.Check(FactorModel.authenticationResponse, parsed) ? parsed : undefined
	} catch {
		return undefined
	}
}

/**
 * A provider flow the pages start (a sign-in here, a link at /account/identities): its PKCE verifier, the
 * challenge to send, and the cookie that keeps both the verifier and where to go next in this browser.
 */
export function newProviderFlow(returnTo: string) {
	const verifier = newOpaqueToken()
	return {
		codeChallenge: digestOf(verifier, 'base64url'),
		cookie: cookie(PROVIDER_FLOW_COOKIE, `${verifier}.${Buffer.from(returnTo).toString('base64url')}`, PROVIDER_FLOW_SECONDS),
	}
}

/** The page's provider flow, from its cookie: the verifier and where to go next (undefined when missing or malformed). */
function providerFlowOf(request: Request): { verifier: string; returnTo: string } | undefined {
	const [verifier, encoded] = (readCookie(request, PROVIDER_FLOW_COOKIE) ?? '').split('.')
	if (!verifier || !/^[A-Za-z0-9_-]{43}$/.test(verifier)) return undefined
	return { verifier, returnTo: localPath(Buffer.from(encoded ?? '', 'base64url').toString()) ?? DEFAULT_RETURN_TO }
}

/** /sign-in: a password (then the second factor owed), a code by mail, a passkey, an identity provider. */
export function signInPages({ auth, factors, codeSignIn, providers, signupEnabled }: SignInDeps, kit: PageKit) {
	const { renderer, browserSessions, problemText, formPage, problemPage, shown, refusal, crossSitePage, signedIn } = kit

	/**
	 * The sign-in form, with what was typed (never the password) and a problem if there was one; beside it the
	 * other ways in: a code by mail (when on), a passkey (shown by its script), the identity providers.
	 * `aside`: the problem is not the fields' (a provider's or a passkey's), which are then not marked invalid.
	 */
	const signInForm = (
		request: Request,
		{ email = '', error, status = 200, returnTo, aside = false }: { email?: string; error?: string; status?: number; returnTo?: string; aside?: boolean } = {},
	) => {
		const listed = providers.list()
		const view: PageView = {
			action: signInAction(request, returnTo),
			emailCodeAction: codeSignIn ? signInAction(request, returnTo, SIGN_IN_PATHS.emailCode) : undefined,
			passkeyAction: signInAction(request, returnTo, SIGN_IN_PATHS.passkey),
			providerAction: listed.length > 0 ? signInAction(request, returnTo, SIGN_IN_PATHS.provider) : undefined,
			providers: listed.map(({ id, label }) => ({ id, label: renderer.text(renderer.languageOf(request), 'signIn.withProvider', { provider: label }) })),
			// The pages beside it keep where the sign-in goes next (return_to), to come back to it.
			recoveryAction: signInAction(request, returnTo, '/recovery'),
			signUpAction: signupEnabled ? signInAction(request, returnTo, '/sign-up') : undefined,
			email,
			error,
			fieldsInvalid: !!error && !aside,
			focusEmail: !error && !email,
			focusPassword: !error && !!email,
		}
		return formPage(request, 'sign-in', view, { title: 'signIn.title', status })
	}

	/** The page of a code by mail: where it went, the code's field, another code, and the way back. */
	const emailCodeForm = (request: Request, { email, error, status = 200 }: { email: string; error?: string; status?: number }) => {
		const language = renderer.languageOf(request)
		const view: PageView = {
			action: signInAction(request, undefined, SIGN_IN_PATHS.emailCode),
			back: signInAction(request),
			email,
			sent: renderer.text(language, 'emailCode.sent', { email }),
			error,
			focusField: !error,
		}
		return formPage(request, 'email-code', view, { title: 'emailCode.title', status })
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
		const intro =
			!methods || methods.includes('totp')
				? renderer.text(language, 'secondFactor.intro')
				: methods.includes('webauthn')
					? renderer.text(language, 'secondFactor.passkeyOnly')
					: renderer.text(language, 'secondFactor.introRecoveryOnly')
		const action = signInAction(request, returnTo)
		const view: PageView = {
			action,
			restart: `${action}${action.includes('?') ? '&' : '?'}force=1`,
			mfaToken,
			email,
			signingInAs: email ? renderer.text(language, 'secondFactor.signingInAs', { email }) : undefined,
			intro,
			// The account has a passkey: its button (shown by /pages/passkeys.js), and the flag that keeps it across a refusal.
			passkey,
			error,
			focusField: !error,
		}
		return formPage(request, 'second-factor', view, { title: 'secondFactor.title', status })
	}

	/** Why a provider sign-in ended without one (the flow's `error`), as a sentence of the catalogue. */
	const providerProblem = (request: Request, error: string) => {
		const language = renderer.languageOf(request)
		const key = `providerProblem.${/^[a-z-]{1,40}$/.test(error) ? error : 'provider-error'}`
		const text = renderer.text(language, key)
		return text === key ? renderer.text(language, 'providerProblem.provider-error') : text
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
		new Elysia({ name: 'pages-sign-in', normalize: false, detail: { hide: true } })
			.use(requestContext)
			.get(SIGN_IN_PATHS.form, async ({ request }) => {
				const { query, returnTo, force, loginHint } = signInRequest(request)
				if (!force && (await browserSessions.current(request))) return redirect(returnTo)
				// A provider flow whose state this browser does not hold ends here (the API's fallback without APP_URL).
				const failed = query.get('error')
				return signInForm(request, { email: loginHint, error: failed ? providerProblem(request, failed) : undefined, aside: true })
			})
			.post(
				SIGN_IN_PATHS.form,
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
				SIGN_IN_PATHS.emailCode,
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
				SIGN_IN_PATHS.passkey,
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
			.post(SIGN_IN_PATHS.provider, async ({ request, body }) => {
				const form = formOf(body)
				const { returnTo } = signInRequest(request)
				const refused = refusal(request, form)
				if (refused === 'cross-site') return crossSitePage(request)
				if (refused) return signInForm(request, { error: problemText(request, refused), status: 403 })
				const provider = providers.list().find(({ id }) => id === form.provider)
				if (!provider) return signInForm(request, { error: providerProblem(request, 'unknown-provider'), status: 422, aside: true })
				// The page is the flow's frontend: its PKCE verifier stays in this browser, the API's own route does the rest.
				const flow = newProviderFlow(returnTo)
				const start = new URLSearchParams({ redirectTo: providers.pagesReturnUrl, codeChallenge: flow.codeChallenge, codeChallengeMethod: 'S256' })
				return redirect(`/api/auth/providers/${encodeURIComponent(provider.id)}/authorization?${start}`, [flow.cookie])
			})
			.get(SIGN_IN_PATHS.providerReturn, async ({ request, client }) => {
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
	)
}
