import { existsSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import Mustache from 'mustache'
import { mailLine } from './safe-text'

/** The mails the service sends; each has a subject, a plain-text and an HTML template. */
export const MAIL_KINDS = ['verification', 'recovery', 'email-change', 'email-change-notice', 'reauthentication', 'way-in-notice', 'recovery-review', 'sign-in', 'invitation'] as const
export type MailKind = (typeof MAIL_KINDS)[number]

const PARTS = ['subject', 'text', 'html'] as const
type Part = (typeof PARTS)[number]

/** What every template may use. Values are escaped in HTML; subject and text take them as they are. */
export interface MailView {
	appName: string
	/** The address the mail goes to. */
	email: string
	name: string
	/** The frontend page with the token in its fragment (verification, recovery, email change). */
	link?: string
	/** The 6-digit code, for typing in instead of following the link. */
	code?: string
	/** How long the link and code stay valid, in words ("1 hour"). */
	validFor?: string
	/** For the change notice: the address the account is moving to. */
	newEmail?: string
	/** Way-in notice: what happened, as a sentence without its full stop ("A passkey “YubiKey” was added"). */
	change?: string
	/** Way-in notice and recovery review: when (`2026-11-26 09:30:12 UTC`) and from which client. */
	when?: string
	clientIp?: string
	userAgent?: string
	/** Recovery review: the ways in the recovery removed (maybe none, then `removedAny` is false) and those that remain. */
	removed?: string[]
	removedAny?: boolean
	remaining?: string[]
	/** Invitation: the organization, the roles it offers ("admin, member"), and who invited (their name, or their address). */
	organizationName?: string
	roles?: string
	inviter?: string
}

export interface RenderedMail {
	subject: string
	text: string
	html: string
}

const htmlPage = (body: string) => `<!doctype html>
<html><body style="font-family: sans-serif; line-height: 1.5; color: #222; max-width: 36em">
${body}
<p style="color: #777; font-size: 0.9em">{{appName}}</p>
</body></html>
`

const codeBlock = `<p>Or enter this code: <strong style="font-size: 1.4em; letter-spacing: 0.15em">{{code}}</strong></p>
<p>The link and the code are valid for {{validFor}} and work once.</p>`

const recoveryLinkText = `If this was not you, someone may have your password or your mailbox: recover your account at once here (the link is the same in every notice):

{{link}}
`

const BUILT_IN: Record<MailKind, Record<Part, string>> = {
	verification: {
		subject: 'Confirm your email address for {{appName}}',
		text: `Hello{{#name}} {{name}}{{/name}},

please confirm that {{email}} is your email address by opening this link:

{{link}}

Or enter this code: {{code}}

The link and the code are valid for {{validFor}} and work once. If you did not sign up for {{appName}}, ignore this mail.
`,
		html: htmlPage(`<p>Hello{{#name}} {{name}}{{/name}},</p>
<p>please confirm that {{email}} is your email address:</p>
<p><a href="{{link}}">Confirm my email address</a></p>
${codeBlock}
<p>If you did not sign up for {{appName}}, ignore this mail.</p>`),
	},
	recovery: {
		subject: 'Reset your {{appName}} password',
		text: `Hello{{#name}} {{name}}{{/name}},

someone (we hope you) asked to reset the password of the {{appName}} account {{email}}. Choose a new password here:

{{link}}

Or enter this code: {{code}}

The link and the code are valid for {{validFor}} and work once. If you did not ask for this, ignore this mail: your password stays as it is.
`,
		html: htmlPage(`<p>Hello{{#name}} {{name}}{{/name}},</p>
<p>someone (we hope you) asked to reset the password of the {{appName}} account {{email}}.</p>
<p><a href="{{link}}">Choose a new password</a></p>
${codeBlock}
<p>If you did not ask for this, ignore this mail: your password stays as it is.</p>`),
	},
	'email-change': {
		subject: 'Confirm your new email address for {{appName}}',
		text: `Hello{{#name}} {{name}}{{/name}},

please confirm that {{email}} is the new email address of your {{appName}} account by opening this link:

{{link}}

Or enter this code: {{code}}

The link and the code are valid for {{validFor}} and work once. Until then the account keeps its old address. If you did not ask for this, ignore this mail.
`,
		html: htmlPage(`<p>Hello{{#name}} {{name}}{{/name}},</p>
<p>please confirm that {{email}} is the new email address of your {{appName}} account:</p>
<p><a href="{{link}}">Confirm my new email address</a></p>
${codeBlock}
<p>Until then the account keeps its old address. If you did not ask for this, ignore this mail.</p>`),
	},
	'email-change-notice': {
		subject: 'Your {{appName}} email address is being changed',
		text: `Hello{{#name}} {{name}}{{/name}},

someone signed in to your {{appName}} account ({{email}}) asked to change its email address to {{newEmail}}. The change happens once the new address confirms it.

If this was not you, reset your password at once: recovery cancels the change.
`,
		html: htmlPage(`<p>Hello{{#name}} {{name}}{{/name}},</p>
<p>someone signed in to your {{appName}} account ({{email}}) asked to change its email address to {{newEmail}}. The change happens once the new address confirms it.</p>
<p>If this was not you, reset your password at once: recovery cancels the change.</p>`),
	},
	reauthentication: {
		subject: 'Your {{appName}} confirmation code',
		text: `Hello{{#name}} {{name}}{{/name}},

to confirm that it is you making a change to your {{appName}} account ({{email}}), enter this code:

{{code}}

It is valid for {{validFor}} and works once. If you did not ask for it, someone may be signed in to your account: reset your password.
`,
		html: htmlPage(`<p>Hello{{#name}} {{name}}{{/name}},</p>
<p>to confirm that it is you making a change to your {{appName}} account ({{email}}), enter this code:</p>
<p><strong style="font-size: 1.4em; letter-spacing: 0.15em">{{code}}</strong></p>
<p>It is valid for {{validFor}} and works once. If you did not ask for it, someone may be signed in to your account: reset your password.</p>`),
	},
	'way-in-notice': {
		subject: '{{appName}}: {{change}}',
		text: `Hello{{#name}} {{name}}{{/name}},

{{change}} on your {{appName}} account {{email}}.

When: {{when}}
From: {{clientIp}}, {{userAgent}}

If this was you, there is nothing to do. ${recoveryLinkText}`,
		html: htmlPage(`<p>Hello{{#name}} {{name}}{{/name}},</p>
<p>{{change}} on your {{appName}} account {{email}}.</p>
<p>When: {{when}}<br>From: {{clientIp}}, {{userAgent}}</p>
<p>If this was you, there is nothing to do. If this was not you, someone may have your password or your mailbox: <a href="{{link}}">recover your account at once</a>.</p>`),
	},
	'recovery-review': {
		subject: 'Your {{appName}} account was recovered: the ways in that remain',
		text: `Hello{{#name}} {{name}}{{/name}},

your {{appName}} account {{email}} was recovered by mail. Every session was signed out.

When: {{when}}
From: {{clientIp}}, {{userAgent}}

{{#removedAny}}
Ways in added recently without a second factor were removed:
{{#removed}}
- {{.}}
{{/removed}}

{{/removedAny}}
The ways into your account now:
{{#remaining}}
- {{.}}
{{/remaining}}

If this was you, check that each of them is yours. ${recoveryLinkText}`,
		html: htmlPage(`<p>Hello{{#name}} {{name}}{{/name}},</p>
<p>your {{appName}} account {{email}} was recovered by mail. Every session was signed out.</p>
<p>When: {{when}}<br>From: {{clientIp}}, {{userAgent}}</p>
{{#removedAny}}
<p>Ways in added recently without a second factor were removed:</p>
<ul>{{#removed}}<li>{{.}}</li>{{/removed}}</ul>
{{/removedAny}}
<p>The ways into your account now:</p>
<ul>{{#remaining}}<li>{{.}}</li>{{/remaining}}</ul>
<p>If this was you, check that each of them is yours. If this was not you, someone may have your password or your mailbox: <a href="{{link}}">recover your account at once</a>.</p>`),
	},
	invitation: {
		subject: 'You are invited to join {{organizationName}} on {{appName}}',
		text: `Hello{{#name}} {{name}}{{/name}},

{{inviter}} invites {{email}} to join the organization {{organizationName}} on {{appName}}{{#roles}} as {{roles}}{{/roles}}. Accept here (sign in, or create an account with this address, first):

{{link}}

The invitation is valid for {{validFor}} and works once, for this address only. If you do not expect it, ignore this mail.
`,
		html: htmlPage(`<p>Hello{{#name}} {{name}}{{/name}},</p>
<p>{{inviter}} invites {{email}} to join the organization {{organizationName}} on {{appName}}{{#roles}} as {{roles}}{{/roles}}.</p>
<p><a href="{{link}}">Accept the invitation</a></p>
<p>Sign in, or create an account with this address, first. The invitation is valid for {{validFor}} and works once, for this address only. If you do not expect it, ignore this mail.</p>`),
	},
	'sign-in': {
		subject: 'Your {{appName}} sign-in code',
		text: `Hello{{#name}} {{name}}{{/name}},

to sign in to your {{appName}} account ({{email}}), enter this code:

{{code}}

It is valid for {{validFor}} and works once. Never give it to anyone: whoever has it can sign in as you. If you did not ask for it, ignore this mail; no one can sign in without the code.
`,
		html: htmlPage(`<p>Hello{{#name}} {{name}}{{/name}},</p>
<p>to sign in to your {{appName}} account ({{email}}), enter this code:</p>
<p><strong style="font-size: 1.4em; letter-spacing: 0.15em">{{code}}</strong></p>
<p>It is valid for {{validFor}} and works once. Never give it to anyone: whoever has it can sign in as you. If you did not ask for it, ignore this mail; no one can sign in without the code.</p>`),
	},
}

export class TemplateError extends Error {}

/**
 * The built-in templates, each replaced by a file `<kind>.<part>` (for example `recovery.html`) where
 * MAIL_TEMPLATES_DIR has one. Mustache: `{{value}}` is HTML-escaped in the HTML part; subject and text
 * are plain text and take values as they are. Every template is parsed at start, so a broken file stops
 * the service then rather than a mail later.
 */
export class MailTemplates {
	private readonly templates: Record<MailKind, Record<Part, string>>

	constructor(templatesDir?: string) {
		this.templates = structuredClone(BUILT_IN)
		if (templatesDir !== undefined && !statSync(templatesDir, { throwIfNoEntry: false })?.isDirectory())
			throw new TemplateError(`MAIL_TEMPLATES_DIR: ${templatesDir} is not a folder`)
		for (const kind of MAIL_KINDS)
			for (const part of PARTS) {
				if (templatesDir === undefined) continue
				const file = join(templatesDir, `${kind}.${part}`)
				if (existsSync(file)) this.templates[kind][part] = readFileSync(file, 'utf8')
				try {
					Mustache.parse(this.templates[kind][part])
				} catch (error) {
					throw new TemplateError(`MAIL_TEMPLATES_DIR: ${file}: ${(error as Error).message}`)
				}
			}
	}

	/**
	 * The account's name is what anyone may type at sign-up, and a mail goes wherever its address says: every
	 * kind, built in or overridden, gets it as `mailLine` makes it (one line, no control characters, at most
	 * 100 characters, never a link).
	 */
	render(kind: MailKind, given: MailView): RenderedMail {
		const view = {
			...given,
			name: mailLine(given.name),
			...(given.organizationName === undefined ? {} : { organizationName: mailLine(given.organizationName) }),
			...(given.inviter === undefined ? {} : { inviter: mailLine(given.inviter) }),
		}
		const plain = { escape: (value: unknown) => String(value) }
		const { subject, text, html } = this.templates[kind]
		return {
			// A header is one line: a line break in a name must not start another header.
			subject: Mustache.render(subject, view, {}, plain).replace(/[\r\n]+/g, ' ').trim(),
			text: Mustache.render(text, view, {}, plain),
			html: Mustache.render(html, view),
		}
	}
}
