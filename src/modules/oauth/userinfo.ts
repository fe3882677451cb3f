import type { Database } from '../../db/client'
import type { OAuthClientRow } from '../../db/schema'
import { prepareUserinfoReads } from './adapter'
import { accountClaims, asksForOrganizations, CLAIMS_BY_SCOPE } from './provider'

/*
 * `GET /oauth2/userinfo` in its plain case — a bearer access token in the header, nothing else — answered here in
 * one query, without handing the request to the library (its Koa application and the bridge to it cost several
 * times the read itself). This only ever answers a success, and only when every check the library makes holds on
 * the same rows; anything else — another way of sending the token, DPoP, a browser's cross-origin request, a token
 * with requested claims or an audience, a token of the organization scopes (`organizations`, `organization:{id}`: their
 * claims are memberships, read by the library's claims()), any failed check — returns undefined, and the library answers as always
 * (its own errors, WWW-Authenticate and all). test/oauth.protocol.test.ts holds both answers to be the same.
 */

/** The library's opaque token ids (nanoid's alphabet, 256 bits by default). */
const BEARER = /^Bearer ([A-Za-z0-9_-]{22,128})$/

/** Members of a token that ask for more than the plain case: requested claims, an audience, proof of possession… */
const NOT_PLAIN = ['claims', 'aud', 'rar', 'x5t#S256', 'jkt', 'jwt', 'format'] as const

type Payload = Record<string, unknown>

export interface UserinfoShortcutDeps {
	db: Database
	/** The active client (kept in memory, forgotten when changed: clients.ts). */
	findActiveClient(clientId: string): Promise<OAuthClientRow | undefined>
}

/**
 * Tokens read in one statement at most. The statement always has BATCH places, and those a batch leaves over repeat
 * its first id: the same row is read once whatever the repeats. Left null, they made PostgreSQL keep
 * planning the statement at every execution on a connection whose first five executions read one token each — a
 * plan with seven nulls looks cheaper than the generic plan for eight tokens, so the plan cache never switched to the
 * generic plan, and each statement paid 0.3–0.7 ms of planning, more than its execution (docs/performance.md). With
 * the places filled, a custom plan costs what the generic plan does, and the plan cache keeps the generic one from
 * the sixth execution on.
 */
const BATCH = 8
/**
 * Statements out at once. A request that arrives while these are out waits for the next one, with the others that
 * arrive meanwhile: under load one statement reads several tokens, sharing what a statement costs besides its rows
 * (PostgreSQL spent about 65 µs a token read alone, 30 µs a token read in eights: docs/performance.md), and a
 * request alone is read at once. A request never joins a statement already
 * sent, so what it reads was committed by the time it arrived at the latest: a revocation is seen at the next one.
 */
const IN_FLIGHT = 2

type Read = ReturnType<typeof prepareUserinfoReads>
type Row = Awaited<ReturnType<Read['execute']>>[number]
interface Waiting {
	id: string
	done(row: Row | undefined): void
	failed(error: unknown): void
}

export class UserinfoShortcut {
	private query: Read | undefined
	private readonly waiting: Waiting[] = []
	private out = 0

	constructor(private readonly deps: UserinfoShortcutDeps) {}

