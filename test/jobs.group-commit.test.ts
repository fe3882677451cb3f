import { describe, expect, test } from 'bun:test'
import { GroupCommit } from '../src/jobs/group-commit'

describe('GroupCommit', () => {
	test('items of one tick go in one run; those submitted during a run go together in the next; each gets its own result', async () => {
		const runs: number[][] = []
		let release: () => void = () => {}
		const group = new GroupCommit<number, number>(async (items) => {
			runs.push(items)
			if (runs.length === 1) await new Promise<void>((resolve) => (release = resolve))
			return items.map((item) => item * 10)
		})
		const first = [1, 2, 3].map((item) => group.submit(item))
		await Bun.sleep(5)
		// The first run is in progress: these wait for it, then go as one.
		const second = [4, 5, 6, 7].map((item) => group.submit(item))
		await Bun.sleep(5)
		expect(runs).toEqual([[1, 2, 3]])
		release()
		expect(await Promise.all([...first, ...second])).toEqual([10, 20, 30, 40, 50, 60, 70])
		expect(runs).toEqual([
			[1, 2, 3],
			[4, 5, 6, 7],
		])
	})

	test("a failed run rejects each of its items and not the next run's", async () => {
		let calls = 0
		const group = new GroupCommit<string, string>(async (items) => {
			calls++
			if (calls === 1) throw new Error('database down')
			return items.map((item) => item.toUpperCase())
		})
		const failed = await Promise.allSettled([group.submit('a'), group.submit('b')])
		expect(failed.map((result) => result.status)).toEqual(['rejected', 'rejected'])
		expect(await group.submit('c')).toBe('C')
	})

	test('batches are at most maxBatch items', async () => {
		const sizes: number[] = []
		const group = new GroupCommit<number, number>(async (items) => {
			sizes.push(items.length)
			return items
		}, 4)
		await Promise.all(Array.from({ length: 10 }, (_, i) => group.submit(i)))
		expect(sizes).toEqual([4, 4, 2])
	})
})
