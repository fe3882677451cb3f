import { and, desc, eq, gt, inArray, isNull, lte, isNotNull, sql, type SQL } from 'drizzle-orm'
import { Elysia, t } from 'elysia'
import type { Config } from '../../config/env'
import { digestOf, isOpaqueToken, newOpaqueToken } from '../../crypto/opaque-tokens'
import type { Database, Queryable } from '../../db/client'
import { organizationInvitations, organizationMembers, organizationRoles, organizations, type OrganizationInvitationRow, type OrganizationRow, type UserRow } from '../../db/schema'
import { Id, IssuedId } from '../../http/ids'
import { Envelope, problemResponses, withResponseHeaders } from '../../http/openapi'
import { afterKeyset, decodeKeysetCursor, encodeKeysetCursor, nextPageLink, pageOf } from '../../http/pagination'
import { AppError, envelope, Forbidden, NotFound, queryInteger } from '../../http/problem'
import { requestContext, type ClientInfo } from '../../http/request-context'
import { queuedSince } from '../../jobs/queue'
import type { Mailer, OutgoingMail } from '../../mail/mailer'
import { enqueueMail } from '../../mail/outbox'
import type { MailTemplates } from '../../mail/templates'
import type { AuditLog } from '../audit/service'
import type { authGuard } from '../auth/guard'
import type { Caller, CallerUser } from '../auth/sessions'
import { inWords, mailThrottleKey } from '../email/tokens'
import { invalidCode, mailUnavailable } from '../email/service'
import { Email, normalizeEmail } from '../users/model'
import { recordWebhookEvents, type WebhookEvent } from '../webhooks/outbox'
import { actorIn, checkGrantableRoles, PERMISSIONS, requireActive, requireInviterMayGrant, requirePermission } from './access'
import { toMemberResource } from './model'

/*
 * Organization invitations (API.md "Organizations"): an owner or admin invites an address with roles they may
 * grant; a mail carries a link to INVITATION_URL with an opaque token in its fragment (stored only as a digest);
 * the account whose verified address it names accepts it once, within 7 days, and becomes a member.
 *
 * Decisions:
 * - One live invitation per address and organization. Inviting an address again replaces the pending invitation
 *   (a new link, the new roles; the old link is revoked) — unless its mail went within MAIL_RESEND_SECONDS: then
 *   the answer is the pending invitation as it is, and no second mail goes (the mail routes' resend interval:
 *   the same answer, no mail).
 * - The answer never depends on whether the address has an account (or is already a member): nothing is looked up.
 * - Accepting as an existing member adds the invitation's roles to the member's (never removes one).
 * - Acceptance takes the organization's row lock (as every change of membership does, access.ts), then spends the
 *   token with one UPDATE … WHERE accepted_at IS NULL AND revoked_at IS NULL: of parallel acceptances exactly one
 *   gets the row; the others find it used (400 invalid-code).
 */

/** How long an invitation stays valid (API.md: 7 days). */
export const INVITATION_TTL_SECONDS = 7 * 24 * 3600

/** What the token's digest is taken of: the purpose first, so that no other kind of token's digest can match. */
export const invitationTokenHash = (token: string) => digestOf(`invitation:${token}`)

/** The key of the resend interval: one invitation mail per address and organization per MAIL_RESEND_SECONDS. */
const throttleKeyOf = (organizationId: string, address: string) => mailThrottleKey('invitation', `${organizationId}:${address}`)

type InvitationStatus = 'pending' | 'accepted' | 'revoked' | 'expired'

const Status = (options: { description?: string } = {}) =>
	t.Union([t.Literal('pending'), t.Literal('accepted'), t.Literal('revoked'), t.Literal('expired')], options)
const Timestamp = t.String({ format: 'date-time', examples: ['2026-01-01T12:00:00.000Z'] })
const Nullable = <T extends Parameters<typeof t.Union>[0][number]>(schema: T) => t.Union([schema, t.Null()])
const RoleName = t.String({ minLength: 1, maxLength: 64, examples: ['admin'] })

