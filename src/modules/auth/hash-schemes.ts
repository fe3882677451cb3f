/**
 * The password hashes users.password_hash may hold: Latchkey's own argon2id, and the schemes of the
 * services users are imported from (API.md, "Metadata, import and export"), each a self-describing string:
 *
 * - `$argon2id$…` / `$argon2i$…`: PHC strings, as argon2 libraries write them (Bun.password verifies).
 * - `$2a$`/`$2b$`/`$2y$NN$…`: bcrypt as written (GoTrue/Supabase, Auth0), verified with bcryptjs.
 * - `$better-auth-scrypt$SALT:KEY`: Better Auth's `salt:key` (hex) behind a prefix.
 * - `$firebase-scrypt$r=ROUNDS,m=MEMCOST$SIGNER_KEY$SALT_SEPARATOR$SALT$HASH` (base64): Firebase's modified scrypt.
 * - `$pbkdf2-sha256$i=ITERATIONS$SALT$KEY` / `$pbkdf2-sha512$…` / `$pbkdf2-sha1$…` (base64): a Keycloak credential
 *   (Keycloak's argon2 credentials become argon2 PHC strings).
 * - `pbkdf2_sha256$ITERATIONS$SALT$HASH`: Django's own string, as it is.
 *
 * Only maintained primitives verify (Bun.password, bcryptjs, node:crypto's scrypt, pbkdf2 and AES), and
 * keys are compared in constant time. Each password is verified as its service verified it (Better Auth
 * NFKC-normalizes, the others take the bytes typed; Latchkey's argon2 takes NFC). A hash whose cost is
 * absurd (an import gone wrong, or hostile) is refused before any work: it matches no password.
 *
 * Runs in the hashing worker (verification) and in the main thread (reading the cost, for the login's timing).
 */
import { createCipheriv, pbkdf2Sync, randomBytes, scryptSync, timingSafeEqual } from 'node:crypto'
import bcrypt from 'bcryptjs'

/** A stored hash read: its cost class (hashes of one class cost the same to verify), how to verify it, and a decoy. */
export interface ReadableHash {
	scheme: string
	/** Hashes with the same class cost the same verification; Latchkey's own argon2id keeps its `m=…,t=…` key. */
	costClass: string
	/** A LIKE pattern matching every stored hash of this class that can be told from its prefix (stored-hashes.ts). */
	classPattern: string
	verify(password: string): boolean
	/** A hash of the same class and cost that no password matches in practice (random salt and key). */
	decoy(): string
}
export type HashRefusal = { scheme: string; reason: 'malformed' | 'too-costly' }
export type ReadHash = ({ ok: true } & ReadableHash) | ({ ok: false } & HashRefusal)

/** Caps on a stored hash's cost: above them a hash is refused (a failed check) rather than verified. */
export type HashCostCaps = { [K in keyof typeof HASH_COST_CAPS]: number }
export const HASH_COST_CAPS = {
	argon2MemoryKib: 1_048_576, // 1 GiB: far above any sensible setting, so that hashes of earlier PASSWORD_HASH_* settings stay readable
	argon2Passes: 16,
	argon2Lanes: 16,
	bcryptCost: 14,
	scryptMemoryBytes: 128 * 1024 * 1024, // 128·N·r
	pbkdf2Iterations: 10_000_000,
} as const

/** Fewer key bytes than this would let random passwords match now and then. */
const MIN_KEY_BYTES = 16

const B64 = '[A-Za-z0-9+/]*={0,2}'
const B64_ANY = '[A-Za-z0-9+/_-]*={0,2}' // standard or URL-safe (Firebase's Admin SDK lists the latter)
const decodeB64 = (text: string) => Buffer.from(text.replace(/-/g, '+').replace(/_/g, '/'), 'base64')
const b64NoPad = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '')
const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && timingSafeEqual(a, b)
const refused = (scheme: string, reason: HashRefusal['reason']): ReadHash => ({ ok: false, scheme, reason })

/** Reads a stored password hash; never throws. */
export function readStoredHash(hash: string, caps: HashCostCaps = HASH_COST_CAPS): ReadHash {
	if (hash.startsWith('$argon2')) return readArgon2(hash, caps)
	if (/^\$2[aby]\$/.test(hash)) return readBcrypt(hash, caps)
	if (hash.startsWith('$better-auth-scrypt$')) return readBetterAuth(hash)
	if (hash.startsWith('$firebase-scrypt$')) return readFirebase(hash, caps)
	if (hash.startsWith('$pbkdf2-')) return readKeycloakPbkdf2(hash, caps)
	if (hash.startsWith('pbkdf2_sha256$')) return readDjangoPbkdf2(hash, caps)
	return refused('unknown', 'malformed')
}

