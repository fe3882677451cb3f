import { and, eq, gt, isNull, lt, or, sql } from 'drizzle-orm'
import type { Adapter, AdapterPayload } from 'oidc-provider'
import type { Database } from '../../db/client'
import { oauthArtifacts } from '../../db/schema'

/*
 * The OpenID Provider library's storage (its "adapter"), on Latchkey's database — PostgreSQL or the embedded
 * PGlite alike: one row per record in `oauth_artifacts`, by kind (`model`) and id. Two kinds are not kept
 * there: clients come from `oauth_clients` (the admin API's resource), and a provider session is valid only
 * while the Latchkey session it stands for is (`LATCHKEY_SESSION`), so that revoking a session through the
 * API, a password change, a recovery or a deactivation ends the browser's single sign-on too.
 */

/** The field of a provider session's payload that names its Latchkey session. */
export const LATCHKEY_SESSION = 'latchkeySessionId'

/** How the library's records reach clients: the admin API's service, given at composition. */
export interface ClientMetadataSource {
	/** The library's metadata of an active client; undefined for an unknown or disabled one. */
	metadataOf(clientId: string): Promise<AdapterPayload | undefined>
}

/** Records that live only a short while get a lifetime even when the library gives none (it always does today). */
const FALLBACK_SECONDS = 3600

/**
 * Called, awaited, when the library ends one of its sessions (a sign-out through a client): the payload names the
 * Latchkey session it stood for, which ends with it, before the browser is sent on.
 */
export type SessionEnded = (payload: AdapterPayload) => Promise<void>

export function databaseAdapter(db: Database, clients: ClientMetadataSource, sessionEnded: SessionEnded) {
	// Prepared once (the SQL is not rebuilt per request; PostgreSQL plans it once per connection): a record of a
	// kind by id, by user code or by uid, still unexpired, with whether a provider session's Latchkey session is live.
	const lookup = (column: typeof oauthArtifacts.id | typeof oauthArtifacts.userCode | typeof oauthArtifacts.uid, name: string) =>
		db
			.select({ payload: oauthArtifacts.payload, consumedAt: oauthArtifacts.consumedAt, standsForLiveSession: liveLatchkeySession })
			.from(oauthArtifacts)
			.where(
				and(
					eq(oauthArtifacts.model, sql.placeholder('model')),
					eq(column, sql.placeholder('key')),
					or(isNull(oauthArtifacts.expiresAt), gt(oauthArtifacts.expiresAt, sql`now()`)),
				),
			)
			.limit(1)
			.prepare(name)
	const byId = lookup(oauthArtifacts.id, 'latchkey_oauth_by_id')
	const byUserCode = lookup(oauthArtifacts.userCode, 'latchkey_oauth_by_user_code')
	const byUid = lookup(oauthArtifacts.uid, 'latchkey_oauth_by_uid')

	return class DatabaseAdapter implements Adapter {
		constructor(readonly model: string) {}

		async upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
			if (this.model === 'Client') return
			const expiresAt = sql`now() + make_interval(secs => ${expiresIn > 0 ? expiresIn : FALLBACK_SECONDS})`
			const row = { grantId: payload.grantId ?? null, userCode: payload.userCode ?? null, uid: payload.uid ?? null, payload: payload as Record<string, unknown> }
			await db
				.insert(oauthArtifacts)
				.values({ model: this.model, id, ...row, expiresAt })
				.onConflictDoUpdate({ target: [oauthArtifacts.model, oauthArtifacts.id], set: { ...row, expiresAt } })
		}

		async find(id: string): Promise<AdapterPayload | undefined> {
			if (this.model === 'Client') return clients.metadataOf(id)
			return found(this.model, await byId.execute({ model: this.model, key: id }))
		}

		async findByUserCode(userCode: string) {
			return found(this.model, await byUserCode.execute({ model: this.model, key: userCode }))
		}

		async findByUid(uid: string) {
			return found(this.model, await byUid.execute({ model: this.model, key: uid }))
		}

		async consume(id: string): Promise<void> {
			await db
				.update(oauthArtifacts)
				.set({ consumedAt: sql`now()` })
				.where(and(eq(oauthArtifacts.model, this.model), eq(oauthArtifacts.id, id)))
		}

		async destroy(id: string): Promise<void> {
			const [ended] = await db
				.delete(oauthArtifacts)
				.where(and(eq(oauthArtifacts.model, this.model), eq(oauthArtifacts.id, id)))
				.returning({ payload: oauthArtifacts.payload })
			if (this.model === 'Session' && ended) await sessionEnded(ended.payload)
		}

		async revokeByGrantId(grantId: string): Promise<void> {
			// Every kind at once: a code used twice or a refresh token replayed ends all that the grant issued.
			await db.delete(oauthArtifacts).where(eq(oauthArtifacts.grantId, grantId))
		}
	}
}

/** The record as the library reads it: `consumed` when it was; none for a session whose Latchkey session ended. */
function found(model: string, [row]: Array<{ payload: Record<string, unknown>; consumedAt: Date | null; standsForLiveSession: boolean }>): AdapterPayload | undefined {
	if (!row || (model === 'Session' && !row.standsForLiveSession)) return undefined
	return row.consumedAt ? { ...row.payload, consumed: Math.floor(row.consumedAt.getTime() / 1000) } : { ...row.payload }
}

/**
 * Whether the provider session's Latchkey session is live (not revoked, not expired, its account active). A
 * provider session no one signed in to yet (an authorization request in progress) stands for none, and is kept.
 */
const latchkeySessionId = sql`(${oauthArtifacts.payload}->>${sql.raw(`'${LATCHKEY_SESSION}'`)})`
// Written with the tables' own names: inside a select, Drizzle names columns unqualified.
const liveLatchkeySession = sql<boolean>`(
	${oauthArtifacts.model} <> 'Session'
	or ${oauthArtifacts.payload}->>'accountId' is null
	or exists (
		select 1 from sessions join users on users.id = sessions.user_id
		where sessions.id = case when ${latchkeySessionId} ~ '^[0-9a-f-]{36}$' then ${latchkeySessionId}::uuid end
			and sessions.revoked_at is null and sessions.expires_at > now() and users.status = 'active'
	)
)`

/** Deletes up to `limit` expired records (the schedule calls it until none is left); returns how many. */
export async function purgeExpiredArtifacts(db: Database, limit = 1000): Promise<number> {
	const expired = db
		.select({ model: oauthArtifacts.model, id: oauthArtifacts.id })
		.from(oauthArtifacts)
		.where(lt(oauthArtifacts.expiresAt, sql`now()`))
		.limit(limit)
	const deleted = await db
		.delete(oauthArtifacts)
		.where(sql`(${oauthArtifacts.model}, ${oauthArtifacts.id}) in (${expired})`)
		.returning({ id: oauthArtifacts.id })
	return deleted.length
}
