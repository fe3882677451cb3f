/**
 * Gathers the items that callers submit while runs are in progress and gives them to the next run together:
 * one database round trip (or one commit) for many jobs instead of one each. The first item of a quiet
 * moment waits for nothing but the end of its tick. Each caller gets its own item's result, or the run's error.
 */
export class GroupCommit<I, O> {
	private waiting: Array<{ item: I; resolve: (value: O) => void; reject: (error: unknown) => void }> = []
	private running = 0
	private scheduled = false

	constructor(
		/** Runs a batch; returns one result per item, in order. */
		private readonly run: (items: I[]) => Promise<O[]>,
		private readonly maxBatch = 500,
		/** Runs at once: a second one overlaps the first's round trips (each uses its own connection). */
		private readonly parallel = 1,
	) {}

	submit(item: I): Promise<O> {
		return new Promise<O>((resolve, reject) => {
			this.waiting.push({ item, resolve, reject })
			// Items submitted in the same tick (a claim starts many jobs at once) go together.
			if (!this.scheduled) {
				this.scheduled = true
				queueMicrotask(() => {
					this.scheduled = false
					this.next()
				})
			}
		})
	}

	private next() {
		if (this.running >= this.parallel || this.waiting.length === 0) return
		this.running++
		const batch = this.waiting.splice(0, this.maxBatch)
		this.run(batch.map(({ item }) => item))
			.then(
				(results) => batch.forEach(({ resolve }, i) => resolve(results[i] as O)),
				(error: unknown) => batch.forEach(({ reject }) => reject(error)),
			)
			.finally(() => {
				this.running--
				this.next()
			})
	}
}
