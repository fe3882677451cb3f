import {
	generateAuthenticationOptions,
	generateRegistrationOptions,
	verifyAuthenticationResponse,
	verifyRegistrationResponse,
	type AuthenticationResponseJSON,
	type AuthenticatorTransport,
	type RegistrationResponseJSON,
} from '@simplewebauthn/server'
import { and, asc, count, eq, gt, isNull, lt, or, sql } from 'drizzle-orm'
import type { Config } from '../../config/env'
import { UnreadableSecret, type DataKeys } from '../../crypto/data-keys'
import { sqlState, type Database } from '../../db/client'
import { factors, mfaTokens, recoveryCodes, sessions, users, webauthnChallenges, type FactorRow, type UserRow } from '../../db/schema'
import { AppError, Conflict, NotFound } from '../../http/problem'
import type { Logger } from '../../log'
import type { WayInNotices } from '../../mail/notices'
import type { AuditLog, ClientInfo } from '../audit/service'
import type { LoginLockout, PasswordAttempt } from '../auth/lockout'
import { finishedAmr, recordLoginLocked, type BrowserBinding, type IssuedSession, type MfaMethod, type SecondFactors, type SignIn } from '../auth/sign-in'
import { requireRecentAuthentication, type Caller, type Queryable, type SessionAssurance } from '../auth/sessions'
import { provenanceAal } from '../auth/ways-in'
import { hashMfaToken, hashRecoveryCode, newMfaToken, newRecoveryCode, RECOVERY_CODE_COUNT } from './codes'
import { matchingStep, newTotpSecret, totpQrCodeSvg, totpUri } from './totp'
import { toFactorResource } from './model'
import { recordWebhookEvents } from '../webhooks/outbox'

export type FactorType = FactorRow['type']
export type { MfaMethod }

/** An `mfaToken` and a WebAuthn challenge live this long (API.md). */
export const MFA_TOKEN_SECONDS = 300
export const CHALLENGE_SECONDS = 300
/** Wrong codes an `mfaToken` survives: the fifth voids it. */
export const MFA_TOKEN_TRIES = 5
/** Factors an account may hold, pending ones included: enough for every device, not a table to fill. */
export const FACTORS_PER_USER_MAX = 20

export interface FactorsServiceDeps {
	db: Database
	audit: AuditLog
	dataKeys: DataKeys
	/** Wrong second-factor codes per account, apart from the password lockout (same settings, same store). */
	lockout: LoginLockout
	settings: Config['mfa']
	/** REAUTHENTICATION_SECONDS: how recent a check must be to add a factor. */
	reauthenticationSeconds: number
	/** RECOVERY_REVIEW_SECONDS: a factor added at aal1 this recently lends no aal2 to what is added after it. */
	recoveryReviewSeconds: number
	/** A notice to the account's address of every factor added or removed. */
	notices: Pick<WayInNotices, 'queue'>
	log: Logger
	/** The sign-in road: starts the session a completed sign-in earns, on the account as it was checked; renews one a check proved again. */
	signIn: Pick<SignIn, 'start' | 'renew' | 'succeeded'>
}

export const mfaRequired = () =>
	new AppError('mfa-required', 'This needs a session signed in with a second factor (aal2): sign in again with your factor')

const invalidMfaToken = () =>
	new AppError('invalid-mfa-token', 'The MFA token is invalid, used, expired or worn out by wrong codes; log in again')

const invalidSecondFactor = () => new AppError('invalid-second-factor', 'The code or passkey was not accepted')

const invalidActivation = (what: string) => new AppError('invalid-code', `The ${what} does not prove this factor; try again`)

const passkeyRefused = () => new AppError('invalid-credentials', 'The passkey was not accepted')

/** A user id as the 16 bytes WebAuthn calls the user handle. */
const userHandle = (userId: string) => Buffer.from(userId.replaceAll('-', ''), 'hex')
const userIdFromHandle = (handle: string | undefined) => {
	const hex = handle ? Buffer.from(handle, 'base64url').toString('hex') : ''
	return hex.length === 32 ? `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}` : undefined
}

