/**
 * Organizations: the list (search on name and slug, status, sort, keyset pages), creating one, and the organization
 * roles shared by all; an organization's page with its facts, renaming, deactivating, its members (keyset pages,
 * filters; add by email or user id, change roles, remove) and its invitations (invite, revoke). Every rule — who may
 * grant owner, the last owner — is the API's; its refusals are shown as sentences.
 */
import { api } from './api'
import { confirmAction } from './confirm'
import { append, h, replace, when } from './dom'
import { alertSlot, checkboxes, checkedIn, facts, inputField, linesField, linesOf, pager, section, table } from './parts'
import { announce, focusHeading, navigate, showProblem } from './shell'

const SORTS = [
	['-createdAt', 'Newest first'],
	['createdAt', 'Oldest first'],
	['name', 'Name A–Z'],
	['-name', 'Name Z–A'],
] as const
type Sort = (typeof SORTS)[number][0]
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

type Role = { name: string; description: string; permissions: string[]; builtIn: boolean }

function select(id: string, label: string, value: string, options: ReadonlyArray<readonly [string, string]>) {
	return h(
		'div',
		{ class: 'field' },
		h('label', { for: id }, label),
		h('select', { id, name: id }, ...options.map(([option, text]) => h('option', { value: option, selected: option === value }, text))),
	)
}

/** A sentence of the console's own (not an API refusal) where a form's refusals go, focused for screen readers. */
function say(slot: HTMLElement, sentence: string) {
	const alert = h('p', { class: 'alert', role: 'alert', tabindex: '-1' }, sentence)
	replace(slot, alert)
	alert.focus()
}

const statusBadge = (status: string) => h('span', { class: `badge ${status === 'active' ? 'active' : 'deactivated'}` }, status === 'active' ? 'Active' : 'Deactivated')
const roleOptions = (roles: readonly Role[]) => roles.map((role) => [role.name, role.description ? `${role.name} — ${role.description}` : role.name] as const)

export async function organizationsView(main: HTMLElement, url: URL) {
	const query = url.searchParams
	const q = query.get('q')?.trim() ?? ''
	const status = query.get('status') === 'active' || query.get('status') === 'deactivated' ? (query.get('status') as 'active' | 'deactivated') : undefined
	const sort = (SORTS.some(([value]) => value === query.get('sort')) ? query.get('sort') : '-createdAt') as Sort
	const cursor = query.get('cursor')

	const form = h(
		'form',
		{ role: 'search', class: 'filters', 'aria-label': 'Find organizations' },
		h('div', { class: 'field grow' }, h('label', { for: 'filter-q' }, 'Search by name or slug'), h('input', { id: 'filter-q', name: 'q', type: 'search', value: q, autocomplete: 'off', maxlength: 200 })),
		select('filter-status', 'Status', status ?? '', [['', 'Any status'], ['active', 'Active'], ['deactivated', 'Deactivated']]),
		select('filter-sort', 'Sort', sort, SORTS),
		h('button', { type: 'submit', class: 'primary' }, 'Search'),
	)
	form.addEventListener('submit', (event) => {
		event.preventDefault()
		const fields = new FormData(form)
		const next = new URLSearchParams()
		const value = (name: string) => String(fields.get(name) ?? '').trim()
		if (value('q')) next.set('q', value('q'))
		if (value('filter-status')) next.set('status', value('filter-status'))
		if (value('filter-sort') && value('filter-sort') !== '-createdAt') next.set('sort', value('filter-sort'))
		void navigate(`/console/organizations${next.size ? `?${next}` : ''}`, { before: [] })
	})

	const results = h('section', { 'aria-labelledby': 'results-heading', 'aria-busy': 'true' }, h('h2', { id: 'results-heading', class: 'visually-hidden' }, 'Results'), h('p', { class: 'muted' }, 'Loading…'))
	const roles = h('div', {}, h('p', { class: 'muted' }, 'Loading the roles…'))
	replace(main, h('h1', {}, 'Organizations'), form, results, createForm(), roles)

	const [{ data, error }] = await Promise.all([
		api.organizations.get({ query: { limit: 20, sort, ...(q ? { q } : {}), ...(status ? { status } : {}), ...(cursor ? { cursor } : {}) } }),
		rolesPanel(roles),
	])
	results.removeAttribute('aria-busy')
	if (error || !data) {
		replace(results, h('h2', { id: 'results-heading', class: 'visually-hidden' }, 'Results'))
		return showProblem(main, error)
	}
	const page = data.data
	const pages = pager('/console/organizations', query, page.nextCursor)
	const rows = page.items.map((organization) => [
		h('a', { href: `/console/organizations/${organization.id}`, 'data-nav': true }, organization.name),
		organization.slug,
		statusBadge(organization.status),
		when(organization.createdAt),
	])
	replace(
		results,
		h('h2', { id: 'results-heading', class: 'visually-hidden' }, 'Results'),
		// The API gives no total for organizations: the page's own count, and its number.
		h('p', { class: 'total', role: 'status' }, `${page.items.length} organization${page.items.length === 1 ? '' : 's'} on this page`, page.items.length ? pages.label : ''),
		rows.length ? table('Organizations, one per row', ['Name', 'Slug', 'Status', 'Created'], rows) : h('p', {}, q || status ? 'No organization matches this search.' : 'There are no organizations yet.'),
		pages.nav,
	)
	if (document.activeElement === document.body || !main.contains(document.activeElement)) focusHeading()
}

