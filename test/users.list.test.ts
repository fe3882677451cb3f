import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { sql } from 'drizzle-orm'
import { problem, startTestApp, type CallResult, type TestApp } from './support/app'
import { signUp, signUpAdmin, uniqueEmail, type Account } from './support/fixtures'
import { seedUsers } from './support/seed'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

const SEEDED = 250
/** Unique to this run, so that `q` finds the seeded users and no one else. */
const PREFIX = `list${Date.now().toString(36)}-`
const SORTS = ['createdAt', '-createdAt', 'email', '-email'] as const

interface User {
	id: string
	email: string
	name: string
	role: string
	status: string
	createdAt: string
}

let t: TestApp
let admin: Account
beforeAll(async () => {
	t = await startTestApp()
	await seedUsers(t.database.handle.db, SEEDED, { prefix: PREFIX })
	admin = await signUpAdmin(t)
})
afterAll(() => t.close())

const list = (query: string): Promise<CallResult> => t.call('GET', `/api/users${query}`, { token: admin.accessToken })

/** Every page of a query, following `nextCursor`; checks the Link header on the way. */
async function walk(query: Record<string, string>): Promise<{ users: User[]; pages: number }> {
	const users: User[] = []
	let cursor: string | null = null
	let pages = 0
	do {
		const params = new URLSearchParams(query)
		if (cursor) params.set('cursor', cursor)
		const res = await list(`?${params}`)
		expect(res.status).toBe(200)
		pages++
		users.push(...res.body.data.items)
		cursor = res.body.data.nextCursor
		if (cursor) expect(res.headers.get('link')).toContain(`cursor=${cursor}>; rel="next"`)
		else expect(res.headers.get('link')).toBeNull()
		expect(pages).toBeLessThan(1000)
	} while (cursor)
	return { users, pages }
}

const seededEmails = () => Array.from({ length: SEEDED }, (_, n) => `${PREFIX}${n}@example.test`)
const emailsOf = (users: User[]) => users.map((user) => user.email)

const validation = (errors: Array<{ pointer: string; code: string; detail: string }>) =>
	problem('validation-error', 422, '/api/users', errors.length === 1 ? '1 field is invalid' : `${errors.length} fields are invalid`, errors)

const badCursor = problem('bad-request', 400, '/api/users', 'The cursor is not valid for this query', [
	{ pointer: '#/cursor', code: 'invalid', detail: 'use nextCursor from a previous page with the same sort' },
])

