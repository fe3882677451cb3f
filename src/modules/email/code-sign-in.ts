import { eq } from 'drizzle-orm'
import type { Database } from '../../db/client'
import { users } from '../../db/schema'
import type { AuditLog, ClientInfo } from '../audit/service'
import type { AuthService } from '../auth/service'
import type { SessionAssurance } from '../auth/sessions'
import type { BrowserBinding, IssuedSession, SecondFactorOwed, SignIn } from '../auth/sign-in'
import { normalizeEmail } from '../users/model'
import { invalidCode, type EmailService } from './service'

/**
 * A sign-in with a code by mail. RFC 8176's `otp` names a one-time password generator (HOTP, TOTP): a mailed
 * code would read as one, and a TOTP after it would then not read as a second method (`finishedAmr`). The
 * RFC has no value for "a code sent to the address", so, as for a provider and a reauthentication by mail,
 * `amr` is empty; the audit's `method: email-code` says which way it was.
 */
export const EMAIL_CODE_ONLY: SessionAssurance = { amr: [], aal: 'aal1', enrollmentOnly: false }

export interface EmailCodeSignInDeps {
	db: Database
	audit: AuditLog
	email: Pick<EmailService, 'request' | 'checkSignInCode'>
	/** The sign-in road: what is still owed, the session, its audit. */
	signIn: Pick<SignIn, 'owes' | 'secondFactorOwed' | 'start' | 'succeeded'>
	/** The login lockout, as a password login keeps it: a wrong code counts as a wrong password does. */
	attempts: Pick<AuthService, 'reserveAttempt' | 'recordFailure'>
}

/**
 * POST /auth/sign-in-codes and /auth/email-code (API.md "Pages"). The request is a mail request like recovery's
 * (one 202 whatever the address, the work done by the job worker); the code is checked as every mailed code
 * is, and counted toward the email's login lockout as a password is; then the sign-in road takes over.
 */
export class EmailCodeSignIn {
	constructor(private readonly deps: EmailCodeSignInDeps) {}

	/** Queues the mail, whatever the address: only an active account gets one. */
	request(email: string, client: ClientInfo): Promise<void> {
		return this.deps.email.request('sign-in', email, client)
	}

	/** With `browser`, the session is also the browser's behind the pages' cookie (the /sign-in page's "email me a code"). */
	async signIn(email: string, code: string, client: ClientInfo, browser?: BrowserBinding): Promise<IssuedSession | SecondFactorOwed> {
		const { db, audit, email: mail, signIn, attempts } = this.deps
		const address = normalizeEmail(email)
		// Reserved before the code is looked at, as a password is: of guesses sent at once, no more than the threshold are judged.
		const attempt = await attempts.reserveAttempt(address, client)
		try {
			const checked = await mail.checkSignInCode(address, code, client)
			if (checked.kind === 'wrong') await attempts.recordFailure(attempt, client, { email: address, subjectId: checked.userId, reason: 'wrong-code' })
			if (checked.kind !== 'right') return await checked.refuse()
			const { user, spend } = checked
			const owed = await signIn.owes(user, EMAIL_CODE_ONLY)
			let issued: IssuedSession | undefined
			if ('secondFactor' in owed) {
				// Spent now: a code opens one sign-in, finished or not. Proving the address may have removed what was added before it.
				const account = await db.transaction(async (tx) => ((await spend(tx)) ? (await tx.select().from(users).where(eq(users.id, user.id)))[0] : undefined))
				const still = account && (await signIn.owes(account, EMAIL_CODE_ONLY))
				if (account && still && 'secondFactor' in still) {
					await attempt.succeeded()
					await this.recordProof(user, account, client)
					await audit.record('login.mfa-required', client, { subjectId: user.id, details: { methods: still.secondFactor.join(' '), method: 'email-code' } })
					return signIn.secondFactorOwed(account, EMAIL_CODE_ONLY, still.secondFactor)
				}
				issued = account && still && 'session' in still ? await signIn.start(account.id, account.credentialsVersion, still.session, client, async () => true, browser) : undefined
			} else issued = await signIn.start(user.id, user.credentialsVersion, owed.session, client, spend, browser)
			if (!issued) {
				// Another request spent the code first, or the account changed since it was checked.
				await audit.record('login.failed', client, { subjectId: user.id, details: { email: address, reason: 'code-spent-meanwhile' } })
				throw invalidCode()
			}
			await attempt.succeeded()
			await this.recordProof(user, issued.user, client)
			await signIn.succeeded(issued, client, { method: 'email-code' })
			return issued
		} finally {
			// A check the database cut short reached no verdict: it must not count toward the lockout.
			await attempt.release()
		}
	}

	/** The code proved an address that was not proved before: audited as a verification is. */
	private async recordProof(before: { id: string; emailVerifiedAt: Date | null }, after: { emailVerifiedAt: Date | null }, client: ClientInfo) {
		if (before.emailVerifiedAt !== null || after.emailVerifiedAt === null) return
		await this.deps.audit.record('email.verified', client, { actorId: before.id, subjectId: before.id, details: { by: 'sign-in-code' } })
	}
}