/** The methods a login owing a second factor can complete it with, from the account's active factors and codes. */
export async function secondFactorMethods(db: Queryable, userId: string): Promise<MfaMethod[]> {
	const active = await db
		.select({ type: factors.type })
		.from(factors)
		.where(and(eq(factors.userId, userId), eq(factors.status, 'active')))
		.groupBy(factors.type)
	if (active.length === 0) return []
	const [codes] = await db
		.select({ left: count() })
		.from(recoveryCodes)
		.where(and(eq(recoveryCodes.userId, userId), isNull(recoveryCodes.usedAt)))
	const methods: MfaMethod[] = active.map((row) => row.type).sort()
	return (codes?.left ?? 0) > 0 ? [...methods, 'recovery-code'] : methods
}

/**
 * A login half done: the token the client completes it with, bound to the account as the first step saw it,
 * and with that step's RFC 8176 methods (`['pwd']` after a password; none after a provider), which the
 * finished session's `amr` starts from.
 */
export async function issueMfaToken(db: Queryable, user: Pick<UserRow, 'id' | 'credentialsVersion'>, firstStepAmr: string[]): Promise<string> {
	const token = newMfaToken()
	await db.insert(mfaTokens).values({
		id: Bun.randomUUIDv7(),
		userId: user.id,
		tokenHash: hashMfaToken(token),
		credentialsVersion: user.credentialsVersion,
		amr: firstStepAmr,
		expiresAt: new Date(Date.now() + MFA_TOKEN_SECONDS * 1000),
	})
	return token
}

/** What the sign-in road asks of the second factors (given it in app.ts): does an account owe one, and the token that finishes it. */
export const owedSecondFactors = (db: Queryable): SecondFactors => ({
	methodsOf: (userId) => secondFactorMethods(db, userId),
	issueMfaToken: (user, firstStepAmr) => issueMfaToken(db, user, firstStepAmr),
})

/**
 * TOTP and passkey factors, recovery codes, and the sign-in steps that use them (`/auth/mfa`, `/auth/passkey`).
 * Every one-time thing is spent with a conditional UPDATE … RETURNING, so that two requests racing with the
 * same code, token, challenge or counter value cannot both win, on one instance or several.
 */
export class FactorsService {
	constructor(private readonly deps: FactorsServiceDeps) {}

	async list(userId: string): Promise<FactorRow[]> {
		return this.deps.db.select().from(factors).where(eq(factors.userId, userId)).orderBy(asc(factors.createdAt), asc(factors.id))
	}

	async hasSecondFactor(userId: string): Promise<boolean> {
		return (await secondFactorMethods(this.deps.db, userId)).length > 0
	}

	/**
	 * With an active factor, sensitive changes need a session that used one (aal2). An account without one
	 * has nothing to step up to.
	 */
	async requireStepUp(caller: Caller): Promise<void> {
		if (caller.assurance.aal === 'aal2') return
		if ((await secondFactorMethods(this.deps.db, caller.user.id)).length > 0) throw mfaRequired()
	}

	/** Adding a way in: a recent check of this session (any token taken from an older one adds none), and aal2 once a factor exists. */
	private async requireMayAddFactor(caller: Caller) {
		requireRecentAuthentication(caller, this.deps.reauthenticationSeconds)
		await this.requireStepUp(caller)
	}

	async enrollTotp(caller: Caller, name: string | undefined, client: ClientInfo) {
		await this.requireMayAddFactor(caller)
		const secret = newTotpSecret()
		const id = Bun.randomUUIDv7()
		const factor = await this.insertFactor(caller, {
			id,
			type: 'totp',
			name: name ?? 'Authenticator app',
			totpSecret: await this.deps.dataKeys.seal(secret, id),
		})
		const otpauthUri = totpUri(secret, this.deps.settings.issuer, caller.user.email)
		await this.deps.audit.record('factor.enrolled', client, { actorId: caller.user.id, subjectId: caller.user.id, details: { factorId: id, type: 'totp' } })
		return { factor, secret, otpauthUri, qrCodeSvg: await totpQrCodeSvg(otpauthUri) }
	}