describe('keyset pagination', () => {
	for (const sort of SORTS) {
		test(`walking every page sorted by ${sort} visits each user exactly once`, async () => {
			const { users, pages } = await walk({ q: PREFIX, sort, limit: '17' })
			expect(pages).toBe(Math.ceil(SEEDED / 17))
			const emails = emailsOf(users)
			expect(new Set(emails).size).toBe(emails.length)
			expect([...emails].sort()).toEqual(seededEmails().sort())
		})
	}

	test('createdAt order is the order the users were created in, and -createdAt its reverse', async () => {
		const ascending = emailsOf((await walk({ q: PREFIX, sort: 'createdAt', limit: '40' })).users)
		const descending = emailsOf((await walk({ q: PREFIX, sort: '-createdAt', limit: '40' })).users)
		expect(ascending).toEqual(seededEmails())
		expect(descending).toEqual(seededEmails().reverse())
	})

	test('email order is ascending by email, and -email its reverse', async () => {
		const ascending = emailsOf((await walk({ q: PREFIX, sort: 'email', limit: '40' })).users)
		const descending = emailsOf((await walk({ q: PREFIX, sort: '-email', limit: '40' })).users)
		for (let n = 1; n < ascending.length; n++) expect(ascending[n - 1]! < ascending[n]!).toBe(true)
		expect(descending).toEqual([...ascending].reverse())
	})

	test('walking the whole table without filters visits every account exactly once', async () => {
		const total = emailsOf((await walk({ limit: '100' })).users)
		expect(new Set(total).size).toBe(total.length)
		expect(total).toContain(admin.email)
		expect(total.filter((email) => email.startsWith(PREFIX))).toHaveLength(SEEDED)
	})

	test('the Link header points at the next page, which is the page nextCursor gives', async () => {
		const first = await list(`?q=${PREFIX}&sort=email&limit=5`)
		const link = first.headers.get('link')
		const match = /^<([^>]+)>; rel="next"$/.exec(link ?? '')
		expect(match).not.toBeNull()
		const viaLink = await t.call('GET', match?.[1] ?? '', { token: admin.accessToken })
		const viaCursor = await list(`?q=${PREFIX}&sort=email&limit=5&cursor=${first.body.data.nextCursor}`)
		expect(viaLink.status).toBe(200)
		expect(viaLink.body).toEqual(viaCursor.body)
		expect(emailsOf(viaLink.body.data.items)).not.toContain(emailsOf(first.body.data.items)[0])
	})

	test('the last page has nextCursor null and no Link header', async () => {
		const res = await list(`?email=${PREFIX}3@example.test`)
		expect(res.status).toBe(200)
		expect(res.body.data.nextCursor).toBeNull()
		expect(res.headers.get('link')).toBeNull()
	})

	test('the page has the documented shape', async () => {
		const res = await list(`?q=${PREFIX}&sort=createdAt&limit=2`)
		expect(res.status).toBe(200)
		expect(res.headers.get('cache-control')).toBe('no-store')
		expect(res.body).toEqual({
			data: {
				items: [
					expect.objectContaining({ email: `${PREFIX}0@example.test`, name: 'Seeded User 0', role: 'user', status: 'active', deactivatedAt: null }),
					expect.objectContaining({ email: `${PREFIX}1@example.test`, name: 'Seeded User 1' }),
				],
				nextCursor: expect.any(String),
				limit: 2,
			},
			message: 'Users',
			errors: [],
		})
		expect(Object.keys(res.body.data.items[0]).sort()).toEqual(
			['appMetadata', 'createdAt', 'deactivatedAt', 'email', 'emailVerified', 'id', 'metadata', 'name', 'pendingEmail', 'role', 'status', 'updatedAt'].sort(),
		)
	})
})

describe('limit', () => {
	test('defaults to 20', async () => {
		const res = await list(`?q=${PREFIX}`)
		expect(res.status).toBe(200)
		expect(res.body.data.limit).toBe(20)
		expect(res.body.data.items).toHaveLength(20)
	})

	for (const limit of [1, 100]) {
		test(`accepts ${limit}`, async () => {
			const res = await list(`?q=${PREFIX}&limit=${limit}`)
			expect(res.status).toBe(200)
			expect(res.body.data.limit).toBe(limit)
			expect(res.body.data.items).toHaveLength(limit)
		})
	}

	for (const [limit, code] of [
		['0', 'minimum'],
		['101', 'maximum'],
		['abc', 'type'],
	] as const) {
		test(`refuses ${limit} with 422 at #/limit`, async () => {
			const res = await list(`?limit=${limit}`)
			expect(res.status).toBe(422)
			expect(res.headers.get('content-type')).toBe('application/problem+json')
			expect(res.body).toEqual(validation([{ pointer: '#/limit', code, detail: 'must be a whole number from 1 to 100' }]))
		})
	}

	// Number() would read each of these as 2 (or 1); only plain decimal digits are a number here.
	for (const [limit, reads] of [
		['0x2', 'hexadecimal'],
		['1e0', 'an exponent'],
		['%202', 'a leading space'],
		['2%20', 'a trailing space'],
		['+2', 'a plus sign (a space in a query)'],
		['%2B2', 'an encoded plus sign'],
		['02', 'a leading zero'],
		['2.0', 'a decimal point'],
		['', 'nothing'],
	] as const) {
		test(`refuses ${reads} (limit=${limit}) with 422 at #/limit`, async () => {
			const res = await list(`?limit=${limit}`)
			expect(res.status).toBe(422)
			expect(res.body).toEqual(validation([{ pointer: '#/limit', code: 'type', detail: 'must be a whole number from 1 to 100' }]))
		})
	}

	test('the OpenAPI document says which spellings are taken', async () => {
		// `any`: the OpenAPI document is free-form JSON, read member by member.
		const document: any = await (await t.app.handle(new Request('http://localhost/api/docs/json'))).json()
		const parameter = document.paths['/api/users'].get.parameters.find((p: { name: string }) => p.name === 'limit')
		expect(parameter.schema).toEqual({ type: 'integer', minimum: 1, maximum: 100, default: 20 })
		expect(parameter.description).toContain('plain decimal digits: no sign, spaces, leading zeros, exponent or hex')
	})
})

