import { Elysia } from 'elysia'
import type { PageRenderer } from './render'

/** The pages' stylesheets and scripts: served from memory, cached briefly (a PAGES_DIR change shows after a restart). */
export const ASSET_PATHS = { styles: '/pages/styles.css', theme: '/pages/theme.css', passkeysScript: '/pages/passkeys.js', linkTokenScript: '/pages/link-token.js', invitationScript: '/pages/invitation.js', favicon: '/favicon.ico' } as const

const asset = (body: string, contentType: string) => new Response(body, { headers: { 'content-type': `${contentType}; charset=utf-8`, 'cache-control': 'public, max-age=300' } })

export function pageAssets(renderer: PageRenderer) {
	return new Elysia({ name: 'pages-assets', normalize: false, detail: { hide: true } })
		.get(ASSET_PATHS.styles, () => asset(renderer.styles, 'text/css'))
		.get(ASSET_PATHS.theme, () => asset(renderer.theme, 'text/css'))
		.get(ASSET_PATHS.passkeysScript, () => asset(renderer.passkeysScript, 'text/javascript'))
		.get(ASSET_PATHS.linkTokenScript, () => asset(renderer.linkTokenScript, 'text/javascript'))
		.get(ASSET_PATHS.invitationScript, () => asset(renderer.invitationScript, 'text/javascript'))
		// Browsers ask for it on every first visit; an empty answer keeps their consoles and the access log free of 404s.
		.get(ASSET_PATHS.favicon, () => new Response(null, { status: 204, headers: { 'cache-control': 'public, max-age=86400' } }))
}
