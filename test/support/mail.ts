import { asc, count, eq } from 'drizzle-orm'
import { simpleParser } from 'mailparser'
import type { AddressInfo } from 'node:net'
import { SMTPServer } from 'smtp-server'
import { jobs, type JobRow } from '../../src/db/schema'
import type { MailKind } from '../../src/mail/templates'
import { mailThrottleKey } from '../../src/modules/email/tokens'
import { startTestApp, type TestApp } from './app'
import type { TestDatabase } from './database'
import { login, signUp, type Account } from './fixtures'

/** A mail as the SMTP server received it, parsed by mailparser. */
export interface ReceivedMail {
	to: string
	from: string
	subject: string
	text: string
	html: string
	/** Whether the session was TLS when the mail was sent (STARTTLS or implicit TLS). */
	secure: boolean
	/** The SMTP AUTH user of the session, if it logged in. */
	user: string | undefined
}

export interface SmtpSinkOptions {
	/** Implicit TLS (smtps://) rather than plain with STARTTLS offered. */
	secure?: boolean
	/** Require AUTH with these credentials. */
	credentials?: { user: string; pass: string }
	/** Whether STARTTLS works on a plain connection (default true); without it the command is refused and AUTH in clear accepted, as a careless server would. */
	startTls?: boolean
	/** The server's certificate and key (PEM) instead of smtp-server's own. */
	certificate?: { key: string; cert: string }
}

/**
 * A real SMTP server (the `smtp-server` package) on a loopback port, for tests: it keeps what it
 * receives, and can be told to refuse mail (4xx/5xx), to take its time, or to go down and come back.
 */
export class SmtpSink {
	readonly mails: ReceivedMail[] = []
	/** Every AUTH attempt the server saw, right or wrong, and whether its session was TLS then. */
	readonly logins: Array<{ user: string; secure: boolean }> = []
	/** An SMTP reply code to refuse each mail with, while set. */
	refuseWith: number | undefined
	/** Time taken before accepting each mail. */
	delayMs = 0
	private server!: SMTPServer
	port = 0

	private constructor(private readonly options: SmtpSinkOptions) {}

	static async start(options: SmtpSinkOptions = {}, port = 0): Promise<SmtpSink> {
		const sink = new SmtpSink(options)
		await sink.listen(port)
		return sink
	}

	/** SMTP_URL for the service: trusts the server's self-signed certificate (smtp-server's own test one). */
	get url(): string {
		const scheme = this.options.secure ? 'smtps' : 'smtp'
		const auth = this.options.credentials ? `${this.options.credentials.user}:${this.options.credentials.pass}@` : ''
		return `${scheme}://${auth}127.0.0.1:${this.port}?tls.rejectUnauthorized=false`
	}

	private listen(port: number) {
		const { credentials, secure = false, startTls = true, certificate } = this.options
		this.server = new SMTPServer({
			secure,
			...certificate,
			allowInsecureAuth: !startTls,
			logger: false,
			// The service keeps a pool of connections open; closing waits for them no longer than this.
			closeTimeout: 200,
			// No reverse DNS lookup of each client: the tests have no DNS to ask, and it delays every greeting.
			disableReverseLookup: true,
			authOptional: credentials === undefined,
			disabledCommands: [...(credentials ? [] : ['AUTH']), ...(startTls ? [] : ['STARTTLS'])],
			onAuth: (auth, session, callback) => {
				this.logins.push({ user: auth.username ?? '', secure: session.secure })
				if (credentials && auth.username === credentials.user && auth.password === credentials.pass) return callback(null, { user: auth.username })
				callback(new Error('invalid credentials'))
			},
			onData: (stream, session, callback) => {
				const refusal = this.refuseWith
				simpleParser(stream)
					.then(async (parsed) => {
						if (this.delayMs > 0) await Bun.sleep(this.delayMs)
						if (refusal !== undefined) return callback(Object.assign(new Error('not now'), { responseCode: refusal }))
						this.mails.push({
							to: parsed.to && !Array.isArray(parsed.to) ? parsed.to.text : '',
							from: parsed.from?.text ?? '',
							subject: parsed.subject ?? '',
							text: parsed.text ?? '',
							html: typeof parsed.html === 'string' ? parsed.html : '',
							secure: session.secure,
							user: typeof session.user === 'string' ? session.user : undefined,
						})
						callback()
					})
					.catch((error: Error) => callback(error))
			},
		})
		return new Promise<void>((resolve, reject) => {
			this.server.once('error', reject)
			this.server.listen(port, '127.0.0.1', () => {
				this.port = (this.server.server.address() as AddressInfo).port
				resolve()
			})
		})
	}

	/** Stops listening: connections are refused until `restart`. */
	stop(): Promise<void> {
		return new Promise((resolve) => this.server.close(() => resolve()))
	}

	/** Listens again on the same port. */
	restart(): Promise<void> {
		return this.listen(this.port)
	}

