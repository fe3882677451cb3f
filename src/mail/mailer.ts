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
function smtpMailer(settings: Config['mail'], smtpUrl: string, log: Logger): Mailer {
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
	const smtp = describeTransport(transport.transporter)
	log.info({ smtp }, `mail goes over SMTP to ${smtp.host}:${smtp.port} (${smtp.tls}${smtp.auth ? ', with a login' : ''})`)
	return {
		available: true,
		async send(mail) {
			await transport.sendMail({ to: mail.to, subject: mail.subject, text: mail.text, html: mail.html })
		},
		close: () => transport.close(),
	}
}

type TlsMode = 'implicit TLS' | 'STARTTLS required' | 'STARTTLS if offered' | 'no TLS'

/**
 * The transport as nodemailer will use it (the URL's query options applied, its defaults for the port):
 * host, port, how TLS is used, whether certificates are checked, and whether it logs in — never who or how.
 */
function describeTransport(transporter: unknown): { host: string; port: number; tls: TlsMode; certificatesChecked: boolean; auth: boolean } {
	const { options = {} } = transporter as { options?: Record<string, unknown> }
	const { host, port, secure, requireTLS, ignoreTLS, auth, tls } = options as {
		host?: string
		port?: number
		secure?: boolean
		requireTLS?: boolean
		ignoreTLS?: boolean
		auth?: { user?: string; pass?: string }
		tls?: { rejectUnauthorized?: boolean }
	}
	// As nodemailer's SMTPConnection decides: 465 without `secure` set is implicit TLS, and requireTLS wins over ignoreTLS.
	const implicit = secure === true || (secure === undefined && Number(port) === 465)
	const tlsMode: TlsMode = implicit ? 'implicit TLS' : requireTLS ? 'STARTTLS required' : ignoreTLS ? 'no TLS' : 'STARTTLS if offered'
	return {
		host: host ?? 'localhost',
		port: Number(port) || (implicit ? 465 : 587),
		tls: tlsMode,
		certificatesChecked: tlsMode !== 'no TLS' && tls?.rejectUnauthorized !== false,
		auth: Boolean(auth?.user || auth?.pass),
	}
}

