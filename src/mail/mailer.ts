import nodemailer from 'nodemailer'
import type { Config } from '../config/env'
import type { Logger } from '../log'
import { JobFailure, PermanentJobError } from '../jobs/handler'
import type { MailKind, RenderedMail } from './templates'

/** A mail as it waits in the outbox (a job's payload) and goes out. */
export interface OutgoingMail extends RenderedMail {
	kind: MailKind
	to: string
}

export interface Mailer {
	/** False in production without SMTP_URL: routes that would send answer 503 mail-unavailable. */
	readonly available: boolean
	/** Resolves once the SMTP server accepted the mail; throws (and the job is retried) otherwise. */
	send(mail: OutgoingMail): Promise<void>
	close(): void
}

/**
 * nodemailer over SMTP_URL. `smtp://` upgrades with STARTTLS, and requires it when the URL carries
 * credentials (a password never crosses the network in clear; `?requireTLS=false` in the URL says
 * otherwise); `smtps://` is TLS from the first byte. A pool of a few connections is kept open, and
 * every wait is bounded so that a stuck server fails a send (the worker renews the job's lease meanwhile).
 */
function smtpMailer(settings: Config['mail'], smtpUrl: string): Mailer {
	const url = new URL(smtpUrl)
	const transport = nodemailer.createTransport(
		{
			url: smtpUrl,
			pool: true,
			maxConnections: 4,
			requireTLS: url.protocol === 'smtp:' && (url.username !== '' || url.password !== ''),
			connectionTimeout: 10_000,
			greetingTimeout: 10_000,
			socketTimeout: 30_000,
			// nodemailer's own logger is off: its lines would carry addresses and SMTP dialogue.
			logger: false,
		},
		{ from: settings.from },
	)
	return {
		available: true,
		async send(mail) {
			await transport.sendMail({ to: mail.to, subject: mail.subject, text: mail.text, html: mail.html })
		},
		close: () => transport.close(),
	}
}

/** Development without SMTP: the whole mail (link and code included, as API.md says) goes to the log. */
function logMailer(log: Logger): Mailer {
	return {
		available: true,
		async send(mail) {
			log.info({ mail: { kind: mail.kind, to: mail.to, subject: mail.subject, text: mail.text } }, 'mail written to the log (no SMTP_URL)')
		},
		close: () => {},
	}
}

const unavailableMailer: Mailer = {
	available: false,
	async send() {
		throw new Error('no SMTP_URL: mail cannot be sent')
	},
	close: () => {},
}

export function createMailer(settings: Config['mail'], log: Logger): Mailer {
	if (settings.smtpUrl !== undefined) return smtpMailer(settings, settings.smtpUrl)
	return settings.toLog ? logMailer(log) : unavailableMailer
}

/** What of a failed send may be kept and logged: the SMTP reply code and command, never the dialogue or an address. */
export function describeSendError(error: unknown): string {
	const { code, responseCode, command } = (error ?? {}) as { code?: unknown; responseCode?: unknown; command?: unknown }
	const parts = [typeof code === 'string' ? code : 'error']
	if (typeof responseCode === 'number') parts.push(`SMTP ${responseCode}`)
	if (typeof command === 'string') parts.push(`after ${command.split(' ')[0]}`)
	return parts.join(' ')
}

/** The job handler of the mail queue: one mail per job; a refusal or an outage is retried by the worker. */
export const sendMailJob = (mailer: Mailer) => async (payload: Record<string, unknown>) => {
	const { kind, to, subject, text, html } = payload as Partial<OutgoingMail>
	if (typeof to !== 'string' || typeof subject !== 'string' || typeof text !== 'string' || typeof html !== 'string' || typeof kind !== 'string')
		throw new PermanentJobError('unreadable mail')
	try {
		await mailer.send({ kind, to, subject, text, html })
	} catch (error) {
		throw new JobFailure(describeSendError(error))
	}
}
