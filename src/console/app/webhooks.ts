/**
 * Webhooks: the endpoints (URL, events, description, on or off), adding one (its secret shown once), and an
 * endpoint's page: its facts, changes, turning it off and on, deleting it, rotating its secret (the new one shown
 * once), a ping, and its deliveries in keyset pages, each with its attempts and "Try again". Pings and new attempts
 * are made by the server's workers a moment later: the page watches for the attempt and says how it went.
 */
import { api } from './api'
import { confirmAction } from './confirm'
import { count, h, replace, when } from './dom'
import { facts, pager, section, table } from './parts'
import { announce, focusHeading, navigate, showProblem } from './shell'

type Subscription = Parameters<typeof api.webhooks.post>[0]['events'][number]
type EventType = Exclude<Subscription, '*'>

/**
 * The events an endpoint can subscribe to, as the API's route schema names them, each said in words. A Record of the
 * API's own type: an event the API adds and this list lacks (or one it drops) fails the typecheck.
 */
const EVENTS: Record<EventType, string> = {
	'user.created': 'an account was created',
	'user.updated': 'a field of an account changed',
	'user.deactivated': 'an account was deactivated',
	'user.reactivated': 'an account was reactivated',
	'user.email-verified': 'an email address was proved',
	'user.password-changed': 'a password was changed or reset',
	'session.created': 'someone signed in',
	'session.revoked': 'a session ended before its time',
	'login.locked': 'an account was locked after failed sign-ins',
	'factor.added': 'a second factor was added',
	'factor.removed': 'a second factor was removed',
	'identity.linked': 'an identity provider’s account was linked',
	'identity.unlinked': 'an identity provider’s account was unlinked',
	'oauth-client.created': 'an OAuth client was registered',
	'oauth-client.updated': 'an OAuth client was changed',
	'consent.granted': 'a user allowed an application',
	'consent.revoked': 'a consent was withdrawn',
	'organization.created': 'an organization was created',
	'organization.updated': 'an organization was renamed',
	'organization.deactivated': 'an organization was deactivated',
	'member.added': 'someone joined an organization',
	'member.updated': 'a member’s roles changed',
	'member.removed': 'someone left an organization',
	'invitation.created': 'someone was invited to an organization',
	'invitation.accepted': 'an invitation was accepted',
}
const EVENT_TYPES = Object.keys(EVENTS) as EventType[]
const isEventType = (value: string): value is EventType => Object.hasOwn(EVENTS, value)

interface Endpoint {
	id: string
	url: string
	description: string
	events: string[]
	enabled: boolean
	disabledReason: 'failing' | 'admin' | null
	failingSince: string | null
	secretRotatedAt: string | null
	createdAt: string
	updatedAt: string
}
type Delivery = NonNullable<Awaited<ReturnType<ReturnType<typeof api.webhooks>['deliveries']['get']>>['data']>['data']['items'][number]
type Attempt = Delivery['attempts'][number]
type ApiError = { status: number; value: unknown } | null

/** How long the secret before a rotation keeps signing (API.md: 24 h). */
const PREVIOUS_SECRET_MS = 24 * 3600 * 1000

const eventsInWords = (events: string[]) => (events.includes('*') ? 'All events' : events.join(', '))

function statusBadge(endpoint: Endpoint) {
	return h('span', { class: `badge ${endpoint.enabled ? 'active' : 'deactivated'}` }, endpoint.enabled ? 'Enabled' : 'Disabled')
}

function statusInWords(endpoint: Endpoint) {
	if (endpoint.enabled) return endpoint.failingSince ? `Enabled; every attempt has failed since ${when(endpoint.failingSince)}` : 'Enabled'
	return endpoint.disabledReason === 'failing'
		? 'Disabled by the server: every attempt failed for days. Fix the receiver, then turn it on again.'
		: 'Disabled by an administrator'
}

/**
 * The secret, shown once: after adding an endpoint or rotating its secret. It lives in this notice only (not in the
 * address, the tab's history or storage), so leaving the page forgets it.
 */
