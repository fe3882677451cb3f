import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { DataKeys } from '../src/crypto/data-keys'
import { factors } from '../src/db/schema'
import { startTestApp, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { awayFromStepBoundary, completeWithTotp, enrollTotp, passwordStep, totpCode } from './support/factors'
import { signUp } from './support/fixtures'

setDefaultTimeout(30_000)

const keyA = DataKeys.generate()
const keyB = DataKeys.generate()

let database: TestDatabase
beforeAll(async () => {
	database = await createTestDatabase()
})
afterAll(() => database.drop())

describe('two instances on one database', () => {
	let one: TestApp
	let two: TestApp
	beforeAll(async () => {
		one = await startTestApp({ DATA_ENCRYPTION_KEY: keyA }, database)
		two = await startTestApp({ DATA_ENCRYPTION_KEY: keyA }, database)
	})
	afterAll(async () => {
		await one.close()
		await two.close()
	})

	test('a TOTP code accepted by one is refused by the other, also when both get it at once', async () => {
		const account = await signUp(one)
		const { secret } = await enrollTotp(one, account)
		await awayFromStepBoundary(3000)
		const code = totpCode(secret, 1)
		expect((await completeWithTotp(one, await passwordStep(one, account.email), code)).status).toBe(200)
		expect((await completeWithTotp(two, await passwordStep(two, account.email), code)).status).toBe(401)

		const other = await signUp(one)
		const enrolled = await enrollTotp(one, other)
		await awayFromStepBoundary(3000)
		const shared = totpCode(enrolled.secret, 1)
		const tokens = [await passwordStep(one, other.email), await passwordStep(two, other.email), await passwordStep(one, other.email), await passwordStep(two, other.email)]
		const results = await Promise.all(tokens.map((mfaToken, index) => completeWithTotp(index % 2 ? two : one, mfaToken, shared)))
		expect(results.map((res) => res.status).sort()).toEqual([200, 401, 401, 401])
	})

	test('an mfaToken from one instance is completed by the other', async () => {
		const account = await signUp(one)
		const { secret } = await enrollTotp(one, account)
		const mfaToken = await passwordStep(one, account.email)
		await awayFromStepBoundary()
		expect((await completeWithTotp(two, mfaToken, totpCode(secret, 1))).status).toBe(200)
	})
})

describe('rotating DATA_ENCRYPTION_KEY', () => {
	test('with the old key kept as previous, factors keep working and are sealed again under the new key at their next use', async () => {
		const before = await startTestApp({ DATA_ENCRYPTION_KEY: keyA }, database)
		const account = await signUp(before)
		// Three codes, each of a later step than the last (replay protection), each made when it is sent: the
		// previous step's to activate, the current one's and then the next one's to sign in, rather than waiting for
		// a new step. A step that ends between two of them only makes the later ones later still; enrollTotp keeps
		// its own request away from a step's end (the previous step's code would be two steps old after it).
		const { factorId, secret } = await enrollTotp(before, account, 'Phone', -1)
		await before.close()
		const sealedBefore = (await database.handle.db.select().from(factors).where(eq(factors.id, factorId)))[0]?.totpSecret ?? ''

		const after = await startTestApp({ DATA_ENCRYPTION_KEY: keyB, DATA_ENCRYPTION_PREVIOUS_KEYS: keyA }, database)
		try {
			expect((await completeWithTotp(after, await passwordStep(after, account.email), totpCode(secret, 0))).status).toBe(200)
			const sealedAfter = (await database.handle.db.select().from(factors).where(eq(factors.id, factorId)))[0]?.totpSecret ?? ''
			expect(sealedAfter.split('.')[1]).not.toBe(sealedBefore.split('.')[1])
		} finally {
			await after.close()
		}
		// Now the old key can go.
		const only = await startTestApp({ DATA_ENCRYPTION_KEY: keyB }, database)
		try {
			expect((await completeWithTotp(only, await passwordStep(only, account.email), totpCode(secret, 1))).status).toBe(200)
		} finally {
			await only.close()
		}
	}, 60_000)

	test('without the old key the factor is unusable: the code is refused, the log names the factor and never the secret, and recovery codes still work', async () => {
		const before = await startTestApp({ DATA_ENCRYPTION_KEY: keyA }, database)
		const account = await signUp(before)
		const { factorId, secret, recoveryCodes } = await enrollTotp(before, account)
		await before.close()
		const lost = await startTestApp({ DATA_ENCRYPTION_KEY: keyB }, database)
		try {
			await awayFromStepBoundary()
			const refused = await completeWithTotp(lost, await passwordStep(lost, account.email), totpCode(secret, 1))
			expect(refused.status).toBe(401)
			const line = lost.logs.find((entry) => entry.includes('does not open under DATA_ENCRYPTION_KEY'))
			expect(line).toContain(factorId)
			expect(lost.logs.join('\n')).not.toContain(secret)
			const recovered = await lost.call('POST', '/api/auth/mfa', { json: { mfaToken: await passwordStep(lost, account.email), method: 'recovery-code', code: recoveryCodes[0] } })
			expect(recovered.status).toBe(200)
		} finally {
			await lost.close()
		}
	})
})