/** "Create an organization": the operator becomes its first owner (as the API makes its creator). */
function createForm() {
	const slot = alertSlot()
	const form = h(
		'form',
		{ class: 'stack', 'aria-labelledby': 'create-heading' },
		slot,
		inputField('organization-name', 'Name', { required: true, maxlength: 200, autocomplete: 'off' }),
		inputField('organization-slug', 'Slug (optional)', { maxlength: 64, autocomplete: 'off', spellcheck: 'false', pattern: '[a-z0-9]+(-[a-z0-9]+)*' }, 'Lower-case words joined by hyphens, unique. Left empty, it is made from the name.'),
		h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create the organization')),
	)
	form.addEventListener('submit', async (event) => {
		event.preventDefault()
		const name = (form.querySelector<HTMLInputElement>('#organization-name')?.value ?? '').trim()
		const slug = (form.querySelector<HTMLInputElement>('#organization-slug')?.value ?? '').trim()
		const { data, error } = await api.organizations.post({ name, ...(slug ? { slug } : {}) })
		if (error || !data) return showProblem(slot, error)
		await navigate(`/console/organizations/${data.data.id}`)
		announce(`${data.data.name} is created; you are its first owner.`)
	})
	return section('create', 'Create an organization', h('p', { class: 'muted' }, 'You become its first owner.'), form)
}

