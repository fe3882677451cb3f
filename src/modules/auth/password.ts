import { dictionary } from '@zxcvbn-ts/language-common'
import type { FieldError } from '../../http/problem'
import { isCompiledBinary } from '../../runtime'
import { HASH_COST_CAPS, readStoredHash, type HashCostCaps, type HashRefusal } from './hash-schemes'

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
	/** The password as typed: each scheme normalizes it as its service did (hash-schemes.ts). */
	| { op: 'verify'; id: number; password: string; hash: string; caps: HashCostCaps }
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
		if (jobObservers.size) {
			const info: HashingJobInfo =
				job.op === 'hash'
					? { op: 'hash', parameters: { memoryCost: job.memoryCost, timeCost: job.timeCost } }
					: { op: 'verify', parameters: hashParameters(job.hash), costClass: costClassOf(job.hash) }
			for (const observe of jobObservers) observe(info)
		}
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
 * point (package.json "build"), embedded under the bundle's root (`--root .`), where Bun resolves it by that path.
 */
const WORKER_SCRIPT = isCompiledBinary
	? './src/modules/auth/hash-worker.ts'
	: new URL('./hash-worker.ts', import.meta.url).href

let pool: HashingPool | undefined
const hashingPool = (niceness: number) => (pool ??= new HashingPool(Math.max(1, navigator.hardwareConcurrency), niceness))

/** The argon2id cost parameters this service sets: memory in KiB and iterations (always one lane). */
export interface HashParameters {
	memoryCost: number
	timeCost: number
}

/**
 * The parameters of an argon2id hash as Bun.password writes it (PHC string,
 * version 19, one lane); undefined for anything else (another algorithm or
 * lane count, a malformed string). The one place a stored hash is parsed.
 */
export function hashParameters(hash: string): HashParameters | undefined {
	const match = /^\$argon2id\$v=19\$m=(\d{1,10}),t=(\d{1,10}),p=1\$/.exec(hash)
	return match ? { memoryCost: Number(match[1]), timeCost: Number(match[2]) } : undefined
}

const parametersKey = ({ memoryCost, timeCost }: HashParameters) => `m=${memoryCost},t=${timeCost}`

/** What a hashing job costs, as observers of the pool see it; parameters are undefined for a hash that does not parse. */
export interface HashingJobInfo {
	op: 'hash' | 'verify'
	/** Latchkey's own argon2id parameters; undefined for other schemes. */
	parameters: HashParameters | undefined
	/** A verification's cost class (hash-schemes.ts), whatever the scheme; undefined for an unreadable hash. */
	costClass?: string
}
const costClassOf = (hash: string) => {
	const read = readStoredHash(hash, { ...HASH_COST_CAPS, argon2MemoryKib: Infinity, argon2Passes: Infinity })
	return read.ok ? read.costClass : undefined
}
const jobObservers = new Set<(job: HashingJobInfo) => void>()

/**
 * Calls `observer` with every job handed to the hashing pool (this process's, all hashers), as
 * it is queued. For tests and diagnostics: it shows which argon2 work a request caused, which is
 * what login timing depends on. Returns the function that stops the observation.
 */
export function observeHashingJobs(observer: (job: HashingJobInfo) => void): () => void {
	jobObservers.add(observer)
	return () => void jobObservers.delete(observer)
}

/**
 * Cost classes other than the configured one a hasher keeps dummies for:
 * argon2id parameter sets of past settings, and the schemes and costs of
 * imported hashes (hash-schemes.ts). Each costs every login one more
 * verification, so few; they leave at the first restart after no stored
 * hash has them any more (imported hashes are replaced at their first login).
 */
export const MAX_LEGACY_PARAMETER_SETS = 4

export interface PasswordHasherOptions {
	/**
	 * Stored hashes to learn cost classes from before the first login is
	 * checked (see verifyForLogin); called once, again after a failure.
	 */
	storedHashSample?: () => Promise<string[]>
	/** Told of a stored hash refused unread (malformed, or an absurd cost): the scheme and why, never the hash. */
	onRefusedHash?: (refusal: HashRefusal) => void
}

/** A cost class a login check covers: Latchkey's own argon2id at some parameters, or another scheme's, covered by a decoy. */
type CostClass = { parameters: HashParameters; decoy?: undefined } | { parameters?: undefined; decoy: string }
/** argon2 first, costliest first (see verifyForLogin); other schemes after, in the order learnt. */
const argon2Cost = (costClass: CostClass) => (costClass.parameters ? costClass.parameters.memoryCost * costClass.parameters.timeCost : 0)

export class PasswordHasher {
	private readonly current: HashParameters
	/** The caps of hash-schemes.ts, raised to the configured argon2id settings, which are never refused. */
	private readonly caps: HashCostCaps
	/** Cost classes of stored hashes seen other than the current one, by key; at most MAX_LEGACY_PARAMETER_SETS. */
	private readonly legacy = new Map<string, CostClass>()
	/** One dummy hash per cost class, made on first need: of a random password (argon2id) or a decoy (other schemes). */
	private readonly dummies = new Map<string, Promise<string>>()
	private sampled: Promise<void> | undefined

	constructor(
		private readonly settings: PasswordSettings,
		private readonly options: PasswordHasherOptions = {},
	) {
		this.current = { memoryCost: settings.memoryCost, timeCost: settings.timeCost }
		this.caps = {
			...HASH_COST_CAPS,
			argon2MemoryKib: Math.max(HASH_COST_CAPS.argon2MemoryKib, settings.memoryCost),
			argon2Passes: Math.max(HASH_COST_CAPS.argon2Passes, settings.timeCost),
		}
	}

