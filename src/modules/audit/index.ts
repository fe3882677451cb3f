import { Elysia } from 'elysia'
import type { authGuard } from '../auth/guard'
import { Envelope, problemResponses, withResponseHeaders } from '../../http/openapi'
import { nextPageLink } from '../../http/pagination'
import { envelope } from '../../http/problem'
import { AuditModel } from './model'
import type { AuditLog } from './service'

export const auditModule = ({ audit, guard }: { audit: AuditLog; guard: ReturnType<typeof authGuard> }) =>
	new Elysia({ name: 'audit', prefix: '/audit-events', detail: { tags: ['Audit'] } }).use(guard).get(
		'',
		async ({ query, set }) => {
			const page = await audit.list(query)
			if (page.nextCursor) set.headers.link = nextPageLink('/api/audit-events', query, page.nextCursor)
			return envelope(page, 'Audit events')
		},
		{
			auth: 'admin',
			query: AuditModel.listQuery,
			response: { 200: withResponseHeaders(Envelope(AuditModel.page), 'Link'), ...problemResponses(400, 401, 403, 422, 429) },
			detail: { operationId: 'listAuditEvents', summary: 'Security events, newest first (admins)' },
		},
	)
