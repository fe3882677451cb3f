/**
 * Latchkey as the OpenID Provider of a relying party people really run in front of their apps: Apache httpd
 * with mod_auth_openidc protects /protected/ of an internal tool, and Debian's Chromium (playwright-core) goes
 * through it as a person would — signed out to Latchkey's sign-in, signed in back to the tool, single sign-on,
 * RP-initiated logout. The compiled binary on PGlite, or on PostgreSQL with TEST_DATABASE_URL.
 * Run with `bun test ./test/oauth.apache.e2e.ts` after `bun run build`; needs the Debian packages `apache2`
 * and `libapache2-mod-auth-openidc` (.ci/run installs them) and /usr/bin/chromium.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { join } from 'node:path'
import { chromium, type Browser, type Page, type Request } from 'playwright-core'
import { digestOf, newOpaqueToken } from '../src/crypto/opaque-tokens'
import { openDatabase, type DatabaseHandle } from '../src/db/client'
import { oauthClients, oauthClientSecrets } from '../src/db/schema'
import { startApache, type RunningApache } from './support/apache'
import { binaryFolder, jsonPost, startBinary, type BinaryFolder, type RunningBinary } from './support/binary'
import { createEmptyTestDatabase, TEST_DATABASE_URL } from './support/database'
import { jwtPayload, uniqueEmail } from './support/fixtures'
import { freePort } from './support/ports'

setDefaultTimeout(120_000)

const PASSWORD = 'a long enough passphrase'
const SESSION_COOKIE = '__Host-latchkey-session'

/**
 * The binary on a fixed port (the issuer names it), and its database for what the test writes straight into it.
 * PGlite belongs to one process: on it, a write stops the binary, writes, and starts it again on the same port
 * and data folder (so its keys, sessions and the provider's artifacts all outlive the restart).
 */
class Latchkey {
	running?: RunningBinary
	private constructor(
		readonly issuer: string,
		private readonly folder: BinaryFolder,
		private readonly env: Record<string, string>,
		private readonly database: { kind: 'pglite'; dataDir: string } | { kind: 'postgres'; url: string; drop(): Promise<void> },
	) {}

	static async start(): Promise<Latchkey> {
		const port = await freePort()
		const issuer = `http://localhost:${port}`
		const folder = binaryFolder('apache')
		const database = TEST_DATABASE_URL
			? { kind: 'postgres' as const, ...(await createEmptyTestDatabase(TEST_DATABASE_URL)) }
			: { kind: 'pglite' as const, dataDir: join(folder.folder, 'data') }
		const env = {
			PORT: String(port),
			PUBLIC_URL: issuer,
			PASSWORD_HASH_MEMORY_KIB: '1024',
			PASSWORD_HASH_TIME_COST: '1',
			DATA_DIR: join(folder.folder, 'data'),
			...(database.kind === 'postgres' ? { DATABASE_URL: database.url, DATABASE_POOL_MAX: '4' } : {}),
		}
		const latchkey = new Latchkey(issuer, folder, env, database)
		latchkey.running = await startBinary(folder, env)
		return latchkey
	}

	private async stopBinary() {
		const running = this.running
		this.running = undefined
		if (!running) return
		running.process.kill('SIGTERM')
		await running.process.exited
	}

	/** Runs `write` on the binary's database (on PGlite, while the binary is stopped). */
	async withDatabase<T>(write: (db: DatabaseHandle['db']) => Promise<T>): Promise<T> {
		if (this.database.kind === 'pglite') await this.stopBinary()
		const handle = await openDatabase(this.database.kind === 'pglite' ? this.database : { kind: 'postgres', url: this.database.url, poolMax: 1 })
		try {
			return await write(handle.db)
		} finally {
			await handle.close()
			if (!this.running) this.running = await startBinary(this.folder, this.env)
		}
	}

	async stop() {
		await this.stopBinary()
		if (this.database.kind === 'postgres') await this.database.drop()
		this.folder.remove()
	}
}

let latchkey: Latchkey
let apache: RunningApache
let browser: Browser
let app: string
let clientId: string
const email = uniqueEmail('apache')

