import { t } from 'elysia'
import type { FactorRow } from '../../db/schema'
import { IssuedId } from '../../http/ids'

const Timestamp = t.String({ format: 'date-time', examples: ['2026-01-01T12:00:00.000Z'] })
const Base64Url = (maxLength: number) => t.String({ pattern: '^[A-Za-z0-9_-]*$', maxLength })
const Requirement = t.Union([t.Literal('discouraged'), t.Literal('preferred'), t.Literal('required')])
const Attachment = t.Union([t.Literal('platform'), t.Literal('cross-platform')])

/*
 * WebAuthn's JSON shapes, as @simplewebauthn/server writes the options and @simplewebauthn/browser sends the
 * responses: their static types are what `startRegistration` / `startAuthentication` take and give, so a
 * frontend passes them through the typed client as they are. Members the libraries may add later are let
 * through (no `additionalProperties: false`): the server library checks the responses, and an option it adds
 * must not turn an answer into a 500.
 */

/** Extension outputs a browser reports; others (`prf`, whose values are binary in the browser's types) are let through unread. */
const ExtensionOutputs = t.Object(
	{
		appid: t.Optional(t.Boolean()),
		credProps: t.Optional(t.Object({ rk: t.Optional(t.Boolean()) })),
		hmacCreateSecret: t.Optional(t.Boolean()),
	},
	{ description: 'client extension results (AuthenticationExtensionsClientOutputs)' },
)
/** Extension inputs the server may ask for (it asks for `credProps`). */
const ExtensionInputs = t.Object(
	{
		appid: t.Optional(t.String()),
		credProps: t.Optional(t.Boolean()),
		hmacCreateSecret: t.Optional(t.Boolean()),
		minPinLength: t.Optional(t.Boolean()),
	},
	{ description: 'AuthenticationExtensionsClientInputs' },
)
const CredentialDescriptor = t.Object({
	id: Base64Url(1024),
	// A string in both libraries' types (PublicKeyCredentialDescriptorJSON); it is `public-key`.
	type: t.String({ examples: ['public-key'] }),
	transports: t.Optional(t.Array(t.String({ description: 'an AuthenticatorTransport: usb, nfc, ble, hybrid, internal, …' }))),
})
const Hints = t.Array(t.Union([t.Literal('hybrid'), t.Literal('security-key'), t.Literal('client-device')]))

/** PublicKeyCredentialCreationOptionsJSON: `startRegistration({ optionsJSON })` takes it as it is. */
const CreationOptions = t.Object(
	{
		rp: t.Object({ name: t.String(), id: t.Optional(t.String()) }),
		user: t.Object({ id: Base64Url(1024), name: t.String(), displayName: t.String() }),
		challenge: Base64Url(1024),
		pubKeyCredParams: t.Array(t.Object({ alg: t.Integer({ description: 'a COSE algorithm identifier' }), type: t.Literal('public-key') })),
		timeout: t.Optional(t.Integer({ description: 'milliseconds' })),
		excludeCredentials: t.Optional(t.Array(CredentialDescriptor)),
		authenticatorSelection: t.Optional(
			t.Object({
				authenticatorAttachment: t.Optional(Attachment),
				requireResidentKey: t.Optional(t.Boolean()),
				residentKey: t.Optional(Requirement),
				userVerification: t.Optional(Requirement),
			}),
		),
		hints: t.Optional(Hints),
		attestation: t.Optional(t.Union([t.Literal('none'), t.Literal('indirect'), t.Literal('direct'), t.Literal('enterprise')])),
		extensions: t.Optional(ExtensionInputs),
	},
	{ description: 'PublicKeyCredentialCreationOptionsJSON: pass to `startRegistration({ optionsJSON })` of @simplewebauthn/browser as is' },
)

/** PublicKeyCredentialRequestOptionsJSON: `startAuthentication({ optionsJSON })` takes it as it is. */
const RequestOptions = t.Object(
	{
		challenge: Base64Url(1024),
		timeout: t.Optional(t.Integer({ description: 'milliseconds' })),
		rpId: t.Optional(t.String()),
		allowCredentials: t.Optional(t.Array(CredentialDescriptor)),
		userVerification: t.Optional(Requirement),
		hints: t.Optional(Hints),
		extensions: t.Optional(ExtensionInputs),
	},
	{ description: 'PublicKeyCredentialRequestOptionsJSON: pass to `startAuthentication({ optionsJSON })` of @simplewebauthn/browser as is' },
)

const credentialFields = {
	id: Base64Url(1024),
	rawId: Base64Url(1024),
	type: t.Literal('public-key'),
	clientExtensionResults: ExtensionOutputs,
	authenticatorAttachment: t.Optional(Attachment),
}

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

	export const webauthnEnrolment = t.Object({ factor, options: CreationOptions })

	/** RegistrationResponseJSON, as `startRegistration` gives it. */
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

	/** AuthenticationResponseJSON, as `startAuthentication` gives it. */
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

	export const webauthnOptions = RequestOptions

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
