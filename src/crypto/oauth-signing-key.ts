import { calculateJwkThumbprint, importJWK, type JWK } from 'jose'
import type { Config } from '../config/env'
import { generateRsaPem, readRsaPrivateKey } from '../config/rsa-key'
import type { Logger } from '../log'

/** An OAUTH_SIGNING_KEY that cannot be read or used: the service does not start (exit 1, the line names the setting). */
export class OAuthKeyError extends Error {}

type Published = { kid: string; alg: 'RS256'; use: 'sig' }

/** config.oauth.signingKey: the PEM, or the file that holds it (the config refuses both). */
type KeySettings = Partial<Config['oauth']['signingKey']>

/** The provider's RS256 key: what signs ID tokens and its access tokens, and the public half the JWKS lists. */
export interface OAuthSigningKey {
	/** RFC 7638 thumbprint of the public key: stable for a key, whichever PEM form it came in. */
	kid: string
	alg: 'RS256'
	privateJwk: JWK & Published
	publicJwk: JWK & Published
	/** The private key, imported once for jose's SignJWT. */
	signingKey: CryptoKey
	/** The PEM made up without a key set (DATA_DIR=memory://), for WORKERS to share. */
	developmentPem?: string
}

async function readPem(settings: KeySettings): Promise<{ pem: string; setting: string } | undefined> {
	if (settings.pem !== undefined) return { pem: settings.pem, setting: 'OAUTH_SIGNING_KEY' }
	if (settings.file === undefined) return undefined
	const file = Bun.file(settings.file)
	try {
		return { pem: await file.text(), setting: 'OAUTH_SIGNING_KEY_FILE' }
	} catch (error) {
		const code = (error as NodeJS.ErrnoException).code
		throw new OAuthKeyError(`OAUTH_SIGNING_KEY_FILE: ${code === 'ENOENT' ? `no file at ${settings.file}` : `cannot read ${settings.file} (${code ?? 'unknown error'})`}`)
	}
}

/**
 * The provider's signing key from OAUTH_SIGNING_KEY or OAUTH_SIGNING_KEY_FILE: an RSA private key in PEM,
 * PKCS#8 or PKCS#1, of at least 2048 bits; anything else stops the start. In development an unset key was
 * made and kept in DATA_DIR before this runs (src/config/secret-file.ts); only with DATA_DIR=memory:// does
 * none reach here, and a random one then lives as long as the process (production requires one).
 */
export async function loadOAuthSigningKey(settings: KeySettings, log: Logger): Promise<OAuthSigningKey> {
	let given = await readPem(settings)
	let developmentPem: string | undefined
	if (given === undefined) {
		developmentPem = generateRsaPem()
		given = { pem: developmentPem, setting: 'OAUTH_SIGNING_KEY' }
		log.warn('OAUTH_SIGNING_KEY is not set: using a random key for this process; ID tokens it signed stop verifying after a restart')
	}
	const read = readRsaPrivateKey(given.pem)
	if ('problem' in read) throw new OAuthKeyError(`${given.setting}: ${read.problem}`)
	const jwk = read.key.export({ format: 'jwk' }) as JWK
	// Built from the public members only: d, p, q, dp, dq and qi never reach the JWKS.
	const publicPart: JWK = { kty: jwk.kty, n: jwk.n, e: jwk.e }
	const kid = await calculateJwkThumbprint(publicPart, 'sha256')
	const published: Published = { kid, alg: 'RS256', use: 'sig' }
	const privateJwk = { ...jwk, ...published }
	const publicJwk = { ...publicPart, ...published }
	const signingKey = (await importJWK(privateJwk, 'RS256')) as CryptoKey
	return { kid, alg: 'RS256', privateJwk, publicJwk, signingKey, developmentPem }
}
