import { Elysia } from 'elysia'
import { AppError } from '../http/problem'
import { chargeAuthBudget } from '../http/rate-limit'
import { requestContext, type ClientInfo } from '../http/request-context'
import type { InvitationPreview, InvitationsService } from '../modules/organizations/invitations'
import { normalizeEmail } from '../modules/users/model'
import type { BrowserSession } from './browser-sessions'
import { ACCOUNT_PATHS } from './account'
import { EMAIL_VERIFICATION_PATHS } from './email-verification'
import { formOf, redirect, type PageKit } from './kit'
import type { PageView } from './render'

export const INVITATION_PATHS = { page: '/invitation' } as const

export interface InvitationPagesDeps {
	/** POST /invitation-acceptances's service: the page accepts through it (its rules, not a copy). */
	invitations: Pick<InvitationsService, 'preview' | 'accept'>
}

/** Where signing in or up first goes, and comes back from (the token waits in the tab's session storage). */
const comeBack = (path: string, extra: Record<string, string> = {}) => `${path}?${new URLSearchParams({ ...extra, return_to: INVITATION_PATHS.page })}`

/** The sentence (`problem.<key>`) of each refusal of an invitation the page can meet. */
const INVITATION_PROBLEMS: Record<string, string> = {
	'invalid-code': 'invitation-invalid',
	'code-expired': 'invitation-expired',
	conflict: 'invitation-organization-inactive',
	// The address refusals are shown with the invitation (review); a forbidden left is the inviter's lost authority.
	forbidden: 'invitation-inviter-lost-owner',
}

/**
 * /invitation (API.md "Pages"): the link's page. Its token is in the fragment, which only script reads
 * (/pages/invitation.js); signed out, it offers to sign in or up first and come back; signed in, the script posts the
 * token here and the page shows the organization and the roles, with the button that accepts through the service of
 * POST /invitation-acceptances. Every refusal is a sentence.
 */
export function invitationPages({ invitations }: InvitationPagesDeps, kit: PageKit) {
	const { renderer, browserSessions, problemText, formPage, refusal, crossSitePage, shown } = kit
	const page = (request: Request, view: PageView, status = 200) =>
		formPage(request, 'invitation', { action: INVITATION_PATHS.page, ...view }, { title: 'invitation.title', status })
	const heading = (request: Request) => renderer.text(renderer.languageOf(request), 'invitation.heading')

	const rolesInWords = (request: Request, roles: string[]) => (roles.length ? roles.join(', ') : renderer.text(renderer.languageOf(request), 'invitation.noRoles'))

	/** The invitation, with the Accept button when this account may accept it, else the sentence why not and the way on. */
	const review = (request: Request, session: BrowserSession, { invitation, organization }: InvitationPreview, token: string, status = 200) => {
		const language = renderer.languageOf(request)
		const you = session.user.email
		const otherAddress = normalizeEmail(you) !== invitation.email
		const unverified = !otherAddress && session.user.emailVerifiedAt === null
		const error = otherAddress
			? problemText(request, 'invitation-other-address', { values: { email: invitation.email } })
			: unverified
				? problemText(request, 'invitation-unverified')
				: undefined
		return page(
			request,
			{
				review: true,
				heading: renderer.text(language, 'invitation.reviewHeading', { organization: organization.name }),
				invited: renderer.text(language, 'invitation.invited', { organization: organization.name, roles: rolesInWords(request, invitation.roles) }),
				forAddress: renderer.text(language, 'invitation.forAddress', { email: invitation.email, you }),
				canAccept: !error,
				token,
				error,
				switchAccount: otherAddress ? comeBack('/sign-in', { force: '1', login_hint: invitation.email }) : undefined,
				verify: unverified ? `${EMAIL_VERIFICATION_PATHS.page}?${new URLSearchParams({ return_to: INVITATION_PATHS.page })}` : undefined,
			},
			error && status === 200 ? 403 : status,
		)
	}

	/** A refusal of the invitation itself (used, revoked, unknown, expired, its organization deactivated), as a sentence. */
	const refused = (request: Request, error: AppError, client: ClientInfo) => {
		const key = INVITATION_PROBLEMS[error.kind]
		const { status, text } = shown(request, error, client.requestId)
		return page(request, { heading: heading(request), error: key ? problemText(request, key) : text }, status)
	}

	return new Elysia({ name: 'pages-invitation', normalize: false, detail: { hide: true } })
		.use(requestContext)
		.get(INVITATION_PATHS.page, async ({ request }) => {
			const session = await browserSessions.current(request)
			const language = renderer.languageOf(request)
			return page(request, {
				start: true,
				heading: heading(request),
				signedOut: !session,
				signIn: comeBack('/sign-in'),
				signUp: comeBack('/sign-up'),
				signedInAs: session ? renderer.text(language, 'invitation.signedInAs', { email: session.user.email }) : undefined,
			})
		})
		.post(
			INVITATION_PATHS.page,
			async ({ request, body, client }) => {
				const form = formOf(body)
				const session = await browserSessions.current(request)
				if (!session) return redirect(comeBack('/sign-in'))
				// A session that may only enrol a second factor accepts nothing (as the API refuses its token): enrol first.
				if (session.enrollmentOnly) return redirect(ACCOUNT_PATHS.security)
				const denied = refusal(request, form)
				if (denied === 'cross-site') return crossSitePage(request)
				if (denied) return page(request, { heading: heading(request), error: problemText(request, denied) }, 403)
				const token = (form.token ?? '').trim().slice(0, 512)
				let preview: InvitationPreview
				try {
					preview = await invitations.preview(token)
				} catch (error) {
					if (!(error instanceof AppError)) throw error
					return refused(request, error, client)
				}
				if (form.accept === undefined) return review(request, session, preview, token)
				let membership: Awaited<ReturnType<InvitationPagesDeps['invitations']['accept']>>
				try {
					membership = await invitations.accept(session.user, token, client)
				} catch (error) {
					if (!(error instanceof AppError)) throw error
					// Another or an unconfirmed address: the invitation again, with the sentence and the way on.
					if (error.kind === 'forbidden') return review(request, session, preview, token, 403)
					return refused(request, error, client)
				}
				const language = renderer.languageOf(request)
				const organization = membership.organization.name
				return page(request, {
					done: true,
					heading: renderer.text(language, 'invitation.doneHeading', { organization }),
					joined: renderer.text(language, 'invitation.joined', { organization, roles: rolesInWords(request, membership.roles) }),
				})
			},
			// Checks a token: the /auth budget, as POST /api/auth/email-verifications.
			{ transform: ({ request }) => chargeAuthBudget(request) },
		)
}
