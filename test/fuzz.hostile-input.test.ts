import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { and, eq, isNull, sql } from 'drizzle-orm'
import fc from 'fast-check'
import { auditEvents, organizationInvitations, organizationMembers, organizationRoles, organizations, refreshTokens, sessions, users } from '../src/db/schema'
import { PROBLEM_KINDS, PROBLEM_TYPE_BASE } from '../src/http/problem-catalogue'
import { startTestApp, type TestApp } from './support/app'
import { jwtPayload, PASSWORD, signUp, signUpAdmin, type Account } from './support/fixtures'
import { seedOrganization } from './support/organization-seed'

// Each file sets its own default: bun applies setDefaultTimeout to the file that calls it.
setDefaultTimeout(30_000)

/*
 * Property-based hostile input: thousands of generated requests against every
 * route, each answered with something the contract allows — never a 5xx, every
 * error a whole problem document, no hash, stack or SQL in any body — and,
 * afterwards, a database with nothing half-written. Fixed seeds: a failure
 * prints its seed and the shrunk request, and replays the same way.
 */

const SEED = 42
const BODY_LIMIT = 65_536
/** Long enough for PGlite on a slow machine; a request still unanswered after it is a hang. */
const HANG_MS = 15_000

let t: TestApp
/** Signed-in accounts the generated requests act as; replaced when a request legitimately ends them. */
const principals = {} as Record<'user' | 'admin', { account: Account; dirty: boolean }>
/** A third account the others act on: its id, session and refresh token appear in paths and bodies. */
let victim: Account
/** An organization the user owns and the victim is a member of, with a pending invitation: its ids appear in paths. */
const org = { id: '', invitation: '' }

beforeAll(async () => {
	// TRUST_PROXY so that X-Forwarded-For is actually parsed (app.handle has no socket).
	t = await startTestApp({ RATE_LIMIT_MAX: '0', AUTH_RATE_LIMIT_MAX: '0', LOCKOUT_THRESHOLD: '0', TRUST_PROXY: '10.0.0.0/8' })
	principals.user = { account: await signUp(t, { name: 'Fuzz User' }), dirty: false }
	principals.admin = { account: await signUpAdmin(t), dirty: false }
	victim = await signUp(t, { name: 'Fuzz Victim' })
	const seeded = await seedOrganization(t.database.handle.db, [
		{ userId: principals.user.account.id, roles: ['owner'] },
		{ userId: victim.id, roles: ['member'] },
	])
	org.id = seeded.id
	org.invitation = Bun.randomUUIDv7()
	await t.database.handle.db.insert(organizationInvitations).values({
		id: org.invitation,
		organizationId: seeded.id,
		email: 'invited@example.test',
		roles: ['member'],
		tokenHash: 'f'.repeat(64),
		invitedBy: principals.user.account.id,
		expiresAt: new Date(Date.now() + 86_400_000),
	})
})
afterAll(() => t.close())

// ── the requests, as plain data (so a counterexample prints readably) ──────

/**
 * Strings may name live values by marker (`$user.id`, `$victim.refresh`…);
 * they are filled in when the request is sent, so they stay current while
 * the fuzzed requests rotate tokens and replace accounts.
 */
const MARKER = /\$(user|admin|victim|org)\.(id|sid|email|refresh|access|invitation)/g

type AuthSpec =
	| { kind: 'none' }
	| { kind: 'as'; who: 'user' | 'admin' }
	| { kind: 'raw'; value: string }
	| { kind: 'truncated'; who: 'user' | 'admin'; keep: number }
	| { kind: 'tampered'; who: 'user' | 'admin'; at: number; char: string }
	| { kind: 'forged'; header: Record<string, unknown>; claims: Record<string, unknown>; key: 'real' | 'wrong' | 'unsigned' }

type BodySpec =
	| { kind: 'none' }
	/** An object written member by member (raw JSON texts), so keys may repeat or be `__proto__`. */
	| { kind: 'members'; members: Array<[string, string]> }
	| { kind: 'text'; text: string }
	| { kind: 'bytes'; bytes: number[] }
	/** One string member of `unit` repeated to `delta` bytes around the body limit. */
	| { kind: 'huge'; field: string; unit: string; delta: number }
	| { kind: 'deep'; depth: number; open: '[' | '{"a":'; field: string | null }

interface HostileRequest {
	method: string
	path: string
	query: string
	headers: Array<[string, string]>
	auth: AuthSpec
	body: BodySpec
	/** Send the body as a stream: chunked, no Content-Length. */
	stream: boolean
}

// ── building blocks ─────────────────────────────────────────────────────────

const oneOf = <T>(...values: T[]) => fc.constantFrom(...values)

/** Any text, including unpaired surrogates, NUL and other control characters. */
const anyText = fc.oneof(
	fc.string({ unit: 'binary', maxLength: 40 }),
	fc.string({ unit: 'grapheme', maxLength: 40 }),
	fc.string({ maxLength: 40 }),
)

const hostileStrings = oneOf(
	'',
	' ',
	'\u0000',
	'a\u0000b',
	'\ud800',
	'\udfff\ud800',
	'\uFEFF',
	'\u202Eevil',
	'ＡＤＭＩＮ＠ＥＸＡＭＰＬＥ．ＣＯＭ',
	'İ@example.com',
	'ß@EXAMPLE.COM',
	"' or '1'='1",
	"'; drop table users; --",
	'%00',
	'%zz',
	'../../etc/passwd',
	'${jndi:ldap://x}',
	'<script>alert(1)</script>',
	'{{7*7}}',
	'__proto__',
	'constructor',
	'null',
	'undefined',
	'NaN',
	'0',
	'-1',
	'true',
	'[]',
	'{}',
	'a'.repeat(255),
	'😀'.repeat(129),
	'x'.repeat(4096),
	'$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$aGFzaA',
)

/** Raw JSON texts of numbers at and beyond the edges of what a double holds. */
const hostileNumbers = oneOf('1e308', '-1e308', '1e309', '-1e309', '-0', '1e-400', '5e-324', '123456789012345678901234567890', '0.1', '9007199254740993', '1E2', '0e0')

const emails = fc.oneof(
	oneOf('$user.email', '$admin.email', '$victim.email', '  $VICTIM.EMAIL  '.replace('$VICTIM.EMAIL', '$victim.email'), 'a@b', 'a@b.c', '@example.com', 'a@', 'a@@b.c', 'a b@c.d', 'A@EXAMPLE.COM'),
	fc.emailAddress(),
	fc.emailAddress().map((email) => `\t ${email.toUpperCase()} \n`),
	fc.emailAddress().map((email) => `${email}\u0000`),
	fc.emailAddress().map((email) => `${'a'.repeat(250)}${email}`),
	hostileStrings,
	anyText,
)
const passwords = fc.oneof(
	oneOf(PASSWORD, 'password', '12345678', 'short', '', PASSWORD + '\u0000', '😀'.repeat(8), '😀'.repeat(256), 'p'.repeat(256), 'p'.repeat(257), 'p'.repeat(1025)),
	hostileStrings,
	anyText,
)

/** A member value as raw JSON text: mostly strings, sometimes anything at all. */
const valueFor = (strings: fc.Arbitrary<string>) =>
	fc.oneof(
		{ weight: 6, arbitrary: strings.map((value) => JSON.stringify(value)) },
		{ weight: 1, arbitrary: hostileNumbers },
		{ weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)) },
		{ weight: 1, arbitrary: oneOf('null', 'true', '[]', '{}', '{"__proto__":{"role":"admin"}}') },
	)

