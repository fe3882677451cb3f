import { Elysia } from 'elysia'
import { redirect, type PageKit } from './kit'
import { SIGN_IN_PATHS } from './sign-in'

export const ACCOUNT_PATHS = { page: '/account' } as const

/** /account: the account's landing, for a signed-in browser; sign-in first otherwise, coming back here. */
export function accountPages(kit: PageKit) {
	const { renderer, browserSessions, formPage } = kit
	return new Elysia({ name: 'pages-account', normalize: false, detail: { hide: true } }).get(ACCOUNT_PATHS.page, async ({ request }) => {
		const session = await browserSessions.current(request)
		if (!session) return redirect(`${SIGN_IN_PATHS.form}?${new URLSearchParams({ return_to: ACCOUNT_PATHS.page })}`)
		const language = renderer.languageOf(request)
		return formPage(request, 'account', { signedInAs: renderer.text(language, 'account.signedInAs', { email: session.user.email }) }, { title: 'account.title' })
	})
}
