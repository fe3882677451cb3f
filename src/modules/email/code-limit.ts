import { and, eq, gt, lt, sql, type SQL } from 'drizzle-orm'
import { digestOf } from '../../crypto/opaque-tokens'
import { codeFailures, emailTokens } from '../../db/schema'
import { AppError } from '../../http/problem'
import type { Queryable } from '../auth/sessions'

/** Wrong codes an address may have of a kind in any 24 hours (API.md "Codes by mail"); the next try is 429. */
export const WRONG_CODES_PER_DAY = 10
const WINDOW = sql`interval '24 hours'`

/** What a code proves: each kind has its own count (the verification route's codes, the recovery route's, reauthentication's, sign-in's). */
export type CodeKind = 'verification' | 'recovery' | 'reauthentication' | 'sign-in'

export const tooManyCodes = (retryAfterSeconds: number, kind?: CodeKind) =>
	new AppError(
		'too-many-codes',
		// A sign-in code's mail has no link to fall back on.
		kind === 'sign-in'
			? 'Too many wrong codes for this address; sign in another way, or try a code again later'
			: 'Too many wrong codes for this address; use the link in the mail, or try a code again later',
		{ headers: { 'retry-after': String(retryAfterSeconds) } },
	)

/** The subject a wrong code is counted against: the address it was typed for, hashed (an account's or not, the same way). */
const subjectOf = (address: string) => digestOf(address)

export type CodeTry =
	| {
			admitted: true
			/** Of each token row it is selected with: the wrong codes typed for this address and kind since the row was made. */
			wrongSinceIssued: SQL<number>
			/** Counts this try as a wrong code. */
			failed: () => Promise<void>
	  }
	| { admitted: false; retryAfterSeconds: number }

/**
 * The wrong codes typed for an address and kind since a token row was made (`since`: its created_at):
 * a code's own tries are counted here rather than on its row, so that a wrong code writes the same one
 * row whether the address has a live code or none (API.md's equal work; see EmailService.checkProof).
 */
const wrongSince = (kind: CodeKind, subject: string, since: SQL) =>
	sql<number>`(select count(*)::int from ${codeFailures} where ${codeFailures.kind} = ${kind} and ${codeFailures.subject} = ${subject} and ${codeFailures.createdAt} >= ${since})`

/** The wrong codes typed for an address and kind since `since` (a link's row: its code's tries void the link too). */
export async function wrongCodesSince(tx: Queryable, kind: CodeKind, address: string, since: Date): Promise<number> {
	const [row] = await tx.select({ n: wrongSince(kind, subjectOf(address), sql`${since.toISOString()}::timestamptz`) }).from(sql`(select 1) as one`)
	return row?.n ?? 0
}

/**
 * Admits one code try for an address and kind, in the caller's transaction, or says when the next may
 * come. The count lives in PostgreSQL, so it holds across instances and restarts without Redis. A
 * transaction-scoped advisory lock on the address and kind makes tries for it take turns from the
 * count to the commit of their own wrong code: of any number fired at once, no more than the 10 the
 * window has room for are judged; the rest are refused without being looked at. An unknown address
 * goes through the same statements, so it is counted, and refused, alike.
 */
export async function admitCodeTry(tx: Queryable, kind: CodeKind, address: string): Promise<CodeTry> {
	const subject = subjectOf(address)
	await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`code-failures:${kind}:${subject}`}, 0))`)
	const [window] = await tx
		.select({
			wrong: sql<number>`count(*)::int`,
			// When the oldest counted wrong code leaves the window, one more try is admitted.
			retryAfterSeconds: sql<number | null>`greatest(ceil(extract(epoch from min(${codeFailures.createdAt}) + ${WINDOW} - now())), 1)::int`,
		})
		.from(codeFailures)
		.where(and(eq(codeFailures.subject, subject), eq(codeFailures.kind, kind), gt(codeFailures.createdAt, sql`now() - ${WINDOW}`)))
	if ((window?.wrong ?? 0) >= WRONG_CODES_PER_DAY) return { admitted: false, retryAfterSeconds: window?.retryAfterSeconds ?? 1 }
	return {
		admitted: true,
		wrongSinceIssued: wrongSince(kind, subject, sql`${emailTokens.createdAt}`),
		failed: async () => {
			await tx.insert(codeFailures).values({ id: Bun.randomUUIDv7(), kind, subject })
		},
	}
}

/**
 * Deletes wrong codes that no longer count: older than 24 hours and than the longest-lived code
 * (`keepSeconds`), whose own five tries they may still count toward. Returns how many went.
 */
export async function purgeCodeFailures(db: Queryable, keepSeconds: number): Promise<number> {
	const gone = await db
		.delete(codeFailures)
		.where(lt(codeFailures.createdAt, sql`now() - make_interval(secs => ${Math.max(keepSeconds, 86_400)})`))
		.returning({ id: codeFailures.id })
	return gone.length
}
