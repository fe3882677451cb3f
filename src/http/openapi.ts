import { CloneType, type TSchema } from '@sinclair/typebox'
import { t } from 'elysia'
import { EXAMPLE_ID } from './ids'
import { kindsOfStatus, PROBLEM_KINDS, ProblemSchema, type ProblemKind, type ProblemStatus } from './problem-catalogue'

/** Success envelope around a data schema. */
export const Envelope = <T extends Parameters<typeof t.Object>[0][string]>(data: T) =>
	t.Object({ data, message: t.String(), errors: t.Array(t.Never(), { maxItems: 0 }) })

/** The bearer scheme of `components.securitySchemes`, and the requirement protected operations carry. */
export const BEARER_SCHEME = 'bearerAuth'
export const bearerSecurityScheme = {
	type: 'http',
	scheme: 'bearer',
	bearerFormat: 'JWT',
	description:
		"An access token from `POST /api/auth/login` or `POST /api/auth/refresh`: `Authorization: Bearer <accessToken>`. The admin console's token is taken too, and no other token of the OpenID Provider: an RFC 9068 JWT that Latchkey's provider issued to its own client `latchkey-console` for `resource={PUBLIC_URL}/api` (RS256 with the provider's key, `iss` PUBLIC_URL, `aud` `{PUBLIC_URL}/api`, unexpired), whose `sid` names a live session of the token's active account — checked at every request as the API's own tokens are, so revoking the session or deactivating the account ends it at once; the session's assurance (`aal`) applies. Not with `CONSOLE_ENABLED=false`.",
} as const

/** Vendor extension on a problem response: the problem kinds it stands for, turned into examples in the document. */
export const PROBLEM_TYPES_EXTENSION = 'x-problem-types'

/** Vendor extension on an operation: it answers in another standard's formats (OAuth, OpenID Connect), documented as written. */
export const STANDARD_FORMAT_EXTENSION = 'x-standard-format'

/** Vendor extension on a response schema: the response headers it declares beyond those every response has (see `withResponseHeaders`). */
export const RESPONSE_HEADERS_EXTENSION = 'x-response-headers'

const seconds = { type: 'integer', minimum: 0 } as const

/**
 * The response headers of the document, as OpenAPI header objects: its
 * `components.headers`, keyed by id, each sent under the header name `name`.
 * Which response carries which is decided in one place (docs/document.ts)
 * for the headers every response, every budgeted operation or a status
 * carries, and by the route (`withResponseHeaders`) for the others.
 */
