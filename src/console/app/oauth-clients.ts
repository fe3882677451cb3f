/**
 * OAuth clients: the applications that sign their users in through Latchkey. The list (keyset pages, a status
 * filter), registering one (a confidential client's secret shown once), and a client's page: its settings edited
 * through PUT, a new secret, disabling it. The console's own client is shown but never offered a change the API
 * would refuse.
 */
import { api } from './api'
import { confirmAction } from './confirm'
import { h, replace, when } from './dom'
import { alertSlot, checkboxes, checkedIn, facts, inputField, linesField, linesOf, pager, section, table } from './parts'
import { announce, focusHeading, navigate, showProblem } from './shell'

const CONSOLE_CLIENT_ID = 'latchkey-console'

const GRANT_TYPES = [
	['authorization_code', 'Authorization code (sign-in with PKCE)'],
	['refresh_token', 'Refresh token'],
	['client_credentials', 'Client credentials (a service acting as itself; confidential clients only)'],
	['urn:ietf:params:oauth:grant-type:device_code', 'Device code (CLIs and TVs)'],
] as const
const SCOPES = [
	['openid', 'openid'],
	['profile', 'profile (name)'],
	['email', 'email'],
	['offline_access', 'offline_access (refresh tokens)'],
	['organizations', 'organizations (memberships in the ID token)'],
] as const
const DEFAULT_GRANTS = ['authorization_code', 'refresh_token']
const DEFAULT_SCOPES = ['openid', 'profile', 'email', 'offline_access']
const AUTH_METHODS = [
	['client_secret_basic', 'A secret, in HTTP Basic (client_secret_basic)'],
	['client_secret_post', 'A secret, in the request body (client_secret_post)'],
	['private_key_jwt', 'A JWT signed with a key at its JWKS URI (private_key_jwt)'],
] as const

type GrantType = (typeof GRANT_TYPES)[number][0]
type Scope = (typeof SCOPES)[number][0]
type AuthMethod = 'none' | (typeof AUTH_METHODS)[number][0]
type Algorithm = 'RS256' | 'ES256' | 'EdDSA'

const isGrant = (value: string): value is GrantType => GRANT_TYPES.some(([grant]) => grant === value)
const isScope = (value: string): value is Scope => SCOPES.some(([scope]) => scope === value)
const isAuthMethod = (value: string): value is AuthMethod => value === 'none' || AUTH_METHODS.some(([method]) => method === value)
const isAlgorithm = (value: string): value is Algorithm => value === 'RS256' || value === 'ES256' || value === 'EdDSA'

const grantLabel = (grant: string) => (grant === 'urn:ietf:params:oauth:grant-type:device_code' ? 'device_code' : grant)
const typeLabel = (type: string) => (type === 'confidential' ? 'Confidential' : 'Public')
const statusBadge = (status: string) => h('span', { class: `badge ${status === 'active' ? 'active' : 'deactivated'}` }, status === 'active' ? 'Active' : 'Disabled')

/** A secret shown this once: a read-only field to select, a copy button, and the sentence that it will not come back. */
function secretPanel(clientName: string, secret: string, rotated: boolean) {
	const copy = h('button', { type: 'button', class: 'primary' }, 'Copy the secret')
	copy.addEventListener('click', async () => {
		try {
			await navigator.clipboard.writeText(secret)
			announce('The secret is copied.')
		} catch {
			announce('The browser did not allow copying: select the secret and copy it yourself.')
		}
	})
	return h(
		'section',
		{ class: 'panel secret', 'aria-labelledby': 'secret-heading' },
		h('h2', { id: 'secret-heading', tabindex: '-1' }, rotated ? `The new secret of ${clientName}` : `The secret of ${clientName}`),
		h('p', {}, h('strong', {}, 'It is shown only now and will not be shown again:'), ' copy it into the application’s configuration before leaving this page. Latchkey keeps only its digest.'),
		rotated ? h('p', {}, 'The previous secret keeps working for 24 hours, so the application can switch without an outage; a secret older than that one stops now.') : undefined,
		h('div', { class: 'field' }, h('label', { for: 'client-secret' }, 'Client secret'), h('input', { id: 'client-secret', type: 'text', readonly: true, value: secret, spellcheck: 'false', autocomplete: 'off', class: 'mono' })),
		h('div', { class: 'actions' }, copy),
	)
}

