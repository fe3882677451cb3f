import { expect } from 'bun:test'
import { createApp, type App, type AppDeps } from '../../src/app'
import { loadConfig, type Config } from '../../src/config/env'
import { isDatabaseUnavailable } from '../../src/db/client'
import { createLogger } from '../../src/log'
import { loadOAuthSigningKey, type OAuthSigningKey } from '../../src/crypto/oauth-signing-key'
import { loadTokenKeys, type TokenKeys } from '../../src/modules/auth/keys'
import { ensureConsoleClient } from '../../src/modules/oauth/clients'
import { createTestDatabase, type TestDatabase } from './database'
import { TEST_OAUTH_SIGNING_KEY } from './oauth-key'
import { tracked } from './running'

/** Settings every test app starts from: cheap hashing, no throttling, quiet. */
export const TEST_ENV: Record<string, string> = {
	NODE_ENV: 'test',
	JWT_SECRET: `test-${crypto.randomUUID()}-${crypto.randomUUID()}`,
	DATA_ENCRYPTION_KEY: Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64'),
	OAUTH_SIGNING_KEY: TEST_OAUTH_SIGNING_KEY,
	// What every `app.handle` request is addressed to (see `call` below): the provider's issuer and its pages.
	PUBLIC_URL: 'http://localhost',
	PASSWORD_HASH_MEMORY_KIB: '1024',
	PASSWORD_HASH_TIME_COST: '1',
	RATE_LIMIT_MAX: '0',
	AUTH_RATE_LIMIT_MAX: '0',
	LOCKOUT_THRESHOLD: '0',
	LOG_LEVEL: 'debug',
}

/**
 * The socket peer every `app.handle` request seems to come from (there is no socket): a proxy
 * inside the 10.0.0.0/8 that tests list in TRUST_PROXY when they want X-Forwarded-For read.
 * Tests of real client addresses run the binary and bind sockets to 127.0.0.x (rate-limit.e2e.ts).
 */
export const TEST_PEER = '10.0.0.1'

export interface CallOptions {
	json?: unknown
	body?: RequestInit['body']
	headers?: Record<string, string>
	token?: string
}

export interface CallResult<T = any> {
	status: number
	headers: Headers
	body: T
	text: string
}

export interface TestApp {
	app: App
	config: Config
	keys: TokenKeys
	oauthKey: OAuthSigningKey
	database: TestDatabase
	/** Every log line the app wrote, as raw JSON text. */
	logs: string[]
	call<T = any>(method: string, path: string, options?: CallOptions): Promise<CallResult<T>>
	close(): Promise<void>
}

export async function startTestApp(
	env: Record<string, string> = {},
	database?: TestDatabase,
	extra: Pick<AppDeps, 'counters' | 'peerAddress' | 'resolveHost' | 'pageRenderer'> = {},
): Promise<TestApp> {
	const db = database ?? (await createTestDatabase())
	const config = loadConfig({ ...TEST_ENV, ...env })
	const logs: string[] = []
	const log = createLogger(config.logLevel, { write: (line: string) => void logs.push(line) })
	const keys = await loadTokenKeys(config.jwt, log)
	const oauthKey = await loadOAuthSigningKey(config.oauth.signingKey, log)
	const app = createApp({ config, database: db.handle, keys, oauthKey, log, peerAddress: () => TEST_PEER, ...extra })
	// What the server does at start before it listens (index.ts): the console's own OAuth client. An app started on
	// an unreachable database (to see its 503s) starts without it, as the server could not have started at all.
	await ensureConsoleClient(db.handle.db, config.publicUrl).catch((error: unknown) => {
		if (!isDatabaseUnavailable(error)) throw error
	})
	// No server listens under app.handle, so the job workers (mail, webhooks) are started here, as listen would.
	await app.decorator.backgroundJobs.start()
	// Stopped by close, or else when its database is dropped (see running.ts).
	const close = tracked(db.handle, async () => {
		await app.decorator.backgroundJobs.stop()
		if (!database) await db.drop()
	})
	return {
		app,
		config,
		keys,
		oauthKey,
		database: db,
		logs,
		call: (method, path, options = {}) => call(app, method, path, options),
		close,
	}
}

export async function call<T = any>(
	app: { handle(request: Request): Promise<Response> },
	method: string,
	path: string,
	{ json, body, headers = {}, token }: CallOptions = {},
): Promise<CallResult<T>> {
	const init: RequestInit & { headers: Record<string, string> } = { method, headers: { ...headers } }
	if (json !== undefined) {
		init.body = JSON.stringify(json)
		init.headers['content-type'] ??= 'application/json'
	} else if (body !== undefined) init.body = body
	if (token) init.headers.authorization = `Bearer ${token}`
	const response = await app.handle(new Request(`http://localhost${path}`, init))
	const text = await response.text()
	// Every response of every test: never a password member, never a hash.
	expect(text).not.toMatch(/"password(Hash)?"\s*:|\$argon2/)
	let parsed: unknown = text
	try {
		parsed = JSON.parse(text)
	} catch {}
	return { status: response.status, headers: response.headers, body: parsed as T, text }
}

/** The problem document API.md promises, for a whole-document assertion. */
export const problem = (kind: string, status: number, instance: string, detail: unknown, errors: unknown = []) => ({
	type: `https://latchkey.dev/problems/${kind}`,
	title: expect.any(String),
	status,
	detail,
	instance,
	data: null,
	message: detail,
	errors,
})

/** The 403 of a way in added or changed from a session not checked within REAUTHENTICATION_SECONDS. */
export const reauthenticationRequired = (instance: string, within = '5 minutes') =>
	problem('reauthentication-required', 403, instance, `Confirm it is you first: sign in again or use POST /auth/reauthentication, then retry within ${within}`)
