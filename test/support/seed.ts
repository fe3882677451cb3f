import { parseArgs } from 'node:util'
import { loadConfig } from '../../src/config/env'
import { openDatabase, type Database } from '../../src/db/client'
import { migrate } from '../../src/db/migrate'
import { users } from '../../src/db/schema'

export interface SeedOptions {
	/** Every seeded account gets this password (hashed once). */
	password?: string
	/** Emails are `${prefix}${n}@example.test`. */
	prefix?: string
	batchSize?: number
	/** First createdAt; rows are 1 ms apart, so every sort has a stable order. */
	startAt?: Date
}

/**
 * Inserts `count` users fast: one argon2 hash shared by all, multi-row
 * inserts of a few thousand rows at a time. For tests and the benchmark.
 */
export async function seedUsers(db: Database, count: number, options: SeedOptions = {}): Promise<void> {
	const { password = 'seeded-password-42', prefix = 'user', batchSize = 5000 } = options
	const start = (options.startAt ?? new Date(Date.now() - count - 60_000)).getTime()
	const passwordHash = await Bun.password.hash(password, { algorithm: 'argon2id' })
	for (let offset = 0; offset < count; offset += batchSize) {
		const rows = []
		for (let n = offset; n < Math.min(count, offset + batchSize); n++) {
			const createdAt = new Date(start + n)
			rows.push({
				id: Bun.randomUUIDv7('hex', createdAt),
				email: `${prefix}${n}@example.test`,
				name: `Seeded User ${n}`,
				role: 'user' as const,
				status: n % 50 === 49 ? ('deactivated' as const) : ('active' as const),
				deactivatedAt: n % 50 === 49 ? createdAt : null,
				passwordHash,
				createdAt,
				updatedAt: createdAt,
			})
		}
		await db.insert(users).values(rows)
	}
}

if (import.meta.main) {
	const { values } = parseArgs({ args: Bun.argv.slice(2), options: { count: { type: 'string', default: '1000' }, prefix: { type: 'string' } } })
	const count = Number(values.count)
	if (!Number.isInteger(count) || count < 1) throw new Error('--count must be a positive whole number')
	const config = loadConfig()
	const database = await openDatabase(config.database)
	await migrate(database.db)
	const started = performance.now()
	await seedUsers(database.db, count, { prefix: values.prefix })
	console.log(`seeded ${count} users into ${database.description} in ${((performance.now() - started) / 1000).toFixed(1)} s`)
	await database.close()
}
