import ipaddr from 'ipaddr.js'

/** An address range of TRUST_PROXY: a network address and its prefix length. */
export type ProxyRange = [ipaddr.IPv4 | ipaddr.IPv6, number]

function parseRange(entry: string): ProxyRange {
	if (entry.includes('/')) return ipaddr.parseCIDR(entry)
	const address = ipaddr.parse(entry)
	return [address, address.kind() === 'ipv4' ? 32 : 128]
}

/** Parses a TRUST_PROXY list; throws on an entry that is not an IP or CIDR. */
export function parseTrustedProxies(list: string[]): ProxyRange[] {
	return list.map((entry) => {
		try {
			return parseRange(entry)
		} catch {
			throw new Error(`TRUST_PROXY: "${entry}" is not an IP address or CIDR range`)
		}
	})
}
