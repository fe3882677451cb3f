import { generateKeyPairSync } from 'node:crypto'

let generated: Record<string, unknown> | undefined

/**
 * A random RSA key for this process, when none is configured (tests; development until OAUTH_SIGNING_KEY is
 * loaded at start): ID tokens it signs do not verify after a restart.
 */
export function developmentSigningKey(): Record<string, unknown> {
	if (generated) return generated
	const jwk = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' })
	generated = { ...jwk, kid: `dev-${Bun.hash(JSON.stringify(jwk.n)).toString(36)}`, alg: 'RS256', use: 'sig' }
	return generated
}

