import { Value } from '@sinclair/typebox/value'
import { Elysia } from 'elysia'
import { AppError } from '../http/problem'
import { chargeAuthBudget } from '../http/rate-limit'
import { requestContext, type ClientInfo } from '../http/request-context'
import type { Caller } from '../modules/auth/sessions'
import type { AuthService } from '../modules/auth/service'
import type { EmailService } from '../modules/email/service'
import { FactorModel } from '../modules/factors/model'
import type { FactorsService } from '../modules/factors/service'
import type { OAuthConsents } from '../modules/oauth/consents'
import type { ProviderSignIn } from '../modules/oidc/service'
import { isEmailAddress, normalizeEmail } from '../modules/users/model'
import type { UsersService } from '../modules/users/service'
import type { BrowserSession } from './browser-sessions'
import { formOf, redirect, type Form, type PageKit } from './kit'
import type { PageView } from './render'
import { newProviderFlow, SIGN_IN_PATHS } from './sign-in'

/*
 * /account: what the API lets users do to their own account, as pages. Every action calls the service its API
 * route calls (PUT /users/me, /users/me/factors…, /users/me/identities, /users/me/sessions, /users/me/consents),
 * so the rules are the API's. Where the service asks for a recent check of the session (403
 * reauthentication-required) or a second factor (mfa-required), the page asks "confirm it's you" with the
 * same checks as POST /auth/reauthentication, then performs the action it was asked for.
 */

export const ACCOUNT_PATHS = {
	page: '/account',
	profile: '/account/profile',
	email: '/account/email',
	password: '/account/password',
	security: '/account/security',
	totp: '/account/security/totp',
	totpActivation: '/account/security/totp/activation',
	passkey: '/account/security/passkey',
	passkeyActivation: '/account/security/passkey/activation',
	factorRemoval: '/account/security/factor-removal',
	recoveryCodes: '/account/security/recovery-codes',
	identities: '/account/identities',
	identityLink: '/account/identities/link',
	identityUnlink: '/account/identities/unlink',
	sessions: '/account/sessions',
	sessionEnd: '/account/sessions/end',
	applications: '/account/applications',
	consentWithdrawal: '/account/applications/withdrawal',
	deactivation: '/account/deactivation',
} as const

/** What an enrolment-only session (MFA_REQUIRED, no factor yet) may post: enrolling a factor, as POST /users/me/factors and its activation. */
const ENROLMENT_PATHS: ReadonlySet<string> = new Set([ACCOUNT_PATHS.totp, ACCOUNT_PATHS.totpActivation, ACCOUNT_PATHS.passkey, ACCOUNT_PATHS.passkeyActivation])

type Section = 'profile' | 'security' | 'identities' | 'sessions' | 'applications'
const SECTIONS: Record<Section, string> = {
	profile: ACCOUNT_PATHS.page,
	security: ACCOUNT_PATHS.security,
	identities: ACCOUNT_PATHS.identities,
	sessions: ACCOUNT_PATHS.sessions,
	applications: ACCOUNT_PATHS.applications,
}

export interface AccountDeps {
	/** PUT and DELETE /users/me, GET and DELETE /users/me/sessions; the password policy. */
	users: Pick<UsersService, 'replace' | 'passwordProblem' | 'sessions' | 'revokeSession' | 'deactivate'>
	/** POST /auth/logout (scope `others`) and POST /auth/reauthentication with a password or a mailed code. */
	auth: Pick<AuthService, 'logout' | 'reauthenticateWithPassword' | 'reauthenticateWithMailedCode'>
	/** /users/me/factors, /users/me/recovery-codes, and POST /auth/reauthentication with a second factor. */
	factors: Pick<FactorsService, 'list' | 'hasSecondFactor' | 'enrollTotp' | 'enrollWebauthn' | 'activate' | 'remove' | 'regenerateRecoveryCodes' | 'reauthenticate' | 'reauthenticationChallenge'>
	/** /users/me/identities: the providers, the linked identities, linking (through the sign-in's return) and unlinking. */
	identities: Pick<ProviderSignIn, 'list' | 'identitiesOf' | 'startLink' | 'unlink' | 'pagesReturnUrl'>
	/** GET and DELETE /users/me/consents. */
	consents: Pick<OAuthConsents, 'list' | 'revoke'>
	/** POST /auth/reauthentication/challenges `email` and its code: for accounts with neither password nor factor. */
	email: Pick<EmailService, 'sendReauthenticationCode' | 'checkReauthenticationCode' | 'verification'>
	passwordMinLength: number
}

