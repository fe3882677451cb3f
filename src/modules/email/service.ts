import { and, desc, eq, getTableColumns, gt, inArray, isNull, sql } from 'drizzle-orm'
import type { Config } from '../../config/env'
import { sameDigest } from '../../crypto/opaque-tokens'
import type { Database } from '../../db/client'
import { sqlState } from '../../db/client'
import { emailTokens, users, type EmailTokenRow, type UserRow } from '../../db/schema'
import { AppError, Conflict, ValidationFailed, type FieldError } from '../../http/problem'
import { enqueue, queuedSince } from '../../jobs/queue'
import { PermanentJobError } from '../../jobs/handler'
import type { Mailer, OutgoingMail } from '../../mail/mailer'
import type { WayInNotices } from '../../mail/notices'
import { enqueueMail, MAIL_QUEUE } from '../../mail/outbox'
import type { MailKind, MailTemplates } from '../../mail/templates'
import type { AuditLog, ClientInfo } from '../audit/service'
import type { LoginLockout } from '../auth/lockout'
import type { PasswordHasher } from '../auth/password'
import { revokeUserSessions, type Queryable } from '../auth/sessions'
import { removeRecentWaysNotAddedAtAal2, removeWaysAddedUnverified, waysInOf } from '../auth/ways-in'
import { normalizeEmail } from '../users/model'
import { userChangeEvents } from '../users/service'
import { recordWebhookEvents } from '../webhooks/outbox'
import { admitCodeTry, purgeCodeFailures, tooManyCodes, wrongCodesSince, type CodeKind } from './code-limit'
import { hashCode, hashLinkToken, inWords, mailThrottleKey, newCode, newLinkToken } from './tokens'

export type TokenPurpose = EmailTokenRow['purpose']

/** The queues of the job worker this module feeds and serves (the outbox's lives in the mail floor). */
export { MAIL_QUEUE }
export const MAIL_REQUEST_QUEUE = 'mail-request'

/** A reauthentication code by mail lives this long: it is typed into the page that asked for it, at once. */
export const REAUTHENTICATION_CODE_SECONDS = 600

/** A sign-in code by mail lives this long (API.md "Pages": 10 minutes), for the same reason. */
export const SIGN_IN_CODE_SECONDS = 600

/** Wrong tries a code survives; the fifth wrong one voids it (and its link). */
export const CODE_ATTEMPTS = 5

/** What a code is compared with where an address has no live code: no 6 digits hash to its digest. */
const DECOY = { id: '00000000-0000-0000-0000-000000000000', codeHash: hashCode('00000000-0000-0000-0000-000000000000', 'no code') }

/** Whose count of wrong codes a token's purpose shares: each route's (verification and email change share theirs). */
const codeKindOf = (purpose: TokenPurpose): CodeKind => (purpose === 'email-change' ? 'verification' : purpose)

/** A proof presented at /auth/email-verifications or /auth/password-resets: the link's token, or the address and its code. */
export type Proof = { token: string } | { email: string; code: string }

export const invalidCode = () =>
	new AppError('invalid-code', 'The token or code is wrong, used or replaced by a newer one; ask for a new mail')
const codeExpired = () => new AppError('code-expired', 'The token has expired; ask for a new mail')
export const mailUnavailable = () =>
	new AppError('mail-unavailable', 'This service cannot send mail now (no SMTP server is configured); try again later or contact its operator')

export interface EmailServiceDeps {
	db: Database
	audit: AuditLog
	hasher: PasswordHasher
	lockout: Pick<LoginLockout, 'clear'>
	mailer: Mailer
	templates: MailTemplates
	settings: Config['mail']
	/** The password policy (the users module's). */
	passwordProblem: (password: string) => FieldError | undefined
	/** Notices of ways in added or removed, and the review after a recovery. */
	notices: WayInNotices
}