function secretNotice(title: string, secret: string, more: string[]) {
	const copy = h('button', { type: 'button', class: 'primary' }, 'Copy the secret')
	copy.addEventListener('click', async () => {
		try {
			await navigator.clipboard.writeText(secret)
			announce('The secret is copied to the clipboard.')
		} catch {
			announce('The browser did not let the console copy: select the secret and copy it yourself.')
		}
	})
	const done = h('button', { type: 'button', class: 'secondary' }, 'I have kept it: hide the secret')
	const notice = section(
		'secret',
		title,
		h('p', {}, h('strong', {}, 'Copy it now; it will not be shown again.'), ' Receivers verify each delivery’s signature with it (Standard Webhooks).'),
		h('p', {}, h('code', { class: 'secret', id: 'new-secret', 'aria-label': 'The signing secret' }, secret)),
		...more.map((line) => h('p', {}, line)),
		h('div', { class: 'actions' }, copy, done),
	)
	notice.classList.add('notice')
	done.addEventListener('click', () => {
		notice.remove()
		focusHeading()
		announce('The secret is hidden.')
	})
	return notice
}

/**
 * The events to send: all (`*`, also those added to the server later) or the ones ticked. `prefix` keeps the ids of
 * two forms apart.
 */
function eventsFieldset(prefix: string, chosen: string[]) {
	const all = chosen.includes('*')
	const allRadio = h('input', { type: 'radio', id: `${prefix}-all`, name: `${prefix}-scope`, value: 'all', checked: all })
	const someRadio = h('input', { type: 'radio', id: `${prefix}-some`, name: `${prefix}-scope`, value: 'some', checked: !all })
	const boxes = EVENT_TYPES.map((type) =>
		h('input', { type: 'checkbox', id: `${prefix}-event-${type}`, name: `${prefix}-event`, value: type, checked: chosen.includes(type), disabled: all, 'aria-describedby': `${prefix}-event-${type}-hint` }),
	)
	const list = h(
		'ul',
		{ class: 'events', 'aria-label': 'Events' },
		...EVENT_TYPES.map((type, index) =>
			h(
				'li',
				{},
				boxes[index],
				h('label', { for: `${prefix}-event-${type}` }, h('code', {}, type)),
				h('span', { class: 'hint', id: `${prefix}-event-${type}-hint` }, EVENTS[type]),
			),
		),
	)
	const sync = () => {
		for (const box of boxes) box.disabled = allRadio.checked
	}
	allRadio.addEventListener('change', sync)
	someRadio.addEventListener('change', sync)
	const fieldset = h(
		'fieldset',
		{ class: 'events-choice' },
		h('legend', {}, 'Events to send'),
		h('div', { class: 'choice-row' }, allRadio, h('label', { for: `${prefix}-all` }, 'All events, also those a later version adds (', h('code', {}, '*'), ')')),
		h('div', { class: 'choice-row' }, someRadio, h('label', { for: `${prefix}-some` }, 'Only these:')),
		list,
	)
	/** The events as the API takes them, or undefined when none is chosen. */
	const value = (): Subscription[] | undefined => {
		if (allRadio.checked) return ['*']
		const ticked = boxes.filter((box) => box.checked).map((box) => box.value).filter(isEventType)
		return ticked.length ? ticked : undefined
	}
	return { fieldset, value }
}

/** A sentence inside a form, where its button is (role=alert, focused). */
function formAlert(form: HTMLFormElement, sentence: string) {
	form.querySelector(':scope > .alert')?.remove()
	const alert = h('p', { class: 'alert', role: 'alert', tabindex: '-1' }, sentence)
	form.prepend(alert)
	alert.focus()
}

