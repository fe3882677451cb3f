/**
 * What the readers of other services' exports share (docs/guides/migrating/): NDJSON lines (JSON documents'
 * lists are ./json-lists.ts), turning one item into a line or a reason, the source's id, provider names and dates.
 * Each reader (./supabase.ts, …) says only what its service's fields mean.
 */
import { UUID } from '../../../http/ids'
import type { ImportUser, SourceLine, SourceName, SourceOptions } from '../model'

/** A name as OIDC_PROVIDERS takes it. */
const PROVIDER_NAME = /^[a-z][a-z0-9-]{0,31}$/

/** Why one item of the file cannot be read: the reader throws it, readItems turns it into that line's error. */
export class LineError extends Error {}

/** The file as a whole is not what the service's export looks like (not JSON, no user list): nothing can be read. */
export class SourceFileError extends Error {}

/** A value of the file, quoted for a message: short, and with no control character that could reach a terminal. */
export const quoted = (value: string) => JSON.stringify(value.length > 64 ? `${value.slice(0, 61)}…` : value)

/**
 * Each item of a list read in turn into a line — `read` returns the user or throws a LineError saying why not —
 * the line being the item's place in the list. Any other exception (a bug, or an item hostile enough to break the
 * reader) becomes a plain reason too — never its message, which might quote a hash — so that one item never stops
 * the others.
 */
export async function* readItems(items: AsyncIterable<{ index: number; value?: unknown; error?: LineError }>, read: (value: unknown) => ImportUser): AsyncGenerator<SourceLine> {
	for await (const item of items) yield item.error ? { line: item.index, error: item.error.message } : readOne(item.value, item.index, read)
}

export function readOne(item: unknown, line: number, read: (item: unknown) => ImportUser): SourceLine {
	try {
		return { line, user: read(item) }
	} catch (error) {
		return { line, error: error instanceof LineError ? error.message : 'could not be read' }
	}
}

/**
 * An NDJSON file's lines as parsed values, streamed: its line number (from 1, blank lines counted and skipped) and
 * the value, or a LineError for a line that is not JSON or is longer than `maxLineChars` characters (skipped without holding it).
 */
export async function* ndjsonLines(file: Blob, maxLineChars = 1024 * 1024): AsyncGenerator<{ line: number; value: unknown } | { line: number; error: LineError }> {
	const decoder = new TextDecoder()
	let pending = ''
	let line = 0
	let overlong = false
	const parse = (text: string) => {
		line++
		if (overlong || text.length > maxLineChars) {
			overlong = false
			return { line, error: new LineError(`is longer than ${maxLineChars} characters`) }
		}
		if (text.trim() === '') return undefined
		try {
			return { line, value: JSON.parse(text) as unknown }
		} catch {
			return { line, error: new LineError('is not JSON') }
		}
	}
	for await (const chunk of file.stream()) {
		pending += decoder.decode(chunk, { stream: true })
		let start = 0
		for (let end = pending.indexOf('\n'); end !== -1; end = pending.indexOf('\n', start)) {
			const read = parse(pending.slice(start, end))
			if (read) yield read
			start = end + 1
		}
		pending = pending.slice(start)
		if (pending.length > maxLineChars) {
			overlong = true
			pending = ''
		}
	}
	pending += decoder.decode()
	if (pending !== '' || overlong) {
		const read = parse(pending)
		if (read) yield read
	}
}

/** A JSON object (not an array, not null), else undefined. */
export function object(value: unknown): Record<string, unknown> | undefined {
	return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined
}

/** The item as an object, or the line fails. */
export function record(value: unknown): Record<string, unknown> {
	const item = object(value)
	if (!item) throw new LineError('is not a JSON object')
	return item
}

/** A non-empty string (trimmed), else undefined; a member that is there but is not a string fails the line. */
export function text(item: Record<string, unknown>, member: string): string | undefined {
	const value = item[member]
	if (value === undefined || value === null) return undefined
	if (typeof value !== 'string') throw new LineError(`${member} is not a string`)
	return value.trim() === '' ? undefined : value.trim()
}

/** A JSON object member, else undefined; one that is there but is not an object fails the line. */
export function objectMember(item: Record<string, unknown>, member: string): Record<string, unknown> | undefined {
	const value = item[member]
	if (value === undefined || value === null) return undefined
	const found = object(value)
	if (!found) throw new LineError(`${member} is not a JSON object`)
	return found
}

/** A list member, else an empty list; one that is there but is not a list fails the line. */
export function list(item: Record<string, unknown>, member: string): unknown[] {
	const value = item[member]
	if (value === undefined || value === null) return []
	if (!Array.isArray(value)) throw new LineError(`${member} is not a list`)
	return value
}

/** A boolean as databases write it (true/false, 1/0, 't'/'f', 'true'/'false'); undefined when absent. */
export function flag(item: Record<string, unknown>, member: string): boolean | undefined {
	const value = item[member]
	if (value === undefined || value === null) return undefined
	if (value === true || value === 1 || value === 't' || value === 'true') return true
	if (value === false || value === 0 || value === 'f' || value === 'false') return false
	throw new LineError(`${member} is not a boolean`)
}

