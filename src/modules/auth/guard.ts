import { Elysia } from 'elysia'
import { decodeProtectedHeader, importJWK, jwtVerify, type JWK } from 'jose'
import { LRUCache } from 'lru-cache'
import type { Config } from '../../config/env'
import type { Database } from '../../db/client'
import type { TokenKeys } from './keys'
import { callerFinder, type Caller } from './sessions'
import { ACCESS_TOKEN_TYPE, accessTokens, CLOCK_TOLERANCE_SECONDS, issuedInTheFuture, verifyOptions } from './tokens'
import { UUID } from '../../http/ids'
import { AppError, Forbidden } from '../../http/problem'

// The bearer guard lives with auth: it verifies auth's own access tokens and reads auth's sessions. Kept in
// http/ it had to import modules/auth (a lower floor importing a higher one); inverting it (the plugin taking
// a verifier and a caller finder at composition) would have left every route's `caller` typed only through
// generics. Every module with guarded routes sits above auth and imports the guard from here.

/** Who may call a route: any signed-in account, admins only, or the account named by `:id` (and admins). */
export type AuthLevel = 'user' | 'admin' | 'self'
/**
 * A level, whether an enrolment-only session (MFA_REQUIRED, no factor yet) may call the route (only reading
 * one's account, enrolling a factor and logging out may), and whether the route shows the caller's metadata
 * (`caller.user` is then read with `metadata` and `appMetadata`, which no other route pays for: `withMetadata`).
 */
export type AuthRule = AuthLevel | { level: AuthLevel; duringEnrollment?: true; metadata?: true }

const REALM = 'Bearer realm="latchkey"'
/** Verified access tokens kept per process (a few hundred bytes each). */
const VERIFIED_TOKENS_KEPT = 10_000

const missingToken = () =>
	new AppError('unauthorized', 'Send an access token: Authorization: Bearer <token>', { headers: { 'www-authenticate': REALM } })

const enrollmentRequired = () =>
	new AppError('mfa-enrollment-required', 'Enrol a second factor first: this session serves only enrolment')

const refusedToken = () =>
	new AppError('invalid-token', 'The access token is invalid, expired or revoked', {
		headers: { 'www-authenticate': `${REALM}, error="invalid_token"` },
	})

/** The token of an `Authorization: Bearer …` header (RFC 6750 §2.1), or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
	const match = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header ?? '')
	return match?.[1]
}

export interface AuthGuardDeps {
	db: Database
	keys: TokenKeys
	jwt: Config['jwt']
	/** MFA_REQUIRED: accounts it names that have not used a factor are held to enrolment, decided per request. */
	mfaRequired?: Config['mfa']['required']
	/** The one other kind of token the API takes: the admin console's, from Latchkey's own provider (below). */
	console?: ConsoleTokens
}

/**
 * The admin console's tokens: RFC 9068 access tokens of Latchkey's OpenID Provider, asked for with
 * `resource={PUBLIC_URL}/api`. Taken only when every one of these holds: signed RS256 by the provider's key, `typ`
 * at+jwt, `iss` the provider, `aud` the API, `client_id` the console's own client, unexpired; and, as for the API's
 * own tokens, `sid` names a live session of `sub`'s active account (read on every request, so revocation and
 * deactivation end it at once), whose assurance (aal, amr) is the session's. Any other client's token, or one
 * for another audience, is refused as a forged one is.
 */
export interface ConsoleTokens {
	/** The provider's issuer: PUBLIC_URL. */
	issuer: string
	/** The API as a resource (RFC 8707): `{PUBLIC_URL}/api`. */
	audience: string
	/** The provider's public signing key (its JWKS entry, with `kid`). */
	publicJwk: JWK & { kid: string }
	/** The console's client_id: latchkey-console. */
	clientId: string
}

/** A verifier of the console's tokens, or undefined when the API takes none. */
async function consoleVerifier(settings: ConsoleTokens | undefined) {
	if (!settings) return undefined
	const key = await importJWK(settings.publicJwk, 'RS256')
	const options = {
		algorithms: ['RS256'],
		issuer: settings.issuer,
		audience: settings.audience,
		typ: ACCESS_TOKEN_TYPE,
		clockTolerance: CLOCK_TOLERANCE_SECONDS,
		requiredClaims: ['sub', 'sid', 'jti', 'exp', 'iat', 'client_id'],
	}
	return {
		/** Whether the token says it was signed by the provider's key (then it is judged as the console's, and only so). */
		claimsToBe(token: string) {
			try {
				return decodeProtectedHeader(token).kid === settings.publicJwk.kid
			} catch {
				return false
			}
		},
		async verify(token: string): Promise<false | Record<string, unknown>> {
			try {
				const { payload } = await jwtVerify(token, key, options)
				return payload.client_id === settings.clientId ? (payload as Record<string, unknown>) : false
			} catch {
				return false
			}
		},
	}
}

