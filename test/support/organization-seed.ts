import type { Queryable } from '../../src/db/client'
import { organizationMembers, organizations } from '../../src/db/schema'

// Organizations written straight into the database, for tests whose subject is something else (tokens,
// invitations) and that need one to exist. The organization routes themselves are tested through HTTP.

export interface SeededOrganization {
	id: string
	slug: string
}

/** An active organization with the given members and their roles. */
export async function seedOrganization(
	db: Queryable,
	members: { userId: string; roles: string[] }[],
	{ name = 'Acme', slug = `acme-${crypto.randomUUID().slice(0, 8)}` }: { name?: string; slug?: string } = {},
): Promise<SeededOrganization> {
	const id = Bun.randomUUIDv7()
	await db.insert(organizations).values({ id, name, slug })
	if (members.length) await db.insert(organizationMembers).values(members.map((member) => ({ organizationId: id, ...member })))
	return { id, slug }
}
