import { t } from 'elysia'
import { AccountId, EXAMPLE_ID, Id, IssuedId } from '../../http/ids'
import { queryInteger, type FieldError } from '../../http/problem'
import type { OrganizationMemberRow, OrganizationRow, organizationRoles, UserRow } from '../../db/schema'

type OrganizationRoleRow = typeof organizationRoles.$inferSelect

const Timestamp = t.String({ format: 'date-time', examples: ['2026-01-01T12:00:00.000Z'] })
const Status = t.Union([t.Literal('active'), t.Literal('deactivated')])
export const SLUG_MAX_LENGTH = 64
/** The database's `organizations_slug_kebab` check, said as a schema. */
const Slug = (description: string) => t.String({
	description,
	maxLength: SLUG_MAX_LENGTH,
	pattern: '^[a-z0-9]+(-[a-z0-9]+)*$',
	error: 'must be kebab-case: lower-case letters and digits in words joined by single hyphens, at most 64 characters',
	examples: ['acme-corp'],
})
const Name = t.String({ minLength: 1, maxLength: 200, pattern: '\\S', error: 'must be 1 to 200 characters, not only spaces', examples: ['Acme Corp'] })
/** A role name: what POST /organization-roles accepts (kebab-case, like `billing-admin`). */
const RoleName = t.String({
	minLength: 1,
	maxLength: 64,
	pattern: '^[a-z0-9]+(-[a-z0-9]+)*$',
	error: 'must be a role name: lower-case letters and digits in words joined by single hyphens, at most 64 characters',
	examples: ['member'],
})
const Roles = t.Array(RoleName, { minItems: 1, maxItems: 20, uniqueItems: true, description: 'names of organization roles (GET /organization-roles)', examples: [['member']] })
/**
 * A permission a defined role may hold. Not `*` (every permission): that is the built-in `owner`'s alone. A role
 * holding it would be an owner in all but name, which an `admin` may grant (only `owner` is kept from admins), so
 * an admin could give themself every permission — and apps reading `org.permissions` would treat them as an owner.
 */
const Permission = t.String({
	minLength: 1,
	maxLength: 100,
	pattern: '^[a-z0-9][a-z0-9._-]*(:[a-z0-9][a-z0-9._-]*)*$',
	error: 'must be a permission such as `invoices:read` (lower-case words joined by colons); `*` is the owner role’s alone',
	examples: ['invoices:read'],
})

const listLimit = () => t.Optional(queryInteger('limit', { minimum: 1, maximum: 100, default: 20 }))
const listCursor = () => t.Optional(t.String({ maxLength: 512, description: 'opaque, from `nextCursor`' }))
// A tuple of literals, so that the static type is their union.
const OrganizationSort = t.Union([t.Literal('name'), t.Literal('-name'), t.Literal('createdAt'), t.Literal('-createdAt')], { default: '-createdAt' })
const MemberSort = t.Union([t.Literal('joinedAt'), t.Literal('-joinedAt')], { default: '-joinedAt' })

export namespace OrganizationModel {
	export const organization = t.Object(
		{
			id: IssuedId(),
			name: t.String(),
			slug: t.String({ examples: ['acme-corp'] }),
			status: Status,
			createdAt: Timestamp,
			updatedAt: Timestamp,
			deactivatedAt: t.Union([Timestamp, t.Null()]),
		},
		{ description: 'An organization (a customer, a team, a tenant). Deactivated, never deleted.' },
	)

	export const create = t.Object({
		name: Name,
		slug: t.Optional(Slug('unique; when omitted, made from the name (`Acme Corp` → `acme-corp`)')),
	})

	/** PUT replaces the editable fields; an omitted slug stays as it is. */
	export const replace = t.Object({
		name: Name,
		slug: t.Optional(Slug('unique; omitted: unchanged')),
	})

	export const idParams = t.Object({ id: Id() })

	export const listQuery = t.Object(
		{
			limit: listLimit(),
			cursor: listCursor(),
			q: t.Optional(t.String({ minLength: 1, maxLength: 200, description: 'case-insensitive substring of the name or the slug' })),
			status: t.Optional(Status),
			sort: t.Optional(OrganizationSort),
		},
		{ additionalProperties: false },
	)

	export const page = t.Object({ items: t.Array(organization), nextCursor: t.Union([t.String(), t.Null()]), limit: t.Integer() })

	export const membership = t.Object(
		{ organization, roles: t.Array(t.String(), { examples: [['owner']] }), joinedAt: Timestamp },
		{ description: 'A membership of an account: the organization and the roles it holds there' },
	)
	export const membershipPage = t.Object({ items: t.Array(membership), nextCursor: t.Union([t.String(), t.Null()]), limit: t.Integer() })
	export const userParams = t.Object({ id: AccountId })
}

export namespace MemberModel {
	/** The account of a member, as its fellow members see it: no role, status or verification of the account. */
	const memberUser = t.Object({ id: IssuedId(), email: t.String({ examples: ['ada@example.com'] }), name: t.String({ examples: ['Ada Lovelace'] }) })

