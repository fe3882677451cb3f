import { Elysia } from 'elysia'
import type { authGuard } from '../../http/auth'
import { Envelope, problemResponses } from '../../http/openapi'
import { envelope } from '../../http/problem'
import { AuditModel } from './model'
import type { AuditLog } from './service'

export const auditModule = ({ audit, guard }: { audit: AuditLog; guard: ReturnType<typeof authGuard> }) =>
	new Elysia({ name: 'audit', prefix: '/audit-events', detail: { tags: ['Audit'] } }).use(guard).get(
		'',
		async ({ query, set }) => {
			const page = await audit.list(query)
			if (page.nextCursor) {
				const params = new URLSearchParams()
				for (const [key, value] of Object.entries(query)) if (value !== undefined && key !== 'cursor') params.set(key, String(value))
				params.set('cursor', page.nextCursor)
				set.headers.link = `</api/audit-events?${params}>; rel="next"`
			}
			return envelope(page, 'Audit events')
		},
		{
			auth: 'admin',
			query: AuditModel.listQuery,
			response: { 200: Envelope(AuditModel.page), ...problemResponses(400, 401, 403, 422, 429) },
			detail: { operationId: 'listAuditEvents', summary: 'Security events, newest first (admins)' },
		},
	)