/** The fields of an endpoint (URL, description, events), for adding one or changing it. */
function endpointForm(prefix: string, endpoint: Pick<Endpoint, 'url' | 'description' | 'events'> | undefined, submitText: string) {
	const events = eventsFieldset(prefix, endpoint?.events ?? [])
	const form = h(
		'form',
		{ class: 'endpoint-form', novalidate: true },
		h(
			'div',
			{ class: 'field' },
			h('label', { for: `${prefix}-url` }, 'URL'),
			h('input', { id: `${prefix}-url`, name: 'url', type: 'url', required: true, maxlength: 2048, autocomplete: 'off', value: endpoint?.url ?? '', placeholder: 'https://api.example.com/hooks/latchkey', 'aria-describedby': `${prefix}-url-hint` }),
			h('span', { class: 'hint', id: `${prefix}-url-hint` }, 'Where events are POSTed: https, at a public address.'),
		),
		h('div', { class: 'field' }, h('label', { for: `${prefix}-description` }, 'Description (optional)'), h('input', { id: `${prefix}-description`, name: 'description', type: 'text', maxlength: 500, autocomplete: 'off', value: endpoint?.description ?? '' })),
		events.fieldset,
		h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, submitText)),
	)
	/** What the form says, or a sentence saying what is missing. */
	const read = (): { url: string; description: string; events: Subscription[] } | string => {
		const fields = new FormData(form)
		const url = String(fields.get('url') ?? '').trim()
		const chosen = events.value()
		if (!url) return 'Enter the URL the events are sent to.'
		if (!chosen) return 'Choose at least one event, or all events.'
		return { url, description: String(fields.get('description') ?? '').trim(), events: chosen }
	}
	return { form, read }
}

export async function webhooksView(main: HTMLElement, url: URL, created?: { url: string; secret: string }) {
	if (!created) replace(main, h('h1', {}, 'Webhooks'), h('p', { class: 'muted', role: 'status' }, 'Loading…'))
	const { data, error } = await api.webhooks.get()
	if (error || !data) {
		replace(main, h('h1', {}, 'Webhooks'))
		return showProblem(main, error)
	}
	const endpoints: Endpoint[] = data.data.items
	const rows = endpoints.map((endpoint) => [
		h('a', { href: `/console/webhooks/${endpoint.id}`, 'data-nav': true, class: 'url' }, endpoint.url),
		h('span', { class: 'device' }, eventsInWords(endpoint.events)),
		h('span', { class: 'device' }, endpoint.description || '—'),
		statusBadge(endpoint),
		when(endpoint.createdAt),
	])

	const { form, read } = endpointForm('new', undefined, 'Add the endpoint')
	form.addEventListener('submit', async (event) => {
		event.preventDefault()
		const input = read()
		if (typeof input === 'string') return formAlert(form, input)
		const answer = await api.webhooks.post({ url: input.url, events: input.events, ...(input.description ? { description: input.description } : {}) })
		if (answer.error || !answer.data) return showProblem(main, answer.error)
		await webhooksView(main, url, { url: answer.data.data.url, secret: answer.data.data.secret })
	})

	replace(
		main,
		h('h1', {}, 'Webhooks'),
		created
			? secretNotice(`The signing secret of ${created.url}`, created.secret, ['The endpoint is added and enabled: it receives the events chosen from now on. Open it below to send a ping.'])
			: undefined,
		h('p', { class: 'muted' }, 'Endpoints receive account events as signed HTTP POSTs (Standard Webhooks), retried for about a day when they fail.'),
		section(
			'endpoints',
			'Endpoints',
			h('p', { class: 'total', role: 'status' }, endpoints.length === 1 ? '1 endpoint' : `${count(endpoints.length)} endpoints`),
			rows.length ? table('Webhook endpoints', ['URL', 'Events', 'Description', 'Status', 'Created'], rows) : h('p', {}, 'No endpoint yet: add one below.'),
		),
		section('add', 'Add an endpoint', form),
	)
	if (created) {
		main.querySelector<HTMLElement>('#secret-heading')?.setAttribute('tabindex', '-1')
		main.querySelector<HTMLElement>('#secret-heading')?.focus()
		announce(`The endpoint ${created.url} is added. Copy its secret now; it will not be shown again.`)
	} else focusHeading()
}

