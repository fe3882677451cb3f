import { Elysia } from 'elysia'
import { clientOf } from './client-ip'

/** Where a request came from, as recorded with sessions and audit events. */
export interface ClientInfo {
	ip: string | null
	userAgent: string | null
	requestId: string | null
}

/** Where a request came from, outside a route (no response headers yet: the request's own id, if it sent one). */
export const clientInfoOf = (request: Request): ClientInfo => ({
	ip: clientOf(request).ip,
	userAgent: request.headers.get('user-agent'),
	requestId: request.headers.get('x-request-id'),
})

/** `client`: who is calling and from where, for sessions and the audit trail. */
export const requestContext = new Elysia({ name: 'request-context' }).derive({ as: 'scoped' }, ({ request, set }): { client: ClientInfo } => ({
	client: {
		ip: clientOf(request).ip,
		userAgent: request.headers.get('user-agent'),
		requestId: (set.headers['x-request-id'] as string | undefined) ?? null,
	},
}))
