import { OptionalKind } from '@sinclair/typebox'
import {
	BEARER_SCHEME,
	bearerSecurityScheme,
	PROBLEM_TYPES_EXTENSION,
	problemExample,
	ProblemSchema,
	problemTypesList,
} from '../../http/openapi'
import { PROBLEM_KINDS, PROBLEM_TYPE_BASE, type ProblemKind } from '../../http/problem'

/*
 * The one place where @elysiajs/swagger's output is corrected. It writes every
 * response and request body under three media types (JSON, form data, plain
 * text), OpenAPI 3.0 with JSON Schema 2020 keywords, parameter `examples` as
 * arrays, and no security. Here the document becomes OpenAPI 3.1 (whose
 * schemas are the JSON Schema that TypeBox writes), bodies and successes are
 * application/json, problems application/problem+json with an example of
 * each kind, and protected operations carry the bearer scheme.
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
	hooks?: { body?: unknown }
}

const METHODS = new Set(['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'])
const JSON_TYPE = 'application/json'
const PROBLEM_TYPE = 'application/problem+json'
const PROBLEM_REF = { $ref: '#/components/schemas/Problem' }
const EXAMPLE_ID = '0193f1c2-7a5e-7c3b-9d2e-5f6a7b8c9d0e'

const UNIVERSAL_PROBLEMS = ['406', '500']

const REASONS: Record<string, string> = { '200': 'OK', '201': 'Created', '204': 'No Content' }

const TAGS = [
	{ name: 'Authentication', description: 'Log in, refresh the token pair (rotation), log out.' },
	{ name: 'Users', description: 'Accounts: sign-up, reading and editing, deactivation, sessions. `{id}` may be `me`.' },
	{ name: 'Audit', description: 'Security events, for admins.' },
	{ name: 'Keys', description: 'Public keys that verify access tokens (RFC 7517).' },
	{ name: 'Health', description: 'Probes; they count against no rate limit.' },
]

/** Response headers that go with a problem status. */
const PROBLEM_HEADERS: Record<number, Json> = {
	401: {
		'WWW-Authenticate': {
			description: 'RFC 6750 challenge: `Bearer realm="latchkey"`, with `error="invalid_token"` when a token was refused',
			schema: { type: 'string' },
		},
	},
	429: { 'Retry-After': { description: 'seconds to wait before retrying', schema: { type: 'integer', minimum: 0 } } },
	503: { 'Retry-After': { description: 'seconds to wait before retrying', schema: { type: 'integer', minimum: 0 } } },
}

const description = (summary: string) =>
	[
		summary,
		'',
		'Every success is `application/json`: `{ "data": …, "message": "…", "errors": [] }`. ' +
			'Every error is `application/problem+json` (RFC 9457) with the same envelope members added: ' +
			'`data` is `null` and `errors` lists the invalid fields, if any.',
		'',
		'## Problem types',
		'',
		`The \`type\` of a problem is one of these URIs, the same on every route. New types may be added; a client should fall back on the status.`,
		'',
		problemTypesList(),
	].join('\n')

export function finishDocument(raw: OpenApiDocument, { summary, routes }: { summary: string; routes: readonly RouteInfo[] }): OpenApiDocument {
	const document = JSON.parse(JSON.stringify(raw)) as OpenApiDocument
	const optionalBodies = new Set(
		routes.filter((route) => isOptional(route.hooks?.body)).map((route) => `${route.method.toLowerCase()} ${openApiPath(route.path)}`),
	)
	for (const [path, item] of Object.entries(document.paths))
		for (const [method, operation] of Object.entries(item))
			if (METHODS.has(method)) finishOperation(path, method, operation, optionalBodies.has(`${method} ${path}`))

	return {
		openapi: '3.1.0',
		info: { ...document.info, description: description(summary) },
		servers: [{ url: '/', description: 'This service' }],
		tags: TAGS,
		security: [{ [BEARER_SCHEME]: [] }],
		paths: document.paths,
		components: {
			...document.components,
			schemas: {
				...document.components?.schemas,
				Problem: cleanSchema(JSON.parse(JSON.stringify(ProblemSchema))),
			},
			securitySchemes: { [BEARER_SCHEME]: bearerSecurityScheme },
		},
	}
}

function finishOperation(path: string, method: string, operation: Json, bodyOptional: boolean) {
	operation.operationId = camelCase(operation.operationId ?? `${method} ${path}`)
	if (Array.isArray(operation.parameters)) {
		if (operation.parameters.length === 0) delete operation.parameters
		else operation.parameters = operation.parameters.map(finishParameter)
	}
	if (operation.requestBody) {
		const schema = operation.requestBody.content?.[JSON_TYPE]?.schema ?? {}
		operation.requestBody = { required: !bodyOptional, content: { [JSON_TYPE]: { schema: cleanSchema(schema) } } }
	}
	const responses: Record<string, Json> = {}
	for (const [status, response] of Object.entries((operation.responses ?? {}) as Record<string, Json>))
		responses[status] = Number(status) >= 400 ? problemResponse(Number(status), response, exampleInstance(path)) : successResponse(status, response)
	// Any route can refuse an Accept header (security.ts) or fail unexpectedly (problem.ts).
	for (const status of UNIVERSAL_PROBLEMS) responses[status] ??= problemResponse(Number(status), {}, exampleInstance(path))
	operation.responses = responses
}

function finishParameter(parameter: Json): Json {
	const { examples, description, ...rest } = parameter
	const finished: Json = { ...rest, schema: cleanSchema(parameter.schema ?? {}) }
	if (description) finished.description = description
	// OpenAPI's parameter `examples` is a map of Example Objects; TypeBox's is a JSON Schema array.
	if (Array.isArray(examples) && examples.length > 0) finished.example = examples[0]
	return finished
}

function successResponse(status: string, response: Json): Json {
	const { content, description, ...rest } = response
	const schema = content?.[JSON_TYPE]?.schema
	return {
		...rest,
		description: description ?? REASONS[status] ?? 'Success',
		...(schema ? { content: { [JSON_TYPE]: { schema: cleanSchema(schema) } } } : {}),
	}
}

function problemResponse(status: number, response: Json, instance: string): Json {
	const declared = response[PROBLEM_TYPES_EXTENSION]
	const kinds: ProblemKind[] = Array.isArray(declared)
		? declared
		: (Object.keys(PROBLEM_KINDS) as ProblemKind[]).filter((kind) => PROBLEM_KINDS[kind].status === status)
	const examples = Object.fromEntries(
		kinds.map((kind) => [
			kind,
			{ summary: PROBLEM_KINDS[kind].title, description: `\`${PROBLEM_TYPE_BASE}${kind}\``, value: problemExample(kind, instance) },
		]),
	)
	return {
		description: kinds.map((kind) => PROBLEM_KINDS[kind].title).join('; ') || `Problem ${status}`,
		...(PROBLEM_HEADERS[status] ? { headers: PROBLEM_HEADERS[status] } : {}),
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
	const cleaned: Json = { ...rest }
	for (const key of ['items', 'not', 'additionalProperties'])
		if (typeof cleaned[key] === 'object' && cleaned[key] !== null) cleaned[key] = cleanSchema(cleaned[key])
	for (const key of ['anyOf', 'oneOf', 'allOf']) if (Array.isArray(cleaned[key])) cleaned[key] = cleaned[key].map(cleanSchema)
	for (const key of ['properties', 'patternProperties'])
		if (cleaned[key]) cleaned[key] = Object.fromEntries(Object.entries(cleaned[key] as Json).map(([name, value]) => [name, cleanSchema(value)]))
	return cleaned
}

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