const STATUS_WORDS: Record<Delivery['status'], string> = { pending: 'Pending', succeeded: 'Delivered', failed: 'Failed' }

/** An attempt's outcome in words. */
function outcomeOf(attempt: Attempt) {
	if (attempt.succeeded) return `Delivered: the receiver answered ${attempt.statusCode ?? 'in time'}`
	const error = attempt.error ?? 'failed'
	const http = /^HTTP (\d{3})(?::\s*(.*))?$/.exec(error)
	if (http) return `The receiver answered ${http[1]}${http[2] ? `: ${http[2]}` : ' (not a 2xx)'}`
	return `${error.charAt(0).toUpperCase()}${error.slice(1)}`
}

function endpointFacts(endpoint: Endpoint) {
	return facts([
		['URL', endpoint.url],
		['Description', endpoint.description || '—'],
		['Events', eventsInWords(endpoint.events)],
		['Status', statusInWords(endpoint)],
		['Secret rotated', endpoint.secretRotatedAt ? when(endpoint.secretRotatedAt) : 'Never'],
		['Created', when(endpoint.createdAt)],
		['Updated', when(endpoint.updatedAt)],
		['ID', endpoint.id],
	])
}

const duration = (ms: number) => (ms < 1000 ? `${count(ms)} ms` : `${(ms / 1000).toFixed(1)} s`)

