import { Elysia } from 'elysia'
import { requestContext } from '../http/request-context'
import type { Interactions } from '../modules/oauth/interactions'
import type { ProviderPages } from '../modules/oauth/provider'
import type { BrowserSessions } from './browser-sessions'
import { formToken, formTokenMatches, isCrossSite } from './csrf'
import type { PageRenderer } from './render'
import type { PageSettings } from './settings'

/*
 * The pages of Latchkey as an OpenID Provider: the consent page, and the pages the protocol library asks for
 * (its sign-out question, a device's code, its errors), all rendered on the same layer as the sign-in page.
 */

/** The pages the provider's library shows, as HTML in the request's language. */
export function providerPages(renderer: PageRenderer): ProviderPages {
	const html = (response: Response) => response.text()
	const problem = (request: Request, error: string, status = 400) => html(renderer.page(request, 'problem', { error, back: '/account' }, { title: 'problem.title', status }))
	const text = (request: Request, key: string, view: Record<string, unknown> = {}) => renderer.text(renderer.languageOf(request), key, view)
	return {
		signOut: (request, { xsrf }, clientName) =>
			html(
				renderer.page(
					request,
					'provider-sign-out',
					{ xsrf, body: clientName ? text(request, 'signOut.providerBody', { client: clientName }) : text(request, 'signOut.providerBodyNoClient') },
					{ title: 'signOut.title' },
				),
			),
		signedOut: (request) => html(renderer.page(request, 'message', { heading: text(request, 'signOut.heading'), body: text(request, 'signOut.body') }, { title: 'signOut.title' })),
		error: (request, error, description) =>
			error === 'invalid_redirect_uri' || error === 'invalid_client'
				? problem(request, text(request, 'problem.provider-redirect'))
				: problem(request, text(request, 'problem.provider', { reason: description ?? error })),
		deviceCode: (request, { xsrf, userCode }, wrong) =>
			html(
				renderer.page(
					request,
					'device-code',
					{
						xsrf,
						userCode,
						focus: true,
						error: wrong === undefined ? undefined : text(request, wrong === 'interrupted' ? 'problem.device-interrupted' : 'problem.wrong-device-code'),
					},
					{ title: 'device.title', status: wrong ? 400 : 200 },
				),
			),
		deviceConfirm: (request, { xsrf }, clientName, userCode) =>
			html(
				renderer.page(
					request,
					'device-confirm',
					{
						xsrf,
						userCode,
						question: text(request, 'device.question', { client: clientName ?? text(request, 'device.aDevice') }),
						codeShown: text(request, 'device.codeShown', { code: userCode }),
					},
					{ title: 'device.title' },
				),
			),
		deviceDone: (request, clientName) =>
			html(
				renderer.page(
					request,
					'message',
					{ heading: text(request, 'device.doneHeading'), body: text(request, 'device.doneBody', { client: clientName ?? text(request, 'device.aDevice') }) },
					{ title: 'device.title' },
				),
			),
	}
}

export interface ConsentPageDeps {
	renderer: PageRenderer
	settings: PageSettings
	interactions: Pick<Interactions, 'describe' | 'decide'>
	browserSessions: BrowserSessions
}

type Form = Record<string, string | undefined>

/** /consent: the client, its logo and the scopes asked in words, and allow or deny (API.md, Pages). */
export function consentPage({ renderer, settings, interactions, browserSessions }: ConsentPageDeps) {
	const text = (request: Request, key: string, view: Record<string, unknown> = {}) => renderer.text(renderer.languageOf(request), key, view)
	const expired = (request: Request, status = 400, error = text(request, 'problem.consent-expired')) =>
		renderer.page(request, 'problem', { error, back: '/account' }, { title: 'problem.title', status })
	const scopeText = (request: Request, scope: string) => {
		// `organization:{id}` is one scope per organization: said with its id.
		const organization = /^organization:(.+)$/.exec(scope)?.[1]
		if (organization) return text(request, 'consent.scope.organization', { organization })
		const key = `consent.scope.${scope}`
		const found = text(request, key)
		return found === key ? text(request, 'consent.scope.other', { scope }) : found
	}
	const form = async (request: Request, interaction: string, error?: string, status = 200) => {
		const asked = await interactions.describe(request, interaction)
		const session = await browserSessions.current(request)
		if (!asked || !session || session.user.id !== asked.accountId) return expired(request)
		const csrf = formToken(request)
		return renderer.page(
			request,
			'consent',
			{
				csrf: csrf.token,
				interaction,
				error,
				heading: text(request, 'consent.heading', { client: asked.clientName }),
				intro: text(request, 'consent.intro', { client: asked.clientName }),
				logoUri: asked.logoUri,
				scopes: asked.scopes.map((scope) => scopeText(request, scope)),
				signedInAs: text(request, 'consent.signedInAs', { email: session.user.email }),
			},
			{ title: 'consent.title', status, cookies: csrf.setCookie ? [csrf.setCookie] : [] },
		)
	}
	return new Elysia({ name: 'consent-page', normalize: false, detail: { hide: true } })
		.use(requestContext)
		.get('/consent', ({ request }) => form(request, (new URL(request.url).searchParams.get('interaction') ?? '').slice(0, 100)))
		.post('/consent', async ({ request, body }) => {
			const posted = (typeof body === 'object' && body !== null ? body : {}) as Form
			const interaction = (posted.interaction ?? '').slice(0, 100)
			// Another site cannot answer for the person: no answer without the browser's own form token.
			if (isCrossSite(request, settings.publicUrl)) return expired(request, 403, text(request, 'problem.cross-site'))
			if (!formTokenMatches(request, posted.csrf)) return form(request, interaction, text(request, 'problem.form-expired'), 403)
			const session = await browserSessions.current(request)
			const asked = await interactions.describe(request, interaction)
			if (!session || !asked || session.user.id !== asked.accountId) return expired(request)
			return (await interactions.decide(request, interaction, posted.decision === 'allow')) ?? expired(request)
		})
}
