import { cors } from '@elysiajs/cors'
import { Elysia } from 'elysia'
import type { Config } from './config/env'
import { DataKeys } from './crypto/data-keys'
import type { OAuthSigningKey } from './crypto/oauth-signing-key'
import type { DatabaseHandle } from './db/client'
import { authGuard } from './modules/auth/guard'
import { clientAddresses, type PeerAddress } from './http/client-ip'
import { createCounterStore, type CounterStore } from './db/counters'
import { systemResolver, type ResolveHost } from './http/destination'
import { requestLogging } from './http/logging'
import { clientInfoOf } from './http/request-context'
import { hasMetricsToken, Metrics, metricsRoute } from './http/metrics'
import { rateLimits } from './http/rate-limit'
import { problemHandler, unmatchedRoute, type RouteTable } from './http/problem'
import { requestChecks, responseHeaders } from './http/security'
import type { Logger } from './log'
import { auditModule } from './modules/audit'
import { AuditLog } from './modules/audit/service'
import { authModule, reauthentication } from './modules/auth'
import { docs } from './modules/docs'
import type { TokenKeys } from './modules/auth/keys'
import { LoginLockout } from './modules/auth/lockout'
import { PasswordHasher, passwordProblem } from './modules/auth/password'
import { sampleLegacyHashes } from './modules/auth/stored-hashes'
import { AuthService } from './modules/auth/service'
import { enrolmentHold } from './modules/auth/sessions'
import { SignIn } from './modules/auth/sign-in'
import { sessionUpkeep } from './modules/auth/session-upkeep'
import { health } from './modules/health'
import { jwks } from './modules/health/jwks'
import { FINISHED_JOB_RETENTION_SECONDS, JOBS_CHANNEL, purgeFinishedJobs } from './jobs/queue'
import { inSteps, Schedule, scheduled } from './jobs/schedule'
import { BackgroundJobs, backgroundJobs, JobWorker } from './jobs/worker'
import { createMailer, sendMailJob } from './mail/mailer'
import { WayInNotices } from './mail/notices'
import { MailTemplates } from './mail/templates'
import { emailCodeSignInModule, emailModule } from './modules/email'
import { EmailCodeSignIn } from './modules/email/code-sign-in'
import { EmailService, MAIL_QUEUE, MAIL_REQUEST_QUEUE } from './modules/email/service'
import { factorsModule, secondFactorSignIn } from './modules/factors'
import { FactorsService, owedSecondFactors } from './modules/factors/service'
import { OAUTH_CLIENTS_CHANNEL, OAuthClients } from './modules/oauth/clients'
import { OAuthConsents } from './modules/oauth/consents'
import { oauthClientsModule } from './modules/oauth/routes'
import { identitiesModule, oidcModule } from './modules/oidc'
import { ProviderDirectory } from './modules/oidc/providers'
import { ProviderSignIn } from './modules/oidc/service'
import { settingsModule } from './modules/settings'
import { usersModule } from './modules/users'
import { importsModule } from './modules/imports'
import { USER_IMPORTS_BODY_LIMIT_BYTES, USER_IMPORTS_PATH } from './modules/imports/model'
import { ImportsService } from './modules/imports/service'
import { organizationsModule } from './modules/organizations'
import { invitationRoutes, InvitationsService } from './modules/organizations/invitations'
import { MembersService } from './modules/organizations/members'
import { OrganizationRoles } from './modules/organizations/roles'
import { OrganizationsService } from './modules/organizations/service'
import { webhooksModule } from './modules/webhooks'
import { purgeWebhookLogStep, WebhookDelivery } from './modules/webhooks/delivery'
import { WEBHOOK_QUEUE } from './modules/webhooks/outbox'
import { WebhookSender } from './modules/webhooks/sender'
import { WebhookService } from './modules/webhooks/service'
import { UsersService } from './modules/users/service'
import { purgeExpiredArtifacts } from './modules/oauth/adapter'
import { OAuthDirectory } from './modules/oauth/directory'
import { loadProvider, type BrowserSessions as ProviderBrowserSessions } from './modules/oauth/provider'
import { isProtocolPath, protocolModule } from './modules/oauth/protocol'
import { Interactions } from './modules/oauth/interactions'
import { SingleSignOn } from './modules/oauth/single-sign-on'
import { UserinfoShortcut } from './modules/oauth/userinfo'
import { BACKCHANNEL_LOGOUT_QUEUE, backchannelLogoutJob, logOutEndedSessionsStep } from './modules/oauth/logout'
import { consoleRoutes, isConsolePath } from './console'
import { CONSOLE_CLIENT_ID } from './modules/oauth/model'
import { BrowserSessions, consentPage, PAGE_PATHS, pageHeaders, PageRenderer, pageProblems, pages, providerPages, type PageSettings } from './pages'

