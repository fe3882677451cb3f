import { Elysia } from 'elysia'
import Negotiator from 'negotiator'
import { AppError, deferProblem, deferredProblem, ValidationFailed, type FieldError } from './problem'
import { keepBodyRead } from './body-read'

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/
/** Methods whose body is checked (415, 413, 400, 422) whether or not the route reads one. */
export const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])
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
	/** Paths that take larger bodies than bodyLimitBytes (POST /user-imports), with their own limit. */
	largeBodies?: ReadonlyMap<string, number>
	/** Paths that serve HTML (the docs page): no JSON negotiation, framing allowed. */
	htmlPaths: ReadonlySet<string>
	/** Other paths that do not serve JSON (Prometheus text): no JSON negotiation. */
	textPaths?: ReadonlySet<string>
	/**
	 * Paths whose format a standard sets (the OpenID Provider's endpoints: form bodies in, their own JSON out):
	 * no negotiation or media type checks, and the body is handed on unread (bytes) within the size limit.
	 */
	passThrough?: (pathname: string) => boolean
	/**
	 * The pages (/sign-in, /account, their stylesheets): HTML, no JSON negotiation, and a body is an HTML
	 * form (application/x-www-form-urlencoded), read into an object of strings, rather than JSON.
	 */
	pagePaths?: ReadonlySet<string>
}

const FORM_TYPE = 'application/x-www-form-urlencoded'

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

/** What the door refuses a request for, before its body is read: 406, 400 (the query), 415, 413 (Content-Length). */
/** The largest body a request's path takes. */
const bodyLimitOf = (pathname: string, { bodyLimitBytes, largeBodies }: Pick<SecurityOptions, 'bodyLimitBytes' | 'largeBodies'>) =>
	Math.max(bodyLimitBytes, largeBodies?.get(pathname) ?? 0)

function doorProblem(request: Request, options: SecurityOptions): AppError | undefined {
	const { htmlPaths, textPaths = new Set(), passThrough, pagePaths = new Set() } = options
	if (request.method === 'OPTIONS') return undefined
	const url = new URL(request.url)
	const bodyLimitBytes = bodyLimitOf(url.pathname, options)
	if (passThrough?.(url.pathname)) {
		if (BODY_METHODS.has(request.method) && Number(request.headers.get('content-length') ?? 0) > bodyLimitBytes)
			return new AppError('payload-too-large', `The request body exceeds ${bodyLimitBytes} bytes`)
		return undefined
	}
	const accept = request.headers.get('accept')
	const page = pagePaths.has(url.pathname)
	const json = !htmlPaths.has(url.pathname) && !textPaths.has(url.pathname) && !page
	if (json && accept && !new Negotiator({ headers: { accept } }).mediaType(JSON_TYPES))
		return new AppError('not-acceptable', 'This API only produces application/json and application/problem+json')
	// PostgreSQL text cannot hold NUL; refuse it here rather than fail in the database.
	if (/%00/i.test(url.search)) return new AppError('bad-request', 'The query string must not contain NUL characters')
	// Elysia would keep only the last value of a repeated parameter (no route here takes a list):
	// refused for every route here rather than silently read one way.
	const repeated = repeatedQueryNames(url.search)
	if (repeated.length > 0)
		return new AppError('bad-request', 'A query parameter is given more than once', {
			errors: repeated.slice(0, 20).map((name) => ({ pointer: memberPointer('#', name), code: 'duplicate', detail: 'must be given at most once' })),
		})
	if (BODY_METHODS.has(request.method) && hasBody(request)) {
		if (mediaType(request.headers.get('content-type')) !== (page ? FORM_TYPE : 'application/json'))
			return new AppError('unsupported-media-type', page ? `Send the form as ${FORM_TYPE}` : 'Send the request body as application/json')
		if (Number(request.headers.get('content-length') ?? 0) > bodyLimitBytes)
			return new AppError('payload-too-large', `The request body exceeds ${bodyLimitBytes} bytes`)
	}
	return undefined
}

