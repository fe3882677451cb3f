import { t } from 'elysia'
import type { identities } from '../../db/schema'
import { AccountId, Id, IssuedId } from '../../http/ids'

/** RFC 7636: a verifier is 43–128 characters of [A-Za-z0-9-._~]; an S256 challenge is 43 base64url characters. */
const CodeChallenge = t.String({ pattern: '^[A-Za-z0-9_-]{43}$', description: 'BASE64URL(SHA-256(codeVerifier)), RFC 7636 S256', examples: ['E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM'] })

export namespace OidcModel {
	export const providerParams = t.Object({ provider: t.String({ pattern: '^[a-z][a-z0-9-]{0,31}$', description: 'a name in OIDC_PROVIDERS' }) })

	export const providers = t.Object({ items: t.Array(t.Object({ id: t.String(), label: t.String() })) })

	export const authorizationQuery = t.Object({
		redirectTo: t.String({ maxLength: 2048, description: 'the frontend page that receives `code` (or `error`); must match REDIRECT_URLS', examples: ['https://app.example.com/auth/callback'] }),
		codeChallenge: CodeChallenge,
		codeChallengeMethod: t.Literal('S256'),
	})

	/** What a provider sends back: OAuth's own names, and whatever else it adds (`iss`, `session_state`, `scope`…). */
	export const callbackQuery = t.Object(
		{
			code: t.Optional(t.String({ maxLength: 4096 })),
			state: t.Optional(t.String({ maxLength: 512 })),
			error: t.Optional(t.String({ maxLength: 256 })),
			error_description: t.Optional(t.String({ maxLength: 1024 })),
		},
		{ additionalProperties: true },
	)

	export const identity = t.Object({
		id: IssuedId(),
		provider: t.String(),
		subject: t.String({ description: 'the account’s id at the provider (`sub`)' }),
		email: t.Union([t.String(), t.Null()], { description: 'the address the provider gave when the identity was linked' }),
		createdAt: t.String({ format: 'date-time' }),
	})

	export const identities = t.Object({ items: t.Array(identity) })

	export const link = t.Object({
		provider: t.String({ pattern: '^[a-z][a-z0-9-]{0,31}$', description: 'a name in OIDC_PROVIDERS' }),
		redirectTo: authorizationQuery.properties.redirectTo,
		codeChallenge: CodeChallenge,
	})

	export const linkStarted = t.Object({ authorizationUrl: t.String({ description: 'open it in the browser; the provider returns to `redirectTo` with `code`, which POST /auth/sessions exchanges (linking the identity)' }) })

	export const identityParams = t.Object({
		id: AccountId,
		identityId: Id(),
	})

	export const session = t.Object({
		code: t.String({ minLength: 1, maxLength: 128, description: 'the one-time code from the redirect (60 seconds, single use)' }),
		codeVerifier: t.String({ pattern: '^[A-Za-z0-9._~-]{43,128}$', description: 'the PKCE verifier whose challenge started the flow' }),
	})
}

export const toIdentityResource = (row: typeof identities.$inferSelect): typeof OidcModel.identity.static => ({
	id: row.id,
	provider: row.provider,
	subject: row.subject,
	email: row.email,
	createdAt: row.createdAt.toISOString(),
})