describe('a repeated query parameter is 400, never read one way or the other', () => {
	const repeated = (...names: string[]) =>
		problem(
			'bad-request',
			400,
			'/api/users',
			'A query parameter is given more than once',
			names.map((name) => ({ pointer: `#/${name}`, code: 'duplicate', detail: 'must be given at most once' })),
		)

	for (const query of ['limit=1&limit=2', 'limit=2&limit=2', 'limit=2&%6Cimit=3', 'sort=email&q=x&sort=-email']) {
		test(`?${query}`, async () => {
			const res = await list(`?${query}`)
			expect(res.status).toBe(400)
			expect(res.headers.get('content-type')).toBe('application/problem+json')
			expect(res.body).toEqual(repeated(query.startsWith('sort') ? 'sort' : 'limit'))
		})
	}

	test('each repeated parameter is named once', async () => {
		const res = await list('?role=user&status=active&role=admin&status=active&role=user')
		expect(res.status).toBe(400)
		expect(res.body).toEqual(repeated('role', 'status'))
	})
})

describe('filters', () => {
	test('email matches exactly, in any case', async () => {
		const exact = await list(`?email=${PREFIX}7@example.test`)
		expect(emailsOf(exact.body.data.items)).toEqual([`${PREFIX}7@example.test`])
		const upper = await list(`?email=${encodeURIComponent(`${PREFIX}7@EXAMPLE.TEST`)}`)
		expect(emailsOf(upper.body.data.items)).toEqual([`${PREFIX}7@example.test`])
		const partial = await list(`?email=${PREFIX}7`)
		expect(partial.status).toBe(200)
		expect(partial.body.data.items).toEqual([])
	})

	test('q is a case-insensitive substring of the email', async () => {
		const { users } = await walk({ q: PREFIX.toUpperCase(), limit: '100' })
		expect(users).toHaveLength(SEEDED)
		const one = await list(`?q=${PREFIX.toUpperCase()}123@`)
		expect(emailsOf(one.body.data.items)).toEqual([`${PREFIX}123@example.test`])
	})

	test('q is a case-insensitive substring of the name', async () => {
		const tag = `Zeta${Date.now().toString(36)}`
		const user = await signUp(t, { name: `Dr ${tag} Quux` })
		const res = await list(`?q=${tag.toLowerCase()}%20quux`)
		expect(res.status).toBe(200)
		expect(emailsOf(res.body.data.items)).toEqual([user.email])
	})

	test('% and _ in q are literal characters, not wildcards', async () => {
		const tag = Date.now().toString(36)
		const percent = await signUp(t, { name: `100%off-${tag}` })
		await signUp(t, { name: `100xoff-${tag}` })
		const underscore = await signUp(t, { name: `a_b-${tag}` })
		await signUp(t, { name: `axb-${tag}` })

		const byPercent = await list(`?q=${encodeURIComponent(`100%off-${tag}`)}`)
		expect(emailsOf(byPercent.body.data.items)).toEqual([percent.email])
		const byUnderscore = await list(`?q=${encodeURIComponent(`a_b-${tag}`)}`)
		expect(emailsOf(byUnderscore.body.data.items)).toEqual([underscore.email])
		const onlyPercent = await list(`?q=${encodeURIComponent('%')}&limit=100`)
		expect(onlyPercent.body.data.items.every((user: User) => `${user.email} ${user.name}`.includes('%'))).toBe(true)
		expect(emailsOf(onlyPercent.body.data.items)).toContain(percent.email)
	})

	test('a backslash in q is literal too', async () => {
		const tag = Date.now().toString(36)
		const user = await signUp(t, { name: `back\\slash-${tag}` })
		const res = await list(`?q=${encodeURIComponent(`k\\s`)}`)
		expect(res.status).toBe(200)
		expect(emailsOf(res.body.data.items)).toContain(user.email)
		expect(res.body.data.items.every((found: User) => found.name.includes('k\\s'))).toBe(true)
	})

	test('role selects admins or users', async () => {
		const admins = (await walk({ role: 'admin', limit: '100' })).users
		expect(admins.map((user) => user.id)).toContain(admin.id)
		expect(admins.every((user) => user.role === 'admin')).toBe(true)
		const users = (await walk({ role: 'user', q: PREFIX, limit: '100' })).users
		expect(users).toHaveLength(SEEDED)
		expect(users.every((user) => user.role === 'user')).toBe(true)
	})

	test('status selects deactivated or active accounts', async () => {
		const deactivated = await list(`?q=${PREFIX}&status=deactivated&sort=createdAt`)
		expect(emailsOf(deactivated.body.data.items)).toEqual([49, 99, 149, 199, 249].map((n) => `${PREFIX}${n}@example.test`))
		expect(deactivated.body.data.items.every((user: User & { deactivatedAt: string | null }) => user.deactivatedAt !== null)).toBe(true)
		const active = (await walk({ q: PREFIX, status: 'active', limit: '100' })).users
		expect(active).toHaveLength(SEEDED - 5)
		expect(active.every((user) => user.status === 'active')).toBe(true)
	})

	test('createdAfter and createdBefore bound the creation time', async () => {
		const prefix = `era${Date.now().toString(36)}-`
		const day = (n: number) => new Date(Date.UTC(2001, 0, n))
		await seedUsers(t.database.handle.db, 3, { prefix: `${prefix}a`, startAt: day(1) })
		await seedUsers(t.database.handle.db, 3, { prefix: `${prefix}b`, startAt: day(3) })
		await seedUsers(t.database.handle.db, 3, { prefix: `${prefix}c`, startAt: day(5) })

		const between = await list(`?createdAfter=${day(2).toISOString()}&createdBefore=${day(4).toISOString()}&sort=createdAt`)
		expect(between.status).toBe(200)
		expect(emailsOf(between.body.data.items)).toEqual([0, 1, 2].map((n) => `${prefix}b${n}@example.test`))

		const after = (await walk({ q: prefix, createdAfter: day(4).toISOString(), sort: 'createdAt' })).users
		expect(emailsOf(after)).toEqual([0, 1, 2].map((n) => `${prefix}c${n}@example.test`))
		const before = (await walk({ q: prefix, createdBefore: day(2).toISOString(), sort: 'createdAt' })).users
		expect(emailsOf(before)).toEqual([0, 1, 2].map((n) => `${prefix}a${n}@example.test`))
	})

	test('filters combine, and pagination keeps them', async () => {
		const { users, pages } = await walk({ q: PREFIX, status: 'active', role: 'user', sort: '-email', limit: '50' })
		expect(pages).toBe(Math.ceil((SEEDED - 5) / 50))
		expect(users).toHaveLength(SEEDED - 5)
		expect(users.every((user) => user.status === 'active' && user.email.startsWith(PREFIX))).toBe(true)
	})

	test('a filter no one matches is an empty page', async () => {
		const res = await list(`?email=${uniqueEmail('nobody')}`)
		expect(res.status).toBe(200)
		expect(res.body).toEqual({ data: { items: [], nextCursor: null, limit: 20 }, message: 'Users', errors: [] })
	})
})

