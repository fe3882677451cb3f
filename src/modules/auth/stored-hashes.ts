import { and, isNotNull, like, ne, notLike, or } from 'drizzle-orm'
import type { Database } from '../../db/client'
import { users } from '../../db/schema'
import { readStoredHash } from './hash-schemes'
import { MAX_LEGACY_PARAMETER_SETS, type HashParameters } from './password'

/** The PHC prefix Bun.password writes for a parameter set, up to the salt (no LIKE wildcard in it). */
const prefixOf = ({ memoryCost, timeCost }: HashParameters) => `$argon2id$v=19$m=${memoryCost},t=${timeCost},p=1$%`

/** The beginnings of the stored hashes hash-schemes.ts reads (LIKE patterns). */
const SCHEMES = ['$argon2%', '$2_$%', '$better-auth-scrypt$%', '$firebase-scrypt$%', '$pbkdf2-%', 'pbkdf2_sha256$%']

/**
 * One stored hash for each cost class in use other than `current` (argon2id
 * parameter sets of older settings, imported schemes at their costs), up to
 * `limit` of them: what a PasswordHasher learns at start-up
 * (PasswordHasherOptions.storedHashSample), so that its first login checks
 * already cover accounts still on older settings or imported hashes.
 *
 * One query per class found plus one: each stops at its first match, and the
 * last, which finds none, reads the whole table (a sequential scan of users,
 * once per process). A class whose hashes differ past their prefix (PBKDF2
 * key lengths) is sampled once; another length is learnt at its first login.
 * Unreadable hashes are passed over, a few at most.
 */
export async function sampleLegacyHashes(
	db: Database,
	current: HashParameters,
	limit = MAX_LEGACY_PARAMETER_SETS,
): Promise<string[]> {
	const found: string[] = []
	const classes = new Set<string>()
	const seen = [prefixOf(current)]
	const unreadable: string[] = []
	while (found.length < limit && unreadable.length <= limit) {
		const [row] = await db
			.select({ hash: users.passwordHash })
			.from(users)
			.where(
				and(
					isNotNull(users.passwordHash),
					or(...SCHEMES.map((pattern) => like(users.passwordHash, pattern))),
					...seen.map((pattern) => notLike(users.passwordHash, pattern)),
					...unreadable.map((hash) => ne(users.passwordHash, hash)),
				),
			)
			.limit(1)
		if (!row?.hash) break
		const read = readStoredHash(row.hash)
		if (!read.ok) {
			unreadable.push(row.hash)
			continue
		}
		seen.push(read.classPattern)
		if (classes.has(read.costClass)) continue
		classes.add(read.costClass)
		found.push(row.hash)
	}
	return found
}
