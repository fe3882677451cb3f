/**
 * The settings in effect (GET /settings), grouped as docs/configuration.md groups them: each one's value, or
 * "default", or for a secret only "set, hidden" — the API never sends a secret's value, so the page cannot show one.
 * Settings are read at start: changing one is an edit of the environment and a restart, not a form here.
 */
import { api } from './api'
import { h, replace, withCode } from './dom'
import { section } from './parts'
import { focusHeading, showProblem } from './shell'

type SettingsPage = NonNullable<Awaited<ReturnType<typeof api.settings.get>>['data']>['data']
type Setting = SettingsPage['groups'][number]['settings'][number]

const SOURCE_LABELS: Record<Setting['source'], string> = {
	environment: 'From the environment',
	default: 'Default',
	generated: 'Generated',
	unset: 'Not set',
}

/** A long name may break after an underscore (SHUTDOWN_TIMEOUT_<wbr>SECONDS), never inside a word. */
const nameWithBreaks = (name: string) => name.split('_').flatMap((part, index, parts) => (index < parts.length - 1 ? [`${part}_`, h('wbr')] : [part]))

const shownValue = (value: Setting['value']) => (typeof value === 'boolean' ? (value ? 'true' : 'false') : String(value))

/** What the page says of a value: the value itself, or for a secret whether it is set (a URL with its password masked). */
function valueOf(setting: Setting) {
	const note = setting.note ? h('span', { class: 'setting-note' }, setting.note) : undefined
	if (setting.secret) {
		if (!setting.set) return h('span', { class: 'muted' }, 'not set')
		const mark = h('span', { class: 'badge secret' }, setting.source === 'generated' ? 'generated, hidden' : 'set, hidden')
		return h('div', {}, setting.value === null ? mark : [h('code', { class: 'value' }, shownValue(setting.value)), ' ', mark], note && setting.note !== 'set, hidden' ? [h('br'), note] : undefined)
	}
	// Unset: the Source column says so.
	if (setting.value === null) return h('span', { class: 'muted', 'aria-label': 'no value' }, '—')
	return h('div', {}, h('code', { class: 'value' }, shownValue(setting.value)), note ? [h('br'), note] : undefined)
}

export async function settingsView(main: HTMLElement, _url: URL) {
	replace(main, h('h1', {}, 'Settings'), h('p', { class: 'muted', role: 'status' }, 'Loading…'))
	focusHeading()
	const { data, error } = await api.settings.get()
	if (error || !data) {
		replace(main, h('h1', {}, 'Settings'))
		return showProblem(main, error)
	}
	const groups = data.data.groups
	const fromEnvironment = groups.flatMap((group) => group.settings).filter((setting) => setting.source === 'environment').length
	replace(
		main,
		h('h1', {}, 'Settings'),
		h(
			'p',
			{ class: 'lead' },
			`The settings this server runs with, read from its environment at start (${fromEnvironment === 1 ? '1 set there' : `${fromEnvironment} set there`}, the rest defaults). A secret’s value is never shown, only whether it is set. To change a setting, change the environment and restart the server.`,
		),
		...groups.map((group) =>
			section(
				`settings-${group.id}`,
				group.title,
				h(
					'div',
					{ class: 'table-wrap', role: 'region', 'aria-label': group.title, tabindex: '0' },
					h(
						'table',
						{ class: 'settings' },
						h('caption', { class: 'visually-hidden' }, `${group.title}: each setting, its value and where it comes from`),
						h('thead', {}, h('tr', {}, ...['Setting', 'Value', 'Source', 'Meaning'].map((heading) => h('th', { scope: 'col' }, heading)))),
						h(
							'tbody',
							{},
							...group.settings.map((setting) =>
								h(
									'tr',
									{ 'data-setting': setting.name },
									h('th', { scope: 'row' }, h('code', {}, nameWithBreaks(setting.name))),
									h('td', { class: 'wrap' }, valueOf(setting)),
									h('td', {}, h('span', { class: `source ${setting.source}` }, SOURCE_LABELS[setting.source])),
									h('td', { class: 'wrap meaning' }, ...withCode(setting.description)),
								),
							),
						),
					),
				),
			),
		),
	)
	focusHeading()
}
