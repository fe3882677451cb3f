/**
 * The items of the lists a JSON export holds — the root array (`[…]`), or arrays under members of the root object
 * (`{ "users": […], … }`) — streamed, so that a million users' export is never one string nor one parsed tree. The
 * scanner only finds where each item begins and ends (tracking strings, escapes and nesting); each item's text is
 * then parsed alone by JSON.parse, so an item that is not JSON is that item's error, not the file's. The root's
 * structure (members, separators, the end of the document) is checked here: a file that is not one JSON document
 * throws a SourceFileError — when it is scanned, which is why readers scan a file once whole before yielding.
 */
import { LineError, SourceFileError } from './shared'

/** The name the root array goes by among the lists. */
export const ROOT = ''

/** What a scan learns of the root: whether it is an array or an object, its members and which of them are lists. */
export interface JsonOutline {
	root?: 'array' | 'object'
	members: Set<string>
	lists: Set<string>
}
export const newOutline = (): JsonOutline => ({ members: new Set(), lists: new Set() })

export type ListItem = { list: string; index: number; value: unknown; error?: undefined } | { list: string; index: number; error: LineError }

/** Where the scan is in the document. */
const At = {
	BeforeRoot: 0,
	KeyOrEnd: 1,
	Key: 2,
	InKey: 3,
	Colon: 4,
	Value: 5,
	SkipComposite: 6,
	SkipScalar: 7,
	AfterValue: 8,
	ItemOrEnd: 9,
	Item: 10,
	InItem: 11,
	AfterItem: 12,
	AfterRoot: 13,
} as const
type Position = (typeof At)[keyof typeof At]

/** A member name longer than this is no export's. */
const MAX_KEY_CHARS = 1024

const QUOTE = 0x22
const BACKSLASH = 0x5c
/** How many backslashes stand right before `end`, counting back no further than `from`. */
function backslashesBefore(text: string, end: number, from: number): number {
	let count = 0
	while (end - count - 1 >= from && text.charCodeAt(end - count - 1) === BACKSLASH) count++
	return count
}
const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09

/**
 * Scans `file` and yields the items of the lists named in `wanted` (ROOT for a root array), each with its index
 * from 1 in its list; fills `outline`. An item longer than `maxItemChars` is an error without being held.
 */
