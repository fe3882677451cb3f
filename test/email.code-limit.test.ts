import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { count, eq, sql } from 'drizzle-orm'
import { codeFailures, emailTokens, jobs } from '../src/db/schema'
import { purgeCodeFailures } from '../src/modules/email/code-limit'
import { problem, type CallResult, type TestApp } from './support/app'
import { signUp, uniqueEmail } from './support/fixtures'
import { proofOf, SmtpSink, SUBJECT, startAppWithSmtp } from './support/mail'

setDefaultTimeout(60_000)

const NEW_PASSWORD = 'a brand new passphrase'
const INVALID = 'The token or code is wrong, used or replaced by a newer one; ask for a new mail'
const TOO_MANY = 'Too many wrong codes for this address; use the link in the mail, or try a code again later'
const DAY = 86_400

let sink: SmtpSink
let t: TestApp

let closeApp: () => Promise<void>

beforeAll(async () => {
	;({ t, sink, close: closeApp } = await startAppWithSmtp())
})
afterAll(() => closeApp())

const RESETS = '/api/auth/password-resets'
const VERIFICATIONS = '/api/auth/email-verifications'
const reset = (json: Record<string, unknown>) => t.call('POST', RESETS, { json })
const verify = (json: Record<string, unknown>) => t.call('POST', VERIFICATIONS, { json })
const otherCode = (code: string, step: number) => String((Number(code) + step) % 1_000_000).padStart(6, '0')

async function recoveryMail(email: string) {
	const count = sink.to(email, SUBJECT.recovery).length + 1
	expect((await t.call('POST', '/api/auth/recovery-requests', { json: { email } })).status).toBe(202)
	return proofOf(await sink.waitFor(email, { subject: SUBJECT.recovery, count }))
}

/** A 429 too-many-codes, whole, with a Retry-After of (nearly) the whole day: the oldest wrong code was typed moments ago. */
function expectTooMany(res: CallResult, instance: string) {
	expect(res.status).toBe(429)
	expect(res.headers.get('content-type')).toStartWith('application/problem+json')
	expect(res.body).toEqual(problem('too-many-codes', 429, instance, TOO_MANY))
	const retryAfter = Number(res.headers.get('retry-after'))
	expect(retryAfter).toBeGreaterThan(DAY - 600)
	expect(retryAfter).toBeLessThanOrEqual(DAY)
}

/** The wrong codes of the last day an address has, made a day old: the window has moved past them. */
const ageWrongCodes = () => t.database.handle.db.execute(sql`update code_failures set created_at = created_at - interval '24 hours 1 second'`)

describe('at most 10 wrong codes per address and kind in any 24 hours', () => {
	test('10 wrong recovery codes across three mails; the 11th try is 429 even with the right code, while the link’s token still works', async () => {
		const user = await signUp(t)
		let proof = await recoveryMail(user.email)
		for (const [mail, wrongs] of [[1, 4], [2, 4], [3, 2]] as const) {
			if (mail > 1) proof = await recoveryMail(user.email)
			// Four at most per mail: none of the codes is voided by its own five tries.
			for (let i = 1; i <= wrongs; i++)
				expect((await reset({ email: user.email, code: otherCode(proof.code, i), password: NEW_PASSWORD })).body).toEqual(problem('invalid-code', 400, RESETS, INVALID))
		}
		expectTooMany(await reset({ email: user.email, code: proof.code, password: NEW_PASSWORD }), RESETS)
		expectTooMany(await reset({ email: user.email, code: otherCode(proof.code, 9), password: NEW_PASSWORD }), RESETS)
		// A new mail brings no new tries either.
		const fresh = await recoveryMail(user.email)
		expectTooMany(await reset({ email: user.email, code: fresh.code, password: NEW_PASSWORD }), RESETS)
		const byLink = await reset({ token: fresh.token, password: NEW_PASSWORD })
		expect(byLink.status).toBe(200)
		expect((await t.call('POST', '/api/auth/login', { json: { email: user.email, password: NEW_PASSWORD } })).status).toBe(200)
	})

	test('the same at /auth/email-verifications: the 11th is 429, the link verifies', async () => {
		const user = await signUp(t)
		let proof = proofOf(await sink.waitFor(user.email, { subject: SUBJECT.verification }))
		for (let mail = 1; mail <= 3; mail++) {
			if (mail > 1) {
				expect((await t.call('POST', '/api/auth/verification-requests', { json: { email: user.email } })).status).toBe(202)
				proof = proofOf(await sink.waitFor(user.email, { subject: SUBJECT.verification, count: mail }))
			}
			for (let i = 1; i <= (mail === 3 ? 2 : 4); i++)
				expect((await verify({ email: user.email, code: otherCode(proof.code, i) })).body).toEqual(problem('invalid-code', 400, VERIFICATIONS, INVALID))
		}
		expectTooMany(await verify({ email: user.email, code: proof.code }), VERIFICATIONS)
		const byLink = await verify({ token: proof.token })
		expect(byLink.status).toBe(200)
		expect(byLink.body.data).toMatchObject({ email: user.email, emailVerified: true })
	})

	test('30 wrong codes fired at once: exactly 10 are judged, the other 20 are 429; then the right code is 429 too', async () => {
		const user = await signUp(t)
		const { code } = await recoveryMail(user.email)
		const answers = await Promise.all(
			Array.from({ length: 30 }, (_, i) => reset({ email: user.email, code: otherCode(code, i + 1), password: NEW_PASSWORD })),
		)
		const judged = answers.filter((res) => res.status === 400)
		const refused = answers.filter((res) => res.status === 429)
		expect(judged.length).toBe(10)
		expect(refused.length).toBe(20)
		for (const res of judged) expect(res.body).toEqual(problem('invalid-code', 400, RESETS, INVALID))
		for (const res of refused) expectTooMany(res, RESETS)
		expectTooMany(await reset({ email: user.email, code, password: NEW_PASSWORD }), RESETS)
	})

	test('an unknown address gets the same answers: 10 times invalid-code, then 429 with the same document and Retry-After', async () => {
		const unknown = uniqueEmail('nobody')
		for (let i = 0; i < 10; i++)
			expect((await reset({ email: unknown, code: String(100_000 + i), password: NEW_PASSWORD })).body).toEqual(problem('invalid-code', 400, RESETS, INVALID))
		expectTooMany(await reset({ email: unknown, code: '123456', password: NEW_PASSWORD }), RESETS)
		// Fired at once at another unknown address: 10 judged, as for an account.
		const other = uniqueEmail('nobody-at-once')
		const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => verify({ email: other, code: String(200_000 + i) })))
		expect(answers.filter((res) => res.status === 400).length).toBe(10)
		expect(answers.filter((res) => res.status === 429).length).toBe(20)
		for (const res of answers.filter((res) => res.status === 429)) expectTooMany(res, VERIFICATIONS)
	})

	test('the count is per address and per kind: another address, and the same address’s other kind of code, still work', async () => {
		const [blocked, bystander] = [await signUp(t), await signUp(t)]
		const verification = proofOf(await sink.waitFor(blocked.email, { subject: SUBJECT.verification }))
		const { code } = await recoveryMail(blocked.email)
		for (let i = 1; i <= 10; i++) await reset({ email: blocked.email, code: otherCode(code, i), password: NEW_PASSWORD })
		expectTooMany(await reset({ email: blocked.email, code, password: NEW_PASSWORD }), RESETS)
		// A letter case or spaces make no other address.
		expectTooMany(await reset({ email: ` ${blocked.email.toUpperCase()} `, code, password: NEW_PASSWORD }), RESETS)
		expect((await verify({ email: blocked.email, code: verification.code })).status).toBe(200)
		const bystanderProof = await recoveryMail(bystander.email)
		expect((await reset({ email: bystander.email, code: bystanderProof.code, password: NEW_PASSWORD })).status).toBe(200)
	})

	test('once the oldest wrong codes are 24 hours old the code path opens again', async () => {
		const user = await signUp(t)
		const first = await recoveryMail(user.email)
		for (let i = 1; i <= 10; i++) await reset({ email: user.email, code: otherCode(first.code, i), password: NEW_PASSWORD })
		const { code } = await recoveryMail(user.email)
		expectTooMany(await reset({ email: user.email, code, password: NEW_PASSWORD }), RESETS)
		await ageWrongCodes()
		expect((await reset({ email: user.email, code, password: NEW_PASSWORD })).status).toBe(200)
	})
})

