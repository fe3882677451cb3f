import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { createApp } from '../src/app'
import { createLogger } from '../src/log'
import { call, problem, startTestApp, type TestApp } from './support/app'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

let t: TestApp
beforeAll(async () => {
	t = await startTestApp()
})
afterAll(() => t.close())

describe('problem+json for routing errors', () => {
	test('an unknown route is a 404 problem document', async () => {
		const res = await t.call('GET', '/api/nothing-here')
		expect(res.status).toBe(404)
		expect(res.headers.get('content-type')).toBe('application/problem+json')
		expect(res.body).toEqual(problem('not-found', 404, '/api/nothing-here', 'No route matches GET /api/nothing-here'))
	})

	test('a wrong method on a known path is 405 with Allow', async () => {
		const res = await t.call('DELETE', '/api/health')
		expect(res.status).toBe(405)
		expect(res.headers.get('allow')).toBe('GET')
		expect(res.body).toEqual(
			problem('method-not-allowed', 405, '/api/health', 'DELETE is not allowed here; use GET'),
		)
	})

	test('a route outside /api is a 404 too', async () => {
		const res = await t.call('GET', '/users')
		expect(res.status).toBe(404)
		expect(res.body.type).toBe('https://latchkey.dev/problems/not-found')
	})
})

describe('content negotiation', () => {
	for (const accept of [
		'application/json',
		'*/*',
		'application/*',
		'application/problem+json',
		'text/html;q=0.9, application/json;q=0.1',
	]) {
		test(`Accept: ${accept} gets JSON`, async () => {
			const res = await t.call('GET', '/api/health', { headers: { accept } })
			expect(res.status).toBe(200)
			expect(res.headers.get('content-type')).toStartWith('application/json')
		})
	}

	test('a request without Accept gets JSON', async () => {
		const res = await t.call('GET', '/api/health')
		expect(res.status).toBe(200)
		expect(res.body).toEqual({ data: { status: 'ok' }, message: 'Service is up', errors: [] })
	})

	for (const accept of ['text/html', 'application/xml', 'application/json;q=0, text/html']) {
		test(`Accept: ${accept} is 406`, async () => {
			const res = await t.call('GET', '/api/health', { headers: { accept } })
			expect(res.status).toBe(406)
			expect(res.headers.get('content-type')).toBe('application/problem+json')
			expect(res.body).toEqual(
				problem(
					'not-acceptable',
					406,
					'/api/health',
					'This API only produces application/json and application/problem+json',
				),
			)
		})
	}
})

describe('request ids and headers on every response', () => {
	test('a valid X-Request-Id is echoed', async () => {
		const res = await t.call('GET', '/api/health', { headers: { 'x-request-id': 'trace:abc-123.Z_9' } })
		expect(res.headers.get('x-request-id')).toBe('trace:abc-123.Z_9')
	})

	for (const [label, offered] of [
		['too long', 'a'.repeat(129)],
		['with a space', 'abc def'],
		['with a slash', 'abc/def'],
	] as const) {
		test(`an X-Request-Id ${label} is replaced by a fresh UUIDv7`, async () => {
			const res = await t.call('GET', '/api/health', { headers: { 'x-request-id': offered } })
			expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
		})
	}

	test('errors carry the request id and the security headers too', async () => {
		const res = await t.call('GET', '/api/missing', { headers: { 'x-request-id': 'req-1' } })
		expect(res.headers.get('x-request-id')).toBe('req-1')
		expect(res.headers.get('x-content-type-options')).toBe('nosniff')
		expect(res.headers.get('referrer-policy')).toBe('no-referrer')
		expect(res.headers.get('x-frame-options')).toBe('DENY')
		expect(res.headers.get('cache-control')).toBe('no-store')
	})

	test('success responses carry the security headers', async () => {
		const res = await t.call('GET', '/api/health/ready')
		expect(res.status).toBe(200)
		expect(res.body).toEqual({ data: { status: 'ok' }, message: 'Database answers', errors: [] })
		expect(res.headers.get('x-content-type-options')).toBe('nosniff')
		expect(res.headers.get('referrer-policy')).toBe('no-referrer')
		expect(res.headers.get('x-frame-options')).toBe('DENY')
	})
})

describe('query strings', () => {
	const repeated = (instance: string, pointers: string[]) =>
		problem(
			'bad-request',
			400,
			instance,
			'A query parameter is given more than once',
			pointers.map((pointer) => ({ pointer, code: 'duplicate', detail: 'must be given at most once' })),
		)

	test('a parameter given twice is 400 on any route, named by its JSON Pointer', async () => {
		const res = await t.call('GET', '/api/health?probe=1&probe=2')
		expect(res.status).toBe(400)
		expect(res.headers.get('content-type')).toBe('application/problem+json')
		expect(res.body).toEqual(repeated('/api/health', ['#/probe']))
		expect((await t.call('GET', '/api/health?probe=1&other=2')).status).toBe(200)
	})

	test('names are compared decoded, as the router reads them, and escaped in the pointer', async () => {
		for (const query of ['a%2Fb~c=1&a/b~c=2', 'a+b=1&a%20b=2&x', 'ok=1&=2&=3&&']) {
			const res = await t.call('GET', `/api/health?${query}`)
			expect(res.status).toBe(400)
			expect(res.body.errors.map((error: { pointer: string }) => error.pointer)).toEqual([
				query.startsWith('a%2F') ? '#/a~1b~0c' : query.startsWith('a+') ? '#/a b' : '#/',
			])
		}
	})
})