/** A mail request as queued by a 202 route: the work (and its timing) happens in the job worker. */
export interface MailRequest {
	purpose: 'verification' | 'recovery' | 'sign-in'
	email: string
	client: ClientInfo
}

type Tx = Queryable

/** A sign-in code checked: the account and what spends the code, or a refusal to count before it is thrown. */
export type SignInCodeCheck =
	| { kind: 'right'; user: UserRow; spend: (tx: Tx) => Promise<boolean> }
	| { kind: 'wrong'; userId: string | undefined; refuse: () => Promise<never> }
	| { kind: 'too-many-codes'; refuse: () => Promise<never> }

/**
 * Verification, recovery and email change (API.md "Email"). Each mail is written to the outbox (the
 * jobs table) in the transaction that writes its token, so it exists exactly when the token does; the
 * job worker sends it. The two 202 routes only queue a request: whether the account exists, is
 * verified or is deactivated is looked at by the worker, so the route costs the same for every
 * address, and the resend limit is kept there, under a lock on the account.
 */
export class EmailService {
	constructor(private readonly deps: EmailServiceDeps) {}

	passwordProblem(password: string) {
		return this.deps.passwordProblem(password)
	}

	get verification() {
		return this.deps.settings.verification
	}

	/** 503 mail-unavailable where a request needs a mail and none can be sent (production without SMTP). */
	assertMailAvailable() {
		if (!this.deps.mailer.available) throw mailUnavailable()
	}

	/** POST /auth/verification-requests, /auth/recovery-requests and /auth/sign-in-codes: queues the request, whatever the address. */
	async request(purpose: MailRequest['purpose'], email: string, client: ClientInfo): Promise<void> {
		this.assertMailAvailable()
		const request: MailRequest = { purpose, email: normalizeEmail(email), client }
		await enqueue(this.deps.db, { queue: MAIL_REQUEST_QUEUE, payload: { ...request } })
	}

	/** The job worker's side of a request: the mail, if the address has an account that should get one. */
	async handleRequest(payload: Record<string, unknown>): Promise<void> {
		const request = readMailRequest(payload)
		// Turned off since the request was queued: it sends nothing.
		if (request.purpose === 'sign-in' && !this.deps.settings.codeSignIn) return
		const issued = await this.deps.db.transaction(async (tx) => {
			if (request.purpose === 'recovery' || request.purpose === 'sign-in') {
				const user = await lockActiveUser(tx, eq(users.email, request.email))
				return user && (await this.issueAndQueue(tx, user, request.purpose, user.email)) ? user : undefined
			}
			const unverified = await lockActiveUser(tx, and(eq(users.email, request.email), isNull(users.emailVerifiedAt)))
			if (unverified) return (await this.issueAndQueue(tx, unverified, 'verification', unverified.email)) ? unverified : undefined
			// The new address of a pending change asks again: its confirmation mail is sent again.
			const changing = await lockActiveUser(tx, eq(users.pendingEmail, request.email))
			return changing && (await this.issueAndQueue(tx, changing, 'email-change', request.email)) ? changing : undefined
		})
		if (!issued) return
		const event = request.purpose === 'recovery' ? 'password.recovery-requested' : request.purpose === 'sign-in' ? 'login.code-sent' : 'email.verification-requested'
		await this.deps.audit.record(event, request.client, { subjectId: issued.id })
	}

	/** At sign-up (in its transaction): the first verification mail, unless verification is off or mail cannot go. */
	async onSignUp(tx: Tx, user: UserRow): Promise<boolean> {
		if (this.verification === 'off' || !this.deps.mailer.available) return false
		return this.issueAndQueue(tx, user, 'verification', user.email)
	}

