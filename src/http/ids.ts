import type { StringOptions } from '@sinclair/typebox'
import { t } from 'elysia'

/**
 * A UUID in its hyphenated hex form, in either letter case (RFC 9562 §4: case-insensitive on input).
 * Nothing else: no `urn:uuid:` prefix (which the `uuid` format lets through), no braces, no hyphens left out.
 */
export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
export const UUID = new RegExp(UUID_PATTERN)

/** The id the OpenAPI document shows wherever it needs one (a path, a request id, a webhook id). */
export const EXAMPLE_ID = '0193f1c2-7a5e-7c3b-9d2e-5f6a7b8c9d0e'

/**
 * An id from a client (in a path or a query): a UUID in any letter case, decoded to lower case, the one
 * form ids are issued, stored and compared in (API.md: another letter case names the same resource).
 * Elysia decodes it right after validation, before the auth guard's `resolve` and the handler see it.
 */
export const Id = (options: StringOptions = {}) =>
	t
		.Transform(t.String({ format: 'uuid', pattern: UUID_PATTERN, ...options }))
		.Decode((id) => id.toLowerCase())
		.Encode((id) => id)

/** An id as this service issues it, in a response or a webhook payload: a UUID (always lower case). */
export const IssuedId = (options: StringOptions = {}) => t.String({ format: 'uuid', ...options })

/** The account a route acts on: `me`, or its id (decoded as `Id`). */
export const AccountId = t.Union([t.Literal('me'), Id()], { error: 'must be a user id (UUID) or "me"' })