const extraMember: fc.Arbitrary<[string, string]> = fc.tuple(
	fc.oneof(oneOf('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'id', 'passwordHash', 'password_hash', 'createdAt', 'deactivatedAt', 'isAdmin', 'role', 'status', ''), anyText),
	fc.oneof(
		fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)),
		oneOf('{"role":"admin","isAdmin":true}', '{"prototype":{"role":"admin"}}', '"admin"'),
		hostileNumbers,
	),
)

/** An object body: the fields a route reads (each maybe missing or hostile), plus stray members. */
const membersOf = (fields: Record<string, fc.Arbitrary<string>>): fc.Arbitrary<BodySpec> =>
	fc
		.tuple(
			fc.tuple(...Object.entries(fields).map(([name, value]) => fc.option(value.map((text): [string, string] => [name, text]), { freq: 4 }))),
			fc.array(extraMember, { maxLength: 3 }),
			fc.boolean(),
		)
		.map(([known, extra, extraFirst]) => {
			const present = known.filter((member): member is [string, string] => member !== null)
			return { kind: 'members', members: extraFirst ? [...extra, ...present] : [...present, ...extra] } satisfies BodySpec
		})

const anyJsonBody: fc.Arbitrary<BodySpec> = fc.oneof(
	fc.json({ maxDepth: 4 }).map((text): BodySpec => ({ kind: 'text', text })),
	fc.json({ maxDepth: 4, stringUnit: 'binary' }).map((text): BodySpec => ({ kind: 'text', text })),
	fc
		.anything({ maxDepth: 3, withNullPrototype: true, withObjectString: true, withBoxedValues: true})
		.map((value): BodySpec => ({ kind: 'text', text: safeStringify(value) ?? 'null' })),
	hostileNumbers.map((text): BodySpec => ({ kind: 'text', text })),
)

const hugeBody: fc.Arbitrary<BodySpec> = fc.record({
	kind: fc.constant('huge' as const),
	field: oneOf('email', 'password', 'name', 'refreshToken', 'scope', 'currentPassword', 'x'),
	unit: oneOf('a', 'é', '€', '😀', '\\u0000', '\\ud800'),
	delta: fc.oneof(fc.integer({ min: -8, max: 8 }), fc.integer({ min: -2048, max: 2048 })),
})

const deepBody: fc.Arbitrary<BodySpec> = fc.record({
	kind: fc.constant('deep' as const),
	// Deeper than a few thousand levels costs this process gigabytes outside production (see the report below).
	depth: fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 1, max: 200 }) }, { weight: 1, arbitrary: fc.integer({ min: 1000, max: 5000 }) }),
	open: oneOf('[' as const, '{"a":' as const),
	field: fc.option(oneOf('email', 'password', 'refreshToken', 'scope'), { nil: null }),
})

/** Per-route JSON bodies that reach the handlers: plausible shapes with hostile values. */
const createUserBody = membersOf({
	email: valueFor(emails),
	password: valueFor(passwords),
	name: valueFor(fc.oneof(anyText, hostileStrings)),
	role: valueFor(fc.oneof(oneOf('user', 'admin', 'ADMIN', 'root', ' admin'), anyText)),
})
const replaceUserBody = membersOf({
	email: valueFor(emails),
	name: valueFor(fc.oneof(anyText, hostileStrings)),
	password: valueFor(passwords),
	currentPassword: valueFor(fc.oneof(oneOf(PASSWORD), passwords)),
	role: valueFor(fc.oneof(oneOf('user', 'admin'), anyText)),
	status: valueFor(fc.oneof(oneOf('active', 'deactivated', 'deleted'), anyText)),
})
const loginBody = membersOf({ email: valueFor(emails), password: valueFor(passwords) })
const refreshBody = membersOf({
	refreshToken: valueFor(
		fc.oneof(oneOf('$victim.refresh', '$user.refresh', '$admin.refresh', '$user.access', 'x'.repeat(512), 'x'.repeat(513)), fc.base64String({ maxLength: 64 }), hostileStrings, anyText),
	),
})
const logoutBody = fc.oneof(
	fc.constant<BodySpec>({ kind: 'none' }),
	membersOf({ scope: valueFor(fc.oneof(oneOf('local', 'others', 'global', 'GLOBAL', 'all'), anyText)) }),
)