describe('bad queries are refused, not ignored', () => {
	test('an unknown query parameter is 422 at its name', async () => {
		const res = await list('?foo=1')
		expect(res.status).toBe(422)
		expect(res.body).toEqual(validation([{ pointer: '#/foo', code: 'additionalProperties', detail: 'is not a recognised field' }]))
	})

	test('an unknown sort is 422 at #/sort', async () => {
		const res = await list('?sort=name')
		expect(res.status).toBe(422)
		expect(res.body).toEqual(
			validation([{ pointer: '#/sort', code: 'enum', detail: 'must be one of "createdAt", "-createdAt", "email", "-email"' }]),
		)
	})

	test('an unknown role or status is 422', async () => {
		const role = await list('?role=owner')
		expect(role.status).toBe(422)
		expect(role.body).toEqual(validation([{ pointer: '#/role', code: 'enum', detail: 'must be one of "user", "admin"' }]))
		const status = await list('?status=gone')
		expect(status.status).toBe(422)
		expect(status.body).toEqual(validation([{ pointer: '#/status', code: 'enum', detail: 'must be one of "active", "deactivated"' }]))
	})

	test('a createdAfter that is not a date-time, or outside years 0001–9999, is 422', async () => {
		for (const value of ['yesterday', '0000-01-01T00:00:00Z']) {
			const res = await list(`?createdAfter=${value}`)
			expect(res.status).toBe(422)
			expect(res.body).toEqual(
				validation([
					{ pointer: '#/createdAfter', code: 'pattern', detail: 'must be an ISO-8601 date-time between years 0001 and 9999' },
				]),
			)
		}
	})

	test('a garbage cursor is a 400 problem', async () => {
		const res = await list('?cursor=not-a-cursor')
		expect(res.status).toBe(400)
		expect(res.headers.get('content-type')).toBe('application/problem+json')
		expect(res.body).toEqual(badCursor)
	})

	test('a well-formed cursor with a tampered key is a 400 problem', async () => {
		const forged = Buffer.from(JSON.stringify({ s: '-createdAt', k: 'not a date', i: Bun.randomUUIDv7() })).toString('base64url')
		const res = await list(`?cursor=${forged}`)
		expect(res.status).toBe(400)
		expect(res.body).toEqual(badCursor)
	})

	test('a cursor from another sort is a 400 problem', async () => {
		const first = await list(`?q=${PREFIX}&sort=email&limit=3`)
		const cursor = first.body.data.nextCursor
		expect(cursor).toEqual(expect.any(String))
		for (const sort of ['createdAt', '-createdAt', '-email']) {
			const res = await list(`?q=${PREFIX}&sort=${sort}&limit=3&cursor=${cursor}`)
			expect(res.status).toBe(400)
			expect(res.body).toEqual(badCursor)
		}
		// With no sort the default (-createdAt) applies, which is another sort too.
		const res = await list(`?q=${PREFIX}&limit=3&cursor=${cursor}`)
		expect(res.status).toBe(400)
		expect(res.body).toEqual(badCursor)
	})
})


