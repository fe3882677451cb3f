import type { Socket, TCPSocketListener } from 'bun'

interface Pipe {
	upstream?: Socket<undefined>
	pending: Uint8Array[]
}

/**
 * A TCP proxy in front of the database that a test can cut and restore,
 * to play "the database went away" without touching the real server.
 */
export class TcpProxy {
	private listener?: TCPSocketListener<Pipe>
	private readonly clients = new Set<Socket<Pipe>>()
	private trap: { match: string; downForMs: number } | undefined
	private restart: Timer | undefined
	port = 0
	/** How many times a trap set by `cutAt` went off. */
	sprung = 0

	constructor(private readonly target: { hostname: string; port: number }) {}

	start(): this {
		const proxy = this
		const { target, clients } = this
		this.listener = Bun.listen<Pipe>({
			hostname: '127.0.0.1',
			port: this.port,
			socket: {
				open(client) {
					client.data = { pending: [] }
					clients.add(client)
					void Bun.connect({
						...target,
						socket: {
							data: (_, chunk) => void client.write(chunk),
							close: () => void client.end(),
							error: () => void client.end(),
						},
					}).then(
						(upstream) => {
							client.data.upstream = upstream
							for (const chunk of client.data.pending) upstream.write(chunk)
							client.data.pending = []
						},
						() => void client.end(),
					)
				},
				data(client, chunk) {
					const trap = proxy.trap
					if (trap && Buffer.from(chunk).includes(trap.match)) {
						proxy.trap = undefined
						proxy.sprung++
						proxy.cut()
						proxy.restart = setTimeout(() => proxy.start(), trap.downForMs)
						return
					}
					if (client.data.upstream) client.data.upstream.write(chunk)
					else client.data.pending.push(new Uint8Array(chunk))
				},
				close(client) {
					clients.delete(client)
					client.data.upstream?.end()
				},
			},
		})
		this.port = this.listener.port
		return this
	}

	/**
	 * The next time a client sends bytes containing `match` (a statement's text), they go nowhere: every connection is
	 * dropped and nothing listens for `downForMs`, as a server that went away at that very moment and came back.
	 */
	cutAt(match: string, downForMs: number): this {
		this.trap = { match, downForMs }
		return this
	}

	/** Stops listening and drops every open connection, as a crashed server would. */
	cut() {
		clearTimeout(this.restart)
		this.listener?.stop(true)
		for (const client of this.clients) {
			client.data.upstream?.terminate()
			client.terminate()
		}
		this.clients.clear()
	}
}