export async function oauthClientsView(main: HTMLElement, url: URL) {
	const query = url.searchParams
	const status = query.get('status') === 'active' || query.get('status') === 'disabled' ? (query.get('status') as 'active' | 'disabled') : undefined
	const cursor = query.get('cursor')

	const filter = h(
		'form',
		{ class: 'filters', 'aria-label': 'Filter the clients' },
		h(
			'div',
			{ class: 'field' },
			h('label', { for: 'filter-status' }, 'Status'),
			h('select', { id: 'filter-status', name: 'status' }, ...[['', 'Any status'], ['active', 'Active'], ['disabled', 'Disabled']].map(([value, text]) => h('option', { value, selected: value === (status ?? '') }, text))),
		),
		h('button', { type: 'submit', class: 'secondary' }, 'Show'),
	)
	filter.addEventListener('submit', (event) => {
		event.preventDefault()
		const value = String(new FormData(filter).get('status') ?? '')
		void navigate(`/console/oauth-clients${value ? `?status=${value}` : ''}`, { before: [] })
	})
	const results = h('section', { 'aria-labelledby': 'results-heading', 'aria-busy': 'true' }, h('h2', { id: 'results-heading' }, 'Registered clients'), h('p', { class: 'muted' }, 'Loading…'))
	replace(main, h('h1', {}, 'OAuth clients'), h('p', { class: 'muted' }, 'Applications that sign their users in through Latchkey (OpenID Connect).'), filter, results, registerForm(main))

	const { data, error } = await api['oauth-clients'].get({ query: { limit: 20, ...(status ? { status } : {}), ...(cursor ? { cursor } : {}) } })
	results.removeAttribute('aria-busy')
	if (error || !data) {
		replace(results, h('h2', { id: 'results-heading' }, 'Registered clients'))
		return showProblem(main, error)
	}
	const page = data.data
	const pages = pager('/console/oauth-clients', query, page.nextCursor)
	const rows = page.items.map((client) => [
		h('a', { href: `/console/oauth-clients/${client.id}`, 'data-nav': true }, client.name),
		h('code', {}, client.clientId),
		typeLabel(client.type),
		client.firstParty ? 'Yes' : 'No',
		statusBadge(client.status),
		when(client.createdAt),
	])
	replace(
		results,
		h('h2', { id: 'results-heading' }, 'Registered clients'),
		h('p', { class: 'total', role: 'status' }, `${page.items.length} client${page.items.length === 1 ? '' : 's'} on this page`, page.items.length ? pages.label : ''),
		rows.length ? table('OAuth clients, one per row', ['Name', 'client_id', 'Type', 'First-party', 'Status', 'Registered'], rows) : h('p', {}, status ? 'No client has this status.' : 'No client is registered yet.'),
		pages.nav,
	)
	if (document.activeElement === document.body || !main.contains(document.activeElement)) focusHeading()
}