	async enrollWebauthn(caller: Caller, name: string | undefined, client: ClientInfo) {
		await this.requireMayAddFactor(caller)
		const { rpId, rpName } = this.deps.settings
		const existing = await this.deps.db
			.select({ credentialId: factors.credentialId, transports: factors.transports })
			.from(factors)
			.where(and(eq(factors.userId, caller.user.id), eq(factors.type, 'webauthn'), eq(factors.status, 'active')))
		const options = await generateRegistrationOptions({
			rpName,
			rpID: rpId,
			userID: userHandle(caller.user.id),
			userName: caller.user.email,
			userDisplayName: caller.user.name || caller.user.email,
			attestationType: 'none',
			// A discoverable credential with user verification: a passkey that can sign in alone.
			authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
			excludeCredentials: existing.flatMap(({ credentialId, transports }) =>
				credentialId ? [{ id: credentialId, transports: (transports ?? []) as AuthenticatorTransport[] }] : [],
			),
			timeout: CHALLENGE_SECONDS * 1000,
		})
		const id = Bun.randomUUIDv7()
		const factor = await this.deps.db.transaction(async (tx) => {
			const row = await this.insertFactor(caller, { id, type: 'webauthn', name: name ?? 'Passkey' }, tx)
			await tx.insert(webauthnChallenges).values({ challenge: options.challenge, purpose: 'registration', factorId: id, expiresAt: challengeExpiry() })
			return row
		})
		await this.deps.audit.record('factor.enrolled', client, { actorId: caller.user.id, subjectId: caller.user.id, details: { factorId: id, type: 'webauthn' } })
		return { factor, options }
	}

	private async insertFactor(caller: Caller, values: Pick<FactorRow, 'id' | 'type' | 'name'> & { totpSecret?: string }, db: Queryable = this.deps.db) {
		const [held] = await db
			.select({ total: count() })
			.from(factors)
			.where(eq(factors.userId, caller.user.id))
		if ((held?.total ?? 0) >= FACTORS_PER_USER_MAX)
			throw new Conflict('conflict', `An account holds at most ${FACTORS_PER_USER_MAX} factors; remove one first`)
		const [row] = await db
			.insert(factors)
			.values({ ...values, userId: caller.user.id })
			.returning()
		if (!row) throw new Error('factor insert returned no row')
		return row
	}

	/**
	 * Proves a pending factor (a TOTP code, or the authenticator's attestation). The account's first active factor
	 * brings 10 recovery codes, shown once, and raises the session that proved it to aal2: it has just used one.
	 */
	async activate(caller: Caller, factorId: string, proof: { code?: string; response?: RegistrationResponseJSON }, client: ClientInfo) {
		const pending = await this.findOwnFactor(caller.user.id, factorId)
		if (pending.status !== 'pending') throw new Conflict('conflict', 'This factor is already active')
		// Adding a way in to an account that has one is as sensitive as removing one.
		await this.requireMayAddFactor(caller)
		const proved = pending.type === 'totp' ? await this.provedTotp(pending, proof.code) : await this.provedWebauthn(pending, proof.response)
		const result = await this.deps.db.transaction(async (tx) => {
			const [activated] = await tx
				.update(factors)
				.set({
					...proved,
					status: 'active',
					lastUsedAt: sql`now()`,
					activatedAt: sql`now()`,
					// What the rules that undo an intruder's way in look at (see the factors table).
					addedUnverified: caller.user.emailVerifiedAt === null,
					addedAal: await provenanceAal(tx, caller, this.deps.recoveryReviewSeconds),
				})
				.where(and(eq(factors.id, pending.id), eq(factors.status, 'pending')))
				.returning()
			if (!activated) throw new Conflict('conflict', 'This factor is already active')
			await recordWebhookEvents(tx, [{ type: 'factor.added', data: { userId: caller.user.id, factor: toFactorResource(activated) } }])
			await this.deps.notices.queue(tx, caller.user, [{ way: factorWay(activated.type), change: 'added', label: activated.name }], client)
			const [others] = await tx
				.select({ active: count() })
				.from(factors)
				.where(and(eq(factors.userId, caller.user.id), eq(factors.status, 'active'), sql`${factors.id} <> ${pending.id}`))
			const first = (others?.active ?? 0) === 0
			const method = pending.type === 'totp' ? 'otp' : 'hwk'
			await tx
				.update(sessions)
				.set({ aal: 'aal2', amr: sql`array(select distinct unnest(${sessions.amr} || ${sql.param([method, 'mfa'])}::text[]))`, enrollmentOnly: false })
				.where(eq(sessions.id, caller.sessionId))
			return { factor: activated, recoveryCodes: first ? await replaceRecoveryCodes(tx, caller.user.id) : undefined }
		}).catch((error: unknown) => {
			if (sqlState(error).constraint === 'factors_credential_id_key') throw new Conflict('conflict', 'This passkey is already registered')
			throw error
		})
		await this.deps.audit.record('factor.activated', client, {
			actorId: caller.user.id,
			subjectId: caller.user.id,
			details: { factorId, type: pending.type, recoveryCodesIssued: result.recoveryCodes !== undefined },
		})
		return result
	}

