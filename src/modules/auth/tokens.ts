import { jwt } from '@elysiajs/jwt'
import { Elysia } from 'elysia'
import type { Config } from '../../config/env'
import type { TokenKeys } from './keys'

export const ACCESS_TOKEN_TYPE = 'at+jwt'
/** Leeway for clock skew between this service and its clients' verifiers. */
export const CLOCK_TOLERANCE_SECONDS = 30

export interface AccessClaims {
	sub: string
	sid: string
	role: 'user' | 'admin'
	jti: string
}

/**
 * Two @elysiajs/jwt instances: one signs with the private (or shared) key,
 * the other verifies with the public ones, pinned to one algorithm and to
 * the RFC 9068 `typ`, issuer and audience.
 */
export const accessTokens = (keys: TokenKeys, settings: Config['jwt']) =>
	new Elysia({ name: 'access-tokens', seed: keys.kid })
		.use(
			jwt({
				name: 'accessTokenSigner',
				secret: keys.signingKey,
				alg: keys.algorithm,
				kid: keys.kid,
				typ: ACCESS_TOKEN_TYPE,
				iss: settings.issuer,
				aud: settings.audience,
				exp: `${settings.accessTtlSeconds}s`,
			}),
		)
		.use(
			jwt({
				name: 'accessTokenVerifier',
				// The plugin hands this to jose's jwtVerify, which also takes a key lookup by `kid`;
				// the plugin's type just does not say so.
				secret: keys.verificationKey as Uint8Array | CryptoKey,
				alg: keys.algorithm,
			}),
		)
		.as('scoped')

export const verifyOptions = (keys: TokenKeys, settings: Config['jwt']) => ({
	algorithms: [keys.algorithm],
	issuer: settings.issuer,
	audience: settings.audience,
	typ: ACCESS_TOKEN_TYPE,
	clockTolerance: CLOCK_TOLERANCE_SECONDS,
	requiredClaims: ['sub', 'sid', 'jti', 'exp', 'iat'],
})

/** A new opaque refresh token: 256 random bits, base64url. */
export const newRefreshToken = () => Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64url')

/** Refresh tokens are stored as SHA-256 digests; with 256 bits of entropy a slow hash adds nothing. */
export const hashRefreshToken = (token: string) => new Bun.CryptoHasher('sha256').update(token).digest('hex')
