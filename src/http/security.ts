import { Elysia } from 'elysia'
import Negotiator from 'negotiator'
import { AppError, ValidationFailed, type FieldError } from './problem'

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])
const JSON_TYPES = ['application/json', 'application/problem+json']
/** Far deeper than any request of this API; deep nesting only costs the validator time and memory. */
const MAX_JSON_DEPTH = 32
/**
 * Own members that would replace what turns a value into text (`${value}`)
 * and break error reporting downstream; no request of this API uses them.
 */
const RESERVED_MEMBERS = new Set(['toString', 'valueOf', 'toJSON', '__proto__', 'constructor'])

export interface SecurityOptions {
	bodyLimitBytes: number
	/** Paths that serve HTML (the docs page): no JSON negotiation, framing allowed. */
	htmlPaths: ReadonlySet<string>
	/** Other paths that do not serve JSON (Prometheus text): no JSON negotiation. */
	textPaths?: ReadonlySet<string>
}

const hasBody = (request: Request) => {
	const length = request.headers.get('content-length')
	if (length !== null) return length !== '0'
	return request.body !== null
}

/** The media type of a Content-Type header without parameters, lower-cased. */
const mediaType = (contentType: string | null) => (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? ''

/**
 * Request id, security headers and Cache-Control on every response, the
 * CORS preflight included: registered before everything else.
 */
export const responseHeaders = ({ htmlPaths }: Pick<SecurityOptions, 'htmlPaths'>) =>
	new Elysia({ name: 'response-headers' }).onRequest(({ request, set }) => {
		const offered = request.headers.get('x-request-id')
		set.headers['x-request-id'] = offered && REQUEST_ID.test(offered) ? offered : Bun.randomUUIDv7()
		set.headers['x-content-type-options'] = 'nosniff'
		set.headers['referrer-policy'] = 'no-referrer'
		set.headers['cache-control'] = 'no-store'
		if (!htmlPaths.has(new URL(request.url).pathname)) set.headers['x-frame-options'] = 'DENY'
	})

/**
 * Request hygiene before any route runs: content negotiation (406), media
 * type (415), body size (413), NUL in the query (400), and strict JSON
 * parsing (400) with bounded depth and no NUL characters (422).
 */
export const requestChecks = ({ bodyLimitBytes, htmlPaths, textPaths = new Set() }: SecurityOptions) =>
	new Elysia({ name: 'request-checks' })
		.onRequest(({ request }) => {
			if (request.method === 'OPTIONS') return
			const url = new URL(request.url)
			const accept = request.headers.get('accept')
			const json = !htmlPaths.has(url.pathname) && !textPaths.has(url.pathname)
			if (json && accept && !new Negotiator({ headers: { accept } }).mediaType(JSON_TYPES))
				throw new AppError('not-acceptable', 'This API only produces application/json and application/problem+json')
			// PostgreSQL text cannot hold NUL; refuse it here rather than fail in the database.
			if (/%00/i.test(url.search)) throw new AppError('bad-request', 'The query string must not contain NUL characters')

			if (BODY_METHODS.has(request.method) && hasBody(request)) {
				if (mediaType(request.headers.get('content-type')) !== 'application/json')
					throw new AppError('unsupported-media-type', 'Send the request body as application/json')
				const length = Number(request.headers.get('content-length') ?? 0)
				if (length > bodyLimitBytes)
					throw new AppError('payload-too-large', `The request body exceeds ${bodyLimitBytes} bytes`)
			}
		})
		.onParse({ as: 'global' }, async ({ request }) => {
			// Also catches chunked bodies, which carry no Content-Length to check up front.
			const bytes = await request.arrayBuffer()
			if (bytes.byteLength > bodyLimitBytes)
				throw new AppError('payload-too-large', `The request body exceeds ${bodyLimitBytes} bytes`)
			if (bytes.byteLength === 0) return undefined
			let body: unknown
			try {
				body = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)) as unknown
			} catch {
				throw new AppError('bad-request', 'The request body is not valid JSON')
			}
			const problems = inspectJson(body, '#', 0)
			if (problems.length > 0) throw new ValidationFailed(problems.slice(0, 20))
			return body
		})
		.as('global')

/** What strict JSON parsing refuses beyond syntax: depth, NUL characters, reserved member names. */
function inspectJson(value: unknown, pointer: string, depth: number): FieldError[] {
	if (depth > MAX_JSON_DEPTH)
		throw new AppError('bad-request', `The request body is nested more than ${MAX_JSON_DEPTH} levels deep`)
	if (typeof value === 'string')
		return value.includes('\u0000') ? [{ pointer, code: 'invalid', detail: 'must not contain NUL characters' }] : []
	if (value === null || typeof value !== 'object') return []
	const problems: FieldError[] = []
	for (const [key, member] of Object.entries(value)) {
		const path = `${pointer}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`
		if (RESERVED_MEMBERS.has(key) || key.includes('\u0000'))
			problems.push({ pointer: path, code: 'additionalProperties', detail: 'is not an allowed member name' })
		else problems.push(...inspectJson(member, path, depth + 1))
	}
	return problems
}
