import { enqueueMail, type MailTx } from './outbox'
import type { OutgoingMail } from './mailer'
import { mailLine } from './safe-text'
import type { MailKind, MailTemplates, MailView } from './templates'

/** A way into an account (API.md "Ways in"). */
export type WayIn = 'password' | 'email' | 'totp' | 'passkey' | 'identity' | 'recovery-codes'

export interface WayInChange {
	way: WayIn
	change: 'added' | 'removed' | 'changed'
	/** What names it for its owner: a factor's name, a provider's label, the new address… */
	label?: string
}

/** The client that made the change (a recovery: the one that spent the mail's proof). */
export interface NoticeClient {
	ip: string | null
	userAgent: string | null
}

export interface NoticeAccount {
	/** The account's address: the notice goes there (for an email change, the old address). */
	email: string
	name: string
}

const NOUN: Record<WayIn, string> = {
	password: 'password',
	email: 'email address',
	totp: 'authenticator app',
	passkey: 'passkey',
	identity: 'linked sign-in',
	'recovery-codes': 'set of recovery codes',
}

/** A label as a mail may show it: one line, short, never a link, in quotes. */
const quoted = (label: string | undefined) => {
	const line = label === undefined ? '' : mailLine(label, 100)
	return line === '' ? '' : ` “${line}”`
}

const article = (noun: string) => (/^[aeiou]/.test(noun) ? 'An' : 'A')

/** "A passkey “YubiKey” was added", "Your password was changed", … */
export function describeChange({ way, change, label }: WayInChange): string {
	const noun = NOUN[way]
	if (way === 'recovery-codes') return change === 'removed' ? 'Your recovery codes were removed' : 'New recovery codes were made (the old ones no longer work)'
	if (way === 'email' && change === 'changed') return label ? `Your email address was changed to${quoted(label)}` : 'Your email address was changed'
	if (way === 'password') return change === 'added' ? 'A password was set' : `Your password was ${change}`
	return `${article(noun)} ${noun}${quoted(label)} was ${change}`
}

/** A way that remains, for the recovery review: "passkey “YubiKey”", "password". */
const describeWay = ({ way, label }: { way: WayIn; label?: string }) => `${way === 'recovery-codes' ? 'recovery codes' : NOUN[way]}${quoted(label)}`

/** An address as `clientOf` gives it, or nothing: a notice shows no text a client sent in its place. */
const IP_ADDRESS = /^[0-9A-Fa-f.:]{2,45}$/

/** `2026-11-26 09:30:12 UTC`: the same for every reader, whatever their mail client's time zone. */
const timeOf = (at: Date) => `${at.toISOString().slice(0, 19).replace('T', ' ')} UTC`

/**
 * Notices to an account's address of every way in added, removed or changed, and after a recovery the
 * review of what it removed and what remains (API.md "Ways in"). Each is written to the outbox in the
 * caller's transaction, so it exists exactly when the change does. They carry no throttle key: the
 * resend limit (`MAIL_RESEND_SECONDS`) never holds one back, since a notice skipped is a change its
 * owner never hears of.
 */
export class WayInNotices {
	constructor(private readonly deps: { templates: MailTemplates; appName: string; recoveryUrl: string }) {}

	/** Queues, in the caller's transaction, one notice per change to the account's address. Never throttled. */
	async queue(tx: MailTx, account: NoticeAccount, changes: WayInChange[], client: NoticeClient, at = new Date()): Promise<void> {
		for (const change of changes) await this.send(tx, 'way-in-notice', account, client, at, { change: describeChange(change) })
	}

	/** After a recovery: what it removed and the ways in that remain. */
	async queueRecoveryReview(
		tx: MailTx,
		account: NoticeAccount,
		review: { removed: WayInChange[]; remaining: Array<{ way: WayIn; label?: string }> },
		client: NoticeClient,
		at = new Date(),
	): Promise<void> {
		await this.send(tx, 'recovery-review', account, client, at, {
			removed: review.removed.map(describeWay),
			removedAny: review.removed.length > 0,
			remaining: review.remaining.map(describeWay),
		})
	}

	private async send(tx: MailTx, kind: MailKind, account: NoticeAccount, client: NoticeClient, at: Date, view: Partial<MailView>) {
		const mail: OutgoingMail = {
			kind,
			to: account.email,
			...this.deps.templates.render(kind, {
				appName: this.deps.appName,
				email: account.email,
				name: account.name,
				link: this.deps.recoveryUrl,
				when: timeOf(at),
				clientIp: client.ip !== null && IP_ADDRESS.test(client.ip) ? client.ip : 'an unknown address',
				userAgent: client.userAgent === null || client.userAgent.trim() === '' ? 'an unknown client' : mailLine(client.userAgent, 200),
				...view,
			}),
		}
		await enqueueMail(tx, mail)
	}
}
