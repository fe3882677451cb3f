import http from 'node:http'
import https from 'node:https'
import type { LookupFunction } from 'node:net'
import { Webhook } from 'standardwebhooks'
import { DestinationRefused, permittedAddresses, type DestinationPolicy } from './destination'

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
 * per secret), so any Standard Webhooks library verifies it. The connection goes only to addresses checked
 * just before (see `permittedAddresses`); redirects are not followed; the whole exchange has
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
			const addresses = await untilAborted(permittedAddresses(url, this.settings), deadline)
			const timestamp = new Date()
			const signature = message.secrets.map((secret) => new Webhook(secret).sign(message.id, timestamp, message.body)).join(' ')
			const headers = {
				'content-type': 'application/json',
				'user-agent': 'Latchkey-Webhooks/1',
				'webhook-id': message.id,
				'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
				'webhook-signature': signature,
			}
			const status = await this.post(url, addresses, headers, message.body, deadline)
			if (status >= 200 && status < 300) return outcome(status, null)
			if (status >= 300 && status < 400) return outcome(status, `HTTP ${status}: redirects are not followed`)
			return outcome(status, `HTTP ${status}`)
		} catch (error) {
			return outcome(null, describeFailure(error, this.settings.timeoutSeconds))
		}
	}

	/** The receiver's status, as soon as its headers arrive; its body is then read (up to a limit) and dropped. */
	private post(url: URL, addresses: Array<{ address: string; family: number }>, headers: Record<string, string>, body: string, deadline: AbortSignal) {
		const client = url.protocol === 'https:' ? https : http
		return new Promise<number>((resolve, reject) => {
			const request = client.request(
				url,
				{
					method: 'POST',
					headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
					// Connect to the addresses just checked, never to a second lookup's answer.
					lookup: ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
						const [first] = addresses
						if (options.all) callback(null, addresses)
						else callback(null, first?.address, first?.family)
					}) as unknown as LookupFunction,
					agent: false,
				},
				(response) => {
					resolve(response.statusCode ?? 0)
					let read = 0
					response.on('data', (chunk: Buffer) => {
						read += chunk.byteLength
						if (read > RESPONSE_READ_LIMIT) response.destroy()
					})
					response.on('error', () => {})
				},
			)
			const abort = () => request.destroy(new TimeoutError())
			deadline.addEventListener('abort', abort, { once: true })
			request.on('error', reject)
			request.on('close', () => deadline.removeEventListener('abort', abort))
			request.end(body)
		})
	}
}

/** `promise`, or a TimeoutError once `signal` aborts. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
	if (signal.aborted) return Promise.reject(new TimeoutError())
	return new Promise<T>((resolve, reject) => {
		const abort = () => reject(new TimeoutError())
		signal.addEventListener('abort', abort, { once: true })
		promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort))
	})
}

class TimeoutError extends Error {
	override readonly name = 'TimeoutError'
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
