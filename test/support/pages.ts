import { expect } from 'bun:test'
import type { TestApp } from './app'
import { PASSWORD } from './fixtures'

/** One Set-Cookie value read back: its name, value and attributes (lower-cased names). */
export interface SetCookie {
	name: string
	value: string
	attributes: Record<string, string | true>
}

export function parseSetCookie(header: string): SetCookie {
	const [pair = '', ...rest] = header.split(';')
	const equals = pair.indexOf('=')
	const attributes: Record<string, string | true> = {}
	for (const part of rest) {
		const [key = '', ...value] = part.trim().split('=')
		attributes[key.toLowerCase()] = value.length ? value.join('=') : true
	}
	return { name: pair.slice(0, equals).trim(), value: pair.slice(equals + 1).trim(), attributes }
}

export interface PageResult {
	status: number
	headers: Headers
	html: string
	/** The cookies this response set (a removal too: Max-Age 0). */
	setCookies: SetCookie[]
	location: string | null
}

/**
 * A browser for the pages under `app.handle`: it keeps the cookies it is given, sends them back, sends the
 * headers a browser sends with a form (Sec-Fetch-Site, Origin) and reads the form token out of the page.
 */
export class PageBrowser {
	readonly cookies = new Map<string, string>()
	constructor(private readonly t: Pick<TestApp, 'app'>) {}

	async request(method: string, path: string, { form, headers = {} }: { form?: Record<string, string>; headers?: Record<string, string> } = {}): Promise<PageResult> {
		const init: RequestInit & { headers: Record<string, string> } = {
			method,
			headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8', 'sec-fetch-site': method === 'GET' ? 'none' : 'same-origin', ...headers },
			redirect: 'manual',
		}
		if (method === 'POST') init.headers.origin ??= 'http://localhost'
		if (headers.origin === '') delete init.headers.origin
		if (headers['sec-fetch-site'] === '') delete init.headers['sec-fetch-site']
		const jar = [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ')
		if (jar) init.headers.cookie = jar
		if (form) {
			init.body = new URLSearchParams(form).toString()
			init.headers['content-type'] = 'application/x-www-form-urlencoded'
		}
		const response = await this.t.app.handle(new Request(`http://localhost${path}`, init))
		const setCookies = response.headers.getSetCookie().map(parseSetCookie)
		for (const cookie of setCookies) {
			if (cookie.attributes['max-age'] === '0') this.cookies.delete(cookie.name)
			else this.cookies.set(cookie.name, cookie.value)
		}
		const html = await response.text()
		// Whatever happens, a page never shows a password, a hash or problem+json.
		expect(html).not.toMatch(/\$argon2|"type":\s*"https:\/\/latchkey\.dev\/problems/)
		return { status: response.status, headers: response.headers, html, setCookies, location: response.headers.get('location') }
	}

	get(path: string, headers?: Record<string, string>) {
		return this.request('GET', path, { headers })
	}

	post(path: string, form: Record<string, string>, headers?: Record<string, string>) {
		return this.request('POST', path, { form, headers })
	}

	/** A page's HTML with Mustache's character references read back (`&#x2F;` is `/`). */
	static decoded(html: string): string {
		const named: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"' }
		return html.replace(/&(#x[0-9a-f]+|#[0-9]+|amp|lt|gt|quot);/gi, (_, ref: string) =>
			ref.startsWith('#x') ? String.fromCodePoint(Number.parseInt(ref.slice(2), 16)) : ref.startsWith('#') ? String.fromCodePoint(Number(ref.slice(1))) : (named[ref] ?? ''),
		)
	}

	/** A hidden field's value in a page (`csrf`, `mfaToken`). */
	static field(html: string, name: string): string {
		const found = new RegExp(`name="${name}" value="([^"]*)"`).exec(html)
		if (!found?.[1]) throw new Error(`no ${name} field in the page`)
		return found[1]
	}

	/** Opens /sign-in (with `query`) and posts the email and password with the page's token. */
	async signIn(email: string, password = PASSWORD, query = ''): Promise<PageResult> {
		const form = await this.get(`/sign-in${query}`)
		expect(form.status).toBe(200)
		return this.post(`/sign-in${query}`, { csrf: PageBrowser.field(form.html, 'csrf'), email, password })
	}
}
