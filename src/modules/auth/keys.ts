import type { JWK } from 'jose'
import type { Config } from '../../config/env'
import type { Logger } from '../../log'

/** What signs access tokens and what verifies them; JWKS publishes the public part. */
export interface TokenKeys {
	algorithm: Config['jwt']['algorithm']
	kid: string
	signingKey: Uint8Array | CryptoKey
	verificationKey: Uint8Array | CryptoKey
	jwks: { keys: JWK[] }
}

const sha256Id = (bytes: Uint8Array) => new Bun.CryptoHasher('sha256').update(bytes).digest('base64url').slice(0, 16)

/**
 * HS256 uses JWT_SECRET's UTF-8 bytes as they are. Without one (development
 * only; the config refuses production) a random secret lives as long as the
 * process, so tokens die with a restart. The kid is a digest of the key, never the key.
 */
export async function loadTokenKeys(jwt: Config['jwt'], log: Logger): Promise<TokenKeys> {
	let secret = jwt.secret
	if (secret === undefined) {
		secret = Buffer.from(crypto.getRandomValues(new Uint8Array(48))).toString('base64url')
		log.warn('JWT_SECRET is not set: using a random secret for this process; tokens will not survive a restart')
	}
	const key = new TextEncoder().encode(secret)
	return { algorithm: 'HS256', kid: sha256Id(key), signingKey: key, verificationKey: key, jwks: { keys: [] } }
}
