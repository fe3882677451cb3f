import { Elysia, t } from 'elysia'
import type { authGuard } from '../auth/guard'
import { targetUserId } from '../auth/guard'
import { withMetadata } from '../auth/sessions'
import { Envelope, problemResponses, withResponseHeaders } from '../../http/openapi'
import { nextPageLink } from '../../http/pagination'
import { envelope, reportWithSchemaErrors } from '../../http/problem'
import { chargeAuthBudget } from '../../http/rate-limit'
import { UserModel } from './model'
import { metadataProblems, normalizeEmail, toUserResource } from './model'
import type { UsersService } from './service'
import { requestContext } from '../../http/request-context'

export interface UsersModuleDeps {
	users: UsersService
	guard: ReturnType<typeof authGuard>
}

const UserEnvelope = Envelope(UserModel.user)

export const usersModule = ({ users, guard }: UsersModuleDeps) =>
	new Elysia({ name: 'users', prefix: '/users', detail: { tags: ['Users'] } })
		.use(guard)
		.use(requestContext)
		.onTransform(({ body, request }) => {
			const candidate = body as { email?: unknown; password?: unknown; currentPassword?: unknown } | undefined
			if (!candidate || typeof candidate !== 'object') return
			// Emails are compared trimmed and lower-cased everywhere.
			if (typeof candidate.email === 'string') candidate.email = normalizeEmail(candidate.email)
			// A sign-up, or a PUT that sets or checks a password, computes a hash: the /auth budget pays for it.
			if (request.method === 'POST' || 'password' in candidate || 'currentPassword' in candidate) chargeAuthBudget(request)
			const passwordProblem = typeof candidate.password === 'string' ? users.passwordProblem(candidate.password) : undefined
			const early = [...(passwordProblem ? [passwordProblem] : []), ...metadataProblems(candidate as { metadata?: unknown; appMetadata?: unknown })]
			if (early.length > 0) reportWithSchemaErrors(request, early)
		})
		.post(
			'',
			async ({ body, caller, set, client }) => {
				const user = await users.create(body, caller, client)
				set.status = 201
				set.headers.location = `/api/users/${user.id}`
				return envelope(toUserResource(user), 'User created')
			},
			{
				optionalAuth: true,
				body: UserModel.create,
				response: { 201: withResponseHeaders(UserEnvelope, 'Location'), ...problemResponses(400, 'invalid-token', 403, 'email-taken', 413, 415, 422, 429) },
				detail: {
					operationId: 'createUser',
					summary: 'Sign up, or (as an admin) create an account',
					description:
						'Open to anyone while sign-up is enabled; admins (with their token) always. Only admins may set `role` and a non-empty `appMetadata` (anyone else: 403). `Location` names the new account. Counts against the stricter `/auth` rate limit (it computes a password hash). All invalid fields are reported at once, the password policy included.',
					// A token is optional: without one this is a sign-up.
					security: [{}, { bearerAuth: [] }],
				},
			},
		)
		.get(
			'',
			async ({ query, set }) => {
				const [page, total] = await Promise.all([users.list(query), query.count ? users.count(query, query.count) : undefined])
				if (page.nextCursor) set.headers.link = nextPageLink('/api/users', query, page.nextCursor)
				if (total) set.headers['x-total-count'] = String(total.total)
				return envelope({ ...page, items: page.items.map(toUserResource), ...(total && { total: total.total, totalExact: total.exact }) }, 'Users')
			},
			{
				auth: 'admin',
				query: UserModel.listQuery,
				response: { 200: withResponseHeaders(Envelope(UserModel.page), 'Link', 'X-Total-Count'), ...problemResponses(400, 401, 403, 422, 429) },
				detail: {
					operationId: 'listUsers',
					summary: 'List accounts (admins): keyset pagination, filters and sorts',
					description: 'A `Link` header with `rel="next"` points at the next page while there is one. With `count`, the total of the accounts that match, whatever the page (`data.total`, `X-Total-Count`).',
				},
			},
		)
		.get(
			'/:id',
			async ({ params, caller }) => {
				const id = targetUserId(params.id, caller)
				// The guard has just read the caller's own row, metadata included (`metadata: true`); do not read it again.
				return envelope(toUserResource(id === caller.user.id && withMetadata(caller.user) ? caller.user : await users.get(id)), 'User')
			},
			{
				auth: { level: 'self', duringEnrollment: true, metadata: true },
				params: UserModel.idParams,
				response: { 200: UserEnvelope, ...problemResponses(401, 403, 404, 422, 429) },
				detail: { operationId: 'getUser', summary: 'Read an account (the user themself, or an admin)' },
			},
		)
		.put(
			'/:id',
			async ({ params, body, caller, client }) =>
				envelope(toUserResource(await users.replace(targetUserId(params.id, caller), body, caller, client)), 'User updated'),
			{
				auth: 'self',
				params: UserModel.idParams,
				body: UserModel.replace,
				response: {
					200: UserEnvelope,
					...problemResponses(400, 401, 403, 'mfa-required', 'reauthentication-required', 404, 'email-taken', 'last-admin', 'conflict', 413, 415, 422, 'rate-limited', 'login-locked'),
				},
				detail: {
					operationId: 'replaceUser',
					summary: 'Replace the editable fields of an account',
					description:
						'Users changing their own email or password prove it is them: with `currentPassword`, or without it from a session signed in or checked (POST /auth/reauthentication) within REAUTHENTICATION_SECONDS (default 5 minutes), else 403 `reauthentication-required`. A wrong `currentPassword` counts as a failed login of the account (its lockout then answers 429 `login-locked`). Only admins may change `role`, `status` or `appMetadata` (sending back the current value is fine). `metadata` and `appMetadata` are each a JSON object of at most 8 KiB as compact JSON in UTF-8 (422 at `#/metadata` or `#/appMetadata` beyond); omitted, they are unchanged. A new password revokes the other sessions. A request that sets or checks a password counts against the stricter `/auth` rate limit. If the account\'s credentials change while the request is handled (another password or email change), it is refused with 409 `conflict`: read the account again and retry.',
				},
			},
		)
		.delete(
			'/:id',
			async ({ params, caller, client }) =>
				envelope(toUserResource(await users.deactivate(targetUserId(params.id, caller), caller, client)), 'User deactivated'),
			{
				auth: 'self',
				params: UserModel.idParams,
				response: { 200: UserEnvelope, ...problemResponses(401, 403, 404, 'last-admin', 422, 429) },
				detail: {
					operationId: 'deactivateUser',
					summary: 'Deactivate an account (never deletes it)',
					description: 'Revokes every session at once; the email stays reserved. Repeating it returns the same user.',
				},
			},
		)
		.get(
			'/:id/sessions',
			async ({ params, caller }) => {
				const userId = targetUserId(params.id, caller)
				await users.get(userId)
				const items = await users.sessions(userId, caller.sessionId)
				// The current session shows what the bearer guard found for this request's token's `org`, checked now.
				const { organization } = caller
				return envelope({ items: organization === undefined ? items : items.map((item) => (item.current ? { ...item, organization } : item)) }, 'Sessions')
			},
			{
				auth: 'self',
				params: UserModel.idParams,
				response: { 200: Envelope(t.Object({ items: t.Array(UserModel.session) })), ...problemResponses(401, 403, 404, 422, 429) },
				detail: { operationId: 'listSessions', summary: "List an account's active sessions" },
			},
		)
		.delete(
			'/:id/sessions/:sessionId',
			async ({ params, caller, client }) => {
				return envelope(await users.revokeSession(targetUserId(params.id, caller), params.sessionId, caller, client), 'Session revoked')
			},
			{
				auth: 'self',
				params: UserModel.sessionParams,
				response: { 200: Envelope(UserModel.session), ...problemResponses(401, 403, 404, 422, 429) },
				detail: { operationId: 'revokeSession', summary: 'Revoke one session of an account' },
			},
		)


