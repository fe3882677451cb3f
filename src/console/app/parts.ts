/**
 * The pieces every view is made of: a titled panel, a table with a caption, a list of facts, and keyset pages
 * whose "Previous" goes back through exactly the pages seen (their cursors live in the tab's history entry).
 */
import { api } from './api'
import { count, h } from './dom'
import { navigate } from './shell'

type Content = Node | string | false | undefined | null

/** A panel with its own heading (`{id}-heading`), named by it for screen readers. */
export function section(id: string, title: string, ...content: Array<Content | Content[]>) {
	return h('section', { 'aria-labelledby': `${id}-heading`, class: 'panel' }, h('h2', { id: `${id}-heading` }, title), ...content.flat())
}

/** A table in a scrollable region (320 px wide screens), its caption read by screen readers. */
export function table(caption: string, headings: string[], rows: Array<Array<Node | string>>) {
	return h(
		'div',
		{ class: 'table-wrap', role: 'region', 'aria-label': caption, tabindex: '0' },
		h(
			'table',
			{},
			h('caption', { class: 'visually-hidden' }, caption),
			h('thead', {}, h('tr', {}, ...headings.map((heading) => h('th', { scope: 'col' }, heading)))),
			h('tbody', {}, ...rows.map((cells) => h('tr', {}, ...cells.map((cell) => h('td', {}, cell))))),
		),
	)
}

/** Terms and their values, as a definition list. */
export function facts(entries: ReadonlyArray<readonly [string, Node | string]>) {
	return h('dl', { class: 'facts' }, ...entries.flatMap(([term, value]) => [h('dt', {}, term), h('dd', {}, value)]))
}

interface PageState {
	/** The cursors of the pages before this one, oldest first (null: the first page). */
	before: Array<string | null>
}

/** The cursors before the current page, from the history entry (a bookmark has none). */
export const pagesBefore = (): Array<string | null> => {
	const before = (history.state as PageState | null)?.before
	return Array.isArray(before) ? before.filter((cursor) => cursor === null || typeof cursor === 'string') : []
}

/**
 * "Previous page" and "Next page" for a keyset list at `path` with `query` (its filters and `cursor`), and the page's
 * number when it is known. A new search starts with `navigate(url, { before: [] })`.
 */
export function pager(path: string, query: URLSearchParams, nextCursor: string | null | undefined) {
	const cursor = query.get('cursor')
	const before = pagesBefore()
	const pageUrl = (pageCursor: string | null) => {
		const target = new URLSearchParams(query)
		if (pageCursor) target.set('cursor', pageCursor)
		else target.delete('cursor')
		return `${path}${target.size ? `?${target}` : ''}`
	}
	const previous = h('button', { type: 'button', class: 'secondary', disabled: before.length === 0 && !cursor }, 'Previous page')
	const next = h('button', { type: 'button', class: 'secondary', disabled: !nextCursor }, 'Next page')
	previous.addEventListener('click', () => void navigate(pageUrl(before.at(-1) ?? null), { before: before.slice(0, -1) }))
	next.addEventListener('click', () => {
		if (nextCursor) void navigate(pageUrl(nextCursor), { before: [...before, cursor] })
	})
	// A page opened from its address alone (a bookmark) knows no pages before it: no number is better than a wrong one.
	const number = cursor && before.length === 0 ? undefined : before.length + 1
	return { nav: h('nav', { class: 'pager', 'aria-label': 'Pages' }, previous, next), number, label: number ? ` · page ${count(number)}` : '' }
}

/** Emails of the users seen so far, by id, for the tab's life (an account's email rarely changes within it). */
const knownEmails = new Map<string, string>()

/**
 * Emails for a page's user ids (an audit page's actors and subjects), so that a row says who rather than an id:
 * one GET /users/{id} per id not seen before, at most 25 at once; an id that cannot be read stays an id. `known`: an
 * account the caller has just read (a user's own page), asked for no more.
 */
export async function userNames(ids: readonly string[], known?: { id: string; email: string }): Promise<ReadonlyMap<string, string>> {
	if (known) knownEmails.set(known.id, known.email)
	const unknown = [...new Set(ids)].filter((id) => !knownEmails.has(id)).slice(0, 25)
	await Promise.all(
		unknown.map(async (id) => {
			const { data } = await api.users({ id }).get()
			if (data) knownEmails.set(id, data.data.email)
		}),
	)
	return knownEmails
}

type FieldAttributes = Parameters<typeof h>[1]

/** A labelled input (`#{id}`), with a hint read with it by screen readers. */
export function inputField(id: string, label: string, attributes: FieldAttributes = {}, hint?: string) {
	return h(
		'div',
		{ class: 'field' },
		h('label', { for: id }, label),
		hint ? h('p', { id: `${id}-hint`, class: 'hint' }, hint) : undefined,
		h('input', { id, name: id, ...attributes, 'aria-describedby': hint ? `${id}-hint` : undefined }),
	)
}

/** A labelled text area of one value a line (redirect URIs, permissions): `linesOf` reads it back. */
export function linesField(id: string, label: string, lines: readonly string[], hint?: string) {
	return h(
		'div',
		{ class: 'field' },
		h('label', { for: id }, label),
		hint ? h('p', { id: `${id}-hint`, class: 'hint' }, hint) : undefined,
		h('textarea', { id, name: id, rows: Math.max(3, lines.length + 1), spellcheck: 'false', autocomplete: 'off', 'aria-describedby': hint ? `${id}-hint` : undefined }, lines.join('\n')),
	)
}

/** The non-empty lines of a text area, trimmed, each once. */
export const linesOf = (text: string) => [...new Set(text.split(/\r?\n/).map((line) => line.trim()).filter(Boolean))]

/** A group of checkboxes (`name`), its legend read as the group's name. */
export function checkboxes(name: string, legend: string, options: ReadonlyArray<readonly [value: string, label: string]>, chosen: readonly string[], hint?: string) {
	return h(
		'fieldset',
		{ class: 'choices', 'aria-describedby': hint ? `${name}-hint` : undefined },
		h('legend', {}, legend),
		hint ? h('p', { id: `${name}-hint`, class: 'hint' }, hint) : undefined,
		...options.map(([value, label]) =>
			h('label', { class: 'choice' }, h('input', { type: 'checkbox', name, value, checked: chosen.includes(value) }), ' ', label),
		),
	)
}

/** The values of the checked boxes named `name` inside `form`. */
export const checkedIn = (form: ParentNode, name: string) => [...form.querySelectorAll<HTMLInputElement>(`input[type=checkbox][name="${name}"]`)].filter((box) => box.checked).map((box) => box.value)

/** Where a form's refusal is shown (showProblem puts its sentence in it), right beside the form. */
export const alertSlot = () => h('div', { class: 'alert-slot' })
