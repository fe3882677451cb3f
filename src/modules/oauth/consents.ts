import { and, desc, eq, inArray, sql } from 'drizzle-orm'
import type { Database } from '../../db/client'
import { oauthArtifacts, oauthClients, oauthConsents, users } from '../../db/schema'
import { NotFound } from '../../http/problem'
import type { AuditLog, ClientInfo } from '../audit/service'
import type { Caller } from '../auth/sessions'
import { recordWebhookEvents } from '../webhooks/outbox'
import { CLIENT_ARTIFACT_MODELS } from './clients'
import type { ConsentResource } from './model'

export interface OAuthConsentsDeps {
	db: Database
	audit: AuditLog
}

/** Where a consent given at the provider's pages comes from, when no API request does. */
const NO_REQUEST: ClientInfo = { ip: null, userAgent: null, requestId: null }

/** What users allowed clients: remembered per user and client, so the consent page asks only for new scopes. */
export class OAuthConsents {
	constructor(private readonly deps: OAuthConsentsDeps) {}

	/** A user's consents, the most recent first. */
	async list(userId: string): Promise<ConsentResource[]> {
		await this.assertUser(userId)
		const rows = await this.deps.db
			.select({ clientId: oauthClients.clientId, clientName: oauthClients.name, scopes: oauthConsents.scopes, grantedAt: oauthConsents.grantedAt })
			.from(oauthConsents)
			.innerJoin(oauthClients, eq(oauthClients.id, oauthConsents.clientId))
			.where(eq(oauthConsents.userId, userId))
			.orderBy(desc(oauthConsents.grantedAt), desc(oauthClients.id))
		return rows.map(toConsentResource)
	}

	/**
	 * Withdraws a user's consent to a client (by its OAuth `client_id`), and with it everything that client
	 * holds for that user: refresh and access tokens, grants, codes not yet exchanged.
	 */
	async revoke(userId: string, clientId: string, caller: Caller, client: ClientInfo): Promise<ConsentResource> {
		await this.assertUser(userId)
		return this.deps.db.transaction(async (tx) => {
			const [oauthClient] = await tx.select().from(oauthClients).where(eq(oauthClients.clientId, clientId))
			if (!oauthClient) throw noConsent()
			const [removed] = await tx
				.delete(oauthConsents)
				.where(and(eq(oauthConsents.userId, userId), eq(oauthConsents.clientId, oauthClient.id)))
				.returning()
			if (!removed) throw noConsent()
			await tx
				.delete(oauthArtifacts)
				.where(
					and(
						inArray(oauthArtifacts.model, CLIENT_ARTIFACT_MODELS),
						sql`${oauthArtifacts.payload}->>'accountId' = ${userId}`,
						sql`${oauthArtifacts.payload}->>'clientId' = ${clientId}`,
					),
				)
			const consent = toConsentResource({ clientId, clientName: oauthClient.name, scopes: removed.scopes, grantedAt: removed.grantedAt })
			await recordWebhookEvents(tx, [{ type: 'consent.revoked', data: { userId, consent } }])
			await this.deps.audit.recordIn(tx, 'consent.revoked', client, { actorId: caller.user.id, subjectId: userId, details: { clientId } })
			return consent
		})
	}

	/**
	 * Remembers that a user allowed a client (by its row id) these scopes, added to those allowed before. Sends
	 * `consent.granted` (and records it) only when something new was allowed. For the protocol's consent step.
	 */
	async grant(userId: string, clientUuid: string, scopes: string[], client: ClientInfo = NO_REQUEST): Promise<ConsentResource> {
		return this.deps.db.transaction(async (tx) => {
			const [oauthClient] = await tx.select().from(oauthClients).where(eq(oauthClients.id, clientUuid))
			if (!oauthClient) throw new NotFound('No OAuth client with this id')
			const [before] = await tx
				.select()
				.from(oauthConsents)
				.where(and(eq(oauthConsents.userId, userId), eq(oauthConsents.clientId, clientUuid)))
				.for('update')
			if (before && scopes.every((scope) => before.scopes.includes(scope)))
				return toConsentResource({ clientId: oauthClient.clientId, clientName: oauthClient.name, scopes: before.scopes, grantedAt: before.grantedAt })
			// On a conflict (a first consent given twice at once) the scopes merge, in the order first given.
			const [row] = await tx
				.insert(oauthConsents)
				.values({ userId, clientId: clientUuid, scopes: [...new Set(scopes)] })
				.onConflictDoUpdate({
					target: [oauthConsents.userId, oauthConsents.clientId],
					set: {
						scopes: sql`array(select scope from unnest(${oauthConsents.scopes} || excluded.scopes) with ordinality as given(scope, n) group by scope order by min(n))`,
						grantedAt: sql`now()`,
					},
				})
				.returning()
			if (!row) throw new Error('consent upsert returned no row')
			const consent = toConsentResource({ clientId: oauthClient.clientId, clientName: oauthClient.name, scopes: row.scopes, grantedAt: row.grantedAt })
			await recordWebhookEvents(tx, [{ type: 'consent.granted', data: { userId, consent } }])
			await this.deps.audit.recordIn(tx, 'consent.granted', client, { actorId: userId, subjectId: userId, details: { clientId: oauthClient.clientId, scopes: consent.scopes.join(' ') } })
			return consent
		})
	}

	private async assertUser(userId: string) {
		const [user] = await this.deps.db.select({ id: users.id }).from(users).where(eq(users.id, userId))
		if (!user) throw new NotFound('No user with this id')
	}
}

const noConsent = () => new NotFound('This user has given no consent to this client')

function toConsentResource(row: { clientId: string; clientName: string; scopes: string[]; grantedAt: Date }): ConsentResource {
	return { clientId: row.clientId, clientName: row.clientName, scopes: row.scopes, grantedAt: row.grantedAt.toISOString() }
}
