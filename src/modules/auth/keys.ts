import { calculateJwkThumbprint, exportJWK, importJWK, importPKCS8, importSPKI, type JWK } from 'jose'
import type { Config } from '../../config/env'
import type { Logger } from '../../log'

export type SigningAlgorithm = Config['jwt']['algorithm']

/** What signs access tokens, what verifies them, and the public part that JWKS publishes. */
export interface TokenKeys {
	algorithm: SigningAlgorithm
	kid: string
	signingKey: Uint8Array | CryptoKey
	/** A key, or (asymmetric) a lookup by the token's `kid` among the current and previous public keys. */
	verificationKey: Uint8Array | CryptoKey | ((header: { kid?: string; alg?: string }) => Promise<CryptoKey>)
	jwks: { keys: JWK[] }
	/** The random HS256 secret made up without JWT_SECRET (development), for WORKERS to share. */
	developmentSecret?: string
}

export class KeyConfigError extends Error {}

const sha256Id = (bytes: Uint8Array) => new Bun.CryptoHasher('sha256').update(bytes).digest('base64url').slice(0, 16)

const PEM_BLOCK = /-----BEGIN PUBLIC KEY-----[\s\S]+?-----END PUBLIC KEY-----/g

async function readSetting(inline: string | undefined, file: string | undefined, name: string): Promise<string | undefined> {
	if (inline !== undefined) return inline.replaceAll('\\n', '\n')
	if (file === undefined) return undefined
	const handle = Bun.file(file)
	if (!(await handle.exists())) throw new KeyConfigError(`${name}_FILE: no file at ${file}`)
	return handle.text()
}

/**
 * HS256 uses JWT_SECRET's UTF-8 bytes as they are; without one (development
 * only; the config refuses production) a random secret lives as long as the
 * process. EdDSA/ES256 sign with the PEM private key and publish its public
 * half, plus any previous public keys (rotation), at /.well-known/jwks.json.
 * Key ids are RFC 7638 thumbprints (a digest for HS256), never key material.
 */
export async function loadTokenKeys(jwt: Config['jwt'], log: Logger): Promise<TokenKeys> {
	if (jwt.algorithm === 'HS256') {
		let secret = jwt.secret
		let developmentSecret: string | undefined
		if (secret === undefined) {
			secret = developmentSecret = Buffer.from(crypto.getRandomValues(new Uint8Array(48))).toString('base64url')
			log.warn('JWT_SECRET is not set: using a random secret for this process; tokens will not survive a restart')
		}
		const bytes = new TextEncoder().encode(secret)
		// Imported once: given raw bytes, jose would import the key again on every verify.
		const key = await crypto.subtle.importKey('raw', bytes, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify'])
		return { algorithm: 'HS256', kid: sha256Id(bytes), signingKey: key, verificationKey: key, jwks: { keys: [] }, developmentSecret }
	}
	const algorithm = jwt.algorithm
	const pem = await readSetting(jwt.privateKeyPem, jwt.privateKeyFile, 'JWT_PRIVATE_KEY')
	if (!pem) throw new KeyConfigError(`JWT_PRIVATE_KEY: required when JWT_ALGORITHM=${algorithm}`)
	let signingKey: CryptoKey
	try {
		signingKey = await importPKCS8(pem.trim(), algorithm, { extractable: true })
	} catch {
		throw new KeyConfigError(`JWT_PRIVATE_KEY: expected a PKCS#8 PEM private key for ${algorithm}`)
	}
	const { d: _private, ...current } = await exportJWK(signingKey)
	const published: JWK[] = [current]
	const previous = await readSetting(jwt.previousPublicKeys, jwt.previousPublicKeysFile, 'JWT_PREVIOUS_PUBLIC_KEYS')
	for (const block of previous?.match(PEM_BLOCK) ?? []) {
		try {
			published.push(await exportJWK(await importSPKI(block, algorithm, { extractable: true })))
		} catch {
			throw new KeyConfigError(`JWT_PREVIOUS_PUBLIC_KEYS: expected PEM public keys for ${algorithm}`)
		}
	}
	const keys = await Promise.all(
		published.map(async (jwk) => ({ ...jwk, kid: await calculateJwkThumbprint(jwk), alg: algorithm, use: 'sig' })),
	)
	const byKid = new Map(await Promise.all(keys.map(async (jwk) => [jwk.kid, (await importJWK(jwk, algorithm)) as CryptoKey] as const)))
	const kid = keys[0]?.kid ?? ''
	return {
		algorithm,
		kid,
		signingKey,
		verificationKey: async (header) => {
			const key = header.kid === undefined ? undefined : byKid.get(header.kid)
			if (!key) throw new Error('unknown kid')
			return key
		},
		jwks: { keys },
	}
}
