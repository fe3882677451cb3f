import { toFetchResponse, toReqRes } from 'fetch-to-node'
import type Provider from 'oidc-provider'
import type { InteractionResults } from 'oidc-provider'
import { clientOf } from '../../http/client-ip'
import { ENROLMENT_REQUIRED, INTERACTION_COOKIE, INTERACTION_PATH, type BrowserSession, type BrowserSessions } from './provider'

/*
 * What happens between an authorization request and its answer when the provider cannot answer at once: the
 * browser signs in (the pages), steps up to a second factor, or consents. The provider sends the browser to
 * `next` (INTERACTION_PATH/{uid}); it finishes what the browser's session already satisfies, and sends it to
 * the page for the rest. The consent page asks `describe` what to show and `decide` what the person chose.
 */

export interface ConsentRequest {
	clientId: string
	clientName: string
	logoUri?: string
	/** The scopes asked that the person has not allowed this client yet. */
	scopes: string[]
	accountId: string
}

export interface InteractionDeps {
	/** The provider, loaded on first use. */
	provider: () => Promise<Provider>
	issuer: URL
	browserSessions: BrowserSessions
	isFirstParty(clientId: string): Promise<boolean>
	/** Remembers what a person allowed a client (and says so in the audit trail and the events). */
	rememberConsent(userId: string, clientId: string, scopes: string[], request: Request): Promise<void>
}

/** Node's request and response for `request`, as from a socket of the client Latchkey decided it came from. */
export function nodeShaped(request: Request, issuer: URL, original = request) {
	const pair = toReqRes(request)
	Object.defineProperty(pair.req, 'socket', { value: { encrypted: issuer.protocol === 'https:', remoteAddress: clientOf(original).ip ?? undefined } })
	return pair
}

/** A cookie's value as the request sent it (the library signs it beside, in a cookie of its own). */
function readCookie(request: Request, name: string): string | undefined {
	for (const part of (request.headers.get('cookie') ?? '').split(';')) {
		const equals = part.indexOf('=')
		if (equals > 0 && part.slice(0, equals).trim() === name) return part.slice(equals + 1).trim()
	}
	return undefined
}

/** The account page where a session held to enrolment adds a factor (pages/account.ts). */
const ENROLMENT_PAGE = '/account/security'

const redirect = (location: string) => new Response(null, { status: 303, headers: { location } })

type Details = Awaited<ReturnType<Provider['interactionDetails']>>

export class Interactions {
	constructor(private readonly deps: InteractionDeps) {}

	private async details(request: Request, uid: string) {
		const { req, res } = nodeShaped(request, this.deps.issuer)
		const details = await (await this.deps.provider()).interactionDetails(req, res).catch(() => undefined)
		return details && details.uid === uid ? { details, req, res } : undefined
	}

	private async finish(found: { req: unknown; res: unknown }, result: InteractionResults, merge: boolean) {
		const { req, res } = found as ReturnType<typeof toReqRes>
		await (await this.deps.provider()).interactionFinished(req, res, result, { mergeWithLastSubmission: merge })
		return toFetchResponse(res)
	}

	/** Where the browser goes next: back to the provider when its session satisfies the request, else to a page. */
	async next(request: Request, uid: string): Promise<Response> {
		const found = await this.details(request, uid)
		const browser = await this.deps.browserSessions.current(request)
		if (!found) return (await this.restarted(request, uid, browser)) ?? redirect('/sign-in')
		const { details } = found
		if (details.prompt.name === 'login') {
			const reasons = details.prompt.reasons
			// Held to enrolment (MFA_REQUIRED): a factor first, at the account pages (which allow nothing else); the
			// application's sign-in is asked again after, by the person or by the application.
			if (browser && reasons.includes(ENROLMENT_REQUIRED)) return redirect(ENROLMENT_PAGE)
			const mustSignInAgain = reasons.includes('login_prompt') || reasons.includes('max_age')
			const stepUp = reasons.includes('aal2_required')
			// After the request began: its `iat` is in whole seconds, so a sign-in counts from the next second on (no
			// person signs in faster), never one made just before the request.
			const signedInSince = browser !== undefined && browser.authenticatedAt.getTime() / 1000 >= details.iat + 1
			if (browser && (!mustSignInAgain || signedInSince) && (!stepUp || browser.aal === 'aal2'))
				return this.finish(
					found,
					{ login: { accountId: browser.userId, ts: Math.floor(browser.authenticatedAt.getTime() / 1000), amr: browser.amr, acr: browser.aal } },
					false,
				)
			return redirect(`/sign-in?${signInQuery(details, uid, mustSignInAgain, stepUp)}`)
		}
		if (details.prompt.name === 'consent' && browser && (await this.deps.isFirstParty(String(details.params.client_id))))
			return this.grant(found, browser.userId)
		return redirect(`/consent?interaction=${encodeURIComponent(uid)}`)
	}