	/**
	 * A user's own email change (in the PUT's transaction, the account locked): the new address waits as
	 * `pendingEmail` for its confirmation; the old one gets a notice. 409 when the new address is taken now.
	 */
	async onEmailChangeRequested(tx: Tx, user: UserRow, newEmail: string): Promise<void> {
		const [taken] = await tx.select({ id: users.id }).from(users).where(eq(users.email, newEmail))
		if (taken) throw new Conflict('email-taken', 'An account with this email already exists')
		await this.issueAndQueue(tx, { ...user, pendingEmail: newEmail }, 'email-change', newEmail)
		await this.queueMail(tx, 'email-change-notice', user.email, { name: user.name, newEmail })
	}

	/** POST /auth/email-verifications: proves the address (the account's, or a pending change's, which then applies). */
	async verifyEmail(proof: Proof, client: ClientInfo): Promise<UserRow> {
		const outcome = await this.deps.db.transaction(async (tx) => {
			const checked = await this.checkProof(tx, proof, 'verification', ['verification', 'email-change'])
			if (checked.kind !== 'valid') return checked
			const { row } = checked
			const user = await lockActiveUser(tx, eq(users.id, row.userId))
			const now = new Date()
			let updated: UserRow | undefined
			if (user && row.purpose === 'verification' && user.email === row.email) {
				;[updated] = await tx
					.update(users)
					.set({ emailVerifiedAt: user.emailVerifiedAt ?? now, updatedAt: now })
					.where(eq(users.id, user.id))
					.returning()
			} else if (user && row.purpose === 'email-change' && user.pendingEmail === row.email) {
				;[updated] = await tx
					.update(users)
					.set({ email: row.email, pendingEmail: null, emailVerifiedAt: now, updatedAt: now, credentialsVersion: user.credentialsVersion + 1 })
					.where(eq(users.id, user.id))
					.returning()
					.catch((error: unknown) => {
						throw sqlState(error).code === '23505' ? new Conflict('email-taken', 'The new address was taken by another account meanwhile') : error
					})
			}
			// The account was deactivated, or its address moved on since this mail: the proof opens nothing.
			if (!updated) return { kind: 'invalid' as const, purpose: row.purpose }
			await markUsed(tx, row.id)
			await recordWebhookEvents(tx, userChangeEvents(user ?? null, updated))
			if (user?.emailVerifiedAt === null) await this.onAddressProved(tx, updated, client)
			return { kind: 'applied' as const, user: updated, before: user, purpose: row.purpose }
		})
		if (outcome.kind !== 'applied') return this.refuse(outcome, client)
		const who = { actorId: outcome.user.id, subjectId: outcome.user.id }
		if (outcome.purpose === 'email-change') await this.deps.audit.record('email.changed', client, { ...who, details: { confirmed: true } })
		else await this.deps.audit.record('email.verified', client, who)
		return outcome.user
	}

