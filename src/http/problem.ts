import { Type, type TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { Elysia, t, ValidationError } from 'elysia'
import type { Logger } from '../log'
import { isDatabaseUnavailable, sqlState } from '../db/client'
import { problemBody, type FieldError, type PageProblemRenderer, type ProblemKind } from './problem-catalogue'
import { addDraftFields } from './rate-limit'

// What AppError's options and ValidationFailed carry, for whoever throws them.
export type { FieldError } from './problem-catalogue'

/**
 * Thrown by services and plugins; the one onError turns it into problem+json,
 * with the status of its kind. It carries no `status` member on purpose: the
 * rate limiter's error hook counts any error with `status: 404` as an
 * unmatched route, which would charge a handler's 404 twice.
 */
export class AppError extends Error {
	constructor(
		readonly kind: ProblemKind,
		readonly detail: string,
		readonly options: { errors?: FieldError[]; headers?: Record<string, string> } = {},
	) {
		super(detail)
	}
}

export class NotFound extends AppError {
	constructor(detail = 'The requested resource does not exist') {
		super('not-found', detail)
	}
}
export class Forbidden extends AppError {
	constructor(detail = 'You are not allowed to do this') {
		super('forbidden', detail)
	}
}
export class Conflict extends AppError {
	constructor(kind: 'email-taken' | 'last-admin' | 'conflict', detail: string) {
		super(kind, detail)
	}
}
export class ValidationFailed extends AppError {
	constructor(errors: FieldError[]) {
		super('validation-error', invalidFieldsDetail(errors), { errors })
	}
}

function invalidFieldsDetail(errors: FieldError[]) {
	return errors.length === 1 ? '1 field is invalid' : `${errors.length} fields are invalid`
}

/** The success envelope of API.md. */
export const envelope = <T>(data: T, message: string) => ({ data, message, errors: [] as never[] })

// TypeBox ValueErrorType numbers → the `code` clients see, and a sentence for `detail`.
function describeValueError(error: {
	type: number
	schema: Record<string, unknown>
	message: string
}): { code: string; detail: string } {
	const described = describeByType(error.type, error.schema)
	// A pattern that states one rule of several (Email's local part) says which in `x-pattern-error`.
	if (error.type === 53 && typeof error.schema['x-pattern-error'] === 'string')
		return { code: described.code, detail: error.schema['x-pattern-error'] }
	// An id's pattern only narrows the uuid format (to its hyphenated form): failing it is failing the format.
	if (error.type === 53 && error.schema.format === 'uuid') return describeByType(50, error.schema)
	// A schema's own message describes a wrong value, not a missing one.
	const custom = typeof error.schema.error === 'string' && error.type !== 45
	return custom ? { code: described.code, detail: error.schema.error as string } : described
}

function describeByType(type: number, s: Record<string, unknown>): { code: string; detail: string } {
	switch (type) {
		case 45:
			return { code: 'required', detail: 'is required' }
		case 42:
			return { code: 'additionalProperties', detail: 'is not a recognised field' }
		case 50:
			return { code: 'format', detail: formatDetail(String(s.format)) }
		case 51:
			return { code: 'maxLength', detail: `must be at most ${s.maxLength} characters` }
		case 52:
			return { code: 'minLength', detail: `must be at least ${s.minLength} characters` }
		case 53:
			return { code: 'pattern', detail: 'has an invalid format' }
		case 24:
		case 39:
			return { code: 'maximum', detail: `must be at most ${s.maximum}` }
		case 25:
		case 38:
			return { code: 'minimum', detail: `must be at least ${s.minimum}` }
		case 27:
			return { code: 'type', detail: 'must be a whole number' }
		case 41:
			return { code: 'type', detail: 'must be a number' }
		case 14:
			return { code: 'type', detail: 'must be true or false' }
		case 54:
			return { code: 'type', detail: 'must be a string' }
		case 46:
			return { code: 'type', detail: 'must be a JSON object' }
		case 6:
			return { code: 'type', detail: 'must be an array' }
		case 32:
			return { code: 'enum', detail: `must be ${JSON.stringify(s.const)}` }
		case 62: {
			const options = ((s.anyOf as Record<string, unknown>[] | undefined) ?? [])
				.map((option) => option.const)
				.filter((value) => value !== undefined)
			return options.length > 0
				? { code: 'enum', detail: `must be one of ${options.map((o) => JSON.stringify(o)).join(', ')}` }
				: { code: 'type', detail: 'has an invalid value' }
		}
		default:
			return { code: 'invalid', detail: 'has an invalid value' }
	}
}

function formatDetail(format: string): string {
	if (format === 'email') return 'must be an email address'
	if (format === 'uuid') return 'must be a UUID'
	if (format === 'date-time') return 'must be an ISO-8601 date-time with a time zone'
	return `must be a valid ${format}`
}

/**
 * A body that matches no alternative of a union of objects (`{ token }` or `{ email, code }`): the
 * errors of the alternative it meant, the one with most of its members present, then the fewest errors,
 * rather than one vague error at the root.
 */
function unionBranchErrors(item: { type: number; schema: Record<string, unknown>; path?: string; value?: unknown }): FieldError[] | undefined {
	const branches = item.schema.anyOf as TSchema[] | undefined
	if (item.type !== 62 || !branches?.length || !branches.every((branch) => branch.type === 'object')) return undefined
	if (typeof item.value !== 'object' || item.value === null || Array.isArray(item.value)) return undefined
	const present = Object.keys(item.value)
	const [meant] = branches
		.map((branch) => ({
			errors: [...Value.Errors(branch, item.value)],
			shared: present.filter((key) => key in (branch.properties as object)).length,
		}))
		.sort((a, b) => b.shared - a.shared || a.errors.length - b.errors.length)
	return meant?.errors.map((error) => ({
		pointer: `#${item.path ?? ''}${error.path}`,
		...describeValueError(error as unknown as { type: number; schema: Record<string, unknown>; message: string }),
	}))
}

/** Elysia's validation error → one entry per invalid field (the first problem of each). */
export function fieldErrors(error: ValidationError): FieldError[] {
	const byPointer = new Map<string, FieldError>()
	const all = error.all as unknown as Array<{
		path?: string
		type: number
		schema: Record<string, unknown>
		message: string
		value?: unknown
	}>
	for (const item of all) {
		for (const found of unionBranchErrors(item) ?? [{ pointer: `#${item.path ?? ''}`, ...describeValueError(item) }])
			if (!byPointer.has(found.pointer)) byPointer.set(found.pointer, found)
	}
	if (byPointer.size === 0) byPointer.set('#', { pointer: '#', code: 'invalid', detail: 'is invalid' })
	// A missing body shows as one error at the root.
	const root = byPointer.get('#')
	if (root && error.value === undefined) root.detail = 'a JSON request body is required'
	return [...byPointer.values()]
}

/** A date-time query parameter; the year must be 0001–9999, what PostgreSQL and JavaScript both hold. */
export const queryDateTime = (description?: string) =>
	t.String({ format: 'date-time', pattern: '^(?!0000)\\d{4}-', description, error: 'must be an ISO-8601 date-time between years 0001 and 9999' })

/**
 * An integer query parameter in plain decimal digits, with no leading zero:
 * one spelling per number. Elysia's own coercion reads it with Number(), which
 * also takes "0x2", "1e0", " 2", "+2" and "02" (an octal look-alike). Each is a
 * 422 at the parameter's name, as a value out of range is. The integer member
 * of the union is for the default, which Elysia fills in as a number.
 */
export const queryInteger = (name: string, options: { minimum: number; maximum: number; default?: number }) => {
	const { minimum, maximum } = options
	const error = `must be a whole number from ${minimum} to ${maximum}`
	const digits = minimum < 0 ? '^(0|-?[1-9][0-9]*)$' : '^(0|[1-9][0-9]*)$'
	const description = `A whole number from ${minimum} to ${maximum}${options.default === undefined ? '' : ` (default ${options.default})`}, in plain decimal digits: no sign, spaces, leading zeros, exponent or hex. Anything else is a 422 validation error at \`#/${name}\`, and giving the parameter twice a 400.`
	const defaulted = options.default === undefined ? {} : { default: options.default }
	return t
		.Transform(
			t.Union([t.String({ format: 'integer', pattern: digits }), Type.Integer({ minimum, maximum, ...defaulted })], {
				...defaulted,
				description,
				error,
			}),
		)
		.Decode((value) => {
			const number = Number(value)
			if (number < minimum || number > maximum)
				throw new ValidationFailed([{ pointer: `#/${name}`, code: number < minimum ? 'minimum' : 'maximum', detail: error }])
			return number
		})
		.Encode((value) => value)
}

// Refusals decided before the request was counted, answered once it has been (see requestChecks).
const deferredProblems = new WeakMap<Request, AppError>()

/** Marks a request as refused with `problem`; whoever raises it later, the problem handler answers this one. */
export const deferProblem = (request: Request, problem: AppError) => void deferredProblems.set(request, problem)
export const deferredProblem = (request: Request): AppError | undefined => deferredProblems.get(request)

// Field problems a route found in a body before its schema was checked (rules a schema cannot state).
const earlyFieldErrors = new WeakMap<Request, FieldError[]>()

/**
 * Reports field problems that the route's own rules found (a password
 * policy, say) together with the schema's, should the schema refuse the
 * body too: a form then learns all its problems in one round trip.
 */
export const reportWithSchemaErrors = (request: Request, errors: FieldError[]) => void earlyFieldErrors.set(request, errors)

export interface RouteTable {
	routes: ReadonlyArray<{ method: string; path: string }>
}

/** Each route's path as a pattern, made once per route (a 404 made one per route of the table, every time). */
const routePatterns = new WeakMap<object, RegExp>()

const patternOf = (route: { path: string }) => {
	let pattern = routePatterns.get(route)
	if (!pattern) {
		pattern = new RegExp(`^${route.path.replace(/\/+$/, '').replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/:[^/]+/g, '[^/]+').replace(/\*/g, '.*')}/?$`)
		routePatterns.set(route, pattern)
	}
	return pattern
}

/** Methods registered for a concrete path, for 405 and its Allow header. */
export function allowedMethods(table: RouteTable, path: string): string[] {
	const methods = new Set<string>()
	for (const route of table.routes) {
		if (route.method === 'ALL' || route.method === 'OPTIONS') continue
		if (patternOf(route).test(path)) methods.add(route.method)
	}
	return [...methods].sort()
}

/** What a request that no route takes gets: 405 with Allow when the path has other methods, else 404. */
export function unmatchedRoute(table: RouteTable, method: string, path: string): AppError {
	const allow = allowedMethods(table, path)
	if (allow.length > 0 && !allow.includes(method))
		return new AppError('method-not-allowed', `${method} is not allowed here; use ${allow.join(', ')}`, {
			headers: { allow: allow.join(', ') },
		})
	return new AppError('not-found', `No route matches ${method} ${path}`)
}

/**
 * The single error boundary: every thrown error, Elysia's own included,
 * leaves as problem+json — or, at a page (`pageProblem`), as the page that
 * says it. Anything unexpected is logged in full and answered with nothing
 * but the request id.
 */
export const problemHandler = (log: Logger, table: RouteTable, windowSeconds: number, pageProblem?: PageProblemRenderer) =>
	new Elysia({ name: 'problems' }).onError({ as: 'global' }, ({ code, error, request, set, path }) => {
		const requestId = String(set.headers['x-request-id'] ?? '')
		let kind: ProblemKind = 'internal-error'
		let detail = `An internal error occurred (request id ${requestId})`
		let errors: FieldError[] = []
		let headers: Record<string, string> = {}
		// Elysia wraps what a parser throws in its own ParseError.
		const appError = deferredProblem(request) ?? (error instanceof AppError ? error : (error as { cause?: unknown }).cause)
		if (appError instanceof AppError) {
			kind = appError.kind
			detail = appError.detail
			errors = appError.options.errors ?? []
			headers = appError.options.headers ?? {}
		} else if (code === 'VALIDATION' && error instanceof ValidationError && error.type === 'response') {
			// A response that breaks its own schema is our bug, not the client's.
			log.error({ requestId, err: { name: 'ResponseValidation', message: error.valueError?.message } }, 'response failed its schema')
		} else if (code === 'VALIDATION' && error instanceof ValidationError) {
			errors = fieldErrors(error)
			for (const early of earlyFieldErrors.get(request) ?? [])
				if (!errors.some((known) => known.pointer === early.pointer)) errors.push(early)
			kind = 'validation-error'
			detail = invalidFieldsDetail(errors)
		} else if (code === 'PARSE') {
			kind = 'bad-request'
			detail = 'The request body is not valid JSON'
		} else if (code === 'NOT_FOUND') {
			const unmatched = unmatchedRoute(table, request.method, path)
			kind = unmatched.kind
			detail = unmatched.detail
			headers = unmatched.options.headers ?? {}
		} else if (sqlState(error).code?.startsWith('22')) {
			// A data exception: a value the database cannot store or compare. The input's fault, not ours.
			kind = 'bad-request'
			detail = 'The request contains a value that cannot be stored or compared'
			log.warn({ requestId, code: sqlState(error).code }, 'data exception from the database')
		} else if (isDatabaseUnavailable(error)) {
			kind = 'service-unavailable'
			detail = 'The database is unreachable; try again shortly'
			headers = { 'retry-after': '5' }
			log.error({ requestId, err: describeError(error) }, 'database unavailable')
		} else {
			log.error({ requestId, err: describeError(error) }, 'unhandled error')
		}
		const body = problemBody(kind, detail, path, errors)
		set.status = body.status
		const retryAfter = Number(headers['retry-after'])
		const page = pageProblem?.(request, { kind, status: body.status, requestId, ...(Number.isFinite(retryAfter) && retryAfter > 0 ? { retryAfterSeconds: retryAfter } : {}) })
		if (page) return withHeaders(page, { ...(set.headers as Record<string, string>), ...headers })
		set.headers['content-type'] = 'application/problem+json'
		Object.assign(set.headers, headers)
		addDraftFields(set.headers, windowSeconds)
		if (body.status === 401 && !set.headers['www-authenticate']) set.headers['www-authenticate'] = 'Bearer realm="latchkey"'
		return kind === 'internal-error' ? { ...body, requestId } : body
	})

/** A page's response with the headers gathered for it so far (request id, limits, Allow), its own kept. */
export function withHeaders(response: Response, headers: Record<string, string>): Response {
	for (const [name, value] of Object.entries(headers)) if (!response.headers.has(name)) response.headers.set(name, String(value))
	return response
}

/**
 * What the log keeps of an unexpected error: the innermost cause's name, code
 * and message, and the stack frames. Drizzle's wrapper message is left out on
 * purpose: it carries the SQL and its parameters, which can include hashes.
 */
function describeError(error: unknown) {
	if (!(error instanceof Error)) return { message: 'non-Error value thrown' }
	let root: Error = error
	while (root.cause instanceof Error) root = root.cause
	const frames = (error.stack ?? '').split('\n').filter((line) => line.trimStart().startsWith('at '))
	return { name: root.name, code: (root as { code?: unknown }).code, message: root.message, stack: frames.join('\n') }
}
