import type { TLiteral } from '@sinclair/typebox'
import { t } from 'elysia'
import { AccountId, Id, IssuedId } from '../../http/ids'
import { queryInteger } from '../../http/problem'
import type { OAuthClientRow } from '../../db/schema'

/** Literal schemas of a list of strings, each keeping its own type. */
const literals = <const T extends readonly string[]>(values: T) => values.map((value) => t.Literal(value)) as { -readonly [K in keyof T]: TLiteral<T[K]> }

export const CLIENT_TYPES = ['public', 'confidential'] as const
export const GRANT_TYPES = ['authorization_code', 'refresh_token', 'client_credentials', 'urn:ietf:params:oauth:grant-type:device_code'] as const
export const SCOPES = ['openid', 'profile', 'email', 'offline_access', 'organizations'] as const
export const TOKEN_ENDPOINT_AUTH_METHODS = ['none', 'client_secret_basic', 'client_secret_post', 'private_key_jwt'] as const
export const ID_TOKEN_ALGORITHMS = ['RS256', 'ES256', 'EdDSA'] as const
export const CLIENT_STATUSES = ['active', 'disabled'] as const

/** The console's own client: built in, listed, never changed or removed through the API. */
export const CONSOLE_CLIENT_ID = 'latchkey-console'

/** What an OAuth `client_id` may look like in a path: the URL-safe characters (RFC 3986 unreserved). */
export const CLIENT_ID_PATTERN = '^[A-Za-z0-9._~-]{1,128}$'

const Timestamp = t.String({ format: 'date-time' })
/** The message of a value outside a list, naming the list. */
const mustBeOneOf = (values: readonly string[]) => `must be one of ${values.map((value) => JSON.stringify(value)).join(', ')}`

const Type = t.Union(literals(CLIENT_TYPES), {
	error: mustBeOneOf(CLIENT_TYPES),
	description: '`public`: a browser or native app that can keep no secret (PKCE only); `confidential`: a server that authenticates at the token endpoint',
})
const GrantType = t.Union(literals(GRANT_TYPES), { error: mustBeOneOf(GRANT_TYPES) })
const Scope = t.Union(literals(SCOPES), { error: mustBeOneOf(SCOPES) })
const AuthMethod = t.Union(literals(TOKEN_ENDPOINT_AUTH_METHODS), {
	error: mustBeOneOf(TOKEN_ENDPOINT_AUTH_METHODS),
	description:
		'how the client authenticates at the token endpoint: `none` for public clients (and only for them), a secret (HTTP Basic or in the body) or a JWT signed with a key at `jwksUri` for confidential ones',
})
const Algorithm = t.Union(literals(ID_TOKEN_ALGORITHMS), { error: mustBeOneOf(ID_TOKEN_ALGORITHMS), description: 'how its ID tokens are signed; RS256 when unset' })
const Status = t.Union(literals(CLIENT_STATUSES), { error: mustBeOneOf(CLIENT_STATUSES), description: '`disabled`: its tokens are refused and its secrets void' })

const Uri = (description: string, examples: string[]) => t.String({ minLength: 1, maxLength: 2048, description, examples })
const RedirectUri = Uri(
	'absolute, without a fragment; https, or http on a loopback host (127.0.0.1, [::1], localhost); a public (native) client may use a private-use scheme such as `com.example.app:/callback`',
	['https://app.example.com/callback'],
)
const RedirectUris = (description: string) => t.Array(RedirectUri, { maxItems: 20, uniqueItems: true, description })
const Name = t.String({ minLength: 1, maxLength: 100, pattern: '^[^\\u0000-\\u001f\\u007f]*$', description: 'shown on the consent page', examples: ['Acme Dashboard'] })

/** The members a client is made and replaced with (type aside, which stays what it was made as). */
const editable = {
	name: Name,
	redirectUris: t.Optional(RedirectUris('where the authorization answer may go; matched exactly (a public client’s loopback URIs accept any port)')),
	postLogoutRedirectUris: t.Optional(RedirectUris('where RP-initiated logout may send the browser back to')),
	backchannelLogoutUri: t.Optional(Uri('receives back-channel logout tokens; follows the webhook URL rules (https, never a private or metadata address)', ['https://app.example.com/backchannel-logout'])),
	grantTypes: t.Optional(
		t.Array(GrantType, {
			minItems: 1,
			maxItems: GRANT_TYPES.length,
			uniqueItems: true,
			description: '`client_credentials` for confidential clients only; default `["authorization_code", "refresh_token"]`',
		}),
	),
	scopes: t.Optional(t.Array(Scope, { maxItems: SCOPES.length, uniqueItems: true, description: 'the scopes it may ask for; default `["openid", "profile", "email", "offline_access"]`' })),
	tokenEndpointAuthMethod: t.Optional(AuthMethod),
	jwksUri: t.Optional(Uri('its public keys, for `private_key_jwt` (required with it); follows the webhook URL rules', ['https://app.example.com/.well-known/jwks.json'])),
	firstParty: t.Optional(t.Boolean({ description: 'the operator’s own app: its users are not asked for consent; default false' })),
	idTokenSignedResponseAlg: t.Optional(Algorithm),
	logoUri: t.Optional(Uri('an https image shown on the consent page', ['https://app.example.com/logo.png'])),
}

