import { Elysia } from 'elysia'
import { requestContext } from '../http/request-context'
import { formOf, redirect, type PageKit } from './kit'
import type { PageView } from './render'

export const SIGN_OUT_PATHS = { page: '/sign-out' } as const

/** /sign-out: a question while signed in (a POST ends the browser's session), a sentence once signed out. */
export function signOutPages(kit: PageKit) {
	const { renderer, browserSessions, problemText, formPage, refusal, crossSitePage } = kit

	const signOutPage = (request: Request, session: { user: { email: string } } | undefined, error?: string, status = 200) => {
		const language = renderer.languageOf(request)
		const view: PageView = session
			? {
					signedIn: true,
					confirmHeading: renderer.text(language, 'signOut.confirmHeading'),
					confirmBody: renderer.text(language, 'signOut.confirmBody', { email: session.user.email }),
					error,
				}
			: { signedIn: false, body: renderer.text(language, 'signOut.body'), error }
		return formPage(request, 'sign-out', view, { title: 'signOut.title', status })
	}

	return new Elysia({ name: 'pages-sign-out', normalize: false, detail: { hide: true } })
		.use(requestContext)
		.get(SIGN_OUT_PATHS.page, async ({ request }) => signOutPage(request, await browserSessions.current(request)))
		.post(SIGN_OUT_PATHS.page, async ({ request, body, client }) => {
			const refused = refusal(request, formOf(body))
			if (refused === 'cross-site') return crossSitePage(request)
			if (refused) return signOutPage(request, await browserSessions.current(request), problemText(request, refused), 403)
			return redirect(SIGN_OUT_PATHS.page, [await browserSessions.end(request, client)])
		})
}
