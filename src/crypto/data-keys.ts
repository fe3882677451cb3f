import { hkdfSync } from 'node:crypto'
import type { Logger } from '../log'

/** A sealed value that none of the configured keys opens (the key changed without the old one kept), or that was tampered with. */
export class UnreadableSecret extends Error {
	override name = 'UnreadableSecret'
}

const VERSION = 'v1'
const IV_BYTES = 12

interface DataKey {
	/** A short digest of the key, stored beside what it sealed: says which key to try, never the key. */
	id: string
	key: CryptoKey
}

async function importKey(base64: string): Promise<DataKey> {
	const bytes = Buffer.from(base64, 'base64')
	if (bytes.byteLength !== 32) throw new Error('a data key must be 32 bytes')
	const id = new Bun.CryptoHasher('sha256').update(bytes).digest('hex').slice(0, 8)
	return { id, key: await crypto.subtle.importKey('raw', bytes, 'AES-GCM', false, ['encrypt', 'decrypt']) }
}

/**
 * Secrets the service must read back (TOTP seeds; webhook secrets next), sealed at rest with AES-256-GCM
 * through WebCrypto. Each value is bound to a context (its row's id) as additional data, so a sealed value
 * copied into another row does not open. Values sealed under a retired key still open while that key is
 * listed in DATA_ENCRYPTION_PREVIOUS_KEYS; `open` says so, and the caller seals them again with the current one.
 */
export class DataKeys {
	/** Imported on first use (WebCrypto's import is asynchronous; the app is built synchronously). */
	private imported: Promise<{ current: DataKey; previous: DataKey[] }> | undefined

	private constructor(
		private readonly current: string,
		private readonly previous: string[],
		/** The random key made up without DATA_ENCRYPTION_KEY (DATA_DIR=memory://), for WORKERS to share. */
		readonly developmentKey?: string,
	) {}

	/**
	 * The keys from settings. Without a current key a random one lives as long as the process: what it seals
	 * is unreadable after a restart, and the log says so. The server reaches this only with DATA_DIR=memory://
	 * (otherwise development keeps its key in DATA_DIR, src/config/secret-file.ts; production requires one).
	 */
	static from(settings: { current?: string; previous: string[] }, log?: Logger): DataKeys {
		const developmentKey = settings.current === undefined ? DataKeys.generate() : undefined
		if (developmentKey)
			log?.warn('DATA_ENCRYPTION_KEY is not set: using a random key for this process; TOTP factors enrolled now stop working after a restart')
		return new DataKeys(settings.current ?? developmentKey ?? '', settings.previous, developmentKey)
	}

	/**
	 * A key for another purpose (the OpenID Provider's signed cookies), derived from the current key with HKDF:
	 * one secret to configure, and a different key for each purpose.
	 */
	derive(purpose: string): string {
		return Buffer.from(hkdfSync('sha256', Buffer.from(this.current, 'base64'), new Uint8Array(0), purpose, 32)).toString('base64url')
	}

	/** A new random key, base64 (what `openssl rand -base64 32` prints). */
	static generate(): string {
		return Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64')
	}

	private keys() {
		this.imported ??= Promise.all([importKey(this.current), Promise.all(this.previous.map(importKey))]).then(([current, previous]) => ({ current, previous }))
		return this.imported
	}

	/** `v1.<key id>.<iv>.<ciphertext+tag>`, base64url parts. */
	async seal(plaintext: string, context: string): Promise<string> {
		const { current } = await this.keys()
		const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES))
		const sealed = await crypto.subtle.encrypt(
			{ name: 'AES-GCM', iv, additionalData: new TextEncoder().encode(context) },
			current.key,
			new TextEncoder().encode(plaintext),
		)
		return [VERSION, current.id, Buffer.from(iv).toString('base64url'), Buffer.from(sealed).toString('base64url')].join('.')
	}

	/** The plaintext, and whether it was sealed under a retired key (seal it again). */
	async open(sealed: string, context: string): Promise<{ plaintext: string; stale: boolean }> {
		const { current, previous } = await this.keys()
		const [version, keyId, iv, ciphertext] = sealed.split('.')
		const key = [current, ...previous].find((candidate) => candidate.id === keyId)
		if (version !== VERSION || !key || !iv || !ciphertext) throw new UnreadableSecret('no configured key opens this value')
		try {
			const plain = await crypto.subtle.decrypt(
				{ name: 'AES-GCM', iv: Buffer.from(iv, 'base64url'), additionalData: new TextEncoder().encode(context) },
				key.key,
				Buffer.from(ciphertext, 'base64url'),
			)
			return { plaintext: new TextDecoder().decode(plain), stale: key !== current }
		} catch {
			throw new UnreadableSecret('the value does not open under its key (tampered, or moved from another row)')
		}
	}
}