export namespace OAuthClientModel {
	export const client = t.Object({
		id: IssuedId(),
		clientId: t.String({ description: 'the OAuth `client_id`', examples: ['yB3c0lHnK2v8W1pQm4sT9a'] }),
		name: t.String(),
		type: Type,
		redirectUris: t.Array(t.String()),
		postLogoutRedirectUris: t.Array(t.String()),
		backchannelLogoutUri: t.Optional(t.String()),
		grantTypes: t.Array(GrantType),
		scopes: t.Array(Scope),
		tokenEndpointAuthMethod: AuthMethod,
		jwksUri: t.Optional(t.String()),
		firstParty: t.Boolean(),
		idTokenSignedResponseAlg: t.Optional(Algorithm),
		logoUri: t.Optional(t.String()),
		status: Status,
		createdAt: Timestamp,
	})

	export const ClientSecret = t.String({
		pattern: '^[A-Za-z0-9_-]{43}$',
		description: 'the client secret (256 random bits, base64url): shown only here, stored only as a SHA-256 digest',
		examples: ['Zp3mYcQe0W9sV2xk7uNfJ4hT1aLrB8oD6gEiKqPzXyA'],
	})

	/** The answer to a create: a confidential client carries its secret, once. */
	export const created = t.Composite([client, t.Object({ clientSecret: t.Optional(ClientSecret) })])

	export const create = t.Object({ ...editable, type: Type }, { additionalProperties: false })

	/** PUT replaces the editable representation; members left out take their defaults. `status: "active"` enables a disabled client again. */
	export const replace = t.Object(
		{
			...editable,
			status: t.Optional(
				t.Union(literals(CLIENT_STATUSES), {
					error: mustBeOneOf(CLIENT_STATUSES),
					description: '`active` enables a disabled client again (a confidential one then needs a new secret); `disabled` as DELETE does; left out, it keeps its value',
				}),
			),
		},
		{ additionalProperties: false },
	)

	export const listQuery = t.Object(
		{
			limit: t.Optional(queryInteger('limit', { minimum: 1, maximum: 100, default: 20 })),
			cursor: t.Optional(t.String({ maxLength: 512, description: 'opaque, from `nextCursor`' })),
			status: t.Optional(t.Union(literals(CLIENT_STATUSES))),
		},
		{ additionalProperties: false },
	)

	export const page = t.Object({ items: t.Array(client), nextCursor: t.Union([t.String(), t.Null()]), limit: t.Integer() })

	export const idParams = t.Object({ id: Id() })

	export const secret = t.Object({ clientSecret: ClientSecret })
}

export namespace ConsentModel {
	export const consent = t.Object({
		clientId: t.String({ description: 'the OAuth `client_id` of the client it was given to' }),
		clientName: t.String(),
		scopes: t.Array(t.String(), { examples: [['openid', 'profile', 'email']] }),
		grantedAt: t.String({ format: 'date-time', description: 'when it was given, or last widened' }),
	})

	export const list = t.Object({ items: t.Array(consent) })

	export const userParams = t.Object({ id: AccountId })
	export const params = t.Object({
		id: AccountId,
		clientId: t.String({ pattern: CLIENT_ID_PATTERN, error: 'must be an OAuth client_id', description: 'the OAuth `client_id`' }),
	})
}

export type OAuthClientResource = typeof OAuthClientModel.client.static
export type CreateOAuthClientInput = typeof OAuthClientModel.create.static
export type ReplaceOAuthClientInput = typeof OAuthClientModel.replace.static
export type ListOAuthClientsQuery = typeof OAuthClientModel.listQuery.static
export type ConsentResource = typeof ConsentModel.consent.static
export type GrantType = (typeof GRANT_TYPES)[number]
export type Scope = (typeof SCOPES)[number]

/** A client as the API shows it: the optional members only when set, never a secret. */
export function toOAuthClientResource(row: OAuthClientRow): OAuthClientResource {
	return {
		id: row.id,
		clientId: row.clientId,
		name: row.name,
		type: row.type,
		redirectUris: row.redirectUris,
		postLogoutRedirectUris: row.postLogoutRedirectUris,
		...(row.backchannelLogoutUri === null ? {} : { backchannelLogoutUri: row.backchannelLogoutUri }),
		grantTypes: row.grantTypes as GrantType[],
		scopes: row.scopes as Scope[],
		tokenEndpointAuthMethod: row.tokenEndpointAuthMethod,
		...(row.jwksUri === null ? {} : { jwksUri: row.jwksUri }),
		firstParty: row.firstParty,
		...(row.idTokenSignedResponseAlg === null ? {} : { idTokenSignedResponseAlg: row.idTokenSignedResponseAlg }),
		...(row.logoUri === null ? {} : { logoUri: row.logoUri }),
		status: row.status,
		createdAt: row.createdAt.toISOString(),
	}
}
