import { t, type Static } from 'elysia'
import { EXAMPLE_ID } from './ids'

/** Problem types are stable URIs: the same for a kind of problem on every route and deployment. */
export const PROBLEM_TYPE_BASE = 'https://latchkey.dev/problems/'

export const FieldErrorSchema = t.Object({
	pointer: t.String({ description: 'JSON Pointer (as a URI fragment) to the invalid member', examples: ['#/email'] }),
	detail: t.String({ examples: ['must be an email address'] }),
	code: t.String({ examples: ['format'] }),
})
export type FieldError = Static<typeof FieldErrorSchema>

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
export type Problem = Static<typeof ProblemSchema>

interface ProblemKindEntry {
	status: number
	title: string
	/** One of the kinds a bare status stands for on a route (`problemResponses(401)`, a 401 the route does not name). */
	generic?: true
	/** When it happens: the problem types list of the OpenAPI document. */
	when: string
	/** The `detail` of its example in the document (and `errors`, where it has any). */
	example: string
	exampleErrors?: readonly FieldError[]
}

/**
 * Every kind of problem the API answers with, in one table: what `AppError`
 * throws, what the problem handler and the rate limiter send (type, status,
 * title), and what the OpenAPI document says of each (problem types list,
 * response descriptions, examples).
 */
