import ipaddr from 'ipaddr.js'
import { lookup } from 'node:dns/promises'
import { isIP } from 'node:net'

/** A host's addresses, as the system resolver gives them (replaceable in tests to play DNS rebinding). */
export type ResolveHost = (hostname: string) => Promise<Array<{ address: string; family: number }>>

export const systemResolver: ResolveHost = (hostname) => lookup(hostname, { all: true, verbatim: true })

/*
 * Where Latchkey's own outgoing requests may go: webhooks, and the OpenID Provider's requests to its clients
 * (back-channel logout, a client's `jwks_uri`). Their URLs come from admins or clients, so they are checked
 * as an attacker's would be (SSRF): see outgoing.ts for the request that uses these checks.
 */

export interface DestinationPolicy {
	/** `http://` targets (development and tests); `https://` only otherwise. */
	allowHttp: boolean
	/** Loopback, private, link-local and other non-public addresses (WEBHOOK_ALLOW_PRIVATE_NETWORKS). */
	allowPrivateNetworks: boolean
	resolve: ResolveHost
}

/** Why a URL may not be requested; the words are shown to admins as they are. */
export class DestinationRefused extends Error {
	override readonly name = 'DestinationRefused'
}

type Address = ipaddr.IPv4 | ipaddr.IPv6

const v4 = (high: number, low: number) => ipaddr.fromByteArray([high >> 8, high & 0xff, low >> 8, low & 0xff]) as ipaddr.IPv4
const cidr = (range: string) => ipaddr.parseCIDR(range)
const within = (address: ipaddr.IPv6, range: [Address, number]) => address.match(range)

/** Forms that stand for one IPv4 address and reach it, which is then the address to judge. */
const TRANSLATED = [cidr('::ffff:0:0/96'), cidr('::ffff:0:0:0/96'), cidr('64:ff9b::/96')]
/** Local-use NAT64 (RFC 8215): the operator picks the prefix length, so the IPv4 address may sit at any RFC 6052 place. */
const LOCAL_NAT64 = cidr('64:ff9b:1::/48')
const SIX_TO_FOUR = cidr('2002::/16')
const TEREDO = cidr('2001::/32')

/**
 * Every IPv4 address an IPv6 address may lead to: IPv4-mapped (`::ffff:a.b.c.d`), -translated
 * (`::ffff:0:a.b.c.d`), -compatible (`::a.b.c.d`), NAT64 (`64:ff9b::/96`, and `64:ff9b:1::/48` at each
 * prefix length RFC 6052 allows), 6to4 (`2002:AABB:CCDD::`) and Teredo (its server and its client).
 */
function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4[] {
	const p = address.parts as [number, number, number, number, number, number, number, number]
	const found: ipaddr.IPv4[] = []
	if (TRANSLATED.some((range) => within(address, range)) || p.slice(0, 6).every((part) => part === 0)) found.push(v4(p[6], p[7]))
	if (within(address, LOCAL_NAT64)) {
		const bytes = address.toByteArray()
		// RFC 6052 section 2.2: the IPv4 octets around the reserved octet 8, for prefixes of /48, /56 and /64.
		for (const at of [[6, 7, 9, 10], [7, 9, 10, 11], [9, 10, 11, 12]])
			found.push(ipaddr.fromByteArray(at.map((i) => bytes[i] ?? 0)) as ipaddr.IPv4)
		found.push(v4(p[6], p[7]))
	}
	if (within(address, SIX_TO_FOUR)) found.push(v4(p[1], p[2]))
	if (within(address, TEREDO)) found.push(v4(p[2], p[3]), v4(p[6] ^ 0xffff, p[7] ^ 0xffff))
	return found
}

/** Cloud instance metadata (credentials live there): never a target, private networks allowed or not. */
const METADATA_RANGES = ['169.254.169.254/32', '169.254.170.2/32', '100.100.100.200/32', 'fd00:ec2::254/128'].map(cidr)

/** Whether the address, or an IPv4 address it may lead to, is in a metadata range. */
function isMetadataAddress(address: Address): boolean {
	const reached = address.kind() === 'ipv6' ? [address, ...embeddedIPv4(address as ipaddr.IPv6)] : [address]
	return reached.some((one) => METADATA_RANGES.some(([range, bits]) => one.kind() === range.kind() && one.match(range, bits)))
}

/**
 * Only public unicast addresses: ipaddr.js names every special range (loopback, private, link-local, unique-local,
 * CGNAT, multicast, reserved, …). An IPv6 form that stands for an IPv4 address (mapped, translated, NAT64 `/96`,
 * as DNS64 answers for IPv4-only hosts) is judged as that IPv4 address; the other forms that carry one
 * (compatible, 6to4, Teredo, local-use NAT64) are not public whatever they carry.
 */
function isPublic(address: Address): boolean {
	if (address.kind() === 'ipv4') return address.range() === 'unicast'
	const v6 = address as ipaddr.IPv6
	if (TRANSLATED.some((range) => within(v6, range))) return v4(v6.parts[6] ?? 0, v6.parts[7] ?? 0).range() === 'unicast'
	return embeddedIPv4(v6).length === 0 && v6.range() === 'unicast'
}

const parse = (address: string): Address | undefined => (ipaddr.isValid(address) ? ipaddr.parse(address.replace(/%.*$/, '')) : undefined)

/** The scheme and form of a target's URL, before any lookup. */
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
	const parsed = addresses.map(({ address }) => parse(address))
	// Decided on the normalised address, never on its spelling: an unreadable one is refused like a private one.
	if (parsed.some((address) => address !== undefined && isMetadataAddress(address))) throw new DestinationRefused('the host resolves to a cloud metadata address')
	if (parsed.some((address) => address === undefined || (!policy.allowPrivateNetworks && !isPublic(address))))
		throw new DestinationRefused('the host resolves to a loopback, private or link-local address')
	return addresses
}
