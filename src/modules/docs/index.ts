import { swagger } from '@elysiajs/swagger'
import { Elysia } from 'elysia'
// The browser bundle of the docs page, embedded in the binary: the page loads nothing from elsewhere.
import scalarBundlePath from '../../../node_modules/@scalar/api-reference/dist/browser/standalone.js' with { type: 'file' }
import { version as scalarVersion } from '../../../node_modules/@scalar/api-reference/package.json'
import packageJson from '../../../package.json'
import { finishDocument, type OpenApiDocument } from './document'

export interface DocsOptions {
	enabled: boolean
	/** Where the page is served; the document is at `${path}/json`, the script at `${path}/scalar.js`. */
	path: string
}

/** Elysia's protected view of the app a plugin is mounted in. */
interface Globals {
	getGlobalRoutes(): Array<{ method: string; path: string; hooks?: { body?: unknown } }>
	getGlobalDefinitions(): unknown
}
const globals = (app: object) => app as unknown as Globals

const TITLE = 'Latchkey'
const SUMMARY = 'Accounts and authentication: sign-up, login, token refresh with rotation, logout, admin.'

/**
 * The OpenAPI document and the Scalar reference page. @elysiajs/swagger
 * writes the document from the route schemas; `finishDocument` corrects what
 * it cannot say (problem+json, security, examples). Off: both paths are
 * unknown routes, answered 404 like any other.
 */
export const docs = ({ enabled, path }: DocsOptions) => {
	if (!enabled) return new Elysia({ name: 'docs-disabled' })
	const specPath = `${path}/json`
	const scriptPath = `${path}/scalar.js`
	const plugin = new Elysia({ name: 'docs' })

	// Used only to generate the document: never mounted, so that its own routes are not served.
	const generator = swagger({ path, specPath, excludeStaticFile: false, documentation: { info: { title: TITLE, version: packageJson.version } } })
	// It lists the routes of the app it is mounted in (Elysia wires that up in `use`); here, this plugin's app.
	globals(generator).getGlobalRoutes = () => globals(plugin).getGlobalRoutes()
	globals(generator).getGlobalDefinitions = () => globals(plugin).getGlobalDefinitions()
	const generate = generator.routes.find((route) => route.path === specPath)?.handler
	if (typeof generate !== 'function') throw new Error('@elysiajs/swagger no longer serves its document as a handler')
	let document: OpenApiDocument | undefined

	const page = referencePage({
		scriptUrl: `${scriptPath}?v=${scalarVersion}`,
		configuration: {
			url: specPath,
			// Nothing but this service: no web fonts, telemetry or hosted AI features.
			withDefaultFonts: false,
			telemetry: false,
			agent: { disabled: true },
			mcp: { disabled: true },
			showDeveloperTools: 'never',
		},
	})

	return plugin
		.get(path, ({ set }) => {
			set.headers['content-type'] = 'text/html; charset=utf-8'
			return page
		}, { detail: { hide: true } })
		.get(
			specPath,
			() => {
				// Routes are all registered before the first request; the document is made once.
				document ??= finishDocument(generate({} as never) as OpenApiDocument, { summary: SUMMARY, routes: globals(plugin).getGlobalRoutes() })
				return document
			},
			{ detail: { hide: true } },
		)
		.get(
			scriptPath,
			({ set }) => {
				set.headers['cache-control'] = 'public, max-age=31536000, immutable'
				set.headers['content-type'] = 'text/javascript; charset=utf-8'
				return Bun.file(scalarBundlePath)
			},
			{ detail: { hide: true } },
		)
}

/**
 * The reference page, mounted the way Scalar documents it today (`Scalar.createApiReference`); the
 * plugin's own page still uses the deprecated `spec.url`, which Scalar warns about on the console.
 * The script is served by this service (the version in its URL lets browsers keep it for a year).
 */
function referencePage({ scriptUrl, configuration }: { scriptUrl: string; configuration: Record<string, unknown> }) {
	// `<` escaped, so that no value can close the inline script.
	const json = JSON.stringify(configuration).replace(/</g, '\\u003c')
	return `<!doctype html>
<html lang="en">
	<head>
		<meta charset="utf-8" />
		<meta name="viewport" content="width=device-width, initial-scale=1" />
		<meta name="description" content="${SUMMARY}" />
		<title>${TITLE} API reference</title>
	</head>
	<body>
		<div id="app"></div>
		<script src="${scriptUrl}"></script>
		<script>Scalar.createApiReference('#app', ${json})</script>
	</body>
</html>
`
}
