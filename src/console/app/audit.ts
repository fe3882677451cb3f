/**
 * The audit log: GET /audit-events with every filter the API takes (a user — as actor or subject —, an event type,
 * a time range), newest first, in keyset pages. The filters live in the address (a view can be bookmarked); the
 * cursors of the pages before live in the tab's history entry (parts.ts `pager`). A user's page shows their recent
 * events with the same table (`auditTable`).
 */
import { api } from './api'
import { h, replace, whenToSecond } from './dom'
import { pager, userNames } from './parts'
import { focusHeading, navigate, showProblem } from './shell'

type AuditPage = NonNullable<Awaited<ReturnType<(typeof api)['audit-events']['get']>>['data']>['data']
export type AuditEvent = AuditPage['items'][number]
type EventType = AuditEvent['type']

/** Each event type in words; a Record over the API's types, so that a new type cannot go without its words. */
const EVENT_LABELS: Record<EventType, string> = {
	'user.signed-up': 'Signed up',
	'user.created': 'Account created by an admin',
	'login.succeeded': 'Signed in',
	'login.failed': 'Sign-in failed',
	'login.locked': 'Sign-ins locked (too many failures)',
	'login.code-sent': 'Sign-in code sent',
	'token.refreshed': 'Token refreshed',
	'token.reuse-detected': 'Refresh token reused: session revoked',
	logout: 'Signed out',
	'session.revoked': 'Session revoked',
	'password.changed': 'Password changed',
	'email.changed': 'Email changed',
	'role.changed': 'Role changed',
	'status.changed': 'Status changed',
	'user.deactivated': 'Account deactivated',
	'metadata.changed': 'Metadata changed',
	'app-metadata.changed': 'App metadata changed',
	'email.verification-requested': 'Verification mail sent',
	'email.verified': 'Email verified',
	'email.change-requested': 'Email change requested',
	'password.recovery-requested': 'Recovery mail sent',
	'password.reset': 'Password reset',
	'code.rejected': 'Code or link rejected',
	'login.mfa-required': 'Second factor asked for',
	'mfa.failed': 'Second factor failed',
	'mfa.locked': 'Second factor locked',
	'factor.enrolled': 'Second factor added',
	'factor.activated': 'Second factor activated',
	'factor.removed': 'Second factor removed',
	'recovery-codes.generated': 'Recovery codes made',
	'identity.linked': 'Identity linked',
	'identity.unlinked': 'Identity unlinked',
	'reauthentication.succeeded': 'Identity confirmed again',
	'reauthentication.failed': 'Identity check failed',
	'reauthentication.code-sent': 'Identity check code sent',
	'ways-in.removed': 'Ways in removed (recovery)',
	'webhook.created': 'Webhook created',
	'webhook.updated': 'Webhook updated',
	'webhook.deleted': 'Webhook deleted',
	'webhook.secret-rotated': 'Webhook secret rotated',
	'webhook.disabled': 'Webhook disabled',
	'oauth-client.created': 'OAuth client created',
	'oauth-client.updated': 'OAuth client updated',
	'oauth-client.disabled': 'OAuth client disabled',
	'oauth-client.secret-rotated': 'OAuth client secret rotated',
	'consent.granted': 'Consent given to an application',
	'consent.revoked': 'Consent withdrawn',
	'organization.created': 'Organization created',
	'organization.updated': 'Organization updated',
	'organization.deactivated': 'Organization deactivated',
	'member.added': 'Member added',
	'member.updated': 'Member’s roles changed',
	'member.removed': 'Member removed',
	'organization-role.created': 'Organization role created',
	'organization-role.updated': 'Organization role updated',
	'organization-role.deleted': 'Organization role deleted',
	'invitation.created': 'Invitation sent',
	'invitation.revoked': 'Invitation revoked',
	'invitation.accepted': 'Invitation accepted',
	'users.imported': 'Users imported',
}
const EVENT_TYPES = Object.keys(EVENT_LABELS) as EventType[]
const isEventType = (value: string): value is EventType => value in EVENT_LABELS

const PAGE_SIZE = 25
const ID_PATTERN = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/

/** A link to a user's page, named by their email when it is known. */
function userLink(id: string, names: ReadonlyMap<string, string>) {
	return h('a', { href: `/console/users/${id}`, 'data-nav': true }, names.get(id) ?? id)
}

