/**
 * `appMetadata.claims`: the claims an admin gives an account, copied into its access tokens (/auth) and the
 * provider's ID and access tokens under their own names (API.md, Metadata). They never replace a claim the
 * service sets: the registered names are dropped from the copy, whatever the token, so that a claim's meaning
 * never depends on which token carries it.
 */
export const REGISTERED_CLAIMS: ReadonlySet<string> = new Set([
	'iss',
	'sub',
	'aud',
	'exp',
	'nbf',
	'iat',
	'jti',
	'sid',
	'typ',
	'scope',
	'client_id',
	'auth_time',
	'acr',
	'amr',
	'aal',
	'role',
	'org',
	'organizations',
	// Beyond API.md's list: the members OpenID Connect and RFC 7800 give an ID token's checks. A client that sent
	// no nonce refuses an ID token that carries one (openid-client does), and the hashes and `azp`/`cnf` bind it.
	'nonce',
	'azp',
	'at_hash',
	'c_hash',
	's_hash',
	'cnf',
])

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/** The claims `appMetadata.claims` (given as is) adds to a token: none unless it is an object, and never a registered name. */
export function appClaimsOf(claims: unknown): Record<string, unknown> | undefined {
	if (!isObject(claims)) return undefined
	// fromEntries defines each member as its own (an assignment of `__proto__` would set the prototype instead).
	const own = Object.fromEntries(Object.entries(claims).filter(([name]) => !REGISTERED_CLAIMS.has(name)))
	return Object.keys(own).length > 0 ? own : undefined
}
