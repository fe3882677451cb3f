import { and, eq, gt, inArray, isNull, lt, or, sql, type SQL } from 'drizzle-orm'
import { alias, type AnyPgColumn } from 'drizzle-orm/pg-core'
import type { Adapter, AdapterPayload } from 'oidc-provider'
import type { Database } from '../../db/client'
import { oauthArtifacts, sessions, users } from '../../db/schema'

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

/** An account as the provider's claims need it, read with a token (ReadAhead). */
export interface AccountRecord {
	id: string
	email: string
	name: string
	emailVerifiedAt: Date | null
	updatedAt: Date
	/** `appMetadata.claims` as stored (any JSON; only an object's members go into tokens: auth/app-claims.ts). */
	appClaims?: unknown
}

/**
 * A browser's live Latchkey session as the provider reads it with its own session (one statement, findSession): the
 * session named by the digest of the browser's cookie, unrevoked and unexpired, of an active account, with the account.
 * The same conditions as the pages' lookup (pages/browser-sessions.ts), which reads it when no provider session does.
 */
export interface BrowserSessionRecord {
	sessionId: string
	amr: string[]
	aal: 'aal1' | 'aal2'
	authenticatedAt: Date
	account: AccountRecord
}

/** Where a browser session read with a provider session waits for the provider (ReadAhead), by its cookie's digest. */
export const browserSessionKey = (digest: string) => `Browser session ${digest}`

/**
 * What a request's first read brought along for the library's next reads in the same request: a token comes
 * with its provider session, its grant and its account in one query, a provider session with its grants, where
 * the library would ask for each in turn. Each is taken once, and forgotten when the request writes it; a
 * request is the library's (its async context, `Provider.ctx`), so nothing outlives it.
 */
export class ReadAhead {
	private readonly requests = new WeakMap<object, Map<string, unknown>>()

	constructor(private readonly currentRequest: () => object | undefined) {}

	keep(key: string, value: unknown) {
		const request = this.currentRequest()
		if (!request) return
		let kept = this.requests.get(request)
		if (!kept) this.requests.set(request, (kept = new Map()))
		kept.set(key, value)
	}

	/** What was read ahead under `key` (null: known not to exist), or undefined when nothing was. */
	take<T>(key: string): T | null | undefined {
		const request = this.currentRequest()
		const kept = request && this.requests.get(request)
		if (!kept?.has(key)) return undefined
		const value = kept.get(key)
		kept.delete(key)
		return value as T | null
	}

	/** Sees, without taking (a session's stored payload, to tell whether saving it again changes anything). */
	peek<T>(key: string): T | undefined {
		const request = this.currentRequest()
		return (request && (this.requests.get(request)?.get(key) as T | undefined)) ?? undefined
	}

	forget(key: string) {
		const request = this.currentRequest()
		if (request) this.requests.get(request)?.delete(key)
	}
}

/** The kinds of token that name a provider session, a grant and an account, read together with them. */
const TOKENS = new Set(['AccessToken', 'AuthorizationCode', 'RefreshToken'])

/**
 * The kinds written once, when made, and only ever consumed or deleted after (both of which stay durable at their
 * commit): their insert commits without waiting for the WAL's flush (`synchronous_commit` off for that one
 * statement). A crash of PostgreSQL within the next fraction of a second can lose such a record, and then what it
 * stood for is refused (the code cannot be exchanged, the token is unknown): it fails closed. Any later commit on
 * the server flushes it, so a consumption never reaches the disk without the record it consumes. Everything else
 * (grants, provider sessions, replay detection, consumption, revocation) commits as usual. At 16 sign-ins at once,
 * their 16 code inserts otherwise queued on the WAL's write lock and flush (most statements seen running over
 * 15 ms were waiting there).
 */
const MADE_ONCE = new Set(['AccessToken', 'AuthorizationCode', 'RefreshToken'])

const sessionByUid = (uid: string) => `Session uid ${uid}`
const byKind = (model: string, id: string) => `${model} ${id}`
/** Only the part of `appMetadata` tokens carry is read with an account. */
export const appClaimsColumn = sql<unknown>`${users.appMetadata}->'claims'`

export const accountKey = (accountId: string) => `Account ${accountId}`
/** A provider session as this request read it, to tell whether saving it again changes anything. */
const storedSession = (id: string) => `Session stored ${id}`

