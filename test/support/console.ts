/**
 * The admin console's sign-in as its browser code makes it (src/console/app/session.ts), over `app.handle`: an
 * authorization request as `latchkey-console` with PKCE S256 and `resource={PUBLIC_URL}/api`, from a browser signed
 * in at the pages, then the code exchanged for the access token the API takes from the console.
 */
import * as oauth from 'oauth4webapi'
import type { TestApp } from './app'
import type { Account } from './fixtures'
import { Browser, browserCookie, ISSUER } from './oauth'

export const CONSOLE_CLIENT = 'latchkey-console'
export const CONSOLE_CALLBACK = `${ISSUER}/console/callback`
export const API_RESOURCE = `${ISSUER}/api`

export interface ConsoleSignIn {
	/** The client to ask as (latchkey-console unless a test plays another one). */
	clientId?: string
	redirectUri?: string
	/** The resource asked for (the API unless a test asks for another); null: none. */
	resource?: string | null
}

/** The token endpoint's answer for `account`, signed in at the pages, through the console's code flow. */
export async function consoleTokens(t: TestApp, account: Pick<Account, 'sessionId'>, options: ConsoleSignIn = {}) {
	const clientId = options.clientId ?? CONSOLE_CLIENT
	const redirectUri = options.redirectUri ?? CONSOLE_CALLBACK
	const resource = options.resource === undefined ? API_RESOURCE : options.resource
	const verifier = oauth.generateRandomCodeVerifier()
	const state = oauth.generateRandomState()
	const query = new URLSearchParams({
		client_id: clientId,
		redirect_uri: redirectUri,
		response_type: 'code',
		scope: 'openid email profile',
		code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
		code_challenge_method: 'S256',
		state,
		nonce: oauth.generateRandomNonce(),
		...(resource ? { resource } : {}),
	})
	const browser = new Browser(t, await browserCookie(t, account))
	const { url } = await browser.visit(`${ISSUER}/oauth2/authorization?${query}`)
	const code = url.searchParams.get('code')
	if (!code || url.searchParams.get('state') !== state) throw new Error(`no code at ${url.pathname}: ${url.searchParams.get('error') ?? ''} ${url.searchParams.get('error_description') ?? ''}`)
	const response = await t.call('POST', '/oauth2/token', {
		headers: { 'content-type': 'application/x-www-form-urlencoded' },
		body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, client_id: clientId, code_verifier: verifier, ...(resource ? { resource } : {}) }).toString(),
	})
	if (response.status !== 200) throw new Error(`token endpoint: ${response.status} ${response.text}`)
	return response.body as { access_token: string; id_token: string; token_type: string; expires_in: number }
}

/** The console's access token for the API, as an account signed in at the pages gets it. */
export const consoleToken = async (t: TestApp, account: Pick<Account, 'sessionId'>, options?: ConsoleSignIn) => (await consoleTokens(t, account, options)).access_token