/** The browser's session as the services' caller, as the bearer guard makes one from a token. */
const callerOf = (session: BrowserSession): Caller => ({
	user: session.user,
	sessionId: session.sessionId,
	assurance: { amr: session.amr, aal: session.aal, enrollmentOnly: session.enrollmentOnly },
	authenticatedAt: session.authenticatedAt,
})

/** Where a signed-out browser goes: sign-in, then back to `path`. */
const signInFirst = (path: string) => redirect(`${SIGN_IN_PATHS.form}?${new URLSearchParams({ return_to: path })}`)

/** A time as the pages show it: UTC, to the minute (the element's `datetime` keeps it exact). */
const when = (value: string | Date) => {
	const iso = typeof value === 'string' ? value : value.toISOString()
	return { iso, text: `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC` }
}

/** A 6-digit TOTP code, or else a recovery code, from what was typed. */
function codeProof(typed: string | undefined): { method: 'totp' | 'recovery-code'; code: string } | undefined {
	const code = (typed ?? '').trim()
	if (!code) return undefined
	const digits = code.replace(/\s/g, '')
	return /^\d{6}$/.test(digits) ? { method: 'totp', code: digits } : { method: 'recovery-code', code: code.slice(0, 64) }
}

/** A passkey's registration as the page's script posts it (RegistrationResponseJSON), or undefined. */
function registrationOf(raw: string | undefined) {
	try {
		const parsed: unknown = JSON.parse(raw ?? '')
		return Value.Check(FactorModel.registrationResponse, parsed) ? parsed : undefined
	} catch {
		return undefined
	}
}

/** A passkey's signature as the page's script posts it (AuthenticationResponseJSON), or undefined. */
function assertionOf(raw: string | undefined) {
	try {
		const parsed: unknown = JSON.parse(raw ?? '')
		return Value.Check(FactorModel.authenticationResponse, parsed) ? parsed : undefined
	} catch {
		return undefined
	}
}

/** Form fields a confirmation carries back to the action (never the form token nor the confirmation's own). */
const CONFIRM_FIELDS = new Set(['csrf', 'confirm', 'confirmPassword', 'confirmCode', 'reason', 'confirmResponse'])

interface SectionState {
	error?: string
	status?: number
	/** Fields to mark invalid (`name`, `email`, `password`, `currentPassword`, `code`…). */
	invalid?: string[]
	/** What was typed, to show again (never a password). */
	values?: Record<string, string>
}

