import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { sql, type SQL } from 'drizzle-orm'
import { ConfigError, loadConfig } from '../src/config/env'
import { problem, startTestApp, TEST_ENV, type TestApp } from './support/app'
import { createTestDatabase, type TestDatabase } from './support/database'
import { login, signUp, type Account } from './support/fixtures'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(60_000)

const INVALID_TOKEN_CHALLENGE = 'Bearer realm="latchkey", error="invalid_token"'
const RETENTION_SECONDS = 3600
const CAP = 3

let database: TestDatabase
/** Keeps ended sessions for an hour, with no cap; `capped` allows 3 live sessions per user. */
let retaining: TestApp
let capped: TestApp
beforeAll(async () => {
	database = await createTestDatabase()
	retaining = await startTestApp({ SESSION_RETENTION_SECONDS: String(RETENTION_SECONDS), SESSIONS_PER_USER_MAX: '0' }, database)
	capped = await startTestApp({ SESSIONS_PER_USER_MAX: String(CAP) }, database)
})
afterAll(() => database.drop())

const rowsOf = (result: unknown) => ((result as { rows?: unknown[] }).rows ?? (result as unknown[])) as Record<string, unknown>[]
const query = async (statement: SQL) => rowsOf(await database.handle.db.execute(statement))
const idList = (ids: string[]) => sql.join(ids.map((id) => sql`${id}::uuid`), sql`, `)
const sessionIdsAmong = async (ids: string[]) =>
	(await query(sql`select id from sessions where id in (${idList(ids)})`)).map((row) => String(row.id)).sort()
const tokenCountOf = async (sessionId: string) =>
	Number((await query(sql`select count(*)::int as n from refresh_tokens where session_id = ${sessionId}`))[0]?.n)
const liveSessionCountOf = async (userId: string) =>
	Number(
		(await query(sql`select count(*)::int as n from sessions where user_id = ${userId} and revoked_at is null and expires_at > now()`))[0]
			?.n,
	)

/** Whether a session's access token, then its refresh token, is accepted; a refusal must be the usual 401. */
async function accepted(t: TestApp, account: Pick<Account, 'accessToken' | 'refreshToken'>) {
	const me = await t.call('GET', '/api/users/me', { token: account.accessToken })
	const refreshed = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: account.refreshToken } })
	for (const [res, path, detail] of [
		[me, '/api/users/me', 'The access token is invalid, expired or revoked'],
		[refreshed, '/api/auth/refresh', 'The refresh token is invalid, expired or revoked'],
	] as const) {
		if (res.status === 200) continue
		expect(res.status).toBe(401)
		expect(res.headers.get('www-authenticate')).toBe(INVALID_TOKEN_CHALLENGE)
		expect(res.body).toEqual(problem('invalid-token', 401, path, detail))
	}
	return { access: me.status === 200, refresh: refreshed.status === 200 }
}

const revoke = (t: TestApp, caller: Account, sessionId: string) =>
	t.call('DELETE', `/api/users/me/sessions/${sessionId}`, { token: caller.accessToken })
const listSessions = (t: TestApp, caller: Account) => t.call('GET', '/api/users/me/sessions', { token: caller.accessToken })

describe('settings', () => {
	test('ended sessions are kept 7 days and a user may hold 100 live sessions, unless configured; negatives stop the start', () => {
		expect(loadConfig(TEST_ENV).sessions).toEqual({ retentionSeconds: 604_800, perUserMax: 100 })
		expect(loadConfig({ ...TEST_ENV, SESSION_RETENTION_SECONDS: '0', SESSIONS_PER_USER_MAX: '0' }).sessions).toEqual({
			retentionSeconds: 0,
			perUserMax: 0,
		})
		expect(() => loadConfig({ ...TEST_ENV, SESSION_RETENTION_SECONDS: '-1', SESSIONS_PER_USER_MAX: 'many' })).toThrow(ConfigError)
		try {
			loadConfig({ ...TEST_ENV, SESSION_RETENTION_SECONDS: '-1', SESSIONS_PER_USER_MAX: 'many' })
		} catch (error) {
			expect((error as ConfigError).problems).toEqual([
				'SESSION_RETENTION_SECONDS: expected a whole number of at least 0 (got "-1")',
				'SESSIONS_PER_USER_MAX: expected a whole number of at least 0 (got "many")',
			])
		}
	})
})

