import { and, eq, gt, isNull, sql } from 'drizzle-orm'
import { digestOf, isOpaqueToken, newOpaqueToken } from '../crypto/opaque-tokens'
import type { Database } from '../db/client'
import { sessions, users, type UserRow } from '../db/schema'
import { clientOf } from '../http/client-ip'
import type { ClientInfo } from '../http/request-context'
import type { AuthService } from '../modules/auth/service'
import type { BrowserBinding } from '../modules/auth/sign-in'
import { cookie, readCookie } from './cookies'

/**
 * The browser's Latchkey session: a session of the `sessions` table (the API's own: listed, revoked and
 * capped like any other) whose `browser_token_hash` is the SHA-256 of the cookie `__Host-latchkey-session`.
 * Only the digest is stored. The OpenID Provider reads it (`current`) for single sign-on.
 */

export const SESSION_COOKIE = '__Host-latchkey-session'

/** The browser's signed-in session, as the pages and the provider see it. */
export interface BrowserSession {
	sessionId: string
	user: UserRow
	/** RFC 8176 methods the session was established with, and the assurance they give. */
	amr: string[]
	aal: 'aal1' | 'aal2'
	/** The last sign-in or check of the session's owner (an ID token's `auth_time`). */
	authenticatedAt: Date
	/** MFA_REQUIRED named the account and it had no factor: the session may only enrol one. */
	enrollmentOnly: boolean
	/** When the session ends (the cookie's Max-Age is what is left of it). */
	expiresAt: Date
}

export interface BrowserSessionsDeps {
	db: Database
	/** Ends a session as POST /auth/logout does (audit, `session.revoked` event). */
	auth: Pick<AuthService, 'logout'>
}

/** A client for the audit trail, from the request alone (the provider's callers may have no other). */
const clientFrom = (request: Request): ClientInfo => ({ ip: clientOf(request).ip, userAgent: request.headers.get('user-agent'), requestId: null })

export class BrowserSessions {
	private readonly lookup

	constructor(private readonly deps: BrowserSessionsDeps) {
		this.lookup = deps.db
			.select({ session: sessions, user: users })
			.from(sessions)
			.innerJoin(users, eq(users.id, sessions.userId))
			.where(
				and(
					eq(sessions.browserTokenHash, sql.placeholder('hash')),
					isNull(sessions.revokedAt),
					gt(sessions.expiresAt, sql`now()`),
					eq(users.status, 'active'),
				),
			)
			.limit(1)
			.prepare('latchkey_browser_session')
	}

	/**
	 * The browser's session: undefined when the cookie is missing or malformed, names no session, or its
	 * session was revoked (logout, DELETE /users/me/sessions/{id}, a password change…), expired, or belongs
	 * to a deactivated account.
	 */
	async current(request: Request): Promise<BrowserSession | undefined> {
		const hash = this.sessionDigestOf(request)
		if (hash === undefined) return undefined
		const [row] = await this.lookup.execute({ hash })
		if (!row) return undefined
		const { session, user } = row
		return {
			sessionId: session.id,
			user,
			amr: session.amr,
			aal: session.aal,
			authenticatedAt: session.authenticatedAt,
			enrollmentOnly: session.enrollmentOnly,
			expiresAt: session.expiresAt,
		}
	}

	/**
	 * What names the browser's session in `sessions.browser_token_hash`: the digest of its cookie, when the request
	 * carries one of the right shape. The OpenID Provider reads the session by it with its own (oauth/adapter.ts).
	 */
	sessionDigestOf(request: Request): string | undefined {
		const token = readCookie(request, SESSION_COOKIE)
		return isOpaqueToken(token) ? digestOf(token) : undefined
	}

	/**
	 * Ends the browser's session, if it has a live one, as a logout (audit, `session.revoked`). Answers the
	 * Set-Cookie value that removes the cookie, to send whether or not there was a session.
	 */
	async end(request: Request, client: ClientInfo = clientFrom(request)): Promise<string> {
		const current = await this.current(request)
		if (current) {
			const { user, sessionId, amr, aal, enrollmentOnly, authenticatedAt } = current
			await this.deps.auth.logout({ user, sessionId, assurance: { amr, aal, enrollmentOnly }, authenticatedAt }, 'local', client)
		}
		return cookie(SESSION_COOKIE, '', 0)
	}

	/** A new cookie value and what binds the session about to start to it (the digest, and the client that asked). */
	newBinding(clientId?: string): { token: string; binding: BrowserBinding } {
		const token = newOpaqueToken()
		return { token, binding: { browserTokenHash: digestOf(token), ...(clientId ? { clientId } : {}) } }
	}

	/** The Set-Cookie value of a session's cookie, kept as long as the session lives. */
	cookie(token: string, maxAgeSeconds: number): string {
		return cookie(SESSION_COOKIE, token, maxAgeSeconds)
	}
}