	private async provedTotp(factor: FactorRow, code: string | undefined) {
		if (code === undefined) throw invalidActivation('code')
		const secret = await this.openTotpSecret(factor).catch((error: unknown) => {
			if (!(error instanceof UnreadableSecret)) throw error
			throw new Conflict('conflict', 'This factor can no longer be read (the encryption key changed); remove it and enrol again')
		})
		const step = matchingStep(secret.plaintext, code)
		if (step === undefined) throw invalidActivation('code')
		return { totpLastStep: step, ...(secret.resealed ? { totpSecret: secret.resealed } : {}) }
	}

	private async provedWebauthn(factor: FactorRow, response: RegistrationResponseJSON | undefined) {
		if (response === undefined) throw invalidActivation('response')
		const { rpId, origins } = this.deps.settings
		// The challenge is spent by this one attempt, whatever its outcome.
		const [spent] = await this.deps.db
			.delete(webauthnChallenges)
			.where(and(eq(webauthnChallenges.factorId, factor.id), eq(webauthnChallenges.purpose, 'registration'), gt(webauthnChallenges.expiresAt, sql`now()`)))
			.returning({ challenge: webauthnChallenges.challenge })
		if (!spent) throw new AppError('invalid-code', 'The registration challenge expired or was used; enrol the passkey again')
		const verified = await verifyRegistrationResponse({
			response,
			expectedChallenge: spent.challenge,
			expectedOrigin: origins,
			expectedRPID: rpId,
			requireUserVerification: true,
		}).catch(() => undefined)
		if (!verified?.verified || !verified.registrationInfo) throw invalidActivation('passkey response')
		const { credential } = verified.registrationInfo
		return {
			credentialId: credential.id,
			publicKey: Buffer.from(credential.publicKey).toString('base64url'),
			signCount: credential.counter,
			transports: credential.transports ?? [],
		}
	}

	/** Removes a factor. The user's own removal of an active one needs aal2; an admin's (a lost device) does not. The last one takes the recovery codes with it. */
	async remove(caller: Caller, userId: string, factorId: string, client: ClientInfo): Promise<FactorRow> {
		const factor = await this.findOwnFactor(userId, factorId)
		if (caller.user.id === userId && factor.status === 'active') await this.requireStepUp(caller)
		await this.deps.db.transaction(async (tx) => {
			// Removed as it is now (it may have been activated meanwhile, or removed by a request at the same time).
			const [gone] = await tx.delete(factors).where(and(eq(factors.id, factor.id), eq(factors.status, factor.status))).returning()
			if (!gone) throw new Conflict('conflict', 'This factor changed meanwhile; read it again')
			// A pending factor never was a way in: only an active one's removal is news to receivers.
			if (gone.status === 'active') {
				await recordWebhookEvents(tx, [{ type: 'factor.removed', data: { userId, factor: toFactorResource(gone) } }])
				const [owner] = await tx.select().from(users).where(eq(users.id, userId))
				if (owner) await this.deps.notices.queue(tx, owner, [{ way: factorWay(gone.type), change: 'removed', label: gone.name }], client)
			}
			const [left] = await tx.select({ active: count() }).from(factors).where(and(eq(factors.userId, userId), eq(factors.status, 'active')))
			if ((left?.active ?? 0) === 0) await tx.delete(recoveryCodes).where(eq(recoveryCodes.userId, userId))
		})
		await this.deps.audit.record('factor.removed', client, { actorId: caller.user.id, subjectId: userId, details: { factorId, type: factor.type } })
		return factor
	}

	async regenerateRecoveryCodes(caller: Caller, client: ClientInfo): Promise<string[]> {
		if ((await secondFactorMethods(this.deps.db, caller.user.id)).length === 0)
			throw new Conflict('conflict', 'Recovery codes come with a second factor; activate one first')
		await this.requireStepUp(caller)
		const codes = await this.deps.db.transaction(async (tx) => {
			await this.deps.notices.queue(tx, caller.user, [{ way: 'recovery-codes', change: 'changed' }], client)
			return replaceRecoveryCodes(tx, caller.user.id)
		})
		await this.deps.audit.record('recovery-codes.generated', client, { actorId: caller.user.id, subjectId: caller.user.id })
		return codes
	}

