import { expect } from 'bun:test'
import { and, asc, eq, sql } from 'drizzle-orm'
import { webhookEvents } from '../../src/db/schema'
import type { TestApp } from './app'
import { jwtPayload, type Account } from './fixtures'
import { loggedMail, proofOf } from './mail'
import { FlowBrowser, pkcePair, type TestIdentity, type TestOpenIdProvider } from './oidc-provider'
import type { SoftAuthenticator } from './soft-authenticator'

/** The owner's password after a recovery. */
export const OWNER_PASSWORD = 'the real owner’s new passphrase'

/** Every mail the app wrote to its log to `to`, of one kind if given, oldest first. */
export function mailsTo(t: TestApp, to: string, kind?: string): Array<{ kind: string; to: string; subject: string; text: string }> {
	const mails = []
	for (const line of t.logs) {
		const { mail } = JSON.parse(line) as { mail?: { kind: string; to: string; subject: string; text: string } }
		if (mail?.to === to && (kind === undefined || mail.kind === kind)) mails.push(mail)
	}
	return mails
}

/** Waits until `count` mails of a kind have gone to `to`; returns them all. */
export async function waitForMails(t: TestApp, to: string, kind: string, count: number, timeoutMs = 10_000) {
	const deadline = Date.now() + timeoutMs
	while (mailsTo(t, to, kind).length < count) {
		if (Date.now() > deadline) throw new Error(`${mailsTo(t, to, kind).length} of ${count} ${kind} mails to ${to} within ${timeoutMs} ms`)
		await Bun.sleep(20)
	}
	return mailsTo(t, to, kind)
}

/**
 * The owner's recovery by mail: asks for the mail, reads it from the log, and sets `password` with the link's
 * token or with the code. Answers the password reset's response.
 */
export async function recoverByMail(t: TestApp, email: string, { by = 'token', password = OWNER_PASSWORD }: { by?: 'token' | 'code'; password?: string } = {}) {
	const before = mailsTo(t, email, 'recovery').length
	expect((await t.call('POST', '/api/auth/recovery-requests', { json: { email } })).status).toBe(202)
	const [mail] = (await waitForMails(t, email, 'recovery', before + 1)).slice(before)
	const { token, code } = proofOf(mail as { text: string })
	const proof = by === 'token' ? { token } : { email, code }
	return t.call('POST', '/api/auth/password-resets', { json: { ...proof, password } })
}

/** The webhook events of a type about a user, as stored in the outbox (an endpoint subscribed to `*` must exist). */
export async function eventsOf(t: TestApp, type: string, userId: string) {
	const rows = await t.database.handle.db
		.select()
		.from(webhookEvents)
		.where(and(eq(webhookEvents.type, type), sql`${webhookEvents.body}::jsonb->'data'->>'userId' = ${userId}`))
		.orderBy(asc(webhookEvents.createdAt))
	return rows.map((row) => JSON.parse(row.body) as { type: string; data: Record<string, any> })
}

/** Registers and activates a passkey on `authenticator` for the account's session; the activation's response. */
export async function addPasskey(t: TestApp, account: Pick<Account, 'accessToken'>, authenticator: SoftAuthenticator, name = 'Passkey') {
	const created = await t.call('POST', '/api/users/me/factors', { json: { type: 'webauthn', name }, token: account.accessToken })
	expect(created.status).toBe(201)
	const { factor, options } = created.body.data
	const activated = await t.call('POST', `/api/users/me/factors/${factor.id}/activation`, { json: { response: authenticator.register(options) }, token: account.accessToken })
	expect(activated.status).toBe(200)
	return { factorId: factor.id as string, recoveryCodes: (activated.body.data.recoveryCodes ?? []) as string[] }
}

/** A tokens body as an Account. */
export const accountOf = (data: { accessToken: string; refreshToken: string; user: { id: string; email: string } }, password = ''): Account => ({
	id: data.user.id,
	email: data.user.email,
	password,
	accessToken: data.accessToken,
	refreshToken: data.refreshToken,
	sessionId: String(jwtPayload(data.accessToken).sid),
})

export const CALLBACK_PAGE = 'http://frontend.test/auth/callback'

/** A provider sign-in as `identity`, through to the frontend's callback page; `exchange` trades its code. */
export async function providerSignIn(t: TestApp, provider: TestOpenIdProvider, name: string, identity: TestIdentity) {
	provider.signInAs = identity
	const { verifier, challenge } = pkcePair()
	const landed = await new FlowBrowser(t.app).follow(
		`/api/auth/providers/${name}/authorization?${new URLSearchParams({ redirectTo: CALLBACK_PAGE, codeChallenge: challenge, codeChallengeMethod: 'S256' })}`,
		provider.issuer,
	)
	const code = landed.searchParams.get('code')
	return { landed, code, exchange: () => t.call('POST', '/api/auth/sessions', { json: { code: code ?? '', codeVerifier: verifier } }) }
}

/**
 * A signed-in user's link of `identity`: the API's authorization URL, then (unless `stopAtProvider`) the
 * provider and the exchange. `finish` completes a link left at the provider.
 */
export async function linkIdentity(t: TestApp, account: Pick<Account, 'accessToken'>, provider: TestOpenIdProvider, name: string, identity: TestIdentity) {
	const { verifier, challenge } = pkcePair()
	const started = await t.call('POST', '/api/users/me/identities', { json: { provider: name, redirectTo: CALLBACK_PAGE, codeChallenge: challenge }, token: account.accessToken })
	const finish = async () => {
		provider.signInAs = identity
		const landed = await new FlowBrowser(t.app).follow(started.body.data.authorizationUrl, provider.issuer)
		const code = landed.searchParams.get('code')
		const exchanged = code ? await t.call('POST', '/api/auth/sessions', { json: { code, codeVerifier: verifier } }) : undefined
		return { landed, exchanged }
	}
	return { started, finish }
}
