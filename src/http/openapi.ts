import { CloneType, type TSchema } from '@sinclair/typebox'
import { t } from 'elysia'
import { PROBLEM_KINDS, PROBLEM_TYPE_BASE, type FieldError, type Problem, type ProblemKind } from './problem'

export const FieldErrorSchema = t.Object({
	pointer: t.String({ description: 'JSON Pointer (as a URI fragment) to the invalid member', examples: ['#/email'] }),
	detail: t.String({ examples: ['must be an email address'] }),
	code: t.String({ examples: ['format'] }),
})

export const ProblemSchema = t.Object(
	{
		type: t.String({ format: 'uri', description: 'stable URI of the kind of problem', examples: [`${PROBLEM_TYPE_BASE}validation-error`] }),
		title: t.String({ examples: ['Validation failed'] }),
		status: t.Integer({ examples: [422] }),
		detail: t.String({ examples: ['1 field is invalid'] }),
		instance: t.String({ examples: ['/api/users'] }),
		requestId: t.Optional(t.String({ description: 'present on 500 responses' })),
		data: t.Null(),
		message: t.String({ examples: ['1 field is invalid'] }),
		errors: t.Array(FieldErrorSchema),
	},
	{ description: 'RFC 9457 problem details, with the envelope members `data`, `message` and `errors`' },
)

/** Success envelope around a data schema. */
export const Envelope = <T extends Parameters<typeof t.Object>[0][string]>(data: T) =>
	t.Object({ data, message: t.String(), errors: t.Array(t.Never(), { maxItems: 0 }) })

/** The bearer scheme of `components.securitySchemes`, and the requirement protected operations carry. */
export const BEARER_SCHEME = 'bearerAuth'
export const bearerSecurityScheme = {
	type: 'http',
	scheme: 'bearer',
	bearerFormat: 'JWT',
	description: 'An access token from `POST /api/auth/login` or `POST /api/auth/refresh`: `Authorization: Bearer <accessToken>`.',
} as const

/** Vendor extension on a problem response: the problem kinds it stands for, turned into examples in the document. */
export const PROBLEM_TYPES_EXTENSION = 'x-problem-types'

/** Vendor extension on a response schema: the response headers it declares beyond those every response has (see `withResponseHeaders`). */
export const RESPONSE_HEADERS_EXTENSION = 'x-response-headers'