/** The event's details as a short list; known ids link to their pages. */
function detailsOf(event: AuditEvent) {
	const entries = Object.entries(event.details)
	const linked = (name: string, value: string | number | boolean | null): Node | string => {
		const text = value === null ? '—' : String(value)
		if (typeof value !== 'string') return text
		if (name === 'organizationId' && ID_PATTERN.test(value)) return h('a', { href: `/console/organizations/${value}`, 'data-nav': true }, value)
		if (name === 'webhookId' && ID_PATTERN.test(value)) return h('a', { href: `/console/webhooks/${value}`, 'data-nav': true }, value)
		if (name === 'clientId' && /^[A-Za-z0-9._~-]{1,200}$/.test(value)) return h('a', { href: `/console/oauth-clients/${value}`, 'data-nav': true }, value)
		return text
	}
	const list = entries.length ? h('dl', { class: 'details' }, ...entries.flatMap(([name, value]) => [h('dt', {}, name), h('dd', {}, linked(name, value))])) : h('span', { class: 'muted' }, '—')
	const request = event.requestId || event.userAgent
		? h(
				'details',
				{ class: 'request' },
				h('summary', {}, 'Request'),
				h('dl', { class: 'details' }, event.requestId ? [h('dt', {}, 'Request id'), h('dd', {}, event.requestId)] : undefined, event.userAgent ? [h('dt', {}, 'User agent'), h('dd', {}, event.userAgent)] : undefined),
			)
		: undefined
	return h('div', { class: 'event-details' }, list, request)
}

/** Events as a table: when, what, who did it, whom it concerns, from which address, details. */
export function auditTable(caption: string, events: readonly AuditEvent[], names: ReadonlyMap<string, string>) {
	const rows = events.map((event) => {
		// An invitation's subject is its organization; every other subject is an account.
		const subject = event.subjectId
			? event.type.startsWith('invitation.')
				? h('a', { href: `/console/organizations/${event.subjectId}`, 'data-nav': true }, 'Organization ', event.subjectId)
				: userLink(event.subjectId, names)
			: h('span', { class: 'muted' }, '—')
		return h(
			'tr',
			{},
			h('td', {}, h('time', { datetime: event.occurredAt }, whenToSecond(event.occurredAt))),
			h('td', { class: 'wrap' }, EVENT_LABELS[event.type] ?? event.type, h('br'), h('code', {}, event.type)),
			h('td', { class: 'person' }, event.actorId ? userLink(event.actorId, names) : h('span', { class: 'muted' }, 'Anonymous')),
			h('td', { class: 'person' }, subject),
			h('td', {}, event.ip ?? '—'),
			h('td', { class: 'wrap' }, detailsOf(event)),
		)
	})
	return h(
		'div',
		{ class: 'table-wrap', role: 'region', 'aria-label': caption, tabindex: '0' },
		h(
			'table',
			{ class: 'audit' },
			h('caption', { class: 'visually-hidden' }, caption),
			h('thead', {}, h('tr', {}, ...['When', 'Event', 'Who', 'About', 'From', 'Details'].map((heading) => h('th', { scope: 'col' }, heading)))),
			h('tbody', {}, ...rows),
		),
	)
}

/** The users an event names (actors and account subjects), for `userNames`. */
export const usersNamedBy = (events: readonly AuditEvent[]) => [
	...new Set(events.flatMap((event) => [event.actorId, event.type.startsWith('invitation.') ? null : event.subjectId]).filter((id): id is string => id !== null)),
]

/** `datetime-local`'s value (local time, to the minute) for an ISO timestamp, and back. */
const toLocalInput = (iso: string) => {
	const date = new Date(iso)
	if (Number.isNaN(date.getTime())) return ''
	return new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16)
}
const fromLocalInput = (value: string) => {
	const date = new Date(value)
	return value && !Number.isNaN(date.getTime()) ? date.toISOString() : ''
}

