import { Elysia } from 'elysia'
import Negotiator from 'negotiator'
import { AppError } from './problem'

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])
const JSON_TYPES = ['application/json', 'application/problem+json']

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
 * Request hygiene applied before any route runs: request id, security headers,
 * Cache-Control, content negotiation (406), media type (415), body size (413)
 * and strict JSON parsing (400).
 */
export const security = ({ bodyLimitBytes, htmlPaths, textPaths = new Set() }: SecurityOptions) =>
	new Elysia({ name: 'security' })
		.onRequest(({ request, set }) => {
			const offered = request.headers.get('x-request-id')
			set.headers['x-request-id'] = offered && REQUEST_ID.test(offered) ? offered : Bun.randomUUIDv7()
			set.headers['x-content-type-options'] = 'nosniff'
			set.headers['referrer-policy'] = 'no-referrer'
			set.headers['cache-control'] = 'no-store'
			const path = new URL(request.url).pathname
			const html = htmlPaths.has(path)
			if (!html) set.headers['x-frame-options'] = 'DENY'

			if (request.method === 'OPTIONS') return
			const accept = request.headers.get('accept')
			if (!html && !textPaths.has(path) && accept && !new Negotiator({ headers: { accept } }).mediaType(JSON_TYPES))
				throw new AppError('not-acceptable', 'This API only produces application/json and application/problem+json')

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
			try {
				return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)) as unknown
			} catch {
				throw new AppError('bad-request', 'The request body is not valid JSON')
			}
		})
		.as('global')
