import { Elysia, t } from 'elysia'
import type { authGuard } from '../auth/guard'
import { Envelope, problemResponses, withResponseHeaders } from '../../http/openapi'
import { nextPageLink } from '../../http/pagination'
import { envelope } from '../../http/problem'
import { requestContext } from '../../http/request-context'
import { WebhookModel } from './model'
import type { WebhookService } from './service'

export interface WebhooksModuleDeps {
	webhooks: WebhookService
	guard: ReturnType<typeof authGuard>
}

const ADMIN = 'admin' as const

/** Admins' webhook endpoints: CRUD, secret rotation, pings, the delivery log and redelivery. */
export const webhooksModule = ({ webhooks, guard }: WebhooksModuleDeps) =>
	new Elysia({ name: 'webhooks', prefix: '/webhooks', detail: { tags: ['Webhooks'] } })
		.use(guard)
		.use(requestContext)
		.post(
			'',
			async ({ body, caller, client, set }) => {
				const endpoint = await webhooks.create(body, caller, client)
				set.status = 201
				set.headers.location = `/api/webhooks/${endpoint.id}`
				return envelope(endpoint, 'Webhook endpoint created; keep the secret, it is not shown again')
			},
			{
				auth: ADMIN,
				body: WebhookModel.create,
				response: { 201: withResponseHeaders(Envelope(WebhookModel.created), 'Location'), ...problemResponses(400, 401, 403, 413, 415, 422, 429) },
				detail: {
					operationId: 'createWebhook',
					summary: 'Add a webhook endpoint (admins)',
					description:
						'Events are POSTed to `url`, signed per Standard Webhooks with the `secret` returned here and never again. The URL must be `https` (`http` in development) and must not resolve to a loopback, private or link-local address (unless WEBHOOK_ALLOW_PRIVATE_NETWORKS=true), nor ever to a cloud metadata address (169.254.169.254, 169.254.170.2, fd00:ec2::254, 100.100.100.200), in any spelling: an IPv6 address that leads to an IPv4 one (mapped, compatible, translated, NAT64, 6to4, Teredo) is judged by that address. Checked again at every attempt.',
				},
			},
		)
		.get('', async () => envelope({ items: await webhooks.list() }, 'Webhook endpoints'), {
			auth: ADMIN,
			response: { 200: Envelope(WebhookModel.list), ...problemResponses(401, 403, 429) },
			detail: { operationId: 'listWebhooks', summary: 'List webhook endpoints (admins)' },
		})
		.get('/:id', async ({ params }) => envelope(await webhooks.get(params.id), 'Webhook endpoint'), {
			auth: ADMIN,
			params: WebhookModel.idParams,
			response: { 200: Envelope(WebhookModel.endpoint), ...problemResponses(401, 403, 404, 422, 429) },
			detail: { operationId: 'getWebhook', summary: 'A webhook endpoint (admins)' },
		})
		.put('/:id', async ({ params, body, caller, client }) => envelope(await webhooks.replace(params.id, body, caller, client), 'Webhook endpoint updated'), {
			auth: ADMIN,
			params: WebhookModel.idParams,
			body: WebhookModel.replace,
			response: { 200: Envelope(WebhookModel.endpoint), ...problemResponses(400, 401, 403, 404, 413, 415, 422, 429) },
			detail: {
				operationId: 'replaceWebhook',
				summary: 'Change a webhook endpoint (admins)',
				description: '`enabled: true` turns an endpoint back on after it was disabled for failing; left out, `enabled` keeps its value.',
			},
		})
		.delete('/:id', async ({ params, caller, client }) => envelope(await webhooks.remove(params.id, caller, client), 'Webhook endpoint deleted'), {
			auth: ADMIN,
			params: WebhookModel.idParams,
			response: { 200: Envelope(WebhookModel.endpoint), ...problemResponses(401, 403, 404, 422, 429) },
			detail: {
				operationId: 'deleteWebhook',
				summary: 'Delete a webhook endpoint and its delivery log (admins)',
				description:
					'Deliveries still owed to it are dropped, an attempt in flight included. A change writing an event to it at that moment is never failed by the delete: the delete waits for it and drops its delivery too.',
			},
		})
		.post(
			'/:id/secrets',
			async ({ params, caller, client, set }) => {
				const secret = await webhooks.rotateSecret(params.id, caller, client)
				set.status = 201
				// The endpoint the new secret belongs to.
				set.headers.location = `/api/webhooks/${params.id}`
				return envelope(secret, 'Secret rotated; the previous one signs too for 24 hours')
			},
			{
				auth: ADMIN,
				params: WebhookModel.idParams,
				response: { 201: withResponseHeaders(Envelope(WebhookModel.secret), 'Location'), ...problemResponses(401, 403, 404, 422, 429) },
				detail: {
					operationId: 'rotateWebhookSecret',
					summary: 'Rotate the signing secret (admins)',
					description: 'For 24 hours every delivery carries two signatures, one per secret, so receivers can switch without missing one.',
				},
			},
		)
		.post(
			'/:id/pings',
			async ({ params, set }) => {
				const queued = await webhooks.ping(params.id)
				set.status = 202
				return envelope(queued, 'Ping queued')
			},
			{
				auth: ADMIN,
				params: WebhookModel.idParams,
				response: { 202: Envelope(WebhookModel.ping), ...problemResponses(401, 403, 404, 'conflict', 422, 429) },
				detail: { operationId: 'pingWebhook', summary: 'Send a webhook.ping event to this endpoint (admins)' },
			},
		)
		.get(
			'/:id/deliveries',
			async ({ params, query, set }) => {
				const page = await webhooks.deliveries(params.id, query)
				if (page.nextCursor) set.headers.link = nextPageLink(`/api/webhooks/${params.id}/deliveries`, query, page.nextCursor)
				return envelope(page, 'Deliveries')
			},
			{
				auth: ADMIN,
				params: WebhookModel.idParams,
				query: WebhookModel.deliveriesQuery,
				response: { 200: withResponseHeaders(Envelope(WebhookModel.deliveries), 'Link'), ...problemResponses(400, 401, 403, 404, 422, 429) },
				detail: { operationId: 'listWebhookDeliveries', summary: "An endpoint's deliveries, newest first, each with its attempts (admins)" },
			},
		)
		.post(
			'/:id/deliveries/:deliveryId/attempts',
			async ({ params, set }) => {
				await webhooks.redeliver(params.id, params.deliveryId)
				set.status = 202
				return envelope(null, 'Delivery queued again')
			},
			{
				auth: ADMIN,
				params: WebhookModel.deliveryParams,
				response: { 202: Envelope(t.Null()), ...problemResponses(401, 403, 404, 'conflict', 422, 429) },
				detail: {
					operationId: 'redeliverWebhook',
					summary: 'Try a delivery again now (admins)',
					description: 'Whatever became of it; it gets a fresh retry schedule. Receivers see the same `webhook-id`.',
				},
			},
		)
