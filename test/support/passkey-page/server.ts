import { join } from 'node:path'

const ENTRY = join(import.meta.dir, 'page.ts')

/** The page's script, bundled once for the browser. */
let bundled: Promise<string> | undefined
function script(): Promise<string> {
	bundled ??= Bun.build({ entrypoints: [ENTRY], target: 'browser', format: 'esm' }).then(async (result) => {
		if (!result.success || !result.outputs[0]) throw new Error(`bundling the passkey page failed: ${result.logs.join('\n')}`)
		return result.outputs[0].text()
	})
	return bundled
}

/**
 * Serves the passkey page at http://localhost:<port>/ ("localhost" is a secure context, so WebAuthn works
 * over plain HTTP): the origin a frontend would have, apart from the API's.
 */
export async function servePasskeyPage() {
	const code = await script()
	const server = Bun.serve({
		hostname: 'localhost',
		port: 0,
		fetch(request) {
			const { pathname } = new URL(request.url)
			if (pathname === '/page.js') return new Response(code, { headers: { 'content-type': 'text/javascript' } })
			if (pathname === '/') return new Response('<!doctype html><title>Sign in</title><script type="module" src="/page.js"></script>', { headers: { 'content-type': 'text/html' } })
			return new Response('not found', { status: 404 })
		},
	})
	return { origin: `http://localhost:${server.port}`, stop: () => server.stop(true) }
}
