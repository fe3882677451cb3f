import { and, asc, desc, eq, ilike, or, sql } from 'drizzle-orm'
import type { Database, Queryable } from '../../db/client'
import { organizationMemberRoles, organizationMembers, organizationRoles, users, type OrganizationMemberRow } from '../../db/schema'
import { AppError, Conflict, Forbidden, NotFound, ValidationFailed } from '../../http/problem'
import type { AuditLog, ClientInfo } from '../audit/service'
import type { Caller } from '../auth/sessions'
import { recordWebhookEvents } from '../webhooks/outbox'
import { actorIn, checkGrantableRoles, PERMISSIONS, requireActive, requirePermission, type Actor } from './access'
import { afterKeyset, decodeKeysetCursor, encodeKeysetCursor, escapeLike, pageOf } from '../../http/pagination'
import { toMemberResource, type ListMembersQuery, type MemberResource } from './model'

export interface MembersServiceDeps {
	db: Database
	audit: AuditLog
}

const OWNER = 'owner'
const notAMember = () => new NotFound('This account is not a member of this organization')
const lastOwner = () => new AppError('last-owner', 'The last owner of an organization can be neither removed nor demoted; make another member an owner first')

/**
 * Members of an organization (API.md, Organizations). Every change takes the organization's row lock first
 * (`actorIn` with `lock`), so that whether a change leaves an owner is decided on the memberships as they are,
 * with no other change between the count and the write: two owners demoting each other queue, and the second
 * is refused.
 */
export class MembersService {
	constructor(private readonly deps: MembersServiceDeps) {}

	async list(id: string, query: ListMembersQuery, caller: Caller) {
		const { db } = this.deps
		await actorIn(db, caller, id)
		if (query.role !== undefined) await requireKnownRole(db, query.role)
		const limit = query.limit ?? 20
		const sort = query.sort ?? '-joinedAt'
		const descending = sort.startsWith('-')
		const cursor = query.cursor === undefined ? undefined : decodeKeysetCursor(query.cursor, sort, true)
		const direction = descending ? desc : asc
		const search = query.q === undefined ? undefined : or(ilike(users.email, `%${escapeLike(query.q)}%`), ilike(users.name, `%${escapeLike(query.q)}%`))
		const columns = { roles: organizationMembers.roles, joinedAt: organizationMembers.joinedAt, id: users.id, email: users.email, name: users.name }
		// With `role`, the page walks that role's holders (organization_member_roles, kept by a trigger) in joined
		// order: a role few members hold is found at once, not after every member of a big organization.
		const rows =
			query.role === undefined
				? await db
						.select(columns)
						.from(organizationMembers)
						.innerJoin(users, eq(users.id, organizationMembers.userId))
						.where(and(eq(organizationMembers.organizationId, id), search, cursor && afterKeyset(organizationMembers.joinedAt, organizationMembers.userId, cursor, descending, true)))
						.orderBy(direction(organizationMembers.joinedAt), direction(organizationMembers.userId))
						.limit(limit + 1)
				: await db
						.select(columns)
						.from(organizationMemberRoles)
						.innerJoin(organizationMembers, and(eq(organizationMembers.organizationId, organizationMemberRoles.organizationId), eq(organizationMembers.userId, organizationMemberRoles.userId)))
						.innerJoin(users, eq(users.id, organizationMemberRoles.userId))
						.where(
							and(
								eq(organizationMemberRoles.organizationId, id),
								eq(organizationMemberRoles.role, query.role),
								search,
								cursor && afterKeyset(organizationMemberRoles.joinedAt, organizationMemberRoles.userId, cursor, descending, true),
							),
						)
						.orderBy(direction(organizationMemberRoles.joinedAt), direction(organizationMemberRoles.userId))
						.limit(limit + 1)
		const page = pageOf(rows, limit, (row) => encodeKeysetCursor(sort, row.joinedAt.toISOString(), row.id))
		return { ...page, items: page.items.map((row) => toMemberResource(row, row)) }
	}

	/** One member (members and site admins read it): what POST's `Location` names. */
	async get(id: string, userId: string, caller: Caller): Promise<MemberResource> {
		const { db } = this.deps
		await actorIn(db, caller, id)
		const current = await memberOf(db, id, userId)
		return toMemberResource(current, await memberUser(db, userId))
	}

	/** Adds an account with roles: owners, admins (any role but `owner`) and site admins. */
	async add(id: string, input: { userId: string; roles: string[] }, caller: Caller, client: ClientInfo): Promise<MemberResource> {
		return this.deps.db.transaction(async (tx) => {
			const actor = await this.managerIn(tx, caller, id, 'add members')
			await checkGrantableRoles(tx, actor, input.roles)
			const [user] = await tx.select({ id: users.id, email: users.email, name: users.name, status: users.status }).from(users).where(eq(users.id, input.userId))
			if (!user) throw new ValidationFailed([{ pointer: '#/userId', code: 'unknown-user', detail: 'names no account' }])
			if (user.status !== 'active') throw new ValidationFailed([{ pointer: '#/userId', code: 'deactivated', detail: 'names a deactivated account' }])
			const now = new Date()
			const [row] = await tx
				.insert(organizationMembers)
				.values({ organizationId: id, userId: user.id, roles: input.roles, joinedAt: now, updatedAt: now })
				.onConflictDoNothing()
				.returning()
			if (!row) throw new Conflict('conflict', 'This account is already a member; change its roles with PUT instead')
			const member = toMemberResource(row, user)
			await recordWebhookEvents(tx, [{ type: 'member.added', data: { organizationId: id, member } }])
			await this.deps.audit.recordIn(tx, 'member.added', client, { actorId: caller.user.id, subjectId: user.id, details: { organizationId: id, roles: row.roles.join(',') } })
			return member
		})
	}