/** Development without SMTP: the whole mail (link and code included, as API.md says) goes to the log. */
function logMailer(log: Logger): Mailer {
	// Said at start, like the SMTP transport, so that nobody waits for a mail that only the log holds.
	log.info('mail is written to the log, not sent: no SMTP_URL (development); docs/mail.md shows a local SMTP sink')
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
	if (settings.smtpUrl !== undefined) return smtpMailer(settings, settings.smtpUrl, log)
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

/**
 * The codes of Node's TLS and socket errors, which nodemailer keeps as `originalCode` when it files the
 * error under its own (a certificate refused during STARTTLS is `ESOCKET` after `CONN`).
 */
const SOCKET_CAUSES: Record<string, string> = {
	CERT_HAS_EXPIRED: 'TLS: the server’s certificate has expired',
	CERT_NOT_YET_VALID: 'TLS: the server’s certificate is not valid yet',
	CERT_REVOKED: 'TLS: the server’s certificate is revoked',
	DEPTH_ZERO_SELF_SIGNED_CERT: 'TLS: the server’s certificate is self-signed and not trusted',
	SELF_SIGNED_CERT_IN_CHAIN: 'TLS: the server’s certificate chain ends in an untrusted self-signed certificate',
	UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'TLS: the server’s certificate is not trusted (unknown issuer)',
	UNABLE_TO_GET_ISSUER_CERT: 'TLS: the server’s certificate is not trusted (unknown issuer)',
	UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'TLS: the server’s certificate is not trusted (unknown issuer)',
	ERR_TLS_CERT_ALTNAME_INVALID: 'TLS: the server’s certificate does not name the host in SMTP_URL',
	HOSTNAME_MISMATCH: 'TLS: the server’s certificate does not name the host in SMTP_URL',
	ERR_SSL_WRONG_VERSION_NUMBER: 'TLS: handshake failed (a plain SMTP port given as smtps://?)',
	EPROTO: 'TLS: handshake failed (a plain SMTP port given as smtps://?)',
	ECONNREFUSED: 'connection refused',
	ECONNRESET: 'connection reset by the server',
	EPIPE: 'connection closed by the server',
	ENOTFOUND: 'host not found',
	EAI_AGAIN: 'host not found (DNS did not answer)',
	EHOSTUNREACH: 'host unreachable',
	ENETUNREACH: 'network unreachable',
	ETIMEDOUT: 'timed out',
}

/** nodemailer's own codes (its errors.js), read with the SMTP command that was in flight. */
function nodemailerCause(code: unknown, command: string | undefined, responseCode: number | undefined): string | undefined {
	const refusal = responseCode === undefined ? '' : responseCode >= 500 ? ' (for good)' : ' (for now)'
	switch (code) {
		case 'EAUTH':
			return 'authentication failed'
		case 'ENOAUTH':
			return 'authentication needed but SMTP_URL has no credentials'
		case 'ETLS':
			return command === 'STARTTLS' && responseCode !== undefined ? 'TLS: the server does not offer STARTTLS, which is required' : 'TLS: STARTTLS failed'
		case 'EREQUIRETLS':
			return 'TLS: the server does not support REQUIRETLS'
		case 'ETIMEDOUT':
			return command === 'CONN' ? 'timed out connecting or waiting for the greeting' : 'timed out waiting for the server'
		case 'EDNS':
			return 'host not found'
		case 'ECONNECTION':
			return 'connection closed by the server'
		case 'EPROTOCOL':
			return 'the server’s reply is not SMTP'
		case 'EENVELOPE':
			if (command?.startsWith('RCPT')) return `recipient rejected${refusal}`
			if (command?.startsWith('MAIL')) return `sender rejected${refusal}`
			return 'the envelope was refused'
		case 'EMESSAGE':
			return `message refused${refusal}`
		default:
			return responseCode === undefined ? undefined : `refused by the server${refusal}`
	}
}

/**
 * A short reading of a failed send for the job's log line: TLS (expired, untrusted, wrong host), refused,
 * timed out, authentication, a rejected recipient… Built from codes only: no server text, address or secret.
 */
export function sendFailureCause(error: unknown): string {
	const { code, originalCode, responseCode, command } = (error ?? {}) as { code?: unknown; originalCode?: unknown; responseCode?: unknown; command?: unknown }
	const socketCode = typeof originalCode === 'string' ? originalCode : undefined
	if (socketCode !== undefined && SOCKET_CAUSES[socketCode]) return SOCKET_CAUSES[socketCode]
	const cause = nodemailerCause(code, typeof command === 'string' ? command : undefined, typeof responseCode === 'number' ? responseCode : undefined)
	if (cause !== undefined) return cause
	if (typeof code === 'string' && SOCKET_CAUSES[code]) return SOCKET_CAUSES[code]
	// An error nodemailer did not file (or a code not known here): its code, which names no secret.
	return socketCode ?? (typeof code === 'string' ? code : 'unknown')
}

/** The job handler of the mail queue: one mail per job; a refusal or an outage is retried by the worker. */
export const sendMailJob = (mailer: Mailer) => async (payload: Record<string, unknown>) => {
	const { kind, to, subject, text, html } = payload as Partial<OutgoingMail>
	if (typeof to !== 'string' || typeof subject !== 'string' || typeof text !== 'string' || typeof html !== 'string' || typeof kind !== 'string')
		throw new PermanentJobError('unreadable mail')
	try {
		await mailer.send({ kind, to, subject, text, html })
	} catch (error) {
		throw new JobFailure(describeSendError(error), { cause: sendFailureCause(error) })
	}
}
