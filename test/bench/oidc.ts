/**
 * The identity-provider section of `bench` (run.ts calls `oidcSection`; `bun run bench -- --only oidc`):
 * the whole provider sign-in — authorization redirect, the provider's pages, the callback (token request,
 * userinfo), the code exchange — per second and its latency, with the provider's own time measured apart
 * inside it (a real oidc-provider in this process, its request handling timed by path).
 *
 * Flows run from this process, several at once, each a "browser" that follows the redirects
 * (test/support/oidc-provider.ts). The service runs with NODE_ENV=test: production refuses an http://
 * issuer, and this provider is on loopback. Its public URL is a name of its own (PUBLIC_URL), which the
 * browsers map to the service's port, so the provider knows the callback before the service has a port.
 */
import { FlowBrowser, pkcePair, TestOpenIdProvider } from '../support/oidc-provider'
import { measuredLoad, type LoadResult } from './workload'

const PUBLIC_ORIGIN = 'http://latchkey.bench'
const FRONTEND = 'http://frontend.bench/auth/callback'
/** Flows in flight at once. */
const CONCURRENCY = 8

type Target = { pid: number; url: string; readyAfterMs: number; stop(): Promise<void> }

export interface OidcBench<M extends LoadResult, R> {
	seconds: number
	log(message: string): void
	startService(env: Record<string, string>, name: string): Promise<Target>
	/** Settles the service, then watches its memory and CPU while `run` goes. */
	measure(target: Target, run: () => Promise<LoadResult>): Promise<M>
	row(id: string, scenario: string, m: M, limit: { name: string; perSecond: number | null }, goal?: string, met?: boolean | null): R
}

export interface OidcFigures {
	flows: number
	flowsPerSecond: number
	p50Ms: number
	p99Ms: number
	/** Per flow, on average: the provider's own handling (its pages, token, userinfo, keys), and everything else. */
	providerMsPerFlow: number
	latchkeyMsPerFlow: number
	failed: number
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0

export async function oidcSection<M extends LoadResult, R>(bench: OidcBench<M, R>): Promise<{ rows: R[]; figures: OidcFigures }> {
	const provider = await TestOpenIdProvider.start([`${PUBLIC_ORIGIN}/api/auth/providers/bench/callback`])
	/** The provider's own time answering, summed over every request it handles (its pages, token, userinfo, keys). */
	let providerMs = 0
	provider.onRequest = () => {
		const at = performance.now()
		return () => {
			providerMs += performance.now() - at
		}
	}
	const service = await bench.startService(
		{ NODE_ENV: 'test', OIDC_PROVIDERS: 'bench', ...provider.settings('bench'), PUBLIC_URL: PUBLIC_ORIGIN, REDIRECT_URLS: 'http://frontend.bench/*' },
		'oidc',
	)
	try {
		// The browsers' requests to the service's public name go to its port.
		const api = { handle: (request: Request) => fetch(request.url.replace(PUBLIC_ORIGIN, service.url), { headers: request.headers, redirect: 'manual' }) }
		/** Why flows failed, counted (printed after the run: a failure is a finding, not noise). */
		const errors = new Map<string, number>()
		const failedBecause = (reason: string) => errors.set(reason, (errors.get(reason) ?? 0) + 1)
		const flow = async (n: number) => {
			const { verifier, challenge } = pkcePair()
			const query = new URLSearchParams({ redirectTo: FRONTEND, codeChallenge: challenge, codeChallengeMethod: 'S256' })
			const landed = await new FlowBrowser(api, PUBLIC_ORIGIN).follow(`${PUBLIC_ORIGIN}/api/auth/providers/bench/authorization?${query}`, provider.issuer)
			const code = landed.searchParams.get('code')
			if (!code) {
				failedBecause(`error=${landed.searchParams.get('error')}`)
				return false
			}
			const response = await fetch(`${service.url}/api/auth/sessions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code, codeVerifier: verifier }) })
			const text = await response.text()
			if (!response.ok) failedBecause(`exchange ${response.status} ${text.slice(0, 60)}`)
			return response.ok && n >= 0
		}

		bench.log('10a. warming up (discovery, keys, the first accounts)')
		provider.signInAs = { sub: 'warm-up', email: 'warm-up@example.test', email_verified: true }
		for (let i = 0; i < 5; i++) await flow(i)

		bench.log(`10b. provider sign-ins, ${CONCURRENCY} at once for ${bench.seconds} s`)
		let figures: OidcFigures | undefined
		const measured = await bench.measure(service, async () => {
			providerMs = 0
			const latencies: number[] = []
			let failed = 0
			let counter = 0
			const started = performance.now()
			const deadline = started + bench.seconds * 1000
			await Promise.all(
				Array.from({ length: CONCURRENCY }, async () => {
					while (performance.now() < deadline) {
						const n = counter++
						// A new person each time; flows at once may share one (the interaction signs in whoever is current), which is a returning sign-in.
						provider.signInAs = { sub: `bench-${n}`, email: `bench-oidc-${n}-${Date.now()}@example.test`, email_verified: true }
						const at = performance.now()
						const ok = await flow(n).catch((error: unknown) => {
							failedBecause(error instanceof Error ? error.message.replace(/\?[^:]*/, '?…').slice(0, 300) : 'error')
							return false
						})
						if (ok) latencies.push(performance.now() - at)
						else failed++
					}
				}),
			)
			const seconds = (performance.now() - started) / 1000
			if (errors.size) bench.log(`flows that ended in an error: ${JSON.stringify(Object.fromEntries(errors))}`)
			latencies.sort((a, b) => a - b)
				const flows = latencies.length
			const meanMs = flows ? latencies.reduce((sum, ms) => sum + ms, 0) / flows : 0
			figures = {
				flows,
				flowsPerSecond: flows / seconds,
				p50Ms: percentile(latencies, 50),
				p99Ms: percentile(latencies, 99),
				providerMsPerFlow: flows ? providerMs / flows : 0,
				latchkeyMsPerFlow: flows ? meanMs - providerMs / flows : 0,
				failed,
			}
			return measuredLoad(flows, seconds, { p50Ms: figures.p50Ms, p99Ms: figures.p99Ms, meanMs, maxMs: latencies.at(-1) ?? 0 }, failed)
		})
		if (!figures) throw new Error('the provider sign-ins were not measured')
		return {
			figures,
			rows: [bench.row('oidc-flow', `provider sign-in: authorize + provider + callback + exchange (${CONCURRENCY} at once)`, measured, { name: 'provider time inside, ms/flow', perSecond: null })],
		}
	} finally {
		await service.stop()
		await provider.stop()
	}
}

export function describeOidc(figures: OidcFigures): string[] {
	return [
		`oidc: ${figures.flows} sign-ins in ${(figures.flows / figures.flowsPerSecond).toFixed(1)} s = ${figures.flowsPerSecond.toFixed(1)}/s, p50 ${figures.p50Ms.toFixed(0)} ms, p99 ${figures.p99Ms.toFixed(0)} ms, ${figures.failed} failed;` +
			` per flow ${figures.providerMsPerFlow.toFixed(1)} ms in the provider (oidc-provider, this process) and ${figures.latchkeyMsPerFlow.toFixed(1)} ms elsewhere (Latchkey, its database, the network)`,
	]
}
