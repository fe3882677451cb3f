import { randomBytes } from 'node:crypto'
import { LRUCache } from 'lru-cache'
import { and, desc, eq, inArray, isNotNull, isNull, lt, or, sql } from 'drizzle-orm'
import type { Database, Queryable } from '../../db/client'
import { oauthArtifacts, oauthClients, oauthClientSecrets, type OAuthClientRow } from '../../db/schema'
import { digestOf, newOpaqueToken, sameDigest } from '../../crypto/opaque-tokens'
import { decodeIdCursor, encodeIdCursor } from '../../http/pagination'
import { Conflict, Forbidden, NotFound, ValidationFailed, type FieldError } from '../../http/problem'
import type { AuditLog, ClientInfo } from '../audit/service'
import type { Caller } from '../auth/sessions'
import { recordWebhookEvents } from '../webhooks/outbox'
import { checkUrlForm, DestinationRefused, permittedAddresses, type DestinationPolicy } from '../../http/destination'
import {
	CONSOLE_CLIENT_ID,
	toOAuthClientResource,
	type CreateOAuthClientInput,
	type GrantType,
	type ListOAuthClientsQuery,
	type OAuthClientResource,
	type ReplaceOAuthClientInput,
	type Scope,
} from './model'

/** How long the secret before a rotation keeps working, so the client can switch without an outage (API.md: 24 h). */
export const PREVIOUS_SECRET_SECONDS = 24 * 3600

const DEFAULT_GRANT_TYPES: GrantType[] = ['authorization_code', 'refresh_token']
const DEFAULT_SCOPES: Scope[] = ['openid', 'profile', 'email', 'offline_access']

/**
 * The protocol's records that act for a client (tokens, codes, grants), by the model names the OpenID
 * Provider library stores them under: they end with the consent or the client that they came from.
 */
export const CLIENT_ARTIFACT_MODELS = ['AccessToken', 'RefreshToken', 'Grant', 'AuthorizationCode', 'DeviceCode', 'BackchannelAuthenticationRequest', 'ClientCredentials']

/** A new OAuth `client_id`: 128 random bits, URL-safe (22 characters). */
const newClientId = () => randomBytes(16).toString('base64url')

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost'])
/** A private-use URI scheme (RFC 8252 §7.1): reverse domain name, so it has a dot (`com.example.app`). */
const PRIVATE_USE_SCHEME = /^[a-z][a-z0-9+-]*(\.[a-z0-9+-]+)+:$/

const LOOPBACK_REDIRECT = /^http:\/\/(127\.0\.0\.1|\[::1\]|localhost)(:\d+)?\//

/**
 * What the OpenID Provider takes a client for (its `application_type`): a public client whose every redirect URI is
 * loopback or a private-use scheme is a native app (RFC 8252: any loopback port goes, consent is asked each time);
 * any other is a web client, whose redirect and post-logout URIs must then all be http(s).
 */
export const isNativeApp = (type: OAuthClientRow['type'], redirectUris: string[]) =>
	type === 'public' && redirectUris.length > 0 && redirectUris.every((uri) => LOOPBACK_REDIRECT.test(uri) || !/^https?:/.test(uri))

/** Where a change to a client is announced, its `client_id` the payload: every instance forgets what it kept of it. */
export const OAUTH_CLIENTS_CHANNEL = 'latchkey_oauth_clients'

/**
 * How long an instance trusts a client it read without hearing of a change: the backstop for a change made in SQL
 * by hand (the API announces its own), and for one announced while the instance's listening connection was down.
 */
const CLIENT_KEPT_MS = 30_000
const CLIENTS_KEPT = 1000

const announce = (db: Queryable, clientId: string) => db.execute(sql`select pg_notify(${OAUTH_CLIENTS_CHANNEL}, ${clientId})`)