	/**
	 * POST /auth/password-resets. The proof is checked first (a wrong code counts against it and is
	 * committed as such), then the password is hashed with no transaction open, then one short
	 * transaction spends the proof, if it is still live, and applies the reset.
	 */
	async resetPassword(proof: Proof, password: string, client: ClientInfo): Promise<void> {
		const { db, hasher, lockout, audit } = this.deps
		const weakness = this.deps.passwordProblem(password)
		if (weakness) throw new ValidationFailed([weakness])
		const checked = await db.transaction((tx) => this.checkProof(tx, proof, 'recovery', ['recovery']))
		if (checked.kind !== 'valid') return this.refuse(checked, client)
		const passwordHash = await hasher.hash(password)
		const outcome = await db.transaction(async (tx) => {
			const [row] = await tx.select().from(emailTokens).where(eq(emailTokens.id, checked.row.id)).for('update')
			if (!row || row.usedAt || row.voidedAt) return { kind: 'invalid' as const, purpose: 'recovery' as const }
			const user = await lockActiveUser(tx, eq(users.id, row.userId))
			if (!user || user.email !== row.email) return { kind: 'invalid' as const, purpose: 'recovery' as const }
			const now = new Date()
			const [updated] = await tx
				.update(users)
				.set({
					passwordHash,
					// The mail reached this address: it is proved. A pending change is cancelled (whoever asked for it may be the intruder).
					emailVerifiedAt: user.emailVerifiedAt ?? now,
					pendingEmail: null,
					credentialsVersion: user.credentialsVersion + 1,
					updatedAt: now,
				})
				.where(eq(users.id, user.id))
				.returning()
			if (!updated) return { kind: 'invalid' as const, purpose: 'recovery' as const }
			await recordWebhookEvents(tx, userChangeEvents(user, updated, true))
			await markUsed(tx, row.id)
			await voidTokens(tx, user.id, ['recovery', 'email-change', 'sign-in'])
			const revoked = await revokeUserSessions(tx, user.id, 'password-reset')
			// What an intruder may have added goes with the sessions; the owner hears what remains.
			const removed = [
				...(user.emailVerifiedAt === null ? await removeWaysAddedUnverified(tx, user.id) : []),
				...(await removeRecentWaysNotAddedAtAal2(tx, user.id, this.deps.settings.recoveryReviewSeconds)),
			]
			await this.deps.notices.queueRecoveryReview(tx, updated, { removed, remaining: await waysInOf(tx, updated) }, client)
			return { kind: 'reset' as const, user, revoked }
		})
		if (outcome.kind !== 'reset') return this.refuse(outcome, client)
		await lockout.clear(outcome.user.email)
		await audit.record('password.reset', client, {
			actorId: outcome.user.id,
			subjectId: outcome.user.id,
			details: { sessionsRevoked: outcome.revoked },
		})
	}

	/**
	 * POST /auth/reauthentication/challenges `{ method: "email" }`: a 6-digit code to the account's address, for
	 * accounts with neither a password nor a second factor to prove it with (one made through a provider).
	 * Held to one mail per MAIL_RESEND_SECONDS like the others; answers the same either way.
	 */
	async sendReauthenticationCode(user: UserRow, hasSecondFactor: boolean, client: ClientInfo): Promise<void> {
		if (user.passwordHash !== null || hasSecondFactor)
			throw new Conflict('conflict', 'This account proves it is you with its password or second factor; a code by mail is for accounts that have neither')
		this.assertMailAvailable()
		const queued = await this.deps.db.transaction(async (tx) => {
			const locked = await lockActiveUser(tx, eq(users.id, user.id))
			return locked ? this.issueAndQueue(tx, locked, 'reauthentication', locked.email) : false
		})
		if (!queued) return
		await this.deps.audit.record('reauthentication.code-sent', client, { actorId: user.id, subjectId: user.id })
	}

	/**
	 * A reauthentication code checked (a wrong one counts against it, committed as such); what spends it, in the
	 * session's renewal, when it is right. Refused codes throw as every mailed code does.
	 */
	async checkReauthenticationCode(user: UserRow, code: string, client: ClientInfo): Promise<(tx: Tx) => Promise<boolean>> {
		const checked = await this.deps.db.transaction((tx) => this.checkProof(tx, { email: user.email, code }, 'reauthentication', ['reauthentication']))
		if (checked.kind !== 'valid' || checked.row.userId !== user.id) return this.refuse(checked.kind === 'valid' ? { kind: 'invalid' } : checked, client)
		const { id } = checked.row
		return async (tx) =>
			(await tx.update(emailTokens).set({ usedAt: sql`now()` }).where(and(eq(emailTokens.id, id), isNull(emailTokens.usedAt), isNull(emailTokens.voidedAt))).returning({ id: emailTokens.id }))
				.length === 1
	}

