import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import Mustache from 'mustache'
import Negotiator from 'negotiator'
import linkTokenScript from './assets/link-token.page.js' with { type: 'text' }
import invitationScript from './assets/invitation.page.js' with { type: 'text' }
import passkeysScript from './assets/passkeys.page.js' with { type: 'text' }
import palette from './assets/palette.css' with { type: 'text' }
import pageStyles from './assets/styles.css' with { type: 'text' }

/** The pages' stylesheet as served: the palette the console shares, then the pages' own rules. */
const styles = `${palette}\n${pageStyles}`
import en from './locales/en.json'
import account from './templates/account.mustache' with { type: 'text' }
import accountApplications from './templates/account-applications.mustache' with { type: 'text' }
import accountCodes from './templates/account-codes.mustache' with { type: 'text' }
import accountConfirm from './templates/account-confirm.mustache' with { type: 'text' }
import accountDeactivation from './templates/account-deactivation.mustache' with { type: 'text' }
import accountIdentities from './templates/account-identities.mustache' with { type: 'text' }
import accountNav from './templates/account-nav.mustache' with { type: 'text' }
import accountPasskey from './templates/account-passkey.mustache' with { type: 'text' }
import accountSecurity from './templates/account-security.mustache' with { type: 'text' }
import accountSessions from './templates/account-sessions.mustache' with { type: 'text' }
import accountTotp from './templates/account-totp.mustache' with { type: 'text' }
import errorSummary from './templates/error-summary.mustache' with { type: 'text' }
import layout from './templates/layout.mustache' with { type: 'text' }
import problem from './templates/problem.mustache' with { type: 'text' }
import secondFactor from './templates/second-factor.mustache' with { type: 'text' }
import signIn from './templates/sign-in.mustache' with { type: 'text' }
import signOut from './templates/sign-out.mustache' with { type: 'text' }
import consent from './templates/consent.mustache' with { type: 'text' }
import emailCode from './templates/email-code.mustache' with { type: 'text' }
import deviceCode from './templates/device-code.mustache' with { type: 'text' }
import deviceConfirm from './templates/device-confirm.mustache' with { type: 'text' }
import message from './templates/message.mustache' with { type: 'text' }
import providerSignOut from './templates/provider-sign-out.mustache' with { type: 'text' }
import signUp from './templates/sign-up.mustache' with { type: 'text' }
import recovery from './templates/recovery.mustache' with { type: 'text' }
import passwordReset from './templates/password-reset.mustache' with { type: 'text' }
import emailVerification from './templates/email-verification.mustache' with { type: 'text' }
import invitation from './templates/invitation.mustache' with { type: 'text' }
import type { PageSettings } from './settings'

/*
 * The page layer: a page is a template, the data it shows, and the messages of one catalogue. Templates
 * are Mustache (escaping every value; the layout's `{{{content}}}`, the page rendered first, is the only
 * unescaped value), embedded in the binary as text the way the migrations are, and each may be replaced
 * by `PAGES_DIR/templates/<name>.mustache`. Every text comes from a catalogue: `en` built in, more (or
 * keys of `en` replaced) from `PAGES_DIR/locales/<lang>.json`. All of it is read once, at start.
 */

const BUILT_IN_TEMPLATES = {
	layout,
	'error-summary': errorSummary,
	'sign-in': signIn,
	'second-factor': secondFactor,
	'email-code': emailCode,
	account,
	'account-nav': accountNav,
	'account-security': accountSecurity,
	'account-totp': accountTotp,
	'account-passkey': accountPasskey,
	'account-codes': accountCodes,
	'account-identities': accountIdentities,
	'account-sessions': accountSessions,
	'account-applications': accountApplications,
	'account-confirm': accountConfirm,
	'account-deactivation': accountDeactivation,
	'sign-out': signOut,
	problem,
	consent,
	'device-code': deviceCode,
	'device-confirm': deviceConfirm,
	message,
	'provider-sign-out': providerSignOut,
	'sign-up': signUp,
	recovery,
	'password-reset': passwordReset,
	'email-verification': emailVerification,
	invitation,
}

/** The templates a page can be rendered from (and PAGES_DIR can replace); `layout` wraps each. */
export type TemplateName = keyof typeof BUILT_IN_TEMPLATES
export const TEMPLATE_NAMES = Object.keys(BUILT_IN_TEMPLATES) as TemplateName[]