describe('count: the total of the accounts that match, whatever the page', () => {
	const totalOf = (res: CallResult) => ({ total: res.body.data.total, totalExact: res.body.data.totalExact, header: res.headers.get('x-total-count') })

	test('exact counts the accounts that match, on every page, in the body and X-Total-Count', async () => {
		const first = await list(`?q=${PREFIX}&count=exact&limit=7`)
		expect(first.status).toBe(200)
		expect(first.body.data.items).toHaveLength(7)
		expect(totalOf(first)).toEqual({ total: SEEDED, totalExact: true, header: String(SEEDED) })
		// The next page's link keeps the count, and the total does not shrink as pages go by.
		const next = first.headers.get('link')?.match(/<([^>]+)>/)?.[1] ?? ''
		expect(next).toContain('count=exact')
		const second = await t.call('GET', next, { token: admin.accessToken })
		expect(totalOf(second)).toEqual({ total: SEEDED, totalExact: true, header: String(SEEDED) })
		// Filters narrow it: one in fifty seeded accounts is deactivated.
		expect(totalOf(await list(`?q=${PREFIX}&status=deactivated&count=exact`))).toEqual({ total: SEEDED / 50, totalExact: true, header: String(SEEDED / 50) })
		expect(totalOf(await list(`?q=${PREFIX}-nobody&count=exact`))).toEqual({ total: 0, totalExact: true, header: '0' })
	})

	test('estimated, on a table the planner expects to be small, counts too', async () => {
		const exact = totalOf(await list('?count=exact'))
		expect(exact.totalExact).toBe(true)
		expect(exact.total).toBeGreaterThanOrEqual(SEEDED + 1)
		expect(totalOf(await list('?count=estimated'))).toEqual(exact)
	})

	test('without count there is no total and no header', async () => {
		const res = await list(`?q=${PREFIX}`)
		expect(res.body.data).not.toHaveProperty('total')
		expect(res.body.data).not.toHaveProperty('totalExact')
		expect(res.headers.get('x-total-count')).toBeNull()
	})

	test('a count that is neither estimated nor exact is 422 at #/count', async () => {
		const res = await list('?count=all')
		expect(res.status).toBe(422)
		expect(res.body.errors.map((error: { pointer: string }) => error.pointer)).toEqual(['#/count'])
	})

	test('a browser app on another origin may read X-Total-Count', async () => {
		const res = await t.app.handle(
			new Request(`http://localhost/api/users?count=exact`, { headers: { origin: 'http://app.example.test', authorization: `Bearer ${admin.accessToken}` } }),
		)
		expect(res.headers.get('access-control-expose-headers')?.split(/,\s*/)).toContain('X-Total-Count')
	})
})

