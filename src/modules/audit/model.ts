import { t } from 'elysia'
import { Id, IssuedId } from '../../http/ids'
import { queryDateTime, queryInteger } from '../../http/problem'

// A plain union of literals (t.UnionEnum would give the optional query filter a default value).
const EventType = t.Union([
	t.Literal('user.signed-up'),
	t.Literal('user.created'),
	t.Literal('login.succeeded'),
	t.Literal('login.failed'),
	t.Literal('login.locked'),
	t.Literal('login.code-sent'),
	t.Literal('token.refreshed'),
	t.Literal('token.reuse-detected'),
	t.Literal('logout'),
	t.Literal('session.revoked'),
	t.Literal('password.changed'),
	t.Literal('email.changed'),
	t.Literal('role.changed'),
	t.Literal('status.changed'),
	t.Literal('user.deactivated'),
	t.Literal('metadata.changed'),
	t.Literal('app-metadata.changed'),
	t.Literal('email.verification-requested'),
	t.Literal('email.verified'),
	t.Literal('email.change-requested'),
	t.Literal('password.recovery-requested'),
	t.Literal('password.reset'),
	t.Literal('code.rejected'),
	t.Literal('login.mfa-required'),
	t.Literal('mfa.failed'),
	t.Literal('mfa.locked'),
	t.Literal('factor.enrolled'),
	t.Literal('factor.activated'),
	t.Literal('factor.removed'),
	t.Literal('recovery-codes.generated'),
	t.Literal('identity.linked'),
	t.Literal('identity.unlinked'),
	t.Literal('reauthentication.succeeded'),
	t.Literal('reauthentication.failed'),
	t.Literal('reauthentication.code-sent'),
	t.Literal('ways-in.removed'),
	t.Literal('webhook.created'),
	t.Literal('webhook.updated'),
	t.Literal('webhook.deleted'),
	t.Literal('webhook.secret-rotated'),
	t.Literal('webhook.disabled'),
	t.Literal('oauth-client.created'),
	t.Literal('oauth-client.updated'),
	t.Literal('oauth-client.disabled'),
	t.Literal('oauth-client.secret-rotated'),
	t.Literal('consent.granted'),
	t.Literal('consent.revoked'),
	t.Literal('organization.created'),
	t.Literal('organization.updated'),
	t.Literal('organization.deactivated'),
	t.Literal('member.added'),
	t.Literal('member.updated'),
	t.Literal('member.removed'),
	t.Literal('organization-role.created'),
	t.Literal('organization-role.updated'),
	t.Literal('organization-role.deleted'),
	t.Literal('invitation.created'),
	t.Literal('invitation.revoked'),
	t.Literal('invitation.accepted'),
	t.Literal('users.imported'),
])

export type AuditEventType = typeof EventType.static

const Nullable = <T extends Parameters<typeof t.Union>[0][number]>(schema: T) => t.Union([schema, t.Null()])

export namespace AuditModel {
	export const event = t.Object({
		id: IssuedId(),
		type: EventType,
		occurredAt: t.String({ format: 'date-time' }),
		actorId: Nullable(IssuedId({ description: 'who did it (null: anonymous)' })),
		subjectId: Nullable(IssuedId({ description: 'whose account it concerns' })),
		ip: Nullable(t.String()),
		userAgent: Nullable(t.String()),
		requestId: Nullable(t.String()),
		details: t.Record(t.String(), t.Union([t.String(), t.Number(), t.Boolean(), t.Null()])),
	})

	export const listQuery = t.Object(
		{
			limit: t.Optional(queryInteger('limit', { minimum: 1, maximum: 100, default: 50 })),
			cursor: t.Optional(t.String({ maxLength: 512 })),
			userId: t.Optional(Id({ description: 'events whose actor or subject is this user' })),
			type: t.Optional(EventType),
			occurredAfter: t.Optional(queryDateTime()),
			occurredBefore: t.Optional(queryDateTime()),
		},
		{ additionalProperties: false },
	)

	export const page = t.Object({ items: t.Array(event), nextCursor: Nullable(t.String()), limit: t.Integer() })
}

export type AuditEventResource = typeof AuditModel.event.static
export type ListAuditEventsQuery = typeof AuditModel.listQuery.static
