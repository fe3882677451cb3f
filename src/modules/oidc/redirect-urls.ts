/**
 * REDIRECT_URLS matching, exactly as written: scheme, host and port equal, and the path equal — or, for an
 * entry ending in `/*`, starting with the entry's path. No wildcards in hosts, no prefix tricks:
 * `https://app.example.com/*` admits `https://app.example.com/auth/callback`, never
 * `https://app.example.com.evil.example/` nor `https://app.example.com@evil.example/`.
 */
export function isAllowedRedirect(candidate: string, entries: string[]): boolean {
	if (!URL.canParse(candidate)) return false
	const url = new URL(candidate)
	if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.username || url.password) return false
	return entries.some((entry) => {
		const prefix = entry.endsWith('/*')
		const allowed = new URL(prefix ? entry.slice(0, -1) : entry)
		if (allowed.protocol !== url.protocol || allowed.host !== url.host) return false
		return prefix ? url.pathname.startsWith(allowed.pathname) : url.pathname === allowed.pathname
	})
}

/** `redirectTo` with these query parameters added (the code, or OAuth's `error` and `error_description`). */
export function withQuery(redirectTo: string, parameters: Record<string, string>): string {
	const url = new URL(redirectTo)
	for (const [name, value] of Object.entries(parameters)) url.searchParams.set(name, value)
	return url.toString()
}
