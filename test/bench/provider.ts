/**
 * The OpenID Provider section of `bench` (run.ts calls `providerSection`; `bun run bench -- --only provider`):
 * Latchkey as the provider other applications sign in with (src/modules/oauth), measured where issue 24 sets
 * its goals — the single sign-on of a browser that is already signed in (`prompt=none`, one GET answered by a
 * 303 with a code), the code exchange and the refresh grant against what signing their ID tokens allows, and
 * the userinfo read against the API's own `GET /users/me`.
 *
 * A confidential first-party client and the browsers' sessions are written straight into the database, as
 * test/support/oauth.ts does (its secret and the browsers' cookies stored as SHA-256 only); the accounts are
 * seeded ones. Requests go from this process with fetch (keep-alive), several at once; every answer is
 * checked, and one that is not what the protocol promises is a counted failure, printed with its reason.
 */
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto'
import { statSync } from 'node:fs'
import { brotliDecompressSync } from 'node:zlib'
import { SignJWT } from 'jose'
import postgres from 'postgres'
import { measuredLoad, type LoadResult } from './workload'

/** Requests in flight at once. */
const CONCURRENCY = 16
/** Browsers signed in (one seeded account and session each): more than requests in flight, so they spread. */
const BROWSERS = 256
/** Accounts logged in through the API for `GET /users/me` (each login is an argon2 verify). */
const API_SESSIONS = 32
/** Rotation chains for the refresh grant: more than requests in flight, so one is always free. */
const REFRESH_CHAINS = CONCURRENCY * 2
const CLIENT_ID = 'latchkey-bench-provider'
const REDIRECT_URI = 'https://app.bench.example/callback'
/** Codes live 60 s (API.md): a batch is made and exchanged within this. */
const CODE_BUDGET_SECONDS = 45

type Target = { pid: number; url: string; readyAfterMs: number; stop(): Promise<void> }

export interface ProviderBench<M extends LoadResult, R> {
	databaseUrl: string
	seconds: number
	/** The seeded accounts' password, for the API logins of the `/users/me` reference. */
	password: string
	cores: number
	log(message: string): void
	/** Starts the service; `env` is given the URL it will answer at (its issuer, PUBLIC_URL). */
	startService(env: (publicUrl: string) => Record<string, string>, name: string): Promise<Target>
	/** Settles the service, then watches its memory and CPU while `run` goes. */
	measure(target: Target, run: () => Promise<LoadResult>): Promise<M>
	row(id: string, scenario: string, m: M, limit: { name: string; perSecond: number | null }, goal?: string, met?: boolean | null): R
	/** The scenarios to run (all when left out): a profile of one (provider-profile.ts) is not muddled by the others. */
	scenarios?: ReadonlySet<ProviderScenario>
	/** The compiled service, for its size (none when the service runs from source). */
	binaryPath?: string
}

export type ProviderScenario = 'sso' | 'code' | 'refresh' | 'userinfo' | 'users-me' | 'sign-in-page' | 'startup'

export interface ProviderFigures {
	concurrency: number
	browsers: number
	/** One process signing RS256 JWTs (2048-bit key) back to back, and that times the cores: the limit. */
	signMs: number
	signLimitPerSecond: number
	sso: Figures
	/** The same request one at a time: its latency when nothing waits in line. */
	ssoAlone: Figures
	code: Figures & { codesMade: number }
	refresh: Figures & { chains: number }
	/** Measured before userinfo, and again after it (the machine's pace drifts). */
	usersMe: Figures
	usersMeAfter: Figures
	userinfo: Figures
	/** userinfo req/s ÷ the mean of the two /users/me req/s. */
	userinfoRatio: number
	/** A first visit to each page: its HTML and the files it links, those fetched at once as a browser does. */
	pages: PageFigures[]
	/** Spawn → readiness 200 on PostgreSQL, then → the first discovery document (which loads the library): medians. */
	startup: { runs: number; readyMs: number; providerLoadedMs: number }
	binaryBytes: number | null
	/** Why requests failed, by scenario and reason. */
	failures: Record<string, Record<string, number>>
}

