import type { TLiteral } from '@sinclair/typebox'
import { t, type TSchema } from 'elysia'
import { Id, IssuedId } from '../../http/ids'
import { queryInteger } from '../../http/problem'
import { SESSION_END_REASONS } from '../auth/model'
import { FactorModel } from '../factors/model'
import { ConsentModel, OAuthClientModel } from '../oauth/model'
import { OidcModel } from '../oidc/model'
import { MemberModel, OrganizationModel } from '../organizations/model'
import { UserModel } from '../users/model'
import { PING_EVENT, WEBHOOK_EVENT_TYPES, type WebhookEventType } from './outbox'

const Timestamp = t.String({ format: 'date-time' })
const Nullable = <T extends Parameters<typeof t.Union>[0][number]>(schema: T) => t.Union([schema, t.Null()])

/** Literal schemas of a list of strings, each keeping its own type (a plain `map` would widen them to string). */
const literals = <const T extends readonly string[]>(values: T) => values.map((value) => t.Literal(value)) as { -readonly [K in keyof T]: TLiteral<T[K]> }

const Subscription = t.Union([t.Literal('*'), ...literals(WEBHOOK_EVENT_TYPES)], {
	error: `must be "*" or one of ${WEBHOOK_EVENT_TYPES.join(', ')}`,
})

const Url = t.String({ minLength: 1, maxLength: 2048, description: 'where events are POSTed: https (http in development), never a private address', examples: ['https://api.example.com/hooks/latchkey'] })
const Events = t.Array(Subscription, { minItems: 1, maxItems: WEBHOOK_EVENT_TYPES.length + 1, uniqueItems: true, description: 'event types, or `["*"]` for all', examples: [['user.created', 'session.revoked']] })
const Description = t.String({ maxLength: 500 })

