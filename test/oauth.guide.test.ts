import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { startTestApp, type TestApp } from './support/app'
import { signUp, type Account } from './support/fixtures'
import { Browser, browserCookie, formPost, hiddenFields, REDIRECT_URI, registerClient } from './support/oauth'

/*
 * The guides' snippets (docs/guides/openid-provider.md and pages-only.md, blocks fenced ```ts run:<name>), run as
 * written against a listening app: each is written to a module and imported, with the settings it reads from
 * the environment, and a browser that is signed in plays the person.
 */

const ROOT = join(import.meta.dir, '..')
const GUIDE = join(ROOT, 'docs/guides/openid-provider.md')
const PAGES_ONLY_GUIDE = join(ROOT, 'docs/guides/pages-only.md')
const OUT = join(ROOT, 'test-artifacts/guide')

function snippet(name: string, guide: string): string {
	const match = new RegExp('```ts run:' + name + '\\n([\\s\\S]*?)\\n```').exec(readFileSync(guide, 'utf8'))
	if (!match?.[1]) throw new Error(`the guide has no snippet run:${name}`)
	return match[1]
}

/** The snippet as a module, imported with `env` in the environment it reads at load. */
async function load<T>(name: string, env: Record<string, string>, guide = GUIDE): Promise<T> {
	mkdirSync(OUT, { recursive: true })
	const file = join(OUT, `${name}-${crypto.randomUUID()}.ts`)
	writeFileSync(file, snippet(name, guide))
	Object.assign(process.env, env)
	return (await import(file)) as T
}

interface CodeFlowSnippet {
	startSignIn(): Promise<{ url: URL; verifier: string; state: string }>
	finishSignIn(callback: URL, verifier: string, state: string): Promise<{ userId?: unknown; email?: unknown; accessToken: string }>
}

let t: TestApp
let issuer: string
let account: Account
let cookie: string

beforeAll(async () => {
	const port = 20000 + Math.floor(Math.random() * 20000)
	issuer = `http://127.0.0.1:${port}`
	// The /auth budget on, as deployed (the test app turns it off): the snippets' token requests pass its per-client key.
	// The command-line tool polls as the provider says: every tenth of a second here, not every 5 s (the default).
	t = await startTestApp({ PUBLIC_URL: issuer, AUTH_RATE_LIMIT_MAX: '100', OAUTH_DEVICE_POLL_SECONDS: '0.1' })
	t.app.listen({ port, hostname: '127.0.0.1' })
	account = await signUp(t)
	cookie = await browserCookie(t, account)
}, 30_000)
afterAll(async () => {
	await t.app.stop()
	await t.close()
})

describe('the OpenID Provider guide, run as written', () => {
	test('a web application with a backend signs the person in (openid-client)', async () => {
		const client = await registerClient(t, { type: 'confidential', firstParty: true })
		const app = await load<CodeFlowSnippet>('web-app', { LATCHKEY_URL: issuer, CLIENT_ID: client.clientId, CLIENT_SECRET: client.clientSecret ?? '', REDIRECT_URI })
		const { url, verifier, state } = await app.startSignIn()
		const { url: callback } = await new Browser(t, cookie, issuer).visit(url.href)
		expect(await app.finishSignIn(callback, verifier, state)).toMatchObject({ userId: account.id, email: account.email })
	})

	test('a single-page application signs the person in (oauth4webapi, no secret)', async () => {
		const client = await registerClient(t, { type: 'public', firstParty: true })
		const app = await load<CodeFlowSnippet>('single-page-app', { LATCHKEY_URL: issuer, CLIENT_ID: client.clientId, REDIRECT_URI })
		const { url, verifier, state } = await app.startSignIn()
		const { url: callback } = await new Browser(t, cookie, issuer).visit(url.href)
		expect(await app.finishSignIn(callback, verifier, state)).toMatchObject({ userId: account.id })
	})

	test('a command-line tool signs the person in with the device flow (openid-client)', async () => {
		const client = await registerClient(t, {
			type: 'public',
			firstParty: true,
			redirectUris: [],
			grantTypes: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token'],
		})
		const tool = await load<{ signInFromTheTerminal(show: (code: string, link: string) => void): Promise<{ userId?: unknown; refreshToken?: string }> }>('command-line', {
			LATCHKEY_URL: issuer,
			CLIENT_ID: client.clientId,
		})
		let allowed: Promise<void> | undefined
		const signedIn = await tool.signInFromTheTerminal((code, link) => {
			// The person opens the link in a signed-in browser and allows the device.
			allowed = (async () => {
				const browser = new Browser(t, cookie, issuer)
				const entry = await (await browser.visit(link)).response.text()
				const confirm = await (await browser.visit('/device', formPost({ ...hiddenFields(entry, '/device'), user_code: code }))).response.text()
				await browser.visit('/device', formPost({ ...hiddenFields(confirm, '/device'), confirm: 'yes' }))
			})()
		})
		await allowed
		expect(signedIn.userId).toBe(account.id)
		expect(signedIn.refreshToken).toBeString()
	}, 30_000)
})

describe('the pages-only guide, run as written', () => {
	test('an application with no account screens signs the person in through the provider and links to /account', async () => {
		const notes = 'https://notes.example.test'
		const client = await registerClient(t, { type: 'confidential', firstParty: true, redirectUris: [`${notes}/callback`], scopes: ['openid', 'email', 'profile'] })
		const app = await load<{ handle(request: Request): Promise<Response> }>(
			'notes-app',
			{ LATCHKEY_URL: issuer, NOTES_URL: notes, CLIENT_ID: client.clientId, CLIENT_SECRET: client.clientSecret ?? '' },
			PAGES_ONLY_GUIDE,
		)
		const sessionOf = (response: Response) => (response.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
		// Signed out: the application offers "Sign in", which starts the code flow with PKCE at Latchkey.
		expect(await (await app.handle(new Request(`${notes}/`))).text()).toContain('<a href="/sign-in">Sign in</a>')
		const start = await app.handle(new Request(`${notes}/sign-in`))
		expect(start.status).toBe(302)
		const authorization = new URL(start.headers.get('location') ?? '')
		expect(authorization.origin + authorization.pathname).toBe(`${issuer}/oauth2/authorization`)
		expect(authorization.searchParams.get('code_challenge_method')).toBe('S256')
		// A browser signed in at Latchkey comes back with a code and no form (single sign-on).
		const { url: callback } = await new Browser(t, cookie, issuer).visit(authorization.href)
		expect(callback.origin + callback.pathname).toBe(`${notes}/callback`)
		const finished = await app.handle(new Request(callback.href, { headers: { cookie: sessionOf(start) } }))
		expect(finished.status).toBe(302)
		expect(sessionOf(finished)).not.toBe(sessionOf(start))
		const home = await (await app.handle(new Request(`${notes}/`, { headers: { cookie: sessionOf(finished) } }))).text()
		expect(home).toContain(`Signed in as ${account.email}`)
		expect(home).toContain(`<a href="${issuer}/account">Your account</a>`)
		// The code and the session it started are spent: the callback again signs no one in.
		const again = await app.handle(new Request(callback.href, { headers: { cookie: sessionOf(start) } }))
		expect(again.headers.get('location')).toBe(`${notes}/`)
		expect(sessionOf(again)).toBe('notes=')
	})
})
