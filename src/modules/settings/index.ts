import { Elysia } from 'elysia'
import type { SettingRecord } from '../../config/settings'
import { Envelope, problemResponses } from '../../http/openapi'
import { envelope } from '../../http/problem'
import type { authGuard } from '../auth/guard'
import { SettingsModel } from './model'
import { effectiveSettings } from './service'

/** The settings in effect, for admins (the console's Settings view): never a secret's value. */
export const settingsModule = ({ settings, guard }: { settings: readonly SettingRecord[]; guard: ReturnType<typeof authGuard> }) => {
	// Settings are read once at start: the answer is made once too.
	const answer = effectiveSettings(settings)
	return new Elysia({ name: 'settings', prefix: '/settings', detail: { tags: ['Settings'] } }).use(guard).get('', () => envelope(answer, 'Effective settings'), {
		auth: 'admin',
		response: { 200: Envelope(SettingsModel.settings), ...problemResponses(401, 403, 429) },
		detail: {
			operationId: 'getSettings',
			summary: 'The settings in effect (admins)',
			description:
				'Every setting of the environment (docs/configuration.md) and each identity provider’s OIDC_<NAME>_*, grouped as the documentation groups them: its value in effect, whether it came from the environment, a default or was generated (development keys in DATA_DIR), and what it means. A secret’s value is never returned — only `set` — except a URL’s, shown with its password as `••••`. Read at start: a change of the environment takes effect, and shows here, after a restart.',
		},
	})
}
