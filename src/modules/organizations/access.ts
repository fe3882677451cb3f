import { and, eq, inArray } from 'drizzle-orm'
import type { Queryable } from '../../db/client'
import { organizationMembers, organizationRoles, organizations, users, type OrganizationRow } from '../../db/schema'
import { AppError, Forbidden, NotFound, ValidationFailed } from '../../http/problem'
import { permissionsOfRoles } from '../auth/organization-claim'
import type { Caller } from '../auth/sessions'

// Who may do what in an organization: one place, used by every organization route (API.md, Organizations).
// A site admin may do whatever an owner may; a non-member learns nothing, not even that the organization exists.

export const BUILT_IN_ROLES = ['owner', 'admin', 'member'] as const
/** The permission that stands for every permission (the `owner` role's). */
export const EVERY_PERMISSION = '*'

/** What an `admin` role holder (or any holder of these permissions) may manage. */
export const PERMISSIONS = { members: 'members:manage', invitations: 'invitations:manage' } as const

export interface Actor {
	organization: OrganizationRow
	/** The caller's roles in it (empty for a site admin who is not a member). */
	roles: string[]
	/** The permissions those roles give, with `*` for every one. */
	permissions: string[]
	/** A site admin: acts as an owner whether or not a member. */
	siteAdmin: boolean
}

type Reader = Queryable

const notFound = () => new NotFound('No organization has this id')

/**
 * The caller as an actor in organization `id`: its member or a site admin. Anyone else, and an unknown id, gets
 * the same 404. A deactivated organization is still found here (its page can be read); `requireActive` refuses acts.
 * Pass a transaction and `lock` to take the organization's row lock first: every change of membership does, so
 * "is this the last owner?" and the change it guards are one step (never a check-then-act).
 */
export async function actorIn(db: Reader, caller: Caller, id: string, options: { lock?: boolean } = {}): Promise<Actor> {
	const query = db.select().from(organizations).where(eq(organizations.id, id))
	const [organization] = await (options.lock ? query.for('update') : query)
	if (!organization) throw notFound()
	const [membership] = await db
		// The permissions as the `org` claim computes them: one definition of what roles give.
		.select({ roles: organizationMembers.roles, permissions: permissionsOfRoles(organizationMembers.roles) })
		.from(organizationMembers)
		.where(and(eq(organizationMembers.organizationId, id), eq(organizationMembers.userId, caller.user.id)))
	const siteAdmin = caller.user.role === 'admin'
	if (!membership && !siteAdmin) throw notFound()
	const roles = membership?.roles ?? []
	const permissions = siteAdmin ? [EVERY_PERMISSION] : [...new Set(membership?.permissions ?? [])].sort()
	return { organization, roles, permissions, siteAdmin }
}

/** Whether the actor holds `permission` (an owner and a site admin hold every one). */
export const holds = (actor: Actor, permission: string) =>
	actor.permissions.includes(EVERY_PERMISSION) || actor.permissions.includes(permission)

/** Refuses an actor without `permission`, saying which role would do. */
export function requirePermission(actor: Actor, permission: string, what: string): void {
	if (!holds(actor, permission)) throw new Forbidden(`Only an organization's owner or admin may ${what}`)
}

/** Refuses an actor who is neither an owner of the organization nor a site admin. */
export function requireOwner(actor: Actor, what: string): void {
	if (!actor.siteAdmin && !actor.roles.includes('owner')) throw new Forbidden(`Only an organization's owner may ${what}`)
}

/** Refuses an actor who holds neither the `owner` nor the `admin` role (a site admin passes): who may change the organization itself. */
export function requireOwnerOrAdmin(actor: Actor, what: string): void {
	if (!actor.siteAdmin && !actor.roles.includes('owner') && !actor.roles.includes('admin'))
		throw new Forbidden(`Only an organization's owner or admin may ${what}`)
}

/** Acts change nothing in a deactivated organization (reads still work). */
export function requireActive(actor: Actor): void {
	if (actor.organization.status !== 'active') throw new AppError('conflict', 'This organization is deactivated')
}

/**
 * Checks roles an actor wants to grant: every name must exist (`422` at `pointer`, as API.md asks for an unknown
 * role anywhere), and only an owner or a site admin may grant `owner`.
 */
export async function checkGrantableRoles(db: Reader, actor: Actor, roles: string[], pointer = '/roles'): Promise<void> {
	const wanted = [...new Set(roles)]
	const known = wanted.length
		? // FOR KEY SHARE: within the caller's transaction, a role deleted meanwhile waits for it (and then sees the name in use).
			await db.select({ name: organizationRoles.name }).from(organizationRoles).where(inArray(organizationRoles.name, wanted)).for('key share')
		: []
	const unknown = wanted.filter((name) => !known.some((row) => row.name === name))
	if (unknown.length)
		throw new ValidationFailed([{ pointer: `#${pointer}`, detail: `names no organization role: ${unknown.join(', ')}`, code: 'unknown-role' }])
	if (wanted.includes('owner') && !actor.siteAdmin && !actor.roles.includes('owner'))
		throw new Forbidden('Only an owner may grant the owner role')
}

/**
 * Whether the roles an invitation names may still be granted by its inviter, as the inviter is now: an invitation
 * carries its inviter's authority, not a copy of it. Only `owner` depends on who grants it (any holder of
 * `invitations:manage` may grant every other role), so an invitation naming `owner` is accepted only while its
 * inviter is an owner of the organization or an active site admin; made by an owner since demoted or removed (or by
 * an account gone), it is refused (403) and stays unspent. Call under the organization's row lock (acceptance takes it).
 */
export async function requireInviterMayGrant(db: Reader, organizationId: string, invitedBy: string | null, roles: string[]): Promise<void> {
	if (!roles.includes('owner')) return
	const refused = () => new Forbidden('Whoever sent this invitation may no longer grant the owner role; ask an owner for a new invitation')
	if (invitedBy === null) throw refused()
	const [inviter] = await db
		.select({ role: users.role, status: users.status, roles: organizationMembers.roles })
		.from(users)
		.leftJoin(organizationMembers, and(eq(organizationMembers.userId, users.id), eq(organizationMembers.organizationId, organizationId)))
		.where(eq(users.id, invitedBy))
	if (!inviter || inviter.status !== 'active') throw refused()
	if (inviter.role !== 'admin' && !inviter.roles?.includes('owner')) throw refused()
}
