/** A tiny element builder: no framework, no inline style or script (the console runs under the pages' CSP). */

type Child = Node | string | number | false | null | undefined
type Attributes = Record<string, string | number | boolean | undefined | null | ((event: Event) => void)>

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attributes: Attributes = {}, ...children: Array<Child | Child[]>): HTMLElementTagNameMap[K] {
	const element = document.createElement(tag)
	for (const [name, value] of Object.entries(attributes)) {
		if (value === undefined || value === null || value === false) continue
		if (typeof value === 'function') element.addEventListener(name.replace(/^on/, ''), value)
		else if (value === true) element.setAttribute(name, '')
		else element.setAttribute(name, String(value))
	}
	append(element, children)
	return element
}

export function append(parent: Node, children: Array<Child | Child[]>) {
	for (const child of children.flat()) {
		if (child === undefined || child === null || child === false) continue
		parent.appendChild(typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child)
	}
}

/** Replaces what `parent` holds. */
export function replace(parent: Element, ...children: Array<Child | Child[]>) {
	parent.replaceChildren()
	append(parent, children)
}

const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' })
export const when = (iso: string | null | undefined) => (iso ? dateFormat.format(new Date(iso)) : '—')
// Made once: a formatter costs far more to make than to use.
const numberFormat = new Intl.NumberFormat()
export const count = (value: number) => numberFormat.format(value)

const secondFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' })
/** To the second: for events that follow each other within a minute (the audit log). */
export const whenToSecond = (iso: string) => secondFormat.format(new Date(iso))

/** Text whose `code` spans (between backticks, as the settings' descriptions write them) become <code>. */
export const withCode = (text: string) => text.split('`').map((part, index) => (index % 2 === 1 ? h('code', {}, part) : part))
