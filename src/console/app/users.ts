/**
 * The users: search (`q`), filters (role, status), sort, keyset pages. The query lives in the address (a view can
 * be bookmarked and shared); the cursors of the pages before this one live in the tab's history entry, so that
 * "Previous" goes back through exactly the pages seen. The total is the API's: estimated for the whole table, exact
 * (up to 10,000) for a search or a filter.
 */
import { api } from './api'
import { count, h, replace, when } from './dom'
import { pager } from './parts'
import { focusHeading, navigate, showProblem } from './shell'

const SORTS = [
	['-createdAt', 'Newest first'],
	['createdAt', 'Oldest first'],
	['email', 'Email A–Z'],
	['-email', 'Email Z–A'],
] as const
type Sort = (typeof SORTS)[number][0]

function select(name: string, label: string, value: string, options: ReadonlyArray<readonly [string, string]>) {
	return h(
		'div',
		{ class: 'field' },
		h('label', { for: `filter-${name}` }, label),
		h('select', { id: `filter-${name}`, name }, ...options.map(([option, text]) => h('option', { value: option, selected: option === value }, text))),
	)
}

export async function usersView(main: HTMLElement, url: URL) {
	// Marks for the bench (test/bench/console.ts): from here, and from the page's start, to the list shown.
	performance.mark('console:users:start')
	const query = url.searchParams
	const q = query.get('q')?.trim() ?? ''
	const role = query.get('role') ?? ''
	const status = query.get('status') ?? ''
	const sort = (SORTS.some(([value]) => value === query.get('sort')) ? query.get('sort') : '-createdAt') as Sort
	const cursor = query.get('cursor')
	const filtered = q !== '' || role !== '' || status !== ''

	const form = h(
		'form',
		{ role: 'search', class: 'filters', 'aria-label': 'Find users' },
		h('div', { class: 'field grow' }, h('label', { for: 'filter-q' }, 'Search by email or name'), h('input', { id: 'filter-q', name: 'q', type: 'search', value: q, autocomplete: 'off', maxlength: 320 })),
		select('role', 'Role', role, [['', 'Any role'], ['admin', 'Administrators'], ['user', 'Users']]),
		select('status', 'Status', status, [['', 'Any status'], ['active', 'Active'], ['deactivated', 'Deactivated']]),
		select('sort', 'Sort', sort, SORTS),
		h('button', { type: 'submit', class: 'primary' }, 'Search'),
	)
	form.addEventListener('submit', (event) => {
		event.preventDefault()
		const fields = new FormData(form)
		const next = new URLSearchParams()
		for (const name of ['q', 'role', 'status', 'sort']) {
			const value = String(fields.get(name) ?? '').trim()
			if (value && !(name === 'sort' && value === '-createdAt')) next.set(name, value)
		}
		void navigate(`/console/users${next.size ? `?${next}` : ''}`, { before: [] })
	})

	const results = h('section', { 'aria-labelledby': 'results-heading', 'aria-busy': 'true' }, h('h2', { id: 'results-heading', class: 'visually-hidden' }, 'Results'), h('p', { class: 'muted' }, 'Loading…'))
	replace(main, h('h1', {}, 'Users'), form, results)

	const { data, error } = await api.users.get({
		query: {
			limit: 20,
			sort,
			count: filtered ? 'exact' : 'estimated',
			...(q ? { q } : {}),
			...(role === 'admin' || role === 'user' ? { role } : {}),
			...(status === 'active' || status === 'deactivated' ? { status } : {}),
			...(cursor ? { cursor } : {}),
		},
	})
	results.removeAttribute('aria-busy')
	if (error || !data) {
		replace(results, h('h2', { id: 'results-heading', class: 'visually-hidden' }, 'Results'))
		return showProblem(main, error)
	}
	const page = data.data
	const total = page.total ?? 0
	const totalText = page.totalExact === false ? `About ${count(total)} users` : `${count(total)} user${total === 1 ? '' : 's'}`

	const table = page.items.length
		? h(
				'div',
				{ class: 'table-wrap', role: 'region', 'aria-labelledby': 'results-heading', tabindex: '0' },
				h(
					'table',
					{},
					h('caption', { class: 'visually-hidden' }, 'Users, one per row'),
					h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Email'), h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Role'), h('th', { scope: 'col' }, 'Status'), h('th', { scope: 'col' }, 'Created'))),
					h(
						'tbody',
						{},
						...page.items.map((user) =>
							h(
								'tr',
								{},
								h('td', {}, h('a', { href: `/console/users/${user.id}`, 'data-nav': true }, user.email)),
								h('td', { class: 'wrap' }, user.name || '—'),
								h('td', {}, user.role === 'admin' ? 'Administrator' : 'User'),
								h('td', {}, h('span', { class: `badge ${user.status}` }, user.status === 'active' ? 'Active' : 'Deactivated')),
								h('td', {}, when(user.createdAt)),
							),
						),
					),
				),
			)
		: h('p', {}, filtered ? 'No user matches this search.' : 'There are no users yet.')

	const pages = pager('/console/users', query, page.nextCursor)
	replace(
		results,
		h('h2', { id: 'results-heading', class: 'visually-hidden' }, 'Results'),
		h('p', { class: 'total', role: 'status' }, totalText, page.items.length ? pages.label : ''),
		table,
		pages.nav,
	)
	if (document.activeElement === document.body || !main.contains(document.activeElement)) focusHeading()
	performance.measure('console:users', 'console:users:start')
}