interface Figures {
	ok: number
	failed: number
	seconds: number
	perSecond: number
	p50Ms: number
	p99Ms: number
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0
const sha256Hex = (value: string) => createHash('sha256').update(value).digest('hex')
const opaque = () => randomBytes(32).toString('base64url')

/** What one request came to: ok, or the reason it failed (shown after the run). */
type Outcome = true | string

/**
 * Runs `request` from CONCURRENCY workers until the deadline or until `next` has nothing more to give;
 * times each request, counts failures by reason.
 */
async function drive<T>(seconds: number, next: () => T | undefined, request: (item: T) => Promise<Outcome>, concurrency = CONCURRENCY) {
	const latencies: number[] = []
	const reasons = new Map<string, number>()
	const started = performance.now()
	const deadline = started + seconds * 1000
	await Promise.all(
		Array.from({ length: concurrency }, async () => {
			while (performance.now() < deadline) {
				const item = next()
				if (item === undefined) return
				const at = performance.now()
				const outcome = await request(item).catch((error: unknown) => (error instanceof Error ? error.message : String(error)).slice(0, 200))
				if (outcome === true) latencies.push(performance.now() - at)
				else reasons.set(outcome, (reasons.get(outcome) ?? 0) + 1)
			}
		}),
	)
	const elapsed = (performance.now() - started) / 1000
	latencies.sort((a, b) => a - b)
	const failed = [...reasons.values()].reduce((sum, n) => sum + n, 0)
	const figures: Figures = {
		ok: latencies.length,
		failed,
		seconds: elapsed,
		perSecond: latencies.length / elapsed,
		p50Ms: percentile(latencies, 50),
		p99Ms: percentile(latencies, 99),
	}
	const meanMs = latencies.length ? latencies.reduce((sum, ms) => sum + ms, 0) / latencies.length : 0
	return {
		figures,
		reasons: Object.fromEntries(reasons),
		load: measuredLoad(figures.ok, elapsed, { p50Ms: figures.p50Ms, p99Ms: figures.p99Ms, meanMs, maxMs: latencies.at(-1) ?? 0 }, failed),
	}
}

/** The limit of the code exchange and the refresh grant: RS256 JWTs (2048-bit key, as the service's) signed per second. */
async function signingLimit(cores: number) {
	const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
	const claims = { sub: crypto.randomUUID(), sid: crypto.randomUUID(), nonce: opaque(), acr: 'aal1', amr: ['pwd'], auth_time: Math.floor(Date.now() / 1000), at_hash: opaque().slice(0, 22) }
	const sign = () =>
		new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: 'bench' }).setIssuer('http://127.0.0.1').setAudience(CLIENT_ID).setIssuedAt().setExpirationTime('15m').sign(privateKey)
	for (let i = 0; i < 50; i++) await sign()
	let signed = 0
	const started = performance.now()
	while (performance.now() - started < 1500) {
		await sign()
		signed++
	}
	const signMs = (performance.now() - started) / signed
	return { signMs, limitPerSecond: (cores * 1000) / signMs }
}

/** Starts of the service measured for the start-up figures. */
const STARTUP_RUNS = 5
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN

/** Spawn → ready (the service's own figure), then → the first discovery document answered (the library loaded on it). */
async function startupFigures<M extends LoadResult, R>(bench: ProviderBench<M, R>, runs: number) {
	const ready: number[] = []
	const loaded: number[] = []
	for (let run = 0; run < runs; run++) {
		const service = await bench.startService((publicUrl) => ({ PUBLIC_URL: publicUrl }), 'provider-startup')
		try {
			const at = performance.now()
			const discovery = await fetch(`${service.url}/.well-known/openid-configuration`)
			await discovery.arrayBuffer()
			if (discovery.status !== 200) throw new Error(`discovery ${discovery.status} at start-up`)
			ready.push(service.readyAfterMs)
			loaded.push(service.readyAfterMs + performance.now() - at)
		} finally {
			await service.stop()
		}
	}
	return { runs, readyMs: Math.round(median(ready)), providerLoadedMs: Math.round(median(loaded)) }
}

/** What a browser's fetch says (and allows compressed), nothing cached. */
const PAGE_HEADERS = { accept: 'text/html,*/*', 'accept-encoding': 'gzip, deflate, br, zstd', 'accept-language': 'en' }

/** The bytes of an HTTP/1.1 response as the server wrote them: status line, headers, body (compressed or not). */
const wireBytes = (response: Response, body: ArrayBuffer) =>
	`HTTP/1.1 ${response.status} ${response.statusText}\r\n`.length +
	[...response.headers].reduce((sum, [name, value]) => sum + `${name}: ${value}\r\n`.length, 0) +
	2 +
	body.byteLength

