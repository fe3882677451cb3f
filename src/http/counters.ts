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
 */
export interface CounterStore {
	increment(key: string, windowMs: number): Promise<Count>
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

// One round trip, atomic: count and start the window on the first hit.
const INCREMENT = `local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local t = redis.call('PTTL', KEYS[1])
if t < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); t = tonumber(ARGV[1]) end
return {c, t}`

/**
 * Counters in Redis through Bun's built-in client, so that every instance
 * shares one budget. If Redis is unreachable, increments fail open (the
 * request is let through, and a warning logged at most every 30 s): an
 * outage of the counter store must not become an outage of login.
 */
export class RedisCounterStore implements CounterStore {
	private readonly client: RedisClient
	private lastWarning = 0

	constructor(
		url: string,
		private readonly log: Logger,
		private readonly prefix = 'latchkey:',
	) {
		this.client = new RedisClient(url, { connectionTimeout: 2000, autoReconnect: true, maxRetries: 1_000_000 })
		this.client.connect().catch((error: unknown) => this.warn(error))
	}

	/** A command, given up after a short wait so that a dead Redis never stalls a request. */
	private send(command: string, args: string[]): Promise<unknown> {
		let timer: Timer | undefined
		const timeout = new Promise<never>((_, reject) => {
			timer = setTimeout(() => reject(Object.assign(new Error('Redis timed out'), { code: 'ETIMEDOUT' })), COMMAND_TIMEOUT_MS)
		})
		return Promise.race([this.client.send(command, args), timeout]).finally(() => clearTimeout(timer))
	}

	async increment(key: string, windowMs: number): Promise<Count> {
		try {
			const [count, ttl] = (await this.send('EVAL', [INCREMENT, '1', this.prefix + key, String(windowMs)])) as [number, number]
			return { count, resetAt: Date.now() + ttl }
		} catch (error) {
			this.warn(error)
			return { count: 0, resetAt: Date.now() + windowMs }
		}
	}

	async remaining(key: string): Promise<number> {
		try {
			return Math.max(0, Number(await this.send('PTTL', [this.prefix + key])))
		} catch (error) {
			this.warn(error)
			return 0
		}
	}

	async mark(key: string, ttlMs: number): Promise<void> {
		try {
			await this.send('SET', [this.prefix + key, '1', 'PX', String(ttlMs)])
		} catch (error) {
			this.warn(error)
		}
	}

	async delete(key: string): Promise<void> {
		try {
			await this.send('DEL', [this.prefix + key])
		} catch (error) {
			this.warn(error)
		}
	}

	async close(): Promise<void> {
		this.client.close()
	}

	private warn(error: unknown) {
		if (Date.now() - this.lastWarning < 30_000) return
		this.lastWarning = Date.now()
		this.log.warn({ code: (error as { code?: unknown }).code }, 'Redis unreachable: rate limits and lockout fail open until it is back')
	}
}

export function createCounterStore(redisUrl: string | undefined, log: Logger, prefix?: string): CounterStore {
	return redisUrl ? new RedisCounterStore(redisUrl, log, prefix) : new MemoryCounterStore()
}