describe('request bodies', () => {
	test('a body that is not application/json is 415', async () => {
		const res = await t.call('POST', '/api/users', { body: 'email=a@b.c', headers: { 'content-type': 'application/x-www-form-urlencoded' } })
		expect(res.status).toBe(415)
		expect(res.body).toEqual(problem('unsupported-media-type', 415, '/api/users', 'Send the request body as application/json'))
	})

	test('a body without Content-Type is 415', async () => {
		const res = await t.call('POST', '/api/users', { body: '{}' , headers: { 'content-type': '' } })
		expect(res.status).toBe(415)
	})

	test('application/json with a charset parameter is accepted', async () => {
		const res = await t.call('POST', '/api/users', {
			body: '{',
			headers: { 'content-type': 'application/json; charset=utf-8' },
		})
		expect(res.status).toBe(400)
	})

	test('malformed JSON is 400', async () => {
		const res = await t.call('POST', '/api/users', { body: '{"email": ', headers: { 'content-type': 'application/json' } })
		expect(res.status).toBe(400)
		expect(res.body).toEqual(problem('bad-request', 400, '/api/users', 'The request body is not valid JSON'))
	})

	test('a body over the limit is 413, by Content-Length', async () => {
		const big = JSON.stringify({ name: 'x'.repeat(70_000) })
		const res = await t.call('POST', '/api/users', {
			body: big,
			headers: { 'content-type': 'application/json', 'content-length': String(big.length) },
		})
		expect(res.status).toBe(413)
		expect(res.body).toEqual(problem('payload-too-large', 413, '/api/users', 'The request body exceeds 65536 bytes'))
	})

	test('a streamed body over the limit is 413 as well', async () => {
		const chunk = new TextEncoder().encode(`{"name":"${'x'.repeat(70_000)}"}`)
		const stream = new ReadableStream({
			start(controller) {
				controller.enqueue(chunk)
				controller.close()
			},
		})
		const res = await t.call('POST', '/api/users', { body: stream, headers: { 'content-type': 'application/json' } })
		expect(res.status).toBe(413)
	})
})

describe('CORS', () => {
	test('a preflight is answered with the allowed methods and headers', async () => {
		const res = await t.call('OPTIONS', '/api/users', {
			headers: {
				origin: 'https://app.example',
				'access-control-request-method': 'POST',
				'access-control-request-headers': 'content-type, authorization',
			},
		})
		expect(res.status).toBe(204)
		expect(res.headers.get('access-control-allow-origin')).toBe('*')
		expect(res.headers.get('access-control-allow-methods')).toContain('POST')
		expect(res.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('authorization')
	})

	test('in development any origin is allowed, without credentials, and the headers a client reads are exposed', async () => {
		const res = await t.call('GET', '/api/health', { headers: { origin: 'https://app.example' } })
		expect(res.headers.get('access-control-allow-origin')).toBe('*')
		expect(res.headers.get('access-control-allow-credentials')).toBeNull()
		const exposed = (res.headers.get('access-control-expose-headers') ?? '').split(',').map((name) => name.trim())
		for (const name of ['Location', 'Link', 'X-Request-Id', 'WWW-Authenticate', 'Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'])
			expect(exposed).toContain(name)
	})

	test('the any-origin answer does not vary, so shared caches may keep the JWKS; a list of origins varies by Origin', async () => {
		for (const origin of [undefined, 'https://app.example']) {
			const res = await t.call('GET', '/.well-known/jwks.json', { headers: origin ? { origin } : {} })
			expect(res.status).toBe(200)
			expect(res.headers.get('vary')).toBeNull()
		}
		const strict = await startTestApp({ CORS_ORIGINS: 'https://good.example' }, t.database)
		for (const origin of ['https://good.example', 'https://evil.example'])
			expect((await strict.call('GET', '/.well-known/jwks.json', { headers: { origin } })).headers.get('vary')).toBe('Origin')
	})

	test('with a configured list only those origins are allowed, and never reflected otherwise', async () => {
		const strict = await startTestApp({ CORS_ORIGINS: 'https://good.example' }, t.database)
		const good = await strict.call('GET', '/api/health', { headers: { origin: 'https://good.example' } })
		expect(good.headers.get('access-control-allow-origin')).toBe('https://good.example')
		expect(good.headers.get('access-control-allow-credentials')).toBe('true')
		const evil = await strict.call('GET', '/api/health', { headers: { origin: 'https://evil.example' } })
		expect(evil.headers.get('access-control-allow-origin')).toBeNull()
	})
})

describe('internal errors', () => {
	test('a 500 says only that an internal error happened, and logs the detail', async () => {
		const logs: string[] = []
		const log = createLogger('debug', { write: (line: string) => void logs.push(line) })
		const app = createApp({ config: t.config, database: t.database.handle, keys: t.keys, oauthKey: t.oauthKey, log }).get('/api/test-explode', () => {
			throw new Error('select password_hash from users where email = $1 -- $argon2id$v=19$secret')
		})
		const res = await call(app, 'GET', '/api/test-explode', { headers: { 'x-request-id': 'boom-1' } })
		expect(res.status).toBe(500)
		expect(res.body).toEqual({
			...problem('internal-error', 500, '/api/test-explode', 'An internal error occurred (request id boom-1)'),
			requestId: 'boom-1',
		})
		expect(res.text).not.toContain('password_hash')
		expect(res.text).not.toContain('argon2')
		expect(res.text).not.toContain('at ')
		const logged = logs.find((line) => line.includes('unhandled error'))
		expect(JSON.parse(logged ?? '{}')).toMatchObject({ level: 'error', requestId: 'boom-1' })
	})
})
