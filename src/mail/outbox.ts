import { enqueue } from '../jobs/queue'
import type { OutgoingMail } from './mailer'

/** The job queue mails wait in (the outbox); its handler is `sendMailJob`. */
export const MAIL_QUEUE = 'mail'
/** Mails already decided go out before more requests are decided: a flood of requests cannot hold them back. */
export const MAIL_PRIORITY = 1

/** Whatever `enqueue` writes with: the database or the caller's transaction. */
export type MailTx = Parameters<typeof enqueue>[0]

/** Writes a mail to the outbox in the caller's transaction; it goes out once that commits. */
export async function enqueueMail(tx: MailTx, mail: OutgoingMail, throttleKey?: string): Promise<string> {
	return enqueue(tx, { queue: MAIL_QUEUE, payload: { ...mail }, throttleKey, priority: MAIL_PRIORITY })
}
