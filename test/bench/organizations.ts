/**
 * The organizations section of `bench` (run.ts calls `organizationSection`; `bun run bench -- --only organizations`):
 * the organization lists at a million users and 100,000 organizations (issue 26, point 1), where the goal is that
 * an organization of 100,000 members pages as fast as one of ten.
 *
 * The seed (idempotent; seconds, in bulk SQL beside the seeded users, kept for the next runs):
 * - 100,000 organizations, `bench-big` (created first, the oldest) and `bench-1` … `bench-99999`, named
 *   "<Word> <Word> <n>" from two short lists, one a second apart;
 * - `bench-big` has 100,000 members, the seeded accounts user0, user10, … user999990: one `owner` (the first to
 *   join), an `admin` every 1,000 members (100 of them), the rest `member`, one a second apart;
 * - `bench-n` has the ten accounts user(10n) … user(10n+9): an `owner`, an `admin`, eight `member`s;
 * - the bench's account, user500000, is a `member` of `bench-big`, the `owner` of `bench-50000` and a `member`
 *   of `bench-1` … `bench-6`: eight memberships.
 * The rows of organization_member_roles (a role per row) are written with them, as the trigger of migration 0025
 * would. Then VACUUM ANALYZE, as autovacuum would (it is off on this machine's PostgreSQL).
 *
 * The requests go from this process with fetch (keep-alive), CONCURRENCY at once; every answer is checked
 * (its status, the number of items and the first item's id against the same page read once before the load,
 * and the `Link` header's presence), and one that is not as expected is a counted failure, printed with its reason.
 * The big and the small organization's member pages are measured in alternating one-second blocks, so that both
 * see the same machine (it is shared, and its pace drifts).
 */
import postgres from 'postgres'
import { measuredLoad, type LoadResult } from './workload'

/** Requests in flight at once. */
const CONCURRENCY = 16
const ORGANIZATIONS = 100_000
const BIG_MEMBERS = 100_000
const SMALL_MEMBERS = 10
/** The bench's account (seeded user n; n % 50 = 0, so active), and the small organization it owns. */
const MEMBER_N = 500_000
const SMALL_N = MEMBER_N / SMALL_MEMBERS
/** How close to the end of a list its deep page is: rows from the end. */
const DEEP_FROM_END = 60
/** Big p99 ≤ GOAL_FACTOR × small p99 on the same page, in alternating blocks (see docs/performance.md). */
const GOAL_FACTOR = 1.5
/** And big req/s ≥ small req/s ÷ GOAL_FACTOR. */

const WORDS_A = ['Acme', 'Globex', 'Initech', 'Umbrella', 'Hooli', 'Stark', 'Wayne', 'Wonka', 'Tyrell', 'Cyberdyne', 'Soylent', 'Aperture', 'Massive', 'Vandelay', 'Gringotts', 'Oscorp', 'Pied', 'Dunder', 'Monarch', 'Nakatomi']
const WORDS_B = ['Labs', 'Industries', 'Systems', 'Holdings', 'Partners', 'Logistics', 'Foods', 'Media', 'Capital', 'Works']

type Target = { pid: number; url: string; readyAfterMs: number; stop(): Promise<void> }

export interface OrganizationBench<M extends LoadResult, R> {
	databaseUrl: string
	seconds: number
	admin: { email: string; password: string }
	/** The seeded accounts' password. */
	password: string
	log(message: string): void
	startService(env: Record<string, string>, name: string): Promise<Target>
	measure(target: Target, run: () => Promise<LoadResult>): Promise<M>
	row(id: string, scenario: string, m: M, limit: { name: string; perSecond: number | null }, goal?: string, met?: boolean | null): R
}

interface Figures {
	ok: number
	failed: number
	seconds: number
	perSecond: number
	p50Ms: number
	p99Ms: number
}