beforeAll(async () => {
	latchkey = await Latchkey.start()
	const apachePort = await freePort()
	app = `http://localhost:${apachePort}`
	// A person with an account (the API's sign-up).
	const signUp = await fetch(`${latchkey.issuer}/api/users`, jsonPost({ email, password: PASSWORD, name: 'Apache User' }))
	expect(signUp.status).toBe(201)
	// The internal tool's client: confidential, first party (no consent page), registered as the admin API will.
	clientId = `internal-tool-${crypto.randomUUID()}`
	const clientSecret = newOpaqueToken()
	await latchkey.withDatabase(async (db) => {
		const id = Bun.randomUUIDv7()
		await db.insert(oauthClients).values({
			id,
			clientId,
			name: 'Internal tool',
			type: 'confidential',
			firstParty: true,
			redirectUris: [`${app}/protected/redirect_uri`],
			postLogoutRedirectUris: [`${app}/signed-out.html`],
			grantTypes: ['authorization_code'],
			scopes: ['openid', 'profile', 'email'],
			tokenEndpointAuthMethod: 'client_secret_basic',
		})
		await db.insert(oauthClientSecrets).values({ id: Bun.randomUUIDv7(), clientId: id, secretHash: digestOf(clientSecret) })
	})
	apache = await startApache({ port: apachePort, issuer: latchkey.issuer, clientId, clientSecret })
	browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] })
})

afterAll(async () => {
	await browser?.close()
	// APACHE_E2E_LOG=<file>: Apache's error log (mod_auth_openidc at debug) and Latchkey's, to see what each sent.
	if (process.env.APACHE_E2E_LOG) await Bun.write(process.env.APACHE_E2E_LOG, `${apache?.log()}\n---- latchkey\n${latchkey?.running?.output()}`)
	await apache?.stop()
	await latchkey?.stop()
})

/** Every document the tab requested (redirects included), in order. */
function navigations(page: Page): URL[] {
	const seen: URL[] = []
	page.on('request', (request: Request) => {
		if (request.isNavigationRequest() && request.frame() === page.mainFrame()) seen.push(new URL(request.url()))
	})
	return seen
}

/** API login: what a person's password gives (the session's access token and id). */
async function apiLogin(address: string, password: string) {
	const response = await fetch(`${latchkey.issuer}/api/auth/login`, jsonPost({ email: address, password }))
	expect(response.status).toBe(200)
	const { accessToken } = ((await response.json()) as { data: { accessToken: string } }).data
	return { accessToken, sessionId: String(jwtPayload(accessToken).sid) }
}

/** Signs in at Latchkey's sign-in page, where `page` stands, as a person does: the form, then on to where it sends the browser. */
async function signInAtThePages(page: Page, address: string, password: string): Promise<void> {
	const signIn = new URL(page.url())
	expect(signIn.pathname).toBe('/sign-in')
	expect(signIn.searchParams.get('return_to') ?? '').toStartWith('/oauth2/interaction/')
	await page.getByLabel('Email address').fill(address)
	await page.getByLabel('Password').fill(password)
	await page.getByRole('button', { name: 'Sign in', exact: true }).click()
	await page.waitForURL(`${app}/protected/**`)
}

/** The person's live sessions, as their own API session sees them (the browser's among them). */
async function liveSessions(accessToken: string): Promise<number> {
	const response = await fetch(`${latchkey.issuer}/api/users/me/sessions`, { headers: { authorization: `Bearer ${accessToken}` } })
	expect(response.status).toBe(200)
	const { data } = (await response.json()) as { data: unknown[] | { items: unknown[] } }
	return Array.isArray(data) ? data.length : data.items.length
}

const pathsOf = (urls: URL[]) => urls.map((url) => `${url.origin === latchkey.issuer ? 'latchkey' : url.origin === app ? 'app' : url.origin}${url.pathname}`)

