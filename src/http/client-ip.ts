import type { Server } from 'bun'
import ipaddr from 'ipaddr.js'
import { LRUCache } from 'lru-cache'

export type ClientAddressResolver = (request: Request, server: Server<unknown> | null | undefined) => string | null

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number]

function parseRange(entry: string): Range {
	if (entry.includes('/')) return ipaddr.parseCIDR(entry)
	const address = ipaddr.parse(entry)
	return [address, address.kind() === 'ipv4' ? 32 : 128]
}

/** Parses a TRUST_PROXY list; throws on an entry that is not an IP or CIDR. */
export function parseTrustedProxies(list: string[]): Range[] {
	return list.map((entry) => {
		try {
			return parseRange(entry)
		} catch {
			throw new Error(`TRUST_PROXY: "${entry}" is not an IP address or CIDR range`)
		}
	})
}

// Parsing an address costs microseconds on every request; the same few peers come back all the time.
const canonicalForms = new LRUCache<string, { ip: string | null }>({ max: 4096 })
const canonical = (ip: string) => {
	let known = canonicalForms.get(ip)
	if (!known) canonicalForms.set(ip, (known = { ip: ipaddr.isValid(ip) ? ipaddr.process(ip).toString() : null }))
	return known.ip
}

/**
 * The client's address: the socket peer, unless that peer is a trusted proxy;
 * then the rightmost X-Forwarded-For address that is not one. The header is
 * never read when no proxies are configured. Under `app.handle` (no socket)
 * the missing peer counts as a trusted proxy only when proxies are configured.
 */
export function clientAddressResolver(trustProxy: string[]): ClientAddressResolver {
	const ranges = parseTrustedProxies(trustProxy)
	const trusted = (ip: string) => {
		const address = ipaddr.process(ip)
		return ranges.some(([range, bits]) => address.kind() === range.kind() && address.match(range, bits))
	}
	return (request, server) => {
		const peer = canonical(server?.requestIP(request)?.address ?? '')
		if (ranges.length === 0) return peer
		if (peer !== null && !trusted(peer)) return peer
		const hops = (request.headers.get('x-forwarded-for') ?? '').split(',').map((hop) => canonical(hop.trim()))
		for (let index = hops.length - 1; index >= 0; index--) {
			const hop = hops[index]
			if (hop === null || hop === undefined) break // a malformed hop ends what can be trusted
			if (!trusted(hop)) return hop
		}
		return peer
	}
}