export interface OrganizationFigures {
	concurrency: number
	seed: { seeded: 'created' | 'reused'; seconds: number; organizations: number; memberships: number }
	scenarios: Record<string, Figures & { path: string }>
	/** Per member page: big ÷ small for p50, p99 and req/s. */
	ratios: Record<string, { p50: number; p99: number; rate: number; met: boolean }>
	goalFactor: number
	/** EXPLAIN ANALYZE of the hot queries on the seeded data: the plan's lines. */
	plans: Record<string, string[]>
	failures: Record<string, Record<string, number>>
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0
const sqlList = (words: string[]) => `array[${words.map((word) => `'${word}'`).join(',')}]`

/** Seeds the organizations unless they are there already; returns what it did. */
export async function seedOrganizations(sql: postgres.Sql, log: (message: string) => void) {
	const [present] = await sql<{ organizations: number; big: number; bigRoles: number; member: number }[]>`
		select (select count(*)::int from organizations where slug like 'bench-%') as organizations,
			(select count(*)::int from organization_members m join organizations o on o.id = m.organization_id where o.slug = 'bench-big') as big,
			(select count(*)::int from organization_member_roles r join organizations o on o.id = r.organization_id where o.slug = 'bench-big') as "bigRoles",
			(select count(*)::int from organization_members m join users u on u.id = m.user_id where u.email = ${`user${MEMBER_N}@example.test`}) as member`
	if (present?.organizations === ORGANIZATIONS && present.big === BIG_MEMBERS && present.bigRoles === BIG_MEMBERS && present.member === 8) {
		// Statistics as autovacuum keeps them (it is off here): a migration since the seed may have left a table without.
		await sql`analyze organizations, organization_members, organization_member_roles`
		return { seeded: 'reused' as const, seconds: 0 }
	}
	const [last] = await sql`select 1 from users where email = 'user999999@example.test'`
	if (!last) throw new Error('the organizations section needs the million seeded users (--users 1000000): its big organization has every tenth of them')
	log(`seeding ${ORGANIZATIONS} organizations (found ${present?.organizations ?? 0}, the big one with ${present?.big ?? 0} members)`)
	const started = performance.now()
	await sql.begin(async (tx) => {
		// The rows are consistent by construction: no foreign-key trigger per row (1.1 million of them).
		await tx`set local session_replication_role = replica`
		const bench = `(select id from organizations where slug like 'bench-%')`
		await tx.unsafe(`update sessions set active_organization_id = null where active_organization_id in ${bench}`)
		await tx.unsafe(`delete from organization_invitations where organization_id in ${bench}`)
		await tx.unsafe(`delete from organization_member_roles where organization_id in ${bench}`)
		await tx.unsafe(`delete from organization_members where organization_id in ${bench}`)
		await tx.unsafe(`delete from organizations where slug like 'bench-%'`)
		// The seeded accounts by number (user<n>@example.test).
		await tx.unsafe(`create temp table bench_seeded on commit drop as
			select id, substring(email from '^user([0-9]+)@')::int as n from users where email like 'user%@example.test'`)
		await tx.unsafe('create unique index on bench_seeded (n)')
		await tx.unsafe('analyze bench_seeded')
		const base = `timestamptz '2026-01-01T00:00:00Z'`
		await tx.unsafe(`insert into organizations (id, name, slug, status, created_at, updated_at)
			select gen_random_uuid(),
				case when o = 0 then 'Bench Big Organization'
					else (${sqlList(WORDS_A)})[1 + o % ${WORDS_A.length}] || ' ' || (${sqlList(WORDS_B)})[1 + (o / ${WORDS_A.length}) % ${WORDS_B.length}] || ' ' || o end,
				case when o = 0 then 'bench-big' else 'bench-' || o end,
				'active', ${base} + o * interval '1 second', ${base} + o * interval '1 second'
			from generate_series(0, ${ORGANIZATIONS - 1}) o`)
		await tx.unsafe(`insert into organization_members (organization_id, user_id, roles, joined_at, updated_at)
			select big.id, u.id,
				case when i = 0 then '{owner}'::text[] when i % 1000 = 1 then '{admin}'::text[] else '{member}'::text[] end,
				${base} + interval '2 days' + i * interval '1 second', ${base} + interval '2 days' + i * interval '1 second'
			from generate_series(0, ${BIG_MEMBERS - 1}) i
			join bench_seeded u on u.n = i * 10
			cross join (select id from organizations where slug = 'bench-big') big`)
		await tx.unsafe(`insert into organization_members (organization_id, user_id, roles, joined_at, updated_at)
			select o.id, u.id,
				case when k = 0 then '{owner}'::text[] when k = 1 then '{admin}'::text[] else '{member}'::text[] end,
				o.created_at + k * interval '1 minute', o.created_at + k * interval '1 minute'
			from (select id, created_at, substring(slug from 7)::int as n from organizations where slug ~ '^bench-[0-9]+$') o
			cross join generate_series(0, ${SMALL_MEMBERS - 1}) k
			join bench_seeded u on u.n = o.n * ${SMALL_MEMBERS} + k`)
		// The bench's account: already in bench-big (a member) and bench-50000 (its owner); a member of six more.
		await tx.unsafe(`insert into organization_members (organization_id, user_id, roles, joined_at, updated_at)
			select o.id, u.id, '{member}', o.created_at + interval '1 hour', o.created_at + interval '1 hour'
			from organizations o, bench_seeded u
			where o.slug in ('bench-1', 'bench-2', 'bench-3', 'bench-4', 'bench-5', 'bench-6') and u.n = ${MEMBER_N}`)
		// What organization_members' trigger writes (migration 0025), which replica mode skips: a row per role held.
		await tx.unsafe(`insert into organization_member_roles (organization_id, user_id, role, joined_at)
			select organization_id, user_id, unnest(roles), joined_at from organization_members where organization_id in ${bench}`)
	})
	await sql`vacuum analyze organizations, organization_members, organization_member_roles`
	return { seeded: 'created' as const, seconds: (performance.now() - started) / 1000 }
}

/** The lines of EXPLAIN ANALYZE of one statement with its parameters. */
async function explain(sql: postgres.Sql, statement: string, parameters: unknown[]) {
	const rows = await sql.unsafe<{ 'QUERY PLAN': string }[]>(`explain (analyze, buffers, costs off) ${statement}`, parameters as postgres.ParameterOrJSON<never>[])
	return rows.map((row) => row['QUERY PLAN'])
}

const cursor = (sort: string, key: string, id: string) => Buffer.from(JSON.stringify({ s: sort, k: key, i: id })).toString('base64url')

/** What a page answered, as the checks compare it. */
interface Page {
	status: number
	ids: string[]
	link: string | null
}

/** A GET of a list page with a bearer token: its status, item ids (organizations or members) and Link. */
async function getPage(url: string, token: string): Promise<Page & { reason?: string }> {
	const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } })
	const text = await response.text()
	if (response.status !== 200) return { status: response.status, ids: [], link: null, reason: `${response.status} ${text.slice(0, 120)}` }
	const body = JSON.parse(text) as { data: { items: Array<{ id?: string; user?: { id: string } }> } }
	return { status: 200, ids: body.data.items.map((item) => item.user?.id ?? item.id ?? ''), link: response.headers.get('link') }
}

