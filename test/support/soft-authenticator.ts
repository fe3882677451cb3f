import { encodeCBOR, type CBORType } from '@levischuck/tiny-cbor'
import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto'

/**
 * A software passkey authenticator for tests that need WebAuthn without a browser (the contract walk, the
 * benchmark): ES256 keys from node:crypto, `none` attestation, discoverable credentials, user verification
 * always given. It writes what an authenticator writes (RP ID hash, flags, counter, COSE key) so that
 * @simplewebauthn/server verifies it as it verifies a browser's; the browser tests use Chromium's own
 * virtual authenticator instead.
 */

const b64url = (bytes: Uint8Array | Buffer) => Buffer.from(bytes).toString('base64url')
const sha256 = (data: Uint8Array | string) => createHash('sha256').update(data).digest()

const FLAG_USER_PRESENT = 0x01
const FLAG_USER_VERIFIED = 0x04
const FLAG_ATTESTED_DATA = 0x40

interface SoftCredential {
	id: Buffer
	privateKey: KeyObject
	userHandle: string
	signCount: number
}

interface CreationOptions {
	challenge: string
	rp: { id?: string }
	user: { id: string }
}

interface RequestOptions {
	challenge: string
	rpId?: string
	allowCredentials?: Array<{ id: string }>
}

export class SoftAuthenticator {
	readonly credentials: SoftCredential[] = []

	constructor(
		readonly origin: string,
		readonly rpId: string,
	) {}

	/** What `startRegistration` returns for these options. */
	register(options: CreationOptions) {
		const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
		const jwk = publicKey.export({ format: 'jwk' })
		const credential: SoftCredential = { id: Buffer.from(crypto.getRandomValues(new Uint8Array(16))), privateKey, userHandle: options.user.id, signCount: 0 }
		this.credentials.push(credential)
		// COSE_Key: kty EC2 (2), alg ES256 (-7), crv P-256 (1), x, y.
		const coseKey = encodeCBOR(
			new Map<number, number | Uint8Array>([
				[1, 2],
				[3, -7],
				[-1, 1],
				[-2, Buffer.from(jwk.x ?? '', 'base64url')],
				[-3, Buffer.from(jwk.y ?? '', 'base64url')],
			]),
		)
		const idLength = Buffer.alloc(2)
		idLength.writeUInt16BE(credential.id.length)
		const authData = Buffer.concat([
			sha256(options.rp.id ?? this.rpId),
			Buffer.from([FLAG_USER_PRESENT | FLAG_USER_VERIFIED | FLAG_ATTESTED_DATA]),
			Buffer.alloc(4),
			Buffer.alloc(16),
			idLength,
			credential.id,
			Buffer.from(coseKey),
		])
		const attestationObject = encodeCBOR(new Map<string, CBORType>([['fmt', 'none'], ['attStmt', new Map<string, CBORType>()], ['authData', new Uint8Array(authData)]]))
		const clientDataJSON = JSON.stringify({ type: 'webauthn.create', challenge: options.challenge, origin: this.origin, crossOrigin: false })
		return {
			id: b64url(credential.id),
			rawId: b64url(credential.id),
			type: 'public-key' as const,
			clientExtensionResults: {},
			authenticatorAttachment: 'platform' as const,
			response: { clientDataJSON: b64url(Buffer.from(clientDataJSON)), attestationObject: b64url(attestationObject), transports: ['internal'] },
		}
	}

	/**
	 * What `startAuthentication` returns: signed by the first credential the options allow (any, for a
	 * discoverable sign-in). `origin` and `signCount` let a test forge what a phishing page or a cloned
	 * authenticator would send.
	 */
	authenticate(options: RequestOptions, { origin = this.origin, credential, signCount }: { origin?: string; credential?: SoftCredential; signCount?: number } = {}) {
		const allowed = options.allowCredentials?.map((entry) => entry.id) ?? []
		const chosen = credential ?? this.credentials.find((candidate) => allowed.length === 0 || allowed.includes(b64url(candidate.id)))
		if (!chosen) throw new Error('no credential for these options')
		chosen.signCount = signCount ?? chosen.signCount + 1
		const counter = Buffer.alloc(4)
		counter.writeUInt32BE(chosen.signCount)
		const authData = Buffer.concat([sha256(options.rpId ?? this.rpId), Buffer.from([FLAG_USER_PRESENT | FLAG_USER_VERIFIED]), counter])
		const clientDataJSON = Buffer.from(JSON.stringify({ type: 'webauthn.get', challenge: options.challenge, origin, crossOrigin: false }))
		// ECDSA over authData ‖ SHA-256(clientDataJSON), DER-encoded as WebAuthn wants (node's default for EC keys).
		const signature = sign('sha256', Buffer.concat([authData, sha256(clientDataJSON)]), chosen.privateKey)
		return {
			id: b64url(chosen.id),
			rawId: b64url(chosen.id),
			type: 'public-key' as const,
			clientExtensionResults: {},
			authenticatorAttachment: 'platform' as const,
			response: { clientDataJSON: b64url(clientDataJSON), authenticatorData: b64url(authData), signature: b64url(signature), userHandle: chosen.userHandle },
		}
	}
}
