import { Elysia } from 'elysia'
import type { ClientInfo } from '../modules/audit/service'
import type { ClientAddressResolver } from './client-ip'

/** `client`: who is calling and from where, for sessions and the audit trail. */
export const requestContext = (clientAddress: ClientAddressResolver) =>
	new Elysia({ name: 'request-context' })
		.derive({ as: 'scoped' }, ({ request, server, set }): { client: ClientInfo } => ({
			client: {
				ip: clientAddress(request, server),
				userAgent: request.headers.get('user-agent'),
				requestId: (set.headers['x-request-id'] as string | undefined) ?? null,
			},
		}))
