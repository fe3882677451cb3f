import { Elysia } from 'elysia'
import { NotFound } from '../http/problem'
import { consoleAssets, type ConsoleAsset } from './bundle'

/**
 * The admin console at /console (docs/console.md): one HTML page for every path under it (the app's views), and
 * its script and stylesheet under /console/assets/. Served under the pages' Content-Security-Policy: nothing inline,
 * nothing from elsewhere; the app talks only to this origin (the provider and the API). Off with
 * CONSOLE_ENABLED=false: then not mounted at all, and every /console path is the unknown route's 404.
 */
export const CONSOLE_PATH = '/console'

/** Whether a path is the console's (its own HTML and assets: no JSON negotiation, see app.ts). */
export const isConsolePath = (path: string) => path === CONSOLE_PATH || path.startsWith(`${CONSOLE_PATH}/`)

export interface ConsoleDeps {
	/** PUBLIC_URL: the provider's issuer, and where the API is. */
	issuer: string
	/** APP_NAME, in the title and the bar. */
	appName: string
	/** The pages' headers (their CSP, no-store, same-origin referrer, no framing). */
	pageHeaders: Record<string, string>
}

/** The console's sections, in the bar. */
const NAV = [
	['/users', 'Users'],
	['/organizations', 'Organizations'],
	['/oauth-clients', 'OAuth clients'],
	['/webhooks', 'Webhooks'],
	['/audit', 'Audit log'],
	['/settings', 'Settings'],
] as const

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

function shell({ issuer, appName }: ConsoleDeps, script: string, styles: string) {
	return `<!doctype html>
<html lang="en" data-issuer="${escape(issuer)}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>Console · ${escape(appName)}</title>
<link rel="stylesheet" href="${CONSOLE_PATH}/assets/${styles}">
<link rel="stylesheet" href="/pages/theme.css">
<script type="module" src="${CONSOLE_PATH}/assets/${script}"></script>
</head>
<body>
<a class="skip" href="#main">Skip to the content</a>
<header class="bar">
<span class="brand">${escape(appName)} console</span>
<nav id="nav" aria-label="Console" hidden>${NAV.map(([path, label]) => `<a href="${CONSOLE_PATH}${path}" data-nav>${label}</a>`).join('')}</nav>
<span id="who"></span>
<button id="sign-out" type="button" class="secondary" hidden>Sign out</button>
</header>
<main id="main" tabindex="-1">
<h1>Console</h1>
<p class="muted">Signing in…</p>
<noscript><p class="alert">The console is a script in this page: turn on JavaScript for this site to use it.</p></noscript>
</main>
<div id="announce" class="visually-hidden" role="status" aria-live="polite"></div>
</body>
</html>
`
}

function assetResponse(request: Request, file: ConsoleAsset) {
	const gzip = /\bgzip\b/.test(request.headers.get('accept-encoding') ?? '')
	return new Response(gzip ? file.gzip : file.body, {
		headers: {
			'content-type': file.contentType,
			// Named by their contents: a new bundle is a new name.
			'cache-control': 'public, max-age=31536000, immutable',
			vary: 'Accept-Encoding',
			...(gzip ? { 'content-encoding': 'gzip' } : {}),
		},
	})
}

export function consoleRoutes(deps: ConsoleDeps) {
	const page = async () => {
		const { script, styles } = await consoleAssets()
		return new Response(shell(deps, script.name, styles.name), { headers: deps.pageHeaders })
	}
	return new Elysia({ name: 'console', normalize: false, detail: { hide: true } })
		.get(`${CONSOLE_PATH}/assets/:name`, async ({ request, params }) => {
			const { script, styles } = await consoleAssets()
			const file = [script, styles].find((candidate) => candidate.name === params.name)
			// An older bundle's name (a page loaded before a restart) is gone: the page reloaded gets the new one.
			if (!file) throw new NotFound('No such console file')
			return assetResponse(request, file)
		})
		.get(CONSOLE_PATH, page)
		.get(`${CONSOLE_PATH}/*`, page)
}