/** The organization roles, one set for every organization: the built-in ones, and those admins define. */
async function rolesPanel(container: HTMLElement, editing?: string): Promise<void> {
	const { data, error } = await api['organization-roles'].get()
	if (error || !data) {
		replace(container, section('roles', 'Organization roles'))
		return showProblem(container.querySelector('section') ?? container, error)
	}
	const roles = data.data.items
	const reload = async (said: string) => {
		await rolesPanel(container)
		container.querySelector<HTMLElement>('#roles-heading')?.focus()
		announce(said)
	}
	const rows = roles.map((role) => {
		let action: Node | string = 'Built in: cannot be changed'
		if (!role.builtIn) {
			const edit = h('button', { type: 'button', class: 'secondary small', 'aria-label': `Edit the role ${role.name}` }, 'Edit')
			edit.addEventListener('click', async () => {
				await rolesPanel(container, role.name)
				container.querySelector<HTMLElement>('#role-form-heading')?.focus()
			})
			const remove = h('button', { type: 'button', class: 'secondary small', 'aria-label': `Delete the role ${role.name}` }, 'Delete…')
			remove.addEventListener('click', async () => {
				const ok = await confirmAction({
					title: `Delete the role ${role.name}?`,
					body: ['It is removed from every organization’s choice of roles.', 'The API refuses while a member holds it or a pending invitation names it: change those first, so nobody loses permissions unannounced.'],
					confirm: 'Delete',
				})
				if (!ok) return
				const done = await api['organization-roles']({ name: role.name }).delete()
				if (done.error) return showProblem(container.querySelector('section') ?? container, done.error)
				await reload(`The role ${role.name} is deleted.`)
			})
			action = h('span', { class: 'row-actions' }, edit, remove)
		}
		return [h('strong', {}, role.name), h('span', { class: 'device' }, role.description || '—'), h('span', { class: 'device' }, role.permissions.join(' ') || 'none'), action]
	})

	const current = roles.find((role) => role.name === editing && !role.builtIn)
	const slot = alertSlot()
	const form = h(
		'form',
		{ class: 'stack', 'aria-labelledby': 'role-form-heading' },
		h('h3', { id: 'role-form-heading', tabindex: '-1' }, current ? `Edit the role ${current.name}` : 'Define a role'),
		slot,
		current ? undefined : inputField('role-name', 'Name', { required: true, maxlength: 64, autocomplete: 'off', spellcheck: 'false' }, 'Lower-case words joined by hyphens, such as billing-admin.'),
		inputField('role-description', 'Description (optional)', { maxlength: 500, autocomplete: 'off', value: current?.description ?? '' }),
		linesField('role-permissions', 'Permissions', current?.permissions ?? [], 'One a line, such as invoices:read. Not *: every permission is the owner’s alone.'),
		h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, current ? 'Save the role' : 'Define the role'), current ? h('button', { type: 'button', class: 'secondary', 'data-cancel': true }, 'Cancel') : undefined),
	)
	form.querySelector('[data-cancel]')?.addEventListener('click', async () => {
		await rolesPanel(container)
		container.querySelector<HTMLElement>('#role-form-heading')?.focus()
	})
	form.addEventListener('submit', async (event) => {
		event.preventDefault()
		const value = (id: string) => (form.querySelector<HTMLInputElement | HTMLTextAreaElement>(`#${id}`)?.value ?? '').trim()
		const permissions = linesOf(value('role-permissions'))
		const description = value('role-description')
		const { error } = current
			? await api['organization-roles']({ name: current.name }).put({ permissions, description })
			: await api['organization-roles'].post({ name: value('role-name'), permissions, ...(description ? { description } : {}) })
		if (error) return showProblem(slot, error)
		await reload(current ? `The role ${current.name} is saved; its members have the new permissions at their next request.` : `The role ${value('role-name')} is defined.`)
	})
	replace(
		container,
		section(
			'roles',
			'Organization roles',
			h('p', { class: 'muted' }, 'One set of roles for every organization. owner, admin and member are built in; an admin of an organization may grant every role but owner.'),
			table('Organization roles', ['Role', 'Description', 'Permissions', 'Action'], rows),
			form,
		),
	)
}

export async function organizationView(main: HTMLElement, url: URL, id: string, keepFocus = false): Promise<void> {
	if (!keepFocus) replace(main, h('h1', {}, 'Organization'), h('p', { class: 'muted', role: 'status' }, 'Loading…'))
	const query = url.searchParams
	const q = query.get('q')?.trim() ?? ''
	const role = query.get('role')?.trim() ?? ''
	const cursor = query.get('cursor')
	const organization = api.organizations({ id })
	const [found, members, invitations, roleList] = await Promise.all([
		organization.get(),
		organization.members.get({ query: { limit: 20, ...(q ? { q } : {}), ...(role ? { role } : {}), ...(cursor ? { cursor } : {}) } }),
		organization.invitations.get({ query: { limit: 20 } }),
		api['organization-roles'].get(),
	])
	if (found.error || !found.data) {
		replace(main, h('h1', {}, 'Organization'), h('p', {}, h('a', { href: '/console/organizations', 'data-nav': true }, 'Back to the organizations')))
		return showProblem(main, found.error)
	}
	const org = found.data.data
	const active = org.status === 'active'
	const roles: Role[] = roleList.data?.data.items ?? []
	const reload = async (said: string) => {
		await organizationView(main, new URL(location.href), id, true)
		focusHeading()
		announce(said)
	}

	const deactivate = h('button', { type: 'button', class: 'danger' }, 'Deactivate…')
	deactivate.addEventListener('click', async () => {
		const ok = await confirmAction({
			title: `Deactivate ${org.name}?`,
			body: [
				'Its members’ organization tokens stop at once: every token naming this organization is served as if it named none.',
				'It can still be read, but takes no change of its name, members or invitations — and the API has no way to reactivate it.',
			],
			confirm: 'Deactivate',
		})
		if (!ok) return
		const { error } = await organization.delete()
		if (error) return showProblem(main, error)
		await reload(`${org.name} is deactivated.`)
	})

	const renameSlot = alertSlot()
	const rename = h(
		'form',
		{ class: 'stack', 'aria-labelledby': 'rename-heading' },
		h('h3', { id: 'rename-heading' }, 'Change the name or slug'),
		renameSlot,
		inputField('rename-name', 'Name', { required: true, maxlength: 200, value: org.name, autocomplete: 'off' }),
		inputField('rename-slug', 'Slug', { required: true, maxlength: 64, value: org.slug, autocomplete: 'off', spellcheck: 'false', pattern: '[a-z0-9]+(-[a-z0-9]+)*' }, 'Lower-case words joined by hyphens, unique among all organizations.'),
		h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Save the name and slug'), deactivate),
	)
	rename.addEventListener('submit', async (event) => {
		event.preventDefault()
		const name = (rename.querySelector<HTMLInputElement>('#rename-name')?.value ?? '').trim()
		const slug = (rename.querySelector<HTMLInputElement>('#rename-slug')?.value ?? '').trim()
		const { error } = await organization.put({ name, slug })
		if (error) return showProblem(renameSlot, error)
		await reload(`${name} is saved.`)
	})

	const membersSection = membersPanel(org, members, roles, query, reload)
	const invitationsSection = invitationsPanel(org, invitations, roles, reload)

	replace(
		main,
		h('p', { class: 'crumbs' }, h('a', { href: '/console/organizations', 'data-nav': true }, 'Organizations'), ' / ', org.name),
		h('h1', {}, org.name, ' ', statusBadge(org.status)),
		section(
			'organization',
			'Organization',
			facts([
				['Name', org.name],
				['Slug', org.slug],
				['Status', active ? 'Active' : `Deactivated ${when(org.deactivatedAt)}`],
				['Created', when(org.createdAt)],
				['Updated', when(org.updatedAt)],
				['ID', org.id],
			]),
			active ? rename : h('p', { class: 'note' }, 'A deactivated organization can be read but takes no change (its name, members, invitations), and the API has no way to reactivate it.'),
		),
		membersSection,
		invitationsSection,
	)
	if (!keepFocus) focusHeading()
}

