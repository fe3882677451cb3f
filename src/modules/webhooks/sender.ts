import { Webhook } from 'standardwebhooks'
import { DestinationRefused, type DestinationPolicy } from '../../http/destination'
import { requestPinned, TimeoutError } from '../../http/outgoing'

/** One try at a delivery, as the delivery log shows it. */
export interface AttemptOutcome {
	statusCode: number | null
	succeeded: boolean
	/** Short words for the admin (never the receiver's body, never a stack). */
	error: string | null
	durationMs: number
}

export interface SignedMessage {
	/** `webhook-id`: the event's id, the same at every attempt (receivers deduplicate on it). */
	id: string
	body: string
	/** Every secret that signs now: the current one, and the previous one during its 24 hours. */
	secrets: string[]
}

export interface SenderSettings extends DestinationPolicy {
	timeoutSeconds: number
}

/** The receiver's body is read up to this much and dropped: it is never stored, and a huge one cannot tie us up. */
const RESPONSE_READ_LIMIT = 16 * 1024

/**
 * Posts a signed event to a receiver, once. The signature is the `standardwebhooks` package's (one `v1,…`
 * per secret), so any Standard Webhooks library verifies it. The request is `requestPinned`'s: the connection
 * goes only to addresses checked just before, redirects are not followed, and the whole exchange has
 * `timeoutSeconds`.
 */
export class WebhookSender {
	constructor(private readonly settings: SenderSettings) {}

	async send(target: string, message: SignedMessage): Promise<AttemptOutcome> {
		const started = performance.now()
		const outcome = (statusCode: number | null, error: string | null): AttemptOutcome => ({
			statusCode,
			succeeded: error === null,
			error,
			durationMs: Math.round(performance.now() - started),
		})
		// One deadline for the whole attempt, the lookup included: a slow resolver holds no worker longer.
		const deadline = AbortSignal.timeout(this.settings.timeoutSeconds * 1000)
		try {
			const url = new URL(target)
			const timestamp = new Date()
			const signature = message.secrets.map((secret) => new Webhook(secret).sign(message.id, timestamp, message.body)).join(' ')
			const headers = {
				'content-type': 'application/json',
				'user-agent': 'Latchkey-Webhooks/1',
				'webhook-id': message.id,
				'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
				'webhook-signature': signature,
			}
			const response = await requestPinned(url, { method: 'POST', headers, body: message.body }, this.settings, deadline)
			const status = response.statusCode ?? 0
			// The receiver's body is read (up to a limit) and dropped, its status is all that counts.
			let read = 0
			response.on('data', (chunk: Buffer) => {
				read += chunk.byteLength
				if (read > RESPONSE_READ_LIMIT) response.destroy()
			})
			response.on('error', () => {})
			if (status >= 200 && status < 300) return outcome(status, null)
			if (status >= 300 && status < 400) return outcome(status, `HTTP ${status}: redirects are not followed`)
			return outcome(status, `HTTP ${status}`)
		} catch (error) {
			return outcome(null, describeFailure(error, this.settings.timeoutSeconds))
		}
	}
}

const CONNECTION_ERRORS: Record<string, string> = {
	ECONNREFUSED: 'connection refused',
	ECONNRESET: 'connection reset',
	EPIPE: 'connection reset',
	ENOTFOUND: 'the host does not resolve',
	EAI_AGAIN: 'the host does not resolve (temporary)',
	EHOSTUNREACH: 'host unreachable',
	ENETUNREACH: 'network unreachable',
	ETIMEDOUT: 'connection timed out',
	CERT_HAS_EXPIRED: 'TLS certificate expired',
	DEPTH_ZERO_SELF_SIGNED_CERT: 'TLS certificate not trusted',
	SELF_SIGNED_CERT_IN_CHAIN: 'TLS certificate not trusted',
	UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'TLS certificate not trusted',
	ERR_TLS_CERT_ALTNAME_INVALID: 'TLS certificate does not match the host',
}

/** What went wrong, in words fit for the delivery log: no addresses, no driver text. */
function describeFailure(error: unknown, timeoutSeconds: number): string {
	if (error instanceof DestinationRefused) return `destination refused: ${error.message}`
	if (error instanceof TimeoutError) return `no answer within ${timeoutSeconds} s`
	const code = (error as { code?: unknown }).code
	if (typeof code === 'string' && code in CONNECTION_ERRORS) return CONNECTION_ERRORS[code] as string
	return 'connection failed'
}
