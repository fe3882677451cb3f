import { AppError } from '../http/problem'
import { PROBLEM_KINDS } from '../http/problem-catalogue'
import type { ClientInfo } from '../http/request-context'
import type { BrowserSessions } from './browser-sessions'
import { formToken, formTokenMatches, isCrossSite } from './csrf'
import type { PageRenderer, PageView, TemplateName } from './render'
import { asksForLogin, DEFAULT_RETURN_TO, localPath } from './return-to'
import type { PageSettings } from './settings'

/*
 * What every page group shares: reading a posted form, the refusals every POST shares, a problem's sentence,
 * the problem page, the redirect, and the end of every sign-in (the new session's cookie, then return_to).
 */

/** A posted form: the fields as strings (security.ts reads them), or nothing. */
export type Form = Record<string, string | undefined>
export const formOf = (body: unknown): Form => (typeof body === 'object' && body !== null ? (body as Form) : {})

/** A 303 to `location`, never cached, with the cookies it sets. */
export const redirect = (location: string, cookies: string[] = []) => {
	const headers = new Headers({ location, 'cache-control': 'no-store' })
	for (const value of cookies) headers.append('set-cookie', value)
	return new Response(null, { status: 303, headers })
}

/** Where this sign-in goes next, and whether it asks for a new one whatever the browser's session. */
export function signInRequest(request: Request) {
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
export function signInAction(request: Request, returnTo?: string, path = '/sign-in'): string {
	const query = new URL(request.url).searchParams
	const kept = new URLSearchParams()
	const next = returnTo ?? localPath(query.get('return_to'))
	if (next) kept.set('return_to', next)
	const locales = query.get('ui_locales')
	if (locales) kept.set('ui_locales', locales.slice(0, 100))
	const search = kept.toString()
	return search ? `${path}?${search}` : path
}

/** What a problem's sentence may name: how long to wait, the request's id, or a value of its own (`min`). */
export interface ProblemExtra {
	retryAfterSeconds?: number
	requestId?: string
	values?: Record<string, string | number>
}

/** A problem's sentence (`problem.<kind>` of the catalogue) in the request's language; the default sentence for a kind it lacks. */
export function problemSentence(renderer: PageRenderer, request: Request, kind: string, extra: ProblemExtra = {}) {
	const language = renderer.languageOf(request)
	const key = `problem.${kind}`
	const text = renderer.text(language, key, { ...extra.values, wait: renderer.wait(language, extra.retryAfterSeconds ?? 60), requestId: extra.requestId ?? '' })
	return text === key ? renderer.text(language, 'problem.default') : text
}

export interface PageKitDeps {
	renderer: PageRenderer
	settings: PageSettings
	browserSessions: BrowserSessions
	/** How long a session lives (REFRESH_TOKEN_TTL): the session cookie's Max-Age. */
	sessionTtlSeconds: number
}

/** The helpers bound to the pages' renderer, settings and browser sessions. */
export function pageKit({ renderer, settings, browserSessions, sessionTtlSeconds }: PageKitDeps) {
	/** A problem's sentence in the request's language. */
	const problemText = (request: Request, kind: string, extra: ProblemExtra = {}) => problemSentence(renderer, request, kind, extra)

	/** A page with a form: the view gets the browser's form token, and the response its cookie when it is new. */
	const formPage = (request: Request, name: TemplateName, view: PageView, { title, status = 200 }: { title: string; status?: number }) => {
		const csrf = formToken(request)
		return renderer.page(request, name, { ...view, csrf: csrf.token }, { title, status, cookies: csrf.setCookie ? [csrf.setCookie] : [] })
	}

	/** The problem page: a sentence, and a way back to sign-in. */
	const problemPage = (request: Request, status: number, error: string) => {
		const back = new URL(request.url).pathname === '/sign-in' ? signInAction(request) : '/sign-in'
		return renderer.page(request, 'problem', { error, back }, { title: 'problem.title', status })
	}

	/** What an AppError of a step means on the page: its status, its sentence, and how long to wait (Retry-After). */
	const shown = (request: Request, error: AppError, requestId: string | null) => {
		const retryAfter = Number(error.options.headers?.['retry-after'])
		const status = PROBLEM_KINDS[error.kind].status
		return {
			status,
			text: problemText(request, error.kind, { retryAfterSeconds: Number.isFinite(retryAfter) ? retryAfter : undefined, requestId: requestId ?? '' }),
			retryAfter: Number.isFinite(retryAfter) ? String(retryAfter) : undefined,
		}
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

	/** A page that says what happened, with the one way on (a button-styled link). */
	const messagePage = (request: Request, { heading, body, next, title }: { heading: string; body: string; next?: { href: string; label: string }; title: string }) =>
		renderer.page(request, 'message', { heading, body, next }, { title })

	return { renderer, settings, browserSessions, problemText, formPage, problemPage, messagePage, shown, refusal, crossSitePage, signedIn }
}

export type PageKit = ReturnType<typeof pageKit>