/**
 * A provider session saved again with nothing changed but its expiry, within this long of the expiry it has, is
 * not written: the library saves its session at the end of every authorization request, to slide its expiry.
 * Its cookie may then outlive it by as much; a browser whose provider session is gone gets a new one from its
 * Latchkey session at the next request, as after any expiry (provider.ts).
 */
export const SESSION_SLIDE_SECONDS = 3600

/** What a record consumed by another request is called in the refusal (as the library words its own refusals). */
const CONSUMED: Record<string, string> = {
	AuthorizationCode: 'authorization code already consumed',
	RefreshToken: 'refresh token already used',
	DeviceCode: 'device code already consumed',
}

/**
 * `browserDigest`: the digest of the current request's browser cookie (undefined without one), whose Latchkey session
 * is read with the provider session in the same statement and kept for the provider (browserSessionKey).
 */
export function databaseAdapter(db: Database, clients: ClientMetadataSource, sessionEnded: SessionEnded, ahead: ReadAhead, browserDigest: () => string | undefined = () => undefined) {
	// Prepared once (the SQL is not rebuilt per request; PostgreSQL plans it once per connection): a record of a
	// kind by id, by user code or by uid, still unexpired, with whether a provider session's Latchkey session is live.
	const lookup = (column: typeof oauthArtifacts.id | typeof oauthArtifacts.userCode | typeof oauthArtifacts.uid, name: string) =>
		db
			.select({ payload: oauthArtifacts.payload, consumedAt: oauthArtifacts.consumedAt, standsForLiveSession: liveLatchkeySession('oauth_artifacts') })
			.from(oauthArtifacts)
			.where(and(eq(oauthArtifacts.model, sql.placeholder('model')), eq(column, sql.placeholder('key')), unexpired(oauthArtifacts)))
			.limit(1)
			.prepare(name)
	const byId = lookup(oauthArtifacts.id, 'latchkey_oauth_by_id')
	const byUserCode = lookup(oauthArtifacts.userCode, 'latchkey_oauth_by_user_code')
	const byUid = lookup(oauthArtifacts.uid, 'latchkey_oauth_by_uid')

	const tokenWithItsOwn = prepareTokenWithItsOwn(db, 'latchkey_oauth_token_with_its_own')

	// A provider session with the grants it names (one per client it signed in to), for the authorization that follows.
	// Each grant by its primary key (a lateral lookup per name): as `g.id in (…)` PostgreSQL hashed the names and
	// scanned every unexpired grant against them — 0.5 ms a read with 256 grants, and growing with them.
	const sessionAuthorizations = sql`${outer('oauth_artifacts', 'payload')}->'authorizations'`
	const sessionWithGrants = db
		.select({
			payload: oauthArtifacts.payload,
			consumedAt: oauthArtifacts.consumedAt,
			standsForLiveSession: liveLatchkeySession('oauth_artifacts'),
			grants: sql<Array<{ id: string; payload: Record<string, unknown>; consumed: number | null }>>`(
				select coalesce(json_agg(json_build_object('id', g.id, 'payload', g.payload, 'consumed', floor(extract(epoch from g.consumed_at)))), '[]'::json)
				from jsonb_each(case when jsonb_typeof(${sessionAuthorizations}) = 'object' then ${sessionAuthorizations} else '{}'::jsonb end) as authorization_
				cross join lateral (
					select grant_.id, grant_.payload, grant_.consumed_at from oauth_artifacts grant_
					where grant_.model = 'Grant' and grant_.id = authorization_.value->>'grantId' and (grant_.expires_at is null or grant_.expires_at > now())
					limit 1
				) as g
			)`,
			// The browser's Latchkey session (`browser`: its cookie's digest, null for none), which the same request
			// reads next (provider.ts): one round trip where there were two.
			browser: sql<BrowserSessionJson | null>`(
				select json_build_object(
					'sessionId', s.id, 'amr', s.amr, 'aal', s.aal, 'authenticatedAt', s.authenticated_at,
					'account', json_build_object('id', u.id, 'email', u.email, 'name', u.name, 'emailVerifiedAt', u.email_verified_at, 'updatedAt', u.updated_at, 'appClaims', u.app_metadata->'claims')
				)
				from sessions s join users u on u.id = s.user_id
				where s.browser_token_hash = ${sql.placeholder('browser')} and s.revoked_at is null and s.expires_at > now() and u.status = 'active'
				limit 1
			)`,
		})
		.from(oauthArtifacts)
		.where(and(eq(oauthArtifacts.model, 'Session'), eq(oauthArtifacts.id, sql.placeholder('key')), unexpired(oauthArtifacts)))
		.limit(1)
		.prepare('latchkey_oauth_session_with_grants')

	// The writes, prepared as the reads are: the library writes a record or two at every request it serves.
	const upsertOf = (model: SQL) =>
		db
			.insert(oauthArtifacts)
			.values({
				model,
				id: sql.placeholder('id'),
				grantId: sql.placeholder('grantId'),
				userCode: sql.placeholder('userCode'),
				uid: sql.placeholder('uid'),
				payload: sql.placeholder('payload'),
				expiresAt: sql`now() + make_interval(secs => ${sql.placeholder('seconds')})`,
			})
			.onConflictDoUpdate({
				target: [oauthArtifacts.model, oauthArtifacts.id],
				set: { grantId: sql`excluded.grant_id`, userCode: sql`excluded.user_code`, uid: sql`excluded.uid`, payload: sql`excluded.payload`, expiresAt: sql`excluded.expires_at` },
			})
	const upsertArtifact = upsertOf(sql`${sql.placeholder('model')}`).prepare('latchkey_oauth_upsert')
	// The same insert for MADE_ONCE kinds: `set_config(…, true)` holds for the statement's own transaction, so
	// that it alone commits without waiting for the flush (a scalar subquery is evaluated once, before the row).
	const insertMadeOnce = upsertOf(sql`(select ${sql.placeholder('model')}::text where set_config('synchronous_commit', 'off', true) = 'off')`).prepare(
		'latchkey_oauth_insert_made_once',
	)
	const thisOne = and(eq(oauthArtifacts.model, sql.placeholder('model')), eq(oauthArtifacts.id, sql.placeholder('id')))
	// Only one request consumes a record: two that read it unconsumed at the same time (a code sent twice at once)
	// both reach here, and the second finds nothing to consume.
	const consumeArtifact = db
		.update(oauthArtifacts)
		.set({ consumedAt: sql`now()` })
		.where(and(thisOne, isNull(oauthArtifacts.consumedAt)))
		.returning({ id: oauthArtifacts.id })
		.prepare('latchkey_oauth_consume')
	const destroyArtifact = db.delete(oauthArtifacts).where(thisOne).returning({ payload: oauthArtifacts.payload }).prepare('latchkey_oauth_destroy')
	const revokeGrant = db.delete(oauthArtifacts).where(eq(oauthArtifacts.grantId, sql.placeholder('grantId'))).prepare('latchkey_oauth_revoke_grant')

	/** The token, keeping for this request what came with it (null for what is known not to be there). */
	async function findToken(model: string, id: string) {
		const [row] = await tokenWithItsOwn.execute({ model, key: id })
		if (!row) return undefined
		const { sessionUid, grantId, accountId } = row.payload
		if (typeof sessionUid === 'string') ahead.keep(sessionByUid(sessionUid), row.session?.live ? asRecord(row.session) : null)
		if (typeof grantId === 'string') ahead.keep(byKind('Grant', grantId), row.grant ? asRecord(row.grant) : null)
		if (typeof accountId === 'string') ahead.keep(accountKey(accountId), row.account)
		return asRecord(row)
	}

	async function findSession(id: string) {
		const digest = browserDigest()
		const [row] = await sessionWithGrants.execute({ key: id, browser: digest ?? null })
		// No row, no browser session read: the provider reads it alone then.
		if (row && digest !== undefined) ahead.keep(browserSessionKey(digest), row.browser ? browserSessionOf(row.browser) : null)
		if (!row || !row.standsForLiveSession) return undefined
		const authorizations = (row.payload.authorizations ?? {}) as Record<string, { grantId?: unknown }>
		const grants = new Map(row.grants.map((grant) => [grant.id, grant.consumed === null ? { ...grant.payload } : { ...grant.payload, consumed: grant.consumed }]))
		for (const { grantId } of Object.values(authorizations)) if (typeof grantId === 'string') ahead.keep(byKind('Grant', grantId), grants.get(grantId) ?? null)
		const session = asRecord(row)
		// A copy of its own: the library changes the session it is given in place, nested members too (the grant it
		// names for a client it signs in to), and the save compares what it is about to write with this.
		ahead.keep(storedSession(id), structuredClone(session))
		return session
	}

	return class DatabaseAdapter implements Adapter {
		constructor(readonly model: string) {}

		async upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
			if (this.model === 'Client') return
			ahead.forget(byKind(this.model, id))
			if (this.model === 'Session' && onlyExpirySlid(ahead.peek<AdapterPayload>(storedSession(id)), payload)) return
			if (this.model === 'Session') ahead.forget(storedSession(id))
			await (MADE_ONCE.has(this.model) ? insertMadeOnce : upsertArtifact).execute({
				model: this.model,
				id,
				grantId: payload.grantId ?? null,
				userCode: payload.userCode ?? null,
				uid: payload.uid ?? null,
				payload,
				seconds: expiresIn > 0 ? expiresIn : FALLBACK_SECONDS,
			})
		}

		async find(id: string): Promise<AdapterPayload | undefined> {
			if (this.model === 'Client') return clients.metadataOf(id)
			const known = ahead.take<AdapterPayload>(byKind(this.model, id))
			if (known !== undefined) return known ?? undefined
			if (TOKENS.has(this.model)) return findToken(this.model, id)
			if (this.model === 'Session') return findSession(id)
			return found(this.model, await byId.execute({ model: this.model, key: id }))
		}

		async findByUserCode(userCode: string) {
			return found(this.model, await byUserCode.execute({ model: this.model, key: userCode }))
		}

		async findByUid(uid: string) {
			if (this.model === 'Session') {
				const known = ahead.take<AdapterPayload>(sessionByUid(uid))
				if (known !== undefined) return known ?? undefined
			}
			return found(this.model, await byUid.execute({ model: this.model, key: uid }))
		}

		async consume(id: string): Promise<void> {
			ahead.forget(byKind(this.model, id))
			const [consumed] = await consumeArtifact.execute({ model: this.model, id })
			if (consumed) return
			// Consumed meanwhile by another request (or gone): refused, and its grant ended with all it issued, as the
			// library does with a code or refresh token it reads consumed (RFC 6749 §4.1.2, RFC 9700 §4.14.2).
			const grantId = found(this.model, await byId.execute({ model: this.model, key: id }))?.grantId
			if (typeof grantId === 'string') {
				ahead.forget(byKind('Grant', grantId))
				await Promise.all([revokeGrant.execute({ grantId }), destroyArtifact.execute({ model: 'Grant', id: grantId })])
			}
			const { errors } = await import('oidc-provider')
			throw new errors.InvalidGrant(CONSUMED[this.model] ?? 'grant already used')
		}

		async destroy(id: string): Promise<void> {
			ahead.forget(byKind(this.model, id))
			const [ended] = await destroyArtifact.execute({ model: this.model, id })
			if (this.model === 'Session' && ended) await sessionEnded(ended.payload)
		}

		async revokeByGrantId(grantId: string): Promise<void> {
			ahead.forget(byKind('Grant', grantId))
			// Every kind at once: a code used twice or a refresh token replayed ends all that the grant issued.
			await revokeGrant.execute({ grantId })
		}
	}
}