	/** The claims response, or undefined when the library must answer. */
	async answer(request: Request): Promise<Response | undefined> {
		const { headers } = request
		if (request.method !== 'GET' || request.url.includes('?') || headers.has('origin') || headers.has('dpop') || headers.has('content-length') || headers.has('transfer-encoding')) return undefined
		const id = BEARER.exec(headers.get('authorization') ?? '')?.[1]
		if (!id) return undefined
		const row = await this.read(id)
		if (!row?.accountId || !row.grantPayload || row.consumed || row.grantConsumed) return undefined
		const token = row.payload
		const grant = row.grantPayload
		const now = Math.floor(Date.now() / 1000)
		const { clientId, accountId, grantId } = token
		if (
			token.kind !== 'AccessToken' ||
			token.jti !== id ||
			!fresh(token, now) ||
			NOT_PLAIN.some((member) => token[member] !== undefined) ||
			typeof clientId !== 'string' ||
			accountId !== row.accountId ||
			typeof grantId !== 'string' ||
			typeof token.scope !== 'string'
		)
			return undefined
		const tokenScopes = new Set(token.scope.split(' '))
		// The organization scopes' claims are memberships read as they are now: the library's own claims() reads them.
		if (!tokenScopes.has('openid') || asksForOrganizations(token.scope)) return undefined
		// The grant: this client's, this account's, unexpired, nothing in it rejected.
		if (grant.kind !== 'Grant' || grant.clientId !== clientId || grant.accountId !== accountId || !fresh(grant, now) || grant.rejected !== undefined) return undefined
		// A token bound to the browser's session lives as long as that session, and the session still names this grant.
		if (token.expiresWithSession) {
			const session = row.sessionPayload
			if (!session || !row.sessionLive || row.sessionConsumed || typeof token.sessionUid !== 'string') return undefined
			const authorization = (session.authorizations as Record<string, { grantId?: unknown }> | undefined)?.[clientId]
			if (session.accountId !== accountId || authorization?.grantId !== grantId || !fresh(session, now)) return undefined
		}
		if (!(await this.deps.findActiveClient(clientId))) return undefined
		const granted = (grant.openid as { scope?: unknown } | undefined)?.scope
		if (typeof granted !== 'string') return undefined
		// As the library: the grant's scopes that the token carries, in the grant's order, each with its claims.
		const available = accountClaims({ id: row.accountId, email: row.email as string, name: row.name as string, emailVerifiedAt: row.emailVerifiedAt, updatedAt: row.updatedAt as Date })
		const claims: Record<string, unknown> = {}
		for (const scope of granted.split(' ')) {
			if (!tokenScopes.has(scope)) continue
			for (const claim of CLAIMS_BY_SCOPE[scope] ?? []) if (available[claim] !== undefined) claims[claim] = available[claim]
		}
		// The library's headers: a request from another origin is its to answer (CORS), hence Vary.
		return new Response(JSON.stringify(claims), { headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', vary: 'Origin' } })
	}

	/** The token's row (undefined: none, or more than one, which is the library's to sort out). */
	private read(id: string): Promise<Row | undefined> {
		return new Promise((done, failed) => {
			this.waiting.push({ id, done, failed })
			if (this.out < IN_FLIGHT) void this.send()
		})
	}

	private async send() {
		const batch = this.waiting.splice(0, BATCH)
		if (batch.length === 0) return
		this.out++
		try {
			this.query ??= prepareUserinfoReads(this.deps.db, 'latchkey_oauth_userinfo', BATCH)
			const ids = [...new Set(batch.map((waiting) => waiting.id))]
			const params: Record<string, string> = {}
			// The places left over repeat the first id, never null (see BATCH).
			for (let i = 0; i < BATCH; i++) params[`id${i}`] = ids[i] ?? (ids[0] as string)
			const rows = await this.query.execute(params)
			const byId = new Map<string, Row | undefined>()
			for (const row of rows) byId.set(row.id, byId.has(row.id) ? undefined : row)
			for (const waiting of batch) waiting.done(byId.get(waiting.id))
		} catch (error) {
			for (const waiting of batch) waiting.failed(error)
		} finally {
			this.out--
			if (this.waiting.length > 0) void this.send()
		}
	}
}

/** As the library's check of a stored record's times (its clock tolerance aside: a doubtful case is its to answer). */
function fresh(payload: Payload, now: number): boolean {
	if (typeof payload.exp !== 'number' || payload.exp <= now) return false
	if (payload.nbf !== undefined && (typeof payload.nbf !== 'number' || payload.nbf > now)) return false
	return payload.iat === undefined || typeof payload.iat === 'number'
}