export interface OAuthClientsDeps {
	db: Database
	audit: AuditLog
	/** The webhook URL rules, for back-channel logout and JWKS URIs (both are requested by this server). */
	destinations: DestinationPolicy
	/**
	 * Hears of clients changed by any instance (`OAUTH_CLIENTS_CHANNEL`), and of each (re)start of the hearing.
	 * Without it, active clients are read from the database at every request.
	 */
	listen?: (onChange: (clientId: string) => void, onListen: () => void) => Promise<() => Promise<void>>
}

/** Admins' side of OAuth clients, and what the protocol needs to know of them. */
export class OAuthClients {
	private activeClient: ReturnType<OAuthClients['prepareActiveClient']> | undefined
	/**
	 * Active clients as last read, by `client_id`: the protocol reads its client at every request. Kept only while
	 * changes are heard; a read that began before a change was heard is not kept (`generation`).
	 */
	private readonly kept = new LRUCache<string, OAuthClientRow>({ max: CLIENTS_KEPT, ttl: CLIENT_KEPT_MS })
	private generation = 0
	private hearing: 'no' | 'starting' | 'yes' | 'stopped' = 'no'
	private unlisten: Promise<(() => Promise<void>) | undefined> | undefined

	constructor(private readonly deps: OAuthClientsDeps) {}

	/** Forgets what was kept of a client (all of them when none is named), as a change is heard. */
	forget(clientId?: string) {
		this.generation++
		if (clientId === undefined) this.kept.clear()
		else this.kept.delete(clientId)
	}

	private startHearing() {
		if (this.hearing !== 'no' || !this.deps.listen) return
		this.hearing = 'starting'
		this.unlisten = this.deps
			.listen(
				(clientId) => this.forget(clientId),
				() => {
					// (Again) hearing: whatever was announced before is unknown, so nothing kept is trusted.
					this.forget()
					if (this.hearing === 'starting') this.hearing = 'yes'
				},
			)
			.catch(() => {
				// Not hearing: read from the database every time, and try again at a later request.
				if (this.hearing === 'starting') this.hearing = 'no'
				return undefined
			})
	}

	/** At the service's stop: no more hearing, nothing kept. */
	async stopHearing() {
		this.hearing = 'stopped'
		this.forget()
		await (await this.unlisten)?.().catch(() => {})
	}

	/** A new client; a confidential one gets its secret, returned here and never again. */
	async create(input: CreateOAuthClientInput, caller: Caller, client: ClientInfo): Promise<OAuthClientResource & { clientSecret?: string }> {
		const values = await this.checked(input, input.type)
		const id = Bun.randomUUIDv7()
		const clientSecret = input.type === 'confidential' ? newOpaqueToken() : undefined
		return this.deps.db.transaction(async (tx) => {
			const [row] = await tx
				.insert(oauthClients)
				.values({ id, clientId: newClientId(), type: input.type, ...values })
				.returning()
			if (!row) throw new Error('client insert returned no row')
			if (clientSecret) await tx.insert(oauthClientSecrets).values({ id: Bun.randomUUIDv7(), clientId: id, secretHash: digestOf(clientSecret) })
			const resource = toOAuthClientResource(row)
			await recordWebhookEvents(tx, [{ type: 'oauth-client.created', data: { client: resource } }])
			await this.deps.audit.recordIn(tx, 'oauth-client.created', client, { actorId: caller.user.id, details: { clientId: row.clientId, type: row.type } })
			return clientSecret ? { ...resource, clientSecret } : resource
		})
	}

	/** Newest first (keyset on the time-ordered id). */
	async list(query: ListOAuthClientsQuery) {
		const limit = query.limit ?? 20
		const before = query.cursor === undefined ? undefined : decodeIdCursor(query.cursor)
		const rows = await this.deps.db
			.select()
			.from(oauthClients)
			.where(and(query.status === undefined ? undefined : eq(oauthClients.status, query.status), before === undefined ? undefined : lt(oauthClients.id, before)))
			.orderBy(desc(oauthClients.id))
			.limit(limit + 1)
		const items = rows.slice(0, limit)
		const last = items.at(-1)
		return { items: items.map(toOAuthClientResource), nextCursor: rows.length > limit && last ? encodeIdCursor(last.id) : null, limit }
	}

