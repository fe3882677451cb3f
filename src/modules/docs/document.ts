import { OptionalKind } from '@sinclair/typebox'
import { EXAMPLE_ID } from '../../http/ids'
import {
	BEARER_SCHEME,
	bearerSecurityScheme,
	PROBLEM_TYPES_EXTENSION,
	RESPONSE_HEADERS,
	RESPONSE_HEADERS_EXTENSION,
	STANDARD_FORMAT_EXTENSION,
	type ResponseHeaderId,
} from '../../http/openapi'
import { kindsOfStatus, PROBLEM_KINDS, PROBLEM_TYPE_BASE, problemExample, ProblemSchema, type ProblemKind } from '../../http/problem-catalogue'
import { PROBES } from '../../http/rate-limit'
import { BODY_METHODS } from '../../http/security'
import { WEBHOOK_PAYLOADS, webhookBody } from '../webhooks/model'

/*
 * The one place where @elysiajs/swagger's output is corrected. It writes every
 * response and request body under three media types (JSON, form data, plain
 * text), OpenAPI 3.0 with JSON Schema 2020 keywords, parameter `examples` as
 * arrays, and no security. Here the document becomes OpenAPI 3.1 (whose
 * schemas are the JSON Schema that TypeBox writes), bodies and successes are
 * application/json, problems application/problem+json with an example of
 * each kind, and protected operations carry the bearer scheme.
 *
 * It also says what the plugins in front of every route enforce, which no
 * route schema states: the statuses they answer (`everyOperation`), the
 * headers they send, and that bodies and queries refuse unknown members.
 * test/docs.behaviour.test.ts holds the document to the server's answers.
 */

// The document is plain JSON; these describe only the members this file touches.
// `any`: free-form JSON from the plugin, walked member by member.
type Json = Record<string, any>
export interface OpenApiDocument extends Json {
	info: Json
	paths: Record<string, Record<string, Json>>
}

interface RouteInfo {
	method: string
	path: string
	hooks?: { body?: unknown; query?: unknown }
}

/** What a route's own schemas say about its requests, beyond what the plugin writes. */
interface RouteFacts {
	bodyOptional: boolean
	/** Unknown members of the body object are refused (422). */
	bodyClosed: boolean
	/** Unknown query parameters are refused (422). */
	queryClosed: boolean
}

const METHODS = new Set(['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'])
const JSON_TYPE = 'application/json'
const PROBLEM_TYPE = 'application/problem+json'
const PROBLEM_REF = { $ref: '#/components/schemas/Problem' }

const REASONS: Record<string, string> = { '200': 'OK', '201': 'Created', '204': 'No Content' }

const TAGS = [
	{
		name: 'Authentication',
		description:
			'Log in, refresh the token pair (rotation), log out; prove again that it is the session’s owner (POST /auth/reauthentication) before adding or changing a way in. A way in is the password, a second factor, a linked identity or the address that receives recovery mail: adding one needs a check within REAUTHENTICATION_SECONDS; a proved address removes what was added while it was not; recovery removes recent passkeys and identities not added at `aal2`; each change sends the owner a notice.',
	},
	{ name: 'Users', description: 'Accounts: sign-up, reading and editing, deactivation, sessions. `{id}` may be `me`.' },
	{ name: 'Email', description: 'Verification, recovery and email change: mails with a link and a 6-digit code, sent in the background.' },
	{
		name: 'Second factors',
		description:
			'TOTP apps and passkeys (WebAuthn), recovery codes. A login of an account with an active factor answers `mfaRequired` and an `mfaToken`; POST /auth/mfa finishes it. Tokens carry `amr` (RFC 8176) and `aal`; with an active factor, changing the password or email, removing a factor and new recovery codes need `aal2`.',
	},
	{
		name: 'Identity providers',
		description:
			'Sign-in with OpenID Connect providers (Google, Microsoft Entra, Keycloak…): the browser goes to `…/authorization`, the provider sends it back to `…/callback`, which redirects to the frontend with a one-time `code` (or an `error`); the frontend exchanges the code and its PKCE verifier at POST /auth/sessions.',
	},
	{ name: 'Audit', description: 'Security events, for admins.' },
	{ name: 'Settings', description: 'The settings in effect, where each came from, and whether each secret is set (never its value), for admins.' },
	{
		name: 'Webhooks',
		description:
			'Endpoints that receive account events (user.created, session.revoked, …) as POSTs signed per Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`). Each event is written in the transaction of its change and delivered at least once, retried at about 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h; an endpoint failing for 5 days is disabled. For admins.',
	},
	{
		name: 'OAuth clients',
		description:
			'Applications that sign their users in through Latchkey as an OpenID Provider: public ones (browser and native apps, PKCE alone) and confidential ones (servers, with a secret shown once and stored hashed, rotated with a 24-hour overlap). The console’s own client (`latchkey-console`) is built in. For admins; users’ consents to clients are under Users.',
	},
	{
		name: 'Organizations',
		description:
			'Organizations (customers, teams, tenants), their members and the organization roles (one set for every organization: `owner`, `admin`, `member` built in). A non-member gets the same 404 as for an unknown id; site admins act as an owner would; the last owner can be neither removed nor demoted (409 `last-owner`).',
	},
	{ name: 'Keys', description: 'Public keys that verify access tokens (RFC 7517).' },
	{ name: 'Health', description: 'Probes; they count against no rate limit.' },
]