export interface AppDeps {
	config: Config
	database: DatabaseHandle
	keys: TokenKeys
	/** The provider's RS256 key (ID tokens), published in the JWKS beside the access tokens' keys. */
	oauthKey: OAuthSigningKey
	log: Logger
	/** Rate-limit and lockout counters; made from config when not given. */
	counters?: CounterStore
	/** The socket peer of a request; only for tests under `app.handle`, which has no socket. */
	peerAddress?: PeerAddress
	/** Keys of secrets sealed at rest; made from config when not given (the server makes them first, to share a development key with its workers). */
	dataKeys?: DataKeys
	/** Mail templates, when already loaded (the server loads them first, to stop on a broken one before anything else). */
	templates?: MailTemplates
	/** The pages' templates, catalogues and styles, when already loaded (likewise). */
	pageRenderer?: PageRenderer
	/** How webhook hosts resolve; only for tests that play DNS rebinding. */
	resolveHost?: ResolveHost
}

export const DOCS_PATH = '/api/docs'

const EXPOSED_HEADERS = [
	'Location',
	'Link',
	'X-Total-Count',
	'X-Request-Id',
	'WWW-Authenticate',
	'Retry-After',
	'RateLimit-Limit',
	'RateLimit-Remaining',
	'RateLimit-Reset',
	'RateLimit-Policy',
	'RateLimit',
]

function corsFor(origins: string[]) {
	const anyOrigin = origins.includes('*')
	const plugin = cors({
		origin: anyOrigin ? '*' : origins,
		// Credentials only ever go with an explicit list of origins, never with `*`.
		credentials: !anyOrigin && origins.length > 0,
		methods: ['GET', 'POST', 'PUT', 'DELETE', 'OPTIONS'],
		allowedHeaders: ['Authorization', 'Content-Type', 'X-Request-Id', 'Accept'],
		exposeHeaders: EXPOSED_HEADERS,
		maxAge: 600,
	})
	if (!anyOrigin) return plugin
	// `*` is the same answer for every origin, so nothing varies; the plugin's `Vary: *` would keep shared caches
	// from storing any response (the JWKS above all).
	return new Elysia({ name: 'cors-any-origin' }).use(plugin).onRequest(({ set }) => {
		if (set.headers.vary === '*') delete set.headers.vary
	})
}

/** The API as a resource (RFC 8707) in the console's token requests: the audience of the tokens the API takes from it. */
export const consoleAudience = (issuer: string) => `${issuer}/api`

/** The whole service as an Elysia app; `index.ts` listens, tests call `app.handle`. */
/** What the pages are branded with: APP_NAME, BRAND_LOGO_URL, BRAND_COLOR, PAGES_DIR, and the origin forms come from. */
export const pageSettings = (config: Config): PageSettings => ({
	appName: config.mail.appName,
	publicUrl: config.publicUrl,
	brandLogoUrl: config.pages.brandLogoUrl,
	brandColor: config.pages.brandColor,
	dir: config.pages.dir,
})

/** The browser session as the provider reads it (the pages' cookie). */
const providerView = (sessions: BrowserSessions): ProviderBrowserSessions => ({
	async current(request) {
		const session = await sessions.current(request)
		return session && { sessionId: session.sessionId, userId: session.user.id, amr: session.amr, aal: session.aal, authenticatedAt: session.authenticatedAt, account: session.user }
	},
	sessionDigestOf: (request) => sessions.sessionDigestOf(request),
})