export async function auditView(main: HTMLElement, url: URL) {
	const query = url.searchParams
	const userId = query.get('userId')?.trim() ?? ''
	const type = query.get('type') ?? ''
	const after = query.get('occurredAfter') ?? ''
	const before = query.get('occurredBefore') ?? ''
	const cursor = query.get('cursor')
	const filtered = userId !== '' || type !== '' || after !== '' || before !== ''

	const form = h(
		'form',
		{ role: 'search', class: 'filters', 'aria-label': 'Filter the audit log' },
		h(
			'div',
			{ class: 'field grow' },
			h('label', { for: 'filter-user' }, 'User (id or email)'),
			h('input', { id: 'filter-user', name: 'user', type: 'search', value: userId, autocomplete: 'off', maxlength: 320, 'aria-describedby': 'filter-user-hint' }),
			h('span', { id: 'filter-user-hint', class: 'hint' }, 'Events they did or that concern them'),
		),
		h(
			'div',
			{ class: 'field event-type' },
			h('label', { for: 'filter-type' }, 'Event'),
			h('select', { id: 'filter-type', name: 'type' }, h('option', { value: '' }, 'Any event'), ...EVENT_TYPES.map((option) => h('option', { value: option, selected: option === type }, `${EVENT_LABELS[option]} (${option})`))),
		),
		h('div', { class: 'field' }, h('label', { for: 'filter-after' }, 'From'), h('input', { id: 'filter-after', name: 'after', type: 'datetime-local', value: after ? toLocalInput(after) : '' })),
		h('div', { class: 'field' }, h('label', { for: 'filter-before' }, 'Until'), h('input', { id: 'filter-before', name: 'before', type: 'datetime-local', value: before ? toLocalInput(before) : '' })),
		h('button', { type: 'submit', class: 'primary' }, 'Filter'),
		filtered ? h('a', { href: '/console/audit', 'data-nav': true, class: 'clear' }, 'Clear the filters') : undefined,
	)
	form.addEventListener('submit', async (event) => {
		event.preventDefault()
		const fields = new FormData(form)
		const next = new URLSearchParams()
		const user = String(fields.get('user') ?? '').trim()
		if (user) {
			// An email is looked up (exactly, case aside) to the id the API filters by.
			const id = user.includes('@') ? await userIdByEmail(main, user) : user
			if (id === undefined) return
			next.set('userId', id)
		}
		const chosenType = String(fields.get('type') ?? '')
		if (isEventType(chosenType)) next.set('type', chosenType)
		const from = fromLocalInput(String(fields.get('after') ?? ''))
		const until = fromLocalInput(String(fields.get('before') ?? ''))
		if (from) next.set('occurredAfter', from)
		if (until) next.set('occurredBefore', until)
		void navigate(`/console/audit${next.size ? `?${next}` : ''}`, { before: [] })
	})

	const results = h('section', { 'aria-labelledby': 'results-heading', 'aria-busy': 'true' }, h('h2', { id: 'results-heading', class: 'visually-hidden' }, 'Events'), h('p', { class: 'muted' }, 'Loading…'))
	replace(main, h('h1', {}, 'The audit log'), form, results)

	const { data, error } = await api['audit-events'].get({
		query: {
			limit: PAGE_SIZE,
			...(userId ? { userId } : {}),
			...(isEventType(type) ? { type } : {}),
			...(after ? { occurredAfter: after } : {}),
			...(before ? { occurredBefore: before } : {}),
			...(cursor ? { cursor } : {}),
		},
	})
	results.removeAttribute('aria-busy')
	if (error || !data) {
		replace(results, h('h2', { id: 'results-heading', class: 'visually-hidden' }, 'Events'))
		return showProblem(main, error)
	}
	const page = data.data
	const names = await userNames(usersNamedBy(page.items))
	const pages = pager('/console/audit', query, page.nextCursor)
	const who = userId ? names.get(userId) ?? userId : undefined
	const summary = page.items.length
		? `${page.items.length === 1 ? '1 event' : `${page.items.length} events`}${who ? ` of ${who}` : ''}, newest first${pages.label}`
		: filtered
			? 'No event matches these filters.'
			: 'No event yet.'
	replace(
		results,
		h('h2', { id: 'results-heading', class: 'visually-hidden' }, 'Events'),
		h('p', { class: 'total', role: 'status' }, summary),
		page.items.length ? auditTable('Audit events, newest first', page.items, names) : undefined,
		pages.nav,
	)
	if (document.activeElement === document.body || !main.contains(document.activeElement)) focusHeading()
}

/** The id of the account with this email, or undefined (and a sentence saying so) when there is none. */
async function userIdByEmail(main: HTMLElement, email: string): Promise<string | undefined> {
	const { data, error } = await api.users.get({ query: { q: email, limit: 10 } })
	if (error || !data) {
		showProblem(main, error)
		return undefined
	}
	const found = data.data.items.find((user) => user.email.toLowerCase() === email.toLowerCase())
	if (found) return found.id
	main.querySelector(':scope > .alert')?.remove()
	const alert = h('p', { class: 'alert', role: 'alert', tabindex: '-1' }, `No account has the email ${email}: check it, or paste the user’s id.`)
	main.querySelector(':scope > h1')?.after(alert)
	alert.focus()
	return undefined
}