export const RESPONSE_HEADERS = {
	'X-Request-Id': {
		name: 'X-Request-Id',
		header: {
			description: 'The id of this request, as in the log: the request’s own `X-Request-Id` when it sent one of 1–128 characters of `[A-Za-z0-9._:-]`, else a new UUID.',
			required: true,
			schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
			example: EXAMPLE_ID,
		},
	},
	'Cache-Control': {
		name: 'Cache-Control',
		header: {
			description: '`no-store`: responses carry tokens and user data (and problems about them); nothing may keep them.',
			required: true,
			schema: { type: 'string', const: 'no-store' },
			example: 'no-store',
		},
	},
	'Cache-Control-Public': {
		name: 'Cache-Control',
		header: {
			description: 'The key set may be cached for 5 minutes; a rotated-out key stays listed longer than that.',
			required: true,
			schema: { type: 'string', const: 'public, max-age=300' },
			example: 'public, max-age=300',
		},
	},
	'RateLimit-Limit': {
		name: 'RateLimit-Limit',
		header: {
			description: 'Requests the client’s budget allows per window (`RATE_LIMIT_MAX`; `AUTH_RATE_LIMIT_MAX` for requests charged to the `/auth` budget). Sent while rate limits are on.',
			schema: seconds,
			example: 300,
		},
	},
	'RateLimit-Remaining': {
		name: 'RateLimit-Remaining',
		header: { description: 'Requests left in the current window. Sent while rate limits are on.', schema: seconds, example: 299 },
	},
	'RateLimit-Reset': {
		name: 'RateLimit-Reset',
		header: { description: 'Seconds until the current window ends. Sent while rate limits are on.', schema: seconds, example: 60 },
	},
	'RateLimit-Policy': {
		name: 'RateLimit-Policy',
		header: {
			description: 'The budget as a structured field (draft-ietf-httpapi-ratelimit-headers): quota `q` per window of `w` seconds. Sent while rate limits are on.',
			schema: { type: 'string' },
			example: '"default";q=300;w=60',
		},
	},
	RateLimit: {
		name: 'RateLimit',
		header: {
			description: 'What is left of the budget as a structured field (draft-ietf-httpapi-ratelimit-headers): `r` requests remaining, reset in `t` seconds. Sent while rate limits are on.',
			schema: { type: 'string' },
			example: '"default";r=299;t=60',
		},
	},
	'Retry-After': {
		name: 'Retry-After',
		header: { description: 'Seconds to wait before retrying.', required: true, schema: seconds, example: 42 },
	},
	'WWW-Authenticate': {
		name: 'WWW-Authenticate',
		header: {
			description: 'RFC 6750 challenge: `Bearer realm="latchkey"`, with `error="invalid_token"` when a token was presented and refused.',
			required: true,
			schema: { type: 'string', pattern: '^Bearer realm=' },
			example: 'Bearer realm="latchkey", error="invalid_token"',
		},
	},
	Location: {
		name: 'Location',
		header: { description: 'The URL of the created resource.', required: true, schema: { type: 'string', format: 'uri-reference' }, example: `/api/users/${EXAMPLE_ID}` },
	},
	Link: {
		name: 'Link',
		header: {
			description: 'RFC 8288: the next page (`rel="next"`), the same query with the cursor replaced; absent on the last page.',
			schema: { type: 'string' },
			example: `</api/users?limit=20&cursor=eyJ2IjoiMjAyNi0wMS0wMSJ9>; rel="next"`,
		},
	},
	'X-Total-Count': {
		name: 'X-Total-Count',
		header: {
			description: 'With `count`: how many match the query in all (as `data.total`; `data.totalExact` says whether it was counted or estimated).',
			schema: seconds,
			example: 1042,
		},
	},
} as const

export type ResponseHeaderId = keyof typeof RESPONSE_HEADERS

/**
 * A response schema that declares, for the document, response headers
 * beyond those that every response, budget or status carries (`Location`
 * on a 201, `Link` on a page). The schema validates as before.
 */
export const withResponseHeaders = <T extends TSchema>(schema: T, ...headers: ResponseHeaderId[]): T =>
	CloneType(schema, { [RESPONSE_HEADERS_EXTENSION]: headers })

type StatusOf<A> = A extends ProblemKind ? (typeof PROBLEM_KINDS)[A]['status'] : A

/**
 * Response schemas for the problems a route can answer with, keyed by status.
 * Each argument is a status (its generic kinds, e.g. 401: no token or a
 * refused one) or a problem kind (`'email-taken'`); kinds of one status share
 * its schema, and the document shows an example of each.
 */
export function problemResponses<const A extends ReadonlyArray<ProblemStatus | ProblemKind>>(
	...answers: A
): Record<StatusOf<A[number]>, typeof ProblemSchema> {
	const kindsByStatus = new Map<number, Set<ProblemKind>>()
	for (const answer of answers) {
		const kinds = typeof answer === 'number' ? kindsOfStatus(answer) : [answer as ProblemKind]
		for (const kind of kinds) {
			const status = PROBLEM_KINDS[kind].status
			kindsByStatus.set(status, (kindsByStatus.get(status) ?? new Set()).add(kind))
		}
	}
	return Object.fromEntries(
		[...kindsByStatus].map(([status, kinds]) => [
			status,
			t.Object(ProblemSchema.properties, { description: PROBLEM_KINDS[[...kinds][0] as ProblemKind].title, [PROBLEM_TYPES_EXTENSION]: [...kinds] }),
		]),
	) as Record<StatusOf<A[number]>, typeof ProblemSchema>
}
