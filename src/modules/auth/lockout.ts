import type { Config } from '../../config/env'
import { digestOf } from '../../crypto/opaque-tokens'
import type { CounterStore } from '../../db/counters'
import { AppError } from '../../http/problem'

/** One reserved password check: tell the lockout how it ended. */
export interface PasswordAttempt {
	/** The password was wrong; resolves true when this failure locked the account. */
	failed(): Promise<boolean>
	/** The password was right: the failures counted so far are forgiven. */
	succeeded(): Promise<void>
	/**
	 * Ends a check that reached no verdict (the database failed, say): its
	 * reservation is given back. Does nothing after failed() or succeeded().
	 */
	release(): Promise<void>
}

const NO_LOCKOUT: PasswordAttempt = { failed: async () => false, succeeded: async () => {}, release: async () => {} }

/**
 * Per-account lockout: after `threshold` failed password checks within the
 * window, that email is locked for `lockSeconds`, whatever the client IP,
 * for known and unknown emails alike (so a lock says nothing about whether an
 * account exists). Keys are the normalised email's SHA-256, so no address is
 * stored in Redis in clear.
 *
 * Each check is reserved (counted) atomically BEFORE the hash is computed:
 * of guesses sent in parallel, at most `threshold` are ever evaluated within
 * a window; the rest are refused as locked without being looked at.
 */
export class LoginLockout {
	constructor(
		private readonly store: CounterStore,
		private readonly settings: Config['lockout'],
		/** Keeps apart lockouts that share a store: passwords by email, second factors by account. */
		private readonly scope = 'lockout',
	) {}

	get enabled() {
		return this.settings.threshold > 0
	}

	private key(kind: 'fail' | 'lock', email: string) {
		return `${this.scope}:${kind}:${digestOf(email)}`
	}

	/** Reserves one password check for this email, or throws the login-locked problem. */
	async reserve(email: string): Promise<PasswordAttempt> {
		if (!this.enabled) return NO_LOCKOUT
		const { threshold, windowSeconds, lockSeconds } = this.settings
		const lockedMs = await this.store.remaining(this.key('lock', email))
		if (lockedMs > 0) throw lockedProblem(Math.ceil(lockedMs / 1000))
		const { count: reserved } = await this.store.increment(this.key('fail', email), windowSeconds * 1000)
		// The threshold's worth of checks is already taken (some may still be running).
		if (reserved > threshold) throw lockedProblem(lockSeconds)
		// The threshold's last failure may have locked the email between the check above and this count, and
		// cleared the count: this one would then open a fresh round of guesses. Looked at again, and given back.
		const lockedSinceMs = await this.store.remaining(this.key('lock', email))
		if (lockedSinceMs > 0) {
			await this.store.decrement(this.key('fail', email))
			throw lockedProblem(Math.ceil(lockedSinceMs / 1000))
		}
		let settled = false
		return {
			failed: async () => {
				settled = true
				if (reserved < threshold) return false
				// Locked before the count is cleared: a guess counted afresh then sees the lock on its second look.
				await this.store.mark(this.key('lock', email), lockSeconds * 1000)
				await this.store.delete(this.key('fail', email))
				return true
			},
			succeeded: async () => {
				settled = true
				await this.store.delete(this.key('fail', email))
			},
			release: async () => {
				if (settled) return
				settled = true
				await this.store.decrement(this.key('fail', email))
			},
		}
	}

	/** Forgets an email's failures and lock (after a password reset proved the owner). */
	async clear(email: string): Promise<void> {
		if (!this.enabled) return
		await this.store.delete(this.key('lock', email))
		await this.store.delete(this.key('fail', email))
	}
}

const lockedProblem = (retryAfterSeconds: number) =>
	new AppError('login-locked', 'Too many failed logins for this account; try again later', {
		headers: { 'retry-after': String(retryAfterSeconds) },
	})

/** Whether an error is the lockout's refusal. */
export const isLoginLocked = (error: unknown) => error instanceof AppError && error.kind === 'login-locked'