/** Bodies a well-behaved client would send, so that some requests get all the way through. */
const plausible = (fields: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<BodySpec> =>
	fc.record(fields).map((body) => ({ kind: 'members', members: Object.entries(body).map(([key, value]) => [key, JSON.stringify(value)]) }))

const bodyVariants = (shaped: fc.Arbitrary<BodySpec>, wellFormed?: fc.Arbitrary<BodySpec>) =>
	fc.oneof(
		{ weight: 6, arbitrary: shaped },
		{ weight: wellFormed ? 3 : 0, arbitrary: wellFormed ?? shaped },
		{ weight: 2, arbitrary: anyJsonBody },
		{ weight: 1, arbitrary: hugeBody },
		{ weight: 1, arbitrary: deepBody },
	)

const goodNames = fc.oneof(fc.string({ maxLength: 30 }), fc.string({ unit: 'grapheme', maxLength: 30 }), hostileStrings.filter((name) => name.length <= 200))
const wellFormedCreate = plausible({
	email: fc.emailAddress().filter((email) => email.length <= 254),
	password: oneOf(PASSWORD, 'another long passphrase', 'ünïcødé pässwörd 😀'),
	name: goodNames,
})
const wellFormedReplace = plausible({
	email: oneOf('$user.email', '$admin.email', '$victim.email'),
	name: goodNames,
	currentPassword: oneOf(PASSWORD, 'wrong password'),
})
const wellFormedLogin = plausible({ email: oneOf('$user.email', '$admin.email', '$victim.email'), password: oneOf(PASSWORD, 'wrong password') })
const wellFormedRefresh = plausible({ refreshToken: oneOf('$user.refresh', '$admin.refresh', '$victim.refresh') })

// ── paths ─────────────────────────────────────────────────────────────────

const idSegment = fc.oneof(
	{ weight: 4, arbitrary: oneOf('me', '$user.id', '$admin.id', '$victim.id') },
	{ weight: 2, arbitrary: fc.uuid() },
	{ weight: 1, arbitrary: fc.uuid({ version: 7 }).map((id) => id.toUpperCase()) },
	{
		weight: 2,
		arbitrary: oneOf(
			'ME',
			'me%20',
			'%20me',
			'%zz',
			'%',
			'%00',
			'%2F',
			'%2e%2e',
			'%E0%A4%A',
			'null',
			'0',
			'-1',
			'00000000-0000-0000-0000-000000000000',
			'ffffffff-ffff-ffff-ffff-ffffffffffff',
			'{00000000-0000-0000-0000-000000000000}',
			'0193a1b2c3d47e8f9a0b1c2d3e4f5a6b',
			"1'%20or%20'1'='1",
			'a'.repeat(5000),
		),
	},
	{ weight: 2, arbitrary: anyText.map((text) => encodeURIComponent(text.replace(/[\ud800-\udfff]/g, 'x'))) },
)
const sessionSegment = fc.oneof(
	{ weight: 3, arbitrary: oneOf('$user.sid', '$admin.sid', '$victim.sid') },
	{ weight: 2, arbitrary: fc.uuid() },
	{ weight: 1, arbitrary: oneOf('me', 'current', '%00', '%zz', '0', 'a'.repeat(300)) },
	{ weight: 1, arbitrary: anyText.map((text) => encodeURIComponent(text.replace(/[\ud800-\udfff]/g, 'x'))) },
)

interface RouteShape {
	method: string
	path: string
	body: BodySpec
}

const route = (method: string, path: fc.Arbitrary<string>, body: fc.Arbitrary<BodySpec> = fc.constant({ kind: 'none' })) =>
	fc.record({ method: fc.constant(method), path, body })

/** Every route of the contract with its own method and a body of its own shape (or none). */
const routes: fc.Arbitrary<RouteShape> = fc.oneof(
	route('POST', fc.constant('/api/users'), bodyVariants(createUserBody, wellFormedCreate)),
	route('GET', fc.constant('/api/users')),
	route('GET', idSegment.map((id) => `/api/users/${id}`)),
	route('PUT', idSegment.map((id) => `/api/users/${id}`), bodyVariants(replaceUserBody, wellFormedReplace)),
	route('DELETE', idSegment.map((id) => `/api/users/${id}`)),
	route('GET', idSegment.map((id) => `/api/users/${id}/sessions`)),
	route('DELETE', fc.tuple(idSegment, sessionSegment).map(([id, sid]) => `/api/users/${id}/sessions/${sid}`)),
	route('POST', fc.constant('/api/auth/login'), bodyVariants(loginBody, wellFormedLogin)),
	route('POST', fc.constant('/api/auth/refresh'), bodyVariants(refreshBody, wellFormedRefresh)),
	route('POST', fc.constant('/api/auth/logout'), bodyVariants(logoutBody)),
	route('GET', fc.constant('/api/audit-events')),
	route('GET', oneOf('/api/health', '/api/health/ready', '/.well-known/jwks.json', '/api/.well-known/jwks.json')),
)

// ── the organization routes ───────────────────────────────────────────────

const orgSegment = fc.oneof({ weight: 4, arbitrary: fc.constant('$org.id') }, { weight: 3, arbitrary: idSegment })
const invitationSegment = fc.oneof({ weight: 3, arbitrary: fc.constant('$org.invitation') }, { weight: 2, arbitrary: idSegment })
const roleNames = fc.oneof(
	oneOf('owner', 'admin', 'member', 'Owner', 'owner ', '*', 'оwner', 'billing-admin', 'a--b', '-a', 'a'.repeat(65), ''),
	hostileStrings,
	anyText,
)
const roleArrays = fc.oneof(
	fc.array(roleNames, { maxLength: 25 }).map((roles) => JSON.stringify(roles)),
	oneOf('["member","member"]', '[]', 'null', '"member"', '[null]', '[1]', JSON.stringify(Array.from({ length: 5000 }, (_, i) => `r-${i}`))),
)
const slugs = fc.oneof(oneOf('acme', '-a', 'a-', 'a--b', 'Acme', 'café', 'a_b', '', 'a'.repeat(64), 'a'.repeat(65)), hostileStrings, anyText)
const organizationBody = membersOf({ name: valueFor(fc.oneof(anyText, hostileStrings)), slug: valueFor(slugs) })
const memberBody = membersOf({ userId: valueFor(oneOf('$user.id', '$admin.id', '$victim.id', 'me', '', 'x')), roles: roleArrays })
const rolesBody = membersOf({ roles: roleArrays })
const invitationBody = membersOf({ email: valueFor(emails), roles: roleArrays })
const roleBody = membersOf({
	name: valueFor(roleNames),
	permissions: fc.oneof(fc.array(fc.oneof(oneOf('invoices:read', '*', 'a b', 'A:B', ':a', 'a::b', 'x'.repeat(101)), anyText), { maxLength: 5 }).map((list) => JSON.stringify(list)), oneOf('null', '[]', '"a:b"')),
	description: valueFor(fc.oneof(anyText, hostileStrings)),
})
const wellFormedOrganization = plausible({ name: goodNames.filter((name) => name.trim().length > 0 && name.length <= 200), slug: fc.stringMatching(/^[a-z0-9]{1,10}(-[a-z0-9]{1,10}){0,2}$/) })
const wellFormedMember = plausible({ userId: oneOf('$admin.id', '$victim.id'), roles: oneOf(['member'], ['admin'], ['owner'], ['member', 'admin']) })
const roleSegment = fc.oneof(oneOf('owner', 'admin', 'member', 'billing', 'Owner', '*', '%00', 'a%00b', '%E2%80%AE', 'a'.repeat(300)), anyText.map((text) => encodeURIComponent(text.replace(/[\ud800-\udfff]/g, 'x'))))

/** Every organization route (members, invitations, roles, memberships), with bodies of its shape and ids that exist. */
const organizationRouteShapes: fc.Arbitrary<RouteShape> = fc.oneof(
	route('POST', fc.constant('/api/organizations'), bodyVariants(organizationBody, wellFormedOrganization)),
	route('GET', fc.constant('/api/organizations')),
	route('GET', orgSegment.map((id) => `/api/organizations/${id}`)),
	route('PUT', orgSegment.map((id) => `/api/organizations/${id}`), bodyVariants(organizationBody, wellFormedOrganization)),
	route('DELETE', orgSegment.map((id) => `/api/organizations/${id}`)),
	route('GET', orgSegment.map((id) => `/api/organizations/${id}/members`)),
	route('POST', orgSegment.map((id) => `/api/organizations/${id}/members`), bodyVariants(memberBody, wellFormedMember)),
	route('GET', fc.tuple(orgSegment, idSegment).map(([id, user]) => `/api/organizations/${id}/members/${user}`)),
	route('PUT', fc.tuple(orgSegment, idSegment).map(([id, user]) => `/api/organizations/${id}/members/${user}`), bodyVariants(rolesBody)),
	route('DELETE', fc.tuple(orgSegment, idSegment).map(([id, user]) => `/api/organizations/${id}/members/${user}`)),
	route('GET', orgSegment.map((id) => `/api/organizations/${id}/invitations`)),
	route('POST', orgSegment.map((id) => `/api/organizations/${id}/invitations`), bodyVariants(invitationBody)),
	route('GET', fc.tuple(orgSegment, invitationSegment).map(([id, invitation]) => `/api/organizations/${id}/invitations/${invitation}`)),
	route('DELETE', fc.tuple(orgSegment, invitationSegment).map(([id, invitation]) => `/api/organizations/${id}/invitations/${invitation}`)),
	route('POST', fc.constant('/api/invitation-acceptances'), bodyVariants(membersOf({ token: valueFor(fc.oneof(fc.base64String({ maxLength: 60 }), hostileStrings, anyText)) }))),
	route('GET', fc.constant('/api/organization-roles')),
	route('POST', fc.constant('/api/organization-roles'), bodyVariants(roleBody)),
	route('GET', roleSegment.map((name) => `/api/organization-roles/${name}`)),
	route('PUT', roleSegment.map((name) => `/api/organization-roles/${name}`), bodyVariants(roleBody)),
	route('DELETE', roleSegment.map((name) => `/api/organization-roles/${name}`)),
	route('GET', idSegment.map((id) => `/api/users/${id}/organizations`)),
)

const PATH_WORDS = ['api', 'users', 'me', 'sessions', 'auth', 'login', 'refresh', 'logout', 'audit-events', 'health', 'ready', '.well-known', 'jwks.json', 'metrics', '', '.', '..', '%2e', '%2F', '%00', '%zz', '*', 'ALL', '$user.id', '$victim.sid']
const randomPath = fc
	.tuple(
		fc.array(fc.oneof(oneOf(...PATH_WORDS), idSegment), { minLength: 0, maxLength: 6 }),
		oneOf('', '/', '//'),
		oneOf('/', '//', '/api/', '/API/', '/api//', '///'),
	)
	.map(([segments, tail, head]) => `${head}${segments.join('/')}${tail}`.replace(/^(?!\/)/, '/'))

const methods = fc.oneof(
	// OPTIONS has a property of its own below.
	{ weight: 6, arbitrary: oneOf('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD') },
	{ weight: 1, arbitrary: oneOf('get', 'Post', 'patch', 'PROPFIND', 'MKCOL', 'FOO', 'M-SEARCH', 'PURGE', 'LINK', 'X'.repeat(100)) },
)

// ── query strings ─────────────────────────────────────────────────────────

const QUERY_KEYS = [
	'limit',
	'cursor',
	'email',
	'q',
	'role',
	'status',
	'createdAfter',
	'createdBefore',
	'sort',
	'userId',
	'type',
	'occurredAfter',
	'occurredBefore',
]
const b64 = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url')
/** Values that have broken queries before they reach the database: NUL, years it cannot store, bad UTF-8. */
const sharpQueryValues = oneOf(
	'%00',
	'a%00b',
	'0000-01-01T00:00:00Z',
	'%ED%A0%80',
	'%C0%AF',
	b64({ s: 'email', k: 'a\u0000b', i: '00000000-0000-0000-0000-000000000000' }),
	b64({ s: '-createdAt', k: '-271821-04-20T00:00:00.000Z', i: '00000000-0000-0000-0000-000000000000' }),
)
const queryValues = fc.oneof(
	sharpQueryValues,
	oneOf(
		'1',
		'100',
		'101',
		'0',
		'-1',
		'1e3',
		'1.5',
		'0x10',
		' 5',
		'Infinity',
		'NaN',
		'99999999999999999999',
		'user',
		'admin',
		'active',
		'deactivated',
		'createdAt',
		'-createdAt',
		'email',
		'-email',
		'login.failed',
		'$victim.id',
		'$user.email',
		'2024-01-01T00:00:00Z',
		'2024-02-30T00:00:00Z',
		'0000-01-01T00:00:00Z',
		'9999-12-31T23:59:59Z',
		'9999-12-31T23:59:60Z',
		'1970-01-01T00:00:00.000+14:00',
		'2024-01-01',
		'%',
		'%zz',
		'%00',
		'%E0%A4%A',
		'%C0%AF',
		'%ED%A0%80',
		'a%00b',
		'%25',
		'+',
		'',
		b64({ s: '-createdAt', k: '2024-01-01T00:00:00.000Z', i: '00000000-0000-0000-0000-000000000000' }),
		b64({ s: '-createdAt', k: '-271821-04-20T00:00:00.000Z', i: '00000000-0000-0000-0000-000000000000' }),
		b64({ s: '-createdAt', k: '+275760-09-13T00:00:00.000Z', i: '00000000-0000-0000-0000-000000000000' }),
		b64({ s: '-createdAt', k: '0', i: '00000000-0000-0000-0000-000000000000' }),
		b64({ s: 'email', k: 'a\u0000b', i: '00000000-0000-0000-0000-000000000000' }),
		b64({ s: 'email', k: '\ud800', i: '00000000-0000-0000-0000-000000000000' }),
		b64({ s: '-email', k: 'z'.repeat(300), i: '00000000-0000-0000-0000-000000000000' }),
		b64({ s: '-createdAt', k: '2024-01-01T00:00:00.000Z', i: 'not-a-uuid' }),
		b64('00000000-0000-0000-0000-000000000000'),
		b64('not json'),
		b64('null'),
		b64([1, 2]),
		'x'.repeat(513),
	),
	anyText.map((text) => encodeURIComponent(text.replace(/[\ud800-\udfff]/g, '\ufffd'))),
	fc.string({ unit: 'binary-ascii', maxLength: 20 }).map((text) => text.replace(/[#&]/g, '')),
)
const queryKey = fc.oneof(
	{ weight: 6, arbitrary: oneOf(...QUERY_KEYS) },
	{ weight: 1, arbitrary: oneOf('LIMIT', 'limit[]', 'limit[0]', '__proto__', 'constructor', 'toString', '', '%zz', '%00', 'a'.repeat(300)) },
	{ weight: 1, arbitrary: fc.string({ maxLength: 10 }).map((text) => encodeURIComponent(text)) },
)
const queries = fc.oneof(
	{ weight: 1, arbitrary: fc.constant('') },
	{
		// One or two known parameters: past validation, so that hostile values reach the queries.
		weight: 6,
		arbitrary: fc
			.array(fc.tuple(oneOf(...QUERY_KEYS), queryValues), { minLength: 1, maxLength: 2 })
			.map((pairs) => `?${pairs.map(([key, value]) => `${key}=${value}`).join('&')}`),
	},
	{
		weight: 6,
		arbitrary: fc
			.array(fc.tuple(queryKey, fc.option(queryValues, { nil: null })), { minLength: 1, maxLength: 6 })
			.map((pairs) => `?${pairs.map(([key, value]) => (value === null ? key : `${key}=${value}`)).join('&')}`),
	},
	{ weight: 1, arbitrary: oneOf('?', '??', '?&&&', '?=', '?==', '?limit=1&limit=2', '?limit=1=2', '?%', '?%zz=1', '?a=%zz', '?#fragment', '?limit=5#x') },
)

// ── headers and credentials ──────────────────────────────────────────────

/** Header values a client can put on the wire: Latin-1, no CR, LF or NUL. */
const headerSafe = (text: string) => text.replace(/[^\u0020-\u007e\u0080-\u00ff\t]/g, '').trim()

const contentTypes = fc.oneof(
	{
		weight: 4,
		arbitrary: oneOf(
			'application/json',
			'application/json; charset=utf-8',
			'APPLICATION/JSON',
			'application/json;charset=UTF-16',
			'application/json; charset=latin1',
			'application/json;;;',
			' application/json ',
		),
	},
	{
		weight: 2,
		arbitrary: oneOf(
			'text/plain',
			'application/x-www-form-urlencoded',
			'multipart/form-data; boundary=xyz',
			'application/problem+json',
			'application/xml',
			'application/jsonx',
			'json',
			'*/*',
			'',
			'application/octet-stream',
		),
	},
	{ weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 40 }).map(headerSafe) },
)

const accepts = fc.oneof(
	oneOf('application/json', '*/*', 'application/*', 'application/problem+json', 'text/html', 'application/xml', 'application/json;q=0', 'text/*;q=0.5, */*;q=0', '*/*;q=foo', ',,,', 'application/json;q=1.5', 'text/html, application/json;q=0.001'),
	fc.string({ unit: 'binary-ascii', maxLength: 40 }).map(headerSafe),
)

const requestIds = fc.oneof(
	oneOf('trace:abc-123.Z_9', 'a'.repeat(128), 'a'.repeat(129), 'has space', 'semi;colon', '../x', 'ünïcode', ''),
	fc.string({ unit: 'binary-ascii', maxLength: 140 }).map(headerSafe),
)

const forwardedFor = fc.oneof(
	fc.array(fc.oneof(fc.ipV4(), fc.ipV6(), fc.ipV4Extended(), oneOf('10.0.0.1', 'unknown', '', ' ', '::ffff:10.0.0.1', '999.1.1.1', '1.2.3', '0x7f.1', 'fe80::1%eth0', '[::1]', '1.2.3.4:80')), { maxLength: 5 }).map((hops) => hops.join(', ')),
	fc.string({ unit: 'binary-ascii', maxLength: 60 }).map(headerSafe),
)

const otherHeaders = fc.oneof(
	fc.tuple(fc.constant('user-agent'), fc.oneof(fc.string({ maxLength: 60 }).map(headerSafe), fc.constant('U'.repeat(2000)))),
	fc.tuple(fc.constant('origin'), oneOf('http://evil.example', 'null', '*', '')),
	fc.tuple(fc.constant('cookie'), oneOf('session=abc', '__proto__=1')),
	fc.tuple(fc.constant('x-http-method-override'), oneOf('DELETE', 'PUT')),
	fc.tuple(fc.constant('content-encoding'), oneOf('gzip', 'br', 'identity')),
	fc.tuple(fc.constant('transfer-encoding'), oneOf('chunked', 'gzip')),
	fc.tuple(fc.constant('expect'), fc.constant('100-continue')),
	fc.tuple(fc.constant('access-control-request-method'), oneOf('DELETE', 'PUT', 'FOO')),
	fc.tuple(fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 20 }).filter((name) => /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)), fc.string({ maxLength: 30 }).map(headerSafe)),
)