/** /account and its sections: profile, sign-in and security, linked identities, sessions, applications. */
export function accountPages(deps: AccountDeps, kit: PageKit) {
	const { users, auth, factors, identities, consents, email: mail, passwordMinLength } = deps
	const { renderer, browserSessions, problemText, formPage, shown, refusal, crossSitePage } = kit
	const text = (request: Request, key: string, view?: Record<string, unknown>) => renderer.text(renderer.languageOf(request), key, view)

	const nav = (request: Request, section: Section) =>
		(Object.keys(SECTIONS) as Section[]).map((name) => ({ href: SECTIONS[name], label: text(request, `account.nav.${name}`), current: name === section }))

	/** The sentence of a `?done=` after an action (a key of `account.done`), if it names one. */
	const doneText = (request: Request) => {
		const done = new URL(request.url).searchParams.get('done') ?? ''
		if (!/^[a-z-]{1,40}$/.test(done)) return undefined
		const key = `account.done.${done}`
		const said = text(request, key)
		return said === key ? undefined : said
	}
	const done = (section: Section, key: string) => redirect(`${SECTIONS[section]}?done=${key}`)

	/** What every section's page has: its heading, the sections' nav, a problem or a result. */
	const sectionView = (request: Request, section: Section, state: SectionState): PageView => {
		const invalid = Object.fromEntries((state.invalid ?? []).map((field) => [field, true]))
		return { wide: true, nav: nav(request, section), error: state.error, done: state.error ? undefined : doneText(request), invalid, values: state.values ?? {} }
	}

	const profilePage = async (request: Request, session: BrowserSession, state: SectionState = {}) => {
		const { user } = session
		const view: PageView = {
			...sectionView(request, 'profile', state),
			signedInAs: text(request, 'account.signedInAs', { email: user.email }),
			pendingEmail: user.pendingEmail ? text(request, 'account.profile.pendingEmail', { email: user.pendingEmail }) : undefined,
			name: state.values?.name ?? user.name,
			hasPassword: user.passwordHash !== null,
			// EMAIL_VERIFICATION=off applies a new address at once: no mail to wait for.
			emailHint: mail.verification === 'off' ? undefined : text(request, 'account.profile.emailHint'),
			passwordHint: text(request, 'signUp.passwordHint', { min: passwordMinLength }),
		}
		return formPage(request, 'account', view, { title: 'account.title', status: state.status })
	}

	const securityPage = async (request: Request, session: BrowserSession, state: SectionState = {}) => {
		const active = (await factors.list(session.user.id)).filter((factor) => factor.status === 'active')
		const shownFactor = (factor: (typeof active)[number]) => ({
			id: factor.id,
			name: factor.name,
			added: when(factor.activatedAt ?? factor.createdAt),
			remove: text(request, 'account.security.remove', { name: factor.name }),
		})
		const view: PageView = {
			...sectionView(request, 'security', state),
			totps: active.filter((factor) => factor.type === 'totp').map(shownFactor),
			passkeys: active.filter((factor) => factor.type === 'webauthn').map(shownFactor),
			hasFactor: active.length > 0,
		}
		return formPage(request, 'account-security', view, { title: 'account.security.title', status: state.status })
	}

	const identitiesPage = async (request: Request, session: BrowserSession, state: SectionState = {}) => {
		const providers = identities.list()
		const labelOf = (id: string) => providers.find((provider) => provider.id === id)?.label ?? id
		const linked = await identities.identitiesOf(session.user.id)
		const view: PageView = {
			...sectionView(request, 'identities', state),
			linked: linked.map((identity) => ({
				id: identity.id,
				label: labelOf(identity.provider),
				email: identity.email,
				added: when(identity.createdAt),
				unlink: text(request, 'account.identities.unlink', { provider: labelOf(identity.provider) }),
			})),
			providers: providers.map(({ id, label }) => ({ id, label: text(request, 'account.identities.link', { provider: label }) })),
		}
		return formPage(request, 'account-identities', view, { title: 'account.identities.title', status: state.status })
	}

	const sessionsPage = async (request: Request, session: BrowserSession, state: SectionState = {}) => {
		const list = await users.sessions(session.user.id, session.sessionId)
		const view: PageView = {
			...sectionView(request, 'sessions', state),
			sessions: list.map((item, index) => ({
				id: item.id,
				current: item.current,
				label: item.current ? text(request, 'account.sessions.thisBrowser') : text(request, 'account.sessions.other', { number: index + 1 }),
				device: (item.userAgent ?? text(request, 'account.sessions.unknownDevice')).slice(0, 160),
				ip: item.ip,
				created: when(item.createdAt),
				lastUsed: when(item.lastUsedAt),
				end: text(request, 'account.sessions.endOne', { device: (item.userAgent ?? '').slice(0, 60) || text(request, 'account.sessions.unknownDevice') }),
			})),
			others: list.some((item) => !item.current),
		}
		return formPage(request, 'account-sessions', view, { title: 'account.sessions.title', status: state.status })
	}

	const applicationsPage = async (request: Request, session: BrowserSession, state: SectionState = {}) => {
		const list = await consents.list(session.user.id)
		const scopeText = (scope: string) => {
			const organization = /^organization:(.+)$/.exec(scope)?.[1]
			if (organization) return text(request, 'consent.scope.organization', { organization })
			const key = `consent.scope.${scope}`
			const said = text(request, key)
			return said === key ? text(request, 'consent.scope.other', { scope }) : said
		}
		const view: PageView = {
			...sectionView(request, 'applications', state),
			consents: list.map((consent) => ({
				clientId: consent.clientId,
				name: consent.clientName,
				scopes: consent.scopes.map(scopeText),
				granted: when(consent.grantedAt),
				withdraw: text(request, 'account.applications.withdraw', { client: consent.clientName }),
			})),
		}
		return formPage(request, 'account-applications', view, { title: 'account.applications.title', status: state.status })
	}

	const PAGES: Record<Section, (request: Request, session: BrowserSession, state?: SectionState) => Promise<Response>> = {
		profile: profilePage,
		security: securityPage,
		identities: identitiesPage,
		sessions: sessionsPage,
		applications: applicationsPage,
	}

	/**
	 * "Confirm it's you": the action's fields carried in hidden inputs, and the ways this account can prove it
	 * (the password, a code from the app or a recovery code, or a code by mail for accounts with neither).
	 * `reason`: mfa-required asks for a second factor, as the API does.
	 */
	const confirmPage = async (
		request: Request,
		session: BrowserSession,
		form: Form,
		reason: 'reauthentication-required' | 'mfa-required',
		{ error, status = 403, emailSent = false }: { error?: string; status?: number; emailSent?: boolean } = {},
	) => {
		const hasFactor = await factors.hasSecondFactor(session.user.id)
		const active = hasFactor ? (await factors.list(session.user.id)).filter((factor) => factor.status === 'active') : []
		const hasPasskey = active.some((factor) => factor.type === 'webauthn')
		// A passkey answers a challenge for this session only (POST /auth/reauthentication/challenges), signed by /pages/passkeys.js.
		const passkeyOptions = hasPasskey ? JSON.stringify(await factors.reauthenticationChallenge(callerOf(session))) : undefined
		// With a factor, a session that has not used one is asked for it (the service's step-up would ask next anyway).
		const secondFactorOwed = reason === 'mfa-required' || (hasFactor && session.aal !== 'aal2')
		const password = !secondFactorOwed && session.user.passwordHash !== null
		const emailCode = !hasFactor && session.user.passwordHash === null
		const view: PageView = {
			action: new URL(request.url).pathname,
			reason,
			carried: Object.entries(form)
				.filter(([name, value]) => !CONFIRM_FIELDS.has(name) && typeof value === 'string')
				.map(([name, value]) => ({ name, value })),
			intro: text(request, secondFactorOwed ? 'account.confirm.introSecondFactor' : 'account.confirm.intro'),
			password,
			code: hasFactor,
			codeLabel: text(request, active.some((factor) => factor.type === 'totp') ? 'account.confirm.code' : 'account.confirm.recoveryCode'),
			passkeyOptions,
			emailCode,
			emailSent: emailSent ? text(request, 'account.confirm.emailSent', { email: session.user.email }) : undefined,
			error,
			focusPassword: password && !error,
			focusCode: !password && (hasFactor || emailSent) && !error,
		}
		return formPage(request, 'account-confirm', view, { title: 'account.confirm.title', status })
	}

	/**
	 * The check a confirmation posts, by the services of POST /auth/reauthentication (and its /challenges for a
	 * mailed code): the browser's session renewed as proved now, or the confirmation again with its problem.
	 */
	const confirm = async (request: Request, session: BrowserSession, form: Form, client: ClientInfo): Promise<BrowserSession | Response> => {
		const caller = callerOf(session)
		const reason = form.reason === 'mfa-required' ? 'mfa-required' : 'reauthentication-required'
		try {
			if (form.confirm === 'password') {
				const password = (form.confirmPassword ?? '').slice(0, 1024)
				if (!password) return confirmPage(request, session, form, reason, { error: problemText(request, 'missing-password'), status: 422 })
				await auth.reauthenticateWithPassword(caller, password, client)
			} else if (form.confirm === 'email-send') {
				await mail.sendReauthenticationCode(session.user, await factors.hasSecondFactor(session.user.id), client)
				return confirmPage(request, session, form, reason, { emailSent: true, status: 200 })
			} else if (form.confirm === 'email') {
				const code = (form.confirmCode ?? '').replace(/\s/g, '')
				if (!/^\d{6}$/.test(code)) return confirmPage(request, session, form, reason, { error: problemText(request, 'missing-email-code'), status: 422, emailSent: true })
				const spend = await mail.checkReauthenticationCode(session.user, code, client)
				await auth.reauthenticateWithMailedCode(caller, spend, client)
			} else if (form.confirm === 'passkey') {
				const response = assertionOf(form.confirmResponse)
				if (!response) return confirmPage(request, session, form, reason, { error: problemText(request, 'passkey-not-used'), status: 422 })
				await factors.reauthenticate(caller, { method: 'webauthn', response }, client)
			} else {
				const proof = codeProof(form.confirmCode)
				if (!proof) return confirmPage(request, session, form, reason, { error: problemText(request, 'missing-code'), status: 422 })
				await factors.reauthenticate(caller, proof, client)
			}
		} catch (error) {
			if (!(error instanceof AppError)) throw error
			const { status, text: said, retryAfter } = shown(request, error, client.requestId)
			const sentence =
				error.kind === 'invalid-credentials' ? problemText(request, 'wrong-password') : form.confirm === 'passkey' && error.kind === 'invalid-second-factor' ? problemText(request, 'passkey-not-used') : said
			const page = await confirmPage(request, session, form, reason, { error: sentence, status, emailSent: form.confirm === 'email' })
			if (retryAfter) page.headers.set('retry-after', retryAfter)
			return page
		}
		return (await browserSessions.current(request)) ?? signInFirst(SECTIONS.profile)
	}

	/** What an action's problem says, where the catalogue has a sentence for that action's kind of problem. */
	type Problems = Partial<Record<string, string>>

	/**
	 * One POST of an account page: signed in (else sign-in and back), from this site with the form's token, the
	 * confirmation checked when it carries one; then the action, and a refusal of the service shown on the
	 * section's page (or the confirmation, when the service asks for one).
	 */
	const act = async (
		request: Request,
		body: unknown,
		client: ClientInfo,
		section: Section,
		run: (caller: Caller, form: Form, session: BrowserSession) => Promise<Response>,
		problems: Problems = {},
	) => {
		const form = formOf(body)
		let session = await browserSessions.current(request)
		if (!session) return signInFirst(SECTIONS[section])
		const refused = refusal(request, form)
		if (refused === 'cross-site') return crossSitePage(request)
		if (refused) return PAGES[section](request, session, { error: problemText(request, refused), status: 403 })
		// An enrolment-only session (MFA_REQUIRED) may enrol a factor and nothing else, as the API's guard has it.
		if (session.enrollmentOnly && !ENROLMENT_PATHS.has(new URL(request.url).pathname))
			return securityPage(request, session, { error: problemText(request, 'mfa-enrollment-required'), status: 403 })
		if (form.confirm !== undefined) {
			const confirmed = await confirm(request, session, form, client)
			if (confirmed instanceof Response) return confirmed
			session = confirmed
		}
		try {
			return await run(callerOf(session), form, session)
		} catch (error) {
			if (!(error instanceof AppError)) throw error
			if (error.kind === 'reauthentication-required' || error.kind === 'mfa-required') return confirmPage(request, session, form, error.kind)
			const { status, text: said, retryAfter } = shown(request, error, client.requestId)
			const key = problems[error.kind]
			const page = await PAGES[section](request, session, { error: key ? problemText(request, key) : said, status })
			if (retryAfter) page.headers.set('retry-after', retryAfter)
			return page
		}
	}

	/** A section's GET: its page for a signed-in browser (an enrolment-only session: the security section only). */
	const show = (section: Section) => async ({ request }: { request: Request }) => {
		const session = await browserSessions.current(request)
		if (!session) return signInFirst(SECTIONS[section])
		if (session.enrollmentOnly && section !== 'security') return redirect(SECTIONS.security)
		return PAGES[section](request, session)
	}

	/** The account's own fields as PUT /users/me takes them (email and name required; the rest optional). */
	const replacement = (session: BrowserSession, change: { email?: string; name?: string; password?: string; currentPassword?: string }) => ({
		email: change.email ?? session.user.email,
		name: change.name ?? session.user.name,
		...(change.password !== undefined ? { password: change.password } : {}),
		...(change.currentPassword ? { currentPassword: change.currentPassword } : {}),
	})

	/** A wrong current password is the service's field problem (`#/currentPassword`): said as such. */
	const currentPasswordWrong = (error: unknown) =>
		error instanceof AppError && error.kind === 'validation-error' && (error.options.errors ?? []).some(({ pointer }) => pointer === '#/currentPassword')

	/**
	 * A new enrolment replaces the unfinished ones of its kind (a page left before its code or passkey), by the
	 * factors' own removal (as DELETE /users/me/factors/{id}): abandoned ones never fill the account's 20
	 * factors where the page lists none of them.
	 */
	const dropUnfinished = async (caller: Caller, started: { id: string; type: 'totp' | 'webauthn' }, client: ClientInfo) => {
		for (const factor of await factors.list(caller.user.id))
			if (factor.id !== started.id && factor.type === started.type && factor.status === 'pending')
				await factors.remove(caller, caller.user.id, factor.id, client).catch((error: unknown) => {
					// Activated or removed meanwhile (another window): nothing to drop.
					if (!(error instanceof AppError && (error.kind === 'conflict' || error.kind === 'not-found'))) throw error
				})
	}

	// Checks a password or a code, or computes a hash: the /auth budget, as PUT /users/me and POST /auth/reauthentication.
	const budget = { transform: ({ request }: { request: Request }) => chargeAuthBudget(request) }

	return (
		new Elysia({ name: 'pages-account', normalize: false, detail: { hide: true } })
			.use(requestContext)
			.get(ACCOUNT_PATHS.page, show('profile'))
			.get(ACCOUNT_PATHS.security, show('security'))
			.get(ACCOUNT_PATHS.identities, show('identities'))
			.get(ACCOUNT_PATHS.sessions, show('sessions'))
			.get(ACCOUNT_PATHS.applications, show('applications'))
			// Profile: the name (PUT /users/me with the same address).
			.post(
				ACCOUNT_PATHS.profile,
				({ request, body, client }) =>
					act(request, body, client, 'profile', async (caller, form, session) => {
						const name = (form.name ?? '').trim()
						if (name.length > 200) return profilePage(request, session, { error: problemText(request, 'name-too-long'), invalid: ['name'], values: { name: name.slice(0, 1000) }, status: 422 })
						await users.replace(caller.user.id, replacement(session, { name, email: session.user.email }), caller, client)
						return done('profile', 'name')
					}),
				budget,
			)
			// A new address: it waits for its proof from a mail to it (or applies at once with EMAIL_VERIFICATION=off).
			.post(
				ACCOUNT_PATHS.email,
				({ request, body, client }) =>
					act(
						request,
						body,
						client,
						'profile',
						async (caller, form, session) => {
							const email = normalizeEmail((form.email ?? '').slice(0, 320))
							if (!isEmailAddress(email)) return profilePage(request, session, { error: problemText(request, 'invalid-email'), invalid: ['email'], values: { email }, status: 422 })
							try {
								await users.replace(caller.user.id, replacement(session, { email, currentPassword: (form.currentPassword ?? '').slice(0, 1024) }), caller, client)
							} catch (error) {
								if (!currentPasswordWrong(error)) throw error
								return profilePage(request, session, { error: problemText(request, 'wrong-current-password'), invalid: ['emailCurrentPassword'], values: { email }, status: 422 })
							}
							return done('profile', mail.verification === 'off' ? 'email-changed' : 'email-pending')
						},
						{ 'email-taken': 'email-taken-other', 'mail-unavailable': 'mail-unavailable-request', conflict: 'account-changed' },
					),
				budget,
			)
			// A new password (PUT /users/me): the policy is the service's; the other sessions end.
			.post(
				ACCOUNT_PATHS.password,
				({ request, body, client }) =>
					act(
						request,
						body,
						client,
						'profile',
						async (caller, form, session) => {
							const password = (form.password ?? '').slice(0, 1024)
							const weak = users.passwordProblem(password)
							if (weak) return profilePage(request, session, { error: problemText(request, `password-${weak.code}`, { values: { min: passwordMinLength } }), invalid: ['password'], status: 422 })
							try {
								await users.replace(caller.user.id, replacement(session, { password, currentPassword: (form.currentPassword ?? '').slice(0, 1024) }), caller, client)
							} catch (error) {
								if (!currentPasswordWrong(error)) throw error
								return profilePage(request, session, { error: problemText(request, 'wrong-current-password'), invalid: ['currentPassword'], status: 422 })
							}
							return done('profile', 'password')
						},
						{ conflict: 'account-changed' },
					),
				budget,
			)
			// An authenticator app: its secret and QR code, shown this once (the page is never stored), then a code from it.
			.post(
				ACCOUNT_PATHS.totp,
				({ request, body, client }) =>
					act(
						request,
						body,
						client,
						'security',
						async (caller, form) => {
							const name = (form.name ?? '').trim().slice(0, 100) || undefined
							const { factor, secret, qrCodeSvg } = await factors.enrollTotp(caller, name, client)
							await dropUnfinished(caller, factor, client)
							return formPage(
								request,
								'account-totp',
								{ factorId: factor.id, secret, qrCode: `data:image/svg+xml;base64,${Buffer.from(qrCodeSvg).toString('base64')}`, focusCode: false },
								{ title: 'account.totp.title' },
							)
						},
						{ conflict: 'too-many-factors' },
					),
				budget,
			)
			.post(
				ACCOUNT_PATHS.totpActivation,
				({ request, body, client }) =>
					act(request, body, client, 'security', async (caller, form) => {
						const factorId = (form.factorId ?? '').slice(0, 64)
						const code = (form.code ?? '').replace(/\s/g, '')
						const again = (error: string, status: number) =>
							formPage(request, 'account-totp', { factorId, error, focusCode: true, codeInvalid: true }, { title: 'account.totp.title', status })
						if (!/^\d{6}$/.test(code)) return again(problemText(request, 'missing-totp-code'), 422)
						let activated: Awaited<ReturnType<FactorsService['activate']>>
						try {
							activated = await factors.activate(caller, factorId, { code }, client)
						} catch (error) {
							if (error instanceof AppError && (error.kind === 'invalid-code' || error.kind === 'validation-error')) return again(problemText(request, 'invalid-second-factor'), 400)
							if (error instanceof AppError && (error.kind === 'not-found' || error.kind === 'conflict')) return again(problemText(request, 'factor-gone'), error.kind === 'conflict' ? 409 : 404)
							throw error
						}
						return activated.recoveryCodes ? codesPage(request, activated.recoveryCodes, true) : done('security', 'totp-added')
					}),
				budget,
			)
			// A passkey: the registration options in the page, for /pages/passkeys.js to create it; its answer activates it.
			.post(
				ACCOUNT_PATHS.passkey,
				({ request, body, client }) =>
					act(
						request,
						body,
						client,
						'security',
						async (caller, form) => {
							const name = (form.name ?? '').trim().slice(0, 100) || undefined
							const { factor, options } = await factors.enrollWebauthn(caller, name, client)
							await dropUnfinished(caller, factor, client)
							return formPage(request, 'account-passkey', { factorId: factor.id, options: JSON.stringify(options) }, { title: 'account.passkey.title' })
						},
						{ conflict: 'too-many-factors' },
					),
				budget,
			)
			.post(
				ACCOUNT_PATHS.passkeyActivation,
				({ request, body, client }) =>
					act(
						request,
						body,
						client,
						'security',
						async (caller, form) => {
							const response = registrationOf(form.response)
							if (!response) throw new AppError('invalid-code', 'no registration')
							const activated = await factors.activate(caller, (form.factorId ?? '').slice(0, 64), { response }, client)
							return activated.recoveryCodes ? codesPage(request, activated.recoveryCodes, true) : done('security', 'passkey-added')
						},
						{ 'invalid-code': 'passkey-not-created', 'validation-error': 'passkey-not-created', 'not-found': 'factor-gone', conflict: 'passkey-registered' },
					),
				budget,
			)
			.post(
				ACCOUNT_PATHS.factorRemoval,
				({ request, body, client }) =>
					act(
						request,
						body,
						client,
						'security',
						async (caller, form) => {
							const factor = await factors.remove(caller, caller.user.id, (form.factorId ?? '').slice(0, 64), client)
							return done('security', factor.type === 'totp' ? 'totp-removed' : 'passkey-removed')
						},
						{ 'not-found': 'factor-gone', 'validation-error': 'factor-gone', conflict: 'factor-gone' },
					),
				budget,
			)
			.post(
				ACCOUNT_PATHS.recoveryCodes,
				({ request, body, client }) =>
					act(request, body, client, 'security', async (caller) => codesPage(request, await factors.regenerateRecoveryCodes(caller, client), false), { conflict: 'no-factor' }),
				budget,
			)
			// Linking: the API's link flow, returning through the sign-in's provider return (which links, and signs this browser in again).
			.post(
				ACCOUNT_PATHS.identityLink,
				({ request, body, client }) =>
					act(
						request,
						body,
						client,
						'identities',
						async (caller, form) => {
							const provider = identities.list().find(({ id }) => id === form.provider)
							if (!provider) throw new AppError('not-found', 'no such provider')
							const flow = newProviderFlow(ACCOUNT_PATHS.identities)
							const url = await identities.startLink(caller, { provider: provider.id, redirectTo: identities.pagesReturnUrl, codeChallenge: flow.codeChallenge }, new URL(request.url).origin)
							return redirect(url, [flow.cookie])
						},
						{ 'not-found': 'unknown-provider', 'provider-unavailable': 'provider-unavailable' },
					),
				budget,
			)
			.post(
				ACCOUNT_PATHS.identityUnlink,
				({ request, body, client }) =>
					act(
						request,
						body,
						client,
						'identities',
						async (caller, form) => {
							await identities.unlink(caller, caller.user.id, (form.identityId ?? '').slice(0, 64), client)
							return done('identities', 'unlinked')
						},
						{ conflict: 'last-way-in', 'not-found': 'identity-gone', 'validation-error': 'identity-gone' },
					),
				budget,
			)
			// One session (DELETE /users/me/sessions/{id}: another account's is not found), or every other one (POST /auth/logout `others`).
			.post(ACCOUNT_PATHS.sessionEnd, ({ request, body, client }) =>
				act(
					request,
					body,
					client,
					'sessions',
					async (caller, form) => {
						if (form.others !== undefined) {
							await auth.logout(caller, 'others', client)
							return done('sessions', 'others-ended')
						}
						const sessionId = (form.sessionId ?? '').toLowerCase().slice(0, 64)
						if (!/^[0-9a-f-]{36}$/.test(sessionId)) throw new AppError('not-found', 'no such session')
						await users.revokeSession(caller.user.id, sessionId, caller, client)
						// This browser's own session: signed out.
						if (sessionId === caller.sessionId) return redirect('/sign-out', [await browserSessions.end(request, client)])
						return done('sessions', 'ended')
					},
					{ 'not-found': 'session-gone', 'validation-error': 'session-gone' },
				),
			)
			// Deactivation (DELETE /users/me): asked once more on a page of its own, then every session ends.
			.get(ACCOUNT_PATHS.deactivation, async ({ request }) => {
				const session = await browserSessions.current(request)
				if (!session) return signInFirst(ACCOUNT_PATHS.deactivation)
				if (session.enrollmentOnly) return redirect(SECTIONS.security)
				return formPage(request, 'account-deactivation', { body: text(request, 'account.deactivation.body', { email: session.user.email }) }, { title: 'account.deactivation.title' })
			})
			.post(ACCOUNT_PATHS.deactivation, ({ request, body, client }) =>
				act(
					request,
					body,
					client,
					'profile',
					async (caller) => {
						await users.deactivate(caller.user.id, caller, client)
						const page = kit.messagePage(request, {
							title: 'account.deactivation.title',
							heading: text(request, 'account.deactivation.doneHeading'),
							body: text(request, 'account.deactivation.doneBody'),
						})
						// Its sessions were revoked with it: the browser's cookie goes too.
						page.headers.append('set-cookie', await browserSessions.end(request, client))
						return page
					},
					{ 'last-admin': 'last-admin' },
				),
			)
			.post(ACCOUNT_PATHS.consentWithdrawal, ({ request, body, client }) =>
				act(
					request,
					body,
					client,
					'applications',
					async (caller, form) => {
						await consents.revoke(caller.user.id, (form.clientId ?? '').slice(0, 255), caller, client)
						return done('applications', 'withdrawn')
					},
					{ 'not-found': 'consent-gone' },
				),
			)
	)

	/** Recovery codes, shown this once (the page is never stored). */
	function codesPage(request: Request, codes: string[], first: boolean) {
		return formPage(request, 'account-codes', { codes, intro: text(request, first ? 'account.codes.introFirst' : 'account.codes.intro') }, { title: 'account.codes.title' })
	}
}