export const PROBLEM_KINDS = {
	'bad-request': {
		status: 400,
		title: 'Malformed request',
		generic: true,
		when: 'the body is not valid JSON, or the query cannot be read',
		example: 'The request body is not valid JSON',
	},
	'invalid-code': {
		status: 400,
		title: 'Invalid token or code',
		when: 'a mailed token that is wrong, used or replaced by a newer one, or a code that is wrong, expired or voided (the fifth wrong try voids it): ask for a new mail; or, activating a factor, a TOTP code or passkey response that does not prove it',
		example: 'The token or code is wrong, used or replaced by a newer one; ask for a new mail',
	},
	'code-expired': {
		status: 400,
		title: 'Token expired',
		when: 'a genuine mailed token whose time is up: the frontend can offer a new mail at once',
		example: 'The token has expired; ask for a new mail',
	},
	'redirect-not-allowed': {
		status: 400,
		title: 'Redirect not allowed',
		when: 'a `redirectTo` that REDIRECT_URLS does not admit (scheme, host, port and path as written): nothing is redirected anywhere',
		example: 'redirectTo is not one of the REDIRECT_URLS',
	},
	unauthorized: {
		status: 401,
		title: 'Authentication required',
		generic: true,
		when: 'no bearer token was sent to a route that needs one',
		example: 'Send an access token: Authorization: Bearer <token>',
	},
	'invalid-token': {
		status: 401,
		title: 'Invalid token',
		generic: true,
		when: 'the access token is malformed, badly signed or expired, or its session was revoked; or the refresh token is unknown, expired, revoked or reused',
		example: 'The access token is invalid, expired or revoked',
	},
	'invalid-credentials': {
		status: 401,
		title: 'Invalid credentials',
		when: 'login with a wrong password, an unknown email or a deactivated account: one answer for all three',
		example: 'The email or password is incorrect',
	},
	'invalid-mfa-token': {
		status: 401,
		title: 'Invalid MFA token',
		when: 'an `mfaToken` that is unknown, used, older than 5 minutes, or worn out by five wrong codes: log in again',
		example: 'The MFA token is invalid, used, expired or worn out by wrong codes; log in again',
	},
	'invalid-second-factor': {
		status: 401,
		title: 'Second factor not accepted',
		when: 'a TOTP code that is wrong or already used, a recovery code that is wrong or used, or a passkey assertion that does not verify; counts toward the account’s second-factor lockout',
		example: 'The code or passkey was not accepted',
	},
	forbidden: {
		status: 403,
		title: 'Forbidden',
		generic: true,
		when: 'signed in, but not allowed to do this (an admin-only route, another user’s account, a role change)',
		example: 'You are not allowed to do this',
	},
	'email-not-verified': {
		status: 403,
		title: 'Email not verified',
		when: 'the right password for an account whose address is not yet verified, while `EMAIL_VERIFICATION=required` (a wrong password still gets 401)',
		example: 'Verify your email address first: follow the link or enter the code from the mail',
	},
	'not-a-member': {
		status: 403,
		title: 'Not a member',
		when: 'a refresh (`POST /auth/refresh`) asked to switch to an organization the caller is not a member of, or one that is deactivated or unknown (all answered alike)',
		example: 'You are not a member of an active organization with this id',
	},
	'mfa-required': {
		status: 403,
		title: 'Second factor required',
		when: 'the account has an active second factor and this change (password, email, a factor, recovery codes) needs a session that used one (`aal2`)',
		example: 'This needs a session signed in with a second factor (aal2): sign in again with your factor',
	},
	'mfa-enrollment-required': {
		status: 403,
		title: 'Second factor enrolment required',
		when: 'MFA_REQUIRED names this account and it has no factor yet: the session serves only GET /users/me, factor enrolment and logout',
		example: 'Enrol a second factor first: this session serves only enrolment',
	},
	'reauthentication-required': {
		status: 403,
		title: 'Recent authentication required',
		when: 'adding or changing a way in (a factor, a linked identity, the password or email without `currentPassword`) needs a sign-in or check of this session within REAUTHENTICATION_SECONDS (default 5 minutes): prove it again at POST /auth/reauthentication',
		example: 'Confirm it is you first: sign in again or use POST /auth/reauthentication, then retry within 5 minutes',
	},
	'not-found': {
		status: 404,
		title: 'Not found',
		generic: true,
		when: 'no such route, or no such resource',
		example: 'The requested resource does not exist',
	},
	'method-not-allowed': {
		status: 405,
		title: 'Method not allowed',
		generic: true,
		when: 'the path exists but not with this method; `Allow` lists the methods',
		example: 'PATCH is not allowed here; use GET, PUT, DELETE',
	},
	'not-acceptable': {
		status: 406,
		title: 'Not acceptable',
		generic: true,
		when: '`Accept` admits neither application/json nor application/problem+json',
		example: 'This API only produces application/json and application/problem+json',
	},
	'email-taken': {
		status: 409,
		title: 'Email already registered',
		when: 'the email is already registered (deactivated accounts included)',
		example: 'An account with this email already exists',
	},
	'last-admin': {
		status: 409,
		title: 'Last active admin',
		when: 'the change would leave no active admin',
		example: 'The last active admin can be neither deactivated nor demoted',
	},
	'last-owner': {
		status: 409,
		title: 'Last owner',
		when: 'the change would leave an organization without an owner (removing or demoting its last `owner`)',
		example: 'The last owner of an organization can be neither removed nor demoted; make another member an owner first',
	},
	'slug-taken': {
		status: 409,
		title: 'Slug already taken',
		when: 'another organization has this slug (deactivated ones included)',
		example: 'Another organization has this slug',
	},
	conflict: {
		status: 409,
		title: 'Conflict',
		generic: true,
		when: 'the resource changed while the request was handled (an account’s password or email changed meanwhile): read it again and retry',
		example: 'The account changed while this request was being handled; read it again and retry',
	},
	'payload-too-large': {
		status: 413,
		title: 'Payload too large',
		generic: true,
		when: 'the body exceeds `BODY_LIMIT_BYTES`',
		example: 'The request body exceeds 65536 bytes',
	},
	'unsupported-media-type': {
		status: 415,
		title: 'Unsupported media type',
		generic: true,
		when: 'a body was sent with a Content-Type other than application/json',
		example: 'Send the request body as application/json',
	},
	'validation-error': {
		status: 422,
		title: 'Validation failed',
		generic: true,
		when: 'the body, query or path does not match the schema, or a value breaks a rule (password policy); `errors` names each field',
		example: '1 field is invalid',
		exampleErrors: [{ pointer: '#/email', detail: 'must be an email address', code: 'format' }],
	},
	'rate-limited': {
		status: 429,
		title: 'Too many requests',
		generic: true,
		when: 'the client’s request budget is spent; `Retry-After` says when to retry',
		example: 'Too many requests; try again in 42 seconds',
	},
	'login-locked': {
		status: 429,
		title: 'Login temporarily locked',
		when: 'too many failed password checks for this account (logins, or wrong `currentPassword` values); `Retry-After` says when it unlocks, right password or not',
		example: 'Too many failed logins for this account; try again later',
	},
	'too-many-codes': {
		status: 429,
		title: 'Too many wrong codes',
		when: 'ten wrong mailed codes for this address and kind (verification, recovery, reauthentication, sign-in) in the last 24 hours, for an unknown address alike: the code path is closed, right code or not, until the oldest of them is 24 hours old (`Retry-After`); the link’s token still works (a sign-in code’s mail has none)',
		example: 'Too many wrong codes for this address; use the link in the mail, or try a code again later',
	},
	'internal-error': {
		status: 500,
		title: 'Internal server error',
		generic: true,
		when: 'an unexpected error; the body carries only the request id, the log has the rest',
		example: `An internal error occurred (request id ${EXAMPLE_ID})`,
	},
	'service-unavailable': {
		status: 503,
		title: 'Service unavailable',
		generic: true,
		when: 'the database is unreachable; `Retry-After` says when to retry',
		example: 'The database is unreachable; try again shortly',
	},
	'mail-unavailable': {
		status: 503,
		title: 'Mail unavailable',
		when: 'the request needs a mail and this deployment has no SMTP server (`SMTP_URL`) configured',
		example: 'This service cannot send mail now (no SMTP server is configured); try again later or contact its operator',
	},
	'provider-unavailable': {
		status: 503,
		title: 'Identity provider unavailable',
		when: 'linking a provider whose discovery document cannot be fetched; `Retry-After` says when to retry',
		example: 'The identity provider could not be reached; try again later',
	},
} as const satisfies Record<string, ProblemKindEntry>

