import { dictionary } from '@zxcvbn-ts/language-common'
import type { FieldError } from '../../http/problem'
import { isCompiledBinary } from '../../runtime'

export const PASSWORD_MAX_LENGTH = 256

export interface PasswordSettings {
	minLength: number
	memoryCost: number
	timeCost: number
	/** Nice value (0–19) of the hashing threads; 0 leaves them at normal priority. */
	niceness: number
}

// The ~50,000 most common passwords, as zxcvbn ships them (lower-case).
let commonPasswords: Set<string> | undefined
const isCommon = (password: string) =>
	(commonPasswords ??= new Set(dictionary['passwords-common'] as string[])).has(password.toLowerCase())

/**
 * Passwords are compared as NFC, so the same characters typed on different
 * keyboards hash alike; length counts code points, not UTF-16 units.
 */
export const normalizePassword = (password: string) => password.normalize('NFC')

/** The policy of API.md: length bounds and no common passwords; no composition rules. */
export function passwordProblem(password: string, minLength: number, pointer = '#/password'): FieldError | undefined {
	const length = [...normalizePassword(password)].length
	if (length < minLength) return { pointer, code: 'minLength', detail: `must be at least ${minLength} characters` }
	if (length > PASSWORD_MAX_LENGTH)
		return { pointer, code: 'maxLength', detail: `must be at most ${PASSWORD_MAX_LENGTH} characters` }
	if (isCommon(password)) return { pointer, code: 'commonPassword', detail: 'is too common; choose another' }
	return undefined
}

/** Messages to and from hash-worker.ts. */
export type HashJob =
	| { op: 'init'; niceness: number }
	| { op: 'hash'; id: number; password: string; memoryCost: number; timeCost: number }
	| { op: 'verify'; id: number; password: string; hash: string }
export type HashReply = { id: number; value: string | boolean; failed?: undefined } | { id: number; failed: true }

/**
 * argon2id runs on worker threads, one per core, each working on one job at
 * a time (a flood of logins queues here), at a lowered priority: hashing gets
 * every idle cycle but yields the cores to request handling and the
 * database, so that reads stay fast while logins saturate the machine.
 * (Bun.password's own thread pool cannot be given a priority.) One pool per
 * process; the worker script is a second entry point of the compiled binary.
 */
class HashingPool {
	private readonly idle: Worker[] = []
	private readonly waiting: Array<(worker: Worker) => void> = []
	private readonly answers = new Map<Worker, { resolve: (reply: HashReply) => void; reject: (error: Error) => void }>()
	private size = 0
	private nextId = 0

	constructor(
		private readonly capacity: number,
		private readonly niceness: number,
	) {}

	async run(job: DistributiveOmit<Exclude<HashJob, { op: 'init' }>, 'id'>): Promise<string | boolean> {
		const worker = await this.acquire()
		let reply: HashReply
		try {
			reply = await new Promise<HashReply>((resolve, reject) => {
				this.answers.set(worker, { resolve, reject })
				worker.ref() // an answer is awaited: it keeps the process alive (a graceful shutdown waits for it)
				worker.postMessage({ ...job, id: this.nextId++ } satisfies HashJob)
			})
		} finally {
			this.answers.delete(worker)
		}
		this.release(worker)
		if (reply.failed) throw new Error(`password ${job.op} failed`)
		return reply.value
	}

	private acquire(): Promise<Worker> {
		const worker = this.idle.pop() ?? (this.size < this.capacity ? this.spawn() : undefined)
		return worker ? Promise.resolve(worker) : new Promise((resolve) => this.waiting.push(resolve))
	}

	private release(worker: Worker) {
		worker.unref()
		const next = this.waiting.shift()
		if (next) next(worker)
		else this.idle.push(worker)
	}

	private spawn(): Worker {
		const worker = new Worker(WORKER_SCRIPT)
		this.size++
		worker.unref()
		worker.postMessage({ op: 'init', niceness: this.niceness } satisfies HashJob)
		worker.onmessage = ({ data }: MessageEvent<HashReply>) => this.answers.get(worker)?.resolve(data)
		worker.onerror = () => {
			// A crashed worker fails its job and leaves the pool; a waiting job gets a fresh one.
			this.size--
			const idleAt = this.idle.indexOf(worker)
			if (idleAt >= 0) this.idle.splice(idleAt, 1)
			this.answers.get(worker)?.reject(new Error('password worker failed'))
			worker.terminate()
			const next = this.waiting.shift()
			if (next) next(this.spawn())
		}
		return worker
	}
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

/**
 * From source the worker script sits beside this file. In the compiled binary it is a second entry
 * point (package.json "build"), embedded under the bundle's root, src/, where Bun resolves it by that path.
 */
const WORKER_SCRIPT = isCompiledBinary
	? './modules/auth/hash-worker.ts'
	: new URL('./hash-worker.ts', import.meta.url).href

let pool: HashingPool | undefined
const hashingPool = (niceness: number) => (pool ??= new HashingPool(Math.max(1, navigator.hardwareConcurrency), niceness))

export class PasswordHasher {
	private dummyHash: Promise<string> | undefined

	constructor(private readonly settings: PasswordSettings) {}

	async hash(password: string): Promise<string> {
		const { memoryCost, timeCost, niceness } = this.settings
		return String(await hashingPool(niceness).run({ op: 'hash', password: normalizePassword(password), memoryCost, timeCost }))
	}

	async verify(password: string, hash: string): Promise<boolean> {
		return (await hashingPool(this.settings.niceness).run({ op: 'verify', password: normalizePassword(password), hash })) === true
	}

	/**
	 * Spends the same time as a real verification when there is no account to
	 * check, so that response time does not tell which emails exist.
	 */
	async verifyAgainstDummy(password: string): Promise<false> {
		this.dummyHash ??= this.hash(crypto.randomUUID())
		await this.verify(password, await this.dummyHash)
		return false
	}

	/** True when a stored hash was made with other parameters than the configured ones. */
	needsRehash(hash: string): boolean {
		const match = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=\d+\$/.exec(hash)
		if (!match) return true
		return Number(match[1]) !== this.settings.memoryCost || Number(match[2]) !== this.settings.timeCost
	}
}