export namespace InvitationModel {
	export const invitation = t.Object({
		id: IssuedId(),
		organizationId: IssuedId(),
		email: t.String({ examples: ['grace@example.com'] }),
		roles: t.Array(t.String(), { examples: [['member']] }),
		status: Status({ description: '`pending` until accepted, revoked or expired (7 days after it was made)' }),
		invitedBy: Nullable(IssuedId()),
		createdAt: Timestamp,
		expiresAt: Timestamp,
		acceptedAt: Nullable(Timestamp),
		acceptedBy: Nullable(IssuedId()),
		revokedAt: Nullable(Timestamp),
	})

	export const create = t.Object(
		{
			email: Email,
			roles: t.Array(RoleName, {
				minItems: 1,
				maxItems: 20,
				uniqueItems: true,
				examples: [['member']],
				description: 'roles the inviter may grant (an `admin` may not grant `owner`); an unknown role is 422',
			}),
		},
		{ additionalProperties: false },
	)

	export const params = t.Object({ id: Id() })
	export const invitationParams = t.Object({ id: Id(), invitationId: Id() })

	export const listQuery = t.Object(
		{
			limit: t.Optional(queryInteger('limit', { minimum: 1, maximum: 100, default: 20 })),
			cursor: t.Optional(t.String({ maxLength: 512, description: 'opaque, from `nextCursor`' })),
			status: t.Optional(Status()),
		},
		{ additionalProperties: false },
	)

	export const page = t.Object({ items: t.Array(invitation), nextCursor: Nullable(t.String()), limit: t.Integer() })

	export const acceptance = t.Object(
		{ token: t.String({ minLength: 1, maxLength: 512, description: "the token from the invitation link's fragment (`#token=…`)" }) },
		{ additionalProperties: false },
	)

	export const membership = t.Object({
		organization: t.Object({ id: IssuedId(), name: t.String(), slug: t.String() }),
		userId: IssuedId(),
		roles: t.Array(t.String(), { description: "the member's roles now: the invitation's, added to any the member had" }),
		joinedAt: Timestamp,
	})
}

export type InvitationResource = typeof InvitationModel.invitation.static
export type MembershipResource = typeof InvitationModel.membership.static

export function invitationStatus(row: OrganizationInvitationRow, now = new Date()): InvitationStatus {
	if (row.acceptedAt) return 'accepted'
	if (row.revokedAt) return 'revoked'
	return row.expiresAt <= now ? 'expired' : 'pending'
}

export const toInvitationResource = (row: OrganizationInvitationRow): InvitationResource => ({
	id: row.id,
	organizationId: row.organizationId,
	email: row.email,
	roles: row.roles,
	status: invitationStatus(row),
	invitedBy: row.invitedBy,
	createdAt: row.createdAt.toISOString(),
	expiresAt: row.expiresAt.toISOString(),
	acceptedAt: row.acceptedAt?.toISOString() ?? null,
	acceptedBy: row.acceptedBy,
	revokedAt: row.revokedAt?.toISOString() ?? null,
})

const invitationEvent = (type: 'invitation.created' | 'invitation.accepted', row: OrganizationInvitationRow, extra: Record<string, unknown> = {}): WebhookEvent => {
	const { acceptedBy: _, ...shown } = toInvitationResource(row)
	return { type, data: { invitation: shown, ...extra } }
}

const codeExpired = () => new AppError('code-expired', 'The invitation has expired; ask for a new one')
const invitationNotFound = () => new NotFound('No invitation of this organization has this id')

export interface InvitationsDeps {
	db: Database
	audit: AuditLog
	mailer: Pick<Mailer, 'available'>
	templates: MailTemplates
	settings: Pick<Config['mail'], 'appName' | 'invitationUrl' | 'resendSeconds'>
}

/** An invitation a token names, with its organization, as the /invitation page shows it before it is accepted. */
export interface InvitationPreview {
	invitation: OrganizationInvitationRow
	organization: OrganizationRow
}

type Tx = Queryable

export class InvitationsService {
	constructor(private readonly deps: InvitationsDeps) {}

