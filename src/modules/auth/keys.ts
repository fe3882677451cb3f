import { createPublicKey } from 'node:crypto'
import { calculateJwkThumbprint, exportJWK, importJWK, importPKCS8, importSPKI, type JWK } from 'jose'
import type { Config } from '../../config/env'
import type { Logger } from '../../log'

export type SigningAlgorithm = Config['jwt']['algorithm']

/** A key that verifies access tokens, bound to the one algorithm it may verify under. */
interface VerificationKey {
	alg: SigningAlgorithm
	key: CryptoKey
}

/** What signs access tokens, what verifies them, and the public part that JWKS publishes. */
export interface TokenKeys {
	algorithm: SigningAlgorithm
	kid: string
	signingKey: CryptoKey
	/** The algorithms a token may name: the current one and those of the previous keys. */
	algorithms: SigningAlgorithm[]
	/** jose's key lookup: the key whose `kid` the token names, only if the token's `alg` is that key's own. */
	verificationKey: (header: { kid?: string; alg?: string }) => Promise<CryptoKey>
	jwks: { keys: JWK[] }
	/** The random HS256 secret made up without JWT_SECRET (DATA_DIR=memory://), for WORKERS to share. */
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

/** An HS256 key from a secret's UTF-8 bytes as they are, with its id (a digest, never the secret). */
async function hmacKey(secret: string): Promise<{ kid: string; key: CryptoKey }> {
	const bytes = new TextEncoder().encode(secret)
	// Imported once: given raw bytes, jose would import the key again on every verify.
	const key = await crypto.subtle.importKey('raw', bytes, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify'])
	return { kid: sha256Id(bytes), key }
}

/** The algorithm a public key belongs to, read from the key itself: Ed25519 → EdDSA, P-256 → ES256. */
function algorithmOf(pem: string): SigningAlgorithm {
	let type: string | undefined
	let curve: string | undefined
	try {
		const key = createPublicKey(pem)
		type = key.asymmetricKeyType
		curve = key.asymmetricKeyDetails?.namedCurve
	} catch {
		throw new KeyConfigError('JWT_PREVIOUS_PUBLIC_KEYS: expected PEM public keys (SPKI)')
	}
	if (type === 'ed25519') return 'EdDSA'
	if (type === 'ec' && curve === 'prime256v1') return 'ES256'
	throw new KeyConfigError(`JWT_PREVIOUS_PUBLIC_KEYS: expected Ed25519 (EdDSA) or P-256 (ES256) public keys, got ${curve ?? type ?? 'an unknown key'}`)
}

/** A public key for JWKS: RFC 7638 thumbprint as kid, its own algorithm, for signatures. */
async function publishedKey(key: CryptoKey, alg: SigningAlgorithm): Promise<JWK & { kid: string }> {
	const { d: _private, ...jwk } = await exportJWK(key)
	return { ...jwk, kid: await calculateJwkThumbprint(jwk), alg, use: 'sig' }
}

/**
 * The current signing key, and the keys that verify: the current one plus
 * the retired ones (rotation), each of whatever algorithm it was made for.
 * HS256 uses a secret's UTF-8 bytes as they are; without JWT_SECRET (only with
 * DATA_DIR=memory://: development otherwise keeps one in DATA_DIR, and the config
 * refuses production) a random secret lives as long as the process.
 * EdDSA/ES256 sign with the PEM private key. Public keys, current and previous,
 * are published at /.well-known/jwks.json; secrets never.
 * Key ids are RFC 7638 thumbprints (a digest for HS256), never key material.
 */
export async function loadTokenKeys(jwt: Config['jwt'], log: Logger): Promise<TokenKeys> {
	const verifiers = new Map<string, VerificationKey>()
	const published: JWK[] = []
	let signing: { kid: string; key: CryptoKey }
	let developmentSecret: string | undefined

	if (jwt.algorithm === 'HS256') {
		let secret = jwt.secret
		if (secret === undefined) {
			secret = developmentSecret = Buffer.from(crypto.getRandomValues(new Uint8Array(48))).toString('base64url')
			log.warn('JWT_SECRET is not set: using a random secret for this process; tokens will not survive a restart')
		}
		signing = await hmacKey(secret)
		verifiers.set(signing.kid, { alg: 'HS256', key: signing.key })
	} else {
		const pem = await readSetting(jwt.privateKeyPem, jwt.privateKeyFile, 'JWT_PRIVATE_KEY')
		if (!pem) throw new KeyConfigError(`JWT_PRIVATE_KEY: required when JWT_ALGORITHM=${jwt.algorithm}`)
		let key: CryptoKey
		try {
			key = await importPKCS8(pem.trim(), jwt.algorithm, { extractable: true })
		} catch {
			throw new KeyConfigError(`JWT_PRIVATE_KEY: expected a PKCS#8 PEM private key for ${jwt.algorithm}`)
		}
		const jwk = await publishedKey(key, jwt.algorithm)
		published.push(jwk)
		signing = { kid: jwk.kid, key }
		verifiers.set(jwk.kid, { alg: jwt.algorithm, key: (await importJWK(jwk, jwt.algorithm)) as CryptoKey })
	}

	if (jwt.previousSecret !== undefined) {
		const previous = await hmacKey(jwt.previousSecret)
		if (!verifiers.has(previous.kid)) verifiers.set(previous.kid, { alg: 'HS256', key: previous.key })
	}
	const previousPems = await readSetting(jwt.previousPublicKeys, jwt.previousPublicKeysFile, 'JWT_PREVIOUS_PUBLIC_KEYS')
	const blocks = previousPems?.match(PEM_BLOCK) ?? []
	if (previousPems !== undefined && previousPems.trim() !== '' && blocks.length === 0)
		throw new KeyConfigError('JWT_PREVIOUS_PUBLIC_KEYS: expected PEM public keys (-----BEGIN PUBLIC KEY-----)')
	for (const block of blocks) {
		const alg = algorithmOf(block)
		let key: CryptoKey
		try {
			key = await importSPKI(block, alg, { extractable: true })
		} catch {
			throw new KeyConfigError(`JWT_PREVIOUS_PUBLIC_KEYS: expected PEM public keys for ${alg}`)
		}
		const jwk = await publishedKey(key, alg)
		if (verifiers.has(jwk.kid)) continue
		verifiers.set(jwk.kid, { alg, key })
		published.push(jwk)
	}

	const algorithms = [...new Set([...verifiers.values()].map((entry) => entry.alg))]
	return {
		algorithm: jwt.algorithm,
		kid: signing.kid,
		signingKey: signing.key,
		algorithms,
		verificationKey: async (header) => {
			const entry = header.kid === undefined ? undefined : verifiers.get(header.kid)
			// A key verifies under its own algorithm only: an HS256 token "signed" with a public key
			// as the HMAC secret (algorithm confusion) names a key that is not an HS256 key.
			if (!entry || entry.alg !== header.alg) throw new Error('no key with this kid for this alg')
			return entry.key
		},
		jwks: { keys: published },
		developmentSecret,
	}
}
