import { and, asc, desc, eq, ilike, or, type SQL } from 'drizzle-orm'
import type { Config } from '../../config/env'
import type { Database } from '../../db/client'
import { sqlState } from '../../db/client'
import { organizationMembers, organizations, users, type OrganizationMemberRow, type OrganizationRow } from '../../db/schema'
import { AppError, Forbidden, NotFound, ValidationFailed } from '../../http/problem'
import type { AuditLog, ClientInfo } from '../audit/service'
import type { Caller } from '../auth/sessions'
import { recordWebhookEvents } from '../webhooks/outbox'
import { actorIn, requireActive, requireOwner, requireOwnerOrAdmin } from './access'
import { afterKeyset, decodeKeysetCursor, encodeKeysetCursor, escapeLike, pageOf } from '../../http/pagination'
import {
	nameProblem,
	slugFrom,
	toMemberResource,
	toOrganizationResource,
	type CreateOrganizationInput,
	type ListOrganizationsQuery,
	type ReplaceOrganizationInput,
} from './model'

export interface OrganizationsServiceDeps {
	db: Database
	audit: AuditLog
	/** ORGANIZATION_CREATION: who may create one. */
	creation: Config['organizationCreation']
}

/** An organization in a list, with the listed account's membership when the list is of one account's. */
export interface ListedOrganization {
	organization: OrganizationRow
	membership: Pick<OrganizationMemberRow, 'roles' | 'joinedAt'> | null
}

const slugTaken = () => new AppError('slug-taken', 'Another organization has this slug')

function translateConstraint(error: unknown): unknown {
	const { code, constraint } = sqlState(error)
	if (code === '23505' && constraint === 'organizations_slug_key') return slugTaken()
	return error
}

/** The fields a PUT changed, as `organization.updated` and its audit row name them. */
function changedFields(before: OrganizationRow, after: OrganizationRow): string[] {
	return (['name', 'slug'] as const).filter((field) => before[field] !== after[field])
}

/** Organizations (API.md, Organizations): create, read, list, rename, deactivate. Knows nothing of HTTP. */
export class OrganizationsService {
	constructor(private readonly deps: OrganizationsServiceDeps) {}

	/** A new organization; its creator is its first `owner`, in the same transaction. */
	async create(input: CreateOrganizationInput, caller: Caller, client: ClientInfo): Promise<OrganizationRow> {
		if (this.deps.creation !== 'all' && caller.user.role !== 'admin') throw new Forbidden('Only admins may create organizations')
		const unreadable = nameProblem(input.name, '#/name')
		if (unreadable) throw new ValidationFailed([unreadable])
		const slug = input.slug ?? slugFrom(input.name)
		if (!slug) throw new ValidationFailed([{ pointer: '#/slug', code: 'required', detail: 'is required: the name gives no slug (no letter or digit from a-z, 0-9)' }])
		return this.deps.db.transaction(async (tx) => {
			const now = new Date()
			const [row] = await tx
				.insert(organizations)
				.values({ id: Bun.randomUUIDv7(), name: input.name, slug, createdAt: now, updatedAt: now })
				.returning()
				.catch((error: unknown) => {
					throw translateConstraint(error)
				})
			if (!row) throw new Error('organization insert returned no row')
			const [membership] = await tx
				.insert(organizationMembers)
				.values({ organizationId: row.id, userId: caller.user.id, roles: ['owner'], joinedAt: now, updatedAt: now })
				.returning()
			if (!membership) throw new Error('membership insert returned no row')
			const organization = toOrganizationResource(row)
			const member = toMemberResource(membership, caller.user)
			await recordWebhookEvents(tx, [
				{ type: 'organization.created', data: { organization } },
				{ type: 'member.added', data: { organizationId: row.id, member } },
			])
			await this.deps.audit.recordIn(tx, 'organization.created', client, { actorId: caller.user.id, details: { organizationId: row.id, slug: row.slug } })
			await this.deps.audit.recordIn(tx, 'member.added', client, { actorId: caller.user.id, subjectId: caller.user.id, details: { organizationId: row.id, roles: 'owner' } })
			return row
		})
	}

	/** An organization its member or a site admin may read (anyone else: the 404 of an unknown id). */
	async get(id: string, caller: Caller): Promise<OrganizationRow> {
		return (await actorIn(this.deps.db, caller, id)).organization
	}

