/**
 * Signing in: the authorization code flow with PKCE (S256) at Latchkey's own provider, as the public client
 * `latchkey-console`, asking for an access token for the API (`resource={issuer}/api`, RFC 8707). Nothing here is
 * a crypto primitive of its own: random bytes and SHA-256 come from WebCrypto.
 *
 * Tokens live in sessionStorage: they last as long as the tab (a reload keeps the console signed in, another tab
 * signs in again through the browser's session without a page), and never reach a cookie or another tab. No
 * refresh token is asked for: when the access token expires the console goes through the provider again, which
 * answers at once while the browser's Latchkey session lives (single sign-on).
 */

export const CLIENT_ID = 'latchkey-console'
const FLOW_KEY = 'latchkey-console:flow'
const TOKENS_KEY = 'latchkey-console:tokens'

export interface Settings {
	/** The provider's issuer: PUBLIC_URL. */
	issuer: string
}

export const settings = (): Settings => ({ issuer: document.documentElement.dataset.issuer ?? location.origin })
const redirectUri = (issuer: string) => `${issuer}/console/callback`
export const apiResource = (issuer: string) => `${issuer}/api`

interface Tokens {
	accessToken: string
	idToken?: string
	/** Milliseconds since the epoch. */
	expiresAt: number
	/** Who signed in, read once per sign-in: a reload then needs no request before the view's own. */
	operator?: Operator
}

/** The signed-in account, as GET /users/me shows it. The bar and the view use it; the API decides every right. */
export interface Operator {
	id: string
	email: string
	role: string
}

const base64url = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
const randomValue = () => base64url(crypto.getRandomValues(new Uint8Array(32)))
const challengeOf = async (verifier: string) => base64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))))

/** The access token while it has at least 30 seconds left, else undefined. */
export function accessToken(): string | undefined {
	try {
		const tokens = JSON.parse(sessionStorage.getItem(TOKENS_KEY) ?? 'null') as Tokens | null
		return tokens && tokens.expiresAt - Date.now() > 30_000 ? tokens.accessToken : undefined
	} catch {
		return undefined
	}
}

const storedTokens = (): Tokens | undefined => {
	try {
		return (JSON.parse(sessionStorage.getItem(TOKENS_KEY) ?? 'null') as Tokens | null) ?? undefined
	} catch {
		return undefined
	}
}

const idToken = () => storedTokens()?.idToken

/** The account these tokens are for, when it was read since they were issued. */
export const operator = (): Operator | undefined => storedTokens()?.operator

/** Keeps the account beside the tokens it was read with (a new sign-in replaces both). */
export function rememberOperator({ id, email, role }: Operator) {
	const tokens = storedTokens()
	if (tokens) sessionStorage.setItem(TOKENS_KEY, JSON.stringify({ ...tokens, operator: { id, email, role } }))
}

export const forgetTokens = () => sessionStorage.removeItem(TOKENS_KEY)

/** Goes to the provider to sign in, coming back to `returnTo` (a path under /console). */
export async function signIn(returnTo: string, prompt?: 'login'): Promise<never> {
	const { issuer } = settings()
	const verifier = randomValue()
	const state = randomValue()
	const nonce = randomValue()
	sessionStorage.setItem(FLOW_KEY, JSON.stringify({ verifier, state, nonce, returnTo }))
	const query = new URLSearchParams({
		client_id: CLIENT_ID,
		redirect_uri: redirectUri(issuer),
		response_type: 'code',
		scope: 'openid email profile',
		code_challenge: await challengeOf(verifier),
		code_challenge_method: 'S256',
		state,
		nonce,
		resource: apiResource(issuer),
		...(prompt ? { prompt } : {}),
	})
	location.assign(`${issuer}/oauth2/authorization?${query}`)
	return new Promise<never>(() => {})
}

/** What went wrong coming back from the provider, as a sentence. */
export class SignInFailed extends Error {}

/** The provider's answer at /console/callback: the code exchanged for tokens; answers where to go next. */
export async function finishSignIn(url: URL): Promise<string> {
	const { issuer } = settings()
	const flow = JSON.parse(sessionStorage.getItem(FLOW_KEY) ?? 'null') as { verifier: string; state: string; nonce: string; returnTo: string } | null
	sessionStorage.removeItem(FLOW_KEY)
	const query = url.searchParams
	if (!flow || query.get('state') !== flow.state) throw new SignInFailed('This sign-in was not started here, or it was already used. Sign in again.')
	// RFC 9207: the answer names its issuer, so that it cannot come from another provider.
	if (query.get('iss') !== null && query.get('iss') !== issuer) throw new SignInFailed('The sign-in answer came from another issuer. Sign in again.')
	const error = query.get('error')
	if (error) throw new SignInFailed(error === 'access_denied' ? 'The sign-in was refused.' : `The sign-in failed (${error}${query.get('error_description') ? `: ${query.get('error_description')}` : ''}).`)
	const code = query.get('code')
	if (!code) throw new SignInFailed('The sign-in answer carried no code. Sign in again.')
	const response = await fetch(`${issuer}/oauth2/token`, {
		method: 'POST',
		headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
		body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUri(issuer), client_id: CLIENT_ID, code_verifier: flow.verifier, resource: apiResource(issuer) }),
	})
	const body = (await response.json().catch(() => ({}))) as { access_token?: string; id_token?: string; expires_in?: number; error?: string; error_description?: string }
	if (!response.ok || !body.access_token) throw new SignInFailed(`The sign-in could not be finished (${body.error ?? response.status}). Sign in again.`)
	// The ID token came straight from the token endpoint (OpenID Connect Core §3.1.3.7): its nonce is what is left to check.
	if (body.id_token && claimsOf(body.id_token).nonce !== flow.nonce) throw new SignInFailed('The sign-in answer does not belong to this sign-in. Sign in again.')
	const tokens: Tokens = { accessToken: body.access_token, idToken: body.id_token, expiresAt: Date.now() + (body.expires_in ?? 300) * 1000 }
	sessionStorage.setItem(TOKENS_KEY, JSON.stringify(tokens))
	return flow.returnTo.startsWith('/console') ? flow.returnTo : '/console'
}

function claimsOf(jwt: string): Record<string, unknown> {
	try {
		const part = jwt.split('.')[1] ?? ''
		return JSON.parse(atob(part.replace(/-/g, '+').replace(/_/g, '/'))) as Record<string, unknown>
	} catch {
		return {}
	}
}

/** Signs out of Latchkey (RP-initiated logout), back to /console. */
export function signOut(): void {
	const { issuer } = settings()
	const hint = idToken()
	forgetTokens()
	const query = new URLSearchParams({ client_id: CLIENT_ID, post_logout_redirect_uri: `${issuer}/console`, ...(hint ? { id_token_hint: hint } : {}) })
	location.assign(`${issuer}/oauth2/logout?${query}`)
}