	/**
	 * POST /auth/email-code: the code checked as every mailed code is (10 wrong ones per address a day, the fifth
	 * wrong one voids it; a wrong one is committed as such), for the active account whose address it went to. A
	 * right code comes with what spends it, in the transaction that starts the session (or at once, when a second
	 * factor is still owed): the spend also proves the address when it was not yet (the code reached that mailbox).
	 * A refusal is handed back to be counted by the caller (the login lockout), then thrown by `refuse`.
	 */
	async checkSignInCode(email: string, code: string, client: ClientInfo): Promise<SignInCodeCheck> {
		const address = normalizeEmail(email)
		const { db } = this.deps
		const checked = await db.transaction((tx) => this.checkProof(tx, { email: address, code }, 'sign-in', ['sign-in']))
		if (checked.kind === 'too-many-codes') return { kind: 'too-many-codes', refuse: () => this.refuse(checked, client) }
		// The same statement for every address, known or not: the account the address names, if any.
		const [account] = await db.select().from(users).where(eq(users.email, address))
		if (checked.kind !== 'valid' || !account || account.id !== checked.row.userId || account.status !== 'active') {
			// A deactivated account (or one whose address moved on since the mail) is refused as an unknown address is.
			const refused = checked.kind === 'valid' ? { kind: 'invalid' as const, purpose: checked.row.purpose, userId: checked.row.userId } : checked
			return { kind: 'wrong', userId: account?.id, refuse: () => this.refuse(refused, client) }
		}
		const { id } = checked.row
		const spend = async (tx: Tx) => {
			// Of requests that bring the code at once, the one that holds its row spends it; the others give up rather
			// than wait for it while holding the account (which proving the address below locks: they would deadlock).
			const spent = await tx
				.update(emailTokens)
				.set({ usedAt: sql`now()` })
				.where(
					inArray(
						emailTokens.id,
						tx
							.select({ id: emailTokens.id })
							.from(emailTokens)
							.where(and(eq(emailTokens.id, id), isNull(emailTokens.usedAt), isNull(emailTokens.voidedAt), gt(emailTokens.expiresAt, sql`now()`)))
							.for('update', { skipLocked: true }),
					),
				)
				.returning({ id: emailTokens.id })
			if (spent.length !== 1) return false
			if (account.emailVerifiedAt === null) await this.proveAddressBySignIn(tx, account, client)
			return true
		}
		return { kind: 'right', user: account, spend }
	}

	/** A sign-in code reached the mailbox: the address is proved, as a verification proves it (and with what that removes). */
	private async proveAddressBySignIn(tx: Tx, user: UserRow, client: ClientInfo) {
		const [proved] = await tx
			.update(users)
			.set({ emailVerifiedAt: sql`now()`, updatedAt: sql`now()` })
			.where(and(eq(users.id, user.id), eq(users.email, user.email), isNull(users.emailVerifiedAt)))
			.returning()
		if (!proved) return
		await recordWebhookEvents(tx, userChangeEvents(user, proved))
		await this.onAddressProved(tx, proved, client)
	}

	/**
	 * The account's address was just proved by a verification: what was added while it was not goes, and every
	 * session with it (whoever made them could not read this mailbox); the owner gets a notice of each removal.
	 */
	private async onAddressProved(tx: Tx, user: UserRow, client: ClientInfo) {
		const removed = await removeWaysAddedUnverified(tx, user.id)
		await revokeUserSessions(tx, user.id, 'email-verified')
		await this.deps.notices.queue(tx, user, removed, client)
	}

	/** Audits a refused proof and throws its problem. */
	private async refuse(
		outcome: { kind: 'invalid' | 'expired'; purpose?: TokenPurpose; userId?: string; voided?: boolean } | { kind: 'too-many-codes'; codeKind: CodeKind; retryAfterSeconds: number },
		client: ClientInfo,
	): Promise<never> {
		if (outcome.kind === 'too-many-codes') {
			await this.deps.audit.record('code.rejected', client, { details: { reason: outcome.kind, purpose: outcome.codeKind } })
			throw tooManyCodes(outcome.retryAfterSeconds, outcome.codeKind)
		}
		await this.deps.audit.record('code.rejected', client, {
			subjectId: outcome.userId,
			details: { reason: outcome.kind, purpose: outcome.purpose ?? null, ...(outcome.voided ? { codeVoided: true } : {}) },
		})
		throw outcome.kind === 'expired' ? codeExpired() : invalidCode()
	}