describe('equal work for an address with a live code and one without (the timing is measured in test/bench/reset-timing.ts)', () => {
	const db = () => t.database.handle.db
	const rowCounts = async () => ({
		failures: (await db().select({ n: count() }).from(codeFailures))[0]?.n,
		tokens: (await db().select({ n: count() }).from(emailTokens))[0]?.n,
		jobs: (await db().select({ n: count() }).from(jobs))[0]?.n,
	})

	test('a wrong code writes one wrong-code row and nothing else, the same for both: the live code’s row is left as it was', async () => {
		const user = await signUp(t)
		const { code } = await recoveryMail(user.email)
		const before = await db().select().from(emailTokens).where(eq(emailTokens.email, user.email)).orderBy(emailTokens.id)
		const counts = await rowCounts()
		expect((await reset({ email: user.email, code: otherCode(code, 1), password: NEW_PASSWORD })).body).toEqual(problem('invalid-code', 400, RESETS, INVALID))
		const afterKnown = await rowCounts()
		expect(afterKnown).toEqual({ ...counts, failures: (counts.failures ?? 0) + 1 })
		expect(await db().select().from(emailTokens).where(eq(emailTokens.email, user.email)).orderBy(emailTokens.id)).toEqual(before)
		expect((await reset({ email: uniqueEmail('nobody-equal'), code: otherCode(code, 1), password: NEW_PASSWORD })).body).toEqual(problem('invalid-code', 400, RESETS, INVALID))
		expect(await rowCounts()).toEqual({ ...afterKnown, failures: (afterKnown.failures ?? 0) + 1 })
		// The code's own tries are still counted: four more wrong ones void it, and its link with it.
		for (let i = 2; i <= 5; i++) await reset({ email: user.email, code: otherCode(code, i), password: NEW_PASSWORD })
		expect((await reset({ email: user.email, code, password: NEW_PASSWORD })).body).toEqual(problem('invalid-code', 400, RESETS, INVALID))
	})
})

describe('upkeep', () => {
	test('wrong codes are deleted once they count no more: older than 24 hours and than the longest-lived code', async () => {
		const db = t.database.handle.db
		await db.execute(sql`delete from code_failures`)
		const at = (hoursAgo: number) => ({ id: Bun.randomUUIDv7(), kind: 'recovery', subject: 'purge-test', createdAt: new Date(Date.now() - hoursAgo * 3_600_000) })
		await db.insert(codeFailures).values([at(1), at(23), at(25), at(47), at(49)])
		expect(await purgeCodeFailures(db, 3_600)).toBe(3)
		expect(await db.select({ n: count() }).from(codeFailures)).toEqual([{ n: 2 }])
		// Codes that live 48 hours keep their tries counted as long.
		await db.insert(codeFailures).values([at(47), at(49)])
		expect(await purgeCodeFailures(db, 48 * 3_600)).toBe(1)
	})
})
