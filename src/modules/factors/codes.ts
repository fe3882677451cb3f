/** Recovery codes, MFA tokens: random strings shown once and stored as digests. */
import { digestOf, newOpaqueToken } from '../../crypto/opaque-tokens'

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567'
export const RECOVERY_CODE_COUNT = 10

/** A recovery code: 80 random bits as `xxxx-xxxx-xxxx-xxxx` (256 is a multiple of 32, so `& 31` has no bias). */
export function newRecoveryCode(): string {
	const letters = Array.from(crypto.getRandomValues(new Uint8Array(16)), (byte) => BASE32[byte & 31])
	return [0, 4, 8, 12].map((start) => letters.slice(start, start + 4).join('')).join('-')
}

/** As typed: case, spaces and dashes do not matter. */
export const normalizeRecoveryCode = (code: string) => code.toLowerCase().replace(/[\s-]/g, '')

/**
 * A recovery code's digest, salted with its owner's id. 80 random bits make a slow hash unnecessary: guessing
 * online is bounded by the lockout, offline by the search space.
 */
export const hashRecoveryCode = (userId: string, code: string) => digestOf(`${userId}:${normalizeRecoveryCode(code)}`)

/** An MFA token is an opaque token, stored as its digest. */
export const newMfaToken = newOpaqueToken
export const hashMfaToken = (token: string) => digestOf(token)
