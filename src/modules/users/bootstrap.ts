import { and, eq } from 'drizzle-orm'
import type { Database } from '../../db/client'
import { users } from '../../db/schema'
import { AppError } from '../../http/problem'
import type { Logger } from '../../log'
import { passwordProblem, type PasswordHasher } from '../auth/password'
import { recordWebhookEvents } from '../webhooks/outbox'
import { normalizeEmail } from './model'
import { insertUser, userChangeEvents } from './service'

export class BootstrapError extends Error {
	constructor(
		message: string,
		readonly emailTaken = false,
	) {
		super(message)
	}
}

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
	try {
		const passwordHash = await hasher.hash(input.password)
		return await db.transaction(async (tx) => {
			const admin = await insertUser(tx, {
				email,
				name: input.name ?? '',
				role: 'admin',
				passwordHash,
				// The operator vouches for the first admin's address: it can sign in under EMAIL_VERIFICATION=required.
				emailVerifiedAt: new Date(),
			})
			await recordWebhookEvents(tx, userChangeEvents(null, admin))
			return admin
		})
	} catch (error) {
		if (error instanceof AppError && error.kind === 'email-taken')
			throw new BootstrapError(`an account with the email ${email} already exists`, true)
		throw error
	}
}

/** Whether any account can administer the service. */
async function hasActiveAdmin(db: Database): Promise<boolean> {
	const [admin] = await db
		.select({ id: users.id })
		.from(users)
		.where(and(eq(users.role, 'admin'), eq(users.status, 'active')))
		.limit(1)
	return admin !== undefined
}

export const NO_ACTIVE_ADMIN =
	'no active admin: nobody can manage accounts. Create one with `latchkey admin create --email <an email no account has>` ' +
	'(the password is read from standard input), or set LATCHKEY_ADMIN_EMAIL and LATCHKEY_ADMIN_PASSWORD to such an email and restart'

/**
 * At start: while no active admin exists, the admin of LATCHKEY_ADMIN_EMAIL /
 * LATCHKEY_ADMIN_PASSWORD is created (first install, or the only admin was
 * deactivated). An existing account with that email is never promoted nor
 * reactivated: whoever holds it would become admin. Without an active admin
 * the service still starts, and says what to do.
 */
export async function ensureActiveAdmin(
	db: Database,
	hasher: PasswordHasher,
	admin: { email: string; password: string } | undefined,
	passwordMinLength: number,
	log: Logger,
) {
	if (await hasActiveAdmin(db)) return
	if (admin) {
		try {
			const created = await createAdmin(db, hasher, admin, passwordMinLength)
			log.info({ userId: created.id }, 'created the first admin from LATCHKEY_ADMIN_EMAIL')
			return
		} catch (error) {
			// Another instance starting at the same moment may have created it.
			if (await hasActiveAdmin(db)) return
			if (!(error instanceof BootstrapError && error.emailTaken)) throw error
			log.warn('LATCHKEY_ADMIN_EMAIL names an existing account, which is never promoted or reactivated from the environment')
		}
	}
	log.warn(NO_ACTIVE_ADMIN)
}