	async get(id: string): Promise<OAuthClientResource> {
		return toOAuthClientResource(await find(this.deps.db, id))
	}

	/** PUT: replaces the editable members (left out, they take their defaults); `status` left out keeps its value. */
	async replace(id: string, input: ReplaceOAuthClientInput, caller: Caller, client: ClientInfo): Promise<OAuthClientResource> {
		const current = await find(this.deps.db, id)
		assertNotBuiltIn(current)
		const values = await this.checked(input, current.type)
		const replaced = await this.deps.db.transaction(async (tx) => {
			const before = await find(tx, id, 'lock')
			const status = input.status ?? before.status
			const [row] = await tx
				.update(oauthClients)
				.set({ ...values, status, updatedAt: new Date() })
				.where(eq(oauthClients.id, id))
				.returning()
			if (!row) throw notFound()
			if (status === 'disabled' && before.status !== 'disabled') await voidClient(tx, row)
			const changed = changedMembers(toOAuthClientResource(before), toOAuthClientResource(row))
			if (changed.length > 0) await this.recordUpdate(tx, row, changed, caller, client)
			await announce(tx, row.clientId)
			return toOAuthClientResource(row)
		})
		// This instance's next request sees the change (the others' as soon as they hear it).
		this.forget(replaced.clientId)
		return replaced
	}

	/** DELETE: disables, never removes; its secrets are void and its tokens deleted. Repeating it returns the same client. */
	async disable(id: string, caller: Caller, client: ClientInfo): Promise<OAuthClientResource> {
		assertNotBuiltIn(await find(this.deps.db, id))
		const disabled = await this.deps.db.transaction(async (tx) => {
			const before = await find(tx, id, 'lock')
			if (before.status === 'disabled') return toOAuthClientResource(before)
			const [row] = await tx.update(oauthClients).set({ status: 'disabled', updatedAt: new Date() }).where(eq(oauthClients.id, id)).returning()
			if (!row) throw notFound()
			await voidClient(tx, row)
			await recordWebhookEvents(tx, [{ type: 'oauth-client.updated', data: { client: toOAuthClientResource(row), changed: ['status'] } }])
			await this.deps.audit.recordIn(tx, 'oauth-client.disabled', client, { actorId: caller.user.id, details: { clientId: row.clientId } })
			await announce(tx, row.clientId)
			return toOAuthClientResource(row)
		})
		this.forget(disabled.clientId)
		return disabled
	}

	/**
	 * A new secret for a confidential client. The current one keeps working for PREVIOUS_SECRET_SECONDS; one
	 * left over from an earlier rotation ends now (at most two secrets work at once).
	 */
	async rotateSecret(id: string, caller: Caller, client: ClientInfo): Promise<{ clientSecret: string }> {
		const clientSecret = newOpaqueToken()
		return this.deps.db.transaction(async (tx) => {
			const row = await find(tx, id, 'lock')
			if (row.type === 'public') throw new Conflict('conflict', 'A public client has no secret: it proves itself with PKCE alone')
			await tx.delete(oauthClientSecrets).where(and(eq(oauthClientSecrets.clientId, id), isNotNull(oauthClientSecrets.expiresAt)))
			await tx
				.update(oauthClientSecrets)
				.set({ expiresAt: sql`now() + make_interval(secs => ${PREVIOUS_SECRET_SECONDS})` })
				.where(and(eq(oauthClientSecrets.clientId, id), isNull(oauthClientSecrets.expiresAt)))
			await tx.insert(oauthClientSecrets).values({ id: Bun.randomUUIDv7(), clientId: id, secretHash: digestOf(clientSecret) })
			await this.recordUpdate(tx, row, ['clientSecret'], caller, client, 'oauth-client.secret-rotated')
			return { clientSecret }
		})
	}