/**
 * A date as an ISO string, from what exports write: an ISO 8601 or PostgreSQL timestamp text
 * (`2024-05-01 10:00:00.123456+00`), or a number of milliseconds since 1970 (a number or digits). `numbers: 'guess'`
 * reads numbers below 10^11 as seconds (SQLite rows; 10^11 ms is March 1973, 10^11 s the year 5138). Undefined when
 * absent; a value that is no date in years 1–9999 fails the line, naming the member.
 */
export function date(item: Record<string, unknown>, member: string, numbers: 'ms' | 'guess' = 'ms'): string | undefined {
	const value = item[member]
	if (value === undefined || value === null || value === '') return undefined
	const parsed = toDate(value, numbers)
	if (!parsed) throw new LineError(`${member} is not a date`)
	return parsed.toISOString()
}

function toDate(value: unknown, numbers: 'ms' | 'guess'): Date | undefined {
	let time: number
	if (typeof value === 'number' || (typeof value === 'string' && /^\d{1,16}$/.test(value))) {
		const count = Number(value)
		time = numbers === 'guess' && count < 1e11 ? count * 1000 : count
	} else if (typeof value === 'string') {
		// PostgreSQL's text form → ISO 8601: a T, at most milliseconds, and a zone of ±hh:mm.
		const match = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2})?)(?:\.(\d+))?\s*(Z|[+-]\d{2}(?::?\d{2})?)?$/i.exec(value.trim())
		if (!match) return undefined
		const [, day, clock, fraction, zone] = match
		const offset = !zone || /^z$/i.test(zone) ? 'Z' : zone.length === 3 ? `${zone}:00` : zone.includes(':') ? zone : `${zone.slice(0, 3)}:${zone.slice(3)}`
		time = Date.parse(`${day}T${clock}${fraction ? `.${fraction.slice(0, 3).padEnd(3, '0')}` : ''}${offset}`)
	} else return undefined
	const parsed = new Date(time)
	const year = parsed.getUTCFullYear()
	return Number.isFinite(time) && year >= 1 && year <= 9999 ? parsed : undefined
}

/**
 * The source's id: a UUID is kept as the user's id (lower case); anything else is kept in
 * `appMetadata.importedFrom = { service, id }` and the writer makes a new id.
 */
export function sourceId(service: Exclude<SourceName, 'latchkey'>, id: unknown): { id?: string; importedFrom?: { service: string; id: string } } {
	if (typeof id === 'number') id = String(id)
	if (typeof id !== 'string' || id.trim() === '') return {}
	return UUID.test(id) ? { id: id.toLowerCase() } : { importedFrom: { service, id } }
}

/**
 * A provider named as in OIDC_PROVIDERS: `--provider SOURCE=NAME` first (the source's name as the file has it, then
 * as normalised), else the name normalised — lower case; a domain's `.com` dropped (Firebase's `google.com`); Auth0's
 * `-oauth2` suffix dropped (`google-oauth2`); any other character than a-z, 0-9 and `-` made a `-`. A name that still
 * does not fit (too long, no letter first) fails the line and asks for a `--provider` rename.
 */
export function providerName(source: string, options: SourceOptions): string {
	const normalised = source
		.trim()
		.toLowerCase()
		.replace(/\.com$/, '')
		.replace(/-oauth2$/, '')
		.replace(/[^a-z0-9-]+/g, '-')
		.replace(/-{2,}/g, '-')
		.replace(/^-+|-+$/g, '')
	// Own members only: a provider called `constructor` is not a rename.
	const renames = options.providers
	const renamed = Object.hasOwn(renames, source) ? renames[source] : Object.hasOwn(renames, normalised) ? renames[normalised] : undefined
	if (renamed !== undefined) {
		if (!PROVIDER_NAME.test(renamed)) throw new LineError(`--provider ${quoted(source)}=${quoted(renamed)} is not a name OIDC_PROVIDERS takes (a-z, 0-9 and -, a letter first, at most 32)`)
		return renamed
	}
	if (!PROVIDER_NAME.test(normalised)) throw new LineError(`the provider ${quoted(source)} has no name OIDC_PROVIDERS takes: give one with --provider ${quoted(source)}=NAME`)
	return normalised
}

/** The user with no member left undefined (and no empty metadata objects): what deep equality and the writer see. */
export function compact(user: ImportUser): ImportUser {
	const out: Record<string, unknown> = {}
	for (const [key, value] of Object.entries(user)) {
		if (value === undefined) continue
		if ((key === 'metadata' || key === 'appMetadata') && Object.keys(value as object).length === 0) continue
		if ((key === 'identities' || key === 'totpSecrets') && (value as unknown[]).length === 0) continue
		out[key] = value
	}
	return out as ImportUser
}

/** An object without its undefined members. */
export function defined(values: Record<string, unknown>): Record<string, unknown> {
	return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined))
}

/** The user's email, or the line fails: Latchkey signs in by email. */
export function requireEmail(email: string | undefined, why: string): string {
	if (!email) throw new LineError(`has no email address (${why}); Latchkey's accounts sign in by email`)
	return email
}

/** The default name of a TOTP factor, as Latchkey's own enrolment names it. */
export const TOTP_NAME = 'Authenticator app'

/** A TOTP factor's name: the source's label trimmed to Latchkey's 100 characters, else Latchkey's default. */
export const totpName = (label: string | undefined) => (label ? [...label].slice(0, 100).join('') : TOTP_NAME)