/** The path a `Link: <…>; rel="next"` names. */
const nextOf = (link: string | null) => /^<([^>]+)>; rel="next"$/.exec(link ?? '')?.[1] ?? null

interface Scenario {
	id: string
	label: string
	path: string
	token: string
	expected: Page
}

/** Runs `scenarios` for `seconds` each, in alternating one-second blocks (all of them see the same machine), CONCURRENCY at once. */
async function drive(base: string, scenarios: Scenario[], seconds: number, failures: Record<string, Record<string, number>>) {
	const latencies = new Map<string, number[]>(scenarios.map((s) => [s.id, []]))
	const elapsed = new Map<string, number>(scenarios.map((s) => [s.id, 0]))
	const blocks = Math.max(1, Math.round(seconds))
	const blockMs = (seconds * 1000) / blocks
	for (let block = 0; block < blocks; block++)
		for (const scenario of scenarios) {
			const reasons = (failures[scenario.id] ??= {})
			const times = latencies.get(scenario.id) as number[]
			const started = performance.now()
			const deadline = started + blockMs
			await Promise.all(
				Array.from({ length: CONCURRENCY }, async () => {
					while (performance.now() < deadline) {
						const at = performance.now()
						const page = await getPage(`${base}${scenario.path}`, scenario.token).catch((error: unknown) => ({ status: 0, ids: [], link: null, reason: String(error).slice(0, 120) }))
						const reason =
							'reason' in page && page.reason
								? page.reason
								: page.ids.length !== scenario.expected.ids.length
									? `${page.ids.length} items, not ${scenario.expected.ids.length}`
									: page.ids[0] !== scenario.expected.ids[0]
										? 'another first item'
										: (page.link === null) !== (scenario.expected.link === null)
											? 'Link header differs'
											: undefined
						if (reason === undefined) times.push(performance.now() - at)
						else reasons[reason] = (reasons[reason] ?? 0) + 1
					}
				}),
			)
			elapsed.set(scenario.id, (elapsed.get(scenario.id) as number) + (performance.now() - started) / 1000)
		}
	return new Map(
		scenarios.map((scenario) => {
			const sorted = (latencies.get(scenario.id) as number[]).sort((a, b) => a - b)
			const time = elapsed.get(scenario.id) as number
			const failed = Object.values(failures[scenario.id] ?? {}).reduce((sum, n) => sum + n, 0)
			const figures: Figures = { ok: sorted.length, failed, seconds: time, perSecond: sorted.length / time, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99) }
			const meanMs = sorted.length ? sorted.reduce((sum, ms) => sum + ms, 0) / sorted.length : 0
			return [scenario.id, { figures, load: measuredLoad(sorted.length, time, { p50Ms: figures.p50Ms, p99Ms: figures.p99Ms, meanMs, maxMs: sorted.at(-1) ?? 0 }, failed) }]
		}),
	)
}