	/** Deletes wrong codes that count no more (older than 24 hours and than any live code); returns how many went. */
	purgeCodeFailures(): Promise<number> {
		const { verificationTtlSeconds, recoveryTtlSeconds } = this.deps.settings
		return purgeCodeFailures(this.deps.db, Math.max(verificationTtlSeconds, recoveryTtlSeconds, REAUTHENTICATION_CODE_SECONDS, SIGN_IN_CODE_SECONDS))
	}

	/**
	 * Finds the token row a proof names, locked. A link token is found by its hash; a code by the address it
	 * went to, among that address's live rows, once the address's count of wrong codes of this kind admits
	 * another try (10 in any 24 hours). A wrong code is one row in code_failures, and that is all it writes:
	 * a code's own five tries are counted from there (the wrong codes of its kind and address since it was
	 * made), so that an address with a live code and one without (unknown, or no mail asked) cost the same
	 * statements, rows written and hashes (a decoy stands in for the missing row).
	 */
	private async checkProof(tx: Tx, proof: Proof, codeKind: CodeKind, purposes: TokenPurpose[]) {
		const now = new Date()
		if ('token' in proof) {
			const [row] = await tx
				.select()
				.from(emailTokens)
				.where(and(eq(emailTokens.tokenHash, hashLinkToken(proof.token)), inArray(emailTokens.purpose, purposes)))
				.for('update')
			if (!row || row.usedAt || row.voidedAt) return { kind: 'invalid' as const, purpose: row?.purpose, userId: row?.userId }
			// Five wrong codes void the link as well: the proof is under attack.
			if ((await wrongCodesSince(tx, codeKindOf(row.purpose), row.email, row.createdAt)) >= CODE_ATTEMPTS)
				return { kind: 'invalid' as const, purpose: row.purpose, userId: row.userId }
			if (row.expiresAt <= now) return { kind: 'expired' as const, purpose: row.purpose, userId: row.userId }
			return { kind: 'valid' as const, row }
		}
		const address = normalizeEmail(proof.email)
		const admitted = await admitCodeTry(tx, codeKind, address)
		if (!admitted.admitted) return { kind: 'too-many-codes' as const, codeKind, retryAfterSeconds: admitted.retryAfterSeconds }
		// Read without a lock, so that a wrong code locks no row an unknown address would not.
		const rows = await tx
			.select({ ...getTableColumns(emailTokens), wrongTries: admitted.wrongSinceIssued })
			.from(emailTokens)
			.where(
				and(
					eq(emailTokens.email, address),
					inArray(emailTokens.purpose, purposes),
					isNull(emailTokens.usedAt),
					isNull(emailTokens.voidedAt),
					gt(emailTokens.expiresAt, now),
				),
			)
			.orderBy(desc(emailTokens.createdAt))
		const live = rows.filter((row) => row.wrongTries < CODE_ATTEMPTS)
		// Every live row is compared, match or not, so the time taken says nothing about which one matched, and a
		// decoy that no code matches stands in when there is none.
		const matches = (live.length > 0 ? live : [DECOY]).map((row) => sameDigest(hashCode(row.id, proof.code), row.codeHash))
		const match = live[matches.indexOf(true)]
		if (match) {
			// Locked now and checked again: a link or a newer mail may have spent or voided it meanwhile.
			const [row] = await tx.select().from(emailTokens).where(eq(emailTokens.id, match.id)).for('update')
			if (row && !row.usedAt && !row.voidedAt && row.expiresAt > now) return { kind: 'valid' as const, row }
			return { kind: 'invalid' as const, purpose: match.purpose, userId: match.userId }
		}
		await admitted.failed()
		const voided = live.some((row) => row.wrongTries + 1 >= CODE_ATTEMPTS)
		return { kind: 'invalid' as const, purpose: live[0]?.purpose, userId: live[0]?.userId, voided }
	}