	/**
	 * A sign-in at the pages that ended the browser's former session (another account, or the same one signing in
	 * again for `prompt=login`) ends the library's session the request was bound to. The request itself is still
	 * this browser's (its cookie names it): it starts again as it was asked, minus `prompt=login`, now answered by
	 * the sign-in just made. Undefined for anything else (an unknown, expired or foreign interaction).
	 */
	private async restarted(request: Request, uid: string, browser: BrowserSession | undefined): Promise<Response | undefined> {
		if (!browser || readCookie(request, INTERACTION_COOKIE) !== uid) return undefined
		const interaction = await (await this.deps.provider()).Interaction.find(uid)
		if (!interaction?.params || !interaction.iat || browser.authenticatedAt.getTime() / 1000 < interaction.iat + 1) return undefined
		const params = new URLSearchParams()
		for (const [name, value] of Object.entries(interaction.params)) if (typeof value === 'string') params.set(name, value)
		const prompts = (params.get('prompt') ?? '').split(' ').filter((prompt) => prompt && prompt !== 'login')
		if (prompts.length > 0) params.set('prompt', prompts.join(' '))
		else params.delete('prompt')
		await interaction.destroy()
		return redirect(`/oauth2/authorization?${params}`)
	}

	/** What the consent page shows; undefined when there is no consent to ask in this browser. */
	async describe(request: Request, uid: string): Promise<ConsentRequest | undefined> {
		const found = await this.details(request, uid)
		const accountId = found?.details.session?.accountId
		if (!found || found.details.prompt.name !== 'consent' || !accountId) return undefined
		const client = await (await this.deps.provider()).Client.find(String(found.details.params.client_id))
		if (!client) return undefined
		return {
			clientId: client.clientId,
			clientName: client.clientName ?? client.clientId,
			logoUri: client.logoUri,
			scopes: missingScopes(found.details),
			accountId,
		}
	}

	/** The person's answer on the consent page; the redirect back to the provider (which tells the client). */
	async decide(request: Request, uid: string, allow: boolean): Promise<Response | undefined> {
		const found = await this.details(request, uid)
		const accountId = found?.details.session?.accountId
		if (!found || found.details.prompt.name !== 'consent' || !accountId) return undefined
		if (!allow) return this.finish(found, { error: 'access_denied', error_description: 'the user denied the request' }, false)
		await this.deps.rememberConsent(accountId, String(found.details.params.client_id), missingScopes(found.details), request)
		return this.grant(found, accountId)
	}

	/** Grants what the request asks beyond what the client already has. */
	private async grant(found: NonNullable<Awaited<ReturnType<Interactions['details']>>>, accountId: string) {
		const { details } = found
		const { Grant } = await this.deps.provider()
		const missing = details.prompt.details as { missingOIDCScope?: string[]; missingOIDCClaims?: string[]; missingResourceScopes?: Record<string, string[]> }
		const grant = (details.grantId ? await Grant.find(details.grantId) : undefined) ?? new Grant({ accountId, clientId: String(details.params.client_id) })
		if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '))
		if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims)
		for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) grant.addResourceScope(indicator, scopes.join(' '))
		const grantId = await grant.save()
		return this.finish(found, { consent: { grantId } }, true)
	}
}

function missingScopes(details: Details): string[] {
	const missing = details.prompt.details as { missingOIDCScope?: string[]; missingResourceScopes?: Record<string, string[]> }
	return [...new Set([...(missing.missingOIDCScope ?? []), ...Object.values(missing.missingResourceScopes ?? {}).flat()])]
}

/** The sign-in page's query: the way back here, and what the request asked of the sign-in. */
function signInQuery(details: Details, uid: string, mustSignInAgain: boolean, stepUp: boolean) {
	const query = new URLSearchParams({ return_to: `${INTERACTION_PATH}/${uid}` })
	const { login_hint: hint, ui_locales: locales, client_id: clientId } = details.params
	if (typeof hint === 'string') query.set('login_hint', hint)
	if (typeof locales === 'string') query.set('ui_locales', locales)
	if (typeof clientId === 'string') query.set('client_id', clientId)
	if (mustSignInAgain) query.set('prompt', 'login')
	if (stepUp) query.set('acr', 'aal2')
	return query
}
