import { t } from 'elysia'
import { Id } from '../../http/ids'
import { FactorModel } from '../factors/model'
import { UserModel } from '../users/model'

/** Why sessions ended, as `session.revoked` webhook events tell it. */
export const SESSION_END_REASONS = ['logout', 'revoked', 'deactivated', 'password-changed', 'password-reset', 'token-reuse', 'session-limit', 'email-verified'] as const
export type SessionEndReason = (typeof SESSION_END_REASONS)[number]

const Code = t.String({ minLength: 1, maxLength: 64, examples: ['123456'] })

export namespace AuthModel {
	export const login = t.Object({
		email: t.String({ maxLength: 254, examples: ['ada@example.com'] }),
		password: t.String({ maxLength: 1024, examples: ['correct horse battery staple'] }),
	})

	export const refresh = t.Object({
		refreshToken: t.String({ minLength: 1, maxLength: 512, description: 'the opaque refresh token from login or the last refresh' }),
		organizationId: t.Optional(
			t.Union([Id(), t.Null()], {
				description:
					'switches the session’s active organization, whose membership the new access token’s `org` claim then carries: the id of an active organization the caller is a member of (else 403 `not-a-member`, and the refresh token is not spent); `null`: none; omitted: the active one stays (its claim dropped if the membership no longer holds)',
			}),
		),
	})

	export const logout = t.Optional(
		t.Object({
			scope: t.Optional(
				t.Union([t.Literal('local'), t.Literal('others'), t.Literal('global')], {
					default: 'local',
					description: '`local`: this session; `others`: every other session; `global`: all',
				}),
			),
		}),
	)

	/** One proof that the session's owner is at the keyboard: the password, a second factor, or a code by mail. */
	export const reauthentication = t.Union([
		t.Object({ password: t.String({ minLength: 1, maxLength: 1024 }) }, { additionalProperties: false }),
		t.Object({ method: t.Union([t.Literal('totp'), t.Literal('recovery-code')]), code: Code }, { additionalProperties: false }),
		t.Object({ method: t.Literal('webauthn'), response: FactorModel.authenticationResponse }, { additionalProperties: false }),
		t.Object({ method: t.Literal('email'), code: Code }, { additionalProperties: false }),
	])

	export const reauthenticationChallenge = t.Object({
		method: t.Union([t.Literal('webauthn'), t.Literal('email')], { description: '`webauthn`: options for one of the account’s passkeys; `email`: a 6-digit code to its address' }),
	})

	export const tokens = t.Object({
		accessToken: t.String({
			description:
				'JWT (RFC 9068), for `Authorization: Bearer …`. Claims: `iss`, `aud`, `sub` (the user id), `sid` (the session id), `role`, `iat`, `exp`, `jti`, `aal` (`aal1`, or `aal2` after a second factor or a passkey) and `amr`, how the session was established: RFC 8176 values only: `pwd` (a password here), `otp` (a TOTP or recovery code), `hwk` (a passkey), `mfa` (two distinct factors); a sign-in at an identity provider or with a code by mail adds none of its own (RFC 8176 has no value for either), so a provider or a mailed code alone gives `[]` and either then a TOTP code `[\"otp\", \"mfa\"]`. After a refresh that chose an organization (`organizationId`): `org`, `{ id, slug, roles, permissions }` (permissions: the union of the roles’ permissions, `*` for every one), checked against the membership as it is now on every request.',
		}),
		refreshToken: t.String({ description: 'opaque; single use: each refresh returns a new one' }),
		tokenType: t.Literal('Bearer'),
		expiresIn: t.Integer({ description: 'seconds until the access token expires' }),
		refreshExpiresIn: t.Integer({ description: 'seconds until the refresh token expires' }),
		user: UserModel.user,
	})
}
