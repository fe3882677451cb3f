import * as oidc from 'openid-client'
import type { OidcProviderSettings } from '../../config/env'

/** Discovery documents are kept this long; the JWKS is openid-client's to keep (it refetches on an unknown `kid`). */
const DISCOVERY_TTL_MS = 3600_000
/** A provider that does not answer within this fails its flow (provider-unavailable), never a request thread. */
const PROVIDER_TIMEOUT_SECONDS = 10

/** A provider that could not be reached (discovery, token endpoint, userinfo): its flow ends with provider-unavailable. */
export class ProviderUnavailable extends Error {
	override name = 'ProviderUnavailable'
}

/**
 * The configured providers and their openid-client configurations, discovered on first use and again
 * after an hour or a failure (a failed discovery is not kept: the next flow tries again). ID tokens are
 * checked against the provider's JWKS even though they come straight from its token endpoint
 * (`enableNonRepudiationChecks`: openid-client v6 skips that otherwise).
 */
export class ProviderDirectory {
	private readonly discovered = new Map<string, { at: number; configuration: Promise<oidc.Configuration> }>()

	constructor(
		readonly providers: OidcProviderSettings[],
		private readonly allowHttpIssuers: boolean,
	) {}

	find(id: string): OidcProviderSettings | undefined {
		return this.providers.find((provider) => provider.id === id)
	}

	async configuration(provider: OidcProviderSettings): Promise<oidc.Configuration> {
		const cached = this.discovered.get(provider.id)
		if (cached && Date.now() - cached.at < DISCOVERY_TTL_MS) return cached.configuration
		const configuration = this.discover(provider)
		this.discovered.set(provider.id, { at: Date.now(), configuration })
		configuration.catch(() => this.discovered.delete(provider.id))
		return configuration
	}

	private async discover(provider: OidcProviderSettings): Promise<oidc.Configuration> {
		const http = this.allowHttpIssuers && provider.issuer.startsWith('http://')
		try {
			const configuration = await oidc.discovery(new URL(provider.issuer), provider.clientId, provider.clientSecret, undefined, {
				timeout: PROVIDER_TIMEOUT_SECONDS,
				...(http ? { execute: [oidc.allowInsecureRequests] } : {}),
			})
			configuration.timeout = PROVIDER_TIMEOUT_SECONDS
			oidc.enableNonRepudiationChecks(configuration)
			return configuration
		} catch (error) {
			throw new ProviderUnavailable(`discovery of ${provider.id} failed: ${error instanceof Error ? error.name : 'error'}`)
		}
	}
}
