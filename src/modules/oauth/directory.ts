import { and, eq, gt, isNull, sql } from 'drizzle-orm'
import type { AdapterPayload } from 'oidc-provider'
import type { Database } from '../../db/client'
import { oauthClients, oauthConsents, sessions, users, type OAuthClientRow } from '../../db/schema'
import { digestOf, isOpaqueToken, newOpaqueToken } from '../../crypto/opaque-tokens'
import { isNativeApp, type OAuthClients } from './clients'
import type { BrowserSession, BrowserSessions } from './provider'

/*
 * What the provider reads of Latchkey's own records: clients (as the library's metadata), their secrets'
 * digests, and remembered consents.
 */

/**
 * The stand-in for a confidential client's secret, one per process: the library keeps the clients it made by a
 * digest of their metadata, so metadata that stays the same is a client made once, not at every request.
 */
const STAND_IN_SECRET = newOpaqueToken()

/**
 * The library's view of a client. A confidential client's secret is never known here (only its digest): the
 * library is given a random stand-in that satisfies its metadata rules, and its comparison is replaced by
 * `verifySecret` (provider.ts); no algorithm that would key on the secret (HS256, client_secret_jwt) is enabled.
 */
export function clientMetadata(client: OAuthClientRow): AdapterPayload {
	const usesSecret = client.tokenEndpointAuthMethod === 'client_secret_basic' || client.tokenEndpointAuthMethod === 'client_secret_post'
	return {
		client_id: client.clientId,
		client_name: client.name,
		application_type: isNativeApp(client.type, client.redirectUris) ? 'native' : 'web',
		redirect_uris: client.redirectUris,
		post_logout_redirect_uris: client.postLogoutRedirectUris,
		grant_types: client.grantTypes,
		response_types: client.grantTypes.includes('authorization_code') ? ['code'] : [],
		scope: client.scopes.join(' '),
		token_endpoint_auth_method: client.tokenEndpointAuthMethod,
		id_token_signed_response_alg: client.idTokenSignedResponseAlg ?? 'RS256',
		...(usesSecret ? { client_secret: STAND_IN_SECRET } : {}),
		...(client.jwksUri ? { jwks_uri: client.jwksUri } : {}),
		...(client.logoUri ? { logo_uri: client.logoUri } : {}),
		...(client.backchannelLogoutUri ? { backchannel_logout_uri: client.backchannelLogoutUri, backchannel_logout_session_required: true } : {}),
	}
}

/**
 * What the provider reads of Latchkey's own records: clients as the library's metadata (the admin resource's
 * service finds them and checks their secrets), and consents remembered.
 */
export class OAuthDirectory {
	constructor(
		private readonly db: Database,
		private readonly clients: Pick<OAuthClients, 'findActive' | 'verifySecret'>,
	) {}

	async metadataOf(clientId: string): Promise<AdapterPayload | undefined> {
		const client = await this.clients.findActive(clientId)
		return client && clientMetadata(client)
	}

	async isFirstParty(clientId: string): Promise<boolean> {
		return (await this.clients.findActive(clientId))?.firstParty ?? false
	}

	verifySecret(clientId: string, secret: string): Promise<boolean> {
		return this.clients.verifySecret(clientId, secret)
	}

	async remembered(userId: string, clientId: string): Promise<string[]> {
		const [consent] = await this.db
			.select({ scopes: oauthConsents.scopes })
			.from(oauthConsents)
			.innerJoin(oauthClients, eq(oauthClients.id, oauthConsents.clientId))
			.where(and(eq(oauthConsents.userId, userId), eq(oauthClients.clientId, clientId)))
			.limit(1)
		return consent?.scopes ?? []
	}
}