	/** The active client with this OAuth `client_id`, for the protocol; undefined when unknown or disabled. */
	async findActive(clientId: string): Promise<OAuthClientRow | undefined> {
		const kept = this.kept.get(clientId)
		if (kept) return kept
		this.startHearing()
		const generation = this.generation
		this.activeClient ??= this.prepareActiveClient()
		const [row] = await this.activeClient.execute({ clientId })
		// An unknown or disabled client is not kept: it is read again next time (the API may make it).
		if (row && this.hearing === 'yes' && generation === this.generation) this.kept.set(clientId, row)
		return row
	}

	/** Prepared once: the protocol reads the client on every request it serves. */
	private prepareActiveClient() {
		return this.deps.db
			.select()
			.from(oauthClients)
			.where(and(eq(oauthClients.clientId, sql.placeholder('clientId')), eq(oauthClients.status, 'active')))
			.prepare('latchkey_oauth_active_client')
	}

	/**
	 * Whether `secret` is a working secret of this active confidential client: its digest compared in constant
	 * time with every secret that has not expired (the current one, and the previous one for a day after a rotation).
	 */
	async verifySecret(clientId: string, secret: string): Promise<boolean> {
		const rows = await this.deps.db
			.select({ secretHash: oauthClientSecrets.secretHash })
			.from(oauthClientSecrets)
			.innerJoin(oauthClients, eq(oauthClients.id, oauthClientSecrets.clientId))
			.where(
				and(
					eq(oauthClients.clientId, clientId),
					eq(oauthClients.status, 'active'),
					eq(oauthClients.type, 'confidential'),
					or(isNull(oauthClientSecrets.expiresAt), sql`${oauthClientSecrets.expiresAt} > now()`),
				),
			)
		const offered = digestOf(secret)
		// Every row is compared, a match or not: the time taken says nothing of which one matched.
		return rows.reduce((matched, row) => sameDigest(offered, row.secretHash) || matched, false)
	}

	private async recordUpdate(
		tx: Queryable,
		row: OAuthClientRow,
		changed: string[],
		caller: Caller,
		client: ClientInfo,
		auditType: 'oauth-client.updated' | 'oauth-client.secret-rotated' = 'oauth-client.updated',
	) {
		await recordWebhookEvents(tx, [{ type: 'oauth-client.updated', data: { client: toOAuthClientResource(row), changed } }])
		await this.deps.audit.recordIn(tx, auditType, client, { actorId: caller.user.id, details: { clientId: row.clientId, changed: changed.join(' ') } })
	}