	private async findOwnFactor(userId: string, factorId: string): Promise<FactorRow> {
		const [factor] = await this.deps.db
			.select()
			.from(factors)
			.where(and(eq(factors.id, factorId), eq(factors.userId, userId)))
		if (!factor) throw new NotFound('No such factor on this account')
		return factor
	}

	/** The TOTP secret in clear, and, when it was sealed under a retired key, the same secret sealed under the current one. */
	private async openTotpSecret(factor: FactorRow): Promise<{ plaintext: string; resealed?: string }> {
		if (!factor.totpSecret) throw new UnreadableSecret('a TOTP factor without a secret')
		const { plaintext, stale } = await this.deps.dataKeys.open(factor.totpSecret, factor.id)
		return { plaintext, resealed: stale ? await this.deps.dataKeys.seal(plaintext, factor.id) : undefined }
	}

	// ——— Sign-in ———

	/**
	 * Completes a login that owes a second factor. The token's try is reserved before the code is looked at
	 * (so parallel guesses cannot exceed MFA_TOKEN_TRIES), then the account's lockout; a right code spends the
	 * token, the code (TOTP step, recovery code, counter) and starts the session in one transaction (the browser's too, from the pages).
	 */
	async completeMfa(
		input: { mfaToken: string; method: MfaMethod; code?: string; response?: AuthenticationResponseJSON },
		client: ClientInfo,
		browser?: BrowserBinding,
	): Promise<IssuedSession> {
		const { db, lockout, audit } = this.deps
		const [token] = await db
			.update(mfaTokens)
			.set({ failures: sql`${mfaTokens.failures} + 1` })
			.where(
				and(
					eq(mfaTokens.tokenHash, hashMfaToken(input.mfaToken)),
					isNull(mfaTokens.usedAt),
					gt(mfaTokens.expiresAt, sql`now()`),
					lt(mfaTokens.failures, MFA_TOKEN_TRIES),
				),
			)
			.returning()
		if (!token) throw invalidMfaToken()
		let attempt: PasswordAttempt
		try {
			attempt = await lockout.reserve(token.userId)
		} catch (error) {
			await audit.record('mfa.failed', client, { subjectId: token.userId, details: { method: input.method, reason: 'locked' } })
			throw error
		}
		try {
			const proof = await this.checkSecondFactor(token.userId, input, () => this.spendMfaChallenge(token))
			const issued = proof
				? await this.deps.signIn.start(
						token.userId,
						token.credentialsVersion,
						{ amr: finishedAmr(token.amr, proof.method), aal: 'aal2', enrollmentOnly: false },
						client,
						async (tx) => (await proof.spend(tx)) && (await spendMfaToken(tx, token.id)),
						browser,
					)
				: undefined
			if (!issued) {
				await audit.record('mfa.failed', client, { subjectId: token.userId, details: { method: input.method, reason: proof ? 'spent-meanwhile' : 'wrong' } })
				await this.countFailure(attempt, token.userId, client)
				throw invalidSecondFactor()
			}
			await attempt.succeeded()
			await this.deps.signIn.succeeded(issued, client, { method: input.method })
			return issued
		} finally {
			await attempt.release()
		}
	}

	/** A wrong second factor counted toward the account's lockout, and the lock it starts. */
	private async countFailure(attempt: PasswordAttempt, userId: string, client: ClientInfo) {
		if (!(await attempt.failed())) return
		await this.deps.audit.record('mfa.locked', client, { subjectId: userId })
		// The same news as a password lockout for receivers: this account's sign-ins are refused for a while.
		await recordLoginLocked(this.deps.db, userId, 'second-factor')
	}