/** A catalogue: nested objects whose leaves are the texts (Mustache, with `{{appName}}` and the placeholders a text names). */
export interface Catalogue {
	[key: string]: string | Catalogue
}

export const DEFAULT_LANGUAGE = 'en'
const LANGUAGE_TAG = /^[a-z]{2,3}(-[a-z0-9]{2,8})*$/

export class PageSetupError extends Error {}

/**
 * `default-src 'self'` and nothing inline; no `form-action`, which Chromium applies to the redirect after a
 * form's POST (to a client's redirect URI). The logo's origin may serve images.
 */
function contentSecurityPolicy(logoUrl: string | undefined): string {
	const logoOrigin = logoUrl && /^https?:/.test(logoUrl) ? ` ${new URL(logoUrl).origin}` : ''
	return [
		"default-src 'self'",
		"script-src 'self'",
		"style-src 'self'",
		`img-src 'self' data:${logoOrigin}`,
		"frame-ancestors 'none'",
		"base-uri 'none'",
		"object-src 'none'",
	].join('; ')
}

/**
 * The headers of every page: HTML under the policy above, never stored, never framed. The referrer policy
 * is `same-origin`, not the API's `no-referrer`: under `no-referrer` Chromium sends `Origin: null` with a
 * form's POST, and the pages could no longer tell their own forms from another site's.
 */
export const pageHeaders = (csp: string) => ({
	'content-type': 'text/html; charset=utf-8',
	'content-security-policy': csp,
	'cache-control': 'no-store',
	'referrer-policy': 'same-origin',
	'x-frame-options': 'DENY',
})

const isCatalogue = (value: unknown): value is Catalogue =>
	typeof value === 'object' && value !== null && !Array.isArray(value) && Object.values(value).every((leaf) => typeof leaf === 'string' || isCatalogue(leaf))

/** `over` laid on `base`: a language file need only carry the texts it changes. */
function merged(base: Catalogue, over: Catalogue): Catalogue {
	const result: Catalogue = { ...base }
	for (const [key, value] of Object.entries(over)) {
		const below = result[key]
		result[key] = typeof value === 'object' && typeof below === 'object' ? merged(below, value) : value
	}
	return result
}

/** Every text of a catalogue rendered with `view` (as plain text: the page template escapes it once). */
function rendered(catalogue: Catalogue, view: object): Catalogue {
	const result: Catalogue = {}
	for (const [key, value] of Object.entries(catalogue)) result[key] = typeof value === 'string' ? plainText(value, view) : rendered(value, view)
	return result
}

const plainText = (template: string, view: object) => Mustache.render(template, view, {}, { escape: (value: unknown) => String(value) })

/** The brand colour, if it is one CSS can only read as a colour (nothing that could end the rule). */
const CSS_COLOUR = /^(#[0-9a-f]{3,8}|[a-z]{3,30}|(rgb|rgba|hsl|hsla)\([0-9.,%\s/]+\))$/i

/** A #rgb or #rrggbb colour's channels, 0–255. */
function channels(hex: string): [number, number, number] | undefined {
	const digits = hex.slice(1)
	const full = digits.length === 3 ? [...digits].map((digit) => digit + digit).join('') : digits.length === 6 ? digits : undefined
	if (!full) return undefined
	return [0, 2, 4].map((start) => Number.parseInt(full.slice(start, start + 2), 16)) as [number, number, number]
}

/** WCAG relative luminance of sRGB channels. */
function luminance([r, g, b]: [number, number, number]) {
	const linear = (channel: number) => {
		const c = channel / 255
		return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4
	}
	return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)
}

const contrast = (a: number, b: number) => (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)

/**
 * /pages/theme.css: the brand colour as custom properties. For a hex colour, the text on it is black or white,
 * whichever reads better, and links and focus rings in the dark scheme use a lighter mix that stays readable.
 */
