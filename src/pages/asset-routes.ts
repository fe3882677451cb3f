import { Elysia } from 'elysia'
import type { PageRenderer } from './render'

/** The pages' stylesheets and script: served from memory, cached briefly (a PAGES_DIR change shows after a restart). */
export const ASSET_PATHS = { styles: '/pages/styles.css', theme: '/pages/theme.css', signInScript: '/pages/sign-in.js', linkTokenScript: '/pages/link-token.js', accountScript: '/pages/account.js' } as const

const asset = (body: string, contentType: string) => new Response(body, { headers: { 'content-type': `${contentType}; charset=utf-8`, 'cache-control': 'public, max-age=300' } })

export function pageAssets(renderer: PageRenderer) {
	return new Elysia({ name: 'pages-assets', normalize: false, detail: { hide: true } })
		.get(ASSET_PATHS.styles, () => asset(renderer.styles, 'text/css'))
		.get(ASSET_PATHS.theme, () => asset(renderer.theme, 'text/css'))
		.get(ASSET_PATHS.signInScript, () => asset(renderer.signInScript, 'text/javascript'))
		.get(ASSET_PATHS.linkTokenScript, () => asset(renderer.linkTokenScript, 'text/javascript'))
		.get(ASSET_PATHS.accountScript, () => asset(renderer.accountScript, 'text/javascript'))
}
