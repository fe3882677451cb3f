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
	/** POST /api/auth/login as these seeded users in turn (accounts with a TOTP factor): each answer's mfaToken is kept. */
	| { kind: 'password-step'; users: number[]; password: string }
	/** POST /api/auth/mfa, each request with an mfaToken of its own and the code its account's app shows now (run with `amount`). */
	| { kind: 'mfa'; pending: PendingMfa[] }

/** A login that owes its second factor: the token, and the TOTP secret of its account. */
export interface PendingMfa {
	user: number
	mfaToken: string
	secret?: string
}

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
	/** mfaTokens answered by password steps. */
	pendingMfa?: PendingMfa[]
}

/** A LoadResult from what a section timed itself (whole flows, commit → receipt), rather than from autocannon. */
export function measuredLoad(ok: number, seconds: number, latency: { p50Ms: number; p99Ms: number; meanMs?: number; maxMs: number }, failed = 0): LoadResult {
	return {
		requests: ok + failed,
		okPerSecond: seconds > 0 ? ok / seconds : 0,
		p50: Math.round(latency.p50Ms * 10) / 10,
		p99: Math.round(latency.p99Ms * 10) / 10,
		mean: latency.meanMs ?? 0,
		max: latency.maxMs,
		durationSeconds: seconds,
		non2xx: failed,
		errors: 0,
		timeouts: 0,
		statusCodes: {},
		captured: [],
	}
}

/** An autocannon result as a LoadResult: 2xx per second of wall clock (autocannon's own seconds are whole ones). */
export function loadResult(
	result: import('autocannon').Result,
	seconds: number,
	captured: BenchSession[] = [],
	pendingMfa: PendingMfa[] = [],
): LoadResult {
	const statusCodes: Record<string, number> = {}
	for (const [code, stats] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = stats.count ?? 0
	const ok = Object.entries(statusCodes)
		.filter(([code]) => code.startsWith('2'))
		.reduce((sum, [, count]) => sum + count, 0)
	return {
		requests: result.requests.total,
		okPerSecond: seconds > 0 ? ok / seconds : 0,
		p50: result.latency.p50,
		p99: result.latency.p99,
		mean: result.latency.average,
		max: result.latency.max,
		durationSeconds: seconds,
		non2xx: result.non2xx,
		errors: result.errors,
		timeouts: result.timeouts,
		statusCodes,
		captured,
		pendingMfa,
	}
}

/** Runs a load generator script in its own process with a spec file; returns the LoadResult it prints last. */
export async function runLoadGenerator(command: string[], spec: unknown, artifacts: string): Promise<LoadResult> {
	const { join } = await import('node:path')
	const specPath = join(artifacts, `bench-load-${Bun.randomUUIDv7()}.json`)
	await Bun.write(specPath, JSON.stringify(spec))
	try {
		const child = Bun.spawn([...command, specPath], { stdout: 'pipe', stderr: 'pipe' })
		const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
		const last = stdout.trim().split('\n').at(-1)
		if (code !== 0 || !last) throw new Error(`load generator failed (${code}): ${stderr.slice(-2000)}`)
		return JSON.parse(last) as LoadResult
	} finally {
		await Bun.file(specPath).delete()
	}
}
