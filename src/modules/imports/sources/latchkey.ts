import { importLineProblem, type ImportSource, type ImportUser, type SourceLine } from '../model'

/** Far beyond any line of the format (metadata ≤ 8 KiB each, ≤ 100 identities, ≤ 20 secrets): a longer one is refused unread. */
const MAX_LINE_BYTES = 1 << 20
const NEWLINE = 0x0a

/**
 * Latchkey's own NDJSON (`latchkey export`): one user a line, streamed from the file a chunk at a time, so that
 * a file of any size costs a line's memory. Blank lines are ignored; a line that is not UTF-8 JSON, or not a user
 * in the format, is a line the writer reports and writes nothing of. Lines count from 1, blank ones included.
 */
export const readLatchkey: ImportSource = async function* (file, options) {
	let pending: Uint8Array[] = []
	let pendingBytes = 0
	let line = 0
	const take = (piece: Uint8Array) => {
		if (pendingBytes <= MAX_LINE_BYTES) pending.push(piece)
		pendingBytes += piece.byteLength
	}
	const finish = (): SourceLine | undefined => {
		const bytes = pendingBytes > MAX_LINE_BYTES ? undefined : pending.length === 1 ? pending[0] : Buffer.concat(pending)
		const size = pendingBytes
		pending = []
		pendingBytes = 0
		line++
		if (bytes === undefined) return { line, error: `the line is longer than ${MAX_LINE_BYTES} bytes (${size})` }
		return renamed(readLine(line, bytes), options.providers)
	}
	for await (const chunk of file.stream()) {
		let start = 0
		for (let end = chunk.indexOf(NEWLINE); end !== -1; end = chunk.indexOf(NEWLINE, start)) {
			take(chunk.subarray(start, end))
			start = end + 1
			const read = finish()
			if (read) yield read
		}
		if (start < chunk.byteLength) take(chunk.slice(start))
	}
	if (pendingBytes > 0) {
		const read = finish()
		if (read) yield read
	}
}

/** `--provider SOURCE=NAME`: another Latchkey's provider names, as this one's OIDC_PROVIDERS names them. */
function renamed(read: SourceLine | undefined, providers: Record<string, string>): SourceLine | undefined {
	const identities = read?.user?.identities
	if (!read?.user || !identities || Object.keys(providers).length === 0) return read
	return { line: read.line, user: { ...read.user, identities: identities.map((identity) => ({ ...identity, provider: providers[identity.provider] ?? identity.provider })) } }
}

const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false })

function readLine(line: number, bytes: Uint8Array | undefined): SourceLine | undefined {
	let text: string
	try {
		text = decoder.decode(bytes)
	} catch {
		return { line, error: 'the line is not UTF-8 text' }
	}
	if (line === 1) text = text.replace(/^\uFEFF/, '')
	if (text.trim() === '') return undefined
	let value: unknown
	try {
		value = JSON.parse(text)
	} catch {
		return { line, error: 'the line is not JSON' }
	}
	const problem = importLineProblem(value)
	return problem ? { line, error: problem } : { line, user: value as ImportUser }
}