/** Verifies `password` against a stored hash; false for a hash that is refused (see readStoredHash). */
export function verifyStoredHash(password: string, hash: string, caps: HashCostCaps = HASH_COST_CAPS): boolean {
	const read = readStoredHash(hash, caps)
	if (!read.ok) return false
	try {
		return read.verify(password)
	} catch {
		return false
	}
}

function readArgon2(hash: string, caps: HashCostCaps): ReadHash {
	const match = /^\$(argon2id|argon2i)\$(?:v=(16|19)\$)?m=(\d{1,10}),t=(\d{1,10}),p=(\d{1,3})\$([A-Za-z0-9+/]{11,})\$([A-Za-z0-9+/]{22,})$/.exec(hash)
	if (!match) return refused('argon2', 'malformed')
	const [, variant, version, m, t, p, salt = '', key = ''] = match
	const [memoryCost, timeCost, lanes] = [Number(m), Number(t), Number(p)]
	if (memoryCost > caps.argon2MemoryKib || timeCost > caps.argon2Passes || lanes > caps.argon2Lanes) return refused('argon2', 'too-costly')
	const own = variant === 'argon2id' && version === '19' && lanes === 1
	const head = `$${variant}$${version ? `v=${version}$` : ''}m=${memoryCost},t=${timeCost},p=${lanes}$`
	return {
		ok: true,
		scheme: variant ?? 'argon2',
		// Latchkey's own key for the hashes it writes (PasswordHasher's parameter sets).
		costClass: own ? `m=${memoryCost},t=${timeCost}` : `${variant}:v=${version ?? 16},m=${memoryCost},t=${timeCost},p=${lanes}`,
		classPattern: `${head}%`,
		verify: (password) => Bun.password.verifySync(password.normalize('NFC'), hash),
		decoy: () => `${head}${b64NoPad(randomBytes(decodeB64(salt).length))}$${b64NoPad(randomBytes(decodeB64(key).length))}`,
	}
}

const BCRYPT_ALPHABET = './ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

function readBcrypt(hash: string, caps: HashCostCaps): ReadHash {
	const match = /^\$2([aby])\$(\d\d)\$[./A-Za-z0-9]{53}$/.exec(hash)
	if (!match) return refused('bcrypt', 'malformed')
	const cost = Number(match[2])
	if (cost < 4) return refused('bcrypt', 'malformed')
	if (cost > caps.bcryptCost) return refused('bcrypt', 'too-costly')
	return {
		ok: true,
		scheme: 'bcrypt',
		costClass: `bcrypt:${cost}`,
		classPattern: `$2_$${match[2]}$%`,
		// bcryptjs as node's bcrypt does (Auth0): the first 72 bytes of the UTF-8 password, compared in constant time.
		verify: (password) => bcrypt.compareSync(password, hash),
		decoy: () => `$2b$${match[2]}$${Array.from(randomBytes(53), (byte) => BCRYPT_ALPHABET[byte & 63]).join('')}`,
	}
}

const BETTER_AUTH = { N: 16_384, r: 16, p: 1, dkLen: 64 } as const

function readBetterAuth(hash: string): ReadHash {
	const match = /^\$better-auth-scrypt\$([0-9a-fA-F]{16,128}):([0-9a-fA-F]{128})$/.exec(hash)
	if (!match) return refused('better-auth-scrypt', 'malformed')
	const [, salt = '', key = ''] = match
	return {
		ok: true,
		scheme: 'better-auth-scrypt',
		costClass: 'better-auth-scrypt',
		classPattern: '$better-auth-scrypt$%',
		// As Better Auth does: the password NFKC-normalized, the salt's hex text itself (not its bytes) as salt.
		verify: (password) =>
			sameBytes(
				scryptSync(password.normalize('NFKC'), salt, BETTER_AUTH.dkLen, { N: BETTER_AUTH.N, r: BETTER_AUTH.r, p: BETTER_AUTH.p, maxmem: 256 * BETTER_AUTH.N * BETTER_AUTH.r }),
				Buffer.from(key, 'hex'),
			),
		decoy: () => `$better-auth-scrypt$${randomBytes(salt.length / 2).toString('hex')}:${randomBytes(64).toString('hex')}`,
	}
}

