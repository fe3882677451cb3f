import { sql, type AnyColumn, type SQL } from 'drizzle-orm'
import { UUID } from './ids'
import { AppError } from './problem'

/**
 * The RFC 8288 `Link` header value for the next page of a keyset-paginated
 * list: the same query, with the cursor replaced.
 */
export function nextPageLink(path: string, query: Record<string, unknown>, cursor: string): string {
	const params = new URLSearchParams()
	for (const [key, value] of Object.entries(query)) if (value !== undefined && key !== 'cursor') params.set(key, String(value))
	params.set('cursor', cursor)
	return `<${path}?${params}>; rel="next"`
}

/** The cursor of a list ordered by a time-ordered id (newest first): the last id shown, opaque to clients. */
export const encodeIdCursor = (id: string) => Buffer.from(id).toString('base64url')

/** The id in a cursor from `encodeIdCursor`; anything else is a 400 naming the parameter. */
export function decodeIdCursor(cursor: string): string {
	const id = Buffer.from(cursor, 'base64url').toString('utf8')
	if (!UUID.test(id))
		throw new AppError('bad-request', 'The cursor is not valid for this query', {
			errors: [{ pointer: '#/cursor', code: 'invalid', detail: 'use nextCursor from a previous page' }],
		})
	return id.toLowerCase()
}

// Keyset pages on a sort (the users, organizations, members and invitations lists): a cursor names the sort it was
// made for and the last row's sort key and id, and the next page is a row comparison an index seeks to.

export interface KeysetCursor {
	sort: string
	key: string
	id: string
}

/** `value` for ILIKE: its own `%`, `_` and `\` match only themselves. */
export const escapeLike = (value: string) => value.replace(/[\\%_]/g, (char) => `\\${char}`)

export const encodeKeysetCursor = (sort: string, key: string, id: string) => Buffer.from(JSON.stringify({ s: sort, k: key, i: id })).toString('base64url')

/** A time as encodeKeysetCursor writes it, and a real one: 2026-02-31 would not come back the same. */
const isCursorTime = (key: string) => /^(?!0000)\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(key) && new Date(Date.parse(key)).toISOString() === key

/** The cursor of a page of this sort; anything else (another sort's, a forged one) is a 400 naming the parameter. */
export function decodeKeysetCursor(value: string, sort: string, keyIsTime: boolean): KeysetCursor {
	const invalid = new AppError('bad-request', 'The cursor is not valid for this query', {
		errors: [{ pointer: '#/cursor', code: 'invalid', detail: 'use nextCursor from a previous page with the same sort' }],
	})
	let parsed: unknown
	try {
		parsed = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'))
	} catch {
		throw invalid
	}
	const { s, k, i } = (parsed ?? {}) as Record<string, unknown>
	if (s !== sort || typeof k !== 'string' || typeof i !== 'string' || !UUID.test(i) || k.includes('\u0000')) throw invalid
	if (keyIsTime && !isCursorTime(k)) throw invalid
	return { sort, key: k, id: i.toLowerCase() }
}

/** Rows strictly after the cursor: `(key, id) > (…)` ascending, `<` descending; typed casts so that the index is used. */
export function afterKeyset(keyColumn: AnyColumn, idColumn: AnyColumn, cursor: KeysetCursor, descending: boolean, keyIsTime: boolean): SQL {
	// postgres.js sends raw parameters untyped, and the row comparison must hit the index.
	const key = keyIsTime ? sql`(${cursor.key}::timestamptz, ${cursor.id}::uuid)` : sql`(${cursor.key}::text, ${cursor.id}::uuid)`
	return descending ? sql`(${keyColumn}, ${idColumn}) < ${key}` : sql`(${keyColumn}, ${idColumn}) > ${key}`
}

/** The page out of `limit + 1` rows, and the cursor after it when there is more. */
export function pageOf<T>(rows: T[], limit: number, cursorOf: (row: T) => string): { items: T[]; nextCursor: string | null; limit: number } {
	const items = rows.slice(0, limit)
	const last = items.at(-1)
	return { items, nextCursor: rows.length > limit && last !== undefined ? cursorOf(last) : null, limit }
}