/**
 * The bearer guard. Verifies the token (signature, alg, typ, iss, aud, exp, iat;
 * a verified token is remembered until it expires), then checks the session
 * by primary key, and resolves `caller` for the handler. Permissions are declared on routes:
 * `{ auth: 'admin' }`, `{ auth: 'self' }`, `{ auth: 'user' }`, or
 * `{ optionalAuth: true }` where a token is welcome but not required.
 */
export const authGuard = ({ db, keys, jwt, mfaRequired = 'off', console: consoleTokens }: AuthGuardDeps) => {
	const options = verifyOptions(keys, jwt)
	// Imported once, at the first request that needs it.
	const consoleTokensVerifier = consoleVerifier(consoleTokens)
	const findCaller = callerFinder(db, mfaRequired)
	// Signature checks cost more than the rest of an authenticated read; a token that passed one is
	// remembered (by its exact text) until it expires, as API gateways do. Revocation is unaffected:
	// the session is still read from the database on every request.
	const verified = new LRUCache<string, Record<string, unknown>>({ max: VERIFIED_TOKENS_KEPT })
	const remember = (token: string, claims: Record<string, unknown>) => {
		// Until jose itself would refuse it: exp plus the same clock tolerance.
		const ttl = ((claims.exp as number) + CLOCK_TOLERANCE_SECONDS) * 1000 - Date.now()
		if (ttl > 0) verified.set(token, claims, { ttl })
		return claims
	}
	type Verifier = { verify(token: string, options: object): Promise<false | Record<string, unknown>> }

	/** The caller behind the request's bearer token; undefined when none was sent. */
	const authenticate = async (authorization: string | undefined, verifier: Verifier, metadata = false): Promise<Caller | undefined> => {
		// No Bearer credentials at all (none, "Basic …", a bare "Bearer") is not a refused token (RFC 6750 §3.1).
		if (authorization === undefined || !/^Bearer\s+\S/i.test(authorization)) return undefined
		const token = bearerToken(authorization)
		if (!token) throw refusedToken()
		let claims = verified.get(token)
		if (!claims) {
			const fromConsole = await consoleTokensVerifier
			const checked = fromConsole?.claimsToBe(token) ? await fromConsole.verify(token) : await verifier.verify(token, options)
			// Checked before the token is remembered, so that a refused one is never cached.
			if (!checked || issuedInTheFuture(checked)) throw refusedToken()
			claims = remember(token, checked)
		}
		const { sub, sid, jti } = claims
		if (typeof sub !== 'string' || typeof sid !== 'string' || typeof jti !== 'string' || !UUID.test(sid) || !UUID.test(sub))
			throw refusedToken()
		// A token without `auth_time` (none is issued so) shows no check at all.
		const authTime = typeof claims.auth_time === 'number' && Number.isFinite(claims.auth_time) ? claims.auth_time : 0
		// The organization the token speaks for, checked against the membership as it is now (the same query).
		const org = claims.org as { id?: unknown } | undefined
		const organizationId = typeof org === 'object' && org !== null && typeof org.id === 'string' && UUID.test(org.id) ? org.id.toLowerCase() : undefined
		const caller = await findCaller({ sub, sid, jti, authTime, org: organizationId }, { metadata })
		if (!caller) throw refusedToken()
		return caller
	}

	return new Elysia({ name: 'auth-guard', seed: keys.kid })
		.use(accessTokens(keys, jwt))
		.macro({
			auth: (rule: AuthRule) => ({
				async resolve({ headers, params, accessTokenVerifier }) {
					const level = typeof rule === 'string' ? rule : rule.level
					const caller = await authenticate(headers.authorization, accessTokenVerifier, typeof rule !== 'string' && rule.metadata === true)
					if (!caller) throw missingToken()
					const target = (params as { id?: string } | undefined)?.id
					if (caller.assurance.enrollmentOnly) {
						// Enrolment serves the account itself: an admin's enrolment-only token reads no one else's data.
						if (typeof rule === 'string' || !rule.duringEnrollment || (level === 'self' && target !== 'me' && target !== caller.user.id)) throw enrollmentRequired()
					}
					if (level === 'admin' && caller.user.role !== 'admin') throw new Forbidden('This requires an admin')
					if (level === 'self' && target !== 'me' && target !== caller.user.id && caller.user.role !== 'admin')
						throw new Forbidden('You may only act on your own account')
					return { caller }
				},
			}),
			optionalAuth: {
				async resolve({ headers, accessTokenVerifier }) {
					const caller = (await authenticate(headers.authorization, accessTokenVerifier)) ?? null
					// A token is judged as its account's, never dropped to an anonymous request: held to enrolment, it creates nothing.
					if (caller?.assurance.enrollmentOnly) throw enrollmentRequired()
					return { caller }
				},
			},
		})
}

/** `me` or an id, as the id of the account a route acts on. */
export const targetUserId = (id: string, caller: Caller) => (id === 'me' ? caller.user.id : id)
