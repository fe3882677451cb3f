import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { and, asc, eq, sql } from 'drizzle-orm'
import { jobs } from '../src/db/schema'
import type { OutgoingMail } from '../src/mail/mailer'
import { WayInNotices, type WayInChange } from '../src/mail/notices'
import { MAIL_PRIORITY, MAIL_QUEUE } from '../src/mail/outbox'
import { MailTemplates } from '../src/mail/templates'
import { createTestDatabase, type TestDatabase } from './support/database'
import { uniqueEmail } from './support/fixtures'

setDefaultTimeout(60_000)

const RECOVERY_URL = 'https://app.example.test/recovery'
const ZWSP = '\u200b'
const client = { ip: '203.0.113.7', userAgent: 'Mozilla/5.0 (X11; Linux x86_64) Firefox/131.0' }
/** The user agent as a mail shows it: a zero-width space after each `.`, `:`, `/` so no client makes a link of it. */
const shownAgent = `Mozilla/${ZWSP}5.${ZWSP}0 (X11; Linux x86_64) Firefox/${ZWSP}131.${ZWSP}0`

let database: TestDatabase
let notices: WayInNotices
beforeAll(async () => {
	database = await createTestDatabase()
	notices = new WayInNotices({ templates: new MailTemplates(), appName: 'Acme Vault', recoveryUrl: RECOVERY_URL })
})
afterAll(() => database.drop())

/** The mails queued to an address, oldest first: the outbox rows as the worker will read them. */
async function queuedMails(to: string) {
	const rows = await database.handle.db
		.select()
		.from(jobs)
		.where(and(eq(jobs.queue, MAIL_QUEUE), sql`${jobs.payload}->>'to' = ${to}`))
		.orderBy(asc(jobs.createdAt), asc(jobs.id))
	return rows.map((row) => ({ priority: row.priority, throttleKey: row.throttleKey, mail: row.payload as unknown as OutgoingMail }))
}

