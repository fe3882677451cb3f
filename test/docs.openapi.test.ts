import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import createClient from 'openapi-fetch'
import openapiTS, { astToString } from 'openapi-typescript'
import { isConsolePath } from '../src/console'
import packageJson from '../package.json'
import { PROBLEM_KINDS } from '../src/http/problem-catalogue'
import { PAGE_PATHS } from '../src/pages'
import { startTestApp, type TestApp } from './support/app'
import { concretePath, exampleOf, isClosedBody } from './support/schema-example'
import { PASSWORD, uniqueEmail } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

// The document is free-form JSON: walked member by member, so `any` rather than a copy of the OpenAPI types.
type Json = Record<string, any>

const DOCS_PATHS = new Set(['/api/docs', '/api/docs/json', '/api/docs/scalar.js'])
const METHODS = ['get', 'put', 'post', 'delete', 'patch']

let t: TestApp
let document: Json

/** The document, read with app.handle: it names `password` fields, which `t.call` refuses to see in any response. */
async function fetchDocument(app: TestApp['app']) {
	return app.handle(new Request('http://localhost/api/docs/json'))
}

const allOperations = () =>
	Object.entries(document.paths as Record<string, Json>).flatMap(([path, item]) =>
		METHODS.filter((method) => item[method]).map((method) => ({ path, method, operation: item[method] as Json })),
	)
/** The OpenID Provider's endpoints speak their standards' formats (form bodies, RFC 6749 errors, pages): tested apart. */
const isProtocol = (operation: Json) => operation.tags?.includes('OpenID Provider') === true
/** The API's own operations, held to its contract (problem+json, JSON bodies, budgets). */
const operations = () => allOperations().filter(({ operation }) => !isProtocol(operation))

/** The security that applies to an operation: its own, else the document's. */
const securityOf = (operation: Json): Json[] => operation.security ?? document.security ?? []

const openApiPath = (path: string) => path.replace(/:([^/]+)/g, '{$1}')

beforeAll(async () => {
	t = await startTestApp()
	const response = await fetchDocument(t.app)
	expect(response.status).toBe(200)
	document = (await response.json()) as Json
})
afterAll(() => t.close())