export function createApp({ config, database, keys, oauthKey, log, counters, peerAddress, templates, pageRenderer, dataKeys: givenDataKeys, resolveHost = systemResolver }: AppDeps) {
	const store = counters ?? createCounterStore(config.rateLimit.redisUrl, log)
	const routeTable: RouteTable = { routes: [] }
	const { db } = database
	// Cost classes of hashes still stored under older PASSWORD_HASH_* settings or imported from another service, learnt
	// before the first login is checked, so that from the first login on such accounts cost what an unknown email costs
	// (verifyForLogin). A stored hash refused unread is logged by its scheme and the reason, never the hash.
	const hasher = new PasswordHasher(config.password, {
		storedHashSample: () => sampleLegacyHashes(db, config.password),
		onRefusedHash: ({ scheme, reason }) => log.warn({ scheme, reason }, 'stored password hash refused: it matches no password'),
	})
	const metrics = new Metrics({
		poolMax: config.database.kind === 'postgres' ? config.database.poolMax : 1,
	})
	const audit = new AuditLog(db, log, (type) => {
		if (type === 'login.succeeded') metrics.login('succeeded')
		else if (type === 'login.failed') metrics.login('failed')
		else if (type === 'login.locked') metrics.login('locked')
	})
	const lockout = new LoginLockout(store, config.lockout)
	const dataKeys = givenDataKeys ?? DataKeys.from(config.dataKeys, log)
	const mailer = createMailer(config.mail, log)
	const mailTemplates = templates ?? new MailTemplates(config.mail.templatesDir)
	const notices = new WayInNotices({ templates: mailTemplates, appName: config.mail.appName, recoveryUrl: config.mail.recoveryUrl })
	const email = new EmailService({
		db,
		audit,
		hasher,
		lockout,
		mailer,
		templates: mailTemplates,
		settings: config.mail,
		passwordProblem: (password) => passwordProblem(password, config.password.minLength),
		notices,
	})
	const jobs = new JobWorker({
		db,
		log,
		pollSeconds: config.jobs.pollSeconds,
		retrySeconds: config.jobs.retrySeconds,
		onOutcome: (queue, outcome) => metrics.job(queue, outcome),
		handlers: { [MAIL_QUEUE]: sendMailJob(mailer), [MAIL_REQUEST_QUEUE]: (payload) => email.handleRequest(payload) },
	})
	const destinations = { allowHttp: config.webhooks.allowHttp, allowPrivateNetworks: config.webhooks.allowPrivateNetworks, resolve: resolveHost }
	const webhooks = new WebhookService({ db, audit, dataKeys, destinations })
	const oauthClients = new OAuthClients({ db, audit, destinations, listen: (onChange, onListen) => database.listen(OAUTH_CLIENTS_CHANNEL, onChange, onListen) })
	const oauthConsents = new OAuthConsents({ db, audit })
	const webhookDelivery = new WebhookDelivery({
		db,
		dataKeys,
		audit,
		log,
		sender: new WebhookSender({ ...destinations, timeoutSeconds: config.webhooks.timeoutSeconds }),
		retrySchedule: config.webhooks.retrySchedule,
		disableAfterSeconds: config.webhooks.disableAfterSeconds,
		onEndpointDisabled: () => metrics.webhookEndpointDisabled(),
		// A slow endpoint gets an eighth of the slots at most: the rest stay for the others.
		slowEndpointInFlight: Math.max(1, Math.floor(config.webhooks.concurrency / 8)),
		timeoutSeconds: config.webhooks.timeoutSeconds,
	})
	// Webhooks have a worker of their own: receivers that hang for their whole timeout never hold up mail.
	const webhookJobs = new JobWorker({
		db,
		log,
		pollSeconds: config.jobs.pollSeconds,
		retrySeconds: config.webhooks.retrySchedule[0] ?? 5,
		concurrency: config.webhooks.concurrency,
		claimAtLeast: Math.max(1, Math.floor(config.webhooks.concurrency / 8)),
		onOutcome: (queue, outcome) => metrics.job(queue, outcome),
		retryDelay: webhookDelivery.retryDelay,
		handlers: { [WEBHOOK_QUEUE]: webhookDelivery.handle, [BACKCHANNEL_LOGOUT_QUEUE]: (payload, job) => sendBackchannelLogout(payload, job) },
	})
	// The one road every way of signing in ends on; the factors module tells it whether a second factor is owed.
	const signIn = new SignIn({
		db,
		audit,
		secondFactors: owedSecondFactors(db),
		requireVerifiedEmail: config.mail.verification === 'required',
		refreshTtlSeconds: config.jwt.refreshTtlSeconds,
		sessionsPerUserMax: config.sessions.perUserMax,
		mfaRequired: config.mfa.required,
	})
	// The one schedule of periodic upkeep; each part that needs some adds its tasks.
	const schedule = new Schedule(log)
		.every('finished-job purge', 600, (stopping) => inSteps(() => purgeFinishedJobs(db, FINISHED_JOB_RETENTION_SECONDS), stopping))
		.every('webhook log purge', 600, (stopping) => inSteps(() => purgeWebhookLogStep(db), stopping))
		// Clients that asked to hear of a sign-out hear of sessions ended through the API too, within seconds.
		.every('provider sessions ended', 5, (stopping) => inSteps(() => logOutEndedSessionsStep(db), stopping))
		.every('provider records purge', 600, (stopping) => inSteps(() => purgeExpiredArtifacts(db), stopping))
	const auth = new AuthService({
		db,
		audit,
		hasher,
		lockout,
		signIn,
		requireVerifiedEmail: config.mail.verification === 'required',
		refreshTtlSeconds: config.jwt.refreshTtlSeconds,
		reuseGraceSeconds: config.jwt.reuseGraceSeconds,
	})
	// Sign-in with a code by mail: the email module checks the code, the password lockout counts it, the road ends it.
	const codeSignIn = new EmailCodeSignIn({ db, audit, email, signIn, attempts: auth })
	const factors = new FactorsService({
		db,
		audit,
		dataKeys,
		// Wrong second-factor codes are counted per account, apart from passwords, with the same settings and store.
		lockout: new LoginLockout(store, config.lockout, 'mfa-lockout'),
		settings: config.mfa,
		reauthenticationSeconds: config.reauthenticationSeconds,
		recoveryReviewSeconds: config.mail.recoveryReviewSeconds,
		notices,
		log,
		signIn,
	})
	const providerSignIn = new ProviderSignIn({
		db,
		audit,
		directory: new ProviderDirectory(config.oidc.providers, config.oidc.allowHttpIssuers),
		settings: config.oidc,
		signupEnabled: config.signupEnabled,
		log,
		signIn,
		stepUp: factors,
		reauthenticationSeconds: config.reauthenticationSeconds,
		recoveryReviewSeconds: config.mail.recoveryReviewSeconds,
		notices,
	})
	const users = new UsersService({
		db,
		audit,
		hasher,
		passwordChecks: auth,
		stepUp: factors,
		email,
		passwordMinLength: config.password.minLength,
		signupEnabled: config.signupEnabled,
		reauthenticationSeconds: config.reauthenticationSeconds,
		notices,
	})
	// Organization invitations: mailed through the outbox, accepted through the API and the /invitation page.
	const invitations = new InvitationsService({ db, audit, mailer, templates: mailTemplates, settings: config.mail })
	// The pages: the browser's own session behind a cookie, on the same sign-in road and sessions as the API.
	const settings = pageSettings(config)
	const renderer = pageRenderer ?? new PageRenderer(settings)
	const browserSessions = new BrowserSessions({ db, auth })
	const pageProblem = pageProblems(renderer)
	const issuer = config.publicUrl
	const oauthDirectory = new OAuthDirectory(db, oauthClients)
	const secondFactorsOwed = owedSecondFactors(db)
	const cookieKeys = [dataKeys.derive('latchkey oauth cookies')]
	const heldToEnrolment = enrolmentHold(db, config.mfa.required)
	const provider = loadProvider({
		db,
		log,
		pages: providerPages(renderer),
		settings: {
			issuer,
			signingKey: oauthKey.privateJwk,
			cookieKeys,
			accessTokenTtlSeconds: config.jwt.accessTtlSeconds,
			refreshTokenTtlSeconds: config.jwt.refreshTtlSeconds,
			dynamicRegistration: config.oauth.dynamicRegistration,
			devicePollSeconds: config.oauth.devicePollSeconds,
		},
		clients: oauthDirectory,
		browserSessions: providerView(browserSessions),
		stepUp: { hasSecondFactor: async (userId) => (await secondFactorsOwed.methodsOf(userId)).length > 0, heldToEnrolment },
		consents: oauthDirectory,
		verifySecret: (clientId, secret) => oauthDirectory.verifySecret(clientId, secret),
		// Its requests to clients (back-channel logout, `jwks_uri`) go where webhooks may go (API.md).
		destinations: { ...destinations, timeoutSeconds: config.webhooks.timeoutSeconds },
		endSession: async (sessionId, userId, client) => void (await auth.endSession(userId, sessionId, client)),
	})
	const sendBackchannelLogout = backchannelLogoutJob(provider)
	// The two requests a signed-in browser and its client make most, in their plain case, without the library.
	const singleSignOn = new SingleSignOn({
		db,
		issuer,
		provider,
		cookieKeys,
		sessionTtlSeconds: config.jwt.refreshTtlSeconds,
		browserDigestOf: (request) => browserSessions.sessionDigestOf(request),
		heldToEnrolment,
	})
	const userinfo = new UserinfoShortcut({ db, findActiveClient: (clientId) => oauthClients.findActive(clientId) })
	const interactions = new Interactions({
		provider,
		issuer: new URL(issuer),
		browserSessions: providerView(browserSessions),
		isFirstParty: (clientId) => oauthDirectory.isFirstParty(clientId),
		rememberConsent: async (userId, clientId, scopes, request) => {
			const client = await oauthClients.findActive(clientId)
			if (client) await oauthConsents.grant(userId, client.id, scopes, clientInfoOf(request))
		},
	})
	// The API takes the console's own tokens too (docs/console.md), and only while the console is on.
	const consoleTokens = config.consoleEnabled ? { issuer, audience: consoleAudience(issuer), publicJwk: oauthKey.publicJwk, clientId: CONSOLE_CLIENT_ID } : undefined
	const guard = authGuard({ db, keys, jwt: config.jwt, mfaRequired: config.mfa.required, console: consoleTokens })
	// A scraper holding the metrics token is the operator's own; anyone else's /metrics request is budgeted.
	const metricsToken = config.metrics.token
	const isAuthorizedScrape = (request: Request) =>
		metricsToken !== undefined && new URL(request.url).pathname === '/metrics' && hasMetricsToken(request.headers.get('authorization'), metricsToken)

	// normalize: false everywhere, so that unknown query parameters are refused rather than silently dropped.
	const api = new Elysia({ name: 'api', prefix: '/api', normalize: false })
		.use(health(database))
		.use(jwks(keys, oauthKey))
		.use(usersModule({ users, guard }))
		.use(authModule({ auth, guard, jwt: config.jwt }))
		.use(secondFactorSignIn({ factors, guard, jwt: config.jwt }))
		.use(reauthentication({ auth, factors, email, guard, jwt: config.jwt }))
		.use(factorsModule({ factors, users, guard, jwt: config.jwt }))
		.use(oidcModule({ signIn: providerSignIn, guard, jwt: config.jwt }))
		.use(identitiesModule({ signIn: providerSignIn, users, guard }))
		.use(emailModule({ email }))
		.use(config.mail.codeSignIn ? emailCodeSignInModule({ codeSignIn, guard, jwt: config.jwt }) : new Elysia({ name: 'email-code-sign-in-off' }))
		.use(auditModule({ audit, guard }))
		.use(settingsModule({ settings: config.settings, guard }))
		.use(webhooksModule({ webhooks, guard }))
		.use(oauthClientsModule({ clients: oauthClients, consents: oauthConsents, guard }))
		.use(
			organizationsModule({
				organizations: new OrganizationsService({ db, audit, creation: config.organizationCreation }),
				members: new MembersService({ db, audit }),
				roles: new OrganizationRoles({ db, audit }),
				guard,
			}),
		)
		.use(invitationRoutes({ invitations, guard }))
		.use(importsModule({ imports: new ImportsService({ db, dataKeys, audit }), guard }))

	const app = new Elysia({ name: 'latchkey', normalize: false })
		// Headers every response carries (the preflight too), then who the client is, then CORS, so that even a
		// refused request carries what a browser needs to read the problem.
		.use(responseHeaders({ htmlPaths: new Set([DOCS_PATH]) }))
		.use(clientAddresses(config.rateLimit.trustProxy, peerAddress))
		.use(corsFor(config.cors.origins))
		.use(requestLogging(log, metrics.observeRequest))
		// Every request counts, whatever its answer: the limits come before the request checks' refusals and
		// before the problem handler, whose error hook would otherwise answer before theirs counted.
		.use(rateLimits({ config: config.rateLimit, store, exempt: isAuthorizedScrape, onRefused: (budget) => metrics.refused(budget), pageProblem }))
		.use(
			requestChecks({
				bodyLimitBytes: config.bodyLimitBytes,
				largeBodies: new Map([[USER_IMPORTS_PATH, USER_IMPORTS_BODY_LIMIT_BYTES]]),
				htmlPaths: new Set([DOCS_PATH]),
				textPaths: new Set(['/metrics']),
				// The console's paths answer HTML and files, and a 404 when it is off: no JSON negotiation there either.
				passThrough: (path) => isProtocolPath(path) || isConsolePath(path),
				pagePaths: PAGE_PATHS,
			}),
		)
		.use(problemHandler(log, routeTable, config.rateLimit.windowSeconds, pageProblem))
		.onStop(() => store.close())
		.onStop(() => mailer.close())
		.onStop(() => oauthClients.stopHearing())
		.use(backgroundJobs(new BackgroundJobs([jobs, webhookJobs], (onNotify) => database.listen(JOBS_CHANNEL, onNotify), log)))
		.decorate('jobs', jobs)
		.decorate('webhookJobs', webhookJobs)
		.decorate('oauthClients', oauthClients)
		.decorate('oauthConsents', oauthConsents)
		// What the OpenID Provider reads of the browser (single sign-on) and ends (logout).
		.decorate('browserSessions', browserSessions)
		.decorate('singleSignOn', singleSignOn)
		.use(
			sessionUpkeep({
				schedule,
				db,
				log,
				retentionSeconds: config.sessions.retentionSeconds,
				metrics: config.metrics.enabled ? metrics : undefined,
				purgeSignInLeftovers: async () => (await factors.purgeExpired()) + (await providerSignIn.purgeExpired()) + (await email.purgeCodeFailures()),
			}),
		)
		.use(scheduled(schedule))
		.use(docs({ enabled: config.docsEnabled, path: DOCS_PATH }))
		.use(jwks(keys, oauthKey))
		.use(config.metrics.enabled ? metricsRoute(metrics, config.metrics.token) : new Elysia({ name: 'metrics-disabled' }))
		.use(api)
		.use(protocolModule({ provider, issuer, interactions, htmlHeaders: pageHeaders(renderer.csp), userinfo, singleSignOn }))
		.use(
			pages({
				renderer,
				settings,
				auth,
				factors,
				// The /sign-in page's other ways in, on the services their API routes use.
				codeSignIn: config.mail.codeSignIn ? codeSignIn : undefined,
				providers: providerSignIn,
				// Sign-up, recovery and a mail's proof, on the services of POST /users and /auth/* (their rules, not copies).
				users,
				email,
				signupEnabled: config.signupEnabled,
				passwordMinLength: config.password.minLength,
				browserSessions,
				sessionTtlSeconds: config.jwt.refreshTtlSeconds,
				// /account, on the services of the API's routes on a user's own account (their rules, not copies).
				// /invitation, on the service of POST /invitation-acceptances.
				invitations,
				account: { users, auth, factors, identities: providerSignIn, consents: oauthConsents, email, passwordMinLength: config.password.minLength },
			}),
		)
		.use(consentPage({ renderer, settings, interactions, browserSessions }))
		// The admin console (CONSOLE_ENABLED): a page and its files; everything it does goes through the API above.
		.use(config.consoleEnabled ? consoleRoutes({ issuer, appName: config.mail.appName, pageHeaders: pageHeaders(renderer.csp) }) : new Elysia({ name: 'console-off' }))
		// Every path is a route, so that a 404 or 405 passes the rate limits like any other answer.
		.all('/*', ({ request, path }) => {
			throw unmatchedRoute(routeTable, request.method, path)
		}, { detail: { hide: true } })
	routeTable.routes = app.routes
	return app
}

export type App = ReturnType<typeof createApp>