describe('purging ended sessions', () => {
	test('a round deletes sessions that ended longer ago than the retention, with their refresh tokens, and keeps the rest', async () => {
		const t = retaining
		const user = await signUp(t)
		const revokedLongAgo = await login(t, user.email)
		// Rotated once: the session has a rotated token and a live one, both to go.
		const rotated = await t.call('POST', '/api/auth/refresh', { json: { refreshToken: revokedLongAgo.refreshToken } })
		expect(rotated.status).toBe(200)
		expect((await revoke(t, user, revokedLongAgo.sessionId)).status).toBe(200)
		const revokedRecently = await login(t, user.email)
		expect((await revoke(t, user, revokedRecently.sessionId)).status).toBe(200)
		const expiredLongAgo = await login(t, user.email)
		const expiredRecently = await login(t, user.email)
		await query(sql`update sessions set revoked_at = now() - interval '2 hours' where id = ${revokedLongAgo.sessionId}`)
		await query(sql`update sessions set expires_at = now() - interval '2 hours' where id = ${expiredLongAgo.sessionId}`)
		await query(sql`update sessions set expires_at = now() - interval '10 minutes' where id = ${expiredRecently.sessionId}`)
		// Until the purge, a revoked session is still there to be revoked again.
		expect((await revoke(t, user, revokedLongAgo.sessionId)).status).toBe(200)
		expect(await tokenCountOf(revokedLongAgo.sessionId)).toBe(2)

		const purged = await t.app.decorator.sessionUpkeep.purge()

		expect(purged.sessions).toBeGreaterThanOrEqual(2)
		expect(purged.refreshTokens).toBeGreaterThanOrEqual(3)
		const all = [user, revokedLongAgo, revokedRecently, expiredLongAgo, expiredRecently].map((account) => account.sessionId)
		expect(await sessionIdsAmong(all)).toEqual([user.sessionId, revokedRecently.sessionId, expiredRecently.sessionId].sort())
		expect(await tokenCountOf(revokedLongAgo.sessionId)).toBe(0)
		expect(await tokenCountOf(expiredLongAgo.sessionId)).toBe(0)
		for (const kept of [user, revokedRecently, expiredRecently]) expect(await tokenCountOf(kept.sessionId)).toBe(1)

		const gone = await revoke(t, user, revokedLongAgo.sessionId)
		expect(gone.status).toBe(404)
		expect(gone.body).toEqual(
			problem('not-found', 404, `/api/users/me/sessions/${revokedLongAgo.sessionId}`, 'No such session for this user'),
		)
		expect((await revoke(t, user, revokedRecently.sessionId)).body.data).toMatchObject({ id: revokedRecently.sessionId })
		expect(await accepted(t, { accessToken: rotated.body.data.accessToken, refreshToken: rotated.body.data.refreshToken })).toEqual({
			access: false,
			refresh: false,
		})
		expect(await accepted(t, expiredLongAgo)).toEqual({ access: false, refresh: false })
		expect(await accepted(t, user)).toEqual({ access: true, refresh: true })

		expect(await t.app.decorator.sessionUpkeep.purge()).toEqual({ sessions: 0, refreshTokens: 0 })
	})

	test('one round takes a backlog larger than a step in bounded steps, to the end', async () => {
		const t = retaining
		const user = await signUp(t)
		// Setup only: 1,200 sessions that ended two days ago (half revoked, half expired), three tokens each.
		await query(sql`
			insert into sessions (id, user_id, created_at, last_used_at, expires_at, revoked_at)
			select gen_random_uuid(), ${user.id}, now() - interval '3 days', now() - interval '3 days',
				case when g % 2 = 0 then now() + interval '1 day' else now() - interval '2 days' end,
				case when g % 2 = 0 then now() - interval '2 days' end
			from generate_series(1, 1200) as g`)
		await query(sql`
			insert into refresh_tokens (id, session_id, token_hash)
			select gen_random_uuid(), s.id, md5(s.id::text || '/' || g)
			from sessions s cross join generate_series(1, 3) as g
			where s.user_id = ${user.id} and s.id <> ${user.sessionId}`)

		const purged = await t.app.decorator.sessionUpkeep.purge()

		expect(purged).toEqual({ sessions: 1200, refreshTokens: 3600 })
		expect(await query(sql`select id from sessions where user_id = ${user.id}`)).toEqual([{ id: user.sessionId }])
		expect(await tokenCountOf(user.sessionId)).toBe(1)
		expect(await accepted(t, user)).toEqual({ access: true, refresh: true })
	})

	test('instances purging at once share the work: everything ended goes once, and neither fails', async () => {
		const user = await signUp(retaining)
		await query(sql`
			insert into sessions (id, user_id, expires_at, revoked_at)
			select gen_random_uuid(), ${user.id}, now() + interval '1 day', now() - interval '2 days' from generate_series(1, 1500)`)
		await query(sql`
			insert into refresh_tokens (id, session_id, token_hash)
			select gen_random_uuid(), s.id, md5(s.id::text || '/' || g)
			from sessions s cross join generate_series(1, 2) as g
			where s.user_id = ${user.id} and s.id <> ${user.sessionId}`)
		const others = await Promise.all([1, 2].map(() => startTestApp({ SESSION_RETENTION_SECONDS: String(RETENTION_SECONDS) }, database)))

		const rounds = await Promise.all([retaining, ...others].map((instance) => instance.app.decorator.sessionUpkeep.purge()))

		expect(rounds.reduce((sum, round) => sum + round.sessions, 0)).toBe(1500)
		expect(rounds.reduce((sum, round) => sum + round.refreshTokens, 0)).toBe(3000)
		expect(await query(sql`select id from sessions where user_id = ${user.id}`)).toEqual([{ id: user.sessionId }])
	})

	test('with a retention of 0, a session goes at the first round after it ends', async () => {
		const eager = await startTestApp({ SESSION_RETENTION_SECONDS: '0' }, database)
		const user = await signUp(eager)
		const other = await login(eager, user.email)
		expect((await eager.call('POST', '/api/auth/logout', { token: other.accessToken })).status).toBe(200)

		await eager.app.decorator.sessionUpkeep.purge()

		expect(await sessionIdsAmong([user.sessionId, other.sessionId])).toEqual([user.sessionId])
		expect(await accepted(eager, user)).toEqual({ access: true, refresh: true })
	})
})