	/** POST /organizations/{id}/invitations. */
	async create(caller: Caller, organizationId: string, body: { email: string; roles: string[] }, client: ClientInfo): Promise<OrganizationInvitationRow> {
		const { db, settings, audit } = this.deps
		if (!this.deps.mailer.available) throw mailUnavailable()
		const address = normalizeEmail(body.email)
		const roles = [...new Set(body.roles)]
		return db.transaction(async (tx) => {
			// The organization's row lock: two invitations of one address at once are one after the other here.
			const actor = await actorIn(tx, caller, organizationId, { lock: true })
			requirePermission(actor, PERMISSIONS.invitations, 'invite')
			requireActive(actor)
			await checkGrantableRoles(tx, actor, roles)
			const throttleKey = throttleKeyOf(organizationId, address)
			const [pending] = await tx
				.select()
				.from(organizationInvitations)
				.where(and(eq(organizationInvitations.organizationId, organizationId), eq(organizationInvitations.email, address), livePending()))
				.orderBy(desc(organizationInvitations.createdAt))
				.limit(1)
			// Asked again within the resend interval: the same answer, and no second mail.
			if (pending && (await queuedSince(tx, throttleKey, settings.resendSeconds))) return pending
			await tx
				.update(organizationInvitations)
				.set({ revokedAt: sql`now()` })
				.where(and(eq(organizationInvitations.organizationId, organizationId), eq(organizationInvitations.email, address), livePending()))
			const token = newOpaqueToken()
			const [row] = await tx
				.insert(organizationInvitations)
				.values({
					id: Bun.randomUUIDv7(),
					organizationId,
					email: address,
					roles,
					tokenHash: invitationTokenHash(token),
					invitedBy: caller.user.id,
					// From the same clock and instant as created_at: exactly 7 days after it.
					expiresAt: sql`now() + make_interval(secs => ${INVITATION_TTL_SECONDS})`,
				})
				.returning()
			if (!row) throw new Error('the invitation was not written')
			// The token rides in the fragment: browsers never send it, so a scanner that fetches the link spends nothing.
			const mail: OutgoingMail = {
				kind: 'invitation',
				to: address,
				...this.deps.templates.render('invitation', {
					appName: settings.appName,
					email: address,
					name: '',
					organizationName: actor.organization.name,
					roles: roles.join(', '),
					inviter: caller.user.name || caller.user.email,
					link: `${settings.invitationUrl}#token=${token}`,
					validFor: inWords(INVITATION_TTL_SECONDS),
				}),
			}
			await enqueueMail(tx, mail, throttleKey)
			await recordWebhookEvents(tx, [invitationEvent('invitation.created', row)])
			await audit.recordIn(tx, 'invitation.created', client, {
				actorId: caller.user.id,
				subjectId: organizationId,
				details: { invitationId: row.id, roles: roles.join(',') },
			})
			return row
		})
	}

	/** GET /organizations/{id}/invitations: newest first, a keyset page. */
	async list(caller: Caller, organizationId: string, query: typeof InvitationModel.listQuery.static) {
		const { db } = this.deps
		const actor = await actorIn(db, caller, organizationId)
		requirePermission(actor, PERMISSIONS.invitations, 'list invitations')
		const limit = query.limit ?? 20
		const cursor = query.cursor === undefined ? undefined : decodeKeysetCursor(query.cursor, INVITATIONS_SORT, true)
		const rows = await db
			.select()
			.from(organizationInvitations)
			.where(
				and(
					eq(organizationInvitations.organizationId, organizationId),
					query.status === undefined ? undefined : statusFilter(query.status),
					cursor && afterKeyset(organizationInvitations.createdAt, organizationInvitations.id, cursor, true, true),
				),
			)
			.orderBy(desc(organizationInvitations.createdAt), desc(organizationInvitations.id))
			.limit(limit + 1)
		return pageOf(rows, limit, (row) => encodeKeysetCursor(INVITATIONS_SORT, row.createdAt.toISOString(), row.id))
	}

	/** GET /organizations/{id}/invitations/{invitationId}. */
	async get(caller: Caller, organizationId: string, invitationId: string): Promise<OrganizationInvitationRow> {
		const { db } = this.deps
		const actor = await actorIn(db, caller, organizationId)
		requirePermission(actor, PERMISSIONS.invitations, 'read invitations')
		const [row] = await db
			.select()
			.from(organizationInvitations)
			.where(and(eq(organizationInvitations.id, invitationId), eq(organizationInvitations.organizationId, organizationId)))
		if (!row) throw invitationNotFound()
		return row
	}