const jwtGarbage = fc.oneof(
	oneOf('', 'a', 'a.b', 'a.b.c', 'a.b.c.d', '...', 'e30.e30.', 'eyJhbGciOiJub25lIn0.e30.', 'null', '😀'),
	fc.base64String({ maxLength: 200 }),
	fc.tuple(fc.base64String({ maxLength: 40 }), fc.base64String({ maxLength: 80 }), fc.base64String({ maxLength: 40 })).map((parts) => parts.join('.')),
	fc.string({ unit: 'binary-ascii', maxLength: 80 }).map(headerSafe),
)

const claimValue = fc.oneof(
	oneOf('$user.id', '$admin.id', '$victim.id', '$user.sid', '$admin.sid', '$victim.sid'),
	fc.uuid(),
	fc.jsonValue({ maxDepth: 1 }),
	hostileStrings,
)
const forged: fc.Arbitrary<AuthSpec> = fc.record({
	kind: fc.constant('forged' as const),
	header: fc.record(
		{
			alg: oneOf('HS256', 'none', 'None', 'HS512', 'RS256', 'EdDSA', ''),
			typ: oneOf('at+jwt', 'JWT', 'AT+JWT', 'application/at+jwt', ''),
			kid: fc.oneof(fc.string({ maxLength: 20 }), oneOf('../../../../dev/null', "' or 1=1 --")),
			crit: fc.constant(['exp']),
			jku: fc.constant('http://evil.example/jwks.json'),
		},
		{ requiredKeys: ['alg'] },
	),
	claims: fc.record(
		{
			sub: fc.oneof(oneOf('$user.id', '$admin.id', '$victim.id'), claimValue),
			sid: fc.oneof(oneOf('$user.sid', '$admin.sid', '$victim.sid'), claimValue),
			jti: fc.oneof(fc.uuid(), claimValue),
			role: fc.oneof(oneOf('admin', 'user'), claimValue),
			iss: fc.oneof(fc.constant('latchkey'), claimValue),
			aud: fc.oneof(fc.constant('latchkey'), fc.constant(['latchkey', 'other']), claimValue),
			iat: fc.oneof(fc.constant('now'), claimValue, hostileNumbers.map(Number)),
			exp: fc.oneof(oneOf('future', 'past'), claimValue, hostileNumbers.map(Number)),
			nbf: fc.oneof(oneOf('future', 'past'), claimValue),
		},
		{ requiredKeys: [] },
	),
	key: oneOf('real' as const, 'real' as const, 'wrong' as const, 'unsigned' as const),
})

