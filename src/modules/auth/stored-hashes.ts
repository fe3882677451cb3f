import { and, like, notLike } from 'drizzle-orm'
import type { Database } from '../../db/client'
import { users } from '../../db/schema'
import { hashParameters, MAX_LEGACY_PARAMETER_SETS, type HashParameters } from './password'

/** The PHC prefix Bun.password writes for a parameter set, up to the salt (no LIKE wildcard in it). */
const prefixOf = ({ memoryCost, timeCost }: HashParameters) => `$argon2id$v=19$m=${memoryCost},t=${timeCost},p=1$`

/**
 * One stored hash for each argon2id parameter set in use other than
 * `current`, up to `limit` of them: what a PasswordHasher learns at
 * start-up (PasswordHasherOptions.storedHashSample), so that its first
 * login checks already cover accounts still on older settings.
 *
 * One query per set found plus one: each stops at its first match, and the
 * last, which finds none, reads the whole table (a sequential scan of
 * users, once per process).
 */
export async function sampleLegacyHashes(
	db: Database,
	current: HashParameters,
	limit = MAX_LEGACY_PARAMETER_SETS,
): Promise<string[]> {
	const found: string[] = []
	const seen = [prefixOf(current)]
	while (found.length < limit) {
		const [row] = await db
			.select({ hash: users.passwordHash })
			.from(users)
			.where(and(like(users.passwordHash, '$argon2id$v=19$m=%,p=1$%'), ...seen.map((prefix) => notLike(users.passwordHash, `${prefix}%`))))
			.limit(1)
		const parameters = row?.hash && hashParameters(row.hash)
		if (!row?.hash || !parameters) break
		found.push(row.hash)
		seen.push(prefixOf(parameters))
	}
	return found
}
