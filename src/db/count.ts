import { sql, type SQL, type SQLWrapper } from 'drizzle-orm'
import { rowsOf, type Queryable } from './client'

export type CountMode = 'estimated' | 'exact'
export interface Total {
	total: number
	/** Counted row by row (true), or PostgreSQL's planner estimate (false). */
	exact: boolean
}

/** postgres.js answers the rows, PGlite an object holding them. */

/**
 * How many rows `matching` (a select of the rows a list's filters let through) yields, at a cost that does not
 * grow with the table: counted while there are at most `upTo` (the count stops reading there), and beyond that
 * the planner's estimate from the table's statistics, as PostgREST's `count=planned` is. `estimated` asks the
 * planner first and counts only when it expects at most `upTo`; `exact` always counts first.
 */
export async function countUpTo(db: Queryable, matching: SQLWrapper, mode: CountMode, upTo: number): Promise<Total> {
	const estimate = async () => {
		const [row] = rowsOf<{ 'QUERY PLAN': [{ Plan: { 'Plan Rows': number } }] | string }>(await db.execute(sql`explain (format json) ${matching}`))
		const plan = row?.['QUERY PLAN']
		const parsed = typeof plan === 'string' ? (JSON.parse(plan) as [{ Plan: { 'Plan Rows': number } }]) : plan
		return Math.max(0, Math.round(parsed?.[0]?.Plan['Plan Rows'] ?? 0))
	}
	if (mode === 'estimated') {
		const planned = await estimate()
		if (planned > upTo) return { total: planned, exact: false }
	}
	const limited: SQL = sql`select count(*)::int as n from (${matching} limit ${upTo + 1}) as matching`
	const [counted] = rowsOf<{ n: number }>(await db.execute(limited))
	const n = Number(counted?.n ?? 0)
	if (n <= upTo) return { total: n, exact: true }
	// More than can be counted cheaply: the estimate, never below what was just seen to be there.
	return { total: Math.max(await estimate(), n), exact: false }
}