/** "Register a client": a confidential one's secret is shown once, in place of the form's page. */
function registerForm(main: HTMLElement) {
	const slot = alertSlot()
	const form = h(
		'form',
		{ class: 'stack', 'aria-labelledby': 'register-heading' },
		slot,
		inputField('client-name', 'Name', { required: true, maxlength: 100, autocomplete: 'off' }, 'Shown to people on the consent page.'),
		h(
			'fieldset',
			{ class: 'choices' },
			h('legend', {}, 'Type'),
			h('label', { class: 'choice' }, h('input', { type: 'radio', name: 'client-type', value: 'confidential', checked: true }), ' Confidential: a server that keeps a secret (a web app with a backend, a service)'),
			h('label', { class: 'choice' }, h('input', { type: 'radio', name: 'client-type', value: 'public' }), ' Public: a browser or native app that can keep no secret (PKCE alone)'),
		),
		linesField('client-redirect-uris', 'Redirect URIs', [], 'One a line; matched exactly. https, or http on 127.0.0.1, [::1] or localhost.'),
		linesField('client-post-logout-uris', 'Post-logout redirect URIs', [], 'One a line: where signing out may send the browser back to.'),
		checkboxes('client-grants', 'Grant types', GRANT_TYPES, DEFAULT_GRANTS),
		checkboxes('client-scopes', 'Scopes it may ask for', SCOPES, DEFAULT_SCOPES),
		h('label', { class: 'choice' }, h('input', { type: 'checkbox', name: 'client-first-party' }), ' First-party: the operator’s own application — its users are not asked for consent'),
		h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Register the client')),
	)
	form.addEventListener('submit', async (event) => {
		event.preventDefault()
		const type = (form.querySelector<HTMLInputElement>('input[name=client-type]:checked')?.value ?? 'confidential') === 'public' ? 'public' : 'confidential'
		const value = (id: string) => (form.querySelector<HTMLInputElement | HTMLTextAreaElement>(`#${id}`)?.value ?? '').trim()
		const { data, error } = await api['oauth-clients'].post({
			name: value('client-name'),
			type,
			redirectUris: linesOf(value('client-redirect-uris')),
			postLogoutRedirectUris: linesOf(value('client-post-logout-uris')),
			grantTypes: checkedIn(form, 'client-grants').filter(isGrant),
			scopes: checkedIn(form, 'client-scopes').filter(isScope),
			firstParty: form.querySelector<HTMLInputElement>('input[name=client-first-party]')?.checked ?? false,
		})
		if (error || !data) return showProblem(slot, error)
		const client = data.data
		if (!client.clientSecret) {
			await navigate(`/console/oauth-clients/${client.id}`)
			announce(`${client.name} is registered.`)
			return
		}
		// The secret is never put in the address or the tab's history: it lives in this page only.
		history.pushState(null, '', `/console/oauth-clients/${client.id}`)
		await oauthClientView(main, new URL(location.href), client.id, { name: client.name, secret: client.clientSecret, rotated: false })
		// What main.ts does after a view it renders itself.
		document.title = `${main.querySelector('h1')?.textContent ?? 'Console'} · Console`
		announce(`${client.name} is registered. Copy its secret now: it will not be shown again.`)
	})
	return section('register', 'Register a client', form)
}

interface ShownSecret {
	name: string
	secret: string
	rotated: boolean
}