describe('the OpenAPI document', () => {
	test('is OpenAPI 3 with the version of package.json and a bearer scheme', () => {
		expect(document.openapi).toMatch(/^3\./)
		expect(document.info.version).toBe(packageJson.version)
		expect(document.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' })
	})

	test('describes every problem type in its description', () => {
		for (const kind of Object.keys(PROBLEM_KINDS)) expect(document.info.description).toContain(`https://latchkey.dev/problems/${kind}`)
	})

	test('lists every route of the app', () => {
		// The catch-all that answers 404 and 405 (so they pass the rate limits) is no operation, nor is an HTML page
		// (docs/pages.md) or the console's page and files (docs/console.md).
		const routes = t.app.routes.filter((route) => route.method !== 'OPTIONS' && !DOCS_PATHS.has(route.path) && !PAGE_PATHS.has(route.path) && !isConsolePath(route.path) && route.path !== '/*')
		expect(routes.length).toBeGreaterThan(10)
		for (const route of routes) expect({ route: `${route.method} ${route.path}`, documented: document.paths[openApiPath(route.path)]?.[route.method.toLowerCase()] !== undefined }).toEqual({ route: `${route.method} ${route.path}`, documented: true })
		const documented = allOperations().map(({ method, path }) => `${method} ${path}`)
		expect(documented.sort()).toEqual(routes.map((route) => `${route.method.toLowerCase()} ${openApiPath(route.path)}`).sort())
	})

	test('gives each operation a summary, a tag, a unique id, a success and problem+json problems with examples', () => {
		const ids = new Set<string>()
		for (const { path, method, operation } of operations()) {
			const where = `${method} ${path}`
			expect({ where, summary: typeof operation.summary }).toEqual({ where, summary: 'string' })
			expect(operation.tags?.length ?? 0).toBeGreaterThan(0)
			expect(ids.has(operation.operationId)).toBe(false)
			ids.add(operation.operationId)
			const statuses = Object.keys(operation.responses)
			const successes = statuses.filter((status) => status.startsWith('2'))
			// The provider sign-in's two browser steps succeed with a redirect and no body.
			const redirects = statuses.filter((status) => status === '302')
			expect({ where, successes: successes.length + redirects.length > 0 }).toEqual({ where, successes: true })
			for (const status of successes) expect(Object.keys(operation.responses[status].content ?? {})).toEqual(['application/json'])
			for (const status of redirects) expect(operation.responses[status].content).toBeUndefined()
			const problems = statuses.filter((status) => Number(status) >= 400)
			expect(problems).toContain('500')
			for (const status of problems) {
				const response = operation.responses[status]
				expect({ where, status, types: Object.keys(response.content) }).toEqual({ where, status, types: ['application/problem+json'] })
				const examples = Object.values(response.content['application/problem+json'].examples ?? {}) as Json[]
				expect(examples.length).toBeGreaterThan(0)
				for (const example of examples)
					expect(example.value).toMatchObject({ status: Number(status), type: expect.stringMatching(/^https:\/\/latchkey\.dev\/problems\//), data: null, errors: expect.any(Array) })
			}
			if (operation.requestBody) expect(Object.keys(operation.requestBody.content)).toEqual(['application/json'])
		}
	})

	test('describes the OpenID Provider\'s endpoints in their standards\' formats, public, with the headers every response has', () => {
		const protocol = allOperations().filter(({ operation }) => isProtocol(operation))
		expect(protocol.map(({ method, path }) => `${method} ${path}`)).toContain('post /oauth2/token')
		for (const { path, method, operation } of protocol) {
			const where = `${method} ${path}`
			expect({ where, summary: typeof operation.summary, id: typeof operation.operationId, security: operation.security }).toEqual({ where, summary: 'string', id: 'string', security: [] })
			for (const [status, response] of Object.entries(operation.responses as Record<string, Json>)) {
				expect({ where, status, description: typeof response.description }).toEqual({ where, status, description: 'string' })
				expect(Object.keys(response.headers ?? {})).toContain('X-Request-Id')
				if (Number(status) >= 400 && response.content?.['application/json']) expect(response.content['application/json'].schema.required).toEqual(['error'])
			}
		}
	})

	test('marks protected operations with the bearer scheme and public ones with none', () => {
		for (const { path, method, operation } of operations()) {
			const security = securityOf(operation)
			const where = `${method} ${path}`
			if (security.length === 0) continue
			expect({ where, bearer: security.some((requirement) => 'bearerAuth' in requirement) }).toEqual({ where, bearer: true })
		}
		expect(securityOf(document.paths['/api/auth/login'].post)).toEqual([])
		expect(securityOf(document.paths['/api/users/{id}'].get)).toEqual([{ bearerAuth: [] }])
	})

	test('is right about which operations need a token: without one, protected ones answer 401', async () => {
		for (const { path, method, operation } of operations()) {
			const security = securityOf(operation)
			const required = security.length > 0 && !security.some((requirement) => Object.keys(requirement).length === 0)
			const concrete = concretePath(path)
			const body = operation.requestBody?.required ? exampleOf(operation.requestBody.content['application/json'].schema) : undefined
			const res = await t.call(method.toUpperCase(), concrete, body === undefined ? {} : { json: body })
			const where = `${method} ${path}`
			if (required) expect({ where, status: res.status, type: res.body.type }).toEqual({ where, status: 401, type: 'https://latchkey.dev/problems/unauthorized' })
			else expect({ where, unauthorized: res.body?.type === 'https://latchkey.dev/problems/unauthorized' }).toEqual({ where, unauthorized: false })
		}
	})
})

describe('what the document says the server enforces', () => {
	const PROBES = new Set(['/api/health', '/api/health/ready'])
	const RATE_LIMIT_HEADERS = ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']
	/** A response's headers, their references resolved. */
	const headersOf = (response: Json): Record<string, Json | undefined> =>
		Object.fromEntries(
			Object.entries((response.headers ?? {}) as Record<string, Json>).map(([name, header]) => [
				name,
				header.$ref ? document.components.headers[String(header.$ref).replace('#/components/headers/', '')] : header,
			]),
		)

	test('request bodies refuse unknown members, and so do the queries of the list operations', () => {
		for (const { path, method, operation } of operations()) {
			const where = `${method} ${path}`
			if (operation.requestBody)
				expect({ where, closed: isClosedBody(operation.requestBody.content['application/json'].schema) }).toEqual({ where, closed: true })
			// The provider's callback is the one open query: providers add parameters of their own (iss, session_state…).
			const queried = (operation.parameters ?? []).some((parameter: Json) => parameter.in === 'query') && operation.operationId !== 'providerCallback'
			expect({ where, closed: operation['x-query']?.additionalProperties === false }).toEqual({ where, closed: queried })
		}
		expect(document.paths['/api/users'].get['x-query']).toEqual({ additionalProperties: false })
		expect(document.paths['/api/audit-events'].get['x-query']).toEqual({ additionalProperties: false })
		expect(document.paths['/api/auth/logout'].post.requestBody.required).toBe(false)
	})

	test('gives every literal of the contract as an enum, and keeps always-null members where generated clients see them', () => {
		const schemas = JSON.stringify({ paths: document.paths, schemas: document.components.schemas })
		expect(schemas).not.toContain('"const"')
		const users = document.paths['/api/users'].get
		const query = Object.fromEntries(users.parameters.map((parameter: Json) => [parameter.name, parameter.schema.enum]))
		expect(query).toMatchObject({ sort: ['createdAt', '-createdAt', 'email', '-email'], role: ['user', 'admin'], status: ['active', 'deactivated'] })
		const logout = document.paths['/api/auth/logout'].post
		expect(logout.requestBody.content['application/json'].schema.properties.scope.enum).toEqual(['local', 'others', 'global'])
		const audit = document.paths['/api/audit-events'].get.parameters.find((parameter: Json) => parameter.name === 'type')
		expect(audit.schema.enum).toContain('user.signed-up')
		for (const type of audit.schema.enum) expect(type).toMatch(/^[a-z.-]+$/)
		// openapi-fetch drops members typed exactly null (openapi-typescript PR #2825): `data` must not be one.
		expect(document.components.schemas.Problem.properties.data).toEqual({ description: expect.any(String), examples: [null] })
		expect(logout.responses['200'].content['application/json'].schema.properties.data.type).toBeUndefined()
	})

	test('declares every status the plugins in front of the routes answer', () => {
		for (const { path, method, operation } of operations()) {
			const statuses = Object.keys(operation.responses)
			const security: Json[] = operation.security ?? document.security
			const expected = ['400', '406', '500']
			if (['post', 'put', 'delete'].includes(method)) expected.push('413', '415', '422')
			if (!PROBES.has(path)) expected.push('429')
			if (security.some((requirement) => 'bearerAuth' in requirement)) expected.push('401', '503')
			const where = `${method} ${path}`
			expect({ where, missing: expected.filter((status) => !statuses.includes(status)) }).toEqual({ where, missing: [] })
		}
		// Those that read the database without a token.
		for (const path of ['/api/auth/login', '/api/auth/refresh']) expect(document.paths[path].post.responses['503']).toBeDefined()
		expect(document.paths['/api/health/ready'].get.responses['503']).toBeDefined()
		expect(document.paths['/api/health'].get.responses['503']).toBeUndefined()
	})

	test('declares the response headers: everywhere, on budgeted operations, by status, and by route', () => {
		for (const { path, method, operation } of operations()) {
			for (const [status, response] of Object.entries(operation.responses as Record<string, Json>)) {
				const where = `${method} ${path} ${status}`
				const headers = headersOf(response)
				for (const [name, header] of Object.entries(headers))
					expect({ where, name, schema: typeof header?.schema?.type, description: typeof header?.description }).toEqual({ where, name, schema: 'string', description: 'string' })
				const names = Object.keys(headers)
				const expected = ['X-Request-Id', 'Cache-Control']
				if (!PROBES.has(path)) expected.push(...RATE_LIMIT_HEADERS)
				if (status === '401') expected.push('WWW-Authenticate')
				if (status === '429' || status === '503') expected.push('Retry-After')
				if (status === '201') expected.push('Location')
				expect({ where, missing: expected.filter((name) => !names.includes(name)) }).toEqual({ where, missing: [] })
				if (PROBES.has(path)) expect(names.filter((name) => name.startsWith('RateLimit'))).toEqual([])
				expect(headers['X-Request-Id']?.required).toBe(true)
			}
		}
		expect(headersOf(document.paths['/api/users'].get.responses['200']).Link).toMatchObject({ schema: { type: 'string' } })
		expect(headersOf(document.paths['/api/audit-events'].get.responses['200']).Link).toMatchObject({ schema: { type: 'string' } })
		expect(headersOf(document.paths['/api/users'].post.responses['201']).Location).toMatchObject({ required: true })
		expect(headersOf(document.paths['/.well-known/jwks.json'].get.responses['200'])['Cache-Control']?.schema.const).toBe('public, max-age=300')
		expect(headersOf(document.paths['/api/users/{id}'].get.responses['200'])['Cache-Control']?.schema.const).toBe('no-store')
	})
})

describe('the docs', () => {
	test('are off in production: the page and the document are 404 problems', async () => {
		const production = await startTestApp({ NODE_ENV: 'production' })
		try {
			for (const path of ['/api/docs', '/api/docs/json', '/api/docs/scalar.js']) {
				const res = await production.call('GET', path)
				expect(res.status).toBe(404)
				expect(res.headers.get('content-type')).toStartWith('application/problem+json')
				expect(res.body).toMatchObject({ type: 'https://latchkey.dev/problems/not-found', status: 404, instance: path })
			}
		} finally {
			await production.close()
		}
	})

	test('are on in production with DOCS_ENABLED=true', async () => {
		const production = await startTestApp({ NODE_ENV: 'production', DOCS_ENABLED: 'true' })
		try {
			const json = await fetchDocument(production.app)
			expect(json.status).toBe(200)
			expect(((await json.json()) as Json).info.version).toBe(packageJson.version)
			const page = await production.app.handle(new Request('http://localhost/api/docs'))
			expect(page.status).toBe(200)
			expect(page.headers.get('content-type')).toStartWith('text/html')
		} finally {
			await production.close()
		}
	})

	test('serve the page with its script from this service, cacheable', async () => {
		const page = await t.app.handle(new Request('http://localhost/api/docs'))
		const html = await page.text()
		const src = /<script src="([^"]+)"/.exec(html)?.[1]
		expect(src).toStartWith('/api/docs/scalar.js')
		expect(html).not.toContain('cdn.jsdelivr.net')
		const script = await t.app.handle(new Request(`http://localhost${src}`))
		expect(script.status).toBe(200)
		expect(script.headers.get('content-type')).toContain('javascript')
		expect(script.headers.get('cache-control')).toContain('max-age=31536000')
		expect((await script.text()).length).toBeGreaterThan(100_000)
	})
})

describe('a client generated from the document', () => {
	let server: ReturnType<TestApp['app']['listen']> | undefined
	let folder: string

	beforeAll(() => {
		folder = mkdtempSync(join(tmpdir(), 'latchkey-openapi-'))
	})
	afterAll(async () => {
		await server?.stop()
		rmSync(folder, { recursive: true, force: true })
	})

	test('completes the user flow: sign up, log in, read me, update, refresh, log out', async () => {
		// Types generated now, from this very document: they exist for the reader, not the runtime.
		const types = astToString(await openapiTS(document as Parameters<typeof openapiTS>[0]))
		await Bun.write(join(folder, 'latchkey.d.ts'), types)
		for (const id of ['login', 'refresh', 'logout', 'createUser', 'getUser', 'replaceUser']) expect(types).toContain(`${id}: {`)
		expect(types).toContain('"/api/auth/login"')

		server = t.app.listen({ port: 0, hostname: '127.0.0.1' })
		const port = server.server?.port
		expect(port).toBeGreaterThan(0)
		// `any`: the paths type exists only in the file written above, after compile time.
		const client = createClient<any>({ baseUrl: `http://127.0.0.1:${port}` })
		const email = uniqueEmail('openapi')

		const created = await client.POST('/api/users', { body: { email, password: PASSWORD, name: 'Ada Lovelace' } })
		expect(created.response.status).toBe(201)
		expect(created.response.headers.get('location')).toBe(`/api/users/${created.data.data.id}`)
		expect(created.data).toMatchObject({ data: { email, name: 'Ada Lovelace', role: 'user', status: 'active' }, message: 'User created', errors: [] })
		expectDocumented('/api/users', 'post', 201, created.data)

		const loggedIn = await client.POST('/api/auth/login', { body: { email, password: PASSWORD } })
		expect(loggedIn.response.status).toBe(200)
		expect(loggedIn.data.data).toMatchObject({ tokenType: 'Bearer', user: { id: created.data.data.id } })
		expectDocumented('/api/auth/login', 'post', 200, loggedIn.data)
		const auth = (token: string) => ({ Authorization: `Bearer ${token}` })

		const me = await client.GET('/api/users/{id}', { params: { path: { id: 'me' } }, headers: auth(loggedIn.data.data.accessToken) })
		expect(me.response.status).toBe(200)
		expect(me.data.data).toEqual(created.data.data)
		expectDocumented('/api/users/{id}', 'get', 200, me.data)

		const updated = await client.PUT('/api/users/{id}', {
			params: { path: { id: 'me' } },
			body: { email, name: 'Augusta Ada King' },
			headers: auth(loggedIn.data.data.accessToken),
		})
		expect(updated.response.status).toBe(200)
		expect(updated.data.data).toMatchObject({ id: created.data.data.id, name: 'Augusta Ada King' })

		const wrong = await client.POST('/api/auth/login', { body: { email, password: 'not the password at all' } })
		expect(wrong.response.status).toBe(401)
		expect(wrong.response.headers.get('content-type')).toStartWith('application/problem+json')
		expect(wrong.error).toMatchObject({ type: 'https://latchkey.dev/problems/invalid-credentials', status: 401, data: null })
		const documented401 = document.paths['/api/auth/login'].post.responses['401'].content['application/problem+json'].examples
		expect(Object.keys(documented401)).toContain('invalid-credentials')

		const refreshed = await client.POST('/api/auth/refresh', { body: { refreshToken: loggedIn.data.data.refreshToken } })
		expect(refreshed.response.status).toBe(200)
		expect(refreshed.data.data.refreshToken).not.toBe(loggedIn.data.data.refreshToken)
		expect(refreshed.data.data.user.name).toBe('Augusta Ada King')

		const loggedOut = await client.POST('/api/auth/logout', { body: { scope: 'local' }, headers: auth(refreshed.data.data.accessToken) })
		expect(loggedOut.response.status).toBe(200)
		expect(loggedOut.data).toEqual({ data: null, message: 'Logged out', errors: [] })

		const after = await client.GET('/api/users/{id}', { params: { path: { id: 'me' } }, headers: auth(refreshed.data.data.accessToken) })
		expect(after.response.status).toBe(401)
		expect(after.error).toMatchObject({ type: 'https://latchkey.dev/problems/invalid-token', status: 401 })
	})
})

/** The documented success schema's required members are all in the body, recursively through objects. */
function expectDocumented(path: string, method: string, status: number, body: unknown) {
	const schema = document.paths[path][method].responses[String(status)].content['application/json'].schema
	const check = (node: Json, value: unknown, at: string) => {
		if (node.type !== 'object' || typeof value !== 'object' || value === null) return
		for (const name of node.required ?? []) {
			expect({ at, name, present: name in value }).toEqual({ at, name, present: true })
			if (node.properties?.[name]) check(node.properties[name], (value as Json)[name], `${at}/${name}`)
		}
	}
	check(schema, body, '#')
}