const authSpecs: fc.Arbitrary<AuthSpec> = fc.oneof(
	{ weight: 3, arbitrary: fc.constant<AuthSpec>({ kind: 'none' }) },
	{ weight: 5, arbitrary: oneOf('user' as const, 'admin' as const).map((who): AuthSpec => ({ kind: 'as', who })) },
	{
		weight: 2,
		arbitrary: fc.oneof(
			jwtGarbage.map((token) => `Bearer ${token}`),
			fc.tuple(oneOf('Bearer', 'bearer', 'BEARER', 'Bearer  ', 'Bearer\t', 'Basic', 'Token', 'Bearer:', 'Bearer=', ''), jwtGarbage).map(([scheme, token]) => `${scheme} ${token}`),
			oneOf('Bearer', 'Bearer ', 'Basic dXNlcjpwYXNz', 'Bearer $user.access, Bearer $admin.access', 'Bearer $user.access extra', ' Bearer $admin.access', 'Bearer $user.access===', 'bearer $admin.access'),
		).map((value): AuthSpec => ({ kind: 'raw', value: headerSafe(value) })),
	},
	{
		weight: 1,
		arbitrary: fc.record({ kind: fc.constant('truncated' as const), who: oneOf('user' as const, 'admin' as const), keep: fc.nat({ max: 400 }) }),
	},
	{
		weight: 1,
		arbitrary: fc.record({
			kind: fc.constant('tampered' as const),
			who: oneOf('user' as const, 'admin' as const),
			at: fc.nat({ max: 400 }),
			char: oneOf('A', '_', '-', '.', 'z', '0'),
		}),
	},
	{ weight: 2, arbitrary: forged },
)

const sensibleHeaders = fc
	.tuple(fc.option(oneOf('application/json', '*/*', 'application/problem+json'), { freq: 3 }), fc.option(requestIds, { freq: 2 }))
	.map(([accept, requestId]) => {
		const headers: Array<[string, string]> = []
		if (accept !== null) headers.push(['accept', accept])
		if (requestId !== null) headers.push(['x-request-id', requestId])
		return headers
	})

const hostileHeaders = fc
	.tuple(
		fc.option(accepts, { freq: 2 }),
		fc.option(contentTypes, { freq: 2 }),
		fc.option(requestIds, { freq: 2 }),
		fc.option(forwardedFor, { freq: 2 }),
		fc.array(otherHeaders, { maxLength: 3 }),
		fc.array(fc.tuple(oneOf('accept', 'content-type', 'x-request-id', 'authorization'), fc.string({ unit: 'binary-ascii', maxLength: 30 }).map(headerSafe)), { maxLength: 2 }),
	)
	.map(([accept, contentType, requestId, xff, others, repeated]) => {
		const headers: Array<[string, string]> = []
		if (accept !== null) headers.push(['accept', accept])
		if (contentType !== null) headers.push(['content-type', contentType])
		if (requestId !== null) headers.push(['x-request-id', requestId])
		if (xff !== null) headers.push(['x-forwarded-for', xff])
		return [...headers, ...others, ...repeated]
	})

// ── non-JSON bodies ───────────────────────────────────────────────────────