	/**
	 * POST /auth/reauthentication with a TOTP code, a recovery code or a passkey: the session's owner proved
	 * again, with a second factor (the session becomes aal2). Wrong answers count toward the same lockout as
	 * /auth/mfa; the code, counter or challenge is spent in the renewal's transaction.
	 */
	async reauthenticate(caller: Caller, input: { method: MfaMethod; code?: string; response?: AuthenticationResponseJSON }, client: ClientInfo): Promise<IssuedSession> {
		const { lockout, audit } = this.deps
		const who = { actorId: caller.user.id, subjectId: caller.user.id }
		let attempt: PasswordAttempt
		try {
			attempt = await lockout.reserve(caller.user.id)
		} catch (error) {
			await audit.record('reauthentication.failed', client, { ...who, details: { method: input.method, reason: 'locked' } })
			throw error
		}
		try {
			const proof = await this.checkSecondFactor(caller.user.id, input, () => this.spendReauthenticationChallenge(caller.sessionId, input.response))
			const renewed = proof ? await this.deps.signIn.renew(caller, { amr: [proof.method], secondFactor: true, spend: proof.spend }) : undefined
			if (!renewed) {
				await audit.record('reauthentication.failed', client, { ...who, details: { method: input.method, reason: proof ? 'spent-meanwhile' : 'wrong' } })
				await this.countFailure(attempt, caller.user.id, client)
				throw invalidSecondFactor()
			}
			await attempt.succeeded()
			await audit.record('reauthentication.succeeded', client, { ...who, details: { sessionId: caller.sessionId, method: input.method } })
			return renewed
		} finally {
			await attempt.release()
		}
	}

	/** WebAuthn options to prove the session's owner again with one of the account's passkeys; the challenge answers for this session only. */
	async reauthenticationChallenge(caller: Caller) {
		const options = await this.passkeyOptions(caller.user.id)
		await this.deps.db
			.insert(webauthnChallenges)
			.values({ challenge: options.challenge, purpose: 'reauthentication', sessionId: caller.sessionId, expiresAt: challengeExpiry() })
		return options
	}

	private async spendReauthenticationChallenge(sessionId: string, response: AuthenticationResponseJSON | undefined): Promise<string | undefined> {
		const challenge = response && challengeOf(response)
		if (!challenge) return undefined
		const [spent] = await this.deps.db
			.delete(webauthnChallenges)
			.where(
				and(
					eq(webauthnChallenges.challenge, challenge),
					eq(webauthnChallenges.purpose, 'reauthentication'),
					eq(webauthnChallenges.sessionId, sessionId),
					gt(webauthnChallenges.expiresAt, sql`now()`),
				),
			)
			.returning({ challenge: webauthnChallenges.challenge })
		return spent?.challenge
	}

	/** The challenge issued for an `mfaToken`, spent by this attempt whatever its outcome. */
	private async spendMfaChallenge(token: typeof mfaTokens.$inferSelect): Promise<string | undefined> {
		const { challenge } = token
		if (!challenge) return undefined
		const [spent] = await this.deps.db
			.update(mfaTokens)
			.set({ challenge: null })
			.where(and(eq(mfaTokens.id, token.id), eq(mfaTokens.challenge, challenge)))
			.returning({ id: mfaTokens.id })
		return spent ? challenge : undefined
	}

	/** Authentication options listing the account's passkeys; 409 when it has none. */
	private async passkeyOptions(userId: string) {
		const credentials = await this.deps.db
			.select({ credentialId: factors.credentialId, transports: factors.transports })
			.from(factors)
			.where(and(eq(factors.userId, userId), eq(factors.type, 'webauthn'), eq(factors.status, 'active')))
		if (credentials.length === 0) throw new Conflict('conflict', 'This account has no passkey; use another method')
		return generateAuthenticationOptions({
			rpID: this.deps.settings.rpId,
			userVerification: 'required',
			timeout: CHALLENGE_SECONDS * 1000,
			allowCredentials: credentials.flatMap(({ credentialId, transports }) =>
				credentialId ? [{ id: credentialId, transports: (transports ?? []) as AuthenticatorTransport[] }] : [],
			),
		})
	}

	/** WebAuthn options for a login owing a second factor; the challenge is kept with its `mfaToken` (one at a time). */
	async mfaChallenge(mfaToken: string) {
		const { db } = this.deps
		const [token] = await db
			.select()
			.from(mfaTokens)
			.where(and(eq(mfaTokens.tokenHash, hashMfaToken(mfaToken)), isNull(mfaTokens.usedAt), gt(mfaTokens.expiresAt, sql`now()`), lt(mfaTokens.failures, MFA_TOKEN_TRIES)))
		if (!token) throw invalidMfaToken()
		const options = await this.passkeyOptions(token.userId)
		await db.update(mfaTokens).set({ challenge: options.challenge }).where(eq(mfaTokens.id, token.id))
		return options
	}