	/**
	 * A new token for a purpose (voiding the user's older ones of it) and its mail, unless a mail of this
	 * kind went to this address within MAIL_RESEND_SECONDS. Returns whether a mail was queued.
	 */
	private async issueAndQueue(tx: Tx, user: UserRow, purpose: TokenPurpose, address: string): Promise<boolean> {
		const { settings } = this.deps
		if (await queuedSince(tx, mailThrottleKey(purpose, address), settings.resendSeconds)) return false
		await voidTokens(tx, user.id, [purpose])
		const id = Bun.randomUUIDv7()
		const token = newLinkToken()
		const code = newCode()
		const ttl =
			purpose === 'recovery'
				? settings.recoveryTtlSeconds
				: purpose === 'reauthentication'
					? REAUTHENTICATION_CODE_SECONDS
					: purpose === 'sign-in'
						? SIGN_IN_CODE_SECONDS
						: settings.verificationTtlSeconds
		await tx.insert(emailTokens).values({
			id,
			userId: user.id,
			purpose,
			email: address,
			tokenHash: hashLinkToken(token),
			codeHash: hashCode(id, code),
			expiresAt: new Date(Date.now() + ttl * 1000),
		})
		// The token rides in the fragment: browsers never send it to a server, so scanners that fetch the link spend nothing.
		// A reauthentication or a sign-in is typed into the page that asked for it: its mail carries the code alone.
		const page = purpose === 'recovery' ? settings.resetUrl : settings.verifyUrl
		const link = purpose === 'reauthentication' || purpose === 'sign-in' ? undefined : `${page}#token=${token}`
		await this.queueMail(tx, purpose, address, { name: user.name, link, code, validFor: inWords(ttl) })
		return true
	}

	private async queueMail(tx: Tx, kind: MailKind, to: string, view: { name: string; link?: string; code?: string; validFor?: string; newEmail?: string }) {
		const throttleKey = mailThrottleKey(kind, to)
		if (kind === 'email-change-notice' && (await queuedSince(tx, throttleKey, this.deps.settings.resendSeconds))) return
		const mail: OutgoingMail = { kind, to, ...this.deps.templates.render(kind, { appName: this.deps.settings.appName, email: to, ...view }) }
		await enqueueMail(tx, mail, throttleKey)
	}
}

/** The active account a condition names, locked for the transaction (mail requests and proofs queue on it). */
async function lockActiveUser(tx: Tx, condition: ReturnType<typeof and>): Promise<UserRow | undefined> {
	const [user] = await tx
		.select()
		.from(users)
		.where(and(condition, eq(users.status, 'active')))
		.orderBy(users.id)
		.limit(1)
		.for('update')
	return user
}

async function markUsed(tx: Tx, id: string) {
	await tx.update(emailTokens).set({ usedAt: sql`now()` }).where(eq(emailTokens.id, id))
}

async function voidTokens(tx: Tx, userId: string, purposes: TokenPurpose[]) {
	await tx
		.update(emailTokens)
		.set({ voidedAt: sql`now()` })
		.where(and(eq(emailTokens.userId, userId), inArray(emailTokens.purpose, purposes), isNull(emailTokens.usedAt), isNull(emailTokens.voidedAt)))
}

function readMailRequest(payload: Record<string, unknown>): MailRequest {
	const { purpose, email, client } = payload as Partial<MailRequest>
	if ((purpose !== 'verification' && purpose !== 'recovery' && purpose !== 'sign-in') || typeof email !== 'string' || typeof client !== 'object' || client === null)
		throw new PermanentJobError('unreadable mail request')
	return { purpose, email, client }
}
