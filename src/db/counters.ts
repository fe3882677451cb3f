import { RedisClient } from 'bun'
import type { Logger } from '../log'

export interface Count {
	count: number
	/** When the window of this key ends (epoch ms). */
	resetAt: number
}

/**
 * Fixed-window counters shared by the rate limits and the login lockout:
 * process memory by default, Redis when several instances must share them.
 * A store like the database, opened at start and closed at stop, so it sits
 * beside it: below both http/rate-limit.ts and modules/auth/lockout.ts.
 */
export interface CounterStore {
	increment(key: string, windowMs: number): Promise<Count>
	/** Takes one back from a live count (never below zero, never reviving an expired key). */
	decrement(key: string): Promise<void>
	/** Milliseconds until the key expires; 0 when it does not exist. */
	remaining(key: string): Promise<number>
	/** Sets a key that lives for `ttlMs` (used for locks). */
	mark(key: string, ttlMs: number): Promise<void>
	delete(key: string): Promise<void>
	close(): Promise<void>
}

/** In-process counters; expired keys are swept so memory stays bounded by live clients. */
export class MemoryCounterStore implements CounterStore {
	private readonly entries = new Map<string, Count>()
	private readonly sweeper = setInterval(() => this.sweep(), 30_000)

	constructor() {
		this.sweeper.unref()
	}

	async increment(key: string, windowMs: number): Promise<Count> {
		const now = Date.now()
		const entry = this.entries.get(key)
		if (!entry || entry.resetAt <= now) {
			const fresh = { count: 1, resetAt: now + windowMs }
			this.entries.set(key, fresh)
			return { ...fresh }
		}
		entry.count++
		return { ...entry }
	}

	async decrement(key: string): Promise<void> {
		const entry = this.entries.get(key)
		if (entry && entry.resetAt > Date.now() && entry.count > 0) entry.count--
	}

	async remaining(key: string): Promise<number> {
		const entry = this.entries.get(key)
		return entry ? Math.max(0, entry.resetAt - Date.now()) : 0
	}

	async mark(key: string, ttlMs: number): Promise<void> {
		this.entries.set(key, { count: 1, resetAt: Date.now() + ttlMs })
	}

	async delete(key: string): Promise<void> {
		this.entries.delete(key)
	}

	async close(): Promise<void> {
		clearInterval(this.sweeper)
		this.entries.clear()
	}

	private sweep() {
		const now = Date.now()
		for (const [key, entry] of this.entries) if (entry.resetAt <= now) this.entries.delete(key)
	}
}

const COMMAND_TIMEOUT_MS = 250
const PROBE_INTERVAL_MS = 1000

// One round trip, atomic: count and start the window on the first hit.
const INCREMENT = `local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local t = redis.call('PTTL', KEYS[1])
if t < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); t = tonumber(ARGV[1]) end
return {c, t}`

const DECREMENT = `if redis.call('GET', KEYS[1]) and tonumber(redis.call('GET', KEYS[1])) > 0 then redis.call('DECR', KEYS[1]) end
return 0`

/**
 * Counters in Redis through Bun's built-in client, so that every instance
 * shares one budget, behind a circuit breaker: when a command fails or takes
 * longer than 250 ms, the breaker opens and every counter lives in this
 * instance's memory — limits and lockout keep working per instance and no
 * request waits on a dead Redis — while a background probe pings Redis every
 * second and closes the breaker when it answers. Each change of state is
 * logged once. A lock taken in memory during an outage still holds after
 * Redis is back.
 */
export class RedisCounterStore implements CounterStore {
	private readonly client: RedisClient
	private readonly fallback = new MemoryCounterStore()
	private probe: Timer | undefined

	constructor(
		url: string,
		private readonly log: Logger,
		private readonly prefix = 'latchkey:',
	) {
		this.client = new RedisClient(url, { connectionTimeout: 2000, autoReconnect: true, maxRetries: 1_000_000 })
		this.client.connect().catch((error: unknown) => this.open(error))
	}

	/** Whether counters currently live in Redis (closed breaker) rather than in memory. */
	get shared() {
		return this.probe === undefined
	}

	/** A command, given up after a short wait so that a dead Redis never stalls a request. */
	private send(command: string, args: string[]): Promise<unknown> {
		let timer: Timer | undefined
		const timeout = new Promise<never>((_, reject) => {
			timer = setTimeout(() => reject(Object.assign(new Error('Redis timed out'), { code: 'ETIMEDOUT' })), COMMAND_TIMEOUT_MS)
		})
		return Promise.race([this.client.send(command, args), timeout]).finally(() => clearTimeout(timer))
	}

	/** Redis while the breaker is closed; the memory counters while it is open, or when this command fails. */
	private async run<T>(inRedis: () => Promise<T>, inMemory: () => Promise<T>): Promise<T> {
		if (!this.shared) return inMemory()
		try {
			return await inRedis()
		} catch (error) {
			this.open(error)
			return inMemory()
		}
	}

	private open(error: unknown) {
		if (!this.shared) return
		this.log.warn(
			{ code: (error as { code?: unknown }).code },
			'Redis unreachable: rate limits and lockout count in this instance’s memory until it is back',
		)
		this.probe = setInterval(() => void this.tryClose(), PROBE_INTERVAL_MS)
		this.probe.unref()
	}

	private async tryClose() {
		try {
			await this.send('PING', [])
		} catch {
			return
		}
		if (this.shared) return
		clearInterval(this.probe)
		this.probe = undefined
		this.log.info('Redis is back: rate limits and lockout are shared again')
	}

	increment(key: string, windowMs: number): Promise<Count> {
		return this.run(
			async () => {
				const [count, ttl] = (await this.send('EVAL', [INCREMENT, '1', this.prefix + key, String(windowMs)])) as [number, number]
				return { count, resetAt: Date.now() + ttl }
			},
			() => this.fallback.increment(key, windowMs),
		)
	}

	async decrement(key: string): Promise<void> {
		await this.fallback.decrement(key)
		await this.run(async () => void (await this.send('EVAL', [DECREMENT, '1', this.prefix + key])), async () => {})
	}

	async remaining(key: string): Promise<number> {
		// Memory too: what was counted there during an outage (a lock) is not forgotten when Redis returns.
		const inMemory = await this.fallback.remaining(key)
		const inRedis = await this.run(async () => Math.max(0, Number(await this.send('PTTL', [this.prefix + key]))), async () => 0)
		return Math.max(inMemory, inRedis)
	}

	mark(key: string, ttlMs: number): Promise<void> {
		return this.run(
			async () => void (await this.send('SET', [this.prefix + key, '1', 'PX', String(ttlMs)])),
			() => this.fallback.mark(key, ttlMs),
		)
	}

	async delete(key: string): Promise<void> {
		await this.fallback.delete(key)
		await this.run(async () => void (await this.send('DEL', [this.prefix + key])), async () => {})
	}

	async close(): Promise<void> {
		clearInterval(this.probe)
		await this.fallback.close()
		this.client.close()
	}
}

export function createCounterStore(redisUrl: string | undefined, log: Logger, prefix?: string): CounterStore {
	return redisUrl ? new RedisCounterStore(redisUrl, log, prefix) : new MemoryCounterStore()
}
