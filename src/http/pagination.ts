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