describe('SESSIONS_PER_USER_MAX', () => {
	test("a login beyond the cap revokes the user's oldest live sessions, whose access and refresh tokens are then refused", async () => {
		const first = await signUp(capped)
		const second = await login(capped, first.email)
		const third = await login(capped, first.email)
		const bystander = await signUp(capped)
		expect(await liveSessionCountOf(first.id)).toBe(3)

		const fourth = await login(capped, first.email)

		expect(await accepted(capped, first)).toEqual({ access: false, refresh: false })
		const listed = await listSessions(capped, fourth)
		expect(listed.status).toBe(200)
		expect((listed.body.data.items as Array<{ id: string }>).map((item) => item.id).sort()).toEqual(
			[second.sessionId, third.sessionId, fourth.sessionId].sort(),
		)
		expect(await accepted(capped, second)).toEqual({ access: true, refresh: true })
		expect(await accepted(capped, bystander)).toEqual({ access: true, refresh: true })

		await login(capped, first.email)
		// `second` was refreshed by `accepted` above, but the cap goes by when a session started.
		expect(await liveSessionCountOf(first.id)).toBe(3)
		expect(await sessionIdsAmong([second.sessionId])).toEqual([second.sessionId])
		const [secondRow] = await query(sql`select revoked_at from sessions where id = ${second.sessionId}`)
		expect(secondRow?.revoked_at).not.toBeNull()
	})

	test('sessions that ended, by logout or expiry, do not count toward the cap', async () => {
		const first = await signUp(capped)
		const loggedOut = await login(capped, first.email)
		const expired = await login(capped, first.email)
		expect((await capped.call('POST', '/api/auth/logout', { token: loggedOut.accessToken })).status).toBe(200)
		await query(sql`update sessions set expires_at = now() - interval '1 minute' where id = ${expired.sessionId}`)

		const second = await login(capped, first.email)
		const third = await login(capped, first.email)

		for (const account of [first, second, third]) expect((await capped.call('GET', '/api/users/me', { token: account.accessToken })).status).toBe(200)
		expect(await liveSessionCountOf(first.id)).toBe(3)
	})

	test('20 logins of one user at once leave exactly the cap of live sessions, and only their tokens work', async () => {
		const user = await signUp(capped)
		const logins = await Promise.all(
			Array.from({ length: 20 }, () => capped.call('POST', '/api/auth/login', { json: { email: user.email, password: user.password } })),
		)
		expect(logins.map((res) => res.status)).toEqual(Array(20).fill(200))

		expect(await liveSessionCountOf(user.id)).toBe(CAP)
		const working: Account[] = []
		for (const res of logins) {
			const account = { ...user, accessToken: res.body.data.accessToken, refreshToken: res.body.data.refreshToken }
			if ((await capped.call('GET', '/api/users/me', { token: account.accessToken })).status === 200) working.push(account)
		}
		expect(working).toHaveLength(CAP)
		const [survivor] = working
		if (!survivor) throw new Error('no session survived')
		const listed = await listSessions(capped, survivor)
		expect(listed.status).toBe(200)
		expect(listed.body.data.items).toHaveLength(CAP)
		expect(await accepted(capped, user)).toEqual({ access: false, refresh: false })
	})

	test('0 means no cap', async () => {
		const user = await signUp(retaining)
		for (let i = 0; i < 4; i++) await login(retaining, user.email)
		expect(await liveSessionCountOf(user.id)).toBe(5)
		expect(await accepted(retaining, user)).toEqual({ access: true, refresh: true })
	})
})