export const Secret = t.String({ pattern: '^whsec_[A-Za-z0-9+/]+={0,2}$', description: 'the signing secret (Standard Webhooks `whsec_…`), shown only here', examples: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'] })

export namespace WebhookModel {
	export const endpoint = t.Object({
		id: IssuedId(),
		url: t.String(),
		description: t.String(),
		events: t.Array(t.String()),
		enabled: t.Boolean(),
		disabledReason: Nullable(t.Union([t.Literal('failing'), t.Literal('admin')], { description: '`failing`: every attempt failed for WEBHOOK_DISABLE_AFTER_SECONDS; `admin`: turned off by an admin' })),
		failingSince: Nullable(t.String({ format: 'date-time', description: 'since when every attempt has failed' })),
		secretRotatedAt: Nullable(t.String({ format: 'date-time', description: 'the last rotation; the previous secret signs too for 24 hours after it' })),
		createdAt: Timestamp,
		updatedAt: Timestamp,
	})

	export const created = t.Composite([endpoint, t.Object({ secret: Secret })])

	export const create = t.Object({ url: Url, events: Events, description: t.Optional(Description) }, { additionalProperties: false })

	/** PUT replaces the editable representation; `enabled` left out keeps its value. */
	export const replace = t.Object(
		{ url: Url, events: Events, description: t.Optional(Description), enabled: t.Optional(t.Boolean({ description: '`true` turns a disabled endpoint back on' })) },
		{ additionalProperties: false },
	)

	export const list = t.Object({ items: t.Array(endpoint) })

	export const idParams = t.Object({ id: Id() })
	export const deliveryParams = t.Object({ id: Id(), deliveryId: Id() })

	export const secret = t.Object({ secret: Secret })

	export const attempt = t.Object({
		attemptedAt: Timestamp,
		durationMs: t.Integer(),
		statusCode: Nullable(t.Integer({ description: "the receiver's HTTP status; null when none came" })),
		succeeded: t.Boolean(),
		error: Nullable(t.String({ examples: ['HTTP 500', 'no answer within 15 s', 'connection refused'] })),
	})

	export const delivery = t.Object({
		id: IssuedId(),
		eventId: IssuedId({ description: 'the `webhook-id` header: the same at every attempt' }),
		eventType: t.String({ examples: ['user.created', PING_EVENT] }),
		status: t.Union([t.Literal('pending'), t.Literal('succeeded'), t.Literal('failed')]),
		createdAt: Timestamp,
		nextAttemptAt: Nullable(Timestamp),
		payload: t.Object({ type: t.String(), timestamp: Timestamp, data: t.Record(t.String(), t.Unknown()) }, { description: 'the body that is POSTed' }),
		attempts: t.Array(attempt, { description: 'oldest first' }),
	})

	export const deliveriesQuery = t.Object(
		{
			limit: t.Optional(queryInteger('limit', { minimum: 1, maximum: 100, default: 20 })),
			cursor: t.Optional(t.String({ maxLength: 512 })),
			status: t.Optional(t.Union([t.Literal('pending'), t.Literal('succeeded'), t.Literal('failed')])),
		},
		{ additionalProperties: false },
	)

	export const deliveries = t.Object({ items: t.Array(delivery), nextCursor: Nullable(t.String()), limit: t.Integer() })

	export const ping = t.Object({ deliveryId: IssuedId(), eventId: IssuedId() })
}

export type WebhookEndpointResource = typeof WebhookModel.endpoint.static
export type WebhookDeliveryResource = typeof WebhookModel.delivery.static
export type CreateWebhookInput = typeof WebhookModel.create.static
export type ReplaceWebhookInput = typeof WebhookModel.replace.static
export type DeliveriesQuery = typeof WebhookModel.deliveriesQuery.static

const UserData = t.Object({ user: UserModel.user })
// A session as GET /users/{id}/sessions shows it, without `current` (no request is current here), with its user and assurance.
const { current: _current, ...sessionFields } = UserModel.session.properties
const WebhookSession = t.Object({
	...sessionFields,
	userId: IssuedId(),
	amr: t.Array(t.String(), {
		description: 'how it was established, RFC 8176 values only (`pwd`, `otp`, `hwk`, `mfa`); empty for a sign-in at an identity provider alone, which RFC 8176 has no value for',
		examples: [['pwd', 'otp', 'mfa']],
	}),
	aal: t.Union([t.Literal('aal1'), t.Literal('aal2')]),
})
const FactorData = t.Object({ userId: IssuedId(), factor: FactorModel.factor })
const IdentityData = t.Object({ userId: IssuedId(), identity: OidcModel.identity })
const ConsentData = t.Object({ userId: IssuedId(), consent: ConsentModel.consent })
const OrganizationData = t.Object({ organization: OrganizationModel.organization })
const MemberData = t.Object({ organizationId: IssuedId(), member: MemberModel.member })

// An organization's invitation as GET /organizations/{id}/invitations/{invitationId} shows it (never its token).
const InvitationData = t.Object({
	id: IssuedId(),
	organizationId: IssuedId(),
	email: t.String(),
	roles: t.Array(t.String()),
	status: t.String(),
	invitedBy: t.Union([IssuedId(), t.Null()]),
	createdAt: t.String({ format: 'date-time' }),
	expiresAt: t.String({ format: 'date-time' }),
	acceptedAt: t.Union([t.String({ format: 'date-time' }), t.Null()]),
	revokedAt: t.Union([t.String({ format: 'date-time' }), t.Null()]),
})

/** The `data` of each event type (API.md: resources as this API shows them, never a secret, hash or token). */
export const WEBHOOK_PAYLOADS: Record<WebhookEventType | typeof PING_EVENT, { summary: string; data: TSchema }> = {
	'user.created': { summary: 'An account was created: by sign-up, by an admin, through an identity provider, or at start-up (the first admin)', data: UserData },
	'user.updated': {
		summary: 'A field of an account changed (its email, name, role, status, verification, pending email, metadata, appMetadata), or its password',
		data: t.Object({
			user: UserModel.user,
			changed: t.Array(t.Union(literals(['email', 'name', 'role', 'status', 'emailVerified', 'pendingEmail', 'metadata', 'appMetadata'])), { description: 'the fields that changed; empty when only the password did' }),
		}),
	},
	'user.deactivated': { summary: 'An account was deactivated (its sessions are revoked with it)', data: UserData },
	'user.reactivated': { summary: 'A deactivated account was made active again', data: UserData },
	'user.email-verified': { summary: "An account's email was proved, from a mail's link or code", data: UserData },
	'user.password-changed': { summary: "An account's password was changed, reset by recovery, or set by an admin", data: UserData },
	'session.created': { summary: 'A sign-in: a session started (password, second factor, passkey or identity provider)', data: t.Object({ session: WebhookSession }) },
	'session.revoked': {
		summary: 'A session ended before its time',
		data: t.Object({
			session: WebhookSession,
			reason: t.Union(literals(SESSION_END_REASONS), {
				description: '`revoked`: by its user or an admin from the sessions list; `token-reuse`: a rotated refresh token was used again; `session-limit`: the oldest beyond SESSIONS_PER_USER_MAX',
			}),
		}),
	},
	'login.locked': {
		summary:
			'Too many failed sign-ins to an existing account: it is locked for a while (LOCKOUT_*). Sent only for an account, with that account, never with the text that was typed: text no account has is locked all the same, and sends nothing',
		data: t.Object({
			user: UserModel.user,
			email: t.String({ description: 'the account’s email, as in `user` (kept from before `user` was added)' }),
			userId: IssuedId({ description: 'the account’s id, as in `user` (before `user` was added, null meant an address no account has: such locks are no longer sent)' }),
			reason: t.Union([t.Literal('password'), t.Literal('second-factor')], { description: 'wrong passwords, or wrong second-factor codes' }),
		}),
	},
	'factor.added': { summary: 'A second factor (TOTP app or passkey) was activated', data: FactorData },
	'factor.removed': { summary: 'An active second factor was removed (by its user or an admin)', data: FactorData },
	'identity.linked': { summary: "An identity provider's account was linked (at sign-up, by verified email, or by the user)", data: IdentityData },
	'identity.unlinked': { summary: "An identity provider's account was unlinked", data: IdentityData },
	'oauth-client.created': { summary: 'An admin registered an OAuth client (an application that signs its users in through Latchkey)', data: t.Object({ client: OAuthClientModel.client }) },
	'oauth-client.updated': {
		summary: 'An OAuth client was changed, disabled (DELETE), enabled again, or given a new secret',
		data: t.Object({
			client: OAuthClientModel.client,
			changed: t.Array(t.String(), {
				description: 'the members of `client` that changed; `clientSecret` when a new secret was made (the secret itself is never sent)',
				examples: [['redirectUris'], ['status'], ['clientSecret']],
			}),
		}),
	},
	'consent.granted': { summary: 'A user allowed a client scopes it had not been given before (remembered for the next sign-in)', data: ConsentData },
	'consent.revoked': { summary: "A user's consent to a client was withdrawn (by the user or an admin); the client's tokens for that user die with it", data: ConsentData },
	'organization.created': { summary: 'An organization was created (its creator is its first owner: a `member.added` follows)', data: OrganizationData },
	'organization.updated': {
		summary: "An organization's name or slug changed",
		data: t.Object({ organization: OrganizationModel.organization, changed: t.Array(t.Union([t.Literal('name'), t.Literal('slug')]), { description: 'the fields that changed' }) }),
	},
	'organization.deactivated': { summary: "An organization was deactivated: its members' organization tokens stop at once", data: OrganizationData },
	'member.added': { summary: 'An account joined an organization (added by a manager, by accepting an invitation, or as the creator)', data: MemberData },
	'member.updated': {
		summary: "A member's roles in an organization changed",
		data: t.Object({ organizationId: IssuedId(), member: MemberModel.member, previousRoles: t.Array(t.String(), { examples: [['member']] }) }),
	},
	'member.removed': { summary: 'A member left or was removed from an organization (`member` as it was)', data: MemberData },
	'invitation.created': {
		summary: 'An owner or admin invited an address to an organization (a mail with the link went, or was already sent within MAIL_RESEND_SECONDS)',
		data: t.Object({ invitation: InvitationData }),
	},
	'invitation.accepted': { summary: 'An invitation was accepted by the account whose verified address it names', data: t.Object({ invitation: InvitationData, userId: IssuedId() }) },
	[PING_EVENT]: { summary: 'A test from POST /webhooks/{id}/pings, to the pinged endpoint only', data: t.Object({ endpointId: IssuedId() }) },
}

/** The whole body POSTed for an event type. */
export const webhookBody = (type: keyof typeof WEBHOOK_PAYLOADS) =>
	t.Object({ type: t.Literal(type), timestamp: t.String({ format: 'date-time', description: 'when the change happened' }), data: WEBHOOK_PAYLOADS[type].data })
