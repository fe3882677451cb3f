/** A port nothing listens on yet, for a server whose address another party must know before it starts (an issuer, a redirect URI). */
export async function freePort(): Promise<number> {
	const probe = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() })
	const port = probe.port as number
	await probe.stop(true)
	return port
}
