import { Elysia } from 'elysia'
import type { authGuard } from '../auth/guard'
import { Envelope, problemResponses } from '../../http/openapi'
import { envelope } from '../../http/problem'
import { requestContext } from '../../http/request-context'
import { ImportModel, USER_IMPORTS_BODY_LIMIT_BYTES, USER_IMPORTS_MAX_USERS } from './model'
import type { ImportsService } from './service'

export interface ImportsModuleDeps {
	imports: ImportsService
	guard: ReturnType<typeof authGuard>
}

export const importsModule = ({ imports, guard }: ImportsModuleDeps) =>
	new Elysia({ name: 'user-imports', prefix: '/user-imports', detail: { tags: ['Users'] } })
		.use(guard)
		.use(requestContext)
		.post(
			'',
			async ({ body, caller, client }) => {
				const items = await imports.importLines(body.users, { onConflict: body.onConflict ?? 'skip', emitEvents: body.emitEvents ?? false }, caller.user.id, client)
				return envelope({ items }, 'Users imported')
			},
			{
				auth: 'admin',
				body: ImportModel.request,
				response: { 200: Envelope(ImportModel.result), ...problemResponses(400, 401, 403, 413, 415, 422, 429) },
				detail: {
					operationId: 'importUsers',
					summary: 'Import users (admins): lines of Latchkey’s format, with what became of each',
					description: `Up to ${USER_IMPORTS_MAX_USERS} users (422 beyond) in a body of up to ${USER_IMPORTS_BODY_LIMIT_BYTES / 1024 / 1024} MiB (this route alone; 413 beyond), each a line of \`latchkey export\`'s format: password hashes are kept in their scheme and verified at login (then re-hashed to argon2id), identities and TOTP secrets carried over. A body the schema refuses is 422 and writes nothing. Otherwise each line is \`created\`, \`updated\` (\`onConflict: update\`), \`skipped\` (its email or id is already an account; the default) or \`failed\` with \`error\` (an address sign-up would refuse, metadata over its bounds, a hash in no scheme Latchkey verifies, an identity linked to another account, id and email of two accounts) — a failed line writes nothing of itself, the others are written. An update replaces every member the line carries (identities and TOTP secrets carried replace the account's); one that changes the email, password hash or status ends sessions as an admin's change does. Lines are taken in order: the same email twice creates the account once, and the second line meets it.`,
				},
			},
		)
