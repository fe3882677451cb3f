/**
 * What the benchmark asks of its load generator, and what it hears back.
 * The two run in separate processes (see load.ts), so everything here is
 * plain JSON: autocannon's request hooks are built on the far side from it.
 */

/** A session as the bench keeps it: enough to read, refresh or log out as its user. */
export interface BenchSession {
	userId: string
	accessToken: string
	refreshToken: string
}

export type Workload =
	/** POST /api/auth/login as seeded users picked at random (never a deactivated one). */
	| { kind: 'login'; users: number; password: string; captureSessions?: boolean }
	/** GET /api/users/{id} as the owner of each session, round-robin over the pool. */
	| { kind: 'read'; sessions: BenchSession[] }
	/** One fixed GET with one bearer token (the admin's list pages). */
	| { kind: 'get'; path: string; token: string }
	/** POST /api/auth/refresh: each connection follows its own rotation chain, so every token is fresh. */
	| { kind: 'refresh'; sessions: BenchSession[] }
	/** POST /api/auth/logout, each request with a session of its own (run with `amount` = pool size). */
	| { kind: 'logout'; sessions: BenchSession[] }
	/**
	 * The memory rounds: reads that succeed, reads with a forged token (401),
	 * reads of an unknown id (404) and admin list pages, so error paths are
	 * exercised too — a leak usually hides in one of them.
	 */
	| { kind: 'mixed'; sessions: BenchSession[]; adminToken: string }

export interface LoadSpec {
	url: string
	connections: number
	/** Seconds; ignored when `amount` is set. */
	duration: number
	/** Stop after this many requests instead of after `duration`. */
	amount?: number
	workload: Workload
}

export interface LoadResult {
	requests: number
	/** 2xx responses per second over the whole run. */
	okPerSecond: number
	/** Latency in milliseconds (autocannon records whole ms plus fractions). */
	p50: number
	p99: number
	mean: number
	max: number
	durationSeconds: number
	non2xx: number
	errors: number
	timeouts: number
	statusCodes: Record<string, number>
	/** Sessions issued by login responses, when asked for. */
	captured: BenchSession[]
}