type Organization = { id: string; name: string; status: string }
type ApiResult<T> = { data: { data: T } | null; error: { status: number; value: unknown } | null }
type MembersPage = { items: Array<{ user: { id: string; email: string; name: string }; roles: string[]; joinedAt: string }>; nextCursor: string | null }
type InvitationsPage = { items: Array<{ id: string; email: string; roles: string[]; status: string; createdAt: string; expiresAt: string }>; nextCursor: string | null }

function membersPanel(org: Organization, members: ApiResult<MembersPage>, roles: Role[], query: URLSearchParams, reload: (said: string) => Promise<void>) {
	const path = `/console/organizations/${org.id}`
	const active = org.status === 'active'
	const q = query.get('q')?.trim() ?? ''
	const role = query.get('role')?.trim() ?? ''
	const panel = section('members', 'Members')
	const filter = h(
		'form',
		{ role: 'search', class: 'filters', 'aria-label': 'Find members' },
		h('div', { class: 'field grow' }, h('label', { for: 'member-q' }, 'Search by email or name'), h('input', { id: 'member-q', name: 'q', type: 'search', value: q, autocomplete: 'off', maxlength: 200 })),
		select('member-role', 'Role', role, [['', 'Any role'], ...roles.map((each) => [each.name, each.name] as const)]),
		h('button', { type: 'submit', class: 'secondary' }, 'Find'),
	)
	filter.addEventListener('submit', (event) => {
		event.preventDefault()
		const fields = new FormData(filter)
		const next = new URLSearchParams()
		const value = (name: string) => String(fields.get(name) ?? '').trim()
		if (value('q')) next.set('q', value('q'))
		if (value('member-role')) next.set('role', value('member-role'))
		void navigate(`${path}${next.size ? `?${next}` : ''}`, { before: [] })
	})
	panel.append(filter)
	if (members.error || !members.data) {
		const slot = alertSlot()
		panel.append(slot)
		showProblem(slot, members.error)
		return panel
	}
	const page = members.data.data
	const pages = pager(path, query, page.nextCursor)
	const editor = h('div', { class: 'editor' })
	const rows = page.items.map((member) => {
		const change = h('button', { type: 'button', class: 'secondary small', 'aria-label': `Change roles of ${member.user.email}` }, 'Change roles…')
		change.addEventListener('click', () => openRoleEditor(editor, org, member, roles, reload, change))
		const remove = h('button', { type: 'button', class: 'secondary small', 'aria-label': `Remove ${member.user.email}` }, 'Remove…')
		remove.addEventListener('click', async () => {
			const ok = await confirmAction({
				title: `Remove ${member.user.email} from ${org.name}?`,
				body: ['Their organization tokens for it stop at once, and they lose its roles and permissions.', 'Their account is kept; they can be added or invited again.'],
				confirm: 'Remove',
			})
			if (!ok) return
			const { error } = await api.organizations({ id: org.id }).members({ userId: member.user.id }).delete()
			if (error) return showProblem(editor, error)
			await reload(`${member.user.email} is removed from ${org.name}.`)
		})
		return [
			h('a', { href: `/console/users/${member.user.id}`, 'data-nav': true }, member.user.email),
			member.user.name || '—',
			member.roles.join(', '),
			when(member.joinedAt),
			active ? h('span', { class: 'row-actions' }, change, remove) : '—',
		]
	})
	append(panel, [
		h('p', { class: 'total', role: 'status' }, `${page.items.length} member${page.items.length === 1 ? '' : 's'} on this page`, page.items.length ? pages.label : ''),
		rows.length ? table('Members, one per row', ['Email', 'Name', 'Roles', 'Joined', 'Action'], rows) : h('p', {}, q || role ? 'No member matches this search.' : 'No members.'),
		pages.nav,
		editor,
		active ? addMemberForm(org, roles, reload) : undefined,
	])
	return panel
}

