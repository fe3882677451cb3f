import { createPrivateKey, generateKeyPairSync, type KeyObject } from 'node:crypto'

/** The least RSA modulus accepted for OAUTH_SIGNING_KEY (RFC 7518 §3.3 asks at least 2048 bits for RS256). */
export const RSA_MIN_BITS = 2048

/** How an operator makes a key that passes (said in the start-up error line). */
export const RSA_KEY_COMMAND = 'openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048'

/**
 * An RSA private key read from PEM (PKCS#8 `BEGIN PRIVATE KEY` or PKCS#1 `BEGIN RSA PRIVATE KEY`), or why it
 * cannot sign RS256: not a private key, not RSA (an RSA-PSS key may not sign RS256), too short.
 * The reason never quotes the text.
 */
export function readRsaPrivateKey(pem: string): { key: KeyObject } | { problem: string } {
	let key: KeyObject
	try {
		key = createPrivateKey({ key: pem.replaceAll('\\n', '\n').trim(), format: 'pem' })
	} catch {
		return { problem: 'expected an RSA private key in PEM (PKCS#8 or PKCS#1, not encrypted)' }
	}
	if (key.asymmetricKeyType !== 'rsa') return { problem: `expected an RSA private key, got ${key.asymmetricKeyType ?? 'another kind'}` }
	const bits = key.asymmetricKeyDetails?.modulusLength ?? 0
	if (bits < RSA_MIN_BITS) return { problem: `expected an RSA key of at least ${RSA_MIN_BITS} bits, got ${bits}` }
	return { key }
}

/** A new RSA 2048 private key, PKCS#8 PEM (about 100 ms of one core). */
export function generateRsaPem(): string {
	return generateKeyPairSync('rsa', { modulusLength: RSA_MIN_BITS, publicExponent: 0x10001 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
}