export function themeCss(brandColor: string | undefined): string {
	if (!brandColor || !CSS_COLOUR.test(brandColor.trim())) return '/* BRAND_COLOR unset: the built-in colours apply. */\n'
	const colour = brandColor.trim()
	const rgb = colour.startsWith('#') ? channels(colour) : undefined
	const lines = [`:root {`, `\t--brand: ${colour};`, `\t--link: ${colour};`, `\t--focus: ${colour};`]
	if (rgb) {
		const own = luminance(rgb)
		lines.push(`\t--on-brand: ${contrast(own, 1) >= contrast(own, 0) ? '#ffffff' : '#000000'};`)
	}
	lines.push('}')
	if (rgb) {
		// Links and focus rings on the dark card (#161b26): mixed with white until they read at 4.5:1.
		const card = luminance([0x16, 0x1b, 0x26])
		let mix = rgb
		for (let step = 0; step < 20 && contrast(luminance(mix), card) < 4.5; step++) mix = mix.map((c) => Math.round(c + (255 - c) * 0.15)) as [number, number, number]
		const light = `#${mix.map((c) => c.toString(16).padStart(2, '0')).join('')}`
		lines.push('@media (prefers-color-scheme: dark) {', '\t:root {', `\t\t--link: ${light};`, `\t\t--focus: ${light};`, '\t}', '}')
	}
	return `${lines.join('\n')}\n`
}

/** What a page shows, beyond the texts and the branding every page has. */
export type PageView = Record<string, unknown>

export interface PageOptions {
	status?: number
	/** Set-Cookie values. */
	cookies?: string[]
	/** The catalogue key of the page's title (`signIn.title`). */
	title: string
}

/**
 * Templates, catalogues, styles and the policy the pages are served under, read once at start from what is
 * built in and from PAGES_DIR; a broken template or catalogue stops the service then.
 */
export class PageRenderer {
	readonly styles: string
	/** /pages/passkeys.js: every page's passkey (sign-in, second factor, enrolment, "confirm it's you"; the policy admits no inline script). */
	readonly passkeysScript = passkeysScript
	/** /pages/link-token.js: puts a mail link's fragment token in the form of /password-reset and /email-verification. */
	readonly linkTokenScript = linkTokenScript
	readonly invitationScript = invitationScript
	readonly theme: string
	readonly csp: string
	private readonly templates: Record<TemplateName, string>
	/** Per language: the raw texts (for those with placeholders of their own) and the texts with `appName` filled in. */
	private readonly catalogues = new Map<string, { raw: Catalogue; texts: Catalogue }>()
	private readonly logoUrl: string | undefined

	constructor(private readonly settings: PageSettings) {
		const { dir } = settings
		if (dir !== undefined && !statSync(dir, { throwIfNoEntry: false })?.isDirectory()) throw new PageSetupError(`PAGES_DIR: ${dir} is not a folder`)
		this.templates = { ...BUILT_IN_TEMPLATES }
		for (const name of TEMPLATE_NAMES) {
			const file = dir === undefined ? undefined : join(dir, 'templates', `${name}.mustache`)
			if (file && existsSync(file)) this.templates[name] = readFileSync(file, 'utf8')
			try {
				Mustache.parse(this.templates[name])
			} catch (error) {
				throw new PageSetupError(`PAGES_DIR: ${file ?? name}: ${(error as Error).message}`)
			}
		}
		const builtIn = en as Catalogue
		const files = new Map<string, Catalogue>()
		const localesDir = dir === undefined ? undefined : join(dir, 'locales')
		if (localesDir && statSync(localesDir, { throwIfNoEntry: false })?.isDirectory())
			for (const entry of readdirSync(localesDir)) {
				if (!entry.endsWith('.json')) continue
				const language = entry.slice(0, -'.json'.length).toLowerCase()
				if (!LANGUAGE_TAG.test(language)) throw new PageSetupError(`PAGES_DIR: locales/${entry}: the name is not a language tag (en, de, pt-br)`)
				let parsed: unknown
				try {
					parsed = JSON.parse(readFileSync(join(localesDir, entry), 'utf8'))
				} catch (error) {
					throw new PageSetupError(`PAGES_DIR: locales/${entry}: ${(error as Error).message}`)
				}
				if (!isCatalogue(parsed)) throw new PageSetupError(`PAGES_DIR: locales/${entry}: must be a JSON object whose values are texts or objects of texts`)
				files.set(language, parsed)
			}
		const base = merged(builtIn, files.get(DEFAULT_LANGUAGE) ?? {})
		for (const [language, catalogue] of [[DEFAULT_LANGUAGE, base] as const, ...[...files].map(([language, file]) => [language, merged(base, file)] as const)]) {
			try {
				this.catalogues.set(language, { raw: catalogue, texts: rendered(catalogue, { appName: settings.appName }) })
			} catch (error) {
				throw new PageSetupError(`PAGES_DIR: locales/${language}.json: ${(error as Error).message}`)
			}
		}
		const extra = dir === undefined ? undefined : join(dir, 'styles.css')
		this.styles = extra && existsSync(extra) ? `${styles}\n/* PAGES_DIR/styles.css */\n${readFileSync(extra, 'utf8')}` : styles
		this.theme = themeCss(settings.brandColor)
		this.logoUrl = this.usableLogo(settings.brandLogoUrl)
		this.csp = contentSecurityPolicy(this.logoUrl)
	}