/** Changing a member's roles: their checkboxes below the table, the focus moved there and back. */
function openRoleEditor(editor: HTMLElement, org: Organization, member: MembersPage['items'][number], roles: Role[], reload: (said: string) => Promise<void>, opener: HTMLElement) {
	const slot = alertSlot()
	const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel')
	const form = h(
		'form',
		{ class: 'panel inset stack', 'aria-labelledby': 'editor-heading' },
		h('h3', { id: 'editor-heading', tabindex: '-1' }, `The roles of ${member.user.email}`),
		slot,
		checkboxes('member-roles', 'Roles', roleOptions(roles), member.roles, 'Only an owner (or a site administrator, as you are) grants owner.'),
		h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Save the roles'), cancel),
	)
	cancel.addEventListener('click', () => {
		replace(editor)
		opener.focus()
	})
	form.addEventListener('submit', async (event) => {
		event.preventDefault()
		const chosen = checkedIn(form, 'member-roles')
		if (!chosen.length) return say(slot, 'Choose at least one role: a member holds one role or more (remove them to take every role away).')
		const { error } = await api.organizations({ id: org.id }).members({ userId: member.user.id }).put({ roles: chosen })
		if (error) return showProblem(slot, error)
		await reload(`${member.user.email} now holds ${chosen.join(', ')}.`)
	})
	replace(editor, form)
	form.querySelector<HTMLElement>('#editor-heading')?.focus()
}

/** Adding an account by its email (looked up through GET /users?email=) or its user id. */
function addMemberForm(org: Organization, roles: Role[], reload: (said: string) => Promise<void>) {
	const slot = alertSlot()
	const form = h(
		'form',
		{ class: 'stack', 'aria-labelledby': 'add-member-heading' },
		h('h3', { id: 'add-member-heading' }, 'Add a member'),
		slot,
		inputField('add-member-who', 'Email address or user ID', { required: true, maxlength: 320, autocomplete: 'off', spellcheck: 'false' }, 'An existing, active account. Someone without an account can be invited instead (below).'),
		checkboxes('add-member-roles', 'Roles', roleOptions(roles), ['member']),
		h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Add the member')),
	)
	form.addEventListener('submit', async (event) => {
		event.preventDefault()
		const who = (form.querySelector<HTMLInputElement>('#add-member-who')?.value ?? '').trim()
		const chosen = checkedIn(form, 'add-member-roles')
		if (!chosen.length) return say(slot, 'Choose at least one role for the new member.')
		let userId = UUID.test(who) ? who.toLowerCase() : undefined
		if (!userId) {
			if (!who.includes('@')) return say(slot, 'Enter an email address or a user ID (a UUID).')
			const found = await api.users.get({ query: { email: who.toLowerCase(), limit: 1 } })
			if (found.error || !found.data) return showProblem(slot, found.error)
			userId = found.data.data.items[0]?.id
			if (!userId) return say(slot, `No account has the address ${who}. Invite it below instead: the invitation is accepted once they have an account with this address, verified.`)
		}
		const { data, error } = await api.organizations({ id: org.id }).members.post({ userId, roles: chosen })
		if (error || !data) return showProblem(slot, error)
		await reload(`${data.data.user.email} is a member of ${org.name} (${data.data.roles.join(', ')}).`)
	})
	return form
}

