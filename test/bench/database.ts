/**
 * The bench's own PostgreSQL database: created on first use, seeded with N
 * users, and reused by later runs while it still holds exactly those N users
 * (seeding a million rows takes minutes; the scenarios take seconds).
 */
import postgres from 'postgres'
import { openDatabase } from '../../src/db/client'
import { migrate } from '../../src/db/migrate'
import { seedUsers } from '../support/seed'

export const SEED_PASSWORD = 'seeded-password-42'

export interface BenchDatabase {
	url: string
	seeded: 'reused' | 'created'
	seedSeconds: number
}

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`

export async function prepareDatabase(serverUrl: string, name: string, users: number, reseed: boolean): Promise<BenchDatabase> {
	const admin = postgres(serverUrl, { max: 1, onnotice: () => {} })
	const url = new URL(serverUrl)
	url.pathname = `/${name}`
	try {
		const [existing] = await admin`select 1 from pg_database where datname = ${name}`
		if (existing && !reseed && (await seededUsers(url.toString())) === users) {
			await forgetSessions(url.toString())
			return { url: url.toString(), seeded: 'reused', seedSeconds: 0 }
		}
		await admin.unsafe(`drop database if exists ${quoteIdent(name)} with (force)`)
		await admin.unsafe(`create database ${quoteIdent(name)}`)
	} finally {
		await admin.end()
	}

	const started = performance.now()
	const handle = await openDatabase({ kind: 'postgres', url: url.toString(), poolMax: 4 })
	try {
		await migrate(handle.db)
		await seedUsers(handle.db, users, { password: SEED_PASSWORD })
	} finally {
		await handle.close()
	}
	// Fresh statistics, so that the planner picks the indexes it will pick in production.
	const sql = postgres(url.toString(), { max: 1, onnotice: () => {} })
	await sql`vacuum analyze users`
	await sql.end()
	return { url: url.toString(), seeded: 'created', seedSeconds: (performance.now() - started) / 1000 }
}

/** How many seeded accounts the database holds (the bootstrap admin aside); -1 if it has no schema. */
async function seededUsers(url: string): Promise<number> {
	const sql = postgres(url, { max: 1, onnotice: () => {} })
	try {
		const [row] = await sql<{ count: number }[]>`select count(*)::int as count from users where email like 'user%@example.test'`
		return row?.count ?? 0
	} catch {
		return -1
	} finally {
		await sql.end()
	}
}

/**
 * Sessions, refresh tokens and audit events of earlier runs would make every
 * run a little slower than the last; a reused database starts without them.
 * (TRUNCATE is not a row DELETE, so the append-only trigger does not refuse it.)
 */
async function forgetSessions(url: string) {
	const sql = postgres(url, { max: 1, onnotice: () => {} })
	try {
		// Provider flows and codes name the session that links them: they go with it.
		await sql`truncate refresh_tokens, sessions, audit_events, oidc_flows, sign_in_codes`
		// The OpenID Provider's records (codes, tokens, grants, its sessions), once the schema has them.
		const [provider] = await sql<{ exists: boolean }[]>`select to_regclass('oauth_artifacts') is not null as exists`
		if (provider?.exists) await sql`truncate oauth_artifacts`
	} finally {
		await sql.end()
	}
}

/** The row of the `fromEnd`-th oldest account, to craft a list cursor near the end of the default sort. */
export async function rowNearEnd(url: string, fromEnd: number): Promise<{ id: string; createdAt: Date }> {
	const sql = postgres(url, { max: 1, onnotice: () => {} })
	try {
		const [row] = await sql<{ id: string; created_at: Date }[]>`
			select id, created_at from users order by created_at, id offset ${fromEnd} limit 1`
		if (!row) throw new Error('the bench database has too few users for a deep page')
		return { id: row.id, createdAt: row.created_at }
	} finally {
		await sql.end()
	}
}
