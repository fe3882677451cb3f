import type Provider from 'oidc-provider'
import type { Database } from '../../db/client'
import { enqueue } from '../../jobs/queue'
import { JobFailure, PermanentJobError, type JobHandler } from '../../jobs/handler'

/*
 * Back-channel logout (OpenID Connect Back-Channel Logout 1.0): the library signs the logout token and posts
 * it, but Latchkey sends it later, through the job queue as webhooks are sent, so that a slow or failing
 * client neither holds up the person signing out nor loses its notice (it is retried).
 */

export const BACKCHANNEL_LOGOUT_QUEUE = 'oauth-backchannel-logout'

type BackchannelLogout = (this: InstanceType<Provider['Client']>, sub: string, sid: string) => Promise<void>

/** From now on the library queues its logout tokens; returns the job handler that sends them. */
export function queueBackchannelLogouts(provider: Provider, db: Database): JobHandler {
	const send = provider.Client.prototype.backchannelLogout as BackchannelLogout
	provider.Client.prototype.backchannelLogout = async function (this: InstanceType<Provider['Client']>, sub: string, sid: string) {
		await enqueue(db, { queue: BACKCHANNEL_LOGOUT_QUEUE, payload: { clientId: this.clientId, sub, sid } })
	}
	return async (payload) => {
		const { clientId, sub, sid } = payload
		if (typeof clientId !== 'string' || typeof sub !== 'string' || typeof sid !== 'string') throw new PermanentJobError('unreadable back-channel logout job')
		const client = await provider.Client.find(clientId)
		// A client disabled or unregistered since is told nothing.
		if (!client?.backchannelLogoutUri) return
		try {
			await send.call(client, sub, sid)
		} catch (error) {
			throw new JobFailure(`back-channel logout not accepted by the client (${error instanceof Error ? error.name : 'error'})`)
		}
	}
}