	async hash(password: string): Promise<string> {
		return this.hashWith(normalizePassword(password), this.current)
	}

	async verify(password: string, hash: string): Promise<boolean> {
		return this.read(hash) !== undefined && this.verifyTyped(password, hash)
	}

	/**
	 * The login's check, whose hashing work is the same whether the account
	 * exists (`storedHash`) or not (undefined), and whatever scheme and cost
	 * its hash has: one verification in every cost class the hasher knows —
	 * the configured argon2id set, and the legacy classes it has learnt
	 * (older argon2id settings, imported schemes: hash-schemes.ts) — run side
	 * by side on the pool. The stored hash is verified in its own class and a
	 * dummy hash in each other; an unknown email verifies dummies in all of
	 * them. So an account still on old parameters, or on an imported bcrypt,
	 * scrypt or PBKDF2 hash, costs what an unknown email costs: the sum of the
	 * classes' costs in CPU, the costliest one in time while cores are free.
	 *
	 * A stored hash of a class not yet known teaches it (until the bound); one
	 * beyond the bound is verified on top of the dummies, so it costs more. A
	 * stored hash that is refused unread (malformed, an absurd cost) is not
	 * verified at all: the check does an unknown email's work and fails.
	 */
	async verifyForLogin(password: string, storedHash: string | undefined): Promise<boolean> {
		await this.sampleStoredHashes()
		const readable = storedHash === undefined ? undefined : this.read(storedHash)
		const own = readable && storedHash !== undefined ? this.learn(readable.costClass, readable.decoy, storedHash) : undefined
		// Costliest first: the pool hands the first job to the thread that finished last, the one that ran the
		// costliest set before and still holds that much memory; swapping sizes costs fresh pages (2–3× the time, measured).
		const classes = this.costClasses().sort(([, a], [, b]) => argon2Cost(b) - argon2Cost(a))
		// The hashes first, so that every check hands its jobs to the pool at once and in the same order.
		const hashes = await Promise.all(classes.map(([key, costClass]) => (key === own ? storedHash : undefined) ?? this.dummy(key, costClass)))
		let realAt = classes.findIndex(([key]) => key === own)
		if (readable && storedHash !== undefined && realAt < 0) realAt = hashes.push(storedHash) - 1
		const results = await Promise.all(hashes.map((hash) => this.verifyTyped(password, hash)))
		return results[realAt] === true
	}

	/**
	 * Adds the cost class of a stored hash to those every login check covers,
	 * and starts making its dummy. Returns the class's key when it is covered
	 * (the configured set, a known class, or a new one within
	 * MAX_LEGACY_PARAMETER_SETS), undefined otherwise (also for a hash refused unread).
	 */
	learnParameters(storedHash: string): string | undefined {
		const readable = this.read(storedHash)
		return readable && this.learn(readable.costClass, readable.decoy, storedHash)
	}

	/** The cost classes a login check covers, by key: the configured argon2id set first. */
	parameterSets(): Array<[string, CostClass]> {
		return this.costClasses()
	}

	/** True when a stored hash is not Latchkey's argon2id at the configured parameters (imported hashes included). */
	needsRehash(hash: string): boolean {
		const parameters = hashParameters(hash)
		return !parameters || parametersKey(parameters) !== parametersKey(this.current)
	}

	private costClasses(): Array<[string, CostClass]> {
		return [[parametersKey(this.current), { parameters: this.current }], ...this.legacy]
	}

	/** A stored hash read under this hasher's caps; undefined (and the refusal told, without the hash) when refused. */
	private read(storedHash: string) {
		const read = readStoredHash(storedHash, this.caps)
		if (read.ok) return read
		this.options.onRefusedHash?.({ scheme: read.scheme, reason: read.reason })
		return undefined
	}

	private learn(key: string, decoy: () => string, storedHash: string): string | undefined {
		if (key === parametersKey(this.current) || this.legacy.has(key)) return key
		if (this.legacy.size >= MAX_LEGACY_PARAMETER_SETS) return undefined
		const parameters = hashParameters(storedHash)
		const costClass: CostClass = parameters ? { parameters } : { decoy: decoy() }
		this.legacy.set(key, costClass)
		// Made now, so that the next unknown email does not wait for it (a failure is retried on use).
		this.dummy(key, costClass).catch(() => {})
		return key
	}

	private async sampleStoredHashes() {
		const sample = this.options.storedHashSample
		if (!sample) return
		this.sampled ??= sample().then(
			(hashes) => void hashes.forEach((hash) => this.learnParameters(hash)),
			(error: unknown) => {
				this.sampled = undefined
				throw error
			},
		)
		await this.sampled
	}

	private dummy(key: string, costClass: CostClass): Promise<string> {
		if (costClass.decoy !== undefined) return Promise.resolve(costClass.decoy)
		let made = this.dummies.get(key)
		if (!made) {
			made = this.hashWith(crypto.randomUUID(), costClass.parameters)
			// Retried on next use; a legacy set Bun cannot hash with (an absurd cost written into the table) is dropped.
			made.catch(() => {
				this.dummies.delete(key)
				this.legacy.delete(key)
			})
			this.dummies.set(key, made)
		}
		return made
	}

	private async hashWith(normalized: string, { memoryCost, timeCost }: HashParameters): Promise<string> {
		return String(await hashingPool(this.settings.niceness).run({ op: 'hash', password: normalized, memoryCost, timeCost }))
	}

	/** Verifies on the pool; the password as typed, each scheme normalizing it as its service did. */
	private async verifyTyped(password: string, hash: string): Promise<boolean> {
		return (await hashingPool(this.settings.niceness).run({ op: 'verify', password, hash, caps: this.caps })) === true
	}
}
