/**
 * Loaded before every test file (bunfig.toml). An app a file left running would keep its job
 * workers polling that file's dropped database through the rest of the run: it is stopped here,
 * and the first test of the next file fails, naming the file to fix.
 */
import { afterAll, beforeEach } from 'bun:test'
import { stopLeftovers } from './running'

beforeEach(async () => {
	const files = await stopLeftovers()
	if (files.length > 0) throw new Error(`left apps running after its last test (close them in afterAll/afterEach): ${files.join(', ')}`)
})

// The last file (or, run with --isolate or --parallel, each file: this hook then runs per file).
afterAll(async () => {
	const files = await stopLeftovers({ all: true })
	if (files.length > 0) throw new Error(`left apps running after its last test (close them in afterAll/afterEach): ${files.join(', ')}`)
})