describe('count beyond 10,000 matches estimates rather than counting on', () => {
	const MANY = 10_400
	let big: TestApp
	let bigAdmin: Account
	beforeAll(async () => {
		big = await startTestApp()
		await seedUsers(big.database.handle.db, MANY, { prefix: 'many-' })
		await big.database.handle.db.execute(sql`analyze users`)
		bigAdmin = await signUpAdmin(big)
	})
	afterAll(() => big.close())
	const bigList = (query: string) => big.call('GET', `/api/users${query}`, { token: bigAdmin.accessToken })

	for (const mode of ['exact', 'estimated'] as const) {
		test(`${mode}: the planner's estimate, said to be one, near the real ${MANY.toLocaleString('en')}`, async () => {
			const res = await bigList(`?q=many-&count=${mode}&limit=5`)
			expect(res.status).toBe(200)
			expect(res.body.data.items).toHaveLength(5)
			expect(res.body.data.totalExact).toBe(false)
			expect(res.body.data.total).toBeGreaterThan(10_000)
			expect(res.headers.get('x-total-count')).toBe(String(res.body.data.total))
			// Without a filter the estimate comes from the table's statistics, just gathered: within a few percent.
			const whole = await bigList(`?count=${mode}`)
			expect(whole.body.data.totalExact).toBe(false)
			expect(Math.abs(whole.body.data.total - (MANY + 1)) / MANY).toBeLessThan(0.05)
		})
	}

	test('a filter that matches fewer than 10,000 of them is counted exactly', async () => {
		const res = await bigList('?status=deactivated&count=exact')
		expect(res.body.data).toMatchObject({ total: MANY / 50, totalExact: true })
	})
})