/** Headers on every response of every operation (security.ts). */
const EVERY_RESPONSE_HEADERS: ResponseHeaderId[] = ['X-Request-Id', 'Cache-Control']
/** Headers on every response of an operation that counts against a budget (rate-limit.ts, problem.ts). */
const BUDGET_HEADERS: ResponseHeaderId[] = ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'RateLimit-Policy', 'RateLimit']
/** Headers that go with a status. */
const STATUS_HEADERS: Record<string, ResponseHeaderId[]> = { '401': ['WWW-Authenticate'], '429': ['Retry-After'], '503': ['Retry-After'] }

/** The 400 example of an operation that reads no body: what security.ts says of a repeated parameter. */
const QUERY_BAD_REQUEST = {
	detail: 'A query parameter is given more than once',
	message: 'A query parameter is given more than once',
	errors: [{ pointer: '#/limit', code: 'duplicate', detail: 'must be given at most once' }],
}

/** An operation as the plugins in front of every route see it. */
interface OperationTraits {
	method: string
	path: string
	/** Its security names the bearer scheme: the guard verifies a token and reads its session. */
	bearer: boolean
	/** A token is welcome but not required (a missing one is no 401). */
	bearerOptional: boolean
}

/**
 * The problems an operation can answer whatever its route declares: the
 * request checks (security.ts), the budgets (rate-limit.ts), the bearer
 * guard (auth.ts) and the error boundary (problem.ts). Routes declare the
 * others; their declarations and these are merged.
 */
function everyOperation({ method, path, bearer, bearerOptional }: OperationTraits): Array<[number, ProblemKind[]]> {
	const problems: Array<[number, ProblemKind[]]> = [
		// A query parameter given twice or holding NUL; an Accept without JSON; the unexpected.
		[400, kindsOfStatus(400)],
		[406, kindsOfStatus(406)],
		[500, kindsOfStatus(500)],
	]
	// A body is checked on these methods whether or not the route reads one: media type, size, JSON, member names.
	if (BODY_METHODS.has(method.toUpperCase())) problems.push([413, kindsOfStatus(413)], [415, kindsOfStatus(415)], [422, kindsOfStatus(422)])
	if (!PROBES.has(path)) problems.push([429, ['rate-limited']])
	// The guard reads the session of a presented token: a refused token is 401, an unreachable database 503.
	if (bearer) problems.push([401, bearerOptional ? ['invalid-token'] : kindsOfStatus(401)], [503, kindsOfStatus(503)])
	return problems
}

const description = (summary: string) =>
	[
		summary,
		'',
		'Every success is `application/json`: `{ "data": …, "message": "…", "errors": [] }`. ' +
			'Every error is `application/problem+json` (RFC 9457) with the same envelope members added: ' +
			'`data` is `null` and `errors` lists the invalid fields, if any.',
		'',
		'## What every operation answers',
		'',
		'- Every response carries `X-Request-Id` and `Cache-Control: no-store` (the key set aside, which may be cached for a while).',
		'- Request bodies refuse members they do not list (422, `code: additionalProperties`): their schemas say `additionalProperties: false`. ' +
			'So does the query of operations marked `x-query: { additionalProperties: false }`; operations that list no query parameters ignore the query string.',
		'- Any operation: a query parameter given twice or holding a NUL character is 400; an `Accept` that admits no JSON is 406.',
		'- Ids are UUIDs, issued in lower case; in a path or a query either letter case names the same resource (`me` is lower case only). ' +
			'Anything else (no hyphens, braces, a `urn:uuid:` prefix) is 422 at the parameter.',
		'- POST, PUT and DELETE: a body must be `application/json` (415), at most `BODY_LIMIT_BYTES` (default 65536) long (413) and valid JSON (400), ' +
			'whether or not the operation reads it.',
		'- Every operation but the health probes counts against the client’s rate budget, and while rate limits are on every answer carries ' +
			'`RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (and the draft fields `RateLimit-Policy`, `RateLimit`); a spent budget is 429 with `Retry-After`. ' +
			'`/api/auth/*`, sign-up and a PUT that sets or checks a password count against the stricter `/auth` budget as well. ' +
			'The key set is budgeted too: it is public, and a verifier is expected to cache it.',
		'- An operation that takes a bearer token reads its session: a refused token is 401 with `WWW-Authenticate`, an unreachable database 503 with `Retry-After`.',
		'',
		'## Problem types',
		'',
		`The \`type\` of a problem is one of these URIs, the same on every route. New types may be added; a client should fall back on the status.`,
		'',
		problemTypesList(),
	].join('\n')

