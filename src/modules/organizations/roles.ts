import { and, asc, eq, gt, isNull, sql } from 'drizzle-orm'
import type { Database, Queryable } from '../../db/client'
import { organizationInvitations, organizationMembers, organizationRoles } from '../../db/schema'
import { Conflict, Forbidden, NotFound } from '../../http/problem'
import type { AuditLog, ClientInfo } from '../audit/service'
import type { Caller } from '../auth/sessions'
import type { CreateOrganizationRoleInput, ReplaceOrganizationRoleInput } from './model'

export interface OrganizationRolesDeps {
	db: Database
	audit: AuditLog
}

type RoleRow = typeof organizationRoles.$inferSelect

const unknownRole = () => new NotFound('No organization role has this name')
const builtIn = () => new Forbidden('The built-in roles (owner, admin, member) cannot be changed or deleted')

/**
 * The organization roles, one set for every organization: the three built in and those admins define. A role still
 * named by a membership or a pending invitation cannot be deleted (409): deleting it would silently take
 * permissions from members, or leave an invitation naming a role that no longer exists.
 */
export class OrganizationRoles {
	constructor(private readonly deps: OrganizationRolesDeps) {}

	async list(): Promise<RoleRow[]> {
		return this.deps.db.select().from(organizationRoles).orderBy(asc(organizationRoles.name))
	}

	async get(name: string): Promise<RoleRow> {
		const [row] = await this.deps.db.select().from(organizationRoles).where(eq(organizationRoles.name, name))
		if (!row) throw unknownRole()
		return row
	}

	async create(input: CreateOrganizationRoleInput, caller: Caller, client: ClientInfo): Promise<RoleRow> {
		return this.deps.db.transaction(async (tx) => {
			const now = new Date()
			const [row] = await tx
				.insert(organizationRoles)
				.values({ name: input.name, description: input.description ?? '', permissions: input.permissions, builtIn: false, createdAt: now, updatedAt: now })
				.onConflictDoNothing()
				.returning()
			if (!row) throw new Conflict('conflict', 'An organization role with this name exists; change it with PUT instead')
			await this.deps.audit.recordIn(tx, 'organization-role.created', client, { actorId: caller.user.id, details: { role: row.name, permissions: row.permissions.join(',') } })
			return row
		})
	}

	async replace(name: string, input: ReplaceOrganizationRoleInput, caller: Caller, client: ClientInfo): Promise<RoleRow> {
		return this.deps.db.transaction(async (tx) => {
			const current = await lockRole(tx, name)
			if (current.builtIn) throw builtIn()
			const [row] = await tx
				.update(organizationRoles)
				.set({ permissions: input.permissions, description: input.description ?? current.description, updatedAt: new Date() })
				.where(eq(organizationRoles.name, name))
				.returning()
			if (!row) throw unknownRole()
			await this.deps.audit.recordIn(tx, 'organization-role.updated', client, {
				actorId: caller.user.id,
				details: { role: name, from: current.permissions.join(','), to: row.permissions.join(',') },
			})
			return row
		})
	}

	/** Deletes a role no membership and no pending invitation names (409 otherwise). */
	async delete(name: string, caller: Caller, client: ClientInfo): Promise<RoleRow> {
		return this.deps.db.transaction(async (tx) => {
			// The row lock first: a membership or invitation naming the role in a transaction still open holds its key
			// share lock (access.ts, checkGrantableRoles), so this waits for it and then counts it.
			const current = await lockRole(tx, name)
			if (current.builtIn) throw builtIn()
			const [member] = await tx
				.select({ userId: organizationMembers.userId })
				.from(organizationMembers)
				.where(sql`${name} = any(${organizationMembers.roles})`)
				.limit(1)
			const [invitation] = await tx
				.select({ id: organizationInvitations.id })
				.from(organizationInvitations)
				.where(
					and(
						sql`${name} = any(${organizationInvitations.roles})`,
						isNull(organizationInvitations.acceptedAt),
						isNull(organizationInvitations.revokedAt),
						gt(organizationInvitations.expiresAt, sql`now()`),
					),
				)
				.limit(1)
			if (member || invitation) throw new Conflict('conflict', 'This role is held by members or named by pending invitations; change their roles first')
			await tx.delete(organizationRoles).where(eq(organizationRoles.name, name))
			await this.deps.audit.recordIn(tx, 'organization-role.deleted', client, { actorId: caller.user.id, details: { role: name } })
			return current
		})
	}
}

async function lockRole(tx: Queryable, name: string): Promise<RoleRow> {
	const [row] = await tx.select().from(organizationRoles).where(eq(organizationRoles.name, name)).for('update')
	if (!row) throw unknownRole()
	return row
}