export async function organizationSection<M extends LoadResult, R>(bench: OrganizationBench<M, R>): Promise<{ rows: R[]; figures: OrganizationFigures }> {
	const service = await bench.startService({}, 'organizations')
	const sql = postgres(bench.databaseUrl, { max: 2, onnotice: () => {} })
	const failures: Record<string, Record<string, number>> = {}
	try {
		// After the service's start: it has brought the schema up to date.
		bench.log('13a. the organizations: seeded or reused')
		const seed = await seedOrganizations(sql, bench.log)
		const [counts] = await sql<{ organizations: number; memberships: number }[]>`
			select (select count(*)::int from organizations) as organizations, (select count(*)::int from organization_members) as memberships`
		bench.log(`${seed.seeded === 'created' ? `seeded in ${seed.seconds.toFixed(1)} s` : 'reused the seed'}: ${counts?.organizations} organizations, ${counts?.memberships} memberships`)

		const login = async (email: string, password: string) => {
			const response = await fetch(`${service.url}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) })
			if (!response.ok) throw new Error(`login as ${email}: ${response.status} ${await response.text()}`)
			return ((await response.json()) as { data: { accessToken: string; user: { id: string } } }).data
		}
		const admin = await login(bench.admin.email, bench.admin.password)
		const member = await login(`user${MEMBER_N}@example.test`, bench.password)
		const [big] = await sql<{ id: string }[]>`select id from organizations where slug = 'bench-big'`
		const [small] = await sql<{ id: string }[]>`select id from organizations where slug = ${`bench-${SMALL_N}`}`
		if (!big || !small) throw new Error('the seeded organizations are missing')

		// Deep pages: a cursor DEEP_FROM_END rows from the end of the default sort (newest first), crafted as the
		// service makes them; the scenario is the page its Link names (the next keyset page, reached as a client does).
		const [oldestOrg] = await sql<{ id: string; created_at: Date }[]>`
			select id, created_at from organizations order by created_at, id offset ${DEEP_FROM_END} limit 1`
		const deepMember = async (organizationId: string, fromEnd: number) => {
			const [row] = await sql<{ user_id: string; joined_at: Date }[]>`
				select user_id, joined_at from organization_members where organization_id = ${organizationId} order by joined_at, user_id offset ${fromEnd} limit 1`
			if (!row) throw new Error('too few members for a deep page')
			return cursor('-joinedAt', row.joined_at.toISOString(), row.user_id)
		}
		if (!oldestOrg) throw new Error('too few organizations for a deep page')
		const viaLink = async (path: string, token: string) => {
			const page = await getPage(`${service.url}${path}`, token)
			const next = nextOf(page.link)
			if (page.status !== 200 || !next) throw new Error(`${path}: ${page.status}, no next page (${page.link})`)
			return next
		}
		const orgsDeep = await viaLink(`/api/organizations?limit=20&cursor=${cursor('-createdAt', oldestOrg.created_at.toISOString(), oldestOrg.id)}`, admin.accessToken)
		const bigDeep = await viaLink(`/api/organizations/${big.id}/members?limit=20&cursor=${await deepMember(big.id, DEEP_FROM_END)}`, member.accessToken)
		// A small organization's "deep" page: the last of its ten, from its first page's Link (limit 5).
		const smallDeep = await viaLink(`/api/organizations/${small.id}/members?limit=5`, member.accessToken)
		const bigDeep5 = await viaLink(`/api/organizations/${big.id}/members?limit=5&cursor=${await deepMember(big.id, 10)}`, member.accessToken)
		// q: a name word (one organization in twenty has it); in the member lists, a number only a few accounts'
		// emails and names hold (as a surname would be), and — apart, without a goal — `user12340`, whose trigrams
		// `use`, `ser` are in every seeded email: the users-wide trigram search GET /users?q also pays.
		const orgQ = WORDS_A[3]?.toLowerCase() as string
		const bigQ = '12340'
		const commonQ = 'user12340'
		const smallQ = String(MEMBER_N + 3)

		const paths: Array<[id: string, label: string, path: string, token: string]> = [
			['orgs-first', 'GET /organizations page 1 (site admin, 100,000)', '/api/organizations?limit=20', admin.accessToken],
			['orgs-deep', 'GET /organizations near the end (Link next)', orgsDeep, admin.accessToken],
			['orgs-q', `GET /organizations?q=${orgQ} (1 in 20)`, `/api/organizations?limit=20&q=${orgQ}`, admin.accessToken],
			['orgs-name', 'GET /organizations?sort=name page 1', '/api/organizations?limit=20&sort=name', admin.accessToken],
			['orgs-name-2', 'GET /organizations?sort=name page 2 (Link next)', '', admin.accessToken],
			['orgs-user', 'GET /organizations as a user (8 memberships)', '/api/organizations?limit=20', member.accessToken],
			['user-orgs', 'GET /users/{id}/organizations (self, 8)', `/api/users/${member.user.id}/organizations?limit=20`, member.accessToken],
			['members-small-first', 'GET …/members page 1, 10 members', `/api/organizations/${small.id}/members?limit=20`, member.accessToken],
			['members-big-first', 'GET …/members page 1, 100,000 members', `/api/organizations/${big.id}/members?limit=20`, member.accessToken],
			['members-small-deep', 'GET …/members last page (limit 5, Link next), 10 members', smallDeep, member.accessToken],
			['members-big-deep', 'GET …/members near the end (limit 5, Link next), 100,000', bigDeep5, member.accessToken],
			['members-big-deep-20', 'GET …/members near the end (limit 20, Link next), 100,000', bigDeep, member.accessToken],
			['members-small-role', 'GET …/members?role=admin, 10 members (1 admin)', `/api/organizations/${small.id}/members?limit=20&role=admin`, member.accessToken],
			['members-big-role', 'GET …/members?role=admin, 100,000 members (100 admins)', `/api/organizations/${big.id}/members?limit=20&role=admin`, member.accessToken],
			['members-small-q', `GET …/members?q=${smallQ}, 10 members`, `/api/organizations/${small.id}/members?limit=20&q=${smallQ}`, member.accessToken],
			['members-big-q', `GET …/members?q=${bigQ}, 100,000 members`, `/api/organizations/${big.id}/members?limit=20&q=${bigQ}`, member.accessToken],
			['members-big-q-common', `GET …/members?q=${commonQ} (trigrams of every email), 100,000`, `/api/organizations/${big.id}/members?limit=20&q=${commonQ}`, member.accessToken],
		]
		// sort=name page 2: the Link of page 1.
		const namePage2 = await viaLink('/api/organizations?limit=20&sort=name', admin.accessToken)
		const scenarios: Scenario[] = []
		for (const [id, label, path, token] of paths) {
			const resolved = id === 'orgs-name-2' ? namePage2 : path
			const expected = await getPage(`${service.url}${resolved}`, token)
			if (expected.status !== 200 || expected.ids.length === 0) throw new Error(`${id}: ${resolved} answered ${expected.status} with ${expected.ids.length} items`)
			scenarios.push({ id, label: `${label} → ${expected.ids.length}`, path: resolved, token, expected })
		}
		const byId = (id: string) => scenarios.find((s) => s.id === id) as Scenario

		bench.log('13b. warming up')
		await drive(service.url, scenarios, Math.min(2, bench.seconds) / 4, {})

		const results = new Map<string, { figures: Figures; load: LoadResult; measured: M }>()
		const run = async (ids: string[]) => {
			let driven: Awaited<ReturnType<typeof drive>> | undefined
			const measured = await bench.measure(service, async () => {
				driven = await drive(service.url, ids.map(byId), bench.seconds, failures)
				// The watch covers the whole alternation: each row gets the same CPU and memory figures.
				const all = [...driven.values()]
				return measuredLoad(
					all.reduce((sum, r) => sum + r.figures.ok, 0),
					all.reduce((sum, r) => sum + r.figures.seconds, 0),
					{ p50Ms: 0, p99Ms: 0, maxMs: 0 },
				)
			})
			for (const [id, result] of driven ?? []) results.set(id, { ...result, measured })
		}
		bench.log('13c. GET /organizations: site admin (first, deep, q, by name), a user, /users/{id}/organizations')
		await run(['orgs-first', 'orgs-deep', 'orgs-q', 'orgs-name', 'orgs-name-2', 'orgs-user', 'user-orgs'])
		bench.log('13d. member pages, big and small in alternating blocks: first, deep')
		await run(['members-small-first', 'members-big-first', 'members-small-deep', 'members-big-deep', 'members-big-deep-20'])
		bench.log('13e. member pages, big and small in alternating blocks: role, q')
		await run(['members-small-role', 'members-big-role', 'members-small-q', 'members-big-q', 'members-big-q-common'])

		const pairs: Array<[big: string, small: string]> = [
			['members-big-first', 'members-small-first'],
			['members-big-deep', 'members-small-deep'],
			['members-big-deep-20', 'members-small-first'],
			['members-big-role', 'members-small-role'],
			['members-big-q', 'members-small-q'],
		]
		const ratios: OrganizationFigures['ratios'] = {}
		for (const [bigId, smallId] of pairs) {
			const b = (results.get(bigId) as { figures: Figures }).figures
			const s = (results.get(smallId) as { figures: Figures }).figures
			const p99 = b.p99Ms / s.p99Ms
			const rate = b.perSecond / s.perSecond
			ratios[bigId] = { p50: b.p50Ms / s.p50Ms, p99, rate, met: p99 <= GOAL_FACTOR && rate >= 1 / GOAL_FACTOR && b.failed === 0 }
		}

		bench.log('13f. the plans of the hot queries (EXPLAIN ANALYZE)')
		const plans = await queryPlans(sql, { big: big.id, small: small.id, member: member.user.id, orgQ, bigQ, commonQ, bigDeep: await deepMember(big.id, DEEP_FROM_END) })

		const rows: R[] = []
		const goal = `big p99 ≤ ${GOAL_FACTOR} × small, rate ≥ small ÷ ${GOAL_FACTOR}`
		for (const scenario of scenarios) {
			const result = results.get(scenario.id)
			if (!result) continue
			const measured = { ...result.measured, ...result.load } as M
			const ratio = ratios[scenario.id]
			const pair = pairs.find(([bigId]) => bigId === scenario.id)
			const small = pair && results.get(pair[1])
			rows.push(
				ratio && small
					? bench.row(`org-${scenario.id}`, scenario.label, measured, { name: `${pair[1]} (p99 ×${ratio.p99.toFixed(2)})`, perSecond: small.figures.perSecond }, goal, ratio.met)
					: bench.row(`org-${scenario.id}`, scenario.label, measured, { name: '', perSecond: null }),
			)
		}
		const figures: OrganizationFigures = {
			concurrency: CONCURRENCY,
			seed: { ...seed, organizations: counts?.organizations ?? 0, memberships: counts?.memberships ?? 0 },
			scenarios: Object.fromEntries(scenarios.map((s) => [s.id, { ...(results.get(s.id)?.figures as Figures), path: s.path }])),
			ratios,
			goalFactor: GOAL_FACTOR,
			plans,
			failures: Object.fromEntries(Object.entries(failures).filter(([, reasons]) => Object.keys(reasons).length)),
		}
		return { rows, figures }
	} finally {
		await sql.end()
		await service.stop()
	}
}

/** EXPLAIN ANALYZE of the statements the list routes send (src/modules/organizations/service.ts, members.ts), as drizzle writes them. */
async function queryPlans(sql: postgres.Sql, at: { big: string; small: string; member: string; orgQ: string; bigQ: string; commonQ: string; bigDeep: string }) {
	const members = `select m.roles, m.joined_at, u.id, u.email, u.name from organization_members m inner join users u on u.id = m.user_id`
	const deep = JSON.parse(Buffer.from(at.bigDeep, 'base64url').toString()) as { k: string; i: string }
	const orgs = 'select o.* from organizations o'
	const byRole = `select m.roles, m.joined_at, u.id, u.email, u.name from organization_member_roles r
		inner join organization_members m on m.organization_id = r.organization_id and m.user_id = r.user_id inner join users u on u.id = r.user_id
		where r.organization_id = $1 and r.role = $2 order by r.joined_at desc, r.user_id desc limit 21`
	return {
		'orgs-first': await explain(sql, `${orgs} order by o.created_at desc, o.id desc limit 21`, []),
		'orgs-q': await explain(sql, `${orgs} where (o.name ilike $1 or o.slug ilike $1) order by o.created_at desc, o.id desc limit 21`, [`%${at.orgQ}%`]),
		'orgs-name-2': await explain(sql, `${orgs} where (o.name, o.id) > ($1::text, $2::uuid) order by o.name asc, o.id asc limit 21`, ['Acme Labs 1', '00000000-0000-0000-0000-000000000000']),
		'orgs-user': await explain(
			sql,
			`select o.*, m.roles, m.joined_at from organization_members m inner join organizations o on o.id = m.organization_id where m.user_id = $1 order by o.created_at desc, o.id desc limit 21`,
			[at.member],
		),
		'members-big-first': await explain(sql, `${members} where m.organization_id = $1 order by m.joined_at desc, m.user_id desc limit 21`, [at.big]),
		'members-big-deep': await explain(sql, `${members} where m.organization_id = $1 and (m.joined_at, m.user_id) < ($2::timestamptz, $3::uuid) order by m.joined_at desc, m.user_id desc limit 21`, [at.big, deep.k, deep.i]),
		'members-big-role': await explain(sql, byRole, [at.big, 'admin']),
		'members-big-role-owner': await explain(sql, byRole, [at.big, 'owner']),
		'members-big-q': await explain(sql, `${members} where m.organization_id = $1 and (u.email ilike $2 or u.name ilike $2) order by m.joined_at desc, m.user_id desc limit 21`, [at.big, `%${at.bigQ}%`]),
		'members-big-q-common': await explain(sql, `${members} where m.organization_id = $1 and (u.email ilike $2 or u.name ilike $2) order by m.joined_at desc, m.user_id desc limit 21`, [at.big, `%${at.commonQ}%`]),
		'members-small-first': await explain(sql, `${members} where m.organization_id = $1 order by m.joined_at desc, m.user_id desc limit 21`, [at.small]),
	}
}

export function describeOrganizations(figures: OrganizationFigures): string[] {
	const lines = [
		`organizations: ${figures.seed.organizations.toLocaleString('en')} organizations, ${figures.seed.memberships.toLocaleString('en')} memberships (${figures.seed.seeded === 'created' ? `seeded in ${figures.seed.seconds.toFixed(1)} s` : 'seed reused'}); ${figures.concurrency} requests at once, big and small in alternating 1-second blocks`,
		...Object.entries(figures.ratios).map(
			([id, r]) => `organizations: ${id} ÷ its small peer: p50 ×${r.p50.toFixed(2)}, p99 ×${r.p99.toFixed(2)}, req/s ×${r.rate.toFixed(2)} (goal p99 ≤ ×${figures.goalFactor}, req/s ≥ ×${(1 / figures.goalFactor).toFixed(2)}: ${r.met ? 'met' : 'NOT met'})`,
		),
	]
	for (const [name, plan] of Object.entries(figures.plans)) {
		const scans = plan.filter((line) => /Scan|Sort|Limit|Join|Loop/.test(line) && !line.includes('Sort Key')).map((line) => line.trim().replace(/\(actual.*$/, '').replace(/^->\s*/, ''))
		const time = plan.find((line) => line.startsWith('Execution Time'))
		lines.push(`plan ${name}: ${scans.join(' → ')} · ${time}`)
	}
	for (const [id, reasons] of Object.entries(figures.failures)) lines.push(`organizations: ${id} failures: ${JSON.stringify(reasons)}`)
	return lines
}
