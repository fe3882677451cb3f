import { jwt } from '@elysiajs/jwt'
import { Elysia } from 'elysia'
import type { Config } from '../../config/env'
import { digestOf, newOpaqueToken } from '../../crypto/opaque-tokens'
import type { TokenKeys } from './keys'
import type { OrganizationClaim } from './organization-claim'

export const ACCESS_TOKEN_TYPE = 'at+jwt'
/** Leeway for clock skew between this service and its clients' verifiers. */
export const CLOCK_TOLERANCE_SECONDS = 30

export interface AccessClaims {
	sub: string
	sid: string
	role: 'user' | 'admin'
	jti: string
	/** RFC 8176 methods of the session's sign-in, and the assurance level they give. */
	amr: string[]
	aal: 'aal1' | 'aal2'
	/** When the session last proved its owner (OpenID Connect Core's `auth_time`, seconds). */
	auth_time: number
	/** The session's active organization when the token was issued (API.md, Organizations); checked again on every request. */
	org?: OrganizationClaim
}

/**
 * Two @elysiajs/jwt instances: one signs with the current private (or shared)
 * key, the other verifies with the current and previous keys, each key bound
 * to its own algorithm (see `verifyOptions`), and pinned to the RFC 9068
 * `typ`, issuer and audience.
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
				// The plugin hands this to jose's jwtVerify, which also takes a key lookup by `kid` and `alg`;
				// the plugin's type just does not say so.
				secret: keys.verificationKey as unknown as CryptoKey,
				alg: keys.algorithm,
			}),
		)
		.as('scoped')

/**
 * What jose checks besides the signature. Only the algorithms of configured keys are
 * accepted (never `none`), and the key lookup matches a token's `alg` to its key's own.
 */
export const verifyOptions = (keys: TokenKeys, settings: Config['jwt']) => ({
	algorithms: keys.algorithms,
	issuer: settings.issuer,
	audience: settings.audience,
	typ: ACCESS_TOKEN_TYPE,
	clockTolerance: CLOCK_TOLERANCE_SECONDS,
	requiredClaims: ['sub', 'sid', 'jti', 'exp', 'iat'],
})

/**
 * Whether a verified token claims to be issued later than now, beyond the clock leeway.
 * jose checks `iat` against the clock only together with `maxTokenAge`, which this service
 * does not set (`exp` bounds a token's life); a token from the future is forged or mis-signed.
 */
export const issuedInTheFuture = (claims: { iat?: unknown }, nowSeconds = Date.now() / 1000) =>
	typeof claims.iat !== 'number' || claims.iat > nowSeconds + CLOCK_TOLERANCE_SECONDS

/** A refresh token is an opaque token, stored as its digest. */
export const newRefreshToken = newOpaqueToken
export const hashRefreshToken = (token: string) => digestOf(token)
