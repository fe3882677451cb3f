import type { SettingRecord } from '../../config/settings'
import { GROUP_OF, SETTING_GROUPS, type SettingGroup, type SettingsResource } from './model'

/** The group of a recorded setting: the schema's by name; a provider's OIDC_<NAME>_* beside OIDC_PROVIDERS. */
const groupOf = (name: string): SettingGroup => (name in GROUP_OF ? GROUP_OF[name as keyof typeof GROUP_OF] : 'providers')

/** The settings loadConfig recorded (no secret's value among them), grouped as docs/configuration.md groups them. */
export function effectiveSettings(records: readonly SettingRecord[]): SettingsResource {
	return {
		groups: (Object.keys(SETTING_GROUPS) as SettingGroup[]).map((id) => ({
			id,
			title: SETTING_GROUPS[id],
			settings: records.filter((record) => groupOf(record.name) === id).map((record) => ({ ...record, set: record.source !== 'unset' })),
		})),
	}
}
