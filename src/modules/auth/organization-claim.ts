import { and, eq, sql, type SQL } from 'drizzle-orm'
import type { Queryable } from '../../db/client'
import { organizationMembers, organizationRoles, organizations } from '../../db/schema'
import { AppError } from '../../http/problem'

// The `org` claim of an access token: the organization a session speaks for, as its membership is now (API.md,
// Organizations, "Tokens"). Read from the tables themselves — auth sits below the organizations module and
// must not import it; the organization routes change these rows, and every reader here sees the change at once.

/** The `org` claim: the organization, the caller's roles in it, and the permissions those roles give (`*`: every one). */
// A type, not an interface: a JWT's claims take only index-signature-compatible objects.
export type OrganizationClaim = {
	id: string
	slug: string
	roles: string[]
	permissions: string[]
}

/** The union of the permissions of the roles `roles` (a text[] expression) names, as a text[]; unknown names give none. */
export const permissionsOfRoles = (roles: SQL | typeof organizationMembers.roles) =>
	sql<string[]>`coalesce((select array_agg(distinct permission) from ${organizationRoles} cross join lateral unnest(${organizationRoles.permissions}) as permission where ${organizationRoles.name} = any(${roles})), '{}'::text[])`

/** The claim as the tokens and the API show it: roles and permissions sorted, each once (the database's order depends on its collation). */
export const toOrganizationClaim = (row: { id: string; slug: string; roles: string[]; permissions: string[] }): OrganizationClaim => ({
	id: row.id,
	slug: row.slug,
	roles: [...new Set(row.roles)].sort(),
	permissions: [...new Set(row.permissions)].sort(),
})

/**
 * The claim of `userId` in organization `organizationId`, if it holds now: a member of an active organization.
 * `lock` takes share locks on the organization's row, then on the membership row (inside a transaction), so that the
 * membership cannot be removed or changed between this read and the commit of what it decided (a refresh's switch).
 * The organization first: every change of membership locks the organization's row before the member's
 * (organizations/access.ts), and two transactions that lock the same rows in another order can deadlock.
 */
export async function organizationClaimOf(db: Queryable, userId: string, organizationId: string, options: { lock?: boolean } = {}): Promise<OrganizationClaim | undefined> {
	if (options.lock) await db.select({ id: organizations.id }).from(organizations).where(eq(organizations.id, organizationId)).for('share')
	const query = db
		.select({ id: organizations.id, slug: organizations.slug, roles: organizationMembers.roles, permissions: permissionsOfRoles(organizationMembers.roles) })
		.from(organizationMembers)
		.innerJoin(organizations, eq(organizations.id, organizationMembers.organizationId))
		.where(and(eq(organizationMembers.organizationId, organizationId), eq(organizationMembers.userId, userId), eq(organizations.status, 'active')))
	const [row] = await (options.lock ? query.for('share', { of: [organizationMembers, organizations] }) : query)
	return row && toOrganizationClaim(row)
}

export const notAMember = () => new AppError('not-a-member', 'You are not a member of an active organization with this id')
