import { randomInt } from 'node:crypto'
import { digestOf, newOpaqueToken } from '../../crypto/opaque-tokens'

/** A link token is an opaque token (URL-safe). */
export const newLinkToken = newOpaqueToken

/** A 6-digit code, uniform over 000000–999999. */
export const newCode = () => String(randomInt(0, 1_000_000)).padStart(6, '0')

/** Tokens are looked up by their hash: a stolen table holds nothing that opens a link. */
export const hashLinkToken = (token: string) => digestOf(`link:${token}`)

/**
 * A code's hash is salted with its row id, so equal codes of two rows hash apart. (A 6-digit code can be
 * guessed offline from its hash by anyone who reads the table; what bounds it is its short life and
 * 5 tries, and that such a reader could change the account anyway.)
 */
export const hashCode = (rowId: string, code: string) => digestOf(`code:${rowId}:${code}`)

/** A lifetime in words, for mail ("1 hour", "24 hours", "90 seconds"). */
export function inWords(seconds: number): string {
	const unit = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`
	if (seconds % 3600 === 0) return unit(seconds / 3600, 'hour')
	if (seconds % 60 === 0) return unit(seconds / 60, 'minute')
	return unit(seconds, 'second')
}

/** The key of the resend limit: one mail of a kind per address per interval (the address hashed, as in the lockout). */
export const mailThrottleKey = (kind: string, address: string) => `mail:${kind}:${digestOf(address)}`