export async function oauthClientView(main: HTMLElement, _url: URL, id: string, shown?: ShownSecret) {
	if (!shown) replace(main, h('h1', {}, 'OAuth client'), h('p', { class: 'muted', role: 'status' }, 'Loading…'))
	const resource = api['oauth-clients']({ id })
	const { data, error } = await resource.get()
	if (error || !data) {
		replace(main, h('h1', {}, 'OAuth client'), h('p', {}, h('a', { href: '/console/oauth-clients', 'data-nav': true }, 'Back to the OAuth clients')))
		return showProblem(main, error)
	}
	const client = data.data
	const builtIn = client.clientId === CONSOLE_CLIENT_ID
	const active = client.status === 'active'
	const confidential = client.type === 'confidential'
	const reload = async (said: string, secret?: ShownSecret) => {
		await oauthClientView(main, new URL(location.href), id, secret)
		announce(said)
	}

	const newSecret = h('button', { type: 'button', class: 'secondary' }, 'New secret…')
	newSecret.addEventListener('click', async () => {
		const ok = await confirmAction({
			title: `Give ${client.name} a new secret?`,
			body: [
				'A new secret is made and shown once.',
				'The current secret keeps working for 24 hours more, so the application can be redeployed with the new one without an outage; a secret from an earlier rotation stops at once.',
			],
			confirm: 'Make a new secret',
			danger: false,
		})
		if (!ok) return
		const made = await resource.secrets.post()
		if (made.error || !made.data) return showProblem(main, made.error)
		await reload(`${client.name} has a new secret. Copy it now: it will not be shown again.`, { name: client.name, secret: made.data.data.clientSecret, rotated: true })
	})
	const disable = h('button', { type: 'button', class: 'danger' }, 'Disable…')
	disable.addEventListener('click', async () => {
		const ok = await confirmAction({
			title: `Disable ${client.name}?`,
			body: [
				'Its tokens are refused at once: its access and refresh tokens, pending codes and grants are deleted, and it can get no new ones. Its users are signed out of it.',
				confidential ? 'Its secrets are void: enabled again later, it will need a new secret.' : 'The client stays listed; it can be enabled again.',
			],
			confirm: 'Disable',
		})
		if (!ok) return
		const done = await resource.delete()
		if (done.error) return showProblem(main, done.error)
		await reload(`${client.name} is disabled.`)
	})
	const enable = h('button', { type: 'button', class: 'primary' }, 'Enable…')
	enable.addEventListener('click', async () => {
		const ok = await confirmAction({
			title: `Enable ${client.name} again?`,
			body: ['It can sign users in and get tokens again.', confidential ? 'Its old secrets stay void: give it a new secret after enabling it.' : 'Its users sign in again; the tokens deleted when it was disabled stay deleted.'],
			confirm: 'Enable',
			danger: false,
		})
		if (!ok) return
		const done = await resource.put({ ...editableOf(client), status: 'active' })
		if (done.error) return showProblem(main, done.error)
		await reload(`${client.name} is enabled again.`)
	})

	const actions = builtIn
		? h(
				'p',
				{ class: 'note' },
				'This is the console’s own client, built into Latchkey: it cannot be changed or disabled (the API refuses both), since the console signs in with it. Its redirect URI follows PUBLIC_URL.',
			)
		: h('div', { class: 'actions' }, active && confidential ? newSecret : undefined, active ? disable : enable)

	const list = (values: readonly string[]) => (values.length ? h('ul', { class: 'plain' }, ...values.map((value) => h('li', {}, value))) : '—')
	replace(
		main,
		h('p', { class: 'crumbs' }, h('a', { href: '/console/oauth-clients', 'data-nav': true }, 'OAuth clients'), ' / ', client.name),
		h('h1', {}, client.name, ' ', statusBadge(client.status)),
		shown ? secretPanel(shown.name, shown.secret, shown.rotated) : undefined,
		section(
			'client',
			'Client',
			facts([
				['client_id', h('code', {}, client.clientId)],
				['Type', `${typeLabel(client.type)}${confidential ? '' : ' (no secret: PKCE alone)'}`],
				['First-party', client.firstParty ? 'Yes: no consent page' : 'No: its users are asked for consent'],
				['Status', active ? 'Active' : 'Disabled: its tokens are refused and its secrets void'],
				['Authentication', client.tokenEndpointAuthMethod],
				['Redirect URIs', list(client.redirectUris)],
				['Post-logout redirect URIs', list(client.postLogoutRedirectUris)],
				['Grant types', list(client.grantTypes.map(grantLabel))],
				['Scopes', list(client.scopes)],
				['Back-channel logout URI', client.backchannelLogoutUri ?? '—'],
				['JWKS URI', client.jwksUri ?? '—'],
				['ID token signature', client.idTokenSignedResponseAlg ?? 'RS256'],
				['Logo', client.logoUri ?? '—'],
				['Registered', when(client.createdAt)],
				['ID', client.id],
			]),
			actions,
		),
		builtIn ? undefined : settingsForm(client, async (said) => reload(said)),
	)
	if (shown) main.querySelector<HTMLElement>('#secret-heading')?.focus()
	else focusHeading()
}

type Client = NonNullable<Awaited<ReturnType<ReturnType<(typeof api)['oauth-clients']>['get']>>['data']>['data']

/** What a PUT takes back of a client as it is: every member it keeps (PUT replaces; a member left out takes its default). */
function editableOf(client: Client) {
	return {
		name: client.name,
		redirectUris: client.redirectUris,
		postLogoutRedirectUris: client.postLogoutRedirectUris,
		grantTypes: client.grantTypes,
		scopes: client.scopes,
		tokenEndpointAuthMethod: client.tokenEndpointAuthMethod,
		firstParty: client.firstParty,
		...(client.backchannelLogoutUri ? { backchannelLogoutUri: client.backchannelLogoutUri } : {}),
		...(client.jwksUri ? { jwksUri: client.jwksUri } : {}),
		...(client.idTokenSignedResponseAlg ? { idTokenSignedResponseAlg: client.idTokenSignedResponseAlg } : {}),
		...(client.logoUri ? { logoUri: client.logoUri } : {}),
	}
}

