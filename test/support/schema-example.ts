// A JSON Schema from the served document: free-form JSON, walked member by member.
type Json = Record<string, any>

/** A value built from a schema's examples: enough for a request body to get past validation. */
export function exampleOf(schema: Json): unknown {
	if (schema.examples?.length) return schema.examples[0]
	if (schema.type === 'object')
		return Object.fromEntries((schema.required ?? []).map((name: string) => [name, exampleOf(schema.properties?.[name] ?? {})]))
	if (schema.anyOf?.length) return exampleOf(schema.anyOf[0])
	if (schema.enum?.length) return schema.enum[0]
	if (schema.const !== undefined) return schema.const
	return schema.type === 'integer' || schema.type === 'number' ? 1 : 'example'
}

/** Whether a body schema refuses members it does not list: an object that says so, or a union of such objects. */
export const isClosedBody = (schema: Json): boolean =>
	schema.additionalProperties === false || (Array.isArray(schema.anyOf) && schema.anyOf.length > 0 && schema.anyOf.every(isClosedBody))

/**
 * A request path for an operation of the document: a user's `{id}` is the caller (`me`), `{provider}` the
 * test provider, any other parameter (a webhook endpoint's or an OAuth client's `{id}` too) an id nobody has.
 */
export const concretePath = (path: string) =>
	(path.startsWith('/api/users/') ? path.replace('{id}', 'me') : path).replace('{provider}', 'test').replace(/\{[^}]+\}/g, () => crypto.randomUUID())