/**
 * Request hygiene: content negotiation (406), media type (415), body size
 * (413), NUL or a repeated parameter in the query (400), and strict JSON
 * parsing (400) with bounded depth and no NUL characters (422).
 *
 * The door checks decide first thing, but the request is refused only once
 * the rate limits have counted it (register this after them): from the
 * parse hook, before a refused body is read, or else before the handler.
 * The problem handler answers that refusal rather than anything else that
 * failed meanwhile (a query that also breaks its schema, say).
 */
export const requestChecks = (options: SecurityOptions) =>
	new Elysia({ name: 'request-checks' })
		.onRequest(({ request }) => {
			const problem = doorProblem(request, options)
			if (problem) deferProblem(request, problem)
		})
		.onParse({ as: 'global' }, async ({ request }) => {
			const refused = deferredProblem(request)
			if (refused) throw refused
			// Also catches chunked bodies, which carry no Content-Length to check up front.
			const bytes = await request.arrayBuffer()
			keepBodyRead(request, bytes)
			const limit = bodyLimitOf(new URL(request.url).pathname, options)
			if (bytes.byteLength > limit) throw new AppError('payload-too-large', `The request body exceeds ${limit} bytes`)
			if (options.passThrough?.(new URL(request.url).pathname)) return bytes
			if (bytes.byteLength === 0) return undefined
			if (options.pagePaths?.has(new URL(request.url).pathname)) return readForm(bytes)
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
		.onBeforeHandle({ as: 'global' }, ({ request }) => {
			const refused = deferredProblem(request)
			if (refused) throw refused
		})
		.as('global')

/** A page's form: its fields as strings (a repeated name keeps its last value), with no NUL in any. */
function readForm(bytes: ArrayBuffer): Record<string, string> {
	let text: string
	try {
		text = new TextDecoder('utf-8', { fatal: true }).decode(bytes)
	} catch {
		throw new AppError('bad-request', 'The form is not valid UTF-8')
	}
	const fields: Record<string, string> = Object.create(null)
	for (const [name, value] of new URLSearchParams(text)) {
		if (name.includes('\u0000') || value.includes('\u0000')) throw new AppError('bad-request', 'The form must not contain NUL characters')
		fields[name] = value
	}
	return fields
}

/** The JSON Pointer (as a URI fragment) of a member of the value at `parent`. */
const memberPointer = (parent: string, key: string) => `${parent}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`

/** A query name as Elysia's parser reads it: `+` is a space, and what does not decode stays as it is. */
function decodeQueryName(raw: string): string {
	const spaced = raw.replaceAll('+', ' ')
	try {
		return decodeURIComponent(spaced)
	} catch {
		return spaced
	}
}

/** Names that a query string (`?…`) gives more than once, split and decoded as Elysia does. */
function repeatedQueryNames(search: string): string[] {
	const seen = new Set<string>()
	const repeated = new Set<string>()
	for (const pair of search.slice(1).split('&')) {
		const equals = pair.indexOf('=')
		if (equals === -1 && pair === '') continue
		const name = decodeQueryName(equals === -1 ? pair : pair.slice(0, equals))
		if (seen.has(name)) repeated.add(name)
		seen.add(name)
	}
	return [...repeated]
}

/** What strict JSON parsing refuses beyond syntax: depth, NUL characters, reserved member names. */
function inspectJson(value: unknown, pointer: string, depth: number): FieldError[] {
	if (depth > MAX_JSON_DEPTH)
		throw new AppError('bad-request', `The request body is nested more than ${MAX_JSON_DEPTH} levels deep`)
	if (typeof value === 'string')
		return value.includes('\u0000') ? [{ pointer, code: 'invalid', detail: 'must not contain NUL characters' }] : []
	if (value === null || typeof value !== 'object') return []
	const problems: FieldError[] = []
	for (const [key, member] of Object.entries(value)) {
		const path = memberPointer(pointer, key)
		if (RESERVED_MEMBERS.has(key) || key.includes('\u0000'))
			problems.push({ pointer: path, code: 'additionalProperties', detail: 'is not an allowed member name' })
		else problems.push(...inspectJson(member, path, depth + 1))
	}
	return problems
}