/** A first visit to a page: its HTML, then every stylesheet and script it links, at once. Bytes as sent (not decompressed). */
/** A page's first visit, as the figures keep it. */
type PageFigures = Figures & { path: string; requests: number; bytesOnTheWire: number; compressed: boolean }

/** The pages measured: each person-facing page a browser opens directly (the account's with a browser session). */
const PAGES: Array<{ path: string; signedIn?: boolean }> = [
	{ path: '/sign-in' },
	{ path: '/sign-up' },
	{ path: '/recovery' },
	{ path: '/password-reset' },
	{ path: '/email-verification' },
	{ path: '/device' },
	{ path: '/sign-out', signedIn: true },
	{ path: '/account', signedIn: true },
	{ path: '/account/security', signedIn: true },
	{ path: '/account/identities', signedIn: true },
	{ path: '/account/sessions', signedIn: true },
	{ path: '/account/applications', signedIn: true },
]

async function loadPage(url: string, cookie?: string): Promise<{ bytes: number; requests: number; compressed: boolean } | string> {
	const headers = cookie ? { ...PAGE_HEADERS, cookie } : PAGE_HEADERS
	const fetchRaw = (target: string) => fetch(target, { headers, decompress: false, redirect: 'manual' } as RequestInit)
	const html = await fetchRaw(url)
	const raw = await html.arrayBuffer()
	if (html.status !== 200) return `page ${html.status}`
	const encoding = html.headers.get('content-encoding')
	const text = new TextDecoder().decode(
		encoding === 'gzip' ? Bun.gunzipSync(new Uint8Array(raw)) : encoding === 'br' ? brotliDecompressSync(raw) : encoding ? new Uint8Array() : raw,
	)
	const linked = [...text.matchAll(/<link rel="stylesheet" href="([^"]+)"|<script[^>]* src="([^"]+)"/g)].map((match) => new URL(match[1] ?? match[2] ?? '', url).href)
	const assets = await Promise.all(
		linked.map(async (href) => {
			const response = await fetchRaw(href)
			const body = await response.arrayBuffer()
			return { response, body }
		}),
	)
	const failed = assets.find(({ response }) => response.status !== 200)
	if (failed) return `asset ${failed.response.status}`
	return {
		bytes: wireBytes(html, raw) + assets.reduce((sum, { response, body }) => sum + wireBytes(response, body), 0),
		requests: 1 + assets.length,
		compressed: encoding !== null || assets.some(({ response }) => response.headers.has('content-encoding')),
	}
}

/** A browser: its Latchkey cookie and whatever cookies the provider adds (its own session). */
class Browser {
	private readonly jar = new Map<string, string>()

	constructor(cookie: string) {
		this.keep(cookie)
	}

	/** The Cookie header it sends. */
	cookieHeader(): string {
		return [...this.jar].map(([name, value]) => `${name}=${value}`).join('; ')
	}

	private keep(pair: string) {
		const equals = pair.indexOf('=')
		if (equals < 1) return
		const value = pair.slice(equals + 1)
		if (value === '') this.jar.delete(pair.slice(0, equals))
		else this.jar.set(pair.slice(0, equals), value)
	}

	async get(url: string): Promise<Response> {
		const response = await fetch(url, { headers: { cookie: this.cookieHeader() }, redirect: 'manual' })
		for (const line of response.headers.getSetCookie()) this.keep(line.split(';')[0] ?? '')
		return response
	}
}

/** Why a response is not the one expected, short (the provider's `error` when it gave one). */
async function reasonOf(what: string, response: Response): Promise<string> {
	const text = await response.text()
	const error = /"error"\s*:\s*"([^"]+)"/.exec(text)?.[1]
	return `${what} ${response.status}${error ? ` ${error}` : ''}`
}