	/** DELETE /organizations/{id}/invitations/{invitationId}: its link opens nothing from now on (revoking twice answers the same). */
	async revoke(caller: Caller, organizationId: string, invitationId: string, client: ClientInfo): Promise<OrganizationInvitationRow> {
		const { db, audit } = this.deps
		return db.transaction(async (tx) => {
			const actor = await actorIn(tx, caller, organizationId, { lock: true })
			requirePermission(actor, PERMISSIONS.invitations, 'revoke invitations')
			const [row] = await tx
				.select()
				.from(organizationInvitations)
				.where(and(eq(organizationInvitations.id, invitationId), eq(organizationInvitations.organizationId, organizationId)))
				.for('update')
			if (!row) throw invitationNotFound()
			if (row.acceptedAt) throw new AppError('conflict', 'This invitation was accepted already: remove the member instead')
			if (row.revokedAt) return row
			const [revoked] = await tx.update(organizationInvitations).set({ revokedAt: sql`now()` }).where(eq(organizationInvitations.id, row.id)).returning()
			await audit.recordIn(tx, 'invitation.revoked', client, { actorId: caller.user.id, subjectId: organizationId, details: { invitationId: row.id } })
			return revoked ?? row
		})
	}

	/** The invitation a token names, for the /invitation page: refused as acceptance refuses it (used, revoked, unknown, expired). */
	async preview(token: string): Promise<InvitationPreview> {
		const found = await this.findLive(this.deps.db, token)
		const [organization] = await this.deps.db.select().from(organizations).where(eq(organizations.id, found.organizationId))
		if (!organization) throw invalidCode()
		if (organization.status !== 'active') throw organizationInactive()
		// Refused as acceptance would refuse it: the page offers no Accept button for an invitation that gives nothing.
		await requireInviterMayGrant(this.deps.db, organization.id, found.invitedBy, found.roles)
		return { invitation: found, organization }
	}

	/**
	 * POST /invitation-acceptances (and the /invitation page's button): the signed-in account whose verified address
	 * the invitation names becomes a member with its roles, in the transaction that spends the token.
	 */
	async accept(user: CallerUser, token: string, client: ClientInfo): Promise<MembershipResource> {
		const { db, audit } = this.deps
		return db.transaction(async (tx) => {
			const found = await this.findLive(tx, token)
			if (user.emailVerifiedAt === null)
				throw new Forbidden('Verify your email address first: an invitation is accepted only by the verified address it names')
			if (normalizeEmail(user.email) !== found.email)
				throw new Forbidden('This invitation names another email address: sign in with the account of the invited address')
			// The organization's row lock, as every change of membership takes it (access.ts).
			const [organization] = await tx.select().from(organizations).where(eq(organizations.id, found.organizationId)).for('update')
			if (!organization) throw invalidCode()
			if (organization.status !== 'active') throw organizationInactive()
			// `owner` is given only while whoever invited may still grant it (refused before the token is spent).
			await requireInviterMayGrant(tx, organization.id, found.invitedBy, found.roles)
			// Spent once: of parallel acceptances, one updates the row; the others find it accepted and get nothing.
			const [spent] = await tx
				.update(organizationInvitations)
				.set({ acceptedAt: sql`now()`, acceptedBy: user.id })
				.where(
					and(
						eq(organizationInvitations.id, found.id),
						isNull(organizationInvitations.acceptedAt),
						isNull(organizationInvitations.revokedAt),
						gt(organizationInvitations.expiresAt, sql`now()`),
					),
				)
				.returning()
			if (!spent) throw invalidCode()
			// A role deleted since the invitation was made is no longer given. FOR KEY SHARE, as checkGrantableRoles
			// (access.ts): a deletion running now waits for this commit and then sees the member holding the role (409),
			// or, having locked the role first, commits and the role is not found here. Without it the deletion could
			// count the members before this commit and the pending invitations after it, and leave a member holding a
			// role that no longer exists.
			const known = spent.roles.length
				? (
						await tx.select({ name: organizationRoles.name }).from(organizationRoles).where(inArray(organizationRoles.name, spent.roles)).for('key share')
					).map((row) => row.name)
				: []
			const offered = spent.roles.filter((role) => known.includes(role))
			const [existing] = await tx
				.select()
				.from(organizationMembers)
				.where(and(eq(organizationMembers.organizationId, organization.id), eq(organizationMembers.userId, user.id)))
			const [member] = existing
				? await tx
						.update(organizationMembers)
						.set({ roles: [...new Set([...existing.roles, ...offered])], updatedAt: sql`now()` })
						.where(and(eq(organizationMembers.organizationId, organization.id), eq(organizationMembers.userId, user.id)))
						.returning()
				: await tx.insert(organizationMembers).values({ organizationId: organization.id, userId: user.id, roles: offered }).returning()
			if (!member) throw new Error('the membership was not written')
			const events: WebhookEvent[] = [invitationEvent('invitation.accepted', spent, { userId: user.id })]
			if (!existing) events.push({ type: 'member.added', data: { organizationId: organization.id, member: toMemberResource(member, user) } })
			await recordWebhookEvents(tx, events)
			const details = { invitationId: spent.id, organizationId: organization.id, roles: member.roles.join(',') }
			await audit.recordIn(tx, 'invitation.accepted', client, { actorId: user.id, subjectId: organization.id, details })
			if (!existing) await audit.recordIn(tx, 'member.added', client, { actorId: user.id, subjectId: user.id, details })
			return {
				organization: { id: organization.id, name: organization.name, slug: organization.slug },
				userId: user.id,
				roles: member.roles,
				joinedAt: member.joinedAt.toISOString(),
			}
		})
	}