/**
 * A token (`model`, `key`: its id) with what the library reads next: the provider session it is bound to (by uid)
 * and whether that one's Latchkey session is live, its grant, its account (active only). Unexpired rows only.
 */
export function prepareTokenWithItsOwn(db: Database, name: string) {
	const boundSession = alias(oauthArtifacts, 'bound_session')
	const tokenGrant = alias(oauthArtifacts, 'token_grant')
	return db
		.select({
			payload: oauthArtifacts.payload,
			consumedAt: oauthArtifacts.consumedAt,
			session: { payload: boundSession.payload, consumedAt: boundSession.consumedAt, live: liveLatchkeySession('bound_session') },
			grant: { payload: tokenGrant.payload, consumedAt: tokenGrant.consumedAt },
			account: { id: users.id, email: users.email, name: users.name, emailVerifiedAt: users.emailVerifiedAt, updatedAt: users.updatedAt, appClaims: appClaimsColumn },
		})
		.from(oauthArtifacts)
		.leftJoin(boundSession, and(eq(boundSession.model, 'Session'), eq(boundSession.uid, sql`${oauthArtifacts.payload}->>'sessionUid'`), unexpired(boundSession)))
		.leftJoin(tokenGrant, and(eq(tokenGrant.model, 'Grant'), eq(tokenGrant.id, sql`${oauthArtifacts.payload}->>'grantId'`), unexpired(tokenGrant)))
		.leftJoin(users, and(eq(users.id, asUuid(sql`${oauthArtifacts.payload}->>'accountId'`)), eq(users.status, 'active')))
		.where(and(eq(oauthArtifacts.model, sql.placeholder('model')), eq(oauthArtifacts.id, sql.placeholder('key')), unexpired(oauthArtifacts)))
		.limit(1)
		.prepare(name)
}

