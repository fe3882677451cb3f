import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MAIL_KINDS, MailTemplates, TemplateError, type MailKind, type MailView } from '../src/mail/templates'
import { startTestApp } from './support/app'
import { signUp, uniqueEmail } from './support/fixtures'
import { proofOf, SmtpSink } from './support/mail'

setDefaultTimeout(60_000)

/** What mustache makes of a value in HTML (its escape table), to find a value in a rendered HTML part. */
const inHtml = (value: string) =>
	value.replace(/[&<>"'`=/]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '/': '&#x2F;', '`': '&#x60;', '=': '&#x3D;' })[c] as string)

const SCRIPT = '<script>alert(1)</script>'
const ZWSP = '\u200b'
/** A name as every mail shows it: a zero-width space after each `.`, `:`, `/` and `@`, so no client makes a link of it. */
const SHOWN = `<script>alert(1)</${ZWSP}script>`

const view = (fields: Partial<MailView> = {}): MailView => ({
	appName: 'Acme Vault',
	email: 'ada@example.test',
	name: 'Ada',
	link: 'https://app.example.test/reset-password#token=AbC-123_xyz',
	code: '042917',
	validFor: '1 hour',
	newEmail: 'ada.new@example.test',
	...fields,
})

/** A fresh folder of template files, removed after the file's tests. */
const folders: string[] = []
function templatesDir(files: Record<string, string>): string {
	const dir = mkdtempSync(join(tmpdir(), 'latchkey-templates-'))
	folders.push(dir)
	for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content)
	return dir
}
afterAll(() => {
	for (const dir of folders) rmSync(dir, { recursive: true, force: true })
})

describe('the built-in templates', () => {
	const templates = new MailTemplates()
	const withLink: MailKind[] = ['verification', 'recovery', 'email-change']

	for (const kind of withLink)
		test(`${kind}: the subject names the app; the text has the link on a line of its own and the code; the HTML has both, escaped`, () => {
			const v = view()
			const mail = templates.render(kind, v)
			expect(mail.subject).toContain('Acme Vault')
			expect(mail.subject).not.toMatch(/[\r\n]/)
			expect(mail.text.split('\n')).toContain(v.link as string)
			expect(mail.text).toContain(`Or enter this code: ${v.code}`)
			expect(mail.text).toContain('valid for 1 hour')
			expect(mail.text).toContain('Hello Ada,')
			expect(mail.text).toContain(v.email)
			expect(proofOf(mail)).toEqual({ link: v.link as string, token: 'AbC-123_xyz', code: '042917' })
			expect(mail.html).toStartWith('<!doctype html>')
			expect(mail.html).toContain(`<a href="${inHtml(v.link as string)}">`)
			expect(mail.html).toContain(`<strong style="font-size: 1.4em; letter-spacing: 0.15em">${v.code}</strong>`)
			expect(mail.html).toContain('Acme Vault')
			expect(mail.html).not.toContain('{{')
			expect(mail.text).not.toContain('{{')
		})

	test('the exact subjects of the built-in kinds', () => {
		expect(MAIL_KINDS.map((kind) => templates.render(kind, view({ change: 'A passkey was added', organizationName: 'Orbital' })).subject)).toEqual([
			'Confirm your email address for Acme Vault',
			'Reset your Acme Vault password',
			'Confirm your new email address for Acme Vault',
			'Your Acme Vault email address is being changed',
			'Your Acme Vault confirmation code',
			'Acme Vault: A passkey was added',
			'Your Acme Vault account was recovered: the ways in that remain',
			'Your Acme Vault sign-in code',
			'You are invited to join Orbital on Acme Vault',
		])
	})

	test('invitation: the organization, the roles, who invited, the link on a line of its own; names made one safe line', () => {
		const v = view({ name: '', organizationName: 'Orbital\nBcc: x', roles: 'admin, member', inviter: 'Grace <grace@example.test>', link: 'https://app.example.test/invitation#token=AbC-123_xyz', validFor: '168 hours' })
		const mail = templates.render('invitation', v)
		expect(mail.subject).toBe('You are invited to join Orbital Bcc: x on Acme Vault'.replace('Bcc:', `Bcc:${ZWSP}`))
		expect(mail.text).toStartWith('Hello,\n')
		expect(mail.text).toContain(`Grace <grace@${ZWSP}example.${ZWSP}test> invites ada@example.test to join the organization Orbital Bcc:${ZWSP} x on Acme Vault as admin, member.`)
		expect(mail.text.split('\n')).toContain(v.link as string)
		expect(mail.text).toContain('valid for 168 hours and works once, for this address only')
		expect(mail.html).toContain(`<a href="${inHtml(v.link as string)}">Accept the invitation</a>`)
		expect(mail.html).toContain('Grace &lt;grace@')
		expect(mail.html).not.toContain('{{')
	})

	test('sign-in carries the code in both parts, its lifetime, and no link', () => {
		const mail = templates.render('sign-in', view({ link: undefined, validFor: '10 minutes' }))
		expect(mail.text).toContain('\n042917\n')
		expect(mail.text).toContain('valid for 10 minutes and works once')
		expect(mail.html).toContain('<strong style="font-size: 1.4em; letter-spacing: 0.15em">042917</strong>')
		expect(mail.text).not.toContain('http')
		expect(mail.html).not.toContain('href')
	})

	test('email-change-notice names the new address and carries no link or code', () => {
		const mail = templates.render('email-change-notice', view({ link: undefined, code: undefined, validFor: undefined }))
		expect(mail.text).toContain('(ada@example.test) asked to change its email address to ada.new@example.test')
		expect(mail.html).toContain('ada.new@example.test')
		expect(() => proofOf(mail)).toThrow()
		expect(mail.text).not.toMatch(/\d{6}/)
	})

	test('without a name the greeting is a plain “Hello,”', () => {
		const mail = templates.render('recovery', view({ name: '' }))
		expect(mail.text).toStartWith('Hello,\n')
		expect(mail.html).toContain('<p>Hello,</p>')
	})

	test('a name is escaped in the HTML part and otherwise the same in the text part', () => {
		const mail = templates.render('verification', view({ name: SCRIPT }))
		expect(mail.html).not.toContain('<script>')
		expect(mail.html).toContain(`Hello ${inHtml(SHOWN)},`)
		expect(mail.html).toContain(`&lt;script&gt;alert(1)&lt;&#x2F;${ZWSP}script&gt;`)
		expect(mail.text).toContain(`Hello ${SHOWN},`)
	})

	test('a line break in a value never starts another header line of the subject', () => {
		const custom = new MailTemplates(templatesDir({ 'recovery.subject': 'Hi {{name}}, reset your {{appName}} password' }))
		const mail = custom.render('recovery', view({ name: 'Eve\r\nBcc: victim@example.test' }))
		expect(mail.subject).toBe(`Hi Eve Bcc:${ZWSP} victim@${ZWSP}example.${ZWSP}test, reset your Acme Vault password`)
	})
})

describe('MAIL_TEMPLATES_DIR', () => {
	test('a file <kind>.<part> replaces that part; values are escaped in its HTML and plain in its text; other parts stay built in', () => {
		const dir = templatesDir({
			'recovery.subject': '{{appName}}: new password for {{name}}',
			'recovery.text': 'Dear {{name}},\n{{link}}\ncode {{code}}\n',
			'recovery.html': '<p>Dear {{name}}</p><a href="{{link}}">go</a> <b>{{code}}</b>',
			'verification.html': '<p>Custom verification for {{email}}</p>',
		})
		const templates = new MailTemplates(dir)
		const recovery = templates.render('recovery', view({ name: SCRIPT }))
		expect(recovery).toEqual({
			subject: `Acme Vault: new password for ${SHOWN}`,
			text: `Dear ${SHOWN},\nhttps://app.example.test/reset-password#token=AbC-123_xyz\ncode 042917\n`,
			html: `<p>Dear ${inHtml(SHOWN)}</p><a href="${inHtml('https://app.example.test/reset-password#token=AbC-123_xyz')}">go</a> <b>042917</b>`,
		})
		const verification = templates.render('verification', view())
		expect(verification.html).toBe('<p>Custom verification for ada@example.test</p>')
		const notice = new MailTemplates(templatesDir({ 'way-in-notice.html': '<p>{{change}} at {{when}} from {{clientIp}}: <a href="{{link}}">recover</a></p>' }))
		expect(notice.render('way-in-notice', view({ change: 'A <passkey>', when: '2026-11-26 09:30:12 UTC', clientIp: '::1', link: 'https://app.example.test/recovery' })).html).toBe(
			'<p>A &lt;passkey&gt; at 2026-11-26 09:30:12 UTC from ::1: <a href="https:&#x2F;&#x2F;app.example.test&#x2F;recovery">recover</a></p>',
		)
		expect(verification.subject).toBe('Confirm your email address for Acme Vault')
		expect(verification.text).toContain('Or enter this code: 042917')
		expect(templates.render('email-change', view())).toEqual(new MailTemplates().render('email-change', view()))
	})

	test('files that name no kind or part are ignored', () => {
		const templates = new MailTemplates(templatesDir({ 'README.md': '{{#broken', 'recovery.txt': '{{#broken', 'reset.html': 'x' }))
		expect(templates.render('recovery', view())).toEqual(new MailTemplates().render('recovery', view()))
	})

	for (const [file, content] of [
		['recovery.text', 'Hello {{#name}}{{name}}\n'],
		['verification.html', '<p>{{/link}}</p>'],
		['email-change-notice.subject', '{{appName'],
		['way-in-notice.text', '{{#change}}'],
		['recovery-review.html', '{{#remaining}}<li>{{.}}</li>'],
	] as const)
		test(`a broken template (${file}) throws TemplateError at construction, naming the file`, () => {
			const dir = templatesDir({ [file]: content })
			expect(() => new MailTemplates(dir)).toThrow(TemplateError)
			expect(() => new MailTemplates(dir)).toThrow(join(dir, file))
		})

	test('a folder that does not exist, or a file in its place, is a TemplateError', () => {
		const missing = join(tmpdir(), `latchkey-no-such-${crypto.randomUUID()}`)
		expect(() => new MailTemplates(missing)).toThrow(new TemplateError(`MAIL_TEMPLATES_DIR: ${missing} is not a folder`))
		const file = join(templatesDir({ 'recovery.text': 'x' }), 'recovery.text')
		expect(() => new MailTemplates(file)).toThrow(TemplateError)
	})
})

describe('the service with MAIL_TEMPLATES_DIR', () => {
	let sink: SmtpSink
	beforeAll(async () => {
		sink = await SmtpSink.start()
	})
	afterAll(() => sink.stop())

	test('a recovery mail received over SMTP is rendered from the override, with the user’s name escaped only in its HTML', async () => {
		const dir = templatesDir({
			'recovery.subject': '[{{appName}}] Password help',
			'recovery.text': 'Hi {{name}},\n\n{{link}}\n\nCode: {{code}} (valid {{validFor}})\n',
			'recovery.html': '<html><body><p>Hi {{name}}</p><p><a href="{{link}}">Reset</a></p><p>Code: {{code}}</p></body></html>',
		})
		const t = await startTestApp({
			SMTP_URL: sink.url,
			MAIL_TEMPLATES_DIR: dir,
			APP_NAME: 'Acme Vault',
			APP_URL: 'https://app.example.test',
			EMAIL_VERIFICATION: 'off',
		})
		try {
			const user = await signUp(t, { email: uniqueEmail('templated'), name: SCRIPT })
			expect((await t.call('POST', '/api/auth/recovery-requests', { json: { email: user.email } })).status).toBe(202)
			const mail = await sink.waitFor(user.email, { subject: 'Password help' })
			expect(mail.subject).toBe('[Acme Vault] Password help')
			const { link, code } = proofOf(mail)
			expect(link).toStartWith('https://app.example.test/reset-password#token=')
			expect(mail.text.trim()).toBe(`Hi ${SHOWN},\n\n${link}\n\nCode: ${code} (valid 1 hour)`)
			expect(mail.html).toContain(`<p>Hi ${inHtml(SHOWN)}</p>`)
			expect(mail.html).not.toContain('<script>')
			expect(mail.html).toContain(`<a href="${inHtml(link)}">Reset</a>`)
			expect(mail.html).toContain(`<p>Code: ${code}</p>`)
			const reset = await t.call('POST', '/api/auth/password-resets', { json: { email: user.email, code, password: 'a brand new passphrase' } })
			expect(reset.status).toBe(200)
		} finally {
			await t.close()
		}
	})
})

describe('the account name in mail: one line, no control characters, at most 100 characters, never a link', () => {
	const templates = new MailTemplates()
	const greeting = (text: string) => text.split('\n')[0]

	test('line breaks of every kind and control characters become single spaces; bidi and zero-width characters go', () => {
		const name = 'Ada\r\nBcc: x\n\nLovelace\u2028Line\u2029Para\tTab\u0000Nul\u0085Nel\u202Eevil\u2066iso\u2069\u200bzw\u00adsoft'
		for (const kind of MAIL_KINDS) {
			const mail = templates.render(kind, view({ name, change: 'A passkey was added' }))
			expect(greeting(mail.text)).toBe(`Hello Ada Bcc:${ZWSP} x Lovelace Line Para Tab Nul Nelevilisozwsoft,`)
			expect(mail.html).toContain(`<p>Hello Ada Bcc:${ZWSP} x Lovelace Line Para Tab Nul Nelevilisozwsoft,</p>`)
		}
	})

	test('joiners that scripts and emoji need stay', () => {
		const name = 'می\u200cخواهم 👩\u200d💻'
		expect(greeting(templates.render('recovery', view({ name })).text)).toBe(`Hello ${name},`)
	})

	test('a 300-character name is cut to its first 100 characters (code points, never half of one)', () => {
		const name = `${'😀'.repeat(99)}${'b'.repeat(201)}`
		const mail = templates.render('recovery', view({ name }))
		expect(greeting(mail.text)).toBe(`Hello ${'😀'.repeat(99)}b,`)
		expect(mail.html).toContain(`<p>Hello ${'😀'.repeat(99)}b,</p>`)
	})

	test('a URL or an address in a name is broken by zero-width spaces, in the text, the HTML and the subject', () => {
		const name = 'Visit https://evil.example/login or www.evil.example, mail help@evil.example'
		const custom = new MailTemplates(templatesDir({ 'recovery.subject': 'Hi {{name}}' }))
		const mail = custom.render('recovery', view({ name }))
		const shown = `Visit https:${ZWSP}/${ZWSP}/${ZWSP}evil.${ZWSP}example/${ZWSP}login or www.${ZWSP}evil.${ZWSP}example, mail help@${ZWSP}evil.${ZWSP}example`
		expect(greeting(mail.text)).toBe(`Hello ${shown},`)
		expect(mail.subject).toBe(`Hi ${shown}`)
		for (const part of [mail.text, mail.html, mail.subject]) expect(part).not.toMatch(/evil\.example|https?:\/\/evil|https?:&#x2F;&#x2F;evil/)
	})

	test('a name of nothing but spaces and controls greets as no name', () => {
		expect(templates.render('recovery', view({ name: ' \n\u2028\u202E ' })).text).toStartWith('Hello,\n')
	})
})