describe('Apache with mod_auth_openidc in front of an internal tool', () => {
	let tab: Page
	let accessToken: string

	test('a signed-out visit goes through the authorization and its interaction to Latchkey’s sign-in', async () => {
		tab = await (await browser.newContext()).newPage()
		const seen = navigations(tab)
		const answer = await tab.goto(`${app}/protected/`)
		const landed = new URL(tab.url())
		expect(landed.origin).toBe(latchkey.issuer)
		expect(landed.pathname).toBe('/sign-in')
		expect(answer?.status()).toBe(200)
		expect(landed.searchParams.get('return_to')).toStartWith('/oauth2/interaction/')
		expect(pathsOf(seen)).toEqual(['app/protected/', 'latchkey/oauth2/authorization', expect.stringMatching(/^latchkey\/oauth2\/interaction\//), 'latchkey/sign-in'])
		// What mod_auth_openidc asked: the code flow with PKCE S256, our client, our redirect URI, the scopes.
		const authorization = seen[1]?.searchParams
		expect(authorization?.get('client_id')).toBe(clientId)
		expect(authorization?.get('response_type')).toBe('code')
		expect(authorization?.get('redirect_uri')).toBe(`${app}/protected/redirect_uri`)
		expect(authorization?.get('scope')?.split(' ').sort()).toEqual(['email', 'openid', 'profile'])
		expect(authorization?.get('code_challenge_method')).toBe('S256')
		expect(authorization?.get('nonce')).toBeString()
		expect(authorization?.get('state')).toBeString()
	})

	test('signed in, the browser comes back to the tool, which shows the person’s claims', async () => {
		const seen = navigations(tab)
		await signInAtThePages(tab, email, PASSWORD)
		// The person's own API session, beside the browser's, to see the browser's end at the logout.
		accessToken = (await apiLogin(email, PASSWORD)).accessToken
		expect(new URL(tab.url()).href).toBe(`${app}/protected/`)
		expect(await tab.textContent('#email')).toBe(email)
		expect(await tab.textContent('#name')).toBe('Apache User')
		expect(await tab.textContent('#remote-user')).toBe(email)
		expect(pathsOf(seen)).toContain('app/protected/redirect_uri')
	})

	test('single sign-on: the tool’s own session gone, the next visit signs in again with no page', async () => {
		const context = tab.context()
		const latchkeyCookies = (await context.cookies()).filter((cookie) => cookie.name === SESSION_COOKIE)
		await context.clearCookies()
		await context.addCookies(latchkeyCookies)
		const seen = navigations(tab)
		await tab.goto(`${app}/protected/`)
		expect(new URL(tab.url()).href).toBe(`${app}/protected/`)
		expect(await tab.textContent('#email')).toBe(email)
		const paths = pathsOf(seen)
		expect(paths).toContain('latchkey/oauth2/authorization')
		expect(paths).not.toContain('latchkey/sign-in')
	})

	test('logout at the tool ends the Latchkey session too (RP-initiated logout) and comes back to the tool', async () => {
		const before = await liveSessions(accessToken)
		const seen = navigations(tab)
		await tab.goto(`${app}/protected/redirect_uri?logout=${encodeURIComponent(`${app}/signed-out.html`)}`)
		// Latchkey asks before it signs anyone out.
		expect(new URL(tab.url()).origin).toBe(latchkey.issuer)
		expect(pathsOf(seen)).toContain('latchkey/oauth2/logout')
		const logout = seen.find((url) => url.pathname === '/oauth2/logout')?.searchParams
		expect(logout?.get('post_logout_redirect_uri')).toBe(`${app}/signed-out.html`)
		await tab.getByRole('button', { name: 'Sign out' }).click()
		await tab.waitForURL(`${app}/signed-out.html**`)
		expect(await tab.textContent('#signed-out')).toBe('You are signed out.')
		// The browser's Latchkey session is over (the person's API session is not), and the browser cookie is gone.
		expect(await liveSessions(accessToken)).toBe(before - 1)
		expect((await tab.context().cookies()).map((cookie) => cookie.name)).not.toContain(SESSION_COOKIE)
	})

	test('after the logout the tool needs a sign-in again', async () => {
		const seen = navigations(tab)
		await tab.goto(`${app}/protected/`)
		expect(new URL(tab.url()).pathname).toBe('/sign-in')
		expect(pathsOf(seen)).toContain('latchkey/oauth2/authorization')
		await tab.context().close()
	})
})