	/** The invitation a token names while it can still be accepted; otherwise 400 invalid-code (used, revoked, unknown) or code-expired. */
	private async findLive(tx: Tx, token: string): Promise<OrganizationInvitationRow> {
		// Anything but the shape of a token names no invitation (and is not worth a lookup).
		if (!isOpaqueToken(token)) throw invalidCode()
		const [row] = await tx.select().from(organizationInvitations).where(eq(organizationInvitations.tokenHash, invitationTokenHash(token)))
		if (!row || row.acceptedAt || row.revokedAt) throw invalidCode()
		if (row.expiresAt <= new Date()) throw codeExpired()
		return row
	}
}

const organizationInactive = () => new AppError('conflict', 'This organization is deactivated: its invitations can no longer be accepted')

const livePending = () => and(isNull(organizationInvitations.acceptedAt), isNull(organizationInvitations.revokedAt), gt(organizationInvitations.expiresAt, sql`now()`))

function statusFilter(status: InvitationStatus): SQL | undefined {
	const { acceptedAt, revokedAt, expiresAt } = organizationInvitations
	if (status === 'accepted') return isNotNull(acceptedAt)
	if (status === 'revoked') return and(isNull(acceptedAt), isNotNull(revokedAt))
	if (status === 'expired') return and(isNull(acceptedAt), isNull(revokedAt), lte(expiresAt, sql`now()`))
	return livePending()
}

/** The one order of an invitations list: newest first. */
const INVITATIONS_SORT = '-createdAt'

// ── routes ───────────────────────────────────────────────────────────────

export interface InvitationRoutesDeps {
	invitations: InvitationsService
	guard: ReturnType<typeof authGuard>
}

const InvitationEnvelope = Envelope(InvitationModel.invitation)

