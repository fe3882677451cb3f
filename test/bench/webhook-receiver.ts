/**
 * The webhook receiver of the bench, in a process of its own (as an app receiving Latchkey's webhooks
 * would be): it answers every POST 204 at once and keeps, for each, the `data.email` that the bench put
 * in the event and the wall-clock time of its arrival. `GET /received?from=n` hands them over.
 * Prints `{"port":…}` when it listens.
 */
const arrivals: string[] = []
const server = Bun.serve({
	hostname: '127.0.0.1',
	port: 0,
	async fetch(request) {
		if (request.method === 'POST') {
			const body = (await request.json()) as { data?: { email?: string } }
			arrivals.push(`${body.data?.email ?? ''} ${Date.now()} ${request.headers.get('webhook-id') ?? ''}`)
			return new Response(null, { status: 204 })
		}
		const from = Number(new URL(request.url).searchParams.get('from') ?? 0)
		return new Response(arrivals.slice(from).join('\n'))
	},
})
console.log(JSON.stringify({ port: server.port }))