export type ProblemKind = keyof typeof PROBLEM_KINDS
export type ProblemStatus = (typeof PROBLEM_KINDS)[ProblemKind]['status']

const KINDS = Object.keys(PROBLEM_KINDS) as ProblemKind[]

/** The generic problem kinds of a status: what a bare status stands for on a route. */
export const kindsOfStatus = (status: number): ProblemKind[] =>
	KINDS.filter((kind) => {
		const entry: ProblemKindEntry = PROBLEM_KINDS[kind]
		return entry.status === status && entry.generic === true
	})

/** The problem+json body of a kind. */
export function problemBody(kind: ProblemKind, detail: string, instance: string, errors: FieldError[] = []): Problem {
	const { status, title } = PROBLEM_KINDS[kind]
	return { type: PROBLEM_TYPE_BASE + kind, title, status, detail, instance, data: null, message: detail, errors }
}

/** An example problem document of one kind, as a route at `instance` would send it. */
export function problemExample(kind: ProblemKind, instance: string): Problem {
	const entry: ProblemKindEntry = PROBLEM_KINDS[kind]
	const body = problemBody(kind, entry.example, instance, [...(entry.exampleErrors ?? [])])
	return kind === 'internal-error' ? { ...body, requestId: EXAMPLE_ID } : body
}

/** A problem met on an HTML page: what the page shows instead of problem+json. */
export interface PageProblem {
	kind: ProblemKind
	status: number
	/** From the problem's `Retry-After`, when it has one (a lockout, a spent budget). */
	retryAfterSeconds?: number
	requestId: string
}

/**
 * The HTML answer of a problem at one of the pages (given by the pages in app.ts), or undefined for any
 * other path, which gets problem+json. The plugins here (problems, rate limits) call it; they import no page.
 */
export type PageProblemRenderer = (request: Request, problem: PageProblem) => Response | undefined
