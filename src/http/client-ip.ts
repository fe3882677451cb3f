import { Elysia } from 'elysia'
import ipaddr from 'ipaddr.js'
import { LRUCache } from 'lru-cache'
import { parseTrustedProxies } from '../config/trust-proxy'
import { digestOf } from '../crypto/opaque-tokens'

/** Who is calling: the address recorded with sessions and audit events, and the key of its rate-limit budgets. */
export interface ClientAddress {
	/** Canonical IP of the client; null when it cannot be told (no socket peer, a malformed forwarded hop). */
	ip: string | null
	/** Budget key: the IPv4 address, or the IPv6 /64 (one subscriber's usual allocation). */
	key: string
}

/** Reads the socket peer of a request; Bun's server in production, a stand-in under `app.handle` in tests. */
export type PeerAddress = (request: Request) => string | null

interface Parsed {
	ip: string
	address: ipaddr.IPv4 | ipaddr.IPv6
	key: string
}

// Parsing an address costs microseconds on every request; the same few peers come back all the time.
const parsedForms = new LRUCache<string, { parsed: Parsed | null }>({ max: 4096 })

/** An address in canonical form (IPv4-mapped IPv6 as IPv4), with its budget key; null when malformed. */
function parse(text: string): Parsed | null {
	let known = parsedForms.get(text)
	if (!known) {
		let parsed: Parsed | null = null
		if (ipaddr.isValid(text)) {
			const address = ipaddr.process(text)
			const ip = address.toString()
			const key = address.kind() === 'ipv6' ? `${ipaddr.IPv6.networkAddressFromCIDR(`${ip}/64`).toString()}/64` : ip
			parsed = { ip, address, key }
		}
		parsedForms.set(text, (known = { parsed }))
	}
	return known.parsed
}

const UNKNOWN: ClientAddress = { ip: null, key: 'unknown' }

/**
 * The client's address: the socket peer, unless that peer is a trusted
 * proxy; then the rightmost X-Forwarded-For hop that is not one. The header
 * is never read when no proxies are configured, nor when the peer is not a
 * listed proxy. A malformed hop is where trust ends: it is the client (an
 * address nobody can be held to, so it gets a budget of its own text), never
 * the proxy. No peer at all is an unknown client, never a trusted one.
 */
function clientAddressResolver(trustProxy: string[]) {
	const ranges = parseTrustedProxies(trustProxy)
	const trusted = ({ address }: Parsed) =>
		ranges.some(([range, bits]) => address.kind() === range.kind() && address.match(range, bits))
	return (request: Request, peerText: string | null): ClientAddress => {
		const peer = peerText === null ? null : parse(peerText)
		if (peer === null) return UNKNOWN
		if (ranges.length === 0 || !trusted(peer)) return peer
		const header = request.headers.get('x-forwarded-for')
		if (header === null || header.trim() === '') return peer
		const hops = header.split(',')
		for (let index = hops.length - 1; index >= 0; index--) {
			const text = (hops[index] ?? '').trim()
			const hop = parse(text)
			if (hop === null) return { ip: null, key: `malformed:${digestOf(text).slice(0, 32)}` }
			if (!trusted(hop)) return hop
		}
		// Every hop is a trusted proxy: the request started at the leftmost one.
		return parse((hops[0] ?? '').trim()) ?? peer
	}
}

const addresses = new WeakMap<Request, ClientAddress>()

/** The address resolved for this request by the `clientAddresses` plugin. */
export const clientOf = (request: Request): ClientAddress => addresses.get(request) ?? UNKNOWN

/**
 * Resolves the client once per request, first thing, from the real socket
 * (a sub-app's own `server` is null, so whatever needs the address reads it
 * here rather than asking the server again).
 */
export const clientAddresses = (trustProxy: string[], peerAddress?: PeerAddress) => {
	const resolve = clientAddressResolver(trustProxy)
	return new Elysia({ name: 'client-addresses', seed: trustProxy }).onRequest(({ request, server }) => {
		const peer = peerAddress ? peerAddress(request) : (server?.requestIP(request)?.address ?? null)
		addresses.set(request, resolve(request, peer))
	})
}