/** A client's settings, replaced through PUT; the type stays what it was made as. */
function settingsForm(client: Client, saved: (said: string) => Promise<void>) {
	const slot = alertSlot()
	const confidential = client.type === 'confidential'
	const optional = (id: string, label: string, value: string | undefined, hint: string) => inputField(id, label, { type: 'url', value: value ?? '', autocomplete: 'off', spellcheck: 'false' }, hint)
	const form = h(
		'form',
		{ class: 'stack', 'aria-labelledby': 'settings-heading' },
		slot,
		inputField('edit-name', 'Name', { required: true, maxlength: 100, value: client.name, autocomplete: 'off' }),
		linesField('edit-redirect-uris', 'Redirect URIs', client.redirectUris, 'One a line; matched exactly.'),
		linesField('edit-post-logout-uris', 'Post-logout redirect URIs', client.postLogoutRedirectUris, 'One a line.'),
		checkboxes('edit-grants', 'Grant types', confidential ? GRANT_TYPES : GRANT_TYPES.filter(([grant]) => grant !== 'client_credentials'), client.grantTypes),
		checkboxes('edit-scopes', 'Scopes it may ask for', SCOPES, client.scopes),
		h('label', { class: 'choice' }, h('input', { type: 'checkbox', name: 'edit-first-party', checked: client.firstParty }), ' First-party: its users are not asked for consent'),
		confidential
			? h(
					'div',
					{ class: 'field' },
					h('label', { for: 'edit-auth-method' }, 'How it authenticates at the token endpoint'),
					h('select', { id: 'edit-auth-method' }, ...AUTH_METHODS.map(([method, text]) => h('option', { value: method, selected: method === client.tokenEndpointAuthMethod }, text))),
				)
			: undefined,
		confidential ? optional('edit-jwks-uri', 'JWKS URI', client.jwksUri, 'Its public keys, for private_key_jwt.') : undefined,
		optional('edit-backchannel-uri', 'Back-channel logout URI', client.backchannelLogoutUri, 'Receives logout tokens; https, never a private address.'),
		optional('edit-logo-uri', 'Logo URI', client.logoUri, 'An https image shown on the consent page.'),
		h(
			'div',
			{ class: 'field' },
			h('label', { for: 'edit-id-token-alg' }, 'ID token signature'),
			h('select', { id: 'edit-id-token-alg' }, ...(['RS256', 'ES256', 'EdDSA'] as const).map((alg) => h('option', { value: alg, selected: alg === (client.idTokenSignedResponseAlg ?? 'RS256') }, alg))),
		),
		h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Save the settings')),
	)
	form.addEventListener('submit', async (event) => {
		event.preventDefault()
		const value = (id: string) => (form.querySelector<HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement>(`#${id}`)?.value ?? '').trim()
		const method = confidential ? value('edit-auth-method') : 'none'
		const algorithm = value('edit-id-token-alg')
		const optionalValue = (id: string) => value(id) || undefined
		const { error } = await api['oauth-clients']({ id: client.id }).put({
			name: value('edit-name'),
			redirectUris: linesOf(value('edit-redirect-uris')),
			postLogoutRedirectUris: linesOf(value('edit-post-logout-uris')),
			grantTypes: checkedIn(form, 'edit-grants').filter(isGrant),
			scopes: checkedIn(form, 'edit-scopes').filter(isScope),
			firstParty: form.querySelector<HTMLInputElement>('input[name=edit-first-party]')?.checked ?? false,
			...(isAuthMethod(method) ? { tokenEndpointAuthMethod: method } : {}),
			...(isAlgorithm(algorithm) && (algorithm !== 'RS256' || client.idTokenSignedResponseAlg) ? { idTokenSignedResponseAlg: algorithm } : {}),
			...(confidential && optionalValue('edit-jwks-uri') ? { jwksUri: optionalValue('edit-jwks-uri') } : {}),
			...(optionalValue('edit-backchannel-uri') ? { backchannelLogoutUri: optionalValue('edit-backchannel-uri') } : {}),
			...(optionalValue('edit-logo-uri') ? { logoUri: optionalValue('edit-logo-uri') } : {}),
		})
		if (error) return showProblem(slot, error)
		await saved(`The settings of ${value('edit-name')} are saved.`)
	})
	return section('settings', 'Settings', h('p', { class: 'muted' }, `The type (${typeLabel(client.type).toLowerCase()}) stays what the client was registered as.`), form)
}
