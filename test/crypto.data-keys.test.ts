import { describe, expect, test } from 'bun:test'
import { DataKeys, UnreadableSecret } from '../src/crypto/data-keys'

const keyA = DataKeys.generate()
const keyB = DataKeys.generate()

describe('secrets sealed at rest (AES-256-GCM)', () => {
	test('a sealed value opens under its key and context, and never shows the plaintext', async () => {
		const keys = DataKeys.from({ current: keyA, previous: [] })
		const sealed = await keys.seal('JBSWY3DPEHPK3PXP', 'factor-1')
		expect(sealed).toMatch(/^v1\.[0-9a-f]{8}\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+$/)
		expect(sealed).not.toContain('JBSWY3DPEHPK3PXP')
		expect(await keys.open(sealed, 'factor-1')).toEqual({ plaintext: 'JBSWY3DPEHPK3PXP', stale: false })
		// A fresh IV each time: the same secret never seals the same way twice.
		expect(await keys.seal('JBSWY3DPEHPK3PXP', 'factor-1')).not.toBe(sealed)
	})

	test('moved to another row, tampered with, or under an unknown key, it does not open', async () => {
		const keys = DataKeys.from({ current: keyA, previous: [] })
		const sealed = await keys.seal('secret', 'factor-1')
		await expect(keys.open(sealed, 'factor-2')).rejects.toBeInstanceOf(UnreadableSecret)
		const parts = sealed.split('.')
		const flipped = Buffer.from(parts[3] ?? '', 'base64url')
		flipped[0] = (flipped[0] ?? 0) ^ 1
		await expect(keys.open([...parts.slice(0, 3), flipped.toString('base64url')].join('.'), 'factor-1')).rejects.toBeInstanceOf(UnreadableSecret)
		await expect(DataKeys.from({ current: keyB, previous: [] }).open(sealed, 'factor-1')).rejects.toBeInstanceOf(UnreadableSecret)
		await expect(keys.open('not sealed at all', 'factor-1')).rejects.toBeInstanceOf(UnreadableSecret)
	})

	test('after a rotation a value sealed under the retired key opens and says it is stale', async () => {
		const sealed = await DataKeys.from({ current: keyA, previous: [] }).seal('secret', 'factor-1')
		const rotated = DataKeys.from({ current: keyB, previous: [keyA] })
		expect(await rotated.open(sealed, 'factor-1')).toEqual({ plaintext: 'secret', stale: true })
		expect(await rotated.open(await rotated.seal('secret', 'factor-1'), 'factor-1')).toEqual({ plaintext: 'secret', stale: false })
	})

	test('without a key (development) a random one is made, and a warning logged', async () => {
		const warnings: string[] = []
		const keys = DataKeys.from({ previous: [] }, { warn: (message: string) => warnings.push(message) } as never)
		expect(keys.developmentKey).toBeString()
		expect(Buffer.from(keys.developmentKey ?? '', 'base64')).toHaveLength(32)
		expect(warnings).toEqual([expect.stringContaining('DATA_ENCRYPTION_KEY is not set')])
		expect((await keys.open(await keys.seal('x', 'c'), 'c')).plaintext).toBe('x')
	})
})