	/**
	 * Whether the code or assertion is right; if so, what spends it. Spending happens in the session's
	 * transaction, and reports false when a concurrent request spent it first.
	 */
	private async checkSecondFactor(
		userId: string,
		input: { method: MfaMethod; code?: string; response?: AuthenticationResponseJSON },
		spendChallenge: () => Promise<string | undefined>,
	): Promise<{ method: string; spend: (tx: Queryable) => Promise<boolean> } | undefined> {
		const { db } = this.deps
		if (input.method === 'recovery-code') {
			if (!input.code) return undefined
			const codeHash = hashRecoveryCode(userId, input.code)
			const [unused] = await db
				.select({ id: recoveryCodes.id })
				.from(recoveryCodes)
				.where(and(eq(recoveryCodes.userId, userId), eq(recoveryCodes.codeHash, codeHash), isNull(recoveryCodes.usedAt)))
			if (!unused) return undefined
			return {
				method: 'otp',
				spend: async (tx) =>
					(await tx.update(recoveryCodes).set({ usedAt: sql`now()` }).where(and(eq(recoveryCodes.id, unused.id), isNull(recoveryCodes.usedAt))).returning({ id: recoveryCodes.id })).length === 1,
			}
		}
		if (input.method === 'totp') {
			if (!input.code) return undefined
			const candidates = await db
				.select()
				.from(factors)
				.where(and(eq(factors.userId, userId), eq(factors.type, 'totp'), eq(factors.status, 'active')))
			for (const factor of candidates) {
				const secret = await this.openTotpSecret(factor).catch((error: unknown) => {
					if (!(error instanceof UnreadableSecret)) throw error
					// The operator changed DATA_ENCRYPTION_KEY without keeping the old one: say so, never the secret.
					this.deps.log.error({ factorId: factor.id }, 'a TOTP secret does not open under DATA_ENCRYPTION_KEY or DATA_ENCRYPTION_PREVIOUS_KEYS')
					return undefined
				})
				const step = secret && matchingStep(secret.plaintext, input.code)
				if (step === undefined || !secret) continue
				// A code of a step already used (this one or a later one) is a replay, on any instance.
				if (factor.totpLastStep !== null && step <= factor.totpLastStep) return undefined
				return {
					method: 'otp',
					spend: async (tx) =>
						(
							await tx
								.update(factors)
								.set({ totpLastStep: step, lastUsedAt: sql`now()`, ...(secret.resealed ? { totpSecret: secret.resealed } : {}) })
								.where(and(eq(factors.id, factor.id), or(isNull(factors.totpLastStep), lt(factors.totpLastStep, step))))
								.returning({ id: factors.id })
						).length === 1,
				}
			}
			return undefined
		}
		if (!input.response) return undefined
		// The challenge issued for this sign-in or check, spent by this attempt whatever its outcome.
		const challenge = await spendChallenge()
		if (!challenge) return undefined
		return this.checkAssertion(input.response, challenge, userId)
	}

	/** A passkey assertion for `challenge`, by a credential of `userId` (any user's, for passwordless sign-in). */
	private async checkAssertion(
		response: AuthenticationResponseJSON,
		challenge: string,
		userId: string | undefined,
	): Promise<{ method: string; userId: string; spend: (tx: Queryable) => Promise<boolean> } | undefined> {
		const { db, settings } = this.deps
		const [factor] = await db
			.select()
			.from(factors)
			.where(and(eq(factors.credentialId, response.id), eq(factors.type, 'webauthn'), eq(factors.status, 'active')))
		if (!factor || !factor.publicKey || (userId !== undefined && factor.userId !== userId)) return undefined
		const signCount = factor.signCount ?? 0
		const verified = await verifyAuthenticationResponse({
			response,
			expectedChallenge: challenge,
			expectedOrigin: settings.origins,
			expectedRPID: settings.rpId,
			requireUserVerification: true,
			credential: {
				id: factor.credentialId ?? '',
				publicKey: Buffer.from(factor.publicKey, 'base64url'),
				counter: signCount,
				transports: (factor.transports ?? []) as AuthenticatorTransport[],
			},
		}).catch(() => undefined)
		if (!verified?.verified) return undefined
		// The authenticator's own user handle, when it sends one, must name the credential's owner.
		const handleOwner = userIdFromHandle(response.response.userHandle)
		if (response.response.userHandle && handleOwner !== factor.userId) return undefined
		const { newCounter } = verified.authenticationInfo
		return {
			method: 'hwk',
			userId: factor.userId,
			// Compare-and-set on the counter: of two assertions racing with one counter value, one wins.
			spend: async (tx) =>
				(
					await tx
						.update(factors)
						.set({ signCount: newCounter, lastUsedAt: sql`now()` })
						.where(and(eq(factors.id, factor.id), eq(factors.signCount, signCount)))
						.returning({ id: factors.id })
				).length === 1,
		}
	}