	/** The stored values of a create or a PUT, after every rule the schema cannot state; all problems at once as a 422. */
	private async checked(input: ReplaceOAuthClientInput, type: OAuthClientRow['type']) {
		const grantTypes = input.grantTypes ?? DEFAULT_GRANT_TYPES
		const method = input.tokenEndpointAuthMethod ?? (type === 'public' ? 'none' : 'client_secret_basic')
		const redirectUris = input.redirectUris ?? []
		const postLogoutRedirectUris = input.postLogoutRedirectUris ?? []
		const errors: FieldError[] = [
			...redirectUris.flatMap((uri, i) => problemAt(`#/redirectUris/${i}`, redirectUriProblem(uri, type))),
			...postLogoutRedirectUris.flatMap((uri, i) => problemAt(`#/postLogoutRedirectUris/${i}`, redirectUriProblem(uri, type))),
			...(await this.destinationProblems('#/backchannelLogoutUri', input.backchannelLogoutUri)),
			...(await this.destinationProblems('#/jwksUri', input.jwksUri)),
			...problemAt('#/logoUri', input.logoUri === undefined ? undefined : logoUriProblem(input.logoUri)),
		]
		if (type === 'public' && method !== 'none')
			errors.push({ pointer: '#/tokenEndpointAuthMethod', code: 'public-client', detail: 'must be "none" for a public client: it can keep no secret' })
		if (type === 'confidential' && method === 'none')
			errors.push({ pointer: '#/tokenEndpointAuthMethod', code: 'confidential-client', detail: 'a confidential client must authenticate: client_secret_basic, client_secret_post or private_key_jwt' })
		if (method === 'private_key_jwt' && input.jwksUri === undefined)
			errors.push({ pointer: '#/jwksUri', code: 'required', detail: 'is required with private_key_jwt: its keys verify the client’s assertions' })
		if (type === 'public' && grantTypes.includes('client_credentials'))
			errors.push({ pointer: '#/grantTypes', code: 'public-client', detail: 'client_credentials is for confidential clients only' })
		if (grantTypes.includes('authorization_code') && redirectUris.length === 0)
			errors.push({ pointer: '#/redirectUris', code: 'required', detail: 'needs at least one URI with the authorization_code grant' })
		// A private-use scheme beside a web URI: the provider would take the client for a web one and refuse to load it.
		if (type === 'public' && !isNativeApp(type, redirectUris))
			for (const [field, uris] of [['redirectUris', redirectUris], ['postLogoutRedirectUris', postLogoutRedirectUris]] as const)
				uris.forEach((uri, i) => {
					if (!/^https?:/.test(uri) && redirectUriProblem(uri, type) === undefined)
						errors.push({ pointer: `#/${field}/${i}`, code: 'refused', detail: 'a private-use scheme is for a native app, whose every redirect URI is loopback or private-use (RFC 8252): with an https one, this client is a web client' })
				})
		if (errors.length > 0) throw new ValidationFailed(errors)
		return {
			name: input.name,
			redirectUris,
			postLogoutRedirectUris,
			backchannelLogoutUri: input.backchannelLogoutUri ?? null,
			grantTypes,
			scopes: input.scopes ?? DEFAULT_SCOPES,
			tokenEndpointAuthMethod: method,
			jwksUri: input.jwksUri ?? null,
			firstParty: input.firstParty ?? false,
			idTokenSignedResponseAlg: input.idTokenSignedResponseAlg ?? null,
			logoUri: input.logoUri ?? null,
		}
	}

	/**
	 * A URL this server will request (back-channel logout, JWKS), held to the webhook rules: https (http in
	 * development), no credentials or fragment, never a private or metadata address now. A host that does not
	 * resolve yet is accepted; whoever requests it checks again.
	 */
	private async destinationProblems(pointer: string, raw: string | undefined): Promise<FieldError[]> {
		if (raw === undefined) return []
		try {
			const url = checkUrlForm(raw, this.deps.destinations)
			await permittedAddresses(url, this.deps.destinations).catch((error: unknown) => {
				if (error instanceof DestinationRefused) throw error
			})
			return []
		} catch (error) {
			if (!(error instanceof DestinationRefused)) throw error
			return [{ pointer, code: 'refused', detail: error.message }]
		}
	}
}

const problemAt = (pointer: string, detail: string | undefined): FieldError[] => (detail === undefined ? [] : [{ pointer, code: 'refused', detail }])

/**
 * Why a URI may not be a redirect URI (or post-logout one), if it may not: absolute, no fragment, no
 * credentials; https, http only to a loopback host (RFC 8252 §7.3); a public (native) client may use a
 * private-use scheme (RFC 8252 §7.1). Stored as written: redirect URIs are matched exactly.
 */
export function redirectUriProblem(raw: string, type: OAuthClientRow['type']): string | undefined {
	if (/[\s\u0000-\u001f\u007f]/.test(raw)) return 'must not contain spaces or control characters'
	let url: URL
	try {
		url = new URL(raw)
	} catch {
		return 'must be an absolute URI'
	}
	if (raw.includes('#')) return 'must not have a fragment'
	if (url.username || url.password) return 'must not carry credentials'
	if (url.protocol === 'https:') return url.hostname ? undefined : 'must name a host'
	if (url.protocol === 'http:')
		return LOOPBACK_HOSTS.has(url.hostname) ? undefined : 'must be https (http only on a loopback host: 127.0.0.1, [::1], localhost)'
	if (type === 'public' && PRIVATE_USE_SCHEME.test(url.protocol)) return undefined
	return type === 'public'
		? 'must be https, http on a loopback host, or a private-use scheme named by a reverse domain (com.example.app:/callback)'
		: 'must be https (http only on a loopback host: 127.0.0.1, [::1], localhost)'
}

