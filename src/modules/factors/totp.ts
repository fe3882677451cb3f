import { Secret, TOTP } from 'otpauth'
import QRCode from 'qrcode'

/** RFC 6238 defaults, which every authenticator app assumes: SHA-1, 6 digits, 30-second steps. */
const PERIOD = 30
const DIGITS = 6

const totpFor = (secret: string, label = '', issuer = '') =>
	new TOTP({ issuer, label, algorithm: 'SHA1', digits: DIGITS, period: PERIOD, secret: Secret.fromBase32(secret) })

/** A new secret: 160 random bits (RFC 4226's recommended length), base32 as apps expect. */
export const newTotpSecret = () => new Secret({ size: 20 }).base32

/** The `otpauth://totp/…` URI an authenticator app scans. */
export const totpUri = (secret: string, issuer: string, account: string) => totpFor(secret, account, issuer).toString()

/** The URI as an SVG QR code, for a frontend to show as it is. */
export const totpQrCodeSvg = (uri: string) => QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 })

/**
 * The time step a code belongs to, when it is the code of the current step or of the one before or after
 * (clock drift, a code typed as it changed); undefined otherwise. The step is what replay protection stores.
 */
export function matchingStep(secret: string, code: string, now = Date.now()): number | undefined {
	if (!/^\d{6}$/.test(code)) return undefined
	const delta = totpFor(secret).validate({ token: code, timestamp: now, window: 1 })
	return delta === null ? undefined : TOTP.counter({ period: PERIOD, timestamp: now }) + delta
}