	private usableLogo(url: string | undefined) {
		if (!url) return undefined
		if (url.startsWith('/') && !url.startsWith('//')) return url
		try {
			return ['https:', 'http:'].includes(new URL(url).protocol) ? url : undefined
		} catch {
			return undefined
		}
	}

	/** The languages there are catalogues for. */
	get languages(): string[] {
		return [...this.catalogues.keys()]
	}

	/**
	 * The language of a request's page: the first of `ui_locales` (OpenID Connect's space-separated list)
	 * there is a catalogue for, else the best of Accept-Language, else `en`. A tag matches its catalogue or,
	 * failing that, its primary language's (`de-CH` → `de`).
	 */
	languageOf(request: Request): string {
		const available = (tag: string) => {
			const lower = tag.toLowerCase()
			if (this.catalogues.has(lower)) return lower
			const primary = lower.split('-')[0] ?? ''
			return this.catalogues.has(primary) ? primary : undefined
		}
		const asked = new URL(request.url).searchParams.get('ui_locales')
		for (const tag of (asked ?? '').split(' ').filter(Boolean).slice(0, 10)) {
			const found = available(tag)
			if (found) return found
		}
		const accept = request.headers.get('accept-language')
		if (accept)
			for (const tag of new Negotiator({ headers: { 'accept-language': accept } }).languages().slice(0, 20)) {
				const found = tag === '*' ? undefined : available(tag)
				if (found) return found
			}
		return DEFAULT_LANGUAGE
	}

	private catalogue(language: string) {
		return this.catalogues.get(language) ?? (this.catalogues.get(DEFAULT_LANGUAGE) as { raw: Catalogue; texts: Catalogue })
	}

	/** One text (`problem.login-locked`) with its placeholders filled in, as plain text; the key itself when no catalogue has it. */
	text(language: string, key: string, view: Record<string, unknown> = {}): string {
		const find = (catalogue: Catalogue) => key.split('.').reduce<string | Catalogue | undefined>((node, part) => (typeof node === 'object' ? node[part] : undefined), catalogue)
		const found = find(this.catalogue(language).raw) ?? find(this.catalogue(DEFAULT_LANGUAGE).raw)
		return typeof found === 'string' ? plainText(found, { appName: this.settings.appName, ...view }) : key
	}

	/** A wait in words: "45 seconds", "15 minutes". */
	wait(language: string, seconds: number): string {
		if (seconds <= 1) return this.text(language, 'wait.second')
		if (seconds < 90) return this.text(language, 'wait.seconds', { count: Math.ceil(seconds) })
		if (seconds < 120) return this.text(language, 'wait.minute')
		if (seconds < 3 * 3600) return this.text(language, 'wait.minutes', { count: Math.ceil(seconds / 60) })
		return this.text(language, 'wait.hours', { count: Math.ceil(seconds / 3600) })
	}

	/** A page: `name`'s template with `view` and the texts (`t`) of the request's language, in the layout. */
	page(request: Request, name: TemplateName, view: PageView, { status = 200, cookies = [], title }: PageOptions): Response {
		const language = this.languageOf(request)
		const { texts } = this.catalogue(language)
		const meta = texts.meta as Catalogue | undefined
		const common = { t: texts, appName: this.settings.appName, logoUrl: this.logoUrl, lang: language, dir: meta?.dir === 'rtl' ? 'rtl' : 'ltr' }
		const partials = { 'error-summary': this.templates['error-summary'], 'account-nav': this.templates['account-nav'] }
		const content = Mustache.render(this.templates[name], { ...common, ...view }, partials)
		// `wide`: a page with lists (the account's sections) gets a wider card.
		const html = Mustache.render(this.templates.layout, { ...common, title: this.text(language, title), content, wide: view.wide === true }, partials)
		const headers = new Headers(pageHeaders(this.csp))
		for (const cookie of cookies) headers.append('set-cookie', cookie)
		return new Response(html, { status, headers })
	}
}
