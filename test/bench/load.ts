/**
 * The load generator, run as its own process by run.ts (`bun test/bench/load.ts spec.json`),
 * so that its CPU time is not charged to the bench's own timers and the
 * service sees ordinary TCP clients. Reads a LoadSpec, runs autocannon,
 * prints one LoadResult as JSON on the last line of stdout.
 */
import autocannon, { type Request } from 'autocannon'
import { Secret, TOTP } from 'otpauth'
import { loadResult, type BenchSession, type LoadSpec, type PendingMfa, type Workload } from './workload'

type Requests = NonNullable<autocannon.Options['requests']>

const JSON_HEADERS = { 'content-type': 'application/json' }
const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

/** Seeded users n % 50 === 49 are deactivated (test/support/seed.ts); never log in as one of them. */
const randomActiveUser = (users: number) => {
	for (;;) {
		const n = Math.floor(Math.random() * users)
		if (n % 50 !== 49) return n
	}
}

interface TokenBody {
	data?: { accessToken?: string; refreshToken?: string; user?: { id?: string } }
}

function sessionFrom(body: string): BenchSession | undefined {
	try {
		const { data } = JSON.parse(body) as TokenBody
		if (data?.accessToken && data.refreshToken && data.user?.id)
			return { userId: data.user.id, accessToken: data.accessToken, refreshToken: data.refreshToken }
	} catch {
		// A non-JSON body is a failed request; autocannon already counts its status.
	}
	return undefined
}

/** autocannon's request hooks for a workload, plus where captured sessions land. */
function requestsFor(workload: Workload, captured: BenchSession[], pendingMfa: PendingMfa[]): Requests {
	switch (workload.kind) {
		case 'login': {
			const { users, password } = workload
			return [
				{
					method: 'POST',
					path: '/api/auth/login',
					headers: JSON_HEADERS,
					setupRequest: (request: Request) => ({
						...request,
						body: JSON.stringify({ email: `user${randomActiveUser(users)}@example.test`, password }),
					}),
					onResponse: workload.captureSessions
						? (status: number, body: string) => {
								const session = status === 200 ? sessionFrom(body) : undefined
								if (session) captured.push(session)
							}
						: undefined,
				},
			]
		}
		case 'read': {
			const { sessions } = workload
			let next = 0
			return [
				{
					method: 'GET',
					setupRequest: (request: Request) => {
						const session = sessions[next++ % sessions.length] as BenchSession
						return { ...request, path: `/api/users/${session.userId}`, headers: bearer(session.accessToken) }
					},
				},
			]
		}
		case 'get':
			return [{ method: 'GET', path: workload.path, headers: bearer(workload.token) }]
		case 'refresh': {
			// autocannon resets a connection's context after each pass over `requests`, so the
			// rotation chains live in one shared queue: a request takes a live token, its
			// response puts the successor back. With more tokens than connections it never runs dry.
			const live = workload.sessions.map((session) => session.refreshToken)
			return [
				{
					method: 'POST',
					path: '/api/auth/refresh',
					headers: JSON_HEADERS,
					setupRequest: (request: Request) => ({ ...request, body: JSON.stringify({ refreshToken: live.shift() ?? 'exhausted' }) }),
					onResponse: (status: number, body: string) => {
						const session = status === 200 ? sessionFrom(body) : undefined
						if (session) live.push(session.refreshToken)
					},
				},
			]
		}
		case 'logout': {
			const pool = [...workload.sessions]
			return [
				{
					method: 'POST',
					path: '/api/auth/logout',
					setupRequest: (request: Request) => ({
						...request,
						headers: { ...JSON_HEADERS, ...bearer(pool.pop()?.accessToken ?? 'exhausted') },
						body: JSON.stringify({ scope: 'local' }),
					}),
				},
			]
		}
		case 'password-step': {
			const { users, password } = workload
			let next = 0
			return [
				{
					method: 'POST',
					path: '/api/auth/login',
					headers: JSON_HEADERS,
					setupRequest: (request: Request, context: object) => {
						const user = users[next++ % users.length] as number
						// autocannon hands each request's response the context its setup wrote in.
						Object.assign(context, { user })
						return { ...request, body: JSON.stringify({ email: `user${user}@example.test`, password }) }
					},
					onResponse: (status: number, body: string, context: object) => {
						const mfaToken = status === 200 ? (JSON.parse(body) as { data?: { mfaToken?: string } }).data?.mfaToken : undefined
						const { user } = context as { user?: number }
						if (mfaToken && user !== undefined) pendingMfa.push({ user, mfaToken })
					},
				},
			]
		}
		case 'mfa': {
			const pending = [...workload.pending]
			return [
				{
					method: 'POST',
					path: '/api/auth/mfa',
					headers: JSON_HEADERS,
					setupRequest: (request: Request) => {
						const next = pending.pop()
						// The code the account's app shows at this moment, computed as the app would.
						const code = next?.secret ? new TOTP({ secret: Secret.fromBase32(next.secret) }).generate() : '000000'
						return { ...request, body: JSON.stringify({ mfaToken: next?.mfaToken ?? 'exhausted', method: 'totp', code }) }
					},
				},
			]
		}
		case 'mixed': {
			const { sessions, adminToken } = workload
			let next = 0
			const unknownId = '00000000-0000-7000-8000-000000000000'
			return [
				{
					method: 'GET',
					setupRequest: (request: Request) => {
						const session = sessions[next % sessions.length] as BenchSession
						switch (next++ % 8) {
							case 5:
								return { ...request, path: `/api/users/${session.userId}`, headers: bearer(`${session.accessToken}x`) }
							case 6:
								return { ...request, path: `/api/users/${unknownId}`, headers: bearer(adminToken) }
							case 7:
								return { ...request, path: '/api/users?limit=20', headers: bearer(adminToken) }
							default:
								return { ...request, path: `/api/users/${session.userId}`, headers: bearer(session.accessToken) }
						}
					},
				},
			]
		}
	}
}

async function main() {
	const specPath = Bun.argv[2]
	if (!specPath) throw new Error('usage: bun test/bench/load.ts <spec.json>')
	const spec = (await Bun.file(specPath).json()) as LoadSpec
	const captured: BenchSession[] = []
	const pendingMfa: PendingMfa[] = []
	const started = performance.now()
	const result = await autocannon({
		url: spec.url,
		connections: spec.connections,
		duration: spec.duration,
		amount: spec.amount,
		timeout: 30,
		requests: requestsFor(spec.workload, captured, pendingMfa),
	})
	// autocannon reports whole seconds, which overstates short `amount` runs; the wall clock does not.
	const seconds = (performance.now() - started) / 1000
	process.stdout.write(`${JSON.stringify(loadResult(result, seconds, captured, pendingMfa))}\n`)
}

await main()
