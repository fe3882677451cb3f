import ipaddr from 'ipaddr.js'
import { lookup } from 'node:dns/promises'
import { isIP } from 'node:net'

/** A host's addresses, as the system resolver gives them (replaceable in tests to play DNS rebinding). */
export type ResolveHost = (hostname: string) => Promise<Array<{ address: string; family: number }>>

export const systemResolver: ResolveHost = (hostname) => lookup(hostname, { all: true, verbatim: true })

export interface DestinationPolicy {
	/** `http://` receivers (development and tests); `https://` only otherwise. */
	allowHttp: boolean
	/** Loopback, private, link-local and other non-public addresses (WEBHOOK_ALLOW_PRIVATE_NETWORKS). */
	allowPrivateNetworks: boolean
	resolve: ResolveHost
}

/** Why a URL may not receive webhooks; the words are shown to admins as they are. */
export class DestinationRefused extends Error {
	override readonly name = 'DestinationRefused'
}

/**
 * Only public unicast addresses: ipaddr.js names every special range (loopback, private, link-local with
 * the cloud metadata address 169.254.169.254, unique-local, CGNAT, multicast, reserved, …); an IPv4 address
 * mapped into IPv6 is judged as the IPv4 address it is.
 */
export function isPublicAddress(address: string): boolean {
	if (!ipaddr.isValid(address)) return false
	const parsed = ipaddr.process(address)
	// IPv4-compatible IPv6 (::a.b.c.d, deprecated) reaches the IPv4 address where sit or NAT64 tunnels exist.
	if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).parts.slice(0, 6).every((part) => part === 0)) return false
	return parsed.range() === 'unicast'
}

/** Cloud instance metadata (credentials live there): never a receiver, private networks allowed or not. */
const METADATA_ADDRESSES = new Set(['169.254.169.254', 'fd00:ec2::254', '100.100.100.200'].map((address) => ipaddr.process(address).toNormalizedString()))
const isMetadataAddress = (address: string) => ipaddr.isValid(address) && METADATA_ADDRESSES.has(ipaddr.process(address).toNormalizedString())

/** The scheme and form of a receiver's URL, before any lookup. */
export function checkUrlForm(raw: string, policy: Pick<DestinationPolicy, 'allowHttp'>): URL {
	let url: URL
	try {
		url = new URL(raw)
	} catch {
		throw new DestinationRefused('not an absolute URL')
	}
	if (url.protocol !== 'https:' && !(url.protocol === 'http:' && policy.allowHttp))
		throw new DestinationRefused(policy.allowHttp ? 'must be an http or https URL' : 'must be an https URL')
	if (url.username || url.password) throw new DestinationRefused('must not carry credentials')
	if (url.hash) throw new DestinationRefused('must not have a fragment')
	return url
}

/**
 * The addresses a request to `url` may connect to: all of the host's, each of them public (unless private
 * networks are allowed). Called at every attempt, and the request then connects only to what it returns,
 * so a name that resolves elsewhere the second time (DNS rebinding) gains nothing.
 */
export async function permittedAddresses(url: URL, policy: DestinationPolicy): Promise<Array<{ address: string; family: number }>> {
	const host = url.hostname.replace(/^\[(.*)\]$/, '$1')
	const addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await policy.resolve(host)
	if (addresses.length === 0) throw new DestinationRefused('the host has no address')
	if (addresses.some(({ address }) => isMetadataAddress(address))) throw new DestinationRefused('the host resolves to a cloud metadata address')
	if (!policy.allowPrivateNetworks && addresses.some(({ address }) => !isPublicAddress(address)))
		throw new DestinationRefused('the host resolves to a loopback, private or link-local address')
	return addresses
}
