import { and, count, eq, gt, isNull, sql, type SQL } from 'drizzle-orm'
import { factors, identities, recoveryCodes, type UserRow } from '../../db/schema'
import type { WayIn, WayInChange } from '../../mail/notices'
import { toFactorResource } from '../factors/model'
import { toIdentityResource } from '../oidc/model'
import { recordWebhookEvents } from '../webhooks/outbox'
import type { Caller, Queryable } from './sessions'

/**
 * The rules that undo an intruder's way in (API.md "Ways in, and proof that it is really the owner"). Each
 * runs in the transaction of the proof that triggers it, with a `factor.removed` or `identity.unlinked`
 * event per removal, and answers what it removed, for the owner's notice.
 */

/**
 * The account's address was just proved by mail: whatever was added while it was not (someone who signed up
 * with another's address, or a provider that vouched for nothing) goes — every identity, passkey and factor
 * (Sudhodanan and Paverd, "Pre-hijacked accounts", USENIX Security 2022).
 */
export function removeWaysAddedUnverified(tx: Queryable, userId: string): Promise<WayInChange[]> {
	return removeWaysIn(tx, userId, eq(factors.addedUnverified, true), eq(identities.addedUnverified, true))
}

/**
 * After a recovery: passkeys and identities added within `reviewSeconds` from a session that had not used a
 * second factor are removed (an intruder with a stolen token or password could add those); TOTP factors stay
 * (they guard against a stolen mailbox), as does what was added at aal2 or came with the account.
 */
export function removeRecentWaysNotAddedAtAal2(tx: Queryable, userId: string, reviewSeconds: number): Promise<WayInChange[]> {
	if (reviewSeconds <= 0) return Promise.resolve([])
	const since = sql`now() - ${reviewSeconds} * interval '1 second'`
	const factorAddedAt = sql`coalesce(${factors.activatedAt}, ${factors.createdAt})`
	return removeWaysIn(
		tx,
		userId,
		and(eq(factors.type, 'webauthn'), eq(factors.addedAal, 'aal1'), gt(factorAddedAt, since)),
		and(eq(identities.addedAal, 'aal1'), gt(identities.createdAt, since)),
	)
}

/**
 * The assurance a way in added now is recorded with, for the review above: the session's, except that aal2
 * proves nothing while the account holds a factor added at aal1 within `reviewSeconds`. That factor may be
 * what gave the session its aal2 (its own activation raises the session that added it, and it signs in new
 * ones), so an intruder with a password could otherwise add one factor at aal1 and every later one at aal2,
 * out of the recovery's reach. What stands on a way in under review is under review too.
 */
export async function provenanceAal(db: Queryable, caller: Caller, reviewSeconds: number): Promise<'aal1' | 'aal2'> {
	if (caller.assurance.aal !== 'aal2' || reviewSeconds <= 0) return caller.assurance.aal
	const since = sql`now() - ${reviewSeconds} * interval '1 second'`
	const [unproved] = await db
		.select({ id: factors.id })
		.from(factors)
		.where(
			and(
				eq(factors.userId, caller.user.id),
				eq(factors.status, 'active'),
				eq(factors.addedAal, 'aal1'),
				gt(sql`coalesce(${factors.activatedAt}, ${factors.createdAt})`, since),
			),
		)
		.limit(1)
	return unproved ? 'aal1' : 'aal2'
}

async function removeWaysIn(tx: Queryable, userId: string, whichFactors: SQL | undefined, whichIdentities: SQL | undefined): Promise<WayInChange[]> {
	const goneFactors = await tx
		.delete(factors)
		.where(and(eq(factors.userId, userId), whichFactors))
		.returning()
	const goneIdentities = await tx
		.delete(identities)
		.where(and(eq(identities.userId, userId), whichIdentities))
		.returning()
	const removedActive = goneFactors.filter((factor) => factor.status === 'active')
	await recordWebhookEvents(tx, [
		...removedActive.map((factor) => ({ type: 'factor.removed' as const, data: { userId, factor: toFactorResource(factor) } })),
		...goneIdentities.map((identity) => ({ type: 'identity.unlinked' as const, data: { userId, identity: toIdentityResource(identity) } })),
	])
	const codesDropped = removedActive.length > 0 && (await dropRecoveryCodesWithoutFactor(tx, userId))
	return [
		...removedActive.map((factor): WayInChange => ({ way: factorWay(factor.type), change: 'removed', label: factor.name })),
		...(codesDropped ? [{ way: 'recovery-codes' as const, change: 'removed' as const }] : []),
		...goneIdentities.map((identity): WayInChange => ({ way: 'identity', change: 'removed', label: identity.provider })),
	]
}

/** Recovery codes belong to second factors: with the last one gone, they open nothing. Whether any went. */
async function dropRecoveryCodesWithoutFactor(tx: Queryable, userId: string): Promise<boolean> {
	const [left] = await tx.select({ active: count() }).from(factors).where(and(eq(factors.userId, userId), eq(factors.status, 'active')))
	if ((left?.active ?? 0) > 0) return false
	const dropped = await tx.delete(recoveryCodes).where(eq(recoveryCodes.userId, userId)).returning({ id: recoveryCodes.id })
	return dropped.length > 0
}

const factorWay = (type: 'totp' | 'webauthn'): WayIn => (type === 'totp' ? 'totp' : 'passkey')

/** Every way into the account now: its password, address, active factors, recovery codes and identities. */
export async function waysInOf(tx: Queryable, user: UserRow): Promise<Array<{ way: WayIn; label?: string }>> {
	const active = await tx
		.select({ type: factors.type, name: factors.name })
		.from(factors)
		.where(and(eq(factors.userId, user.id), eq(factors.status, 'active')))
		.orderBy(factors.createdAt)
	const linked = await tx.select({ provider: identities.provider }).from(identities).where(eq(identities.userId, user.id)).orderBy(identities.createdAt)
	const [codes] = await tx
		.select({ left: count() })
		.from(recoveryCodes)
		.where(and(eq(recoveryCodes.userId, user.id), isNull(recoveryCodes.usedAt)))
	return [
		...(user.passwordHash !== null ? [{ way: 'password' as const }] : []),
		{ way: 'email' as const, label: user.email },
		...active.map((factor) => ({ way: factorWay(factor.type), label: factor.name })),
		...((codes?.left ?? 0) > 0 ? [{ way: 'recovery-codes' as const }] : []),
		...linked.map((identity) => ({ way: 'identity' as const, label: identity.provider })),
	]
}
