import { expect } from 'bun:test'
import { Value } from '@sinclair/typebox/value'
import { Webhook } from 'standardwebhooks'
import { WEBHOOK_PAYLOADS, webhookBody } from '../../src/modules/webhooks/model'

/** One POST as a receiver saw it. */
export interface ReceivedDelivery {
	id: string
	timestamp: string
	signature: string
	body: string
	event: { type: string; timestamp: string; data: Record<string, any> }
	receivedAt: number
}

/** What the receiver answers next: a status, a hang (no answer at all), or a redirect elsewhere. */
export type Reply = number | 'hang' | { redirectTo: string }

/**
 * A real HTTP receiver on loopback, as an app built on Latchkey would run: it records every delivery and
 * answers as told (`replies` in turn, then `otherwise`). `port` is kept across stop/start (down, then up).
 */
export class WebhookReceiver {
	readonly received: ReceivedDelivery[] = []
	replies: Reply[] = []
	otherwise: Reply = 204
	/** The most requests this receiver held unanswered at once. */
	mostHanging = 0
	private server: ReturnType<typeof Bun.serve> | undefined
	private hanging: Array<() => void> = []

	private constructor(public port: number) {}

	static async start(port = 0): Promise<WebhookReceiver> {
		const receiver = new WebhookReceiver(port)
		receiver.listen()
		return receiver
	}

	get url() {
		return `http://127.0.0.1:${this.port}/hooks`
	}

	listen() {
		this.server = Bun.serve({
			hostname: '127.0.0.1',
			port: this.port,
			idleTimeout: 0,
			fetch: async (request) => {
				const body = await request.text()
				const reply = this.replies.shift() ?? this.otherwise
				if (reply === 'hang')
					return new Promise<Response>((resolve) => {
						const release = () => resolve(new Response(null, { status: 204 }))
						this.hanging.push(release)
						this.mostHanging = Math.max(this.mostHanging, this.hanging.length)
						// Until the client gives up: its closed connection ends the request.
						request.signal.addEventListener('abort', () => {
							this.hanging = this.hanging.filter((waiting) => waiting !== release)
							release()
						})
					})
				this.received.push({
					id: request.headers.get('webhook-id') ?? '',
					timestamp: request.headers.get('webhook-timestamp') ?? '',
					signature: request.headers.get('webhook-signature') ?? '',
					body,
					event: JSON.parse(body),
					receivedAt: Date.now(),
				})
				if (typeof reply === 'object') return new Response(null, { status: 302, headers: { location: reply.redirectTo } })
				return new Response(reply >= 200 && reply < 300 ? null : 'nope', { status: reply })
			},
		})
		this.port = this.server.port ?? this.port
	}

	/** Answers every request held so far (204), as a slow receiver does at last; they are not recorded. */
	answerHanging() {
		for (const release of this.hanging.splice(0)) release()
	}

	/** Down: the port refuses connections until `listen` again. */
	async stop() {
		for (const release of this.hanging.splice(0)) release()
		await this.server?.stop(true)
		this.server = undefined
	}

	/** Deliveries of events of `type` (answered with 2xx or not). */
	ofType(type: string) {
		return this.received.filter((delivery) => delivery.event.type === type)
	}

	/** Waits until `count` deliveries match. */
	async waitFor(match: (delivery: ReceivedDelivery) => boolean, count = 1, timeoutMs = 20_000): Promise<ReceivedDelivery[]> {
		const deadline = Date.now() + timeoutMs
		for (;;) {
			const found = this.received.filter(match)
			if (found.length >= count) return found
			if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${count} deliveries; have ${found.length} of ${this.received.length}: ${this.received.map((d) => d.event.type).join(', ')}`)
			await Bun.sleep(20)
		}
	}

	/**
	 * The `count` deliveries of `type` whose data `about` picks, waited for (and a moment more, to see that none
	 * comes twice), each verified with `secret` as a receiver would and held to the payload the OpenAPI document
	 * declares for its type.
	 */
	async documentedEvents(type: string, about: (data: Record<string, any>) => boolean, count: number, secret: string): Promise<Array<ReceivedDelivery['event']>> {
		const matches = (delivery: ReceivedDelivery) => delivery.event.type === type && about(delivery.event.data)
		const found = await this.waitFor(matches, count)
		await Bun.sleep(50)
		expect(this.received.filter(matches)).toHaveLength(count)
		// In the order they were emitted, not as they arrived: deliveries run in parallel slots, so arrival order is
		// anyone's (seen on PostgreSQL). The event's timestamp, then its id (a UUIDv7, in order within a millisecond).
		const emitted = (delivery: ReceivedDelivery) => `${delivery.event.timestamp} ${delivery.id}`
		return found.toSorted((a, b) => emitted(a).localeCompare(emitted(b))).map((delivery) => {
			const event = verified(delivery, secret)
			expect([...Value.Errors(webhookBody(type as keyof typeof WEBHOOK_PAYLOADS), event)].map(({ path, message }) => `${path} ${message}`)).toEqual([])
			return event
		})
	}
}

/** Verifies a delivery as a receiver would, with the `standardwebhooks` package; returns the parsed event. */
export function verified(delivery: ReceivedDelivery, secret: string) {
	return new Webhook(secret).verify(delivery.body, {
		'webhook-id': delivery.id,
		'webhook-timestamp': delivery.timestamp,
		'webhook-signature': delivery.signature,
	}) as ReceivedDelivery['event']
}

/** The verification fails with this secret. */
export function expectNotVerified(delivery: ReceivedDelivery, secret: string) {
	expect(() => verified(delivery, secret)).toThrow()
}
