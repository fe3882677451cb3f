import { Elysia } from 'elysia'
import { STANDARD_FORMAT_EXTENSION } from '../../http/openapi'
import { toFetchResponse } from 'fetch-to-node'
import type Provider from 'oidc-provider'
import { nodeShaped, type Interactions } from './interactions'
import { INTERACTION_PATH, PREFILLED_USER_CODE } from './provider'
import type { SingleSignOn } from './single-sign-on'
import type { UserinfoShortcut } from './userinfo'

/*
 * The OpenID Provider's endpoints under Latchkey's HTTP layer. The library is a Koa application, written for
 * Node's request and response; `fetch-to-node` hands it a Node-shaped pair made from the fetch Request Elysia
 * gives, and turns its answer back into a Response. The request reaches it as the issuer's URL (whatever Host
 * the client sent), from the client address Latchkey decided, over https exactly when the issuer is.
 */

/** Paths the library answers (its errors are the protocol's own JSON, RFC 6749 §5.2, not problem+json). */
export const isProtocolPath = (pathname: string) =>
	pathname.startsWith('/oauth2/') ||
	pathname === '/.well-known/openid-configuration' ||
	pathname === '/.well-known/oauth-authorization-server' ||
	pathname === DEVICE_PATH ||
	pathname.startsWith(`${DEVICE_PATH}/`)

/** RFC 8628's verification page, where a person enters the code a device shows (the library's, in Latchkey's look). */
const DEVICE_PATH = '/device'

const DISCOVERY = '/.well-known/openid-configuration'

export interface ProtocolDeps {
	/** The provider, loaded on first use (a deployment that never uses it never pays for it). */
	provider: () => Promise<Provider>
	issuer: string
	interactions: Interactions
	/** The headers of the pages (their CSP above all), for the HTML the library answers with (its pages, its errors). */
	htmlHeaders: Record<string, string>
	/** `GET /oauth2/userinfo` in its plain case, answered without the library (userinfo.ts). */
	userinfo: UserinfoShortcut
	/** A signed-in browser's `prompt=none` authorization in its plain case, answered without the library (single-sign-on.ts). */
	singleSignOn: SingleSignOn
}

/** What the library answers Node's requests with. */
type NodeHandler = ReturnType<Provider['callback']>

/** The Node-shaped request and response for the library, and the Response it ends up writing. */
async function handOver(handler: NodeHandler, issuer: URL, request: Request, body: ArrayBuffer | undefined, pathname = new URL(request.url).pathname) {
	const url = new URL(request.url)
	const headers = new Headers(request.headers)
	headers.set('host', issuer.host)
	// Who the client is and how it came were decided by Latchkey's own layer (TRUST_PROXY): nothing forwarded is read again.
	for (const name of ['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'forwarded', PREFILLED_USER_CODE]) headers.delete(name)
	// A device's link with its code: the code fills in the page's form rather than the library's self-posting one
	// (inline script, which the pages' CSP forbids).
	if (request.method === 'GET' && pathname === DEVICE_PATH && url.searchParams.has('user_code')) {
		headers.set(PREFILLED_USER_CODE, url.searchParams.get('user_code') ?? '')
		url.searchParams.delete('user_code')
	}
	const hasBody = body !== undefined && body.byteLength > 0
	// The library asks for a length before it reads a body (type-is): the bytes are all here, so it is known.
	if (hasBody) headers.set('content-length', String(body.byteLength))
	else headers.delete('content-length')
	const forwarded = new Request(new URL(pathname + url.search, issuer).href, { method: request.method, headers, body: hasBody ? body : undefined })
	const { req, res } = nodeShaped(forwarded, issuer, request)
	handler(req, res)
	return toFetchResponse(res)
}

const TAG = 'OpenID Provider'
const OAuthError = {
	type: 'object',
	required: ['error'],
	properties: { error: { type: 'string', examples: ['invalid_grant'] }, error_description: { type: 'string' } },
	description: 'RFC 6749 §5.2: the protocol\'s own error format (not problem+json)',
} as const
const json = (description: string) => ({ description, content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } } })
const html = (description: string) => ({ description, content: { 'text/html': { schema: { type: 'string' } } } })
const redirect = (description: string) => ({ description, headers: { Location: { description: 'where the browser goes next', schema: { type: 'string', format: 'uri' } } } })
const oauthError = (description: string) => ({ description, content: { 'application/json': { schema: OAuthError } } })
/** The credential endpoints count against the `/auth` budget (API.md, Limits); a spent one is answered in the protocol's format (rate-limit.ts). */
const budgetSpent = {
	description: 'the `/auth` budget of this address or of this client is spent: `slow_down` to a device polling for its token (RFC 8628 §3.5: wait longer between polls), `temporarily_unavailable` otherwise',
	headers: { 'Retry-After': { $ref: '#/components/headers/Retry-After' } },
	content: { 'application/json': { schema: OAuthError } },
}
const form = (fields: string) => ({
	required: true,
	content: { 'application/x-www-form-urlencoded': { schema: { type: 'object', additionalProperties: { type: 'string' }, description: fields } } },
})

