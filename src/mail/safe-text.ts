/** Characters that end or break a line, or are not characters at all: each becomes a space. */
const BREAKING = /[\p{Cc}\p{Zl}\p{Zp}\p{Cs}]/gu
/**
 * Invisible format characters: bidi embeddings, overrides and isolates (which can reverse what a reader
 * sees), zero-width spaces, soft hyphens, tags. The zero-width joiner and non-joiner stay: emoji
 * sequences and Persian, Indic and other scripts need them.
 */
const INVISIBLE = /(?![\u200c\u200d])\p{Cf}/gu
/** Where a link could be recognised: dots (ASCII and the ideographic and full-width ones IDN allows), `:`, `/`, `@`. */
const LINK_PUNCTUATION = /([.:/@\u3002\uff0e\uff61\uff1a\uff0f\uff20])/g
/** A zero-width space: invisible, but no URL or address detector reads across it. */
const LINK_BREAK = '\u200b'

/**
 * Text that came from outside (an account's name, a factor's name, a user agent) made fit for a mail:
 * one line (line and paragraph separators and control characters become spaces, runs of spaces one),
 * no invisible format characters, at most `max` characters (code points, never half a pair), and never
 * a link: a zero-width space follows every `.`, `:`, `/` and `@`, so neither a mail client's
 * auto-linking (in the HTML or the plain-text part) nor a reader's eye finds a URL or address in it.
 */
export function mailLine(value: string, max = 100): string {
	const oneLine = value.replace(BREAKING, ' ').replace(INVISIBLE, '').replace(/\s+/gu, ' ').trim()
	const capped = Array.from(oneLine).slice(0, max).join('').trimEnd()
	return capped.replace(LINK_PUNCTUATION, `$1${LINK_BREAK}`)
}
