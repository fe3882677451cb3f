import { dictionary } from '@zxcvbn-ts/language-common'
import pLimit from 'p-limit'
import type { FieldError } from '../../http/problem'

export const PASSWORD_MAX_LENGTH = 256

export interface PasswordSettings {
	minLength: number
	memoryCost: number
	timeCost: number
}

// The ~50,000 most common passwords, as zxcvbn ships them (lower-case).
let commonPasswords: Set<string> | undefined
const isCommon = (password: string) =>
	(commonPasswords ??= new Set(dictionary['passwords-common'] as string[])).has(password.toLowerCase())

/**
 * Passwords are compared as NFC, so the same characters typed on different
 * keyboards hash alike; length counts code points, not UTF-16 units.
 */
export const normalizePassword = (password: string) => password.normalize('NFC')

/** The policy of API.md: length bounds and no common passwords; no composition rules. */
export function passwordProblem(password: string, minLength: number, pointer = '#/password'): FieldError | undefined {
	const length = [...normalizePassword(password)].length
	if (length < minLength) return { pointer, code: 'minLength', detail: `must be at least ${minLength} characters` }
	if (length > PASSWORD_MAX_LENGTH)
		return { pointer, code: 'maxLength', detail: `must be at most ${PASSWORD_MAX_LENGTH} characters` }
	if (isCommon(password)) return { pointer, code: 'commonPassword', detail: 'is too common; choose another' }
	return undefined
}

/**
 * Hashing and verifying with argon2id on Bun's thread pool, at most one per
 * core at a time: a flood of logins queues here instead of crowding out the
 * token checks and database work that share that pool.
 */
export class PasswordHasher {
	private readonly limit = pLimit(Math.max(1, navigator.hardwareConcurrency))
	private dummyHash: Promise<string> | undefined

	constructor(private readonly settings: PasswordSettings) {}

	hash(password: string): Promise<string> {
		return this.limit(() =>
			Bun.password.hash(normalizePassword(password), {
				algorithm: 'argon2id',
				memoryCost: this.settings.memoryCost,
				timeCost: this.settings.timeCost,
			}),
		)
	}

	verify(password: string, hash: string): Promise<boolean> {
		return this.limit(() => Bun.password.verify(normalizePassword(password), hash))
	}

	/**
	 * Spends the same time as a real verification when there is no account to
	 * check, so that response time does not tell which emails exist.
	 */
	async verifyAgainstDummy(password: string): Promise<false> {
		this.dummyHash ??= this.hash(crypto.randomUUID())
		await this.verify(password, await this.dummyHash)
		return false
	}

	/** True when a stored hash was made with other parameters than the configured ones. */
	needsRehash(hash: string): boolean {
		const match = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=\d+\$/.exec(hash)
		if (!match) return true
		return Number(match[1]) !== this.settings.memoryCost || Number(match[2]) !== this.settings.timeCost
	}
}
