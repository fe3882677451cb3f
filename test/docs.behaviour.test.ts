import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { openDatabase } from '../src/db/client'
import { startTestApp, type CallOptions, type CallResult, type TestApp } from './support/app'
import { concretePath, exampleOf, isClosedBody } from './support/schema-example'
import { USER_IMPORTS_BODY_LIMIT_BYTES, USER_IMPORTS_PATH } from '../src/modules/imports/model'
import { loggedMail, proofOf } from './support/mail'
import { awayFromStepBoundary, enrollTotp, passwordStep, totpCode } from './support/factors'
import { PASSWORD, signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'
import { FlowBrowser, pkcePair, TestOpenIdProvider } from './support/oidc-provider'
import { SoftAuthenticator } from './support/soft-authenticator'
import { seedOrganization } from './support/organization-seed'
import { organizationInvitations, users } from '../src/db/schema'
import { newOpaqueToken } from '../src/crypto/opaque-tokens'
import { invitationTokenHash } from '../src/modules/organizations/invitations'
import { eq, sql } from 'drizzle-orm'

/*
 * The OpenAPI document against the server's answers: for every operation it
 * lists, requests that the plugins in front of the routes refuse (an unknown
 * member or query parameter, an oversized or malformed body, a wrong media
 * type or Accept) get a status the document declares for that operation, a
 * problem type it gives an example of, and the headers it declares.
 */

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(120_000)

// The document is free-form JSON: walked member by member, so `any` rather than a copy of the OpenAPI types.
type Json = Record<string, any>

interface Operation {
	path: string
	method: string
	operation: Json
	where: string
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch']
const PROBLEM_BASE = 'https://latchkey.dev/problems/'
/** High enough that no budget is spent by this file's requests, but on: every answer carries the RateLimit headers. */
const BUDGETS = { RATE_LIMIT_MAX: '100000', AUTH_RATE_LIMIT_MAX: '100000', WEBHOOK_TIMEOUT_SECONDS: '1' }

let t: TestApp
let document: Json

async function fetchDocument(app: TestApp['app']): Promise<Json> {
	// With app.handle: the document names `password` fields, which `t.call` refuses to see in any response.
	const response = await app.handle(new Request('http://localhost/api/docs/json'))
	expect(response.status).toBe(200)
	return (await response.json()) as Json
}

/**
 * The API's own operations. The OpenID Provider's endpoints speak their standards' formats (form bodies, RFC 6749
 * errors, pages), which test/oauth.*.test.ts hold them to.
 */
const operations = (): Operation[] =>
	Object.entries(document.paths as Record<string, Json>).flatMap(([path, item]) =>
		METHODS.filter((method) => item[method] && !item[method].tags?.includes('OpenID Provider')).map((method) => ({
			path,
			method,
			operation: item[method] as Json,
			where: `${method} ${path}`,
		})),
	)

/** A `$ref` inside the document, resolved. */
const resolve = (node: Json): Json =>
	typeof node.$ref === 'string'
		? (node.$ref as string)
				.slice(2)
				.split('/')
				.reduce((at: Json, key) => at[key], document)
		: node

const isBodyMethod = (method: string) => ['post', 'put', 'patch', 'delete'].includes(method)

/** A public address that needs no lookup: endpoints of the walk are never reached (WEBHOOK_TIMEOUT_SECONDS is 1). */
const WEBHOOK_URL = 'https://93.184.215.14/hooks'

/** On the app that is up, a webhook operation's path names an endpoint of its own (and a delivery of it, from a ping). */
async function realWebhookPath(path: string, admin: Account): Promise<string> {
	if (!path.startsWith('/api/webhooks/{id}')) return concretePath(path)
	// Subscribed to an event the walk never causes: endpoints pile up, one per request, and must not each get every sign-up.
	const created = await t.call('POST', '/api/webhooks', { token: admin.accessToken, json: { url: WEBHOOK_URL, events: ['user.reactivated'] } })
	expect(created.status).toBe(201)
	const id = created.body.data.id as string
	const deliveryId = path.includes('{deliveryId}') ? (await t.call('POST', `/api/webhooks/${id}/pings`, { token: admin.accessToken })).body.data.deliveryId : ''
	return path.replace('{id}', id).replace('{deliveryId}', deliveryId)
}

/**
 * On the app that is up, an OAuth client operation's path names a confidential client of its own (one per request:
 * a DELETE disables it); a consent's path, a consent the caller has just given to a client of its own.
 */
async function realOAuthPath(path: string, admin: Account): Promise<string | undefined> {
	const consent = path === '/api/users/{id}/consents/{clientId}'
	if (!path.startsWith('/api/oauth-clients/{id}') && !consent) return undefined
	const created = await t.call('POST', '/api/oauth-clients', { token: admin.accessToken, json: { ...OAUTH_CLIENT, type: 'confidential' } })
	expect(created.status).toBe(201)
	if (!consent) return path.replace('{id}', created.body.data.id)
	await t.app.decorator.oauthConsents.grant(admin.id, created.body.data.id, ['openid'])
	return `/api/users/me/consents/${created.body.data.clientId}`
}

/** A pending invitation of a fresh organization to `email`, written straight in; its token, which the mail would carry. */
async function pendingInvitation(email: string): Promise<{ organizationId: string; invitationId: string; token: string }> {
	const { id: organizationId } = await seedOrganization(t.database.handle.db, [])
	const token = newOpaqueToken()
	const invitationId = Bun.randomUUIDv7()
	await t.database.handle.db
		.insert(organizationInvitations)
		.values({ id: invitationId, organizationId, email, roles: ['member'], tokenHash: invitationTokenHash(token), expiresAt: sql`now() + interval '1 day'` })
	return { organizationId, invitationId, token }
}

/** On the app that is up, an invitation operation's path names an organization (a site admin acts as its owner) and an invitation of its own. */
async function realInvitationPath(path: string): Promise<string | undefined> {
	if (!path.startsWith('/api/organizations/{id}/invitations')) return undefined
	const { organizationId, invitationId } = await pendingInvitation(uniqueEmail('invited'))
	return path.replace('{id}', organizationId).replace('{invitationId}', invitationId)
}

const OAUTH_CLIENT = { name: 'Acme Dashboard', redirectUris: ['https://app.example.com/callback'] }

let organizations = 0
const uniqueName = (label: string) => `${label}-${Date.now().toString(36)}-${(organizations++).toString(36)}`

/**
 * On the app that is up, an organization operation's path names an organization of its own, which the caller (an
 * admin) creates and so owns, and a member's `{userId}` a fresh account added to it as a `member`; a role's
 * `{name}` a custom role of its own (a DELETE deletes it, a PUT may not change a built-in one).
 */
async function realOrganizationPath(path: string, admin: Account): Promise<string | undefined> {
	if (path.startsWith('/api/organization-roles/{name}')) {
		const name = uniqueName('role')
		expect((await t.call('POST', '/api/organization-roles', { token: admin.accessToken, json: { name, permissions: ['reports:read'] } })).status).toBe(201)
		return path.replace('{name}', name)
	}
	if (!path.startsWith('/api/organizations/{id}')) return undefined
	const created = await t.call('POST', '/api/organizations', { token: admin.accessToken, json: { name: 'Acme', slug: uniqueName('acme') } })
	expect(created.status).toBe(201)
	const id = created.body.data.id as string
	if (!path.includes('{userId}')) return path.replace('{id}', id)
	const member = await signUp(t)
	expect((await t.call('POST', `/api/organizations/${id}/members`, { token: admin.accessToken, json: { userId: member.id, roles: ['member'] } })).status).toBe(201)
	return path.replace('{id}', id).replace('{userId}', member.id)
}

/** Bodies that the operation accepts from this caller: schema examples would sign up a taken email or log in nobody. */
const OWN_BODIES: Record<string, (caller: Account) => Record<string, unknown> | undefined | Promise<Record<string, unknown> | undefined>> = {
	createUser: () => ({ email: uniqueEmail('behaviour'), password: PASSWORD, name: 'Ada Lovelace' }),
	replaceUser: (caller) => ({ email: caller.email, name: 'Ada Lovelace' }),
	login: (caller) => ({ email: caller.email, password: PASSWORD }),
	refresh: (caller) => ({ refreshToken: caller.refreshToken }),
	logout: () => ({ scope: 'local' }),
	// Proofs from real mails (written to the log: this app has no SMTP server), one per request: each works once.
	verifyEmail: async () => {
		const email = uniqueEmail('behaviour')
		expect((await t.call('POST', '/api/users', { json: { email, password: PASSWORD } })).status).toBe(201)
		return { token: proofOf(await loggedMail(t, email)).token }
	},
	resetPassword: async (caller) => {
		expect((await t.call('POST', '/api/auth/recovery-requests', { json: { email: caller.email } })).status).toBe(202)
		return { token: proofOf(await loggedMail(t, caller.email, 10_000, 'recovery')).token, password: 'a brand new passphrase' }
	},
	// A code from a real sign-in mail (each caller is a fresh account: the resend limit sends it one).
	signInWithEmailCode: async (caller) => {
		expect((await t.call('POST', '/api/auth/sign-in-codes', { json: { email: caller.email } })).status).toBe(202)
		return { email: caller.email, code: /^(\d{6})$/m.exec((await loggedMail(t, caller.email, 10_000, 'sign-in')).text)?.[1] ?? 'no code' }
	},
	enrollFactor: () => ({ type: 'totp', name: 'Phone' }),
	// An invitation of the caller's own (verified) address, with its token.
	acceptOrganizationInvitation: async (caller) => {
		await t.database.handle.db.update(users).set({ emailVerifiedAt: sql`now()` }).where(eq(users.id, caller.id))
		return { token: (await pendingInvitation(caller.email)).token }
	},
	// The second-factor steps, each for a fresh account that has the factor (on the app that is up).
	completeMfa: async () => {
		const account = await signUp(t)
		const { secret } = await enrollTotp(t, account)
		const mfaToken = await passwordStep(t, account.email)
		await awayFromStepBoundary()
		return { mfaToken, method: 'totp', code: totpCode(secret, 1) }
	},
	createMfaChallenge: async () => {
		const { account } = await passkeyAccount()
		return { mfaToken: await passwordStep(t, account.email) }
	},
	signInWithPasskey: async () => {
		const { authenticator } = await passkeyAccount()
		return { response: authenticator.authenticate((await t.call('POST', '/api/auth/passkey/challenges')).body.data) }
	},
	// A real code: the whole provider flow, as a browser goes through it (the example challenge's verifier is RFC 7636's).
	createSessionFromProvider: async () => {
		const { verifier, challenge } = pkcePair()
		const email = uniqueEmail('behaviour-oidc')
		provider.signInAs = { sub: `sub-${email}`, email, email_verified: true }
		const landed = await new FlowBrowser(t.app).follow(
			`/api/auth/providers/test/authorization?${new URLSearchParams({ redirectTo: 'http://localhost/sign-in', codeChallenge: challenge, codeChallengeMethod: 'S256' })}`,
			provider.issuer,
			// Without APP_URL, Latchkey's own sign-in page takes the code (no page is served here yet).
			(url) => url.pathname === '/sign-in',
		)
		return { code: landed.searchParams.get('code') ?? 'no code', codeVerifier: verifier }
	},
	createWebhook: () => ({ url: WEBHOOK_URL, events: ['user.created'], description: 'CRM sync' }),
	createOAuthClient: () => ({ ...OAUTH_CLIENT, type: 'confidential' }),
	replaceOAuthClient: () => OAUTH_CLIENT,
	// A slug, a role name no one has yet; an account not yet a member of the operation's organization.
	createOrganization: () => ({ name: 'Acme', slug: uniqueName('acme') }),
	createOrganizationRole: () => ({ name: uniqueName('role'), permissions: ['reports:read'] }),
	addOrganizationMember: async () => ({ userId: (await signUp(t)).id, roles: ['member'] }),
	replaceWebhook: () => ({ url: WEBHOOK_URL, events: ['user.reactivated', 'factor.added'], enabled: true }),
	// The caller's own password: the check succeeds and renews the caller's session.
	reauthenticate: (caller) => ({ password: caller.password }),
	// Passkey options list the caller's passkeys: the caller gets one first.
	createReauthenticationChallenge: async (caller) => {
		if (caller.accessToken) await addPasskey(caller)
		return { method: 'webauthn' }
	},
	linkProvider: () => ({ provider: 'test', redirectTo: 'http://localhost/sign-in', codeChallenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM' }),
	// No body: the caller needs an active factor first.
	regenerateRecoveryCodes: async (caller) => {
		if (caller.accessToken) await enrollTotp(t, caller)
		return undefined
	},
}

/** A fresh account with an active passkey on a software authenticator (the app's default RP without APP_URL: PUBLIC_URL's host and origin). */
async function passkeyAccount() {
	const account = await signUp(t)
	return { account, authenticator: await addPasskey(account) }
}

/** An active passkey on a software authenticator for `account`. */
async function addPasskey(account: Account) {
	const authenticator = new SoftAuthenticator('http://localhost', 'localhost')
	const { factor, options } = (await t.call('POST', '/api/users/me/factors', { json: { type: 'webauthn' }, token: account.accessToken })).body.data
	const activated = await t.call('POST', `/api/users/me/factors/${factor.id}/activation`, { json: { response: authenticator.register(options) }, token: account.accessToken })
	expect(activated.status).toBe(200)
	return authenticator
}

/** The query of a valid request: the required parameters of operations that have some, a page size for lists. */
const OWN_QUERIES: Record<string, string> = {
	// A state no flow has: the flow is looked up (503 while the database is down), then invalid-state.
	providerCallback: '?code=a-code&state=a-state-of-no-flow',
	startProviderSignIn: `?${new URLSearchParams({ redirectTo: 'http://localhost/sign-in', codeChallenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', codeChallengeMethod: 'S256' })}`,
}
const validQuery = ({ operation }: Operation) => OWN_QUERIES[operation.operationId] ?? (operation['x-query'] ? '?limit=1' : '')

/** A valid body for an operation that takes one, else undefined. */
async function validBody({ operation }: Operation, caller: Account): Promise<Record<string, unknown> | undefined> {
	const own = OWN_BODIES[operation.operationId]
	if (own) return own(caller)
	if (!operation.requestBody) return undefined
	return (exampleOf(operation.requestBody.content['application/json'].schema) as Record<string, unknown>)
}

/**
 * Sends a request as a fresh admin (some succeed: a DELETE deactivates, a
 * logout revokes; none may spoil the next), with that admin's token; a GET,
 * which changes nothing, as the one admin of doorCaller.
 */
async function send(
	app: TestApp,
	op: Operation,
	build: (caller: Account) => Promise<{ query?: string; options?: CallOptions }> | { query?: string; options?: CallOptions },
	caller?: Account,
): Promise<CallResult> {
	const account = caller ?? (op.method === 'get' ? await doorCaller() : await signUpAdmin(t))
	const { query = '', options = {} } = await build(account)
	const path =
		app === t
			? ((await realOAuthPath(op.path, account)) ??
				(await realInvitationPath(op.path)) ??
				(await realOrganizationPath(op.path, account)) ??
				(await realWebhookPath(op.path, account)))
			: concretePath(op.path)
	return app.call(op.method.toUpperCase(), `${path}${query}`, { token: account.accessToken, ...options })
}

let sharedCaller: Promise<Account> | undefined
/**
 * One admin for requests the door refuses (406, 400 for the query, 415, 413, malformed JSON: security.ts
 * refuses them before any handler runs; an unknown body member, refused by the body's schema; and the tests
 * using it assert that refusal), and for GETs, which
 * change nothing: such a request cannot deactivate, log out or otherwise spoil its caller, so the next one may reuse it.
 */
const doorCaller = () => (sharedCaller ??= signUpAdmin(t))

/** What a header's schema says of its value, for the simple schemas the document uses. */
function expectHeaderValue(where: string, name: string, schema: Json, value: string) {
	const fits =
		(schema.const === undefined || value === schema.const) &&
		(schema.pattern === undefined || new RegExp(schema.pattern).test(value)) &&
		(schema.type !== 'integer' || (/^\d+$/.test(value) && Number(value) >= (schema.minimum ?? -Infinity)))
	expect({ where, header: name, value, fits }).toEqual({ where, header: name, value, fits: true })
}

/**
 * The answer is one the document declares for the operation: its status, its
 * media type, for a problem a type it gives an example of, and the headers
 * it declares (those marked required, and the RateLimit ones while budgets are on).
 */
function expectDeclared(op: Operation, res: CallResult, label: string, budgetsOn = true) {
	const where = `${op.where} (${label})`
	const response = op.operation.responses[String(res.status)] as Json | undefined
	expect({ where, status: res.status, declared: response !== undefined }).toEqual({ where, status: res.status, declared: true })
	if (!response) return
	const contentType = res.headers.get('content-type') ?? ''
	if (res.status >= 400) {
		expect({ where, contentType }).toEqual({ where, contentType: expect.stringMatching(/^application\/problem\+json/) })
		const types = Object.keys(response.content['application/problem+json'].examples).map((kind) => PROBLEM_BASE + kind)
		expect({ where, status: res.status, type: res.body.type, declared: types.includes(res.body.type) }).toEqual({
			where,
			status: res.status,
			type: res.body.type,
			declared: true,
		})
	} else if (response.content) expect({ where, contentType }).toEqual({ where, contentType: expect.stringMatching(/^application\/json/) })
	for (const [name, reference] of Object.entries((response.headers ?? {}) as Record<string, Json>)) {
		const header = resolve(reference)
		const value = res.headers.get(name)
		const expected = header.required === true || (budgetsOn && name.toLowerCase().startsWith('ratelimit'))
		if (expected) expect({ where, status: res.status, header: name, present: value !== null }).toEqual({ where, status: res.status, header: name, present: true })
		if (value !== null) expectHeaderValue(where, name, resolve(header.schema), value)
	}
}

let provider: TestOpenIdProvider

beforeAll(async () => {
	provider = await TestOpenIdProvider.start(['http://localhost/api/auth/providers/test/callback'])
	t = await startTestApp({ ...BUDGETS, OIDC_PROVIDERS: 'test', ...provider.settings('test') })
	document = await fetchDocument(t.app)
})
afterAll(async () => {
	await t.close()
	await provider.stop()
})

describe('the document against the server, for every operation', () => {
	test('covers the operations this file knows how to call well', () => {
		const ids = operations().map(({ operation }) => operation.operationId)
		expect(ids.length).toBeGreaterThan(10)
		for (const id of Object.keys(OWN_BODIES)) expect(ids).toContain(id)
	})

	test('an unknown body member is a 422 at that member where the body schema says additionalProperties: false', async () => {
		let checked = 0
		for (const op of operations().filter(({ operation }) => operation.requestBody)) {
			const schema = op.operation.requestBody.content['application/json'].schema
			expect({ where: op.where, closed: isClosedBody(schema) }).toEqual({ where: op.where, closed: true })
			// Refused before any handler runs (the body's schema is checked first): one caller serves them all.
			const res = await send(t, op, async (caller) => ({ options: { json: { ...(await validBody(op, caller)), unknownMember: true } } }), await doorCaller())
			expectDeclared(op, res, 'unknown body member')
			expect({ where: op.where, status: res.status, errors: res.body.errors }).toEqual({
				where: op.where,
				status: 422,
				errors: [{ pointer: '#/unknownMember', code: 'additionalProperties', detail: 'is not a recognised field' }],
			})
			checked++
		}
		expect(checked).toBeGreaterThanOrEqual(5)
	})

	test('an unknown query parameter is a 422 where the query is closed, and changes nothing elsewhere', async () => {
		for (const op of operations()) {
			const query = validQuery(op)
			const res = await send(t, op, async (caller) => ({ query: `${query || '?'}${query ? '&' : ''}unknownParameter=1`, options: { json: await validBody(op, caller) } }))
			expectDeclared(op, res, 'unknown query parameter')
			if (op.operation['x-query']?.additionalProperties === false)
				expect({ where: op.where, status: res.status, errors: res.body.errors }).toEqual({
					where: op.where,
					status: 422,
					errors: [{ pointer: '#/unknownParameter', code: 'additionalProperties', detail: 'is not a recognised field' }],
				})
			else {
				// Ignored: the same request without it gets the same answer.
				const without = await send(t, op, async (caller) => ({ query: OWN_QUERIES[op.operation.operationId], options: { json: await validBody(op, caller) } }))
				expect({ where: op.where, status: res.status }).toEqual({ where: op.where, status: without.status })
				expect(res.status).toBeLessThan(500)
			}
		}
	})

	test('a body over BODY_LIMIT_BYTES (POST /user-imports: 8 MiB) is a 413 on POST, PUT and DELETE, declared there, with or without Content-Length', async () => {
		const usual = JSON.stringify({ padding: 'x'.repeat(t.config.bodyLimitBytes) })
		const imports = JSON.stringify({ padding: 'x'.repeat(USER_IMPORTS_BODY_LIMIT_BYTES) })
		for (const op of operations()) {
			const oversized = op.path === USER_IMPORTS_PATH ? imports : usual
			const variants: Array<[string, Record<string, string>]> = [
				['oversized body with Content-Length', { 'content-type': 'application/json', 'content-length': String(oversized.length) }],
				['oversized body without Content-Length', { 'content-type': 'application/json' }],
			]
			for (const [label, headers] of variants) {
				// Refused at the door (a body method) or read with the body ignored (a GET changes nothing): one caller serves all.
				const res = await send(t, op, () => ({ options: { body: oversized, headers } }), await doorCaller())
				expectDeclared(op, res, label)
				if (isBodyMethod(op.method))
					expect({ where: op.where, label, status: res.status, type: res.body.type }).toEqual({
						where: op.where,
						label,
						status: 413,
						type: `${PROBLEM_BASE}payload-too-large`,
					})
			}
		}
	})

	test('a wrong media type, malformed JSON, a repeated query parameter and an Accept without JSON get the declared 415, 400 and 406', async () => {
		const cases: Array<{ label: string; status: number; kind: string; applies: (op: Operation) => boolean; build: () => { query?: string; options: CallOptions } }> = [
			{
				label: 'text/plain body',
				status: 415,
				kind: 'unsupported-media-type',
				applies: (op) => isBodyMethod(op.method),
				build: () => ({ options: { body: 'hello', headers: { 'content-type': 'text/plain' } } }),
			},
			{
				label: 'malformed JSON',
				status: 400,
				kind: 'bad-request',
				applies: (op) => isBodyMethod(op.method),
				build: () => ({ options: { body: '{"email":', headers: { 'content-type': 'application/json' } } }),
			},
			{ label: 'repeated query parameter', status: 400, kind: 'bad-request', applies: () => true, build: () => ({ query: '?a=1&a=2', options: {} }) },
			{ label: 'Accept: text/html', status: 406, kind: 'not-acceptable', applies: () => true, build: () => ({ options: { headers: { accept: 'text/html' } } }) },
		]
		for (const op of operations())
			for (const { label, status, kind, applies, build } of cases) {
				if (!applies(op)) continue
				const res = await send(t, op, build, await doorCaller())
				expectDeclared(op, res, label)
				expect({ where: op.where, label, status: res.status, type: res.body.type }).toEqual({ where: op.where, label, status, type: PROBLEM_BASE + kind })
			}
	})

	test('without a token, the operations that require one answer the declared 401 with WWW-Authenticate', async () => {
		const nobody: Account = { id: crypto.randomUUID(), email: uniqueEmail('nobody'), password: PASSWORD, accessToken: '', refreshToken: 'none', sessionId: '' }
		for (const op of operations()) {
			const security: Json[] = op.operation.security ?? document.security
			const required = security.length > 0 && !security.some((requirement) => Object.keys(requirement).length === 0)
			if (!required) continue
			// A valid body: the body's schema is checked before the token.
			const res = await t.call(op.method.toUpperCase(), concretePath(op.path), { json: await validBody(op, nobody) })
			expectDeclared(op, res, 'no token')
			expect({ where: op.where, status: res.status, challenge: res.headers.get('www-authenticate') }).toEqual({
				where: op.where,
				status: 401,
				challenge: 'Bearer realm="latchkey"',
			})
		}
	})

	test('valid requests get a declared success with the declared headers (Location on 201, Link on a page with a next one)', async () => {
		for (const op of operations()) {
			const res = await send(t, op, async (caller) => ({ query: validQuery(op), options: { json: await validBody(op, caller) } }))
			expectDeclared(op, res, 'valid request')
			// `{sessionId}`, `{factorId}`, `{identityId}`: an id nobody has; everything else succeeds (the provider sign-in's browser steps with a redirect).
			if (!/\{(sessionId|factorId|identityId)\}/.test(op.path)) {
				const success = res.status < 300 || (res.status === 302 && op.operation.responses['302'] !== undefined)
				// A refusal says which and why in the failure's diff.
				expect({ where: op.where, success, ...(success ? {} : { status: res.status, problem: res.body?.detail }) }).toEqual({ where: op.where, success: true })
			}
			if (res.status === 201 && op.path === '/api/users') expect(res.headers.get('location')).toBe(`/api/users/${res.body.data.id}`)
			if (res.status === 201 && op.path.endsWith('/factors')) expect(res.headers.get('location')).toMatch(new RegExp(`^/api/users/[0-9a-f-]{36}/factors/${res.body.data.factor.id}$`))
			if (op.operation['x-query'] && res.body.data?.nextCursor) expect(res.headers.get('link')).toContain('rel="next"')
		}
	})
})

describe('spent budgets, as the document declares them', () => {
	let limited: TestApp
	beforeAll(async () => {
		limited = await startTestApp({ RATE_LIMIT_MAX: '3', AUTH_RATE_LIMIT_MAX: '2', TRUST_PROXY: '10.0.0.0/8' })
	})
	afterAll(() => limited.close())

	const operation = (path: string, method: string): Operation => ({ path, method, operation: document.paths[path][method], where: `${method} ${path}` })
	const from = (ip: string) => ({ 'x-forwarded-for': ip })

	test('the /auth budget: the next login is a declared 429 with Retry-After and the RateLimit headers', async () => {
		const login = operation('/api/auth/login', 'post')
		const statuses = []
		for (let i = 0; i < 3; i++) {
			const res = await limited.call('POST', '/api/auth/login', { json: { email: uniqueEmail('budget'), password: PASSWORD }, headers: from('203.0.113.1') })
			expectDeclared(login, res, `login ${i + 1}`)
			statuses.push(res.status)
			if (res.status === 429) {
				expect(res.body.type).toBe(`${PROBLEM_BASE}rate-limited`)
				expect(res.headers.get('ratelimit-limit')).toBe('2')
				expect(res.headers.get('ratelimit-remaining')).toBe('0')
			}
		}
		expect(statuses).toEqual([401, 401, 429])
	})

	test('the general budget: the key set is budgeted too, and its 429 is declared with the same headers', async () => {
		for (const path of ['/.well-known/jwks.json', '/api/.well-known/jwks.json']) {
			const jwks = operation(path, 'get')
			const ip = path.startsWith('/api') ? '203.0.113.3' : '203.0.113.2'
			const statuses = []
			for (let i = 0; i < 4; i++) {
				const res = await limited.call('GET', path, { headers: from(ip) })
				expectDeclared(jwks, res, `key set ${i + 1}`)
				statuses.push(res.status)
				if (res.status === 200) expect(res.headers.get('cache-control')).toBe('public, max-age=300')
				else expect(res.headers.get('cache-control')).toBe('no-store')
			}
			expect(statuses).toEqual([200, 200, 200, 429])
		}
	})

	test('the probes count against no budget and declare no RateLimit headers', async () => {
		for (const path of ['/api/health', '/api/health/ready']) {
			const probe = operation(path, 'get')
			expect(Object.keys(probe.operation.responses['200'].headers).filter((name) => name.startsWith('RateLimit'))).toEqual([])
			expect(probe.operation.responses['429']).toBeUndefined()
			for (let i = 0; i < 5; i++) {
				const res = await limited.call('GET', path, { headers: from('203.0.113.4') })
				expectDeclared(probe, res, `probe ${i + 1}`)
				expect(res.status).toBe(200)
				expect(res.headers.get('ratelimit-limit')).toBeNull()
			}
		}
	})
})

describe('an unreachable database, as the document declares it', () => {
	/** A port on which nothing listens: bind one, note it, close it. */
	function closedPort(): number {
		const listener = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
		const { port } = listener
		listener.stop(true)
		return port
	}

	test('every operation that declares 503 answers it with Retry-After; the others still answer', async () => {
		// Callers signed up while the database answered; their tokens verify in the other app (the same JWT_SECRET).
		// A request to the app whose database is down changes nothing, so one caller serves them all, except where
		// the valid body first gives its caller a factor on the live app (OWN_BODIES): those get their own.
		const shared = await signUpAdmin(t)
		const givesCallerAFactor = new Set(['createReauthenticationChallenge', 'regenerateRecoveryCodes'])
		const callers = new Map<string, Account>()
		for (const op of operations()) callers.set(op.where, givesCallerAFactor.has(op.operation.operationId) ? await signUpAdmin(t) : shared)
		// Each request's connection is refused at once, not after the production wait before trying again (0.1 s):
		// what is under test is the answer the document declares, and it is the same either way.
		const handle = await openDatabase({ kind: 'postgres', url: `postgres://postgres@127.0.0.1:${closedPort()}/none`, poolMax: 2 }, { reconnectSeconds: 0 })
		const down = await startTestApp({ ...BUDGETS, OIDC_PROVIDERS: 'test', ...provider.settings('test') }, { handle, drop: () => handle.close() })
		try {
			for (const op of operations()) {
				const res = await send(down, op, async (caller) => ({ query: OWN_QUERIES[op.operation.operationId], options: { json: await validBody(op, caller) } }), callers.get(op.where))
				expectDeclared(op, res, 'database down')
				if (op.operation.responses['503']) {
					expect({ where: op.where, status: res.status }).toEqual({ where: op.where, status: 503 })
					expect(res.headers.get('retry-after')).toBe('5')
				} else expect({ where: op.where, status: res.status }).toEqual({ where: op.where, status: 200 })
			}
		} finally {
			await down.close()
			await handle.close()
		}
	})
})
