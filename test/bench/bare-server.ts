/**
 * The yardstick for the authenticated read: GET /api/users/{id} as a bare
 * Bun.serve handler over postgres.js, with no framework, run as its own
 * process by run.ts. Same pool size and the same row shape as the service.
 *
 * BARE_MODE=lookup (the goal's denominator) does only the user's primary-key
 * lookup. BARE_MODE=same-work also does what the service must do per request
 * by design — verify the HS256 access token and look the session up joined
 * with its user — so that the gap between the two bare figures is the cost
 * of the design and the gap to the service is the cost of the framework.
 *
 * Environment: DATABASE_URL, PORT, DATABASE_POOL_MAX, BARE_MODE, JWT_SECRET.
 */
import { jwtVerify } from 'jose'
import postgres from 'postgres'

const url = process.env.DATABASE_URL
if (!url) throw new Error('DATABASE_URL is required')
const mode = process.env.BARE_MODE === 'same-work' ? 'same-work' : 'lookup'
const secret = new TextEncoder().encode(process.env.JWT_SECRET ?? '')
const sql = postgres(url, { max: Number(process.env.DATABASE_POOL_MAX ?? 10), onnotice: () => {} })

interface UserRow {
	id: string
	email: string
	name: string
	role: string
	status: string
	created_at: Date
	updated_at: Date
	deactivated_at: Date | null
}

const toResource = (row: UserRow) => ({
	id: row.id,
	email: row.email,
	name: row.name,
	role: row.role,
	status: row.status,
	createdAt: row.created_at.toISOString(),
	updatedAt: row.updated_at.toISOString(),
	deactivatedAt: row.deactivated_at?.toISOString() ?? null,
})

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const json = (body: unknown, status = 200) => Response.json(body, { status })

/** Same-work mode: the caller must hold a live session of an active account, as in src/modules/auth/guard.ts. */
async function callerAllowed(request: Request, id: string): Promise<boolean> {
	const token = /^Bearer +(\S+)$/i.exec(request.headers.get('authorization') ?? '')?.[1]
	if (!token) return false
	try {
		const { payload } = await jwtVerify(token, secret, {
			algorithms: ['HS256'],
			issuer: 'latchkey',
			audience: 'latchkey',
			typ: 'at+jwt',
			clockTolerance: 30,
		})
		const [row] = await sql<{ id: string; role: string }[]>`
			select u.id, u.role from sessions s join users u on u.id = s.user_id
			where s.id = ${String(payload.sid)} and s.user_id = ${String(payload.sub)}
			  and s.revoked_at is null and s.expires_at > now() and u.status = 'active'
			limit 1`
		return row !== undefined && (row.id === id || row.role === 'admin')
	} catch {
		return false
	}
}

const server = Bun.serve({
	port: Number(process.env.PORT ?? 0),
	hostname: '127.0.0.1',
	async fetch(request) {
		const { pathname } = new URL(request.url)
		const id = pathname.startsWith('/api/users/') ? pathname.slice('/api/users/'.length) : undefined
		if (!id || !UUID.test(id)) return json({ title: 'Not Found' }, 404)
		if (mode === 'same-work' && !(await callerAllowed(request, id))) return json({ title: 'Unauthorized' }, 401)
		const [row] = await sql<UserRow[]>`
			select id, email, name, role, status, created_at, updated_at, deactivated_at from users where id = ${id}`
		if (!row) return json({ title: 'Not Found' }, 404)
		return json({ data: toResource(row), message: 'User', errors: [] })
	},
})
console.log(JSON.stringify({ port: server.port, mode }))