function readFirebase(hash: string, caps: HashCostCaps): ReadHash {
	const match = new RegExp(`^\\$firebase-scrypt\\$r=(\\d{1,3}),m=(\\d{1,2})\\$(${B64_ANY})\\$(${B64_ANY})\\$(${B64_ANY})\\$(${B64_ANY})$`).exec(hash)
	if (!match) return refused('firebase-scrypt', 'malformed')
	const [, r, m, signerKeyText = '', separatorText = '', saltText = '', expectedText = ''] = match
	const [rounds, memCost] = [Number(r), Number(m)]
	const [signerKey, separator, salt, expected] = [signerKeyText, separatorText, saltText, expectedText].map(decodeB64) as [Buffer, Buffer, Buffer, Buffer]
	if (rounds < 1 || memCost < 1 || signerKey.length === 0 || expected.length !== signerKey.length || expected.length < MIN_KEY_BYTES) return refused('firebase-scrypt', 'malformed')
	const memory = 128 * rounds * 2 ** memCost
	if (memory > caps.scryptMemoryBytes) return refused('firebase-scrypt', 'too-costly')
	const head = `$firebase-scrypt$r=${rounds},m=${memCost}$`
	return {
		ok: true,
		scheme: 'firebase-scrypt',
		costClass: `firebase-scrypt:r=${rounds},m=${memCost}`,
		classPattern: `${head}%`,
		// Firebase's published algorithm (github.com/firebase/scrypt): scrypt(password, salt ‖ separator, N = 2^mem_cost,
		// r = rounds, p = 1) keys AES-256-CTR (zero IV), which encrypts the project's signer key; that is the hash.
		verify: (password) => {
			const derived = scryptSync(password, Buffer.concat([salt, separator]), 32, { N: 2 ** memCost, r: rounds, p: 1, maxmem: 2 * memory })
			const cipher = createCipheriv('aes-256-ctr', derived, Buffer.alloc(16))
			return sameBytes(Buffer.concat([cipher.update(signerKey), cipher.final()]), expected)
		},
		decoy: () =>
			`${head}${randomBytes(signerKey.length).toString('base64')}$${randomBytes(separator.length).toString('base64')}$${randomBytes(salt.length).toString('base64')}$${randomBytes(expected.length).toString('base64')}`,
	}
}

/** PBKDF2's cost class: the digest, the iterations, and the number of blocks the key takes (each costs the iterations again). */
type Pbkdf2Digest = 'sha1' | 'sha256' | 'sha512'
const PBKDF2_BLOCK_BYTES: Record<Pbkdf2Digest, number> = { sha1: 20, sha256: 32, sha512: 64 }
const pbkdf2Class = (digest: Pbkdf2Digest, iterations: number, keyBytes: number) =>
	`pbkdf2-${digest}:i=${iterations},blocks=${Math.ceil(keyBytes / PBKDF2_BLOCK_BYTES[digest])}`

function pbkdf2Check(iterations: number, key: Buffer, scheme: string, caps: HashCostCaps): ReadHash | undefined {
	if (iterations < 1 || key.length < MIN_KEY_BYTES || key.length > 128) return refused(scheme, 'malformed')
	if (iterations > caps.pbkdf2Iterations) return refused(scheme, 'too-costly')
	return undefined
}

function readKeycloakPbkdf2(hash: string, caps: HashCostCaps): ReadHash {
	const match = new RegExp(`^\\$pbkdf2-(sha1|sha256|sha512)\\$i=(\\d{1,9})\\$(${B64})\\$(${B64})$`).exec(hash)
	if (!match) return refused('pbkdf2', 'malformed')
	const [, digestName, i, saltText = '', keyText = ''] = match
	const digest: Pbkdf2Digest = digestName === 'sha512' ? 'sha512' : digestName === 'sha1' ? 'sha1' : 'sha256'
	const [iterations, salt, key] = [Number(i), decodeB64(saltText), decodeB64(keyText)]
	const problem = pbkdf2Check(iterations, key, `pbkdf2-${digest}`, caps)
	if (problem) return problem
	const head = `$pbkdf2-${digest}$i=${iterations}$`
	return {
		ok: true,
		scheme: `pbkdf2-${digest}`,
		costClass: pbkdf2Class(digest, iterations, key.length),
		classPattern: `${head}%`,
		// As Keycloak does: the UTF-8 password, the key as long as the stored one.
		verify: (password) => sameBytes(pbkdf2Sync(password, salt, iterations, key.length, digest), key),
		decoy: () => `${head}${randomBytes(salt.length).toString('base64')}$${randomBytes(key.length).toString('base64')}`,
	}
}