export async function* jsonListItems(file: Pick<Blob, 'stream'>, wanted: ReadonlySet<string>, outline: JsonOutline, expected: string, maxItemChars = 16 * 1024 * 1024): AsyncGenerator<ListItem> {
	const notJson = (why: string) => new SourceFileError(`the file is not one JSON document (${why}); expected ${expected}`)
	const decoder = new TextDecoder()
	let at: Position = At.BeforeRoot
	let depth = 0
	let inString = false
	let escaped = false
	let key = ''
	let list = ROOT
	let listDepth = 0
	let listing = false
	let index = 0
	let composite = false
	// The text being captured (a key, or a wanted item): pieces of earlier chunks, and where it starts in this one.
	let pieces: string[] = []
	let piecesLength = 0
	let start = -1
	let overlong = false

	const endList = () => {
		depth--
		at = list === ROOT ? At.AfterRoot : At.AfterValue
	}

	for await (const bytes of file.stream()) {
		const chunk = decoder.decode(bytes, { stream: true })
		const items: ListItem[] = []
		const finishItem = (end: number) => {
			if (listing) {
				const text = pieces.join('') + chunk.slice(start, end)
				if (overlong || text.length > maxItemChars) items.push({ list, index, error: new LineError(`is longer than ${maxItemChars} characters`) })
				else {
					try {
						items.push({ list, index, value: JSON.parse(text) as unknown })
					} catch {
						items.push({ list, index, error: new LineError('is not JSON') })
					}
				}
			}
			pieces = []
			piecesLength = 0
			start = -1
			overlong = false
		}
		for (let i = 0; i < chunk.length; i++) {
			if (inString) {
				if (escaped) {
					escaped = false // the character a backslash ending the last chunk escapes
					continue
				}
				// Straight to the closing quote: the next quote not escaped by an odd run of backslashes.
				let end = chunk.indexOf('"', i)
				while (end !== -1 && backslashesBefore(chunk, end, i) % 2 === 1) end = chunk.indexOf('"', end + 1)
				if (end === -1) {
					escaped = backslashesBefore(chunk, chunk.length, i) % 2 === 1
					break
				}
				i = end
				inString = false
				if (at === At.InKey) {
					const text = pieces.join('') + chunk.slice(start, i + 1)
					pieces = []
					piecesLength = 0
					start = -1
					try {
						key = JSON.parse(text) as string
					} catch {
						throw notJson('a member name is not a string')
					}
					at = At.Colon
				}
				continue
			}
			const c = chunk.charCodeAt(i)
			switch (at) {
				case At.BeforeRoot:
					if (isSpace(c) || c === 0xfeff) break
					if (c === 0x5b) {
						outline.root = 'array'
						depth = 1
						list = ROOT
						listDepth = 1
						listing = wanted.has(ROOT)
						index = 0
						at = At.ItemOrEnd
					} else if (c === 0x7b) {
						outline.root = 'object'
						depth = 1
						at = At.KeyOrEnd
					} else throw notJson('it begins with neither [ nor {')
					break
				case At.KeyOrEnd:
				case At.Key:
					if (isSpace(c)) break
					if (c === QUOTE) {
						inString = true
						start = i
						at = At.InKey
					} else if (c === 0x7d && at === At.KeyOrEnd) {
						depth = 0
						at = At.AfterRoot
					} else throw notJson('a member name is missing')
					break
				case At.Colon:
					if (isSpace(c)) break
					if (c !== 0x3a) throw notJson(`no colon after the member ${JSON.stringify(key).slice(0, 66)}`)
					at = At.Value
					break
				case At.Value:
					if (isSpace(c)) break
					outline.members.add(key)
					if (c === 0x5b) {
						outline.lists.add(key)
						depth = 2
						list = key
						listDepth = 2
						listing = wanted.has(key)
						index = 0
						at = At.ItemOrEnd
					} else if (c === 0x7b) {
						depth = 2
						at = At.SkipComposite
					} else if (c === QUOTE) {
						inString = true // a string value: what follows it is a comma or the end
						at = At.AfterValue
					} else at = At.SkipScalar // a number, true, false or null
					break
				case At.SkipComposite:
					if (c === QUOTE) inString = true
					else if (c === 0x7b || c === 0x5b) depth++
					else if (c === 0x7d || c === 0x5d) {
						depth--
						if (depth === 1) at = At.AfterValue
					}
					break
				case At.SkipScalar:
					if (isSpace(c)) at = At.AfterValue
					else if (c === 0x2c) at = At.Key
					else if (c === 0x7d) {
						depth = 0
						at = At.AfterRoot
					} else if (c === QUOTE || c === 0x7b || c === 0x5b || c === 0x5d) throw notJson(`the member ${JSON.stringify(key).slice(0, 66)} has no value JSON knows`)
					break
				case At.AfterValue:
					if (isSpace(c)) break
					if (c === 0x2c) at = At.Key
					else if (c === 0x7d) {
						depth = 0
						at = At.AfterRoot
					} else throw notJson('a comma or } is missing between members')
					break
				case At.ItemOrEnd:
				case At.Item:
					if (isSpace(c)) break
					if (c === 0x5d && at === At.ItemOrEnd) {
						endList()
						break
					}
					if (c === 0x5d || c === 0x2c) throw notJson(`the list ${JSON.stringify(list).slice(0, 66)} has an empty item`)
					index++
					if (listing) start = i
					composite = c === 0x7b || c === 0x5b
					if (composite) depth++
					else if (c === QUOTE) inString = true
					at = At.InItem
					break
				case At.InItem:
					if (c === QUOTE) inString = true
					else if (composite) {
						if (c === 0x7b || c === 0x5b) depth++
						else if (c === 0x7d || c === 0x5d) {
							depth--
							if (depth === listDepth) {
								finishItem(i + 1)
								at = At.AfterItem
							}
						}
					} else if (c === 0x2c) {
						finishItem(i)
						at = At.Item
					} else if (c === 0x5d) {
						finishItem(i)
						endList()
					} else if (c === 0x7b || c === 0x7d || c === 0x5b) throw notJson(`an item of the list ${JSON.stringify(list).slice(0, 66)} is cut`)
					break
				case At.AfterItem:
					if (isSpace(c)) break
					if (c === 0x2c) at = At.Item
					else if (c === 0x5d) endList()
					else throw notJson(`a comma or ] is missing between the items of ${JSON.stringify(list).slice(0, 66)}`)
					break
				case At.AfterRoot:
					if (!isSpace(c)) throw notJson('text follows the document')
					break
			}
		}
		// The capture goes on in the next chunk: keep this chunk's part, unless the item is already too long to keep.
		if (start !== -1) {
			const part = chunk.slice(start)
			if (at === At.InKey && piecesLength + part.length > MAX_KEY_CHARS) throw notJson('a member name is too long')
			if (at === At.InKey || !overlong) {
				pieces.push(part)
				piecesLength += part.length
			}
			if (at !== At.InKey && piecesLength > maxItemChars) {
				overlong = true
				pieces = []
				piecesLength = 0
			}
			start = 0
		}
		yield* items
	}
	if (at !== At.AfterRoot) throw notJson(at === At.BeforeRoot ? 'it is empty' : 'it ends before the document does')
}