export async function webhookView(main: HTMLElement, url: URL, id: string, after?: { said?: string; secret?: string; watch?: { deliveryId: string; attemptsBefore: number; what: string } }) {
	if (!after) replace(main, h('h1', {}, 'Webhook endpoint'), h('p', { class: 'muted', role: 'status' }, 'Loading…'))
	const query = url.searchParams
	const asked = query.get('status') ?? ''
	const status = Object.hasOwn(STATUS_WORDS, asked) ? (asked as Delivery['status']) : undefined
	const cursor = query.get('cursor') ?? ''
	const resource = api.webhooks({ id })
	const deliveriesQuery = { limit: 20, ...(status ? { status } : {}), ...(cursor ? { cursor } : {}) }
	const [found, deliveries] = await Promise.all([resource.get(), resource.deliveries.get({ query: deliveriesQuery })])
	if (found.error || !found.data) {
		replace(main, h('h1', {}, 'Webhook endpoint'), h('p', {}, h('a', { href: '/console/webhooks', 'data-nav': true }, 'Back to the webhooks')))
		return showProblem(main, found.error)
	}
	const endpoint: Endpoint = found.data.data
	const reload = (next: NonNullable<typeof after>) => webhookView(main, new URL(location.href), id, next)
	/** Runs an API call; on a refusal, its sentence at the top of the page. */
	const act = async <T>(call: () => Promise<{ data: T | null; error: ApiError }>, next: (data: T) => NonNullable<typeof after>) => {
		const { data, error } = await call()
		if (error || data === null) return showProblem(main, error)
		await reload(next(data))
	}
	const put = (changes: { url: string; events: Subscription[]; description: string; enabled?: boolean }) => () => resource.put(changes)
	const current = { url: endpoint.url, events: endpoint.events.filter((event): event is Subscription => event === '*' || isEventType(event)), description: endpoint.description }

	const ping = h('button', { type: 'button', class: 'primary' }, 'Send a ping')
	ping.addEventListener('click', async () => {
		const { data, error } = await resource.pings.post()
		if (error || !data) return showProblem(main, error)
		const said = 'The ping is queued: its delivery appears below, and its attempt in a moment.'
		const watch = { deliveryId: data.data.deliveryId, attemptsBefore: 0, what: 'The ping' }
		// The ping is the newest delivery: it shows on the first page without a filter, so the view goes there.
		if (status || cursor) {
			history.pushState({ before: [] }, '', `/console/webhooks/${id}`)
			return webhookView(main, new URL(location.href), id, { said, watch })
		}
		await reload({ said, watch })
	})

	const rotate = h('button', { type: 'button', class: 'secondary' }, 'Rotate the secret…')
	rotate.addEventListener('click', async () => {
		const rotatedRecently = endpoint.secretRotatedAt && Date.now() - Date.parse(endpoint.secretRotatedAt) < PREVIOUS_SECRET_MS
		const ok = await confirmAction({
			title: `Rotate the signing secret of ${endpoint.url}?`,
			body: [
				'A new secret is made and shown once, here.',
				'The current secret keeps signing beside it for 24 hours: every delivery carries two signatures meanwhile, so the receiver can switch to the new secret without missing one. After that, only the new secret signs.',
				rotatedRecently
					? `It was rotated less than 24 hours ago (${when(endpoint.secretRotatedAt)}): the secret before the current one stops signing at once.`
					: '',
			].filter(Boolean),
			confirm: 'Rotate the secret',
			danger: false,
		})
		if (ok) await act(() => resource.secrets.post(), (data) => ({ secret: data.data.secret, said: 'The secret is rotated. Copy the new one now; it will not be shown again.' }))
	})

	const toggle = h('button', { type: 'button', class: endpoint.enabled ? 'danger' : 'primary' }, endpoint.enabled ? 'Turn off…' : 'Turn on')
	toggle.addEventListener('click', async () => {
		if (!endpoint.enabled) return act(put({ ...current, enabled: true }), () => ({ said: `${endpoint.url} is on again: it receives the events chosen from now on.` }))
		const ok = await confirmAction({
			title: `Turn off ${endpoint.url}?`,
			body: [
				'Nothing is sent to it while it is off: events that happen meanwhile are not kept for it, and deliveries still owed to it are marked failed when their turn comes.',
				'Turn it on again at any time; a failed delivery can then be tried again from its entry below.',
			],
			confirm: 'Turn off',
		})
		if (ok) await act(put({ ...current, enabled: false }), () => ({ said: `${endpoint.url} is off: nothing is sent to it.` }))
	})

	const remove = h('button', { type: 'button', class: 'danger' }, 'Delete…')
	remove.addEventListener('click', async () => {
		const ok = await confirmAction({
			title: `Delete the endpoint ${endpoint.url}?`,
			body: [
				'Nothing more is sent to it: deliveries still owed to it are dropped (an attempt in flight included), and its delivery log is deleted with it.',
				'This cannot be undone: to receive events there again, add the endpoint anew; it gets a new secret.',
			],
			confirm: 'Delete the endpoint',
		})
		if (!ok) return
		const { error } = await resource.delete()
		if (error) return showProblem(main, error)
		await navigate('/console/webhooks')
		announce(`The endpoint ${endpoint.url} is deleted.`)
	})

	const { form, read } = endpointForm('edit', endpoint, 'Save the changes')
	form.addEventListener('submit', async (event) => {
		event.preventDefault()
		const input = read()
		if (typeof input === 'string') return formAlert(form, input)
		await act(put(input), () => ({ said: 'The endpoint is saved.' }))
	})

	const deliveriesSection = section('deliveries', 'Deliveries')
	type Page = NonNullable<typeof deliveries.data>['data']
	/** The page of deliveries on screen. */
	let shown: Page | undefined
	const renderDeliveries = (page: Page | undefined, problem: ApiError) => {
		shown = page
		// Kept across a refresh: which deliveries are open, and what had the focus.
		const open = new Set([...deliveriesSection.querySelectorAll<HTMLDetailsElement>('details[data-delivery][open]')].map((details) => details.dataset.delivery))
		const focused = deliveriesSection.contains(document.activeElement) ? (document.activeElement as HTMLElement).dataset.focusKey : undefined
		const heading = deliveriesSection.querySelector('h2') as HTMLElement
		const filter = h(
			'form',
			{ class: 'filters' },
			h(
				'div',
				{ class: 'field' },
				h('label', { for: 'deliveries-status' }, 'Show'),
				h(
					'select',
					{ id: 'deliveries-status', name: 'status' },
					...[['', 'Every delivery'], ['failed', 'Failed'], ['pending', 'Pending'], ['succeeded', 'Delivered']].map(([value, text]) => h('option', { value, selected: value === (status ?? '') }, text)),
				),
			),
			h('button', { type: 'submit', class: 'secondary' }, 'Show'),
			h('button', { type: 'button', class: 'secondary', 'data-focus-key': 'refresh', onclick: () => void refresh() }, 'Refresh'),
		)
		filter.addEventListener('submit', (event) => {
			event.preventDefault()
			const chosen = String(new FormData(filter).get('status') ?? '')
			void navigate(`/console/webhooks/${id}${chosen ? `?status=${chosen}` : ''}`, { before: [] })
		})
		if (!page) {
			replace(deliveriesSection, heading, filter, h('p', { class: 'alert' }, `The deliveries could not be read (status ${problem?.status ?? 0}).`))
			return
		}
		const pages = pager(`/console/webhooks/${id}`, query, page.nextCursor)
		const items = page.items.map((delivery) => deliveryEntry(delivery, open.has(delivery.id)))
		replace(
			deliveriesSection,
			heading,
			filter,
			h('p', { class: 'total', role: 'status' }, page.items.length ? `${page.items.length === 1 ? '1 delivery' : `${count(page.items.length)} deliveries`} on this page${pages.label}` : status ? 'No delivery with this status.' : 'No delivery yet: send a ping to see one.'),
			items.length ? h('ul', { class: 'deliveries' }, ...items.map((item) => h('li', {}, item))) : undefined,
			pages.nav,
		)
		if (focused) deliveriesSection.querySelector<HTMLElement>(`[data-focus-key="${focused}"]`)?.focus()
	}
	const deliveryEntry = (delivery: Delivery, open: boolean) => {
		const again = h('button', { type: 'button', class: 'secondary', 'data-focus-key': `again-${delivery.id}` }, 'Try again')
		again.addEventListener('click', async () => {
			const { error } = await resource.deliveries({ deliveryId: delivery.id }).attempts.post()
			if (error) return showProblem(main, error)
			announce(`The delivery of ${delivery.eventType} is queued again: its new attempt appears here in a moment.`)
			void watchFor({ deliveryId: delivery.id, attemptsBefore: delivery.attempts.length, what: 'The new attempt' })
		})
		const attemptRows = delivery.attempts.map((attempt, index) => [String(index + 1), when(attempt.attemptedAt), attempt.statusCode === null ? 'none' : String(attempt.statusCode), duration(attempt.durationMs), h('span', { class: 'device' }, outcomeOf(attempt))])
		const attemptsText = delivery.attempts.length === 1 ? '1 attempt' : `${count(delivery.attempts.length)} attempts`
		return h(
			'details',
			{ class: 'delivery', 'data-delivery': delivery.id, open },
			h(
				'summary',
				{ 'data-focus-key': `summary-${delivery.id}` },
				h('span', { class: `badge ${delivery.status}` }, STATUS_WORDS[delivery.status]),
				' ',
				h('code', {}, delivery.eventType),
				h('span', { class: 'muted' }, ` · ${when(delivery.createdAt)} · ${attemptsText}`),
			),
			facts([
				['Status', delivery.status === 'pending' ? `Pending: next attempt ${when(delivery.nextAttemptAt)}` : STATUS_WORDS[delivery.status]],
				['webhook-id', h('code', {}, delivery.eventId)],
				['Created', when(delivery.createdAt)],
			]),
			attemptRows.length
				? table(`Attempts at delivering ${delivery.eventType}, oldest first`, ['#', 'When', 'HTTP status', 'Took', 'Outcome'], attemptRows)
				: h('p', {}, 'No attempt yet.'),
			endpoint.enabled ? h('div', { class: 'actions' }, again) : h('p', { class: 'muted' }, 'Turn the endpoint on to try this delivery again.'),
			h('details', { class: 'body' }, h('summary', {}, 'The body sent'), h('pre', { tabindex: '0', 'aria-label': `The body of ${delivery.eventType}` }, JSON.stringify(delivery.payload, null, 2))),
		)
	}
	const fetchPage = () => resource.deliveries.get({ query: deliveriesQuery })
	const refresh = async () => {
		const { data, error } = await fetchPage()
		if (!deliveriesSection.isConnected) return
		renderDeliveries(data?.data, error)
		announce('The deliveries are up to date.')
	}
	/**
	 * A delivery as it is now: on this page, or else among the newest (a delivery tried again may have left this
	 * page's filter: it is no longer failed). The API has no route for one delivery.
	 */
	const findDelivery = async (deliveryId: string) => {
		const here = await fetchPage()
		const found = here.data?.data.items.find((item) => item.id === deliveryId)
		if (found || !(status || cursor)) return { found, page: here.data?.data }
		const newest = await resource.deliveries.get({ query: { limit: 100 } })
		return { found: newest.data?.data.items.find((item) => item.id === deliveryId), page: here.data?.data }
	}
	/** Waits for a new attempt at a delivery (the workers make it a moment later), then shows it and says how it went. */
	const watchFor = async (watch: { deliveryId: string; attemptsBefore: number; what: string }) => {
		for (let tries = 0; tries < 40; tries++) {
			await new Promise((resolve) => setTimeout(resolve, tries < 10 ? 500 : 1500))
			if (!deliveriesSection.isConnected) return
			const { found, page } = await findDelivery(watch.deliveryId)
			const attempt = found?.attempts[watch.attemptsBefore]
			if (!deliveriesSection.isConnected || !found || !attempt) continue
			// The entry is updated where it is shown (the rest of the page as it was), or the page read now shown.
			const showsIt = shown?.items.some((item) => item.id === found.id)
			renderDeliveries(shown && showsIt ? { ...shown, items: shown.items.map((item) => (item.id === found.id ? found : item)) } : page, null)
			// An attempt may end or start a run of failures: the endpoint's status is read again with it.
			const now = await resource.get()
			if (now.data) main.querySelector('#endpoint-heading + .facts')?.replaceWith(endpointFacts(now.data.data))
			announce(attempt.succeeded ? `${watch.what} was delivered: the receiver answered ${attempt.statusCode ?? 'in time'}.` : `${watch.what} failed: ${outcomeOf(attempt)}.`)
			return
		}
	}

	replace(
		main,
		h('p', { class: 'crumbs' }, h('a', { href: '/console/webhooks', 'data-nav': true }, 'Webhooks'), ' / ', endpoint.url),
		h('h1', {}, h('span', { class: 'url' }, endpoint.url), ' ', statusBadge(endpoint)),
		after?.secret
			? secretNotice('The new signing secret', after.secret, [
					`The previous secret keeps signing beside it until ${when(new Date(Date.parse(endpoint.secretRotatedAt ?? new Date().toISOString()) + PREVIOUS_SECRET_MS).toISOString())}: switch the receiver to the new one before then.`,
				])
			: undefined,
		section(
			'endpoint',
			'Endpoint',
			endpointFacts(endpoint),
			h('div', { class: 'actions' }, endpoint.enabled ? ping : undefined, rotate, toggle, remove),
			endpoint.enabled ? undefined : h('p', { class: 'muted' }, 'Turn the endpoint on to send a ping.'),
		),
		deliveriesSection,
		section('change', 'Change the endpoint', form),
	)
	renderDeliveries(deliveries.data?.data, deliveries.error)
	if (after?.secret) {
		const heading = main.querySelector<HTMLElement>('#secret-heading')
		heading?.setAttribute('tabindex', '-1')
		heading?.focus()
	} else if (!after || !main.contains(document.activeElement) || document.activeElement === document.body) focusHeading()
	if (after?.said) announce(after.said)
	if (after?.watch) void watchFor(after.watch)
}