/**
 * Up to `count` access tokens by id (placeholders `id0`…: a missing one is null), each with what its userinfo answer
 * needs: the token, the provider session it is bound to (by uid) and whether that one's Latchkey session is live (not
 * revoked, unexpired, of the token's account while that one is active), its grant, its account (active only), one
 * row per token (unexpired ones only). Flat columns, timestamps of the records as whether they are set: nothing is
 * parsed that the answer does not read. Always `count` placeholders, so that PostgreSQL's plan for the statement is
 * the same whatever number of ids is given (an array parameter would be planned anew at every execution when the
 * first ones held one id: measured at 5 times the cost).
 */
export function prepareUserinfoReads(db: Database, name: string, count: number) {
	const boundSession = alias(oauthArtifacts, 'bound_session')
	const tokenGrant = alias(oauthArtifacts, 'token_grant')
	const set = (column: AnyPgColumn) => sql<boolean>`(${column} is not null)`
	return db
		.select({
			id: oauthArtifacts.id,
			payload: oauthArtifacts.payload,
			consumed: set(oauthArtifacts.consumedAt),
			sessionPayload: boundSession.payload,
			sessionConsumed: set(boundSession.consumedAt),
			sessionLive: set(sessions.id),
			grantPayload: tokenGrant.payload,
			grantConsumed: set(tokenGrant.consumedAt),
			accountId: users.id,
			email: users.email,
			name: users.name,
			emailVerifiedAt: users.emailVerifiedAt,
			updatedAt: users.updatedAt,
		})
		.from(oauthArtifacts)
		.leftJoin(users, and(eq(users.id, asUuid(sql`${oauthArtifacts.payload}->>'accountId'`)), eq(users.status, 'active')))
		.leftJoin(tokenGrant, and(eq(tokenGrant.model, 'Grant'), eq(tokenGrant.id, sql`${oauthArtifacts.payload}->>'grantId'`), unexpired(tokenGrant)))
		.leftJoin(boundSession, and(eq(boundSession.model, 'Session'), eq(boundSession.uid, sql`${oauthArtifacts.payload}->>'sessionUid'`), unexpired(boundSession)))
		// The account read above, not a second time: a Latchkey session of another account is no live one here.
		.leftJoin(
			sessions,
			and(
				eq(sessions.id, asUuid(sql`${boundSession.payload}->>${sql.raw(`'${LATCHKEY_SESSION}'`)}`)),
				eq(sessions.userId, users.id),
				isNull(sessions.revokedAt),
				gt(sessions.expiresAt, sql`now()`),
			),
		)
		.where(
			and(
				eq(oauthArtifacts.model, 'AccessToken'),
				inArray(
					oauthArtifacts.id,
					Array.from({ length: count }, (_, i) => sql.placeholder(`id${i}`)),
				),
				unexpired(oauthArtifacts),
			),
		)
		.prepare(name)
}

