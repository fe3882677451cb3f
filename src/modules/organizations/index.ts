import { Elysia } from 'elysia'
import type { authGuard } from '../auth/guard'
import { targetUserId } from '../auth/guard'
import { Envelope, problemResponses, withResponseHeaders } from '../../http/openapi'
import { nextPageLink } from '../../http/pagination'
import { envelope } from '../../http/problem'
import { requestContext } from '../../http/request-context'
import type { MembersService } from './members'
import { MemberModel, OrganizationModel, OrganizationRoleModel, toOrganizationResource, toRoleResource } from './model'
import type { OrganizationRoles } from './roles'
import type { OrganizationsService } from './service'

export interface OrganizationsModuleDeps {
	organizations: OrganizationsService
	members: MembersService
	roles: OrganizationRoles
	guard: ReturnType<typeof authGuard>
}

const USER = 'user' as const
const ADMIN = 'admin' as const
const OrganizationEnvelope = Envelope(OrganizationModel.organization)
const MemberEnvelope = Envelope(MemberModel.member)
const RoleEnvelope = Envelope(OrganizationRoleModel.role)
const NOT_FOUND =
	'A non-member gets the same 404 as for an id no organization has; site admins act on every organization as its owner would.'
const ROLES_RULE =
	'Every role must exist (422 at `#/roles` otherwise); only an owner or a site admin grants `owner` or changes an owner’s roles (403). The last owner can be neither removed nor demoted: 409 `last-owner`, also under parallel requests (each change takes the organization’s row lock).'

