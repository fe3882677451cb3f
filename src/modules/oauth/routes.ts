import { Elysia } from 'elysia'
import type { authGuard } from '../auth/guard'
import { targetUserId } from '../auth/guard'
import { Envelope, problemResponses, withResponseHeaders } from '../../http/openapi'
import { nextPageLink } from '../../http/pagination'
import { envelope } from '../../http/problem'
import { requestContext } from '../../http/request-context'
import type { OAuthClients } from './clients'
import type { OAuthConsents } from './consents'
import { CONSOLE_CLIENT_ID, ConsentModel, OAuthClientModel } from './model'

export interface OAuthClientsModuleDeps {
	clients: OAuthClients
	consents: OAuthConsents
	guard: ReturnType<typeof authGuard>
}

const ADMIN = 'admin' as const
const CLIENT_RULES =
	'Redirect URIs (and post-logout ones) are absolute, without a fragment, https or http on a loopback host (127.0.0.1, [::1], localhost); a public client may also use a private-use scheme (`com.example.app:/callback`, RFC 8252) when it is a native app: every redirect URI loopback or private-use (beside an https one, the client is a web client and may not). A public client authenticates with `none` (PKCE alone) and may not use `client_credentials`; a confidential one must authenticate (`client_secret_basic`, `client_secret_post`, or `private_key_jwt` with a `jwksUri`). `backchannelLogoutUri` and `jwksUri` follow the webhook URL rules. Every rule broken is named in the 422.'

const clientRoutes = ({ clients, guard }: OAuthClientsModuleDeps) =>
	new Elysia({ name: 'oauth-clients-admin', prefix: '/oauth-clients', detail: { tags: ['OAuth clients'] } })
		.use(guard)
		.use(requestContext)
		.post(
			'',
			async ({ body, caller, client, set }) => {
				const created = await clients.create(body, caller, client)
				set.status = 201
				set.headers.location = `/api/oauth-clients/${created.id}`
				return envelope(created, created.clientSecret ? 'OAuth client created; keep the secret, it is not shown again' : 'OAuth client created')
			},
			{
				auth: ADMIN,
				body: OAuthClientModel.create,
				response: { 201: withResponseHeaders(Envelope(OAuthClientModel.created), 'Location'), ...problemResponses(400, 401, 403, 413, 415, 422, 429) },
				detail: {
					operationId: 'createOAuthClient',
					summary: 'Register an OAuth client (admins)',
					description: `A confidential client's \`clientSecret\` (256 random bits) is in this answer and never again: only its SHA-256 digest is stored. \`clientId\` is generated. ${CLIENT_RULES}`,
				},
			},
		)
		.get(
			'',
			async ({ query, set }) => {
				const page = await clients.list(query)
				if (page.nextCursor) set.headers.link = nextPageLink('/api/oauth-clients', query, page.nextCursor)
				return envelope(page, 'OAuth clients')
			},
			{
				auth: ADMIN,
				query: OAuthClientModel.listQuery,
				response: { 200: withResponseHeaders(Envelope(OAuthClientModel.page), 'Link'), ...problemResponses(400, 401, 403, 422, 429) },
				detail: {
					operationId: 'listOAuthClients',
					summary: 'List OAuth clients, newest first (admins)',
					description: `Keyset pages; a \`Link\` header with \`rel="next"\` points at the next page while there is one. The console's own client (\`${CONSOLE_CLIENT_ID}\`) is listed too.`,
				},
			},
		)
		.get('/:id', async ({ params }) => envelope(await clients.get(params.id), 'OAuth client'), {
			auth: ADMIN,
			params: OAuthClientModel.idParams,
			response: { 200: Envelope(OAuthClientModel.client), ...problemResponses(401, 403, 404, 422, 429) },
			detail: { operationId: 'getOAuthClient', summary: 'An OAuth client (admins)', description: 'Never with a secret.' },
		})
		.put('/:id', async ({ params, body, caller, client }) => envelope(await clients.replace(params.id, body, caller, client), 'OAuth client updated'), {
			auth: ADMIN,
			params: OAuthClientModel.idParams,
			body: OAuthClientModel.replace,
			response: { 200: Envelope(OAuthClientModel.client), ...problemResponses(400, 401, 403, 404, 413, 415, 422, 429) },
			detail: {
				operationId: 'replaceOAuthClient',
				summary: 'Replace an OAuth client’s settings (admins)',
				description: `Members left out take their defaults; \`type\` stays what the client was made as. \`status: "disabled"\` does what DELETE does; \`"active"\` enables a disabled client again (a confidential one then needs a new secret: POST …/secrets). The console's own client (\`${CONSOLE_CLIENT_ID}\`) is built in: 403. ${CLIENT_RULES}`,
			},
		})
		.delete('/:id', async ({ params, caller, client }) => envelope(await clients.disable(params.id, caller, client), 'OAuth client disabled'), {
			auth: ADMIN,
			params: OAuthClientModel.idParams,
			response: { 200: Envelope(OAuthClientModel.client), ...problemResponses(401, 403, 404, 422, 429) },
			detail: {
				operationId: 'disableOAuthClient',
				summary: 'Disable an OAuth client (admins)',
				description: `Never removes it: \`status\` becomes \`disabled\`, its secrets are void, its tokens, codes and grants are deleted and it can get no new ones. Repeating it returns the same client. The console's own client (\`${CONSOLE_CLIENT_ID}\`) is built in: 403.`,
			},
		})
		.post(
			'/:id/secrets',
			async ({ params, caller, client, set }) => {
				const secret = await clients.rotateSecret(params.id, caller, client)
				set.status = 201
				// The client the new secret belongs to.
				set.headers.location = `/api/oauth-clients/${params.id}`
				return envelope(secret, 'New client secret; the previous one works for 24 hours more')
			},
			{
				auth: ADMIN,
				params: OAuthClientModel.idParams,
				response: { 201: withResponseHeaders(Envelope(OAuthClientModel.secret), 'Location'), ...problemResponses(401, 403, 404, 'conflict', 422, 429) },
				detail: {
					operationId: 'rotateOAuthClientSecret',
					summary: 'Give a confidential client a new secret (admins)',
					description:
						'The new `clientSecret` is in this answer and never again. The previous secret keeps working for 24 hours, so the client can switch without an outage; one left from an earlier rotation stops now. A public client has no secret: 409.',
				},
			},
		)