describe('way-in notices', () => {
	test('a notice names the change, the time (UTC), the client’s address and user agent, and links to RECOVERY_URL on a line of its own', async () => {
		const email = uniqueEmail('notice')
		const at = new Date('2026-11-26T09:30:12.345Z')
		await database.handle.db.transaction((tx) =>
			notices.queue(tx, { email, name: 'Ada' }, [{ way: 'passkey', change: 'added', label: 'YubiKey 5' }], client, at),
		)
		const [queued, ...more] = await queuedMails(email)
		expect(more).toEqual([])
		expect(queued?.priority).toBe(MAIL_PRIORITY)
		expect(queued?.throttleKey).toBeNull()
		const mail = queued?.mail as OutgoingMail
		expect(mail.kind).toBe('way-in-notice')
		expect(mail.to).toBe(email)
		expect(mail.subject).toBe('Acme Vault: A passkey “YubiKey 5” was added')
		expect(mail.text).toBe(
			[
				'Hello Ada,',
				'',
				`A passkey “YubiKey 5” was added on your Acme Vault account ${email}.`,
				'',
				'When: 2026-11-26 09:30:12 UTC',
				`From: 203.0.113.7, ${shownAgent}`,
				'',
				'If this was you, there is nothing to do. If this was not you, someone may have your password or your mailbox: recover your account at once here (the link is the same in every notice):',
				'',
				RECOVERY_URL,
				'',
			].join('\n'),
		)
		expect(mail.html).toContain('<p>A passkey “YubiKey 5” was added on your Acme Vault account')
		expect(mail.html).toContain('When: 2026-11-26 09:30:12 UTC<br>From: 203.0.113.7, ')
		expect(mail.html).toContain('<a href="https:&#x2F;&#x2F;app.example.test&#x2F;recovery">recover your account at once</a>')
	})

	test('two notices in a row to one address are both queued: the resend limit never holds one back', async () => {
		const email = uniqueEmail('twice')
		const account = { email, name: 'Ada' }
		await database.handle.db.transaction((tx) => notices.queue(tx, account, [{ way: 'totp', change: 'added', label: 'Phone' }], client))
		await database.handle.db.transaction((tx) => notices.queue(tx, account, [{ way: 'totp', change: 'removed', label: 'Phone' }], client))
		await database.handle.db.transaction((tx) =>
			notices.queue(
				tx,
				account,
				[
					{ way: 'password', change: 'changed' },
					{ way: 'recovery-codes', change: 'changed' },
				],
				client,
			),
		)
		expect((await queuedMails(email)).map(({ mail }) => mail.subject)).toEqual([
			'Acme Vault: An authenticator app “Phone” was added',
			'Acme Vault: An authenticator app “Phone” was removed',
			'Acme Vault: Your password was changed',
			'Acme Vault: New recovery codes were made (the old ones no longer work)',
		])
	})

	test('every kind of change reads as a sentence', async () => {
		const email = uniqueEmail('kinds')
		const changes: WayInChange[] = [
			{ way: 'identity', change: 'added', label: 'Google' },
			{ way: 'identity', change: 'removed', label: 'Google' },
			{ way: 'passkey', change: 'removed' },
			{ way: 'password', change: 'added' },
			{ way: 'password', change: 'removed' },
			{ way: 'email', change: 'changed', label: 'ada@new.example' },
			{ way: 'recovery-codes', change: 'removed' },
		]
		await database.handle.db.transaction((tx) => notices.queue(tx, { email, name: '' }, changes, { ip: null, userAgent: null }))
		const mails = (await queuedMails(email)).map(({ mail }) => mail)
		expect(mails.map((mail) => mail.subject.replace('Acme Vault: ', ''))).toEqual([
			'A linked sign-in “Google” was added',
			'A linked sign-in “Google” was removed',
			'A passkey was removed',
			'A password was set',
			'Your password was removed',
			`Your email address was changed to “ada@${ZWSP}new.${ZWSP}example”`,
			'Your recovery codes were removed',
		])
		expect(mails[0]?.text).toStartWith('Hello,\n')
		expect(mails[0]?.text).toContain('From: an unknown address, an unknown client\n')
	})

	test('a notice rolled back with its transaction is never sent', async () => {
		const email = uniqueEmail('rolled-back')
		await expect(
			database.handle.db.transaction(async (tx) => {
				await notices.queue(tx, { email, name: 'Ada' }, [{ way: 'passkey', change: 'added' }], client)
				throw new Error('the change failed')
			}),
		).rejects.toThrow('the change failed')
		expect(await queuedMails(email)).toEqual([])
	})

	test('a label or user agent cannot add a line, a link or markup to a notice', async () => {
		const email = uniqueEmail('hostile-label')
		const label = 'Key\n\nhttps://evil.example/recover\u2028<b>now</b>'
		await database.handle.db.transaction((tx) =>
			notices.queue(tx, { email, name: 'Ada' }, [{ way: 'passkey', change: 'added', label }], { ip: 'not an address', userAgent: 'x\r\nhttps://evil.example' }),
		)
		const [{ mail } = { mail: undefined }] = await queuedMails(email)
		const shown = `Key https:${ZWSP}/${ZWSP}/${ZWSP}evil.${ZWSP}example/${ZWSP}recover <b>now</${ZWSP}b>`
		expect(mail?.subject).toBe(`Acme Vault: A passkey “${shown}” was added`)
		expect(mail?.text).toContain(`From: an unknown address, x https:${ZWSP}/${ZWSP}/${ZWSP}evil.${ZWSP}example\n`)
		expect(mail?.text).not.toMatch(/https?:\/\/evil/)
		expect(mail?.html).not.toMatch(/https?:\/\/evil|https?:&#x2F;&#x2F;evil|<b>/)
		expect(mail?.html).toContain('&lt;b&gt;now&lt;&#x2F;')
	})

	test('the recovery review lists what the recovery removed and the ways in that remain', async () => {
		const email = uniqueEmail('review')
		const at = new Date('2026-11-26T10:00:00Z')
		await database.handle.db.transaction((tx) =>
			notices.queueRecoveryReview(
				tx,
				{ email, name: 'Ada' },
				{
					removed: [
						{ way: 'passkey', change: 'removed', label: 'Unknown key' },
						{ way: 'identity', change: 'removed', label: 'GitHub' },
					],
					remaining: [{ way: 'password' }, { way: 'totp', label: 'Phone' }, { way: 'email', label: email }],
				},
				client,
				at,
			),
		)
		const [{ mail } = { mail: undefined }, ...more] = await queuedMails(email)
		expect(more).toEqual([])
		expect(mail?.kind).toBe('recovery-review')
		expect(mail?.subject).toBe('Your Acme Vault account was recovered: the ways in that remain')
		const text = mail?.text ?? ''
		expect(text).toContain('When: 2026-11-26 10:00:00 UTC\nFrom: 203.0.113.7, ')
		expect(text).toContain('were removed:\n- passkey “Unknown key”\n- linked sign-in “GitHub”\n\nThe ways into your account now:\n- password\n- authenticator app “Phone”\n- email address “')
		expect(text.split('\n')).toContain(RECOVERY_URL)
		expect(mail?.html).toContain('<ul><li>passkey “Unknown key”</li><li>linked sign-in “GitHub”</li></ul>')
	})

	test('a recovery that removed nothing says only what remains', async () => {
		const email = uniqueEmail('review-none')
		await database.handle.db.transaction((tx) =>
			notices.queueRecoveryReview(tx, { email, name: 'Ada' }, { removed: [], remaining: [{ way: 'password' }] }, client),
		)
		const [{ mail } = { mail: undefined }] = await queuedMails(email)
		expect(mail?.text).not.toContain('removed')
		expect(mail?.text).toContain('\n\nThe ways into your account now:\n- password\n\n')
		expect(mail?.html).not.toContain('removed')
	})
})