	/** Sets a member's roles. Only an owner (or a site admin) grants `owner` or changes an owner's roles; the last owner stays one. */
	async setRoles(id: string, userId: string, roles: string[], caller: Caller, client: ClientInfo): Promise<MemberResource> {
		return this.deps.db.transaction(async (tx) => {
			const actor = await this.managerIn(tx, caller, id, "change members' roles")
			await checkGrantableRoles(tx, actor, roles)
			const current = await memberOf(tx, id, userId)
			if (current.roles.includes(OWNER)) requireOwnerActor(actor, "change an owner's roles")
			if (current.roles.includes(OWNER) && !roles.includes(OWNER)) await requireAnotherOwner(tx, id, userId)
			const user = await memberUser(tx, userId)
			if (sameRoles(current.roles, roles)) return toMemberResource(current, user)
			const [row] = await tx
				.update(organizationMembers)
				.set({ roles, updatedAt: new Date() })
				.where(and(eq(organizationMembers.organizationId, id), eq(organizationMembers.userId, userId)))
				.returning()
			if (!row) throw notAMember()
			const member = toMemberResource(row, user)
			await recordWebhookEvents(tx, [{ type: 'member.updated', data: { organizationId: id, member, previousRoles: current.roles } }])
			await this.deps.audit.recordIn(tx, 'member.updated', client, {
				actorId: caller.user.id,
				subjectId: userId,
				details: { organizationId: id, from: current.roles.join(','), to: row.roles.join(',') },
			})
			return member
		})
	}

	/** Removes a member: owners, admins (not an owner) and site admins; any member may remove themself. The last owner stays. */
	async remove(id: string, userId: string, caller: Caller, client: ClientInfo): Promise<MemberResource> {
		return this.deps.db.transaction(async (tx) => {
			const actor = await actorIn(tx, caller, id, { lock: true })
			const self = userId === caller.user.id
			if (!self) requirePermission(actor, PERMISSIONS.members, 'remove members')
			requireActive(actor)
			const current = await memberOf(tx, id, userId)
			if (current.roles.includes(OWNER)) {
				if (!self) requireOwnerActor(actor, 'remove an owner')
				await requireAnotherOwner(tx, id, userId)
			}
			const user = await memberUser(tx, userId)
			await tx.delete(organizationMembers).where(and(eq(organizationMembers.organizationId, id), eq(organizationMembers.userId, userId)))
			const member = toMemberResource(current, user)
			await recordWebhookEvents(tx, [{ type: 'member.removed', data: { organizationId: id, member } }])
			await this.deps.audit.recordIn(tx, 'member.removed', client, {
				actorId: caller.user.id,
				subjectId: userId,
				details: { organizationId: id, roles: current.roles.join(','), self },
			})
			return member
		})
	}

	/** The caller under the organization's row lock, allowed to manage members of an active organization. */
	private async managerIn(tx: Queryable, caller: Caller, id: string, what: string): Promise<Actor> {
		const actor = await actorIn(tx, caller, id, { lock: true })
		requirePermission(actor, PERMISSIONS.members, what)
		requireActive(actor)
		return actor
	}
}

function requireOwnerActor(actor: Actor, what: string) {
	if (!actor.siteAdmin && !actor.roles.includes(OWNER)) throw new Forbidden(`Only an owner may ${what}`)
}

const sameRoles = (a: string[], b: string[]) => a.length === b.length && a.every((role) => b.includes(role))

async function memberOf(db: Queryable, id: string, userId: string): Promise<OrganizationMemberRow> {
	const [row] = await db
		.select()
		.from(organizationMembers)
		.where(and(eq(organizationMembers.organizationId, id), eq(organizationMembers.userId, userId)))
	if (!row) throw notAMember()
	return row
}

async function memberUser(db: Queryable, userId: string) {
	const [user] = await db.select({ id: users.id, email: users.email, name: users.name }).from(users).where(eq(users.id, userId))
	if (!user) throw notAMember()
	return user
}

/** Under the organization's row lock: another member than `leaving` is an owner, else 409 `last-owner`. */
async function requireAnotherOwner(db: Queryable, id: string, leaving: string) {
	const [other] = await db
		.select({ userId: organizationMembers.userId })
		.from(organizationMembers)
		.where(and(eq(organizationMembers.organizationId, id), sql`${OWNER} = any(${organizationMembers.roles})`, sql`${organizationMembers.userId} <> ${leaving}::uuid`))
		.limit(1)
	if (!other) throw lastOwner()
}

/** A `role` filter naming no role is a 422, as an unknown role is anywhere (API.md). */
async function requireKnownRole(db: Queryable, role: string) {
	const [known] = await db.select({ name: organizationRoles.name }).from(organizationRoles).where(eq(organizationRoles.name, role))
	if (!known) throw new ValidationFailed([{ pointer: '#/role', code: 'unknown-role', detail: `names no organization role: ${role}` }])
}
