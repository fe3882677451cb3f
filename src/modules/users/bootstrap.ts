import { eq } from 'drizzle-orm'
import type { Database } from '../../db/client'
import { users } from '../../db/schema'
import { AppError } from '../../http/problem'
import type { Logger } from '../../log'
import { passwordProblem, type PasswordHasher } from '../auth/password'
import { normalizeEmail, UsersService } from './service'

export class BootstrapError extends Error {}

/**
 * Creates an admin account. Used by `latchkey admin create` and, when no
 * admin exists yet, by LATCHKEY_ADMIN_EMAIL/LATCHKEY_ADMIN_PASSWORD at start.
 * The password is checked against the same policy as everyone's.
 */
export async function createAdmin(
	db: Database,
	hasher: PasswordHasher,
	input: { email: string; password: string; name?: string },
	passwordMinLength: number,
) {
	const email = normalizeEmail(input.email)
	if (!/^[^\s@]+@[^\s@]+$/.test(email)) throw new BootstrapError(`"${input.email}" is not an email address`)
	const problem = passwordProblem(input.password, passwordMinLength)
	if (problem) throw new BootstrapError(`the admin password ${problem.detail}`)
	const service = new UsersService({ db, hasher, passwordMinLength, signupEnabled: false })
	try {
		return await service.insert({ email, name: input.name ?? '', role: 'admin', passwordHash: await hasher.hash(input.password) })
	} catch (error) {
		if (error instanceof AppError && error.kind === 'email-taken')
			throw new BootstrapError(`an account with the email ${email} already exists`)
		throw error
	}
}

/**
 * The first admin from the environment, only while there is no admin at all.
 * An existing non-admin account with that email is never promoted: whoever
 * signed up with it first would otherwise become admin.
 */
export async function ensureBootstrapAdmin(
	db: Database,
	hasher: PasswordHasher,
	admin: { email: string; password: string },
	passwordMinLength: number,
	log: Logger,
) {
	const [existing] = await db.select({ id: users.id }).from(users).where(eq(users.role, 'admin')).limit(1)
	if (existing) return
	try {
		const created = await createAdmin(db, hasher, admin, passwordMinLength)
		log.info({ userId: created.id }, 'created the first admin from LATCHKEY_ADMIN_EMAIL')
	} catch (error) {
		// Another instance starting at the same moment may have created it.
		const [raced] = await db
			.select({ id: users.id })
			.from(users)
			.where(eq(users.email, normalizeEmail(admin.email)))
		const [anyAdmin] = await db.select({ id: users.id }).from(users).where(eq(users.role, 'admin')).limit(1)
		if (raced && anyAdmin) return
		throw error
	}
}