/**
 * A provider session (`key`) as a signed-in browser's authorization needs it (single-sign-on.ts), in one statement:
 * the session; the browser's Latchkey session named by its cookie's digest (`browser`) — unrevoked, unexpired, of an
 * active account: its id and its account's, which must be the ones the provider session names, and which then make
 * that one live too; and the grant the provider session names for the client (`client`), unexpired.
 */
export function prepareSignedInRead(db: Database, name: string) {
	const clientGrant = alias(oauthArtifacts, 'client_grant')
	const set = (column: AnyPgColumn) => sql<boolean>`(${column} is not null)`
	return db
		.select({
			payload: oauthArtifacts.payload,
			consumed: set(oauthArtifacts.consumedAt),
			browserSessionId: sessions.id,
			browserAccountId: users.id,
			grantPayload: clientGrant.payload,
			grantConsumed: set(clientGrant.consumedAt),
		})
		.from(oauthArtifacts)
		.leftJoin(sessions, and(eq(sessions.browserTokenHash, sql.placeholder('browser')), isNull(sessions.revokedAt), gt(sessions.expiresAt, sql`now()`)))
		.leftJoin(users, and(eq(users.id, sessions.userId), eq(users.status, 'active')))
		.leftJoin(
			clientGrant,
			and(
				eq(clientGrant.model, 'Grant'),
				eq(clientGrant.id, sql`${oauthArtifacts.payload}->'authorizations'->(${sql.placeholder('client')}::text)->>'grantId'`),
				unexpired(clientGrant),
			),
		)
		.where(and(eq(oauthArtifacts.model, 'Session'), eq(oauthArtifacts.id, sql.placeholder('key')), unexpired(oauthArtifacts)))
		.limit(1)
		.prepare(name)
}

