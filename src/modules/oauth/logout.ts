import { sql } from 'drizzle-orm'
import type Provider from 'oidc-provider'
import type { Database } from '../../db/client'
import { DestinationRefused } from '../../http/destination'
import { enqueue } from '../../jobs/queue'
import { JobFailure, PermanentJobError, type JobHandler } from '../../jobs/handler'
import { LATCHKEY_SESSION } from './adapter'

/*
 * Back-channel logout (OpenID Connect Back-Channel Logout 1.0): the library signs the logout token and posts
 * it, but Latchkey sends it later, through the job queue as webhooks are sent, so that a slow or failing
 * client neither holds up the person signing out nor loses its notice (it is retried).
 */

export const BACKCHANNEL_LOGOUT_QUEUE = 'oauth-backchannel-logout'

type BackchannelLogout = (this: InstanceType<Provider['Client']>, sub: string, sid: string) => Promise<void>

/** Each provider's own way of sending a logout token (the library's), kept when queuing replaces it. */
const sending = new WeakMap<Provider, BackchannelLogout>()

/** From now on `provider` queues its logout tokens rather than sending them during the sign-out. */
export function queueBackchannelLogouts(provider: Provider, db: Database): void {
	sending.set(provider, provider.Client.prototype.backchannelLogout as BackchannelLogout)
	provider.Client.prototype.backchannelLogout = async function (this: InstanceType<Provider['Client']>, sub: string, sid: string) {
		await enqueue(db, { queue: BACKCHANNEL_LOGOUT_QUEUE, payload: { clientId: this.clientId, sub, sid } })
	}
}

/** The job that sends one queued logout token, with the provider (loaded if it was not yet). */
export function backchannelLogoutJob(loadProvider: () => Promise<Provider>): JobHandler {
	return async (payload) => {
		const { clientId, sub, sid } = payload
		if (typeof clientId !== 'string' || typeof sub !== 'string' || typeof sid !== 'string') throw new PermanentJobError('unreadable back-channel logout job')
		const provider = await loadProvider()
		const send = sending.get(provider)
		const client = await provider.Client.find(clientId)
		// A client disabled or unregistered since is told nothing.
		if (!client?.backchannelLogoutUri || !send) return
		try {
			await send.call(client, sub, sid)
		} catch (error) {
			// Refused as a webhook's receiver would be (the provider's `fetch`), in words that name no address.
			if (error instanceof DestinationRefused) throw new JobFailure(`back-channel logout destination refused: ${error.message}`)
			throw new JobFailure(`back-channel logout not accepted by the client (${error instanceof Error ? error.name : 'error'})`)
		}
	}
}

/**
 * One step of the upkeep that tells clients when a Latchkey session ended elsewhere than at a client's sign-out
 * (revoked through the API, a password change, a recovery, a deactivation, its expiry): the library's sessions
 * that stood for it end, and each client they signed in to is queued its back-channel logout token (a client
 * with no logout URI is told nothing). Returns how many library sessions ended.
 */
export async function logOutEndedSessionsStep(db: Database, limit = 100): Promise<number> {
	return db.transaction(async (tx) => {
		const ended = await tx.execute(sql`
			with ended as (
				select a.model, a.id from oauth_artifacts a
				join sessions s on s.id = case when a.payload->>${LATCHKEY_SESSION} ~ '^[0-9a-f-]{36}$' then (a.payload->>${LATCHKEY_SESSION})::uuid end
				join users u on u.id = s.user_id
				where a.model = 'Session' and (s.revoked_at is not null or s.expires_at <= now() or u.status <> 'active')
				limit ${limit}
				for update of a skip locked
			)
			delete from oauth_artifacts a using ended where a.model = ended.model and a.id = ended.id
			returning a.payload`)
		// postgres.js answers the rows, PGlite an object holding them.
		const rows = ((ended as unknown as { rows?: EndedSession[] }).rows ?? (ended as unknown as EndedSession[])) as EndedSession[]
		for (const { payload } of rows) {
			if (typeof payload.accountId !== 'string') continue
			for (const [clientId, { sid }] of Object.entries(payload.authorizations ?? {}))
				if (typeof sid === 'string') await enqueue(tx, { queue: BACKCHANNEL_LOGOUT_QUEUE, payload: { clientId, sub: payload.accountId, sid } })
		}
		return rows.length
	})
}

/** A library session's record, as far as a logout reads it: who, and the clients it signed in to with their `sid`. */
type EndedSession = { payload: { accountId?: unknown; authorizations?: Record<string, { sid?: unknown }> } }
