import { parseArgs } from 'node:util'
import { loadConfig } from '../../src/config/env'
import { openDatabase, type Database } from '../../src/db/client'
import { migrate } from '../../src/db/migrate'
import { sql } from 'drizzle-orm'

export interface SeedOptions {
	/** Every seeded account gets this password (hashed once). */
	password?: string
	/** Emails are `${prefix}${n}@example.test`. */
	prefix?: string
	/** First createdAt; rows are 1 ms apart, so every sort has a stable order. */
	startAt?: Date
}

/**
 * Inserts `count` users fast: one argon2 hash shared by all, the rows made by the database itself
 * (generate_series) in one statement, where binding nine parameters a row from here took several
 * times as long (10,400 rows: about 5 s on PGlite). For tests and the benchmark.
 */
export async function seedUsers(db: Database, count: number, options: SeedOptions = {}): Promise<void> {
	const { password = 'seeded-password-42', prefix = 'user' } = options
	const start = (options.startAt ?? new Date(Date.now() - count - 60_000)).getTime()
	const passwordHash = await Bun.password.hash(password, { algorithm: 'argon2id' })
	// Row n: created at start + n ms, its id a UUIDv7 of that millisecond (ids sort as the rows were created);
	// every 50th deactivated then.
	await db.execute(sql`
		insert into users (id, email, name, role, status, deactivated_at, password_hash, created_at, updated_at)
		select (lpad(to_hex(at), 12, '0') || '7' || substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid,
			${prefix} || n || '@example.test', 'Seeded User ' || n, 'user',
			case when n % 50 = 49 then 'deactivated' else 'active' end,
			case when n % 50 = 49 then to_timestamp(at / 1000.0) end,
			${passwordHash}, to_timestamp(at / 1000.0), to_timestamp(at / 1000.0)
		from generate_series(0, ${count}::int - 1) as n, lateral (select ${start}::bigint + n as at) as created`)
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