const organizationRoutes = ({ organizations, members, guard }: OrganizationsModuleDeps) =>
	new Elysia({ name: 'organizations', prefix: '/organizations', detail: { tags: ['Organizations'] } })
		.use(guard)
		.use(requestContext)
		.post(
			'',
			async ({ body, caller, client, set }) => {
				const row = await organizations.create(body, caller, client)
				set.status = 201
				set.headers.location = `/api/organizations/${row.id}`
				return envelope(toOrganizationResource(row), 'Organization created')
			},
			{
				auth: USER,
				body: OrganizationModel.create,
				response: { 201: withResponseHeaders(OrganizationEnvelope, 'Location'), ...problemResponses(400, 401, 403, 'slug-taken', 413, 415, 422, 429) },
				detail: {
					operationId: 'createOrganization',
					summary: 'Create an organization; its creator is its first owner',
					description:
						'Admins; any signed-in user while ORGANIZATION_CREATION=all. A slug left out is made from the name (`Acme Corp` → `acme-corp`); a slug another organization has is 409 `slug-taken`.',
				},
			},
		)
		.get(
			'',
			async ({ query, caller, set }) => {
				const page = await organizations.list(query, caller)
				if (page.nextCursor) set.headers.link = nextPageLink('/api/organizations', query, page.nextCursor)
				return envelope({ ...page, items: page.items.map(({ organization }) => toOrganizationResource(organization)) }, 'Organizations')
			},
			{
				auth: USER,
				query: OrganizationModel.listQuery,
				response: { 200: withResponseHeaders(Envelope(OrganizationModel.page), 'Link'), ...problemResponses(400, 401, 403, 422, 429) },
				detail: {
					operationId: 'listOrganizations',
					summary: 'List organizations: every one for admins, their own for users',
					description: 'Keyset pages; a `Link` header with `rel="next"` points at the next page while there is one. Sorts: `name`, `-name`, `createdAt`, `-createdAt` (default).',
				},
			},
		)
		.get('/:id', async ({ params, caller }) => envelope(toOrganizationResource(await organizations.get(params.id, caller)), 'Organization'), {
			auth: USER,
			params: OrganizationModel.idParams,
			response: { 200: OrganizationEnvelope, ...problemResponses(401, 403, 404, 422, 429) },
			detail: { operationId: 'getOrganization', summary: 'Read an organization (its members, admins)', description: NOT_FOUND },
		})
		.put(
			'/:id',
			async ({ params, body, caller, client }) => envelope(toOrganizationResource(await organizations.replace(params.id, body, caller, client)), 'Organization updated'),
			{
				auth: USER,
				params: OrganizationModel.idParams,
				body: OrganizationModel.replace,
				response: { 200: OrganizationEnvelope, ...problemResponses(400, 401, 403, 404, 'slug-taken', 'conflict', 413, 415, 422, 429) },
				detail: {
					operationId: 'replaceOrganization',
					summary: "Rename an organization or change its slug (its owners and admins, admins)",
					description: `A deactivated organization is 409 \`conflict\`. ${NOT_FOUND}`,
				},
			},
		)
		.delete(
			'/:id',
			async ({ params, caller, client }) => envelope(toOrganizationResource(await organizations.deactivate(params.id, caller, client)), 'Organization deactivated'),
			{
				auth: USER,
				params: OrganizationModel.idParams,
				response: { 200: OrganizationEnvelope, ...problemResponses(401, 403, 404, 422, 429) },
				detail: {
					operationId: 'deactivateOrganization',
					summary: 'Deactivate an organization (its owners, admins); never deletes it',
					description: `\`status\` becomes \`deactivated\`: its members' organization tokens stop at once, and it takes no more changes. Repeating it answers the same organization. ${NOT_FOUND}`,
				},
			},
		)
		.get(
			'/:id/members',
			async ({ params, query, caller, set }) => {
				const page = await members.list(params.id, query, caller)
				if (page.nextCursor) set.headers.link = nextPageLink(`/api/organizations/${params.id}/members`, query, page.nextCursor)
				return envelope(page, 'Members')
			},
			{
				auth: USER,
				params: OrganizationModel.idParams,
				query: MemberModel.listQuery,
				response: { 200: withResponseHeaders(Envelope(MemberModel.page), 'Link'), ...problemResponses(400, 401, 403, 404, 422, 429) },
				detail: {
					operationId: 'listOrganizationMembers',
					summary: "List an organization's members (its members, admins)",
					description: `Keyset pages (a \`Link\` header while there is a next one), newest member first (\`sort=joinedAt\` for the oldest first); \`q\` is a substring of the member's email or name, \`role\` a role they hold (an unknown role is 422). ${NOT_FOUND}`,
				},
			},
		)
		.post(
			'/:id/members',
			async ({ params, body, caller, client, set }) => {
				const member = await members.add(params.id, body, caller, client)
				set.status = 201
				set.headers.location = `/api/organizations/${params.id}/members/${member.user.id}`
				return envelope(member, 'Member added')
			},
			{
				auth: USER,
				params: OrganizationModel.idParams,
				body: MemberModel.add,
				response: { 201: withResponseHeaders(MemberEnvelope, 'Location'), ...problemResponses(400, 401, 403, 404, 'conflict', 413, 415, 422, 429) },
				detail: {
					operationId: 'addOrganizationMember',
					summary: 'Add an account to an organization (its owners and admins, admins)',
					description: `\`userId\` must name an active account (422), not yet a member (409 \`conflict\`). ${ROLES_RULE} A deactivated organization is 409 \`conflict\`. ${NOT_FOUND}`,
				},
			},
		)
		.get('/:id/members/:userId', async ({ params, caller }) => envelope(await members.get(params.id, params.userId, caller), 'Member'), {
			auth: USER,
			params: MemberModel.params,
			response: { 200: MemberEnvelope, ...problemResponses(401, 403, 404, 422, 429) },
			detail: {
				operationId: 'getOrganizationMember',
				summary: 'Read one member (its fellow members, admins)',
				description: `What the \`Location\` of POST /organizations/{id}/members names. An account that is not a member is 404. ${NOT_FOUND}`,
			},
		})
		.put(
			'/:id/members/:userId',
			async ({ params, body, caller, client }) => envelope(await members.setRoles(params.id, params.userId, body.roles, caller, client), 'Member updated'),
			{
				auth: USER,
				params: MemberModel.params,
				body: MemberModel.replace,
				response: { 200: MemberEnvelope, ...problemResponses(400, 401, 403, 404, 'last-owner', 'conflict', 413, 415, 422, 429) },
				detail: {
					operationId: 'replaceOrganizationMember',
					summary: "Set a member's roles (its owners and admins, admins)",
					description: `${ROLES_RULE} A deactivated organization is 409 \`conflict\`. ${NOT_FOUND}`,
				},
			},
		)
		.delete(
			'/:id/members/:userId',
			async ({ params, caller, client }) => envelope(await members.remove(params.id, params.userId, caller, client), 'Member removed'),
			{
				auth: USER,
				params: MemberModel.params,
				response: { 200: MemberEnvelope, ...problemResponses(401, 403, 404, 'last-owner', 'conflict', 422, 429) },
				detail: {
					operationId: 'removeOrganizationMember',
					summary: 'Remove a member (its owners and admins, admins; any member themself)',
					description: `Answers the membership as it was. Only an owner or a site admin removes another owner; the last owner cannot leave (409 \`last-owner\`). A deactivated organization is 409 \`conflict\`. ${NOT_FOUND}`,
				},
			},
		)

