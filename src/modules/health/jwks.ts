import { Elysia, t } from 'elysia'
import { withResponseHeaders } from '../../http/openapi'
import type { OAuthSigningKey } from '../../crypto/oauth-signing-key'
import type { TokenKeys } from '../auth/keys'

const Jwks = t.Object({ keys: t.Array(t.Record(t.String(), t.Unknown())) }, { description: 'RFC 7517 JSON Web Key Set' })

/**
 * Public keys for verifying access tokens and the provider's ID tokens (OAUTH_SIGNING_KEY, RS256), at the server
 * root and under /api. Never a shared secret: with HS256 it holds only the retired public keys still accepted
 * (JWT_PREVIOUS_PUBLIC_KEYS), if any, beside the provider's key. Cacheable for a while: rotation keeps the
 * previous key listed longer than this.
 */
export const jwks = (keys: TokenKeys, oauthKey: OAuthSigningKey) => {
	const document = { keys: [...keys.jwks.keys, oauthKey.publicJwk] }
	return new Elysia({ name: 'jwks', seed: `${keys.kid}.${oauthKey.kid}` }).get(
		'/.well-known/jwks.json',
		({ set }) => {
			set.headers['cache-control'] = 'public, max-age=300'
			return document
		},
		{
			response: { 200: withResponseHeaders(Jwks, 'Cache-Control-Public') },
			detail: { tags: ['Keys'], summary: 'Public keys that verify access tokens and ID tokens', security: [] },
		},
	)
}
