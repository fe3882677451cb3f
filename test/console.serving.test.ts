/**
 * /console as the server serves it (API.md "Admin console"): one page for every path under it, its script and
 * stylesheet, under the pages' own Content-Security-Policy with nothing inline and nothing from elsewhere; the
 * assets' size; and CONSOLE_ENABLED=false, where every console path is a 404.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startTestApp, type TestApp } from './support/app'

let t: TestApp
beforeAll(async () => {
	t = await startTestApp({ APP_NAME: 'Acme <Auth>' })
})
afterAll(() => t.close())

const html = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' }
const assetsOf = (page: string) => [...page.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((match) => match[1] ?? '')

describe('/console', () => {
	test('every console path is the same page, under the pages’ headers, with nothing inline and nothing from elsewhere', async () => {
		const signIn = await t.call('GET', '/sign-in', { headers: html })
		for (const path of ['/console', '/console/', '/console/users', '/console/users/0193a000-0000-7000-8000-000000000000', '/console/callback?code=x&state=y']) {
			const page = await t.call('GET', path, { headers: html })
			expect({ path, status: page.status }).toEqual({ path, status: 200 })
			expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8')
			expect(page.headers.get('content-security-policy')).toBe(signIn.headers.get('content-security-policy'))
			expect(page.headers.get('content-security-policy')).toContain("script-src 'self'")
			expect(page.headers.get('cache-control')).toBe('no-store')
			expect(page.headers.get('x-frame-options')).toBe('DENY')
			// No inline script or style: every <script> has a src, no <style>, no style= attribute, no on…= handler.
			expect(page.text).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/)
			expect(page.text).not.toMatch(/<style|\sstyle=|\son[a-z]+=/i)
			// Nothing from another origin: every URL it names is a path on this server.
			expect(page.text.match(/(?:src|href)="([^"]*)"/g)?.every((attribute) => /="\/(?!\/)|="#/.test(attribute))).toBe(true)
		}
	})

	test('the branding is escaped, and the issuer (PUBLIC_URL) is what the script signs in at', async () => {
		const page = await t.call('GET', '/console', { headers: html })
		expect(page.text).toContain('<title>Console · Acme &#60;Auth&#62;</title>')
		expect(page.text).toContain('data-issuer="http://localhost"')
	})

	test('the script and stylesheet: named by their contents, cached a year, gzipped when asked, under 300 KB compressed', async () => {
		const page = await t.call('GET', '/console', { headers: html })
		const assets = assetsOf(page.text)
		expect(assets.map((path) => path.replace(/-[0-9a-f]{12}\./, '-<hash>.'))).toEqual(['/console/assets/console-<hash>.css', '/console/assets/console-<hash>.js'])
		let compressed = 0
		for (const path of assets) {
			const plain = await t.app.handle(new Request(`http://localhost${path}`))
			expect(plain.status).toBe(200)
			expect(plain.headers.get('content-type')).toBe(path.endsWith('.js') ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8')
			expect(plain.headers.get('cache-control')).toBe('public, max-age=31536000, immutable')
			expect(plain.headers.get('content-encoding')).toBeNull()
			const text = await plain.text()
			const gzipped = await t.app.handle(new Request(`http://localhost${path}`, { headers: { 'accept-encoding': 'gzip, deflate, br' } }))
			expect(gzipped.headers.get('content-encoding')).toBe('gzip')
			expect(gzipped.headers.get('vary')).toContain('Accept-Encoding')
			const bytes = new Uint8Array(await gzipped.arrayBuffer())
			expect(new TextDecoder().decode(Bun.gunzipSync(bytes))).toBe(text)
			compressed += bytes.byteLength
		}
		expect(compressed).toBeLessThan(300 * 1024)
	})

	test('an unknown asset is a 404 problem, and a POST to a console path is not served', async () => {
		const missing = await t.call('GET', '/console/assets/console-000000000000.js')
		expect(missing.status).toBe(404)
		expect(missing.headers.get('content-type')).toStartWith('application/problem+json')
		const posted = await t.call('POST', '/console', { json: {} })
		expect([404, 405]).toContain(posted.status)
	})
})

describe('CONSOLE_ENABLED=false', () => {
	let off: TestApp
	beforeAll(async () => {
		off = await startTestApp({ CONSOLE_ENABLED: 'false' })
	})
	afterAll(() => off.close())

	test('every console path is a 404, as an unknown route is — a browser’s page request too', async () => {
		const names = assetsOf((await t.call('GET', '/console', { headers: html })).text)
		for (const path of ['/console', '/console/', '/console/users', '/console/callback?code=x', ...names]) {
			for (const headers of [html, {}]) {
				const response = await off.call('GET', path, { headers })
				expect({ path, status: response.status }).toEqual({ path, status: 404 })
				expect(response.headers.get('content-type')).toStartWith('application/problem+json')
			}
		}
		// The rest is served as ever.
		expect((await off.call('GET', '/sign-in', { headers: html })).status).toBe(200)
	})
})