function readDjangoPbkdf2(hash: string, caps: HashCostCaps): ReadHash {
	const match = new RegExp(`^pbkdf2_sha256\\$(\\d{1,9})\\$([^$]{1,128})\\$(${B64})$`).exec(hash)
	if (!match) return refused('django-pbkdf2-sha256', 'malformed')
	const [, i, salt = '', keyText = ''] = match
	const [iterations, key] = [Number(i), decodeB64(keyText)]
	const problem = pbkdf2Check(iterations, key, 'django-pbkdf2-sha256', caps)
	if (problem) return problem
	return {
		ok: true,
		scheme: 'django-pbkdf2-sha256',
		costClass: pbkdf2Class('sha256', iterations, key.length),
		classPattern: `pbkdf2_sha256$${iterations}$%`,
		// As Django does: the salt is text (its UTF-8 bytes), the key 32 bytes in base64.
		verify: (password) => sameBytes(pbkdf2Sync(password, salt, iterations, key.length, 'sha256'), key),
		decoy: () => `pbkdf2_sha256$${iterations}$${randomBytes(salt.length).toString('base64url').slice(0, salt.length)}$${randomBytes(key.length).toString('base64')}`,
	}
}

/**
 * What an import writes into users.password_hash from another service's fields (API.md, "Metadata, import and
 * export"); undefined when the fields do not make a hash this module reads. bcrypt, argon2 PHC strings and Django's
 * `pbkdf2_sha256$…` are stored as the service gives them.
 */
export const importedHash = {
	/** Better Auth's `account.password` (`salt:key`, hex). */
	betterAuth: (saltKey: string) => readable(`$better-auth-scrypt$${saltKey}`),
	/** Firebase's `auth:export` passwordHash and salt, with the project's hash parameters as `auth:import` takes them (base64). */
	firebase: (project: { signerKey: string; saltSeparator: string; rounds: number; memCost: number }, user: { passwordHash: string; salt: string }) =>
		readable(`$firebase-scrypt$r=${project.rounds},m=${project.memCost}$${project.signerKey}$${project.saltSeparator}$${user.salt}$${user.passwordHash}`),
	/**
	 * A Keycloak realm export's password credential: its `secretData` and `credentialData` (JSON text). Keycloak's
	 * algorithms: `pbkdf2-sha256`, `pbkdf2-sha512`, `pbkdf2` (HMAC-SHA1), and `argon2` (the default since Keycloak 24
	 * outside FIPS mode: BouncyCastle's argon2 with `type`, `version`, `memory`, `parallelism` in additionalParameters and
	 * the passes in hashIterations), which becomes the PHC string any argon2 library reads.
	 */
	keycloak: (credential: { secretData: string; credentialData: string }) => {
		try {
			const secret = JSON.parse(credential.secretData) as { value?: unknown; salt?: unknown }
			const data = JSON.parse(credential.credentialData) as { hashIterations?: unknown; algorithm?: unknown; additionalParameters?: unknown }
			if (typeof secret.value !== 'string' || typeof secret.salt !== 'string' || typeof data.hashIterations !== 'number') return undefined
			if (data.algorithm === 'argon2') return keycloakArgon2(secret.value, secret.salt, data.hashIterations, data.additionalParameters)
			const algorithm = data.algorithm === 'pbkdf2' ? 'pbkdf2-sha1' : data.algorithm
			if (algorithm !== 'pbkdf2-sha1' && algorithm !== 'pbkdf2-sha256' && algorithm !== 'pbkdf2-sha512') return undefined
			return readable(`$${algorithm}$i=${data.hashIterations}$${secret.salt}$${secret.value}`)
		} catch {
			return undefined
		}
	},
}

/** Keycloak's argon2 credential as a PHC string (argon2id or argon2i; Keycloak's argon2d is not read here). */
function keycloakArgon2(value: string, salt: string, passes: number, parameters: unknown): string | undefined {
	// Keycloak writes each additional parameter as a list of strings: { "memory": ["7168"], … }.
	const first = (name: string) => {
		const values = typeof parameters === 'object' && parameters !== null ? (parameters as Record<string, unknown>)[name] : undefined
		return Array.isArray(values) && typeof values[0] === 'string' ? values[0] : undefined
	}
	const type = first('type') ?? 'id'
	const variant = type === 'id' ? 'argon2id' : type === 'i' ? 'argon2i' : undefined
	const versionName = first('version') ?? '1.3'
	const version = versionName === '1.3' ? 19 : versionName === '1.0' ? 16 : undefined
	const [memory, lanes] = [first('memory') ?? '', first('parallelism') ?? '']
	if (!variant || !version || !/^\d{1,10}$/.test(memory) || !/^\d{1,3}$/.test(lanes)) return undefined
	const noPad = (text: string) => b64NoPad(decodeB64(text))
	return readable(`$${variant}$v=${version}$m=${Number(memory)},t=${passes},p=${Number(lanes)}$${noPad(salt)}$${noPad(value)}`)
}
const readable = (hash: string) => (readStoredHash(hash).ok ? hash : undefined)