function invitationsPanel(org: Organization, invitations: ApiResult<InvitationsPage>, roles: Role[], reload: (said: string) => Promise<void>) {
	const active = org.status === 'active'
	const panel = section('invitations', 'Invitations', h('p', { class: 'muted' }, 'An invitation is a mail with a link; it lives 7 days and is accepted once, by the account whose verified address it names.'))
	const slot = alertSlot()
	panel.append(slot)
	if (invitations.error || !invitations.data) {
		showProblem(slot, invitations.error)
		return panel
	}
	const wrap = table('Invitations, newest first', ['Email', 'Roles', 'Status', 'Sent', 'Expires', 'Action'], [])
	const body = wrap.querySelector('tbody') as HTMLElement
	const addRows = (items: InvitationsPage['items']) => {
		for (const invitation of items) {
			let action: Node | string = '—'
			if (invitation.status === 'pending' && active) {
				const revoke = h('button', { type: 'button', class: 'secondary small', 'aria-label': `Revoke the invitation of ${invitation.email}` }, 'Revoke…')
				revoke.addEventListener('click', async () => {
					const ok = await confirmAction({ title: `Revoke the invitation of ${invitation.email}?`, body: ['Its link opens nothing any more. You can invite the address again later.'], confirm: 'Revoke' })
					if (!ok) return
					const { error } = await api.organizations({ id: org.id }).invitations({ invitationId: invitation.id }).delete()
					if (error) return showProblem(slot, error)
					await reload(`The invitation of ${invitation.email} is revoked.`)
				})
				action = revoke
			}
			body.append(
				h(
					'tr',
					{},
					...[invitation.email, invitation.roles.join(', '), h('span', { class: `badge ${invitation.status === 'pending' || invitation.status === 'accepted' ? 'active' : 'deactivated'}` }, invitation.status), when(invitation.createdAt), when(invitation.expiresAt), action].map((cell) => h('td', {}, cell)),
				),
			)
		}
	}
	addRows(invitations.data.data.items)
	// More invitations are added below the ones shown (they are not a view of their own, as members are).
	let nextCursor = invitations.data.data.nextCursor
	const more = h('button', { type: 'button', class: 'secondary', hidden: !nextCursor }, 'Show more invitations')
	more.addEventListener('click', async () => {
		if (!nextCursor) return
		const next = await api.organizations({ id: org.id }).invitations.get({ query: { limit: 20, cursor: nextCursor } })
		if (next.error || !next.data) return showProblem(slot, next.error)
		addRows(next.data.data.items)
		nextCursor = next.data.data.nextCursor
		more.hidden = !nextCursor
		announce(`${next.data.data.items.length} more invitations shown.`)
	})
	append(panel, [invitations.data.data.items.length ? wrap : h('p', {}, 'No invitations.'), more, active ? inviteForm(org, roles, reload) : undefined])
	return panel
}

function inviteForm(org: Organization, roles: Role[], reload: (said: string) => Promise<void>) {
	const slot = alertSlot()
	const form = h(
		'form',
		{ class: 'stack', 'aria-labelledby': 'invite-heading' },
		h('h3', { id: 'invite-heading' }, 'Invite by email'),
		slot,
		inputField('invite-email', 'Email address', { type: 'email', required: true, maxlength: 254, autocomplete: 'off' }),
		checkboxes('invite-roles', 'Roles', roleOptions(roles), ['member']),
		h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Send the invitation')),
	)
	form.addEventListener('submit', async (event) => {
		event.preventDefault()
		const email = (form.querySelector<HTMLInputElement>('#invite-email')?.value ?? '').trim()
		const chosen = checkedIn(form, 'invite-roles')
		if (!chosen.length) return say(slot, 'Choose at least one role for the invitation.')
		const { error } = await api.organizations({ id: org.id }).invitations.post({ email, roles: chosen })
		if (error) return showProblem(slot, error)
		await reload(`An invitation to ${org.name} is sent to ${email}.`)
	})
	return form
}
