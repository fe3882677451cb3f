import { sql, type AnyColumn, type SQL } from 'drizzle-orm'
import { UUID } from '../../http/ids'
import { AppError } from '../../http/problem'

// Keyset pages of the organization lists (organizations, memberships, members), as the users list pages: a cursor
// names the sort it was made for and the last row's key and id, and the next page is a row comparison an index seeks to.

export interface Cursor {
	sort: string
	key: string
	id: string
}

export const escapeLike = (value: string) => value.replace(/[\\%_]/g, (char) => `\\${char}`)

export const encodeCursor = (sort: string, key: string, id: string) => Buffer.from(JSON.stringify({ s: sort, k: key, i: id })).toString('base64url')

/** The cursor of a page of this sort; anything else is a 400 naming the parameter. */
export function decodeCursor(value: string, sort: string, keyIsTime: boolean): Cursor {
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
	if (keyIsTime && !(/^(?!0000)\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(k) && new Date(Date.parse(k)).toISOString() === k)) throw invalid
	return { sort, key: k, id: i.toLowerCase() }
}

/** Rows strictly after the cursor: `(key, id) > (…)` ascending, `<` descending; typed casts so the index is used. */
export function afterCursor(keyColumn: AnyColumn, idColumn: AnyColumn, cursor: Cursor, descending: boolean, keyIsTime: boolean): SQL {
	const key = keyIsTime ? sql`(${cursor.key}::timestamptz, ${cursor.id}::uuid)` : sql`(${cursor.key}::text, ${cursor.id}::uuid)`
	return descending ? sql`(${keyColumn}, ${idColumn}) < ${key}` : sql`(${keyColumn}, ${idColumn}) > ${key}`
}

/** The page out of `limit + 1` rows, and the cursor after it when there is more. */
export function pageOf<T>(rows: T[], limit: number, cursorOf: (row: T) => string): { items: T[]; nextCursor: string | null; limit: number } {
	const items = rows.slice(0, limit)
	const last = items.at(-1)
	return { items, nextCursor: rows.length > limit && last !== undefined ? cursorOf(last) : null, limit }
}
