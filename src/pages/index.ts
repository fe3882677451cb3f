import { Elysia } from 'elysia'
import type { PageProblemRenderer } from '../http/problem-catalogue'
import type { AuthService } from '../modules/auth/service'
import { ACCOUNT_PATHS, accountPages, type AccountDeps } from './account'
import { ASSET_PATHS, pageAssets } from './asset-routes'
import type { BrowserSessions } from './browser-sessions'
import { formToken } from './csrf'
import { pageKit, problemSentence, signInAction } from './kit'
import type { PageRenderer, PageView } from './render'
import type { PageSettings } from './settings'
import { FORM_PROBLEMS, SIGN_IN_PATHS, signInPages, type SignInDeps } from './sign-in'
import { SIGN_OUT_PATHS, signOutPages } from './sign-out'
import { SIGN_UP_PATHS, signUpPages, type SignUpDeps } from './sign-up'
import { RECOVERY_PATHS, recoveryPages, type RecoveryDeps } from './recovery'
import { EMAIL_VERIFICATION_PATHS, emailVerificationPages, type EmailVerificationDeps } from './email-verification'
import { INVITATION_PATHS, invitationPages, type InvitationPagesDeps } from './invitation'

export { BrowserSessions, SESSION_COOKIE, type BrowserSession } from './browser-sessions'
export { pageHeaders, PageRenderer, PageSetupError } from './render'
export type { PageSettings } from './settings'
export { consentPage, providerPages } from './provider'

/**
 * Every path the pages answer: HTML (no JSON negotiation), bodies are HTML forms, problems are pages
 * (app.ts hands this to the security checks, the rate limits and the problem handler). Each page group
 * declares its paths beside its routes; /consent is the provider's page (provider.ts).
 */
export const PAGE_PATHS: ReadonlySet<string> = new Set([
	...Object.values(SIGN_IN_PATHS),
	...Object.values(SIGN_UP_PATHS),
	...Object.values(RECOVERY_PATHS),
	...Object.values(EMAIL_VERIFICATION_PATHS),
	...Object.values(INVITATION_PATHS),
	...Object.values(SIGN_OUT_PATHS),
	...Object.values(ACCOUNT_PATHS),
	...Object.values(ASSET_PATHS),
	'/consent',
])

export interface PagesDeps extends SignInDeps, Omit<SignUpDeps, 'email'> {
	renderer: PageRenderer
	settings: PageSettings
	auth: Pick<AuthService, 'login' | 'logout'>
	/** The mails' service, as the API's /auth/verification-requests, email-verifications, recovery-requests and password-resets use it. */
	email: SignUpDeps['email'] & EmailVerificationDeps['email'] & RecoveryDeps['email']
	browserSessions: BrowserSessions
	/** How long a session lives (REFRESH_TOKEN_TTL): the session cookie's Max-Age. */
	sessionTtlSeconds: number
	/** /account's services: those of the API's routes on a user's own account. */
	account: AccountDeps
	/** /invitation: POST /invitation-acceptances's service. */
	invitations: InvitationPagesDeps['invitations']
}

/** The pages: sign-in (every way in), sign-up, recovery, a mail's proof, the account's landing, sign-out; and their stylesheets and scripts. */
export function pages(deps: PagesDeps) {
	const kit = pageKit(deps)
	return new Elysia({ name: 'pages', normalize: false, detail: { hide: true } })
		.use(pageAssets(deps.renderer))
		.use(signInPages(deps, kit))
		.use(signUpPages(deps, kit))
		.use(recoveryPages(deps, kit))
		.use(emailVerificationPages(deps, kit))
		.use(invitationPages(deps, kit))
		.use(signOutPages(kit))
		.use(accountPages(deps.account, kit))
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
		const error = problemSentence(renderer, request, kind, { retryAfterSeconds, requestId })
		if (path === SIGN_IN_PATHS.form && FORM_PROBLEMS.has(kind)) {
			const csrf = formToken(request)
			const view: PageView = { action: signInAction(request), csrf: csrf.token, email: '', error, fieldsInvalid: true }
			const page = renderer.page(request, 'sign-in', view, { title: 'signIn.title', status, cookies: csrf.setCookie ? [csrf.setCookie] : [] })
			if (retryAfterSeconds) page.headers.set('retry-after', String(retryAfterSeconds))
			return page
		}
		// The sign-in's own paths carry where it goes next (return_to): the way back keeps it.
		const page = renderer.page(request, 'problem', { error, back: path.startsWith(SIGN_IN_PATHS.form) ? signInAction(request) : '/sign-in' }, { title: 'problem.title', status })
		if (retryAfterSeconds) page.headers.set('retry-after', String(retryAfterSeconds))
		return page
	}
}