	/** Renames (and re-slugs) an organization: its owners and admins, and site admins. */
	async replace(id: string, input: ReplaceOrganizationInput, caller: Caller, client: ClientInfo): Promise<OrganizationRow> {
		const unreadable = nameProblem(input.name, '#/name')
		if (unreadable) throw new ValidationFailed([unreadable])
		return this.deps.db.transaction(async (tx) => {
			const actor = await actorIn(tx, caller, id, { lock: true })
			requireOwnerOrAdmin(actor, 'change it')
			requireActive(actor)
			const before = actor.organization
			const after = { name: input.name, slug: input.slug ?? before.slug }
			if (after.name === before.name && after.slug === before.slug) return before
			const [row] = await tx
				.update(organizations)
				.set({ ...after, updatedAt: new Date() })
				.where(eq(organizations.id, id))
				.returning()
				.catch((error: unknown) => {
					throw translateConstraint(error)
				})
			if (!row) throw new Error('organization update returned no row')
			const changed = changedFields(before, row)
			await recordWebhookEvents(tx, [{ type: 'organization.updated', data: { organization: toOrganizationResource(row), changed } }])
			await this.deps.audit.recordIn(tx, 'organization.updated', client, {
				actorId: caller.user.id,
				details: { organizationId: id, changed: changed.join(','), slug: row.slug },
			})
			return row
		})
	}

	/** Deactivation is a state (never a deletion): its owners and site admins; repeating it answers the same. */
	async deactivate(id: string, caller: Caller, client: ClientInfo): Promise<OrganizationRow> {
		return this.deps.db.transaction(async (tx) => {
			const actor = await actorIn(tx, caller, id, { lock: true })
			requireOwner(actor, 'deactivate it')
			if (actor.organization.status === 'deactivated') return actor.organization
			const now = new Date()
			const [row] = await tx
				.update(organizations)
				.set({ status: 'deactivated', deactivatedAt: now, updatedAt: now })
				.where(eq(organizations.id, id))
				.returning()
			if (!row) throw new Error('organization update returned no row')
			await recordWebhookEvents(tx, [{ type: 'organization.deactivated', data: { organization: toOrganizationResource(row) } }])
			await this.deps.audit.recordIn(tx, 'organization.deactivated', client, { actorId: caller.user.id, details: { organizationId: id } })
			return row
		})
	}

	/** GET /organizations: every organization for a site admin, the caller's own for anyone else. */
	async list(query: ListOrganizationsQuery, caller: Caller) {
		return this.listOf(query, caller.user.role === 'admin' ? undefined : caller.user.id)
	}

	/** GET /users/{id}/organizations: one account's memberships. */
	async memberships(userId: string, query: ListOrganizationsQuery) {
		// As GET /users/{id} answers: an id no account has is 404, not an empty page.
		const [user] = await this.deps.db.select({ id: users.id }).from(users).where(eq(users.id, userId))
		if (!user) throw new NotFound('No user with this id')
		return this.listOf(query, userId)
	}

	private async listOf(query: ListOrganizationsQuery, memberId: string | undefined) {
		const limit = query.limit ?? 20
		const sort = query.sort ?? '-createdAt'
		const byName = sort.endsWith('name')
		const descending = sort.startsWith('-')
		const keyColumn = byName ? organizations.name : organizations.createdAt
		const cursor = query.cursor === undefined ? undefined : decodeKeysetCursor(query.cursor, sort, !byName)
		const direction = descending ? desc : asc
		const conditions: Array<SQL | undefined> = [
			query.q === undefined ? undefined : or(ilike(organizations.name, `%${escapeLike(query.q)}%`), ilike(organizations.slug, `%${escapeLike(query.q)}%`)),
			query.status === undefined ? undefined : eq(organizations.status, query.status),
			cursor && afterKeyset(keyColumn, organizations.id, cursor, descending, !byName),
		]
		const order = [direction(keyColumn), direction(organizations.id)]
		const listed: ListedOrganization[] =
			memberId === undefined
				? (await this.deps.db.select().from(organizations).where(and(...conditions)).orderBy(...order).limit(limit + 1)).map((organization) => ({
						organization,
						membership: null,
					}))
				: (
						await this.deps.db
							.select({ organization: organizations, roles: organizationMembers.roles, joinedAt: organizationMembers.joinedAt })
							.from(organizationMembers)
							.innerJoin(organizations, eq(organizations.id, organizationMembers.organizationId))
							.where(and(eq(organizationMembers.userId, memberId), ...conditions))
							.orderBy(...order)
							.limit(limit + 1)
					).map(({ organization, roles, joinedAt }) => ({ organization, membership: { roles, joinedAt } }))
		return pageOf(listed, limit, ({ organization }) =>
			encodeKeysetCursor(sort, byName ? organization.name : organization.createdAt.toISOString(), organization.id),
		)
	}
}
