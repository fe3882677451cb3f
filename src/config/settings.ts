import type { TSchema } from '@sinclair/typebox'

/**
 * The effective settings as the admin API shows them (GET /api/settings): each setting's value, where it came
 * from and what it means. Recorded once by loadConfig, with no secret's value in it — only whether it is set —
 * so that nothing reading this record can leak one.
 */

/** environment: set there; default: the schema's or one derived from other settings; generated: made in development (DATA_DIR); unset. */
export type SettingSource = 'environment' | 'default' | 'generated' | 'unset'

export type SettingValue = string | number | boolean | null

export interface SettingRecord {
	name: string
	/** null when unset, and always for a secret (but a URL whose password is masked). */
	value: SettingValue
	source: SettingSource
	/** A credential: its value is never shown. */
	secret: boolean
	description: string
	/** What the value alone does not say: where a generated key is kept, what a masked URL hides. */
	note: string | null
}

/** Credentials among the provider settings (OIDC_<NAME>_*), whose names vary. */
export const isProviderSecret = (name: string) => /^OIDC_[A-Z0-9_]+_CLIENT_SECRET$/.test(name)

/** What stands for a password in a URL shown to an operator. */
export const MASK = '••••'

/** Stands in for a credential while the URL is rebuilt (the mask itself would be percent-encoded). */
const PLACEHOLDER = 'LATCHKEYMASKED'

/** Query parameters of a URL that may carry a credential (libpq's `password`, a `token`…). */
const CREDENTIAL_PARAMETER = /pass|secret|token|key|auth/i

/**
 * A URL with its password (and any query parameter that may be a credential) replaced by the mask, or undefined
 * when `value` is no URL. The user name, host, port, path and other parameters stay: they say where it points.
 */
export function maskUrlCredentials(value: string): { shown: string; masked: boolean } | undefined {
	if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(value) || !URL.canParse(value)) return undefined
	const url = new URL(value)
	let masked = false
	if (url.password) {
		url.password = PLACEHOLDER
		masked = true
	}
	for (const name of [...url.searchParams.keys()])
		if (CREDENTIAL_PARAMETER.test(name)) {
			url.searchParams.set(name, PLACEHOLDER)
			masked = true
		}
	return { shown: url.toString().replaceAll(PLACEHOLDER, MASK), masked }
}

export interface RecordSettingsInput {
	/** The schema's settings: names, defaults and descriptions. */
	properties: Record<string, TSchema>
	/** What the environment gave, trimmed, empty values dropped. */
	given: Record<string, string>
	/** The parsed values, defaults applied. */
	values: Record<string, unknown>
	/** Defaults the config derives from other settings (for settings the schema gives none, or whose default another setting changes). */
	derived: Record<string, SettingValue | undefined>
	/** Secrets among the schema's settings. */
	secretNames: ReadonlySet<string>
	/** Each provider's settings (OIDC_<NAME>_*), as the environment gave them and as they are in effect. */
	providers: Array<{ prefix: string; given: Record<string, string | undefined>; effective: Record<string, string> }>
}

const PROVIDER_SETTINGS: Array<[suffix: string, description: string]> = [
	['ISSUER', "the provider's issuer URL"],
	['CLIENT_ID', 'the client registered at the provider'],
	['CLIENT_SECRET', "that client's secret"],
	['SCOPES', 'space-separated scopes asked for; includes openid (default `openid email profile`)'],
	['LABEL', 'what a sign-in button shows (default: the name, capitalised)'],
]

/** One record per setting of the schema, then per provider setting; secrets' values are left out here, at the source. */
export function recordSettings({ properties, given, values, derived, secretNames, providers }: RecordSettingsInput): SettingRecord[] {
	const records = Object.entries(properties).map(([name, schema]) => {
		const fromEnvironment = given[name] !== undefined
		const value = fromEnvironment ? values[name] : (derived[name] ?? schema.default)
		return shown(name, value as SettingValue | undefined, fromEnvironment, secretNames.has(name), String(schema.description ?? ''))
	})
	for (const provider of providers)
		for (const [suffix, description] of PROVIDER_SETTINGS) {
			const name = provider.prefix + suffix
			records.push(shown(name, provider.effective[suffix], provider.given[suffix] !== undefined, isProviderSecret(name), description))
		}
	return records
}

function shown(name: string, value: SettingValue | undefined, fromEnvironment: boolean, secret: boolean, description: string): SettingRecord {
	const source: SettingSource = fromEnvironment ? 'environment' : value === undefined || value === null ? 'unset' : 'default'
	if (source === 'unset') return { name, value: null, source, secret, description, note: null }
	const masked = typeof value === 'string' ? maskUrlCredentials(value) : undefined
	if (secret) {
		// A URL says where it points once its password is masked; any other secret says only that it is set.
		if (masked) return { name, value: masked.shown, source, secret, description, note: masked.masked ? 'set; its password is hidden' : 'set; it holds no password' }
		return { name, value: null, source, secret, description, note: 'set, hidden' }
	}
	if (masked?.masked) return { name, value: masked.shown, source, secret, description, note: 'its password is hidden' }
	return { name, value: value ?? null, source, secret, description, note: null }
}

/** The record after keepDevelopmentSecrets made or read a secret the environment left unset (development only). */
export const generatedSecret = (records: SettingRecord[], name: string, note: string): SettingRecord[] =>
	records.map((record) => (record.name === name && record.source === 'unset' ? { ...record, source: 'generated', note } : record))
