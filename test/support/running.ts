import { afterEach } from 'bun:test'
/**
 * What test files leave running in the background: apps (with their job workers, which poll their
 * database) until closed. Dropping a test database stops what still runs on it first; an app that
 * outlives its test file is closed before the next file's first test, which then fails and names it
 * (test/support/preload.ts), so that no worker keeps polling a database that is gone.
 */
interface Running {
	/** The test file that started it. */
	file: string
	database: object
	close(): Promise<void>
}

const running = new Set<Running>()

/** Tracks something started by the current test file on `database`; the returned close stops it once and forgets it. */
export function tracked(database: object, close: () => Promise<void>): () => Promise<void> {
	const entry: Running = { file: Bun.main, database, close: once(close) }
	running.add(entry)
	return async () => {
		running.delete(entry)
		await entry.close()
	}
}

/** Stops whatever still runs on `database`, before it is dropped. */
export async function stopRunningOn(database: object): Promise<void> {
	const on = [...running].filter((entry) => entry.database === database)
	for (const entry of on) running.delete(entry)
	await Promise.all(on.map((entry) => entry.close()))
}

/** Stops what earlier test files (or, `all`, any file) left running; says which files they were. */
export async function stopLeftovers({ all = false } = {}): Promise<string[]> {
	const left = [...running].filter((entry) => all || entry.file !== Bun.main)
	for (const entry of left) running.delete(entry)
	await Promise.all(left.map((entry) => entry.close()))
	return [...new Set(left.map((entry) => entry.file))]
}

function once(close: () => Promise<void>): () => Promise<void> {
	let closing: Promise<void> | undefined
	return () => (closing ??= close())
}

/**
 * What each test of a file starts (apps, SMTP sinks), closed last first when the test ends, so that the file's
 * next test runs alone on the file's database: two live apps on one database would each run the other's jobs,
 * through their own settings. Returns the function that adds one (and gives it back).
 */
export function closedAfterEachTest(): <T extends { close(): Promise<void> }>(thing: T) => T {
	const started: Array<{ close(): Promise<void> }> = []
	afterEach(async () => {
		for (const thing of started.splice(0).reverse()) await thing.close()
	})
	return (thing) => {
		started.push(thing)
		return thing
	}
}