const consentRoutes = ({ consents, guard }: OAuthClientsModuleDeps) =>
	new Elysia({ name: 'oauth-consents', prefix: '/users/:id/consents', detail: { tags: ['Users'] } })
		.use(guard)
		.use(requestContext)
		.get('', async ({ params, caller }) => envelope({ items: await consents.list(targetUserId(params.id, caller)) }, 'Consents'), {
			auth: 'self',
			params: ConsentModel.userParams,
			response: { 200: Envelope(ConsentModel.list), ...problemResponses(401, 403, 404, 422, 429) },
			detail: {
				operationId: 'listConsents',
				summary: "An account's consents to OAuth clients (the user themself, or an admin)",
				description: 'What the user allowed each client, remembered so that the consent page asks only for new scopes. First-party clients ask no consent and are not listed.',
			},
		})
		.delete(
			'/:clientId',
			async ({ params, caller, client }) => envelope(await consents.revoke(targetUserId(params.id, caller), params.clientId, caller, client), 'Consent revoked'),
			{
				auth: 'self',
				params: ConsentModel.params,
				response: { 200: Envelope(ConsentModel.consent), ...problemResponses(401, 403, 404, 422, 429) },
				detail: {
					operationId: 'revokeConsent',
					summary: 'Withdraw a consent (the user themself, or an admin)',
					description:
						'`{clientId}` is the OAuth `client_id`. The client’s refresh and access tokens, grants and pending codes for this user are deleted with it: it must ask again. Answers with the consent as it was.',
				},
			},
		)

/** Admins' OAuth clients (applications that sign their users in through Latchkey), and users' consents to them. */
export const oauthClientsModule = (deps: OAuthClientsModuleDeps) =>
	new Elysia({ name: 'oauth-clients' }).use(clientRoutes(deps)).use(consentRoutes(deps))