export async function providerSection<M extends LoadResult, R>(bench: ProviderBench<M, R>): Promise<{ rows: R[]; figures: ProviderFigures }> {
	bench.log("12a'. the RS256 signing limit (this process, before the service starts)")
	const signing = await signingLimit(bench.cores)
	bench.log(`one RS256 JWT ${signing.signMs.toFixed(2)} ms → ${signing.limitPerSecond.toFixed(0)}/s on ${bench.cores} cores`)

	// A scenario left out still runs, for a blink: what follows it needs its figures, not its load.
	const wanted = (scenario: ProviderScenario) => !bench.scenarios || bench.scenarios.has(scenario)
	const secondsOf = (scenario: ProviderScenario) => (wanted(scenario) ? bench.seconds : 0.2)

	bench.log('12a. start-up: spawn → ready, then → the library loaded (the first discovery request)')
	const startup = await startupFigures(bench, wanted('startup') ? STARTUP_RUNS : 1)
	bench.log(`ready after ${startup.readyMs} ms, the provider loaded ${startup.providerLoadedMs} ms after spawn (medians of ${startup.runs})`)

	const service = await bench.startService((publicUrl) => ({ PUBLIC_URL: publicUrl }), 'provider')
	const sql = postgres(bench.databaseUrl, { max: 2, onnotice: () => {} })
	const failures: Record<string, Record<string, number>> = {}
	try {
		const url = service.url
		// ── the client and the browsers, straight in the database ──
		const clientSecret = opaque()
		await sql`delete from oauth_clients where client_id = ${CLIENT_ID}`
		const clientRowId = Bun.randomUUIDv7()
		await sql`
			insert into oauth_clients (id, client_id, name, type, redirect_uris, grant_types, scopes, token_endpoint_auth_method, first_party)
			values (${clientRowId}, ${CLIENT_ID}, 'Bench app', 'confidential', ${sql.array([REDIRECT_URI])},
				${sql.array(['authorization_code', 'refresh_token'])}, ${sql.array(['openid', 'profile', 'email', 'offline_access'])}, 'client_secret_basic', true)`
		await sql`insert into oauth_client_secrets (id, client_id, secret_hash) values (${Bun.randomUUIDv7()}, ${clientRowId}, ${sha256Hex(clientSecret)})`
		const basic = `Basic ${Buffer.from(`${encodeURIComponent(CLIENT_ID)}:${encodeURIComponent(clientSecret)}`).toString('base64')}`

		const accounts = await sql<{ id: string; email: string }[]>`
			select id, email from users where email like 'user%@example.test' and status = 'active' order by created_at limit ${BROWSERS}`
		if (accounts.length < BROWSERS) throw new Error(`the bench database has ${accounts.length} active seeded accounts; ${BROWSERS} are needed`)
		// The browsers of earlier runs on this database, with their provider sessions and grants: left, every run would
		// add 256 provider sessions, and the service's 5-second upkeep (logOutEndedSessionsStep) reads them all.
		const accountIds = accounts.map((account) => account.id)
		await sql`
			delete from oauth_artifacts where (model = 'Grant' and payload->>'clientId' = ${CLIENT_ID})
				or (model = 'Session' and payload->>'latchkeySessionId' in (
					select s.id::text from sessions s where s.user_id in ${sql(accountIds)} and s.browser_token_hash is not null
						and not exists (select 1 from refresh_tokens r where r.session_id = s.id)))`
		await sql`
			delete from sessions s where s.user_id in ${sql(accountIds)} and s.browser_token_hash is not null
				and not exists (select 1 from refresh_tokens r where r.session_id = s.id)`
		const browsers: Browser[] = []
		for (const account of accounts) {
			const token = opaque()
			await sql`
				insert into sessions (id, user_id, expires_at, browser_token_hash)
				values (${Bun.randomUUIDv7()}, ${account.id}, now() + interval '1 day', ${sha256Hex(token)})`
			browsers.push(new Browser(`__Host-latchkey-session=${token}`))
		}

		// One verifier for every code: PKCE binds each code to it all the same, and the bench spends no time on it.
		const verifier = opaque()
		const challenge = createHash('sha256').update(verifier).digest('base64url')
		let requestNumber = 0
		const authorizationUrl = (params: Record<string, string>, state = `s${requestNumber++}`) =>
			`${url}/oauth2/authorization?${new URLSearchParams({
				client_id: CLIENT_ID,
				redirect_uri: REDIRECT_URI,
				response_type: 'code',
				scope: 'openid email profile',
				code_challenge: challenge,
				code_challenge_method: 'S256',
				state,
				nonce: `n-${state}`,
				prompt: 'none',
				...params,
			})}`

		/** One signed-in browser's `prompt=none` request: a 303 to the redirect URI with a code. */
		const sso = async (browser: Browser): Promise<string> => {
			const state = `s${requestNumber++}`
			const response = await browser.get(authorizationUrl({}, state))
			const location = response.headers.get('location')
			await response.arrayBuffer()
			if (response.status !== 303 || !location) throw new Error(`authorization ${response.status}`)
			const callback = new URL(location)
			const code = callback.searchParams.get('code')
			if (!code || !location.startsWith(`${REDIRECT_URI}?`)) throw new Error(`authorization 303 error=${callback.searchParams.get('error') ?? callback.pathname}`)
			// RFC 9207: the answer names its issuer; and it is the answer to this request.
			if (callback.searchParams.get('iss') !== url || callback.searchParams.get('state') !== state) throw new Error('authorization 303 with the wrong iss or state')
			return code
		}

		/** The token endpoint, checked: 200 with an ID token (and a refresh token when one is expected). */
		const token = async (fields: Record<string, string>, wantRefresh: boolean) => {
			const response = await fetch(`${url}/oauth2/token`, {
				method: 'POST',
				headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
				body: new URLSearchParams(fields).toString(),
			})
			if (response.status !== 200) throw new Error(await reasonOf(`token (${fields.grant_type})`, response))
			const body = (await response.json()) as { access_token?: string; id_token?: string; refresh_token?: string }
			if (!body.access_token || !body.id_token || (wantRefresh && !body.refresh_token)) throw new Error(`token (${fields.grant_type}) 200 without ${!body.id_token ? 'id_token' : !body.access_token ? 'access_token' : 'refresh_token'}`)
			return body as { access_token: string; id_token: string; refresh_token?: string }
		}
		const exchange = (code: string) => token({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: verifier }, false)

		let browserTurn = 0
		const nextBrowser = () => browsers[browserTurn++ % browsers.length] as Browser
		/** Codes for a batch, made by the SSO path as fast as it goes. */
		const makeCodes = async (count: number) => {
			const codes: string[] = []
			let left = count
			const { reasons } = await drive(
				3600,
				() => (left-- > 0 ? nextBrowser() : undefined),
				async (browser) => {
					codes.push(await sso(browser))
					return true
				},
			)
			if (Object.keys(reasons).length) throw new Error(`codes for the exchange could not be made: ${JSON.stringify(reasons)}`)
			return codes
		}

		// ── warm-up: discovery, keys, the first sessions adopted, a few exchanges ──
		bench.log('12b. warming up')
		const discovery = await fetch(`${url}/.well-known/openid-configuration`)
		const metadata = (await discovery.json()) as { issuer?: string }
		if (discovery.status !== 200 || metadata.issuer !== url) throw new Error(`discovery ${discovery.status}: issuer ${metadata.issuer} (expected ${url})`)
		const accessTokens: string[] = []
		for (const code of await makeCodes(BROWSERS)) accessTokens.push((await exchange(code)).access_token)

		const rows: R[] = []
		// ── 1. single sign-on ──
		// Warm before it is measured, as userinfo and /users/me are below: a running service has compiled its path;
		// the first thousands of requests after a start also pay for the JIT's compiling them (docs/performance.md).
		await drive(Math.min(2, secondsOf('sso')), nextBrowser, async (browser) => {
			await sso(browser)
			return true
		})
		bench.log(`12c. provider-sso: prompt=none with a browser session, ${CONCURRENCY} at once for ${bench.seconds} s`)
		let ssoRun: Awaited<ReturnType<typeof drive>> | undefined
		const ssoMeasured = await bench.measure(service, async () => {
			ssoRun = await drive(secondsOf('sso'), nextBrowser, async (browser) => {
				await sso(browser)
				return true
			})
			return ssoRun.load
		})
		if (!ssoRun) throw new Error('provider-sso was not measured')
		failures['provider-sso'] = ssoRun.reasons
		const ssoFigures = ssoRun.figures
		rows.push(bench.row('provider-sso', `GET /oauth2/authorization prompt=none → 303 code (${CONCURRENCY} at once)`, ssoMeasured, { name: '(goal on p99)', perSecond: null }, 'p99 < 20 ms', ssoFigures.p99Ms < 20))
		bench.log(`12c'. provider-sso one at a time for ${secondsOf('sso')} s`)
		let ssoAloneRun: Awaited<ReturnType<typeof drive>> | undefined
		const ssoAloneMeasured = await bench.measure(service, async () => {
			ssoAloneRun = await drive(
				secondsOf('sso'),
				nextBrowser,
				async (browser) => {
					await sso(browser)
					return true
				},
				1,
			)
			return ssoAloneRun.load
		})
		if (!ssoAloneRun) throw new Error('provider-sso alone was not measured')
		failures['provider-sso-alone'] = ssoAloneRun.reasons
		rows.push(bench.row('provider-sso-alone', 'GET /oauth2/authorization prompt=none → 303 code (one at a time)', ssoAloneMeasured, { name: '(goal on p99)', perSecond: null }, 'p99 < 20 ms', ssoAloneRun.figures.p99Ms < 20))

		// ── the pages, as a browser's first visit loads each (issue 24: /sign-in; issue 25: every page) ──
		const pageFigures: PageFigures[] = []
		for (const { path, signedIn } of PAGES) {
			bench.log(`12c''. page ${path}: its HTML and linked files, ${CONCURRENCY} at once for ${secondsOf('sign-in-page')} s${signedIn ? ', signed in' : ''}`)
			const page = { bytes: 0, requests: 0, compressed: false }
			const cookie = signedIn ? browsers[0]!.cookieHeader() : undefined
			let pageRun: Awaited<ReturnType<typeof drive>> | undefined
			const pageMeasured = await bench.measure(service, async () => {
				pageRun = await drive(secondsOf('sign-in-page'), () => true, async () => {
					const loaded = await loadPage(`${url}${path}`, cookie)
					if (typeof loaded === 'string') return loaded
					Object.assign(page, loaded)
					return true
				})
				return pageRun.load
			})
			if (!pageRun) throw new Error(`the page ${path} was not measured`)
			const name = path === '/sign-in' ? 'provider-sign-in-page' : `page-${path.slice(1).replaceAll('/', '-')}`
			failures[name] = pageRun.reasons
			pageFigures.push({ ...pageRun.figures, path, requests: page.requests, bytesOnTheWire: page.bytes, compressed: page.compressed })
			rows.push(
				bench.row(
					name,
					`GET ${path} + its ${page.requests - 1} linked files, first visit (${CONCURRENCY} at once; ${(page.bytes / 1024).toFixed(1)} KiB on the wire${page.compressed ? ', compressed' : ''})`,
					pageMeasured,
					{ name: '(goal on p99 and size)', perSecond: null },
					'p99 < 50 ms, < 100 KB',
					pageRun.figures.p99Ms < 50 && page.bytes < 100_000,
				),
			)
		}

		// ── 2. the code exchange: a batch made just before, exchanged as fast as possible ──
		const signLimit = { name: `RS256 JWT: ${bench.cores} cores ÷ ${signing.signMs.toFixed(2)} ms`, perSecond: signing.limitPerSecond }
		// Enough for the whole run at the SSO rate (an exchange is no faster: it signs), within the codes' lifetime.
		const batch = secondsOf('code') < bench.seconds ? CONCURRENCY * 4 : Math.max(CONCURRENCY * 4, Math.min(Math.ceil(ssoFigures.perSecond * bench.seconds * 1.1), Math.floor(ssoFigures.perSecond * (CODE_BUDGET_SECONDS - bench.seconds))))
		bench.log(`12d. provider-code: ${batch} codes made, then exchanged, ${CONCURRENCY} at once for up to ${bench.seconds} s`)
		const codes = await makeCodes(batch)
		let codeRun: Awaited<ReturnType<typeof drive>> | undefined
		const codeMeasured = await bench.measure(service, async () => {
			codeRun = await drive(secondsOf('code'), () => codes.pop(), async (code) => {
				const tokens = await exchange(code)
				if (accessTokens.length < BROWSERS * 4) accessTokens.push(tokens.access_token)
				return true
			})
			return codeRun.load
		})
		if (!codeRun) throw new Error('provider-code was not measured')
		failures['provider-code'] = codeRun.reasons
		if (codes.length === 0) bench.log(`the ${batch} codes ran out after ${codeRun.figures.seconds.toFixed(1)} s: the figure covers that`)
		rows.push(bench.row('provider-code', `POST /oauth2/token authorization_code (${CONCURRENCY} at once)`, codeMeasured, signLimit))

		// ── 3. the refresh grant: rotation chains, each request with the newest token of a free chain ──
		bench.log(`12e. provider-refresh: ${REFRESH_CHAINS} rotation chains, ${CONCURRENCY} at once for ${bench.seconds} s`)
		const chains: string[] = []
		for (let i = 0; i < REFRESH_CHAINS; i++) {
			// offline_access is granted only with prompt=consent (OpenID Connect Core §11), which a first-party client passes without a page.
			const browser = nextBrowser()
			let response = await browser.get(authorizationUrl({ scope: 'openid offline_access', prompt: 'consent' }))
			for (let hop = 0; hop < 6 && response.status >= 300 && response.status < 400; hop++) {
				const location = new URL(response.headers.get('location') ?? '', url)
				await response.arrayBuffer()
				if (location.href.startsWith(REDIRECT_URI)) {
					const code = location.searchParams.get('code')
					if (!code) throw new Error(`a refresh chain could not start: error=${location.searchParams.get('error')}`)
					const tokens = await exchange(code)
					if (!tokens.refresh_token) throw new Error('offline_access gave no refresh token')
					chains.push(tokens.refresh_token)
					break
				}
				response = await browser.get(location.href)
			}
			if (chains.length !== i + 1) throw new Error(`a refresh chain could not start: stopped at ${response.status}`)
		}
		let refreshRun: Awaited<ReturnType<typeof drive>> | undefined
		const refreshMeasured = await bench.measure(service, async () => {
			refreshRun = await drive(secondsOf('refresh'), () => chains.shift(), async (refreshToken) => {
				// A chain whose request fails is dropped (its token may or may not have rotated); the others go on.
				const tokens = await token({ grant_type: 'refresh_token', refresh_token: refreshToken }, true)
				chains.push(tokens.refresh_token as string)
				return true
			})
			return refreshRun.load
		})
		if (!refreshRun) throw new Error('provider-refresh was not measured')
		failures['provider-refresh'] = refreshRun.reasons
		rows.push(bench.row('provider-refresh', `POST /oauth2/token refresh_token, rotation (${REFRESH_CHAINS} chains, ${CONCURRENCY} at once)`, refreshMeasured, signLimit))

		// ── 4. userinfo against the API's own /users/me, in the same run ──
		bench.log(`12f. provider-userinfo against GET /api/users/me, ${CONCURRENCY} at once for ${bench.seconds} s each`)
		const apiTokens: string[] = []
		let nextLogin = 0
		const { reasons: loginReasons } = await drive(
			3600,
			() => (nextLogin < API_SESSIONS ? accounts[nextLogin++] : undefined),
			async (account) => {
				const response = await fetch(`${url}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: account.email, password: bench.password }) })
				if (response.status !== 200) return reasonOf('login', response)
				apiTokens.push(((await response.json()) as { data: { accessToken: string } }).data.accessToken)
				return true
			},
		)
		if (apiTokens.length === 0) throw new Error(`no API login succeeded: ${JSON.stringify(loginReasons)}`)
		const read = (seconds: number, path: string, tokens: string[], check: (body: Record<string, unknown>) => boolean) => {
			let turn = 0
			return drive(
				seconds,
				() => tokens[turn++ % tokens.length],
				async (accessToken): Promise<Outcome> => {
					const response = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${accessToken}` } })
					if (response.status !== 200) return reasonOf(`GET ${path}`, response)
					return check((await response.json()) as Record<string, unknown>) || `GET ${path} 200 without the account`
				},
			)
		}
		const readMe = (seconds: number) => read(seconds, '/api/users/me', apiTokens, (body) => typeof (body.data as { id?: unknown } | undefined)?.id === 'string')
		const readUserinfo = (seconds: number) => read(seconds, '/oauth2/userinfo', accessTokens, (body) => typeof body.sub === 'string' && typeof body.email === 'string')
		// Both paths warm before either is measured.
		await readMe(Math.min(2, secondsOf('users-me')))
		await readUserinfo(Math.min(2, secondsOf('userinfo')))
		let meRun: Awaited<ReturnType<typeof drive>> | undefined
		const meMeasured = await bench.measure(service, async () => {
			meRun = await readMe(secondsOf('users-me'))
			return meRun.load
		})
		let userinfoRun: Awaited<ReturnType<typeof drive>> | undefined
		const userinfoMeasured = await bench.measure(service, async () => {
			userinfoRun = await readUserinfo(secondsOf('userinfo'))
			return userinfoRun.load
		})
		// /users/me again: the reference is the mean of before and after, so a drift of the machine's pace is shared.
		let meAfterRun: Awaited<ReturnType<typeof drive>> | undefined
		const meAfterMeasured = await bench.measure(service, async () => {
			meAfterRun = await readMe(secondsOf('users-me'))
			return meAfterRun.load
		})
		if (!meRun || !userinfoRun || !meAfterRun) throw new Error('the reads were not measured')
		failures['provider-users-me'] = meRun.reasons
		failures['provider-userinfo'] = userinfoRun.reasons
		failures['provider-users-me-after'] = meAfterRun.reasons
		const reference = (meRun.figures.perSecond + meAfterRun.figures.perSecond) / 2
		const ratio = reference > 0 ? userinfoRun.figures.perSecond / reference : 0
		rows.push(
			bench.row('provider-users-me', `GET /api/users/me (reference, ${CONCURRENCY} at once)`, meMeasured, { name: '(reference for userinfo)', perSecond: null }),
			bench.row('provider-userinfo', `GET /oauth2/userinfo (${CONCURRENCY} at once)`, userinfoMeasured, { name: 'GET /api/users/me, mean of both', perSecond: reference }, '≥ 90% of /users/me', ratio >= 0.9),
			bench.row('provider-users-me-after', `GET /api/users/me again, after userinfo (${CONCURRENCY} at once)`, meAfterMeasured, { name: '(reference for userinfo)', perSecond: null }),
		)

		for (const [scenario, reasons] of Object.entries(failures))
			if (Object.keys(reasons).length) bench.log(`${scenario}: requests that failed: ${JSON.stringify(reasons)}`)
		return {
			rows,
			figures: {
				concurrency: CONCURRENCY,
				browsers: BROWSERS,
				signMs: signing.signMs,
				signLimitPerSecond: signing.limitPerSecond,
				sso: ssoFigures,
				ssoAlone: ssoAloneRun.figures,
				code: { ...codeRun.figures, codesMade: batch },
				refresh: { ...refreshRun.figures, chains: REFRESH_CHAINS },
				usersMe: meRun.figures,
				usersMeAfter: meAfterRun.figures,
				userinfo: userinfoRun.figures,
				userinfoRatio: ratio,
				pages: pageFigures,
				startup,
				binaryBytes: bench.binaryPath ? statSync(bench.binaryPath).size : null,
				failures,
			},
		}
	} finally {
		await sql.end()
		await service.stop()
	}
}