/** /organizations/{id}/invitations[/{invitationId}] and /invitation-acceptances. */
export const invitationRoutes = ({ invitations, guard }: InvitationRoutesDeps) =>
	new Elysia({ name: 'organization-invitations', detail: { tags: ['Organizations'] } })
		.use(guard)
		.use(requestContext)
		.post(
			'/organizations/:id/invitations',
			async ({ params, body, caller, client, set }) => {
				const row = await invitations.create(caller, params.id, body, client)
				set.status = 201
				set.headers.location = `/api/organizations/${params.id}/invitations/${row.id}`
				return envelope(toInvitationResource(row), 'Invitation sent')
			},
			{
				auth: 'user',
				params: InvitationModel.params,
				body: InvitationModel.create,
				response: { 201: withResponseHeaders(InvitationEnvelope, 'Location'), ...problemResponses(400, 401, 403, 404, 'conflict', 422, 429, 'mail-unavailable') },
				detail: {
					operationId: 'createOrganizationInvitation',
					summary: "Invite an address to an organization (its owner or admin): a mail with a link, the token in its fragment",
					description:
						"The invitation lives 7 days and is accepted once, by the account whose verified address it names (POST /invitation-acceptances). The answer is the same whether or not the address has an account. Inviting the same address again replaces its pending invitation (new link, the new roles), except within MAIL_RESEND_SECONDS of the last mail: then the pending invitation is answered as it is and no second mail goes. An `admin` may invite with every role but `owner` (403); an unknown role is 422; a non-member gets 404 as for an unknown organization; a deactivated organization 409.",
				},
			},
		)
		.get(
			'/organizations/:id/invitations',
			async ({ params, query, caller, set }) => {
				const page = await invitations.list(caller, params.id, query)
				if (page.nextCursor) set.headers.link = nextPageLink(`/api/organizations/${params.id}/invitations`, query, page.nextCursor)
				return envelope({ ...page, items: page.items.map(toInvitationResource) }, 'Invitations')
			},
			{
				auth: 'user',
				params: InvitationModel.params,
				query: InvitationModel.listQuery,
				response: { 200: withResponseHeaders(Envelope(InvitationModel.page), 'Link'), ...problemResponses(400, 401, 403, 404, 422, 429) },
				detail: {
					operationId: 'listOrganizationInvitations',
					summary: "An organization's invitations (its owner or admin), newest first: keyset pagination, `status` filter",
					description: 'A `Link` header with `rel="next"` points at the next page while there is one. Tokens are never shown.',
				},
			},
		)
		.get(
			'/organizations/:id/invitations/:invitationId',
			async ({ params, caller }) => envelope(toInvitationResource(await invitations.get(caller, params.id, params.invitationId)), 'Invitation'),
			{
				auth: 'user',
				params: InvitationModel.invitationParams,
				response: { 200: InvitationEnvelope, ...problemResponses(401, 403, 404, 422, 429) },
				detail: { operationId: 'getOrganizationInvitation', summary: "One of an organization's invitations (its owner or admin)" },
			},
		)
		.delete(
			'/organizations/:id/invitations/:invitationId',
			async ({ params, caller, client }) =>
				envelope(toInvitationResource(await invitations.revoke(caller, params.id, params.invitationId, client)), 'Invitation revoked'),
			{
				auth: 'user',
				params: InvitationModel.invitationParams,
				response: { 200: InvitationEnvelope, ...problemResponses(401, 403, 404, 'conflict', 422, 429) },
				detail: {
					operationId: 'revokeOrganizationInvitation',
					summary: 'Revoke an invitation (its organization’s owner or admin): its link opens nothing any more',
					description: 'Revoking a revoked invitation answers the same; an accepted one is 409 (remove the member instead).',
				},
			},
		)
		.post(
			'/invitation-acceptances',
			async ({ body, caller, client }) => envelope(await invitations.accept(caller.user, body.token, client), 'Invitation accepted'),
			{
				auth: 'user',
				body: InvitationModel.acceptance,
				response: { 200: Envelope(InvitationModel.membership), ...problemResponses('invalid-code', 'code-expired', 401, 403, 'conflict', 422, 429) },
				detail: {
					operationId: 'acceptOrganizationInvitation',
					summary: 'Accept an invitation: the signed-in account whose verified email it names becomes a member',
					description:
						"Single use: a used, revoked or unknown token is 400 invalid-code, an expired one 400 code-expired (of parallel acceptances exactly one succeeds). Another or an unverified address is 403, and so is an invitation naming `owner` whose inviter is no longer an owner of the organization nor a site admin (it stays unspent). An existing member keeps their roles and gains the invitation's. The organization must be active (409).",
				},
			},
		)