const nonJsonBodies: fc.Arbitrary<BodySpec> = fc.oneof(
	oneOf(
		'',
		' ',
		'null',
		'0',
		'"str"',
		'true',
		'[]',
		'NaN',
		'undefined',
		"{'single':1}",
		'{"a":1,}',
		'{"a":1}garbage',
		'{"a":1}{"b":2}',
		'\uFEFF{"email":"a@b.c"}',
		'{"email":"a@b.c"',
		'{"email":"\\ud800"}',
		'{"email":"\\u0000"}',
		'{"a":"\\x41"}',
		'a=b&c=d',
		'email=a%40b.c&password=x',
		'<?xml version="1.0"?><user/>',
		'--xyz\r\nContent-Disposition: form-data; name="a"\r\n\r\nb\r\n--xyz--',
		'{"email":1e999999}',
		'['.repeat(100_000),
	).map((text): BodySpec => ({ kind: 'text', text })),
	anyText.map((text): BodySpec => ({ kind: 'text', text })),
	fc.uint8Array({ maxLength: 200 }).map((bytes): BodySpec => ({ kind: 'bytes', bytes: [...bytes] })),
	oneOf([0xc3, 0x28], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xff, 0xfe, 0x7b, 0x00, 0x7d, 0x00], [0xef, 0xbb, 0xbf, 0x7b, 0x7d], [0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]).map(
		(bytes): BodySpec => ({ kind: 'bytes', bytes }),
	),
	hugeBody,
	deepBody,
	anyJsonBody,
)

// ── sending and judging one request ──────────────────────────────────────

function safeStringify(value: unknown): string | undefined {
	try {
		return JSON.stringify(value)
	} catch {
		return undefined
	}
}

/** Live values for markers, read when the request is sent. */
function resolve(text: string): string {
	return text.replace(MARKER, (marker: string, who: 'user' | 'admin' | 'victim' | 'org', what: string) => {
		if (who === 'org') return what === 'id' ? org.id : what === 'invitation' ? org.invitation : marker
		const account = who === 'victim' ? victim : principals[who].account
		switch (what) {
			case 'id':
				return account.id
			case 'sid':
				return account.sessionId
			case 'email':
				return account.email
			case 'refresh':
				return account.refreshToken
			default:
				return account.accessToken
		}
	})
}

const resolveDeep = (value: unknown): unknown =>
	typeof value === 'string'
		? resolve(value)
		: Array.isArray(value)
			? value.map(resolveDeep)
			: value !== null && typeof value === 'object'
				? Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, resolveDeep(inner)]))
				: value

function renderBody(body: BodySpec): string | Uint8Array | undefined {
	switch (body.kind) {
		case 'none':
			return undefined
		case 'members':
			return `{${body.members.map(([key, value]) => `${JSON.stringify(key)}:${resolve(value)}`).join(',')}}`
		case 'text':
			return resolve(body.text)
		case 'bytes':
			return new Uint8Array(body.bytes)
		case 'huge': {
			const frame = `{"${body.field}":"`
			const unitBytes = Buffer.byteLength(body.unit)
			const count = Math.max(0, Math.floor((BODY_LIMIT + body.delta - frame.length - 2) / unitBytes))
			return `${frame}${body.unit.repeat(count)}"}`
		}
		case 'deep': {
			const close = body.open === '[' ? ']' : '}'
			const nested = body.open.repeat(body.depth) + (body.open === '[' ? '' : '1') + close.repeat(body.depth)
			return body.field === null ? nested : `{"${body.field}":${nested}}`
		}
	}
}

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')

function forgeToken(spec: Extract<AuthSpec, { kind: 'forged' }>): string {
	const now = Math.floor(Date.now() / 1000)
	const time = (value: unknown) => (value === 'future' ? now + 600 : value === 'past' ? now - 3600 : value === 'now' ? now : value)
	const claims = resolveDeep(spec.claims) as Record<string, unknown>
	for (const name of ['iat', 'exp', 'nbf']) if (name in claims) claims[name] = time(claims[name])
	const signingInput = `${b64url(spec.header)}.${b64url(claims)}`
	if (spec.key === 'unsigned') return `${signingInput}.`
	const secret = spec.key === 'real' ? t.config.jwt.secret : 'not-the-key-not-the-key-not-the-key'
	if (secret === undefined) throw new Error('the fuzz test forges HS256 tokens; run it with JWT_SECRET set')
	const key = new TextEncoder().encode(secret)
	return `${signingInput}.${new Bun.CryptoHasher('sha256', key).update(signingInput).digest('base64url')}`
}

/** The current account of `who`, checked (and replaced if a request ended it) when it may have changed. */
async function principal(who: 'user' | 'admin'): Promise<Account> {
	const current = principals[who]
	if (!current.dirty) return current.account
	const alive = async (account: Account) => {
		const res = await t.app.handle(
			new Request('http://localhost/api/users/me', { headers: { authorization: `Bearer ${account.accessToken}` } }),
		)
		const body = (await res.json()) as { data?: { role?: string; status?: string; email?: string } }
		return res.status === 200 && body.data?.role === who && body.data.status === 'active'
	}
	if (!(await alive(current.account))) {
		const res = await t.app.handle(
			new Request('http://localhost/api/auth/login', {
				method: 'POST',
				headers: { 'content-type': 'application/json' },
				body: JSON.stringify({ email: current.account.email, password: PASSWORD }),
			}),
		)
		const body = (await res.json()) as { data?: { accessToken: string; refreshToken: string; user: { id: string } } }
		const relogged =
			res.status === 200 && body.data
				? {
						...current.account,
						id: body.data.user.id,
						accessToken: body.data.accessToken,
						refreshToken: body.data.refreshToken,
						sessionId: String(jwtPayload(body.data.accessToken).sid),
					}
				: undefined
		current.account =
			relogged && (await alive(relogged)) ? relogged : who === 'admin' ? await signUpAdmin(t) : await signUp(t, { name: 'Fuzz User' })
	}
	current.dirty = false
	return current.account
}

async function renderAuth(auth: AuthSpec): Promise<string | undefined> {
	switch (auth.kind) {
		case 'none':
			return undefined
		case 'as':
			return `Bearer ${(await principal(auth.who)).accessToken}`
		case 'raw':
			return resolve(auth.value)
		case 'truncated': {
			const token = (await principal(auth.who)).accessToken
			return `Bearer ${token.slice(0, auth.keep % (token.length + 1))}`
		}
		case 'tampered': {
			const token = (await principal(auth.who)).accessToken
			const at = auth.at % token.length
			return `Bearer ${token.slice(0, at)}${auth.char}${token.slice(at + 1)}`
		}
		case 'forged':
			return `Bearer ${forgeToken(auth)}`
	}
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])