const EXAMPLE_UUID = '0193f1c2-7a5e-7c3b-9d2e-5f6a7b8c9d0e'
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
			example: EXAMPLE_UUID,
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
		header: { description: 'The URL of the created resource.', required: true, schema: { type: 'string', format: 'uri-reference' }, example: `/api/users/${EXAMPLE_UUID}` },
	},
	Link: {
		name: 'Link',
		header: {
			description: 'RFC 8288: the next page (`rel="next"`), the same query with the cursor replaced; absent on the last page.',
			schema: { type: 'string' },
			example: `</api/users?limit=20&cursor=eyJ2IjoiMjAyNi0wMS0wMSJ9>; rel="next"`,
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

type Kinds = typeof PROBLEM_KINDS
type Status = Kinds[ProblemKind]['status']
type StatusOf<A> = A extends ProblemKind ? Kinds[A]['status'] : A

/** What a bare status stands for on a route: the generic kinds of that status. */
const KINDS_OF_STATUS: Record<Status, ProblemKind[]> = {
	400: ['bad-request'],
	401: ['unauthorized', 'invalid-token'],
	403: ['forbidden'],
	404: ['not-found'],
	405: ['method-not-allowed'],
	406: ['not-acceptable'],
	409: ['conflict'],
	413: ['payload-too-large'],
	415: ['unsupported-media-type'],
	422: ['validation-error'],
	429: ['rate-limited'],
	500: ['internal-error'],
	503: ['service-unavailable'],
}

/** The generic problem kinds of a status: what a bare status stands for on a route. */
export const kindsOfStatus = (status: number): ProblemKind[] => KINDS_OF_STATUS[status as Status] ?? []

/**
 * Response schemas for the problems a route can answer with, keyed by status.
 * Each argument is a status (its generic kinds, e.g. 401: no token or a
 * refused one) or a problem kind (`'email-taken'`); kinds of one status share
 * its schema, and the document shows an example of each.
 */
export function problemResponses<const A extends ReadonlyArray<Status | ProblemKind>>(
	...answers: A
): Record<StatusOf<A[number]>, typeof ProblemSchema> {
	const kindsByStatus = new Map<number, Set<ProblemKind>>()
	for (const answer of answers) {
		const kinds = typeof answer === 'number' ? KINDS_OF_STATUS[answer as Status] : [answer as ProblemKind]
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

/** When each kind of problem happens: the reference in the document's description, and its examples. */
export const PROBLEM_DESCRIPTIONS: Record<ProblemKind, { when: string; detail: string; errors?: FieldError[] }> = {
	'bad-request': { when: 'the body is not valid JSON, or the query cannot be read', detail: 'The request body is not valid JSON' },
	unauthorized: { when: 'no bearer token was sent to a route that needs one', detail: 'Send an access token: Authorization: Bearer <token>' },
	'invalid-token': {
		when: 'the access token is malformed, badly signed or expired, or its session was revoked; or the refresh token is unknown, expired, revoked or reused',
		detail: 'The access token is invalid, expired or revoked',
	},
	'invalid-credentials': {
		when: 'login with a wrong password, an unknown email or a deactivated account: one answer for all three',
		detail: 'The email or password is incorrect',
	},
	'provider-unavailable': {
		when: 'linking a provider whose discovery document cannot be fetched; `Retry-After` says when to retry',
		detail: 'The identity provider could not be reached; try again later',
	},
	'redirect-not-allowed': {
		when: 'a `redirectTo` that REDIRECT_URLS does not admit (scheme, host, port and path as written): nothing is redirected anywhere',
		detail: 'redirectTo is not one of the REDIRECT_URLS',
	},
	'invalid-mfa-token': {
		when: 'an `mfaToken` that is unknown, used, older than 5 minutes, or worn out by five wrong codes: log in again',
		detail: 'The MFA token is invalid, used, expired or worn out by wrong codes; log in again',
	},
	'invalid-second-factor': {
		when: 'a TOTP code that is wrong or already used, a recovery code that is wrong or used, or a passkey assertion that does not verify; counts toward the account’s second-factor lockout',
		detail: 'The code or passkey was not accepted',
	},
	'mfa-required': {
		when: 'the account has an active second factor and this change (password, email, a factor, recovery codes) needs a session that used one (`aal2`)',
		detail: 'This needs a session signed in with a second factor (aal2): sign in again with your factor',
	},
	'mfa-enrollment-required': {
		when: 'MFA_REQUIRED names this account and it has no factor yet: the session serves only GET /users/me, factor enrolment and logout',
		detail: 'Enrol a second factor first: this session serves only enrolment',
	},
	'reauthentication-required': {
		when: 'adding or changing a way in (a factor, a linked identity, the password or email without `currentPassword`) needs a sign-in or check of this session within REAUTHENTICATION_SECONDS (default 5 minutes): prove it again at POST /auth/reauthentication',
		detail: 'Confirm it is you first: sign in again or use POST /auth/reauthentication, then retry within 5 minutes',
	},
	forbidden: { when: 'signed in, but not allowed to do this (an admin-only route, another user’s account, a role change)', detail: 'You are not allowed to do this' },
	'not-found': { when: 'no such route, or no such resource', detail: 'The requested resource does not exist' },
	'method-not-allowed': { when: 'the path exists but not with this method; `Allow` lists the methods', detail: 'PATCH is not allowed here; use GET, PUT, DELETE' },
	'not-acceptable': { when: '`Accept` admits neither application/json nor application/problem+json', detail: 'This API only produces application/json and application/problem+json' },
	'email-taken': { when: 'the email is already registered (deactivated accounts included)', detail: 'An account with this email already exists' },
	'last-admin': { when: 'the change would leave no active admin', detail: 'The last active admin can be neither deactivated nor demoted' },
	conflict: {
		when: 'the resource changed while the request was handled (an account’s password or email changed meanwhile): read it again and retry',
		detail: 'The account changed while this request was being handled; read it again and retry',
	},
	'payload-too-large': { when: 'the body exceeds `BODY_LIMIT_BYTES`', detail: 'The request body exceeds 65536 bytes' },
	'unsupported-media-type': { when: 'a body was sent with a Content-Type other than application/json', detail: 'Send the request body as application/json' },
	'validation-error': {
		when: 'the body, query or path does not match the schema, or a value breaks a rule (password policy); `errors` names each field',
		detail: '1 field is invalid',
		errors: [{ pointer: '#/email', detail: 'must be an email address', code: 'format' }],
	},
	'rate-limited': { when: 'the client’s request budget is spent; `Retry-After` says when to retry', detail: 'Too many requests; try again in 42 seconds' },
	'login-locked': {
		when: 'too many failed password checks for this account (logins, or wrong `currentPassword` values); `Retry-After` says when it unlocks, right password or not',
		detail: 'Too many failed logins for this account; try again later',
	},
	'too-many-codes': {
		when: 'ten wrong mailed codes for this address and kind (verification, recovery, reauthentication) in the last 24 hours, for an unknown address alike: the code path is closed, right code or not, until the oldest of them is 24 hours old (`Retry-After`); the link’s token still works',
		detail: 'Too many wrong codes for this address; use the link in the mail, or try a code again later',
	},
	'internal-error': { when: 'an unexpected error; the body carries only the request id, the log has the rest', detail: 'An internal error occurred (request id 0193f1c2-7a5e-7c3b-9d2e-5f6a7b8c9d0e)' },
	'service-unavailable': { when: 'the database is unreachable; `Retry-After` says when to retry', detail: 'The database is unreachable; try again shortly' },
	'invalid-code': {
		when: 'a mailed token that is wrong, used or replaced by a newer one, or a code that is wrong, expired or voided (the fifth wrong try voids it): ask for a new mail; or, activating a factor, a TOTP code or passkey response that does not prove it',
		detail: 'The token or code is wrong, used or replaced by a newer one; ask for a new mail',
	},
	'code-expired': { when: 'a genuine mailed token whose time is up: the frontend can offer a new mail at once', detail: 'The token has expired; ask for a new mail' },
	'email-not-verified': {
		when: 'the right password for an account whose address is not yet verified, while `EMAIL_VERIFICATION=required` (a wrong password still gets 401)',
		detail: 'Verify your email address first: follow the link or enter the code from the mail',
	},
	'mail-unavailable': {
		when: 'the request needs a mail and this deployment has no SMTP server (`SMTP_URL`) configured',
		detail: 'This service cannot send mail now (no SMTP server is configured); try again later or contact its operator',
	},
}

/** An example problem document of one kind, as a route at `instance` would send it. */
export function problemExample(kind: ProblemKind, instance: string): Problem {
	const { status, title } = PROBLEM_KINDS[kind]
	const { detail, errors = [] } = PROBLEM_DESCRIPTIONS[kind]
	const body: Problem = { type: PROBLEM_TYPE_BASE + kind, title, status, detail, instance, data: null, message: detail, errors }
	return kind === 'internal-error' ? { ...body, requestId: '0193f1c2-7a5e-7c3b-9d2e-5f6a7b8c9d0e' } : body
}

/** The problem types as a Markdown list, for the document's description. */
export function problemTypesList(): string {
	return (Object.keys(PROBLEM_KINDS) as ProblemKind[])
		.map((kind) => `- \`${PROBLEM_TYPE_BASE}${kind}\` — **${PROBLEM_KINDS[kind].status} ${PROBLEM_KINDS[kind].title}**: ${PROBLEM_DESCRIPTIONS[kind].when}.`)
		.join('\n')
}
