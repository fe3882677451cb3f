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
