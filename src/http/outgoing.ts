import http, { type IncomingMessage } from 'node:http'
import https from 'node:https'
import type { LookupFunction } from 'node:net'
import { checkUrlForm, permittedAddresses, type DestinationPolicy } from './destination'

/*
 * Latchkey's one way out to a URL someone else chose (webhooks, the OpenID Provider's requests to its clients):
 * the host is resolved and judged (destination.ts), the connection goes only to the addresses judged, no
 * redirect is followed, and one deadline covers the lookup, the connection and the answer.
 */

/** The deadline passed before the exchange ended. */
export class TimeoutError extends Error {
	override readonly name = 'TimeoutError'
}

/** The answer was longer than its reader allows. */
export class ResponseTooLarge extends Error {
	override readonly name = 'ResponseTooLarge'
}

export interface OutgoingRequest {
	method: string
	headers: Record<string, string>
	body?: string | Uint8Array
}

/**
 * Sends one request to `url` and resolves with the response as soon as its headers arrive; the response is
 * the caller's to read (or drop) before `deadline`, which ends the exchange wherever it is. Throws
 * `DestinationRefused` before any connection when the host resolves where `policy` forbids.
 */
export async function requestPinned(url: URL, request: OutgoingRequest, policy: DestinationPolicy, deadline: AbortSignal): Promise<IncomingMessage> {
	const addresses = await untilAborted(permittedAddresses(url, policy), deadline)
	const client = url.protocol === 'https:' ? https : http
	const body = request.body ?? ''
	const headers = request.body === undefined ? request.headers : { ...request.headers, 'content-length': String(Buffer.byteLength(body)) }
	return new Promise<IncomingMessage>((resolve, reject) => {
		const outgoing = client.request(
			url,
			{
				method: request.method,
				headers,
				// Connect to the addresses just checked, never to a second lookup's answer (DNS rebinding).
				lookup: ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
					const [first] = addresses
					if (options.all) callback(null, addresses)
					else callback(null, first?.address, first?.family)
				}) as unknown as LookupFunction,
				agent: false,
			},
			resolve,
		)
		const abort = () => outgoing.destroy(new TimeoutError())
		if (deadline.aborted) abort()
		deadline.addEventListener('abort', abort, { once: true })
		outgoing.on('error', reject)
		outgoing.on('close', () => deadline.removeEventListener('abort', abort))
		outgoing.end(body)
	})
}

/** `promise`, or a TimeoutError once `signal` aborts. */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
	if (signal.aborted) return Promise.reject(new TimeoutError())
	return new Promise<T>((resolve, reject) => {
		const abort = () => reject(new TimeoutError())
		signal.addEventListener('abort', abort, { once: true })
		promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort))
	})
}

export interface GuardedFetchSettings extends DestinationPolicy {
	/** The longest a whole exchange may take, whatever the caller's own signal allows. */
	timeoutSeconds: number
	/** The most of an answer's body that is read; past it, reading fails with ResponseTooLarge. */
	responseLimitBytes: number
}

/** Statuses whose response has no body (the Response constructor refuses one). */
const NULL_BODY_STATUSES = new Set([204, 205, 304])

/**
 * A `fetch` for libraries that make their own outgoing requests (oidc-provider's `fetch` option): the same
 * checks and pinning as webhooks, the URL's form included. Only what those libraries use is honoured: method,
 * headers, body and signal; redirects are never followed (a 3xx is answered as it is), and a `dispatcher`
 * (undici's own guard, which Bun's fetch ignores) means nothing here.
 */
export function guardedFetch(settings: GuardedFetchSettings) {
	return async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
		const url = checkUrlForm(input instanceof Request ? input.url : String(input), settings)
		// A Request gives the body its bytes and its content type (a URLSearchParams body is a form).
		const request = new Request(input instanceof Request ? input : new Request(url.href), { method: init.method, headers: init.headers, body: init.body, signal: init.signal })
		const deadline = AbortSignal.any([AbortSignal.timeout(settings.timeoutSeconds * 1000), request.signal])
		const body = request.body === null ? undefined : new Uint8Array(await request.arrayBuffer())
		const response = await requestPinned(url, { method: request.method, headers: Object.fromEntries(request.headers), body }, settings, deadline)
		const status = response.statusCode ?? 0
		if (status < 200 || status > 599) {
			response.destroy()
			throw new Error(`unexpected HTTP status ${status}`)
		}
		const headers = new Headers()
		for (let i = 0; i + 1 < response.rawHeaders.length; i += 2) headers.append(response.rawHeaders[i] as string, response.rawHeaders[i + 1] as string)
		if (NULL_BODY_STATUSES.has(status)) {
			response.resume()
			return new Response(null, { status, headers })
		}
		return new Response(limitedBody(response, settings.responseLimitBytes), { status, headers })
	}
}

/** The response's body as a stream that fails once more than `limit` bytes came (and then drops the connection). */
function limitedBody(response: IncomingMessage, limit: number): ReadableStream<Uint8Array> {
	let read = 0
	let settled = false
	return new ReadableStream<Uint8Array>({
		start(controller) {
			const fail = (error: Error) => {
				if (settled) return
				settled = true
				controller.error(error)
				response.destroy()
			}
			response.on('data', (chunk: Buffer) => {
				if (settled) return
				read += chunk.byteLength
				if (read > limit) fail(new ResponseTooLarge(`the answer is longer than ${limit} bytes`))
				else controller.enqueue(new Uint8Array(chunk))
			})
			response.on('end', () => {
				if (settled) return
				settled = true
				controller.close()
			})
			response.on('error', fail)
			// Destroyed before its end (the deadline, a reset): the reader learns it rather than waiting.
			response.on('close', () => fail(new Error('the connection closed before the answer ended')))
		},
		cancel() {
			settled = true
			response.destroy()
		},
	})
}
