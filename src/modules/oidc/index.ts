import { Elysia, t } from 'elysia'
import type { Config } from '../../config/env'
import { isOpaqueToken, newOpaqueToken } from '../../crypto/opaque-tokens'
import type { authGuard } from '../auth/guard'
import { Envelope, problemResponses } from '../../http/openapi'
import { envelope } from '../../http/problem'
import { requestContext } from '../../http/request-context'
import { tokenResponses } from '../auth/sign-in'
import { AuthModel } from '../auth/model'
import { FactorModel } from '../factors/model'
import { OidcModel, toIdentityResource } from './model'

export { toIdentityResource }
import type { ProviderSignIn } from './service'
import { targetUserId } from '../auth/guard'
import type { UsersService } from '../users/service'

export interface OidcModuleDeps {
	signIn: ProviderSignIn
	guard: ReturnType<typeof authGuard>
	jwt: Config['jwt']
}

/** The cookie that binds a flow to the browser that started it: HttpOnly, sent back only to the callback's path. */
const BROWSER_COOKIE = 'latchkey-oidc'
const COOKIE_PATH = '/api/auth/providers'

const Redirect = t.Void({ description: 'Found: `Location` is where the browser goes next' })

/** Sign-in with OpenID Connect providers: the list, the redirect there, the callback, and the code exchange. */
export const oidcModule = ({ signIn, guard, jwt }: OidcModuleDeps) =>
	new Elysia({ name: 'oidc', prefix: '/auth', detail: { tags: ['Identity providers'] } })
		.use(tokenResponses({ guard, jwt }))
		.use(requestContext)
		.get('/providers', () => envelope({ items: signIn.list() }, 'Identity providers'), {
			response: { 200: Envelope(OidcModel.providers), ...problemResponses(429) },
			detail: { operationId: 'listProviders', summary: 'The identity providers one can sign in with', security: [] },
		})
		.get(
			'/providers/:provider/authorization',
			async ({ params, query, cookie, request, set }) => {
				const origin = new URL(request.url).origin
				// One secret per browser, reused by its parallel flows (two tabs), so that neither evicts the other.
				const existing = cookie[BROWSER_COOKIE]?.value
				const secret = isOpaqueToken(existing) ? existing : newOpaqueToken()
				const location = await signIn.start(params.provider, query, secret, origin)
				cookie[BROWSER_COOKIE]?.set({ value: secret, httpOnly: true, sameSite: 'lax', path: COOKIE_PATH, maxAge: 600, secure: signIn.callbackUrl(params.provider, origin).startsWith('https:') })
				set.status = 302
				set.headers.location = location
			},
			{
				params: OidcModel.providerParams,
				query: OidcModel.authorizationQuery,
				response: { 302: Redirect, ...problemResponses(400, 'redirect-not-allowed', 404, 422, 429, 503) },
				detail: {
					operationId: 'startProviderSignIn',
					summary: 'Go to the provider to sign in (302)',
					description:
						'Open this in the browser (a top-level navigation). The frontend makes a PKCE verifier, keeps it, and sends its S256 challenge; the callback returns to `redirectTo` with a one-time `code` for POST /auth/sessions. A `redirectTo` outside REDIRECT_URLS is 400, with no redirect (`{PUBLIC_URL}/sign-in/provider/callback`, the /sign-in page’s own return, is always admitted). A provider that cannot be reached sends the browser to `redirectTo` with `error=provider-unavailable`.',
					security: [],
				},
			},
		)
		.get(
			'/providers/:provider/callback',
			async ({ params, query, cookie, request, client, set }) => {
				const origin = new URL(request.url).origin
				const secret = cookie[BROWSER_COOKIE]?.value
				set.status = 302
				set.headers.location = await signIn.callback(params.provider, query, typeof secret === 'string' ? secret : undefined, origin, client)
			},
			{
				params: OidcModel.providerParams,
				query: OidcModel.callbackQuery,
				response: { 302: Redirect, ...problemResponses(400, 404, 422, 429, 503) },
				detail: {
					operationId: 'providerCallback',
					summary: 'Where the provider sends the browser back (302 to the frontend)',
					description:
						'Register `{PUBLIC_URL}/api/auth/providers/{provider}/callback` at the provider. Every outcome is a redirect to the flow’s `redirectTo`: with `code`, or with `error` (`invalid-state`, `access-denied`, `provider-error`, `provider-unavailable`, `invalid-response`, `email-required`, `invalid-email`, `account-exists`, `account-deactivated`, `signup-disabled`, `identity-in-use`, `server-error`) and `error_description`. The provider’s claims are checked as POST /users checks a sign-up: an address that is not a valid email (the same schema: at most 254 characters, 64 before the @, ASCII, a dotted domain) ends the flow with `invalid-email` and creates no account and no identity — also for an identity already linked, and when linking; the name is put on one line without control characters and cut to 200 characters.',
					security: [],
				},
			},
		)
		.post(
			'/sessions',
			async ({ body, client, tokenResponse }) => {
				const outcome = await signIn.exchange(body.code, body.codeVerifier, client)
				return 'mfaRequired' in outcome ? envelope(outcome, 'Signed in at the provider; a second factor is required') : envelope(await tokenResponse(outcome), 'Logged in')
			},
			{
				body: OidcModel.session,
				response: { 200: Envelope(t.Union([AuthModel.tokens, FactorModel.secondFactorOwed])), ...problemResponses(400, 'invalid-code', 413, 415, 422, 429, 503) },
				detail: {
					operationId: 'createSessionFromProvider',
					summary: 'Exchange the one-time code of a provider sign-in for tokens',
					description: 'The code lives 60 seconds, works once, and only with the verifier of the challenge the flow started with. An account with an active second factor answers `mfaRequired` as a password login does.',
					security: [],
				},
			},
		)