	/** Options for a discoverable passkey: no account named, any of this RP's passkeys may answer. */
	async passkeyChallenge() {
		const options = await generateAuthenticationOptions({ rpID: this.deps.settings.rpId, userVerification: 'required', timeout: CHALLENGE_SECONDS * 1000 })
		await this.deps.db.insert(webauthnChallenges).values({ challenge: options.challenge, purpose: 'passkey', expiresAt: challengeExpiry() })
		return options
	}

	/** Passwordless sign-in: a passkey with user verification is two factors in one (aal2). With `browser`, the pages' session too. */
	async signInWithPasskey(response: AuthenticationResponseJSON, client: ClientInfo, browser?: BrowserBinding): Promise<IssuedSession> {
		const { db, audit } = this.deps
		const challenge = challengeOf(response)
		const [spent] = challenge
			? await db
					.delete(webauthnChallenges)
					.where(and(eq(webauthnChallenges.challenge, challenge), eq(webauthnChallenges.purpose, 'passkey'), gt(webauthnChallenges.expiresAt, sql`now()`)))
					.returning({ challenge: webauthnChallenges.challenge })
			: []
		const proof = spent ? await this.checkAssertion(response, spent.challenge, undefined) : undefined
		const [user] = proof ? await db.select().from(users).where(eq(users.id, proof.userId)) : []
		const issued =
			proof && user && user.status === 'active'
				? await this.deps.signIn.start(user.id, user.credentialsVersion, { amr: ['hwk', 'mfa'], aal: 'aal2', enrollmentOnly: false }, client, proof.spend, browser)
				: undefined
		if (!issued) {
			await audit.record('login.failed', client, { subjectId: user?.id, details: { reason: spent ? 'passkey-refused' : 'challenge-unknown', method: 'passkey' } })
			throw passkeyRefused()
		}
		await this.deps.signIn.succeeded(issued, client, { method: 'passkey' })
		return issued
	}

	/** Deletes expired MFA tokens and challenges: they serve no one once expired. Returns how many went. */
	async purgeExpired(): Promise<number> {
		const tokens = await this.deps.db.delete(mfaTokens).where(lt(mfaTokens.expiresAt, sql`now()`)).returning({ id: mfaTokens.id })
		const challenges = await this.deps.db
			.delete(webauthnChallenges)
			.where(lt(webauthnChallenges.expiresAt, sql`now()`))
			.returning({ challenge: webauthnChallenges.challenge })
		return tokens.length + challenges.length
	}
}

const factorWay = (type: FactorType) => (type === 'totp' ? ('totp' as const) : ('passkey' as const))

const challengeExpiry = () => new Date(Date.now() + CHALLENGE_SECONDS * 1000)

/** The challenge an assertion answers, read from its client data (the library checks it again against ours). */
function challengeOf(response: AuthenticationResponseJSON): string | undefined {
	try {
		const clientData = JSON.parse(Buffer.from(response.response.clientDataJSON, 'base64url').toString('utf8')) as { challenge?: unknown }
		return typeof clientData.challenge === 'string' ? clientData.challenge : undefined
	} catch {
		return undefined
	}
}

/** Spends an MFA token inside the session's transaction; false when another request spent it first. */
async function spendMfaToken(tx: Queryable, id: string): Promise<boolean> {
	const spent = await tx.update(mfaTokens).set({ usedAt: sql`now()` }).where(and(eq(mfaTokens.id, id), isNull(mfaTokens.usedAt))).returning({ id: mfaTokens.id })
	return spent.length === 1
}

/** A new set of recovery codes in clear (shown once); the old set is void. */
async function replaceRecoveryCodes(tx: Queryable, userId: string): Promise<string[]> {
	await tx.delete(recoveryCodes).where(eq(recoveryCodes.userId, userId))
	const codes = Array.from({ length: RECOVERY_CODE_COUNT }, newRecoveryCode)
	await tx.insert(recoveryCodes).values(codes.map((code) => ({ id: Bun.randomUUIDv7(), userId, codeHash: hashRecoveryCode(userId, code) })))
	return codes
}

export type { SessionAssurance }
