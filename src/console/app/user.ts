/**
 * A user's page: profile, role, status, email verification, metadata, sessions, second factors, linked identities
 * organizations, the applications allowed and their recent audit trail; and what an admin may do through the API: deactivate or reactivate, change the role, revoke a
 * session or all of them, remove a factor, withdraw a consent. Each action that cannot be undone says what it will do and asks first.
 */
import { api } from './api'
import { auditTable, usersNamedBy } from './audit'
import { confirmAction } from './confirm'
import { count, h, replace, when } from './dom'
import { facts, section, table, userNames } from './parts'
import { announce, focusHeading, showProblem } from './shell'

type ApiError = { status: number; value: unknown } | null

/** How many recent events the page shows; the audit log shows them all. */
const TRAIL_SIZE = 10

const describe = (userAgent: string | null) => (userAgent ? (userAgent.length > 80 ? `${userAgent.slice(0, 77)}…` : userAgent) : 'Unknown device')

export async function userView(main: HTMLElement, id: string, keepFocus = false): Promise<void> {
	if (!keepFocus) replace(main, h('h1', {}, 'User'), h('p', { class: 'muted', role: 'status' }, 'Loading…'))
	const account = api.users({ id })
	const [user, sessions, factors, identities, organizations, consents, trail] = await Promise.all([
		account.get(),
		account.sessions.get(),
		account.factors.get(),
		account.identities.get(),
		account.organizations.get({ query: { limit: 100 } }),
		account.consents.get(),
		api['audit-events'].get({ query: { userId: id, limit: TRAIL_SIZE } }),
	])
	if (user.error || !user.data) {
		replace(main, h('h1', {}, 'User'), h('p', {}, h('a', { href: '/console/users', 'data-nav': true }, 'Back to the users')))
		return showProblem(main, user.error)
	}
	const person = user.data.data
	const reload = async (said: string) => {
		await userView(main, id, true)
		focusHeading()
		announce(said)
	}
	/** Runs an API call; on a refusal, its sentence at the top of the page. */
	const act = async (call: () => Promise<{ error: ApiError }>, said: string) => {
		const { error } = await call()
		if (error) return showProblem(main, error)
		await reload(said)
	}
	const active = person.status === 'active'
	const liveSessions = sessions.data?.data.items ?? []

	const deactivate = h('button', { type: 'button', class: 'danger' }, 'Deactivate…')
	deactivate.addEventListener('click', async () => {
		const ok = await confirmAction({
			title: `Deactivate ${person.email}?`,
			body: [
				`This signs them out everywhere at once${liveSessions.length ? ` (${liveSessions.length === 1 ? '1 session' : `${count(liveSessions.length)} sessions`})` : ''} and refuses every sign-in until the account is reactivated.`,
				'The account, its data and its email address are kept; you can reactivate it later.',
			],
			confirm: 'Deactivate',
		})
		if (ok) await act(() => account.delete(), `${person.email} is deactivated and signed out everywhere.`)
	})
	const reactivate = h('button', { type: 'button', class: 'primary' }, 'Reactivate…')
	reactivate.addEventListener('click', async () => {
		const ok = await confirmAction({
			title: `Reactivate ${person.email}?`,
			body: ['They can sign in again with their existing password, factors and identities.', 'The sessions ended by the deactivation stay ended.'],
			confirm: 'Reactivate',
			danger: false,
		})
		if (ok) await act(() => account.put({ email: person.email, name: person.name, status: 'active' }), `${person.email} is active again.`)
	})
	const isAdmin = person.role === 'admin'
	const roleButton = h('button', { type: 'button', class: 'secondary' }, isAdmin ? 'Make a plain user…' : 'Make an administrator…')
	roleButton.addEventListener('click', async () => {
		const ok = await confirmAction({
			title: isAdmin ? `Remove ${person.email}'s administrator role?` : `Make ${person.email} an administrator?`,
			body: isAdmin
				? ['They keep their account but can no longer use the console or the admin API.']
				: ['They can then do everything this console does: read and change every account, sessions and settings.'],
			confirm: isAdmin ? 'Make a plain user' : 'Make an administrator',
			danger: !isAdmin,
		})
		if (ok) await act(() => account.put({ email: person.email, name: person.name, role: isAdmin ? 'user' : 'admin' }), `${person.email} is now ${isAdmin ? 'a user' : 'an administrator'}.`)
	})

	const revokeAll = h('button', { type: 'button', class: 'danger', disabled: liveSessions.length === 0 }, 'Revoke all sessions…')
	revokeAll.addEventListener('click', async () => {
		const ok = await confirmAction({
			title: `Sign ${person.email} out everywhere?`,
			body: [`This revokes all ${count(liveSessions.length)} of their sessions: every device and application signed in as them is signed out at its next request.`, 'They can sign in again.'],
			confirm: 'Revoke all sessions',
		})
		if (!ok) return
		// The API revokes a session at a time: one request each, stopping at the first refusal.
		for (const session of liveSessions) {
			const { error } = await account.sessions({ sessionId: session.id }).delete()
			if (error && error.status !== 404) return showProblem(main, error)
		}
		await reload(`${person.email} is signed out everywhere.`)
	})
	const sessionRows = liveSessions.map((session) => {
		const revoke = h('button', { type: 'button', class: 'secondary small', 'aria-label': `Revoke the session started ${when(session.createdAt)} from ${session.ip ?? 'an unknown address'}` }, 'Revoke…')
		revoke.addEventListener('click', async () => {
			const ok = await confirmAction({
				title: 'Revoke this session?',
				body: [`The device or application signed in with it (${describe(session.userAgent)}, ${session.ip ?? 'unknown address'}) is signed out at its next request.`],
				confirm: 'Revoke',
			})
			if (ok) await act(() => account.sessions({ sessionId: session.id }).delete(), 'The session is revoked.')
		})
		// The console's own session, when an admin looks at their own page: revoking it signs this console out.
		const device = h('span', { class: 'device' }, describe(session.userAgent), session.current ? h('strong', {}, ' (this console)') : undefined)
		return [when(session.createdAt), when(session.lastUsedAt), session.ip ?? '—', device, revoke]
	})

	const factorRows = (factors.data?.data.items ?? []).map((factor) => {
		const label = factor.type === 'totp' ? 'Authenticator app' : 'Passkey'
		const remove = h('button', { type: 'button', class: 'secondary small', 'aria-label': `Remove the ${label.toLowerCase()} ${factor.name}` }, 'Remove…')
		remove.addEventListener('click', async () => {
			const ok = await confirmAction({
				title: `Remove the ${label.toLowerCase()} “${factor.name}”?`,
				body: ['They can no longer sign in or confirm it is them with it. This cannot be undone: they would have to add it again.', 'Their sessions are not ended by this.'],
				confirm: 'Remove',
			})
			if (ok) await act(() => account.factors({ factorId: factor.id }).delete(), `The ${label.toLowerCase()} ${factor.name} is removed.`)
		})
		return [label, factor.name, factor.status === 'active' ? 'Active' : 'Not finished', when(factor.createdAt), when(factor.lastUsedAt), remove]
	})

	const identityRows = (identities.data?.data.items ?? []).map((identity) => [identity.provider, identity.email ?? '—', identity.subject, when(identity.createdAt)])
	const organizationRows = (organizations.data?.data.items ?? []).map((membership) => [membership.organization.name, membership.organization.slug, membership.roles.join(', ') || '—', when(membership.joinedAt)])
	const consentRows = (consents.data?.data.items ?? []).map((consent) => {
		const withdraw = h('button', { type: 'button', class: 'secondary small', 'aria-label': `Withdraw the consent to ${consent.clientName}` }, 'Withdraw…')
		withdraw.addEventListener('click', async () => {
			const ok = await confirmAction({
				title: `Withdraw their consent to ${consent.clientName}?`,
				body: ['The application loses its access to this account at once: its tokens for them are deleted, and it must ask them again.'],
				confirm: 'Withdraw',
			})
			if (ok) await act(() => account.consents({ clientId: consent.clientId }).delete(), `The consent to ${consent.clientName} is withdrawn.`)
		})
		return [consent.clientName, h('span', { class: 'device' }, consent.scopes.join(' ')), when(consent.grantedAt), withdraw]
	})
	const trailEvents = trail.data?.data.items ?? []
	const trailNames = await userNames(usersNamedBy(trailEvents), person)
	const unreadable = (result: { error: ApiError }, what: string) => (result.error ? h('p', { class: 'alert' }, `The ${what} could not be read (status ${result.error.status}).`) : undefined)

	replace(
		main,
		h('p', { class: 'crumbs' }, h('a', { href: '/console/users', 'data-nav': true }, 'Users'), ' / ', person.email),
		h('h1', {}, person.name || person.email, ' ', h('span', { class: `badge ${person.status}` }, active ? 'Active' : 'Deactivated')),
		section(
			'profile',
			'Profile',
			facts([
					['Email', person.email],
					['Name', person.name || '—'],
					['Role', isAdmin ? 'Administrator' : 'User'],
					['Status', active ? 'Active' : `Deactivated ${when(person.deactivatedAt)}`],
					['Email verified', person.emailVerified ? 'Yes' : 'No'],
					['Pending email', person.pendingEmail ?? '—'],
					['Created', when(person.createdAt)],
					['Updated', when(person.updatedAt)],
					['ID', person.id],
			]),
			h('div', { class: 'actions' }, active ? deactivate : reactivate, roleButton),
		),
		section(
			'sessions',
			'Sessions',
			unreadable(sessions, 'sessions'),
			sessionRows.length ? table('Live sessions', ['Started', 'Last used', 'Address', 'Device', 'Action'], sessionRows) : h('p', {}, 'No live session.'),
			h('div', { class: 'actions' }, revokeAll),
		),
		section('factors', 'Second factors', unreadable(factors, 'second factors'), factorRows.length ? table('Second factors', ['Kind', 'Name', 'State', 'Added', 'Last used', 'Action'], factorRows) : h('p', {}, 'No second factor.')),
		section('identities', 'Linked identities', unreadable(identities, 'identities'), identityRows.length ? table('Linked identities', ['Provider', 'Email there', 'Subject', 'Linked'], identityRows) : h('p', {}, 'No linked identity.')),
		section('organizations', 'Organizations', unreadable(organizations, 'organizations'), organizationRows.length ? table('Organizations', ['Organization', 'Slug', 'Roles', 'Joined'], organizationRows) : h('p', {}, 'Not a member of any organization.')),
		section('consents', 'Applications allowed', unreadable(consents, 'consents'), consentRows.length ? table('Applications allowed', ['Application', 'Scopes', 'Allowed', 'Action'], consentRows) : h('p', {}, 'No application was allowed access (first-party applications ask no consent).')),
		section(
			'audit',
			'Audit trail',
			unreadable(trail, 'audit trail'),
			trailEvents.length
				? [h('p', { class: 'muted' }, `The ${trailEvents.length === 1 ? 'last event' : `last ${count(trailEvents.length)} events`} they did or that concern them, newest first.`), auditTable(`The audit trail of ${person.email}`, trailEvents, trailNames)]
				: h('p', {}, 'No event yet.'),
			h('p', {}, h('a', { href: `/console/audit?userId=${person.id}`, 'data-nav': true }, 'Their full audit log')),
		),
		section(
			'metadata',
			'Metadata',
			h('h3', {}, 'metadata (the user may change it)'),
			h('pre', { tabindex: '0', 'aria-label': 'metadata' }, JSON.stringify(person.metadata ?? {}, null, 2)),
			h('h3', {}, 'appMetadata (admins only)'),
			h('pre', { tabindex: '0', 'aria-label': 'appMetadata' }, JSON.stringify(person.appMetadata ?? {}, null, 2)),
		),
	)
	if (!keepFocus) focusHeading()
}
