import { sql } from 'drizzle-orm'
import journal from '../../drizzle/meta/_journal.json'
import m0000 from '../../drizzle/0000_init.sql' with { type: 'text' }
import m0001 from '../../drizzle/0001_session_pairs.sql' with { type: 'text' }
import m0002 from '../../drizzle/0002_audit_events.sql' with { type: 'text' }
import m0003 from '../../drizzle/0003_audit_append_only.sql' with { type: 'text' }
import m0004 from '../../drizzle/0004_pg_trgm.sql' with { type: 'text' }
import m0005 from '../../drizzle/0005_search_indexes.sql' with { type: 'text' }
import m0006 from '../../drizzle/0006_credentials_version.sql' with { type: 'text' }
import m0007 from '../../drizzle/0007_session_purge.sql' with { type: 'text' }
import m0008 from '../../drizzle/0008_audit_event_names.sql' with { type: 'text' }
import m0009 from '../../drizzle/0009_email_flows.sql' with { type: 'text' }
import m0010 from '../../drizzle/0010_job_priority.sql' with { type: 'text' }
import m0011 from '../../drizzle/0011_second_factors.sql' with { type: 'text' }
import m0012 from '../../drizzle/0012_identity_providers.sql' with { type: 'text' }
import m0013 from '../../drizzle/0013_identity_links.sql' with { type: 'text' }
import m0014 from '../../drizzle/0014_webhooks.sql' with { type: 'text' }
import m0015 from '../../drizzle/0015_queue_autovacuum.sql' with { type: 'text' }
import m0016 from '../../drizzle/0016_ways_in.sql' with { type: 'text' }
import m0017 from '../../drizzle/0017_mfa_token_amr.sql' with { type: 'text' }
import m0018 from '../../drizzle/0018_code_failures.sql' with { type: 'text' }
import m0019 from '../../drizzle/0019_link_session.sql' with { type: 'text' }
import m0020 from '../../drizzle/0020_job_claims.sql' with { type: 'text' }
import m0021 from '../../drizzle/0021_oauth_provider.sql' with { type: 'text' }
import m0022 from '../../drizzle/0022_email_code_sign_in.sql' with { type: 'text' }
import m0023 from '../../drizzle/0023_oauth_session_uid.sql' with { type: 'text' }
import m0024 from '../../drizzle/0024_organizations.sql' with { type: 'text' }
import m0025 from '../../drizzle/0025_organization_member_roles.sql' with { type: 'text' }
import m0026 from '../../drizzle/0026_user_metadata.sql' with { type: 'text' }
import m0027 from '../../drizzle/0027_import_checkpoints.sql' with { type: 'text' }
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import type * as schema from './schema'

// The database as client.ts types it, named here rather than imported: client.ts loads the snapshot, whose
// key is these migrations, so an import back would close a cycle (client → snapshot → migrate → client).
type Database = PgDatabase<PgQueryResultHKT, typeof schema>

/**
 * The SQL of every migration, imported so the compiled binary carries it.
 * drizzle-kit writes drizzle/; add each new file here (a test checks the journal).
 */
const MIGRATION_SQL: Record<string, string> = {
	'0000_init': m0000,
	'0001_session_pairs': m0001,
	'0002_audit_events': m0002,
	'0003_audit_append_only': m0003,
	'0004_pg_trgm': m0004,
	'0005_search_indexes': m0005,
	'0006_credentials_version': m0006,
	'0007_session_purge': m0007,
	'0008_audit_event_names': m0008,
	'0009_email_flows': m0009,
	'0010_job_priority': m0010,
	'0011_second_factors': m0011,
	'0012_identity_providers': m0012,
	'0013_identity_links': m0013,
	'0014_webhooks': m0014,
	'0015_queue_autovacuum': m0015,
	'0016_ways_in': m0016,
	'0017_mfa_token_amr': m0017,
	'0018_code_failures': m0018,
	'0019_link_session': m0019,
	'0020_job_claims': m0020,
	'0021_oauth_provider': m0021,
	'0022_email_code_sign_in': m0022,
	'0023_oauth_session_uid': m0023,
	'0024_organizations': m0024,
	'0025_organization_member_roles': m0025,
	'0026_user_metadata': m0026,
	'0027_import_checkpoints': m0027,
}

export interface Migration {
	tag: string
	createdAt: number
	hash: string
	statements: string[]
}

export function bundledMigrations(): Migration[] {
	return journal.entries.map((entry) => {
		const text = MIGRATION_SQL[entry.tag]
		if (text === undefined) throw new Error(`migration ${entry.tag} is in the journal but not bundled in src/db/migrate.ts`)
		return {
			tag: entry.tag,
			createdAt: entry.when,
			hash: new Bun.CryptoHasher('sha256').update(text).digest('hex'),
			statements: text
				.split('--> statement-breakpoint')
				.map((statement) => statement.trim())
				.filter(Boolean),
		}
	})
}

// Any constant works; it only has to be the same for every instance of the service.
const MIGRATION_LOCK_KEY = 0x4c_41_54_43 // "LATC"

/**
 * Applies pending migrations in one transaction under a transaction-scoped
 * advisory lock, so instances starting together queue instead of colliding,
 * and a failed migration leaves nothing half-applied. Records them in
 * drizzle.__drizzle_migrations exactly as drizzle-kit's migrator does, so the
 * two stay interchangeable. Drizzle's own migrate() reads a folder from disk,
 * which a single-file binary does not have.
 */
export async function migrate(db: Database): Promise<string[]> {
	const migrations = bundledMigrations()
	return db.transaction(async (tx) => {
		await tx.execute(sql`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`)
		await tx.execute(sql`create schema if not exists drizzle`)
		await tx.execute(sql`create table if not exists drizzle.__drizzle_migrations (
			id serial primary key, hash text not null, created_at bigint)`)
		const applied = await tx.execute<{ created_at: string | number }>(
			sql`select created_at from drizzle.__drizzle_migrations order by created_at desc limit 1`,
		)
		const rows = (applied as unknown as { rows?: unknown[] }).rows ?? (applied as unknown as unknown[])
		const last = Number((rows[0] as { created_at?: string | number } | undefined)?.created_at ?? 0)
		const pending = migrations.filter((migration) => migration.createdAt > last)
		for (const migration of pending) {
			for (const statement of migration.statements) await tx.execute(sql.raw(statement))
			await tx.execute(
				sql`insert into drizzle.__drizzle_migrations (hash, created_at) values (${migration.hash}, ${migration.createdAt})`,
			)
		}
		return pending.map((migration) => migration.tag)
	})
}
