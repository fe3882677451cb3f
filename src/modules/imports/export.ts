import { and, asc, eq, gt, inArray } from 'drizzle-orm'
import type { DataKeys } from '../../crypto/data-keys'
import type { Database } from '../../db/client'
import { factors, identities, users } from '../../db/schema'
import { toIdentityResource } from '../oidc/model'
import type { ImportUser } from './model'

/** Users read a page at a time, in id order (a keyset on the primary key), with their identities and factors. */
const EXPORT_PAGE = 2000

export interface ExportOptions {
	/** `--with-hashes`: each user's password hash and TOTP secrets (base32, opened): a file as sensitive as the database. */
	withHashes: boolean
}

/**
 * Every account as a line of Latchkey's format (NDJSON), in id order, handed to `write` a page at a time: the
 * members as the API shows them, identities as GET /users/{id}/identities shows them, and with `withHashes` the
 * password hash and the active TOTP factors' secrets. Memory stays at a page whatever the number of users.
 * Returns how many users were written.
 */
export async function exportUsers(db: Database, dataKeys: DataKeys, options: ExportOptions, write: (chunk: string) => Promise<unknown> | unknown): Promise<number> {
	let after: string | undefined
	let written = 0
	for (;;) {
		const page = await db
			.select()
			.from(users)
			.where(after === undefined ? undefined : gt(users.id, after))
			.orderBy(asc(users.id))
			.limit(EXPORT_PAGE)
		if (page.length === 0) return written
		const ids = page.map((user) => user.id)
		const links = await db.select().from(identities).where(inArray(identities.userId, ids)).orderBy(asc(identities.createdAt), asc(identities.id))
		const linksOf = groupBy(links, (link) => link.userId)
		const secretsOf = new Map<string, Array<{ name: string; secret: string }>>()
		if (options.withHashes) {
			const totp = await db
				.select()
				.from(factors)
				.where(and(inArray(factors.userId, ids), eq(factors.type, 'totp'), eq(factors.status, 'active')))
				.orderBy(asc(factors.createdAt), asc(factors.id))
			for (const factor of totp) {
				if (!factor.totpSecret) continue
				const { plaintext } = await dataKeys.open(factor.totpSecret, factor.id)
				secretsOf.set(factor.userId, [...(secretsOf.get(factor.userId) ?? []), { name: factor.name, secret: plaintext }])
			}
		}
		let chunk = ''
		for (const user of page) {
			const line: ImportUser & { identities: unknown[] } = {
				id: user.id,
				email: user.email,
				emailVerified: user.emailVerifiedAt !== null,
				name: user.name,
				role: user.role,
				status: user.status,
				createdAt: user.createdAt.toISOString(),
				metadata: user.metadata,
				appMetadata: user.appMetadata,
				identities: (linksOf.get(user.id) ?? []).map(toIdentityResource),
				...(options.withHashes ? { passwordHash: user.passwordHash, totpSecrets: secretsOf.get(user.id) ?? [] } : {}),
			}
			chunk += `${JSON.stringify(line)}\n`
		}
		await write(chunk)
		written += page.length
		after = page.at(-1)?.id
	}
}

function groupBy<T>(items: T[], keyOf: (item: T) => string): Map<string, T[]> {
	const groups = new Map<string, T[]>()
	for (const item of items) {
		const key = keyOf(item)
		const group = groups.get(key)
		if (group) group.push(item)
		else groups.set(key, [item])
	}
	return groups
}