/** An endpoint of the standards, described for the OpenAPI document (its parameters are the standard's own). */
const documented = (operationId: string, summary: string, description: string, given: Record<string, unknown>, requestBody?: unknown) => {
	const failures = Object.keys(given).some((status) => status.startsWith('4'))
	const responses = failures ? given : { ...given, 400: oauthError('the request is not valid (RFC 6749 §5.2), or an error page') }
	return { detail: { tags: [TAG], operationId, summary, description, security: [], responses, [STANDARD_FORMAT_EXTENSION]: true, ...(requestBody ? { requestBody } : {}) } as never }
}

export const protocolModule = ({ provider, issuer, interactions, htmlHeaders, userinfo, singleSignOn }: ProtocolDeps) => {
	const issuerUrl = new URL(issuer)
	// Made once, on the first request: Koa composes its middleware into this handler.
	let made: Promise<NodeHandler> | undefined
	const handler: NodeHandler = async (req, res) => (await (made ??= provider().then((loaded) => loaded.callback())))(req, res)
	const asPage = (response: Response) => {
		if (response.headers.get('content-type')?.startsWith('text/html')) for (const [name, value] of Object.entries(htmlHeaders)) response.headers.set(name, value)
		return response
	}
	const callback = (pathname?: string) => async ({ request, body }: { request: Request; body: unknown }) =>
		asPage(await handOver(handler, issuerUrl, request, body instanceof ArrayBuffer ? body : undefined, pathname))
	const authorizationDoc = (operationId: string) =>
		documented(
			operationId,
			'Authorization endpoint (code flow with PKCE S256)',
			'OpenID Connect Core 1.0 §3.1.2 on OAuth 2.1: `response_type=code`, `code_challenge` with `S256`, `state`, `nonce`, `prompt`, `max_age`, `login_hint`, `acr_values`, `ui_locales`, `claims`, `resource`. Redirects to the client with `code`, `state` and `iss` (RFC 9207), or to the sign-in and consent pages; an unknown client or redirect URI is an error page, never a redirect.',
			{ 303: redirect('to the client, or to a page'), 400: html('an error page (unknown client, bad redirect URI)') },
		)
	return (
		new Elysia({ name: 'oauth-protocol', normalize: false })
			.get(DISCOVERY, callback(), documented('openIdConfiguration', 'OpenID Connect Discovery document', 'OpenID Connect Discovery 1.0.', { 200: json('the provider\'s metadata') }))
			// RFC 8414's document is the same as OpenID Connect Discovery's (API.md: both documents alike).
			.get('/.well-known/oauth-authorization-server', callback(DISCOVERY), documented('oauthAuthorizationServerMetadata', 'OAuth 2.0 Authorization Server Metadata', 'RFC 8414; the same document as OpenID Connect Discovery.', { 200: json('the provider\'s metadata') }))
			.get('/oauth2/authorization', async (context) => (await singleSignOn.answer(context.request)) ?? callback()(context), authorizationDoc('authorize'))
			.post('/oauth2/authorization', callback(), authorizationDoc('authorizeByPost'))
			.get('/oauth2/authorization/:uid', callback(), documented('resumeAuthorization', 'Authorization, resumed after a page', 'Where the pages send the browser back once it signed in or consented.', { 303: redirect('to the client') }))
			// Where the library sends a browser that must sign in, step up or consent (interactions.ts).
			.get(`${INTERACTION_PATH}/:uid`, ({ request, params }) => interactions.next(request, params.uid), documented('continueInteraction', 'The next step of an authorization', 'Finishes what the browser\'s session already satisfies, or sends it to /sign-in or /consent.', { 303: redirect('to the provider or a page') }))
			.post('/oauth2/token', callback(), documented('token', 'Token endpoint', '`authorization_code` (with `code_verifier`), `refresh_token` (rotated; a rotated one used again ends the grant), `client_credentials`, `urn:ietf:params:oauth:grant-type:device_code`. Clients authenticate with `client_secret_basic`, `client_secret_post`, `private_key_jwt`, or none (public clients).', { 200: json('RFC 6749 §5.1 token response'), 400: oauthError('RFC 6749 §5.2'), 401: oauthError('invalid_client'), 429: budgetSpent }, form('grant_type and the grant\'s parameters')))
			.get('/oauth2/userinfo', async (context) => (await userinfo.answer(context.request)) ?? callback()(context), documented('userinfo', 'UserInfo endpoint', 'OpenID Connect Core 1.0 §5.3: the claims of the access token\'s scopes.', { 200: json('the claims'), 401: oauthError('invalid_token') }))
			.post('/oauth2/userinfo', callback(), documented('userinfoByPost', 'UserInfo endpoint (POST)', 'OpenID Connect Core 1.0 §5.3.', { 200: json('the claims'), 401: oauthError('invalid_token') }))
			.post('/oauth2/revocation', callback(), documented('revoke', 'Token revocation', 'RFC 7009: a client revokes its own tokens (public clients too).', { 200: { description: 'revoked, or unknown' }, 401: oauthError('invalid_client'), 429: budgetSpent }, form('token, token_type_hint')))
			// RFC 7662 for confidential clients and resource servers: a client that does not authenticate (a public
			// one) is refused as the library would refuse a wrong secret, rather than told `active: false`.
			.post(
				'/oauth2/introspection',
				({ request, body }) => {
					const fields = new URLSearchParams(body instanceof ArrayBuffer ? new TextDecoder().decode(body) : '')
					if (!request.headers.has('authorization') && !fields.has('client_secret') && !fields.has('client_assertion'))
						return Response.json({ error: 'invalid_client', error_description: 'client authentication failed' }, { status: 401 })
					return handOver(handler, issuerUrl, request, body instanceof ArrayBuffer ? body : undefined)
				},
				documented('introspect', 'Token introspection', 'RFC 7662, for confidential clients and resource servers; a public client is refused (`invalid_client`).', { 200: json('RFC 7662 §2.2'), 401: oauthError('invalid_client'), 429: budgetSpent }, form('token, token_type_hint')),
			)
			.post('/oauth2/device-authorization', callback(), documented('deviceAuthorization', 'Device authorization', 'RFC 8628 §3.1: a device code and a user code to show, with /device to enter it.', { 200: json('RFC 8628 §3.2'), 400: oauthError('RFC 6749 §5.2'), 401: oauthError('invalid_client'), 429: budgetSpent }, form('client_id, scope')))
			.post('/oauth2/par', callback(), documented('pushAuthorizationRequest', 'Pushed authorization request', 'RFC 9126.', { 201: json('request_uri and expires_in'), 400: oauthError('RFC 6749 §5.2'), 401: oauthError('invalid_client') }, form('the authorization request\'s parameters')))
			.get('/oauth2/logout', callback(), documented('endSession', 'RP-initiated logout', 'OpenID Connect RP-Initiated Logout 1.0: `id_token_hint`, `post_logout_redirect_uri` (registered), `state`, `client_id`. Asks the person on a page.', { 200: html('the sign-out page'), 400: html('an error page') }))
			.post('/oauth2/logout/confirm', callback(), documented('confirmEndSession', 'RP-initiated logout, answered', 'The sign-out page\'s form: `logout=yes` ends the Latchkey session (and tells clients with a back-channel logout URI).', { 303: redirect('to the post-logout URI or /oauth2/logout/success') }, form('xsrf, logout')))
			.get('/oauth2/logout/success', callback(), documented('endSessionSuccess', 'Signed out', 'The page after a sign-out with no post-logout URI.', { 200: html('the signed-out page') }))
			.post('/oauth2/registration', callback(), documented('registerClient', 'Dynamic client registration', 'RFC 7591; open only with OAUTH_DYNAMIC_REGISTRATION=true.', { 201: json('the client\'s metadata'), 400: oauthError('invalid_client_metadata') }))
			.get(DEVICE_PATH, callback(), documented('deviceVerification', 'Enter a device\'s code', 'RFC 8628 §3.3: the page where a person enters the code a device shows (`user_code` in the query fills it in).', { 200: html('the page') }))
			.post(DEVICE_PATH, callback(), documented('deviceVerificationAnswer', 'A device\'s code, entered or allowed', 'The page\'s forms.', { 200: html('the next page') }, form('xsrf, user_code, confirm or abort')))
			.get(`${DEVICE_PATH}/:uid`, callback(), documented('resumeDeviceVerification', 'Device verification, resumed after a page', 'Where the pages send the browser back once it signed in or consented.', { 200: html('the result page') }))
	)
}
