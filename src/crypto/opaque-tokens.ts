import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'

/*
 * Opaque tokens: random strings handed out once (refresh tokens, MFA tokens, mailed links, a provider
 * flow's state and browser secret, sign-in codes) and kept only as a digest, so that a stolen table
 * opens nothing. With 256 random bits a slow hash adds nothing: SHA-256 is the digest.
 */

const TOKEN_BYTES = 32

/** A new opaque token: 256 random bits, base64url (43 characters). */
export const newOpaqueToken = () => randomBytes(TOKEN_BYTES).toString('base64url')

/** Whether a value has the shape of a token `newOpaqueToken` makes (a cookie read back, say). */
export const isOpaqueToken = (value: unknown): value is string => typeof value === 'string' && /^[A-Za-z0-9_-]{43}$/.test(value)

/**
 * The SHA-256 digest of a value, hex unless said otherwise: what is stored in place of a token, or of
 * an address a key or a count is kept for (so that none is stored in clear).
 */
export const digestOf = (value: string, encoding: 'hex' | 'base64url' = 'hex') => createHash('sha256').update(value).digest(encoding)

/** Whether two digests are equal, compared in constant time (their length is no secret). */
export function sameDigest(a: string, b: string): boolean {
	const left = Buffer.from(a)
	const right = Buffer.from(b)
	return left.length === right.length && timingSafeEqual(left, right)
}

/** Whether an offered secret is the expected one, in constant time whatever their lengths (both are digested first). */
export const sameSecret = (offered: string, expected: string) =>
	timingSafeEqual(createHash('sha256').update(offered).digest(), createHash('sha256').update(expected).digest())