/** A browser session as the statement gives it (JSON: its times as text). */
type BrowserSessionJson = Omit<BrowserSessionRecord, 'authenticatedAt' | 'account'> & {
	authenticatedAt: string
	account: Omit<AccountRecord, 'emailVerifiedAt' | 'updatedAt'> & { emailVerifiedAt: string | null; updatedAt: string }
}

const browserSessionOf = ({ authenticatedAt, account, ...session }: BrowserSessionJson): BrowserSessionRecord => ({
	...session,
	authenticatedAt: new Date(authenticatedAt),
	account: { ...account, emailVerifiedAt: account.emailVerifiedAt === null ? null : new Date(account.emailVerifiedAt), updatedAt: new Date(account.updatedAt) },
})

/** The record as the library reads it: `consumed` when it was. */
const asRecord = (row: { payload: Record<string, unknown>; consumedAt: Date | null }): AdapterPayload =>
	row.consumedAt ? { ...row.payload, consumed: Math.floor(row.consumedAt.getTime() / 1000) } : { ...row.payload }

/** The record as the library reads it; none for a session whose Latchkey session ended. */
function found(model: string, [row]: Array<{ payload: Record<string, unknown>; consumedAt: Date | null; standsForLiveSession: boolean }>): AdapterPayload | undefined {
	if (!row || (model === 'Session' && !row.standsForLiveSession)) return undefined
	return asRecord(row)
}

/** Whether a session about to be saved is the one stored but for an expiry slid by less than SESSION_SLIDE_SECONDS. */
function onlyExpirySlid(stored: AdapterPayload | undefined, next: AdapterPayload): boolean {
	if (!stored || typeof stored.exp !== 'number' || typeof next.exp !== 'number' || next.exp - stored.exp >= SESSION_SLIDE_SECONDS) return false
	const { exp: _stored, ...before } = stored
	const { exp: _next, ...after } = next
	return Bun.deepEquals(before, after, true)
}

const unexpired = (artifact: { expiresAt: AnyPgColumn }) => or(isNull(artifact.expiresAt), gt(artifact.expiresAt, sql`now()`))

/** A text as a uuid, or null when it is not one (never an error from the cast). */
const asUuid = (text: SQL) => sql`(case when ${text} ~ '^[0-9a-fA-F-]{36}$' then (${text})::uuid end)`

/**
 * A column of the artifact `table` (the table's name or an alias) for the inside of a subquery: Drizzle names a
 * select's columns unqualified, which there would name the subquery's own.
 */
const outer = (table: string, column: string) => sql`${sql.identifier(table)}.${sql.identifier(column)}`

/**
 * Whether the provider session's Latchkey session is live (not revoked, not expired, its account active). A
 * provider session no one signed in to yet (an authorization request in progress) stands for none, and is kept.
 */
const liveLatchkeySession = (table: string) => sql<boolean>`(
	${outer(table, 'model')} <> 'Session'
	or ${outer(table, 'payload')}->>'accountId' is null
	or exists (
		select 1 from sessions join users on users.id = sessions.user_id
		where sessions.id = ${asUuid(sql`${outer(table, 'payload')}->>${sql.raw(`'${LATCHKEY_SESSION}'`)}`)}
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
