import { t } from 'elysia'
import type { FactorRow } from '../../db/schema'
import { IssuedId } from '../../http/ids'

const Timestamp = t.String({ format: 'date-time', examples: ['2026-01-01T12:00:00.000Z'] })
const Base64Url = (maxLength: number) => t.String({ pattern: '^[A-Za-z0-9_-]*$', maxLength })
/** WebAuthn's JSON shapes (as @simplewebauthn/browser sends them), bounded in size; the library checks the rest. */
const Extensions = t.Record(t.String({ maxLength: 64 }), t.Unknown(), { description: 'client extension results' })
const credentialFields = {
	id: Base64Url(1024),
	rawId: Base64Url(1024),
	type: t.Literal('public-key'),
	clientExtensionResults: Extensions,
	authenticatorAttachment: t.Optional(t.Union([t.Literal('platform'), t.Literal('cross-platform')])),
}
/** The options an authenticator is called with, passed through from @simplewebauthn/server: `startRegistration` / `startAuthentication` take them as they are. */
const WebAuthnOptions = t.Record(t.String(), t.Unknown(), {
	description: 'PublicKeyCredentialCreationOptionsJSON or PublicKeyCredentialRequestOptionsJSON: pass to @simplewebauthn/browser as is',
})

export namespace FactorModel {
	export const factor = t.Object({
		id: IssuedId(),
		type: t.Union([t.Literal('totp'), t.Literal('webauthn')]),
		name: t.String(),
		status: t.Union([t.Literal('pending'), t.Literal('active')], { description: '`pending` until a code or an attestation proves it' }),
		createdAt: Timestamp,
		lastUsedAt: t.Union([Timestamp, t.Null()]),
	})

	export const list = t.Object({ items: t.Array(factor) })

	export const create = t.Object({
		type: t.Union([t.Literal('totp'), t.Literal('webauthn')]),
		name: t.Optional(t.String({ minLength: 1, maxLength: 100, examples: ['Phone'] })),
	})

	export const totpEnrolment = t.Object({
		factor,
		secret: t.String({ description: 'base32; for typing into an app that cannot scan' }),
		otpauthUri: t.String({ description: '`otpauth://totp/…` (SHA-1, 6 digits, 30 s)' }),
		qrCodeSvg: t.String({ description: 'the URI as an SVG QR code' }),
	})

	export const webauthnEnrolment = t.Object({ factor, options: WebAuthnOptions })

	export const registrationResponse = t.Object({
		...credentialFields,
		response: t.Object(
			{
				clientDataJSON: Base64Url(16_384),
				attestationObject: Base64Url(16_384),
				authenticatorData: t.Optional(Base64Url(16_384)),
				transports: t.Optional(t.Array(t.String({ maxLength: 32 }), { maxItems: 10 })),
				publicKeyAlgorithm: t.Optional(t.Integer()),
				publicKey: t.Optional(Base64Url(16_384)),
			},
			{ additionalProperties: false },
		),
	})

	export const authenticationResponse = t.Object({
		...credentialFields,
		response: t.Object(
			{
				clientDataJSON: Base64Url(16_384),
				authenticatorData: Base64Url(16_384),
				signature: Base64Url(16_384),
				userHandle: t.Optional(Base64Url(1024)),
			},
			{ additionalProperties: false },
		),
	})

	export const activation = t.Object({
		code: t.Optional(t.String({ maxLength: 16, description: 'TOTP: the 6-digit code the app shows now', examples: ['123456'] })),
		response: t.Optional(registrationResponse),
	})

	export const activated = t.Object({
		factor,
		recoveryCodes: t.Optional(t.Array(t.String(), { description: 'with the account’s first factor only: 10 single-use codes, shown this once' })),
	})

	export const recoveryCodes = t.Object({ recoveryCodes: t.Array(t.String(), { description: '10 single-use codes, shown this once; the old set is void' }) })

	export const mfa = t.Union([
		t.Object(
			{
				mfaToken: t.String({ minLength: 1, maxLength: 128 }),
				method: t.Union([t.Literal('totp'), t.Literal('recovery-code')]),
				code: t.String({ minLength: 1, maxLength: 64, examples: ['123456'] }),
			},
			{ additionalProperties: false },
		),
		t.Object({ mfaToken: t.String({ minLength: 1, maxLength: 128 }), method: t.Literal('webauthn'), response: authenticationResponse }, { additionalProperties: false }),
	])

	export const mfaChallengeRequest = t.Object({ mfaToken: t.String({ minLength: 1, maxLength: 128 }) })

	export const passkey = t.Object({ response: authenticationResponse })

	export const webauthnOptions = WebAuthnOptions

	export const secondFactorOwed = t.Object({
		mfaRequired: t.Literal(true, { description: 'always `true`: tell this answer from the tokens' }),
		mfaToken: t.String({ description: 'single use, 5 minutes; give it to POST /auth/mfa with a code or passkey' }),
		methods: t.Array(t.Union([t.Literal('totp'), t.Literal('webauthn'), t.Literal('recovery-code')])),
	})
}

export const toFactorResource = (row: FactorRow): typeof FactorModel.factor.static => ({
	id: row.id,
	type: row.type,
	name: row.name,
	status: row.status,
	createdAt: row.createdAt.toISOString(),
	lastUsedAt: row.lastUsedAt?.toISOString() ?? null,
})