/** The problem types as a Markdown list, for the document's description. */
const problemTypesList = () =>
	(Object.entries(PROBLEM_KINDS) as Array<[ProblemKind, (typeof PROBLEM_KINDS)[ProblemKind]]>)
		.map(([kind, { status, title, when }]) => `- \`${PROBLEM_TYPE_BASE}${kind}\` — **${status} ${title}**: ${when}.`)
		.join('\n')

export function finishDocument(raw: OpenApiDocument, { summary, routes }: { summary: string; routes: readonly RouteInfo[] }): OpenApiDocument {
	const document = JSON.parse(JSON.stringify(raw)) as OpenApiDocument
	const facts = new Map(routes.map((route) => [`${route.method.toLowerCase()} ${openApiPath(route.path)}`, routeFacts(route)]))
	const usedHeaders = new Set<ResponseHeaderId>()
	for (const [path, item] of Object.entries(document.paths))
		for (const [method, operation] of Object.entries(item))
			if (METHODS.has(method)) finishOperation(path, method, operation, facts.get(`${method} ${path}`), usedHeaders)

	return {
		openapi: '3.1.0',
		info: { ...document.info, description: description(summary) },
		servers: [{ url: '/', description: 'This service' }],
		tags: TAGS,
		security: [{ [BEARER_SCHEME]: [] }],
		paths: document.paths,
		webhooks: webhookOperations(),
		components: {
			...document.components,
			schemas: {
				...document.components?.schemas,
				Problem: cleanSchema(JSON.parse(JSON.stringify(ProblemSchema))),
			},
			// In the order of their definition, only those some response uses.
			headers: Object.fromEntries(
				(Object.keys(RESPONSE_HEADERS) as ResponseHeaderId[]).filter((id) => usedHeaders.has(id)).map((id) => [id, RESPONSE_HEADERS[id].header]),
			),
			securitySchemes: { [BEARER_SCHEME]: bearerSecurityScheme },
		},
	}
}