/** Signatures of what must never reach a client: hashes, stack traces, SQL. */
const LEAKS: Array<[string, RegExp]> = [
	['an argon2 hash', /\$argon2/i],
	['a password_hash column', /password_hash/i],
	['a passwordHash member', /passwordHash/i],
	['a stack trace', /stack/i],
	['a stack frame', /at \//],
	['SQL', /\bselect\s[\s\S]*\sfrom\s/i],
]
const SECRET_KEYS = new Set(['password', 'passwordHash', 'password_hash', 'currentPassword', 'hash', 'tokenHash', 'token_hash'])

function secretKeysIn(value: unknown, path = ''): string[] {
	if (Array.isArray(value)) return value.flatMap((item, index) => secretKeysIn(item, `${path}/${index}`))
	if (value === null || typeof value !== 'object') return []
	return Object.entries(value).flatMap(([key, inner]) => [...(SECRET_KEYS.has(key) ? [`${path}/${key}`] : []), ...secretKeysIn(inner, `${path}/${key}`)])
}

function describeRequest(request: Request, bodyText: string): string {
	const shown = bodyText.length > 300 ? `${bodyText.slice(0, 300)}… (${bodyText.length} chars)` : bodyText
	return `${request.method} ${request.url} ${JSON.stringify(Object.fromEntries(request.headers))} ${JSON.stringify(shown)}`
}

async function send(spec: HostileRequest): Promise<void> {
	const headers = new Headers()
	for (const [name, value] of spec.headers) headers.append(name, resolve(value))
	const authorization = await renderAuth(spec.auth)
	if (authorization !== undefined) headers.append('authorization', authorization)
	const rendered = renderBody(spec.body)
	const method = spec.method
	const canHaveBody = !['GET', 'HEAD'].includes(method.toUpperCase())
	const bytes = rendered === undefined || !canHaveBody ? undefined : typeof rendered === 'string' ? new TextEncoder().encode(rendered) : rendered
	const init: RequestInit = { method, headers }
	if (bytes !== undefined) {
		init.body = spec.stream
			? new ReadableStream<Uint8Array>({
					start(controller) {
						for (let offset = 0; offset < bytes.length; offset += 8192) controller.enqueue(bytes.slice(offset, offset + 8192))
						controller.close()
					},
				})
			: bytes
	}
	const url = `http://localhost${resolve(spec.path)}${resolve(spec.query)}`
	const request = new Request(url, init)
	const bodyText = bytes === undefined ? '' : new TextDecoder().decode(bytes)
	const label = describeRequest(request, bodyText)
	// What the request itself carried: a body may echo it (a name, a path) without leaking anything.
	let decodedUrl = url
	try {
		decodedUrl = decodeURIComponent(url)
	} catch {}
	const carried = [url, decodedUrl, bodyText, ...[...headers.values()]].join('\n')

	let timer: Timer | undefined
	const hang = new Promise<never>((_, reject) => {
		timer = setTimeout(() => reject(new Error(`no response within ${HANG_MS} ms: ${label}`)), HANG_MS)
	})
	const response = await Promise.race([t.app.handle(request), hang]).finally(() => clearTimeout(timer))
	const text = await response.text()
	if (!SAFE_METHODS.has(method.toUpperCase()) && response.status < 400) {
		principals.user.dirty = true
		principals.admin.dirty = true
	}

	const context = `${label}\n→ ${response.status} ${text.slice(0, 500)}`
	expect(response.status, context).toBeLessThan(500)
	expect(response.headers.get('x-request-id'), context).toBeTruthy()
	const offeredId = request.headers.get('x-request-id')
	if (offeredId !== null && /^[A-Za-z0-9._:-]{1,128}$/.test(offeredId)) expect(response.headers.get('x-request-id'), context).toBe(offeredId)
	expect(response.headers.get('x-content-type-options'), context).toBe('nosniff')

	for (const [what, pattern] of LEAKS)
		if (pattern.test(text) && !pattern.test(carried)) throw new Error(`the response carries ${what}\n${context}`)

	if (response.status >= 400) {
		expect(response.headers.get('content-type'), context).toBe('application/problem+json')
		// A HEAD response has no body (RFC 9110 §9.3.2); its headers are judged all the same.
		if (method.toUpperCase() === 'HEAD') return
		const doc = parseObject(text, context)
		expect(doc, context).toEqual({
			type: expect.any(String),
			title: expect.any(String),
			status: response.status,
			detail: expect.any(String),
			instance: expect.any(String),
			data: null,
			message: doc.detail,
			errors: expect.any(Array),
		})
		const kind = String(doc.type).slice(PROBLEM_TYPE_BASE.length) as keyof typeof PROBLEM_KINDS
		expect(String(doc.type).startsWith(PROBLEM_TYPE_BASE), context).toBe(true)
		expect(PROBLEM_KINDS[kind]?.status as number | undefined, context).toBe(response.status)
		for (const error of doc.errors as unknown[])
			expect(error, context).toEqual({ pointer: expect.any(String), detail: expect.any(String), code: expect.any(String) })
		if (response.status === 401) expect(response.headers.get('www-authenticate') ?? '', context).toStartWith('Bearer realm=')
		if (response.status === 405) expect(response.headers.get('allow') ?? '', context).not.toBe('')
	} else if (response.status !== 204 && method.toUpperCase() !== 'HEAD') {
		expect(response.headers.get('content-type') ?? '', context).toStartWith('application/json')
		const doc = parseObject(text, context)
		if (!request.url.includes('jwks.json')) {
			expect(Object.keys(doc).sort(), context).toEqual(['data', 'errors', 'message'])
			expect(doc.errors, context).toEqual([])
			expect(typeof doc.message, context).toBe('string')
		}
		expect(secretKeysIn(doc), context).toEqual([])
	}
}

function parseObject(text: string, context: string): Record<string, unknown> {
	let parsed: unknown
	try {
		parsed = JSON.parse(text)
	} catch {
		throw new Error(`the body is not JSON\n${context}`)
	}
	if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error(`the body is not a JSON object\n${context}`)
	return parsed as Record<string, unknown>
}

/**
 * A request on one of `shapes` (route, method, body), with the dimensions a
 * property is about replaced by hostile ones. One in ten keeps its path but
 * changes its method.
 */
const hostile = (
	shapes: fc.Arbitrary<RouteShape>,
	overrides: { query?: fc.Arbitrary<string>; headers?: fc.Arbitrary<Array<[string, string]>>; auth?: fc.Arbitrary<AuthSpec>; body?: fc.Arbitrary<BodySpec> } = {},
): fc.Arbitrary<HostileRequest> =>
	fc
		.record({
			shape: shapes,
			query: overrides.query ?? fc.constant(''),
			headers: overrides.headers ?? sensibleHeaders.map((headers): Array<[string, string]> => [['content-type', 'application/json'], ...headers]),
			auth: overrides.auth ?? authSpecs,
			body: overrides.body ?? fc.constant(null),
			otherMethod: fc.oneof({ weight: 9, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: methods }),
			stream: fc.boolean(),
		})
		.map(({ shape, query, headers, auth, body, otherMethod, stream }) => ({
			method: otherMethod ?? shape.method,
			path: shape.path,
			query,
			headers,
			auth,
			body: body ?? shape.body,
			stream,
		}))

const run = (property: fc.Arbitrary<HostileRequest>, numRuns: number) =>
	fc.assert(
		fc.asyncProperty(property, (spec) => send(spec)),
		{ seed: SEED, numRuns, endOnFailure: false, verbose: 1 },
	)

// ── the properties ───────────────────────────────────────────────────────

describe('hostile input never breaks the contract', () => {
	test('every route answers generated JSON bodies with a success envelope or a problem document', async () => {
		await run(hostile(routes), 1500)
	}, 120_000)

	test('non-JSON bodies, odd media types and streamed bodies are refused cleanly', async () => {
		const withContentType = fc
			.tuple(fc.option(contentTypes, { freq: 5 }), sensibleHeaders)
			.map(([contentType, rest]): Array<[string, string]> => (contentType === null ? rest : [['content-type', contentType], ...rest]))
		await run(hostile(routes.filter((shape) => shape.method !== 'GET'), { body: nonJsonBodies, headers: withContentType }), 700)
	}, 120_000)

	test('random query strings on the listing and resource routes are validated, never crash', async () => {
		const listings = fc.oneof({ weight: 4, arbitrary: route('GET', oneOf('/api/users', '/api/audit-events')) }, { weight: 1, arbitrary: routes })
		const mostlyAdmin = fc.oneof(
			{ weight: 6, arbitrary: fc.constant<AuthSpec>({ kind: 'as', who: 'admin' }) },
			{ weight: 1, arbitrary: authSpecs },
		)
		await run(hostile(listings, { query: queries, auth: mostlyAdmin }), 800)
	}, 120_000)

	test('random headers and Authorization values get a problem document, never a crash', async () => {
		await run(hostile(routes, { headers: hostileHeaders }), 800)
	}, 120_000)

	test('random paths and methods are 404, 405 or a proper answer', async () => {
		const anywhere = fc.record({ method: methods, path: randomPath, body: fc.oneof(fc.constant<BodySpec>({ kind: 'none' }), anyJsonBody) })
		await run(hostile(anywhere, { query: fc.oneof(fc.constant(''), queries) }), 600)
	}, 120_000)

	test('the organization routes answer hostile ids, bodies, queries and tokens with an envelope or a problem, never a 5xx', async () => {
		const organizationQueries = fc.oneof({ weight: 3, arbitrary: fc.constant('') }, { weight: 2, arbitrary: queries })
		await run(hostile(organizationRouteShapes, { query: organizationQueries }), 1200)
	}, 240_000)

	test('OPTIONS and CORS preflights carry the request id and security headers like every response', async () => {
		const preflight = fc
			.tuple(
				fc.option(oneOf('http://evil.example', 'null', 'https://app.example'), { freq: 4 }),
				fc.option(oneOf('GET', 'POST', 'PUT', 'DELETE', 'FOO'), { freq: 4 }),
				fc.option(oneOf('authorization', 'content-type, x-request-id', 'x-anything'), { freq: 2 }),
				sensibleHeaders,
			)
			.map(([origin, method, requested, rest]) => {
				const headers: Array<[string, string]> = [...rest]
				if (origin !== null) headers.push(['origin', origin])
				if (method !== null) headers.push(['access-control-request-method', method])
				if (requested !== null) headers.push(['access-control-request-headers', requested])
				return headers
			})
		const anyPath = fc.oneof(routes, fc.record({ method: fc.constant('OPTIONS'), path: randomPath, body: fc.constant<BodySpec>({ kind: 'none' }) }))
		await run(hostile(anyPath.map((shape) => ({ ...shape, method: 'OPTIONS' })), { headers: preflight, body: fc.constant<BodySpec>({ kind: 'none' }) }), 200)
	}, 120_000)
})

describe('afterwards the database holds nothing half-written', () => {
	const db = () => t.database.handle.db

	test('every user row keeps the constraints: normalised email, known role, status matching deactivatedAt', async () => {
		const bad = await db()
			.select({ id: users.id, email: users.email, role: users.role, status: users.status, deactivatedAt: users.deactivatedAt })
			.from(users)
			.where(
				sql`${users.email} <> lower(btrim(${users.email})) or ${users.email} = '' or ${users.role} not in ('user', 'admin')
					or ${users.status} not in ('active', 'deactivated')
					or (${users.status} = 'deactivated') <> (${users.deactivatedAt} is not null)
					or ${users.passwordHash} not like '$argon2%'`,
			)
		expect(bad).toEqual([])
		const [duplicates] = await db().select({ count: sql<number>`count(*) - count(distinct ${users.email})` }).from(users)
		expect(Number(duplicates?.count)).toBe(0)
	})

	test('every organization keeps an owner, every membership names roles that exist, and no defined role holds `*`', async () => {
		const ownerless = await db()
			.select({ id: organizations.id })
			.from(organizations)
			.where(sql`not exists (select 1 from ${organizationMembers} where ${organizationMembers.organizationId} = ${organizations.id} and 'owner' = any(${organizationMembers.roles}))`)
		expect(ownerless).toEqual([])
		const unknownRoles = await db()
			.select({ userId: organizationMembers.userId, roles: organizationMembers.roles })
			.from(organizationMembers)
			.where(sql`cardinality(${organizationMembers.roles}) = 0 or exists (select 1 from unnest(${organizationMembers.roles}) as role where role not in (select ${organizationRoles.name} from ${organizationRoles}))`)
		expect(unknownRoles).toEqual([])
		const everything = await db().select({ name: organizationRoles.name }).from(organizationRoles).where(sql`not ${organizationRoles.builtIn} and '*' = any(${organizationRoles.permissions})`)
		expect(everything).toEqual([])
	})

	test('the fixture accounts are still there and an active admin remains', async () => {
		const ids = [victim.id, principals.user.account.id, principals.admin.account.id]
		for (const id of ids) expect(await db().select({ id: users.id }).from(users).where(eq(users.id, id))).toHaveLength(1)
		const admins = await db().select({ id: users.id }).from(users).where(and(eq(users.role, 'admin'), eq(users.status, 'active')))
		expect(admins.length).toBeGreaterThan(0)
	})

	test('every session belongs to an existing user, and no deactivated user keeps a live session', async () => {
		const orphans = await db()
			.select({ id: sessions.id })
			.from(sessions)
			.where(sql`not exists (select 1 from ${users} where ${users.id} = ${sessions.userId})`)
		expect(orphans).toEqual([])
		const live = await db()
			.select({ id: sessions.id })
			.from(sessions)
			.innerJoin(users, eq(users.id, sessions.userId))
			.where(and(eq(users.status, 'deactivated'), isNull(sessions.revokedAt)))
		expect(live).toEqual([])
	})

	test('every refresh token belongs to an existing session, with at most one live token per session', async () => {
		const orphans = await db()
			.select({ id: refreshTokens.id })
			.from(refreshTokens)
			.where(sql`not exists (select 1 from ${sessions} where ${sessions.id} = ${refreshTokens.sessionId})`)
		expect(orphans).toEqual([])
		const doubled = await db()
			.select({ sessionId: refreshTokens.sessionId, live: sql<number>`count(*)` })
			.from(refreshTokens)
			.where(isNull(refreshTokens.rotatedAt))
			.groupBy(refreshTokens.sessionId)
			.having(sql`count(*) > 1`)
		expect(doubled).toEqual([])
		const withoutParent = await db()
			.select({ id: refreshTokens.id })
			.from(refreshTokens)
			.where(
				and(
					sql`${refreshTokens.parentId} is not null`,
					sql`not exists (select 1 from ${refreshTokens} as parent where parent.id = ${refreshTokens.parentId})`,
				),
			)
		expect(withoutParent).toEqual([])
	})

	test('no audit event holds a password, a hash or a token', async () => {
		const events = await db().select({ id: auditEvents.id, details: auditEvents.details }).from(auditEvents)
		expect(events.length).toBeGreaterThan(0)
		const secretish = (key: string) => /password|hash|secret|token/i.test(key) && key !== 'sessionId'
		const leaking = events.filter(({ details }) => {
			const text = JSON.stringify(details)
			return Object.keys(details).some(secretish) || text.includes('$argon2') || text.includes(PASSWORD) || /\b[0-9a-f]{64}\b|"[A-Za-z0-9_-]{43}"/.test(text)
		})
		expect(leaking).toEqual([])
		const unknownActors = await db()
			.select({ id: auditEvents.id })
			.from(auditEvents)
			.where(
				and(
					sql`${auditEvents.actorId} is not null`,
					sql`not exists (select 1 from ${users} where ${users.id} = ${auditEvents.actorId})`,
				),
			)
		expect(unknownActors).toEqual([])
	})
})