	/** Mails to an address (as received so far), of one kind if `subject` is given (a word of its subject). */
	to(address: string, subject?: string): ReceivedMail[] {
		return this.mails.filter(
			(mail) => mail.to.toLowerCase().includes(address.toLowerCase()) && (subject === undefined || mail.subject.includes(subject)),
		)
	}

	/** Waits until `count` such mails have arrived; returns the `count`-th. */
	async waitFor(address: string, { subject, count = 1, timeoutMs = 15_000 }: { subject?: string; count?: number; timeoutMs?: number } = {}) {
		const deadline = Date.now() + timeoutMs
		while (this.to(address, subject).length < count) {
			if (Date.now() > deadline) throw new Error(`no mail #${count} to ${address} within ${timeoutMs} ms (have ${this.to(address, subject).length})`)
			await Bun.sleep(20)
		}
		return this.to(address, subject)[count - 1] as ReceivedMail
	}
}

/** Words of the built-in subjects, to tell the kinds of mail apart. */
export const SUBJECT = { verification: 'Confirm your email', recovery: 'Reset your', change: 'Confirm your new email', notice: 'is being changed' } as const

/** The link's token and the code, read out of a mail's plain-text part. */
export function proofOf(mail: { text: string }): { link: string; token: string; code: string } {
	const link = /^(https?:\/\/\S+#token=[A-Za-z0-9_-]+)$/m.exec(mail.text)?.[1]
	const code = /\b(\d{6})\b/.exec(mail.text)?.[1]
	if (!link || !code) throw new Error(`no link or code in mail:\n${mail.text}`)
	return { link, token: link.slice(link.indexOf('#token=') + 7), code }
}

/** A mail the service wrote to its log (development and tests without SMTP_URL), waited for. */
export async function loggedMail(
	app: { logs: string[] },
	to: string,
	timeoutMs = 10_000,
	kind?: string,
): Promise<{ kind: string; to: string; subject: string; text: string }> {
	const deadline = Date.now() + timeoutMs
	for (;;) {
		for (const line of [...app.logs].reverse()) {
			const { mail } = JSON.parse(line) as { mail?: { kind: string; to: string; subject: string; text: string } }
			if (mail?.to === to && (kind === undefined || mail.kind === kind)) return mail
		}
		if (Date.now() > deadline) throw new Error(`no mail to ${to} in the log within ${timeoutMs} ms`)
		await Bun.sleep(20)
	}
}

/** The outbox rows (`jobs`) of the mails of one kind to one address, oldest first. */
export async function mailJobs(database: TestDatabase, kind: MailKind, address: string): Promise<JobRow[]> {
	return database.handle.db
		.select()
		.from(jobs)
		.where(eq(jobs.throttleKey, mailThrottleKey(kind, address)))
		.orderBy(asc(jobs.createdAt), asc(jobs.id))
}

/** How many jobs of a queue (`mail`, `mail-request`) the table holds, finished or not. */
export async function countJobs(database: TestDatabase, queue: string): Promise<number> {
	const [row] = await database.handle.db.select({ n: count() }).from(jobs).where(eq(jobs.queue, queue))
	return row?.n ?? 0
}

/** Waits until the one outbox row of a mail kind to an address satisfies `ready`; returns it. */
export async function waitForMailJob(
	database: TestDatabase,
	kind: MailKind,
	address: string,
	ready: (job: JobRow) => boolean,
	timeoutMs = 20_000,
): Promise<JobRow> {
	const deadline = Date.now() + timeoutMs
	for (;;) {
		const rows = await mailJobs(database, kind, address)
		if (rows.length > 1) throw new Error(`${rows.length} outbox rows for one ${kind} mail to ${address}`)
		if (rows[0] && ready(rows[0])) return rows[0]
		if (Date.now() > deadline) throw new Error(`the ${kind} mail job to ${address} did not reach the expected state: ${JSON.stringify(rows[0])}`)
		await Bun.sleep(50)
	}
}

/**
 * Signs up, proves the address with the sign-up's verification mail, and logs in again (a proved address
 * signs every earlier session out): an account whose ways in were all added after its address was verified.
 */
export async function signUpVerified(t: TestApp, fields: { email?: string; name?: string } = {}): Promise<Account> {
	const account = await signUp(t, fields)
	const { token } = proofOf(await loggedMail(t, account.email, 10_000, 'verification'))
	const verified = await t.call('POST', '/api/auth/email-verifications', { json: { token } })
	if (verified.status !== 200) throw new Error(`verification answered ${verified.status}`)
	return login(t, account.email)
}

/**
 * A test app whose mail goes over SMTP to a sink of its own, at `https://app.example.test`, with no resend limit
 * (tests ask for mail after mail); `env` adds or overrides settings. `close` stops both.
 */
export async function startAppWithSmtp(env: Record<string, string> = {}): Promise<{ t: TestApp; sink: SmtpSink; close(): Promise<void> }> {
	const sink = await SmtpSink.start()
	const t = await startTestApp({ SMTP_URL: sink.url, APP_URL: 'https://app.example.test', MAIL_RESEND_SECONDS: '0', ...env })
	return {
		t,
		sink,
		close: async () => {
			await t.close()
			await sink.stop()
		},
	}
}
