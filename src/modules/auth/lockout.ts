import type { Config } from '../../config/env'
import type { CounterStore } from '../../http/counters'
import { AppError } from '../../http/problem'

/**
 * Per-account lockout: after `threshold` failed logins within the window,
 * that email is locked for `lockSeconds`, whatever the client IP, for known
 * and unknown emails alike (so a lock says nothing about whether an account
 * exists). Keys are the normalised email's SHA-256, so no address is stored
 * in Redis in clear.
 */
export class LoginLockout {
	constructor(
		private readonly store: CounterStore,
		private readonly settings: Config['lockout'],
	) {}

	get enabled() {
		return this.settings.threshold > 0
	}

	private key(kind: 'fail' | 'lock', email: string) {
		return `lockout:${kind}:${new Bun.CryptoHasher('sha256').update(email).digest('hex')}`
	}

	/** Throws the login-locked problem while the email is locked. */
	async assertNotLocked(email: string): Promise<void> {
		if (!this.enabled) return
		const ms = await this.store.remaining(this.key('lock', email))
		if (ms > 0) throw lockedProblem(Math.ceil(ms / 1000))
	}

	/** Counts a failure; the one that reaches the threshold starts the lock. Returns whether it did. */
	async recordFailure(email: string): Promise<boolean> {
		if (!this.enabled) return false
		const { count } = await this.store.increment(this.key('fail', email), this.settings.windowSeconds * 1000)
		if (count < this.settings.threshold) return false
		await this.store.mark(this.key('lock', email), this.settings.lockSeconds * 1000)
		await this.store.delete(this.key('fail', email))
		return count === this.settings.threshold
	}

	async recordSuccess(email: string): Promise<void> {
		if (this.enabled) await this.store.delete(this.key('fail', email))
	}
}

const lockedProblem = (retryAfterSeconds: number) =>
	new AppError('login-locked', 'Too many failed logins for this account; try again later', {
		headers: { 'retry-after': String(retryAfterSeconds) },
	})