	export const member = t.Object(
		{ user: memberUser, roles: t.Array(t.String(), { examples: [['admin']] }), joinedAt: Timestamp },
		{ description: 'A membership of the organization: an account and its roles there' },
	)

	export const add = t.Object({ userId: Id({ description: 'the account to add', examples: [EXAMPLE_ID] }), roles: Roles })
	export const replace = t.Object({ roles: Roles })

	export const params = t.Object({ id: Id(), userId: Id() })

	export const listQuery = t.Object(
		{
			limit: listLimit(),
			cursor: listCursor(),
			q: t.Optional(t.String({ minLength: 1, maxLength: 200, description: "case-insensitive substring of the member's email or name" })),
			role: t.Optional(t.String({ minLength: 1, maxLength: 64, description: 'members holding this role (an unknown role is a 422)' })),
			sort: t.Optional(MemberSort),
		},
		{ additionalProperties: false },
	)

	export const page = t.Object({ items: t.Array(member), nextCursor: t.Union([t.String(), t.Null()]), limit: t.Integer() })
}

export namespace OrganizationRoleModel {
	export const role = t.Object(
		{
			name: t.String({ examples: ['billing-admin'] }),
			description: t.String(),
			permissions: t.Array(t.String(), { examples: [['invoices:read', 'invoices:write']] }),
			builtIn: t.Boolean({ description: '`owner`, `admin` and `member`: cannot be changed or deleted' }),
			createdAt: Timestamp,
			updatedAt: Timestamp,
		},
		{ description: 'An organization role, the same for every organization' },
	)
	const Permissions = t.Array(Permission, { maxItems: 100, uniqueItems: true, description: 'strings such as `invoices:read`; not `*` (every permission), which only the built-in `owner` holds', examples: [['invoices:read', 'invoices:write']] })
	const Description = t.String({ maxLength: 500 })

	export const create = t.Object({ name: RoleName, permissions: Permissions, description: t.Optional(Description) })
	export const replace = t.Object({ permissions: Permissions, description: t.Optional(Description) })
	export const nameParams = t.Object({ name: t.String({ minLength: 1, maxLength: 64, examples: ['billing-admin'] }) })
	export const list = t.Object({ items: t.Array(role) })
}

export type OrganizationResource = typeof OrganizationModel.organization.static
export type CreateOrganizationInput = typeof OrganizationModel.create.static
export type ReplaceOrganizationInput = typeof OrganizationModel.replace.static
export type ListOrganizationsQuery = typeof OrganizationModel.listQuery.static
export type MemberResource = typeof MemberModel.member.static
export type ListMembersQuery = typeof MemberModel.listQuery.static
export type OrganizationRoleResource = typeof OrganizationRoleModel.role.static
export type CreateOrganizationRoleInput = typeof OrganizationRoleModel.create.static
export type ReplaceOrganizationRoleInput = typeof OrganizationRoleModel.replace.static

export function toOrganizationResource(row: OrganizationRow): OrganizationResource {
	return {
		id: row.id,
		name: row.name,
		slug: row.slug,
		status: row.status as OrganizationResource['status'],
		createdAt: row.createdAt.toISOString(),
		updatedAt: row.updatedAt.toISOString(),
		deactivatedAt: row.deactivatedAt?.toISOString() ?? null,
	}
}

export function toMemberResource(member: Pick<OrganizationMemberRow, 'roles' | 'joinedAt'>, user: Pick<UserRow, 'id' | 'email' | 'name'>): MemberResource {
	return { user: { id: user.id, email: user.email, name: user.name }, roles: member.roles, joinedAt: member.joinedAt.toISOString() }
}

export function toRoleResource(row: OrganizationRoleRow): OrganizationRoleResource {
	return {
		name: row.name,
		description: row.description,
		permissions: row.permissions,
		builtIn: row.builtIn,
		createdAt: row.createdAt.toISOString(),
		updatedAt: row.updatedAt.toISOString(),
	}
}

/** A slug made from a name: `Café Ünïon  Ltd.` → `cafe-union-ltd`; empty when the name has no letter or digit it can keep. */
/**
 * A name a person can read: at least one letter, digit, punctuation mark or symbol, and no control or format
 * character (a name of zero-width spaces, or one reordered by a bidirectional override, would pass for another).
 */
export function nameProblem(name: string, pointer: string): FieldError | undefined {
	if (/[\p{Cc}\p{Cf}]/u.test(name)) return { pointer, code: 'pattern', detail: 'must not contain control or invisible formatting characters' }
	if (!/[\p{L}\p{N}\p{P}\p{S}]/u.test(name)) return { pointer, code: 'pattern', detail: 'must contain a letter, digit or symbol' }
	return undefined
}

export function slugFrom(name: string): string {
	return name
		.normalize('NFKD')
		.replace(/[\u0300-\u036f]/g, '')
		.toLowerCase()
		.replace(/[^a-z0-9]+/g, '-')
		.slice(0, SLUG_MAX_LENGTH)
		.replace(/^-+|-+$/g, '')
}