export function describeProvider(figures: ProviderFigures): string[] {
	const f = (x: Figures) => `${x.perSecond.toFixed(0)}/s, p50 ${x.p50Ms.toFixed(1)} ms, p99 ${x.p99Ms.toFixed(1)} ms, ${x.failed} failed`
	const share = (x: Figures) => `${((x.perSecond / figures.signLimitPerSecond) * 100).toFixed(0)}%`
	return [
		`provider: ${figures.concurrency} requests at once, ${figures.browsers} signed-in browsers; RS256 limit ${figures.signLimitPerSecond.toFixed(0)} JWT/s (one ${figures.signMs.toFixed(2)} ms × cores)`,
		`provider: SSO (prompt=none) ${f(figures.sso)}; one at a time ${f(figures.ssoAlone)} · code exchange ${f(figures.code)} (${share(figures.code)} of the limit, ${figures.code.codesMade} codes made) · refresh ${f(figures.refresh)} (${share(figures.refresh)}, ${figures.refresh.chains} chains)`,
		`provider: userinfo ${f(figures.userinfo)} against /users/me ${f(figures.usersMe)} before and ${f(figures.usersMeAfter)} after: ${(figures.userinfoRatio * 100).toFixed(0)}%`,
		...figures.pages.map((page) => `pages: ${page.path} (HTML + ${page.requests - 1} linked files) ${f(page)}, ${page.bytesOnTheWire} bytes on the wire${page.compressed ? ' (compressed)' : ' (uncompressed: the server does not compress)'}`),
		`provider: start-up on PostgreSQL (median of ${figures.startup.runs}): ready ${figures.startup.readyMs} ms after spawn, the provider loaded ${figures.startup.providerLoadedMs} ms after spawn` +
			(figures.binaryBytes === null ? '' : ` · binary ${(figures.binaryBytes / 1e6).toFixed(1)} MB (${figures.binaryBytes} bytes)`),
	]
}