function logoUriProblem(raw: string): string | undefined {
	let url: URL
	try {
		url = new URL(raw)
	} catch {
		return 'must be an absolute URI'
	}
	if (url.protocol !== 'https:') return 'must be an https URL'
	if (url.username || url.password) return 'must not carry credentials'
	return undefined
}

/** The members of a client that differ between two of its states. */
function changedMembers(before: OAuthClientResource, after: OAuthClientResource): string[] {
	const keys = new Set([...Object.keys(before), ...Object.keys(after)]) as Set<keyof OAuthClientResource>
	return [...keys].filter((key) => JSON.stringify(before[key]) !== JSON.stringify(after[key]))
}

/** A disabled client's secrets are void, and what it was issued (tokens, codes, grants) deleted. */
async function voidClient(tx: Queryable, row: OAuthClientRow) {
	await tx.delete(oauthClientSecrets).where(eq(oauthClientSecrets.clientId, row.id))
	await tx.delete(oauthArtifacts).where(and(inArray(oauthArtifacts.model, CLIENT_ARTIFACT_MODELS), sql`${oauthArtifacts.payload}->>'clientId' = ${row.clientId}`))
}

async function find(db: Queryable, id: string, lock?: 'lock'): Promise<OAuthClientRow> {
	const query = db.select().from(oauthClients).where(eq(oauthClients.id, id))
	const [row] = await (lock ? query.for('update') : query)
	if (!row) throw notFound()
	return row
}

const notFound = () => new NotFound('No OAuth client with this id')

function assertNotBuiltIn(row: OAuthClientRow) {
	if (row.clientId === CONSOLE_CLIENT_ID) throw new Forbidden(`${CONSOLE_CLIENT_ID} is the console's own client: it is built in and can be neither changed nor disabled`)
}

/** The console's client as it must be: first-party, public, calling back to `{PUBLIC_URL}/console/callback`. */
export function consoleClientValues(publicUrl: string) {
	return {
		clientId: CONSOLE_CLIENT_ID,
		name: 'Latchkey console',
		type: 'public' as const,
		redirectUris: [`${publicUrl}/console/callback`],
		postLogoutRedirectUris: [`${publicUrl}/console`],
		backchannelLogoutUri: null,
		grantTypes: ['authorization_code', 'refresh_token'],
		scopes: ['openid', 'profile', 'email', 'offline_access'],
		tokenEndpointAuthMethod: 'none' as const,
		jwksUri: null,
		firstParty: true,
		idTokenSignedResponseAlg: null,
		logoUri: null,
		dynamic: false,
		status: 'active' as const,
	}
}

/**
 * Makes the console's client exist as it must be, at start. One statement (an upsert on the unique `client_id`),
 * so instances starting at once neither fail nor make two; it writes only when something differs (PUBLIC_URL
 * changed, say), and keeps the client's id.
 */
export async function ensureConsoleClient(db: Queryable, publicUrl: string): Promise<void> {
	const values = consoleClientValues(publicUrl)
	const { clientId: _clientId, ...updates } = values
	const differs = Object.keys(updates).map((key) => {
		const column = oauthClients[key as keyof typeof updates]
		return sql`${column} is distinct from excluded.${sql.identifier(column.name)}`
	})
	await db
		.insert(oauthClients)
		.values({ id: Bun.randomUUIDv7(), ...values })
		.onConflictDoUpdate({ target: oauthClients.clientId, set: { ...updates, updatedAt: sql`now()` }, setWhere: or(...differs) })
	// Instances already running forget the console's client as they kept it (a new PUBLIC_URL, say).
	await announce(db, CONSOLE_CLIENT_ID)
}