const roleRoutes = ({ roles, guard }: OrganizationsModuleDeps) =>
	new Elysia({ name: 'organization-roles', prefix: '/organization-roles', detail: { tags: ['Organizations'] } })
		.use(guard)
		.use(requestContext)
		.get('', async () => envelope({ items: (await roles.list()).map(toRoleResource) }, 'Organization roles'), {
			auth: USER,
			response: { 200: Envelope(OrganizationRoleModel.list), ...problemResponses(401, 403, 429) },
			detail: {
				operationId: 'listOrganizationRoles',
				summary: 'List the organization roles, the built-in ones too (everyone signed in)',
				description: '`owner` holds every permission (`*`); `admin` `members:manage` and `invitations:manage`; `member` none. One set for every organization, by name.',
			},
		})
		.get('/:name', async ({ params }) => envelope(toRoleResource(await roles.get(params.name)), 'Organization role'), {
			auth: USER,
			params: OrganizationRoleModel.nameParams,
			response: { 200: RoleEnvelope, ...problemResponses(401, 403, 404, 422, 429) },
			detail: { operationId: 'getOrganizationRole', summary: 'Read an organization role (everyone signed in)' },
		})
		.post(
			'',
			async ({ body, caller, client, set }) => {
				const row = await roles.create(body, caller, client)
				set.status = 201
				set.headers.location = `/api/organization-roles/${row.name}`
				return envelope(toRoleResource(row), 'Organization role created')
			},
			{
				auth: ADMIN,
				body: OrganizationRoleModel.create,
				response: { 201: withResponseHeaders(RoleEnvelope, 'Location'), ...problemResponses(400, 401, 403, 'conflict', 413, 415, 422, 429) },
				detail: {
					operationId: 'createOrganizationRole',
					summary: 'Define an organization role (admins)',
					description: 'A name (kebab-case) no role has yet (409 `conflict` otherwise), and its permissions: strings such as `invoices:read`.',
				},
			},
		)
		.put('/:name', async ({ params, body, caller, client }) => envelope(toRoleResource(await roles.replace(params.name, body, caller, client)), 'Organization role updated'), {
			auth: ADMIN,
			params: OrganizationRoleModel.nameParams,
			body: OrganizationRoleModel.replace,
			response: { 200: RoleEnvelope, ...problemResponses(400, 401, 403, 404, 413, 415, 422, 429) },
			detail: {
				operationId: 'replaceOrganizationRole',
				summary: "Replace an organization role's permissions (admins)",
				description: 'An omitted `description` stays as it is. The built-in roles cannot be changed (403). Members holding the role have the new permissions at their next request.',
			},
		})
		.delete('/:name', async ({ params, caller, client }) => envelope(toRoleResource(await roles.delete(params.name, caller, client)), 'Organization role deleted'), {
			auth: ADMIN,
			params: OrganizationRoleModel.nameParams,
			response: { 200: RoleEnvelope, ...problemResponses(401, 403, 404, 'conflict', 422, 429) },
			detail: {
				operationId: 'deleteOrganizationRole',
				summary: 'Delete an organization role (admins)',
				description:
					'Answers the role as it was. The built-in roles cannot be deleted (403); a role that a member holds or a pending invitation names is 409 `conflict` (change their roles first): nobody loses permissions unannounced.',
			},
		})

const membershipRoutes = ({ organizations, guard }: OrganizationsModuleDeps) =>
	new Elysia({ name: 'user-organizations', prefix: '/users', detail: { tags: ['Organizations'] } })
		.use(guard)
		.get(
			'/:id/organizations',
			async ({ params, query, caller, set }) => {
				const userId = targetUserId(params.id, caller)
				const page = await organizations.memberships(userId, query)
				if (page.nextCursor) set.headers.link = nextPageLink(`/api/users/${params.id}/organizations`, query, page.nextCursor)
				const items = page.items.map(({ organization, membership }) => ({
					organization: toOrganizationResource(organization),
					roles: membership?.roles ?? [],
					joinedAt: (membership?.joinedAt ?? organization.createdAt).toISOString(),
				}))
				return envelope({ ...page, items }, 'Memberships')
			},
			{
				auth: 'self',
				params: OrganizationModel.userParams,
				query: OrganizationModel.listQuery,
				response: { 200: withResponseHeaders(Envelope(OrganizationModel.membershipPage), 'Link'), ...problemResponses(400, 401, 403, 404, 422, 429) },
				detail: {
					operationId: 'listUserOrganizations',
					summary: "List an account's memberships (the user themself, or an admin)",
					description: 'Each with the organization and the roles held there; the same `q`, `status`, `sort` and keyset pages as GET /organizations.',
				},
			},
		)

/** Organizations, their members and the organization roles (API.md, Organizations). */
export const organizationsModule = (deps: OrganizationsModuleDeps) =>
	new Elysia({ name: 'organizations-module' }).use(organizationRoutes(deps)).use(roleRoutes(deps)).use(membershipRoutes(deps))