/** The identities of an account: linking one (a signed-in user), listing and unlinking them. */
export const identitiesModule = ({ signIn, users, guard }: { signIn: ProviderSignIn; users: Pick<UsersService, 'get'>; guard: ReturnType<typeof authGuard> }) =>
	new Elysia({ name: 'identities', prefix: '/users', detail: { tags: ['Identity providers'] } })
		.use(guard)
		.use(requestContext)
		.post(
			'/me/identities',
			async ({ body, caller, request }) =>
				envelope({ authorizationUrl: await signIn.startLink(caller, body, new URL(request.url).origin) }, 'Open the authorization URL in the browser'),
			{
				auth: 'user',
				body: OidcModel.link,
				response: { 200: Envelope(OidcModel.linkStarted), ...problemResponses(400, 'redirect-not-allowed', 401, 'mfa-required', 'reauthentication-required', 404, 413, 415, 422, 429, 'provider-unavailable', 503) },
				detail: {
					operationId: 'linkProvider',
					summary: 'Start linking a provider to the signed-in account',
					description:
						'The frontend keeps the PKCE verifier of `codeChallenge`. After the provider, the browser lands on `redirectTo` with `code`; POST /auth/sessions with the code and the verifier links the identity (and signs in). An identity already linked to another account ends with `error=identity-in-use`. The link completes only while the session that started it lives: one revoked meanwhile (a logout, a recovery, a proved address) ends the flow with `error=invalid-state`, or its code with `400 invalid-code`. A way in: needs a session signed in or checked (POST /auth/reauthentication) within REAUTHENTICATION_SECONDS (default 5 minutes), else 403 `reauthentication-required`, and `aal2` once the account has a second factor. Linking sends a notice to the account’s address.',
				},
			},
		)
		.get(
			'/:id/identities',
			async ({ params, caller }) => {
				const userId = targetUserId(params.id, caller)
				if (userId !== caller.user.id) await users.get(userId)
				return envelope({ items: (await signIn.identitiesOf(userId)).map(toIdentityResource) }, 'Identities')
			},
			{
				auth: 'self',
				params: t.Object({ id: OidcModel.identityParams.properties.id }),
				response: { 200: Envelope(OidcModel.identities), ...problemResponses(401, 403, 404, 422, 429, 503) },
				detail: { operationId: 'listIdentities', summary: "An account's identities at providers (the user themself, or an admin)" },
			},
		)
		.delete(
			'/:id/identities/:identityId',
			async ({ params, caller, client }) =>
				envelope(toIdentityResource(await signIn.unlink(caller, targetUserId(params.id, caller), params.identityId, client)), 'Identity unlinked'),
			{
				auth: 'self',
				params: OidcModel.identityParams,
				response: { 200: Envelope(OidcModel.identity), ...problemResponses(401, 403, 'mfa-required', 404, 409, 422, 429, 503) },
				detail: {
					operationId: 'unlinkIdentity',
					summary: 'Unlink an identity (never the last way to sign in)',
					description: '`409` when the account would have no password, no other identity and no passkey left. The user needs `aal2` once a second factor is active; an admin does not.',
				},
			},
		)