const SIGNATURE_HEADERS = [
	{ name: 'webhook-id', description: "the event's id: the same at every attempt (deduplicate on it)", example: EXAMPLE_ID },
	{ name: 'webhook-timestamp', description: 'when this attempt was signed, in seconds since the epoch', example: '1767268800' },
	{ name: 'webhook-signature', description: 'space-separated `v1,<base64>` HMAC-SHA256 signatures (Standard Webhooks), one per secret that signs (two for 24 hours after a rotation)', example: 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=' },
]

/** What the service POSTs to webhook endpoints (OpenAPI 3.1 `webhooks`): one operation per event type. */
function webhookOperations(): Json {
	return Object.fromEntries(
		(Object.keys(WEBHOOK_PAYLOADS) as Array<keyof typeof WEBHOOK_PAYLOADS>).map((type) => [
			type,
			{
				post: {
					operationId: `webhook.${type}`,
					tags: ['Webhooks'],
					summary: WEBHOOK_PAYLOADS[type].summary,
					description: 'POSTed to every enabled endpoint subscribed to this type (or `*`), signed per Standard Webhooks. Any 2xx within WEBHOOK_TIMEOUT_SECONDS is success; anything else is retried.',
					security: [],
					parameters: SIGNATURE_HEADERS.map(({ name, description, example }) => ({ name, in: 'header', required: true, description, schema: { type: 'string' }, example })),
					requestBody: { required: true, content: { 'application/json': { schema: cleanSchema(JSON.parse(JSON.stringify(webhookBody(type)))) } } },
					responses: {
						'2XX': { description: 'Received: the delivery succeeded' },
						default: { description: 'Anything else (and no answer within the timeout): the delivery is retried' },
					},
				},
			},
		]),
	)
}

/**
 * With `normalize: false` (app.ts), Elysia validates a body or query object
 * that does not set `additionalProperties` itself as closed: an unknown
 * member is a 422. Nested objects keep their own setting.
 */
function routeFacts(route: RouteInfo): RouteFacts {
	const closed = (schema: unknown) =>
		typeof schema === 'object' && schema !== null && (schema as Json).type === 'object' && (schema as Json).additionalProperties !== true
	return { bodyOptional: isOptional(route.hooks?.body), bodyClosed: closed(route.hooks?.body), queryClosed: closed(route.hooks?.query) }
}

function finishOperation(path: string, method: string, operation: Json, facts: RouteFacts | undefined, usedHeaders: Set<ResponseHeaderId>) {
	operation.operationId = camelCase(operation.operationId ?? `${method} ${path}`)
	if (Array.isArray(operation.parameters)) {
		if (operation.parameters.length === 0) delete operation.parameters
		else operation.parameters = operation.parameters.map(finishParameter)
	}
	// OpenAPI has no schema for the query as a whole; this says what `additionalProperties: false` would.
	if (facts?.queryClosed) operation['x-query'] = { additionalProperties: false }
	if (operation.requestBody && !operation[STANDARD_FORMAT_EXTENSION]) {
		const schema = cleanSchema(operation.requestBody.content?.[JSON_TYPE]?.schema ?? {})
		if (facts?.bodyClosed) schema.additionalProperties = false
		operation.requestBody = { required: !facts?.bodyOptional, content: { [JSON_TYPE]: { schema } } }
	}

	const security: Json[] = operation.security ?? [{ [BEARER_SCHEME]: [] }]
	const traits: OperationTraits = {
		method,
		path,
		bearer: security.some((requirement) => BEARER_SCHEME in requirement),
		bearerOptional: security.some((requirement) => Object.keys(requirement).length === 0),
	}
	const budgeted = !PROBES.has(path)
	const headersOf = (status: string, declared: unknown): Json => {
		const ids = Array.isArray(declared) ? (declared as ResponseHeaderId[]) : []
		const names = new Set(ids.map((id) => RESPONSE_HEADERS[id].name))
		const all = [
			...EVERY_RESPONSE_HEADERS.filter((id) => !names.has(RESPONSE_HEADERS[id].name)),
			...(STATUS_HEADERS[status] ?? []),
			...ids,
			...(budgeted ? BUDGET_HEADERS : []),
		]
		for (const id of all) usedHeaders.add(id)
		return Object.fromEntries(all.map((id) => [RESPONSE_HEADERS[id].name, { $ref: `#/components/headers/${id}` }]))
	}

	// An endpoint of another standard (the OpenID Provider's) answers in that standard's formats: its responses
	// and form body stand as written, with the headers every response here carries.
	if (operation[STANDARD_FORMAT_EXTENSION]) {
		delete operation[STANDARD_FORMAT_EXTENSION]
		operation.responses = Object.fromEntries(
			Object.entries((operation.responses ?? {}) as Record<string, Json>).map(([status, response]) => [status, { ...response, headers: { ...response.headers, ...headersOf(status, undefined) } }]),
		)
		return
	}

	const successes: Record<string, Json> = {}
	const problems = new Map<number, Set<ProblemKind>>()
	const addProblem = (status: number, kinds: readonly ProblemKind[]) => {
		const known = problems.get(status) ?? new Set<ProblemKind>()
		for (const kind of kinds) known.add(kind)
		problems.set(status, known)
	}
	for (const [status, response] of Object.entries((operation.responses ?? {}) as Record<string, Json>)) {
		if (Number(status) < 400) successes[status] = successResponse(status, response, headersOf(status, response[RESPONSE_HEADERS_EXTENSION]))
		else {
			const declared = response[PROBLEM_TYPES_EXTENSION]
			addProblem(Number(status), Array.isArray(declared) ? declared : kindsOfStatus(Number(status)))
		}
	}
	for (const [status, kinds] of everyOperation(traits)) addProblem(status, kinds)
	const instance = exampleInstance(path)
	const readsBody = BODY_METHODS.has(method.toUpperCase())
	operation.responses = {
		...successes,
		...Object.fromEntries(
			[...problems]
				.sort(([a], [b]) => a - b)
				.map(([status, kinds]) => [String(status), problemResponse([...kinds], instance, headersOf(String(status), undefined), readsBody)]),
		),
	}
}

function finishParameter(parameter: Json): Json {
	const { examples, description, ...rest } = parameter
	const finished: Json = { ...rest, schema: cleanSchema(parameter.schema ?? {}) }
	if (description) finished.description = description
	// OpenAPI's parameter `examples` is a map of Example Objects; TypeBox's is a JSON Schema array.
	if (Array.isArray(examples) && examples.length > 0) finished.example = examples[0]
	return finished
}

function successResponse(status: string, response: Json, headers: Json): Json {
	const { content, description, [RESPONSE_HEADERS_EXTENSION]: _declared, ...rest } = response
	const schema = content?.[JSON_TYPE]?.schema
	return {
		...rest,
		description: description ?? REASONS[status] ?? 'Success',
		headers,
		...(schema ? { content: { [JSON_TYPE]: { schema: cleanSchema(schema) } } } : {}),
	}
}

function problemResponse(kinds: ProblemKind[], instance: string, headers: Json, readsBody: boolean): Json {
	const example = (kind: ProblemKind) =>
		// Without a body, the query is all that a 400 can be about.
		kind === 'bad-request' && !readsBody ? { ...problemExample(kind, instance), ...QUERY_BAD_REQUEST } : problemExample(kind, instance)
	const examples = Object.fromEntries(
		kinds.map((kind) => [kind, { summary: PROBLEM_KINDS[kind].title, description: `\`${PROBLEM_TYPE_BASE}${kind}\``, value: example(kind) }]),
	)
	return {
		description: kinds.map((kind) => PROBLEM_KINDS[kind].title).join('; '),
		headers,
		content: { [PROBLEM_TYPE]: { schema: PROBLEM_REF, examples } },
	}
}

/**
 * Elysia-specific keywords out of a schema (its error messages, its coercing
 * numbers: `anyOf: [string with format integer, integer]`), recursively.
 */
function cleanSchema(schema: Json): Json {
	if (typeof schema !== 'object' || schema === null) return schema
	const anyOf = schema.anyOf
	if (Array.isArray(anyOf) && anyOf.length === 2 && anyOf[0]?.type === 'string' && ['integer', 'numeric'].includes(anyOf[0]?.format))
		return cleanSchema(anyOf[1])
	const { error: _error, 'x-pattern-error': _patternError, ...rest } = schema
	// A union of string literals (TypeBox writes `anyOf` of `const`s) is an `enum`, which every generator reads.
	const literals = Array.isArray(anyOf) ? anyOf.map((member: Json) => member?.const) : typeof rest.const === 'string' ? [rest.const] : []
	if (literals.length > 0 && literals.every((literal: unknown) => typeof literal === 'string')) {
		const { anyOf: _members, const: _literal, type: _type, ...annotations } = rest
		return { ...annotations, type: 'string', enum: literals }
	}
	// A boolean literal (`mfaRequired: true`) likewise: a one-value enum.
	if (typeof rest.const === 'boolean') {
		const { const: literal, ...annotations } = rest
		return { ...annotations, type: 'boolean', enum: [literal] }
	}
	const cleaned: Json = { ...rest }
	for (const key of ['items', 'not', 'additionalProperties'])
		if (typeof cleaned[key] === 'object' && cleaned[key] !== null) cleaned[key] = cleanSchema(cleaned[key])
	for (const key of ['anyOf', 'oneOf', 'allOf']) if (Array.isArray(cleaned[key])) cleaned[key] = cleaned[key].map(cleanSchema)
	for (const key of ['properties', 'patternProperties'])
		if (cleaned[key])
			cleaned[key] = Object.fromEntries(Object.entries(cleaned[key] as Json).map(([name, value]) => [name, value?.type === 'null' ? alwaysNull(value) : cleanSchema(value)]))
	return cleaned
}

/**
 * A member that is always `null` (a problem's `data`, logout's), declared without `type: null`: openapi-fetch
 * drops members typed exactly `null` from the types it derives (openapi-ts/openapi-typescript PR #2825), and
 * generated clients would then lose the envelope's `data`. They see `unknown`, which the value satisfies.
 */
const alwaysNull = ({ type: _type, description, ...rest }: Json): Json => ({
	...rest,
	description: description ?? 'Always `null`.',
	examples: [null],
})

const isOptional = (schema: unknown) => typeof schema === 'object' && schema !== null && OptionalKind in schema

const openApiPath = (path: string) => path.replace(/:([^/]+)/g, '{$1}')

const exampleInstance = (path: string) => path.replace(/\{id\}/g, 'me').replace(/\{[^}]+\}/g, EXAMPLE_ID)

/** `get.well-knownJwks.json` → `getWellKnownJwksJson`: identifiers that code generators accept. */
const camelCase = (id: string) =>
	id
		.split(/[^A-Za-z0-9]+/)
		.filter(Boolean)
		.map((part, index) => (index === 0 ? part : part[0]?.toUpperCase() + part.slice(1)))
		.join('')
