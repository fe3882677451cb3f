/**
 * "A deployment with no frontend of its own is complete" (issue 25, point 2), against the compiled binary, in
 * Debian's Chromium (playwright-core) driven as a person would: sign up on /sign-up, open the verification link
 * from the mail, sign in, recover the password through /recovery and the mail's link to /password-reset, sign in
 * with the new password, enrol a passkey on /account/security and sign in with it on another browser, then sign in
 * to another application through the provider with no password typed (single sign-on), allowing it on /consent. No APP_URL: the mails link to Latchkey's own pages. The mails go to a real
 * SMTP server on loopback (smtp-server); the application is the pages-only guide's own snippet
 * (docs/guides/pages-only.md, run:notes-app: openid-client, code flow with PKCE), served by Bun.serve.
 * Also: PAGES_DIR replacing a page at the binary, and a broken template stopping its start with a clear line.
 * Run with `bun test ./test/pages.deployment.e2e.ts` after `bun run build`; screenshots land in
 * test-artifacts/pages/deployment-*.png.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, BrowserContext, Page, Request as BrowserRequest } from 'playwright-core'
import { bareEnv, binaryFolder, jsonPost, startBinary, type BinaryFolder, type RunningBinary } from './support/binary'
import { launchChromium, openPage, PAGE_ARTIFACTS } from './support/browser'
import { createEmptyTestDatabase, TEST_DATABASE_URL } from './support/database'
import { proofOf, SmtpSink, SUBJECT } from './support/mail'
import { freePort } from './support/ports'

setDefaultTimeout(120_000)

const ROOT = join(import.meta.dir, '..')
const FIRST_PASSWORD = 'a long enough passphrase'
const NEW_PASSWORD = 'another long passphrase, after recovery'
const ADMIN = { email: `admin-${Bun.randomUUIDv7().slice(-10)}@example.test`, password: 'the first admin’s passphrase' }
const SESSION_COOKIE = '__Host-latchkey-session'

/** The pages-only guide's application, as written, in a module of its own. */
async function guideApplication(env: Record<string, string>): Promise<{ handle(request: Request): Promise<Response> }> {
	const guide = readFileSync(join(ROOT, 'docs/guides/pages-only.md'), 'utf8')
	const source = /```ts run:notes-app\n([\s\S]*?)\n```/.exec(guide)?.[1]
	if (!source) throw new Error('docs/guides/pages-only.md has no run:notes-app snippet')
	const folder = join(ROOT, 'test-artifacts', 'guide')
	mkdirSync(folder, { recursive: true })
	const file = join(folder, `notes-app-e2e-${crypto.randomUUID()}.ts`)
	writeFileSync(file, source)
	Object.assign(process.env, env)
	return (await import(file)) as { handle(request: Request): Promise<Response> }
}

/** Every document the tab requested (redirects included), in order, as `latchkey/path` or `notes/path`. */
function navigations(page: Page, origins: Record<string, string>): string[] {
	const seen: string[] = []
	page.on('request', (request: BrowserRequest) => {
		if (!request.isNavigationRequest() || request.frame() !== page.mainFrame()) return
		const url = new URL(request.url())
		seen.push(`${origins[url.origin] ?? url.origin}${url.pathname}`)
	})
	return seen
}

let folder: BinaryFolder
let latchkey: RunningBinary
let dropDatabase: (() => Promise<void>) | undefined
let sink: SmtpSink
let issuer: string
let notes: string
let notesServer: ReturnType<typeof Bun.serve> | undefined
let browser: Browser

beforeAll(async () => {
	sink = await SmtpSink.start()
	const port = await freePort()
	// `localhost`, not 127.0.0.1: the pages' cookies are __Host- and Secure, which browsers keep over http there.
	issuer = `http://localhost:${port}`
	folder = binaryFolder('deployment')
	const database = TEST_DATABASE_URL ? await createEmptyTestDatabase(TEST_DATABASE_URL) : undefined
	dropDatabase = database?.drop
	// What an operator of a deployment with no frontend sets: no APP_URL.
	latchkey = await startBinary(folder, {
		PORT: String(port),
		PUBLIC_URL: issuer,
		APP_NAME: 'Acme',
		SMTP_URL: sink.url,
		EMAIL_VERIFICATION: 'required',
		LATCHKEY_ADMIN_EMAIL: ADMIN.email,
		LATCHKEY_ADMIN_PASSWORD: ADMIN.password,
		DATA_DIR: join(folder.folder, 'data'),
		PASSWORD_HASH_MEMORY_KIB: '1024',
		PASSWORD_HASH_TIME_COST: '1',
		// The person, the admin and the application's backend all come from 127.0.0.1 here, where in life they are
		// three addresses: one /auth budget of 10 a minute would refuse the application's token requests.
		AUTH_RATE_LIMIT_MAX: '100',
		...(database ? { DATABASE_URL: database.url, DATABASE_POOL_MAX: '4' } : {}),
	})

	// The admin registers the application (not first-party: the person is asked on /consent), through the admin API.
	const notesPort = await freePort()
	notes = `http://localhost:${notesPort}`
	const adminLogin = await fetch(`${latchkey.base}/api/auth/login`, jsonPost(ADMIN))
	expect(adminLogin.status).toBe(200)
	const { accessToken } = ((await adminLogin.json()) as { data: { accessToken: string } }).data
	const registered = await fetch(
		`${latchkey.base}/api/oauth-clients`,
		jsonPost({ name: 'Acme Notes', type: 'confidential', redirectUris: [`${notes}/callback`], scopes: ['openid', 'email', 'profile'] }, { authorization: `Bearer ${accessToken}` }),
	)
	expect(registered.status).toBe(201)
	const client = ((await registered.json()) as { data: { clientId: string; clientSecret: string } }).data
	const app = await guideApplication({ LATCHKEY_URL: issuer, NOTES_URL: notes, CLIENT_ID: client.clientId, CLIENT_SECRET: client.clientSecret })
	notesServer = Bun.serve({ port: notesPort, hostname: '127.0.0.1', fetch: app.handle })

	browser = await launchChromium()
})

afterAll(async () => {
	await browser?.close()
	await notesServer?.stop(true)
	// DEPLOYMENT_E2E_LOG=<file>: the binary's log, to see what it answered.
	if (process.env.DEPLOYMENT_E2E_LOG) await Bun.write(process.env.DEPLOYMENT_E2E_LOG, latchkey?.output() ?? '')
	if (latchkey) {
		latchkey.process.kill('SIGTERM')
		await latchkey.process.exited
	}
	await dropDatabase?.()
	await sink?.stop().catch(() => {})
	folder?.remove()
})

const shot = (page: Page, name: string) => page.screenshot({ path: join(PAGE_ARTIFACTS, `deployment-${name}.png`), fullPage: true })

describe('a deployment with no frontend of its own', () => {
	const email = `person-${Bun.randomUUIDv7().slice(-10)}@example.test`
	let first: BrowserContext
	let tab: Page
	/** What the pages' policy refused, and script errors, per tab of the walk (openPage keeps adding to each): none. */
	const refused: string[][] = []

	test('sign up on /sign-up: the page says to check the mail, and the account cannot sign in yet', async () => {
		first = await browser.newContext({ viewport: { width: 1280, height: 900 } })
		const opened = await openPage(first)
		tab = opened.page
		refused.push(opened.violations)
		await tab.goto(`${issuer}/sign-in`)
		await tab.getByRole('link', { name: 'Create an account' }).click()
		expect(new URL(tab.url()).pathname).toBe('/sign-up')
		await tab.getByLabel('Name').fill('Pat Person')
		await tab.getByLabel('Email address').fill(email)
		await tab.getByLabel('Password').fill(FIRST_PASSWORD)
		await shot(tab, '1-sign-up')
		await tab.getByRole('button', { name: 'Create account' }).click()
		// The answer is a page in place (POST /sign-up), not a redirect: wait for what it says.
		await tab.getByRole('heading', { level: 1, name: 'Check your email' }).waitFor()
		expect(await tab.textContent('main')).toContain(`We sent an email to ${email}.`)
		await shot(tab, '2-check-your-email')

		// EMAIL_VERIFICATION=required: the password alone does not sign in yet, and the page says why.
		await tab.goto(`${issuer}/sign-in`)
		await tab.getByLabel('Email address').fill(email)
		await tab.getByLabel('Password').fill(FIRST_PASSWORD)
		await tab.getByRole('button', { name: 'Sign in', exact: true }).click()
		expect(await tab.getByRole('alert').textContent()).toContain('Confirm your email address first')
	})

	test('the verification mail links to /email-verification at PUBLIC_URL, which confirms the address', async () => {
		const mail = await sink.waitFor(email, { subject: SUBJECT.verification })
		const { link } = proofOf(mail)
		expect(link).toStartWith(`${issuer}/email-verification#token=`)
		await tab.goto(link)
		// The script took the token into the form and out of the address bar; nothing is spent until "Confirm".
		await tab.getByText('Confirm that this address is yours.').waitFor()
		expect(new URL(tab.url()).hash).toBe('')
		await tab.getByRole('button', { name: 'Confirm' }).click()
		await tab.getByRole('heading', { level: 1, name: 'Your email address is confirmed' }).waitFor()
		expect(await tab.textContent('main')).toContain(`${email} is confirmed for your Acme account.`)
		await shot(tab, '3-address-confirmed')
	})

	test('sign in on /sign-in lands on /account, signed in', async () => {
		await tab.goto(`${issuer}/sign-in`)
		await tab.getByLabel('Email address').fill(email)
		await tab.getByLabel('Password').fill(FIRST_PASSWORD)
		await tab.getByRole('button', { name: 'Sign in', exact: true }).click()
		await tab.waitForURL(`${issuer}/account`)
		expect(await tab.textContent('main')).toContain(`Signed in as ${email}`)
		await shot(tab, '4-account')
	})

	test('a forgotten password: /recovery, the mail’s link to /password-reset, a new password; every session ends', async () => {
		// On another browser, signed out: "Forgot your password?" from the sign-in page.
		const second = await browser.newContext({ viewport: { width: 390, height: 844 } })
		const { page: phone, violations } = await openPage(second)
		refused.push(violations)
		await phone.goto(`${issuer}/sign-in`)
		await phone.getByRole('link', { name: 'Forgot your password?' }).click()
		expect(new URL(phone.url()).pathname).toBe('/recovery')
		await phone.getByLabel('Email address').fill(email)
		await phone.getByRole('button', { name: 'Send the email' }).click()
		await phone.getByRole('heading', { level: 1, name: 'Set a new password' }).waitFor()
		expect(await phone.textContent('main')).toContain(`If ${email} belongs to an account, we sent it an email.`)
		await shot(phone, '5-recovery-sent')

		const mail = await sink.waitFor(email, { subject: SUBJECT.recovery })
		const { link } = proofOf(mail)
		expect(link).toStartWith(`${issuer}/password-reset#token=`)
		await phone.goto(link)
		await phone.getByText('Your link is ready. Choose a new password.').waitFor()
		await phone.getByLabel('New password').fill(NEW_PASSWORD)
		await shot(phone, '6-new-password')
		await phone.getByRole('button', { name: 'Set password' }).click()
		await phone.getByRole('heading', { level: 1, name: 'Your password is set' }).waitFor()
		await shot(phone, '7-password-set')
		await second.close()

		// The first browser's session ended with the recovery: /account asks it to sign in again.
		await tab.goto(`${issuer}/account`)
		expect(new URL(tab.url()).pathname).toBe('/sign-in')
	})

	test('the old password is refused, the new one signs in', async () => {
		await tab.getByLabel('Email address').fill(email)
		await tab.getByLabel('Password').fill(FIRST_PASSWORD)
		await tab.getByRole('button', { name: 'Sign in', exact: true }).click()
		expect(await tab.getByRole('alert').textContent()).toContain('The email address or password is incorrect.')
		await tab.getByLabel('Password').fill(NEW_PASSWORD)
		await tab.getByRole('button', { name: 'Sign in', exact: true }).click()
		await tab.waitForURL(`${issuer}/account`)
		expect(await tab.textContent('main')).toContain(`Signed in as ${email}`)
	})

	test('a passkey enrolled on /account/security signs in on another browser, with no password', async () => {
		// A platform authenticator in this browser (DevTools' virtual one: resident keys, user verification).
		const cdp = await first.newCDPSession(tab)
		await cdp.send('WebAuthn.enable')
		const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
			options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
		})
		// Signed in a moment ago: recent enough to add a way in without confirming again.
		await tab.getByRole('link', { name: 'Sign-in and security' }).click()
		await tab.waitForURL(`${issuer}/account/security`)
		await tab.getByLabel('Name of the passkey').fill('Work laptop')
		await tab.getByRole('button', { name: 'Add a passkey' }).click()
		await tab.getByRole('button', { name: 'Create the passkey' }).click()
		await tab.getByRole('heading', { level: 1, name: 'Save your recovery codes' }).waitFor()
		expect(await tab.locator('ul.codes li').count()).toBe(10)
		await shot(tab, '8-passkey-recovery-codes')
		await tab.getByRole('link', { name: 'I have saved them' }).click()
		await tab.waitForURL(`${issuer}/account/security`)
		expect(await tab.textContent('main')).toContain('Work laptop')

		// Another browser, signed out, holding the same passkey (as a synced passkey would be): no password typed.
		const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId })
		expect(credentials).toHaveLength(1)
		const second = await browser.newContext({ viewport: { width: 390, height: 844 } })
		const { page: phone, violations } = await openPage(second)
		refused.push(violations)
		const phoneCdp = await second.newCDPSession(phone)
		await phoneCdp.send('WebAuthn.enable')
		const added = await phoneCdp.send('WebAuthn.addVirtualAuthenticator', {
			options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
		})
		for (const credential of credentials) await phoneCdp.send('WebAuthn.addCredential', { authenticatorId: added.authenticatorId, credential })
		await phone.goto(`${issuer}/sign-in`)
		await phone.getByRole('button', { name: 'Sign in with a passkey' }).click()
		await phone.waitForURL(`${issuer}/account`)
		expect(await phone.textContent('main')).toContain(`Signed in as ${email}`)
		await shot(phone, '9-passkey-signed-in')
		await second.close()
	})

	test('another application signs the person in through the provider: consent once, no password typed', async () => {
		const seen = navigations(tab, { [issuer]: 'latchkey', [notes]: 'notes' })
		await tab.goto(`${notes}/`)
		await tab.getByRole('link', { name: 'Sign in' }).click()
		// Signed in at Latchkey already: straight to the consent page, no sign-in form.
		await tab.waitForURL(`${issuer}/consent**`)
		expect(await tab.getByRole('heading', { level: 1 }).textContent()).toBe('Acme Notes wants to use your Acme account')
		expect(await tab.locator('ul.scopes li').allTextContents()).toEqual(['Know that it is you when you sign in', 'See your email address'])
		expect(await tab.textContent('main')).toContain(`You are signed in as ${email}.`)
		await shot(tab, '10-consent')
		await tab.getByRole('button', { name: 'Allow' }).click()
		await tab.waitForURL(`${notes}/`)
		expect(await tab.textContent('body')).toContain(`Signed in as ${email}`)
		await shot(tab, '11-application-signed-in')
		expect(seen).toContain('latchkey/oauth2/authorization')
		expect(seen).toContain('notes/callback')
		expect(seen).not.toContain('latchkey/sign-in')

		// Its "Your account" link is Latchkey's account page, where the same session is.
		await tab.getByRole('link', { name: 'Your account' }).click()
		await tab.waitForURL(`${issuer}/account`)
		expect(await tab.textContent('main')).toContain(`Signed in as ${email}`)
	})

	test('the application again, its own session gone: neither a form nor the consent, single sign-on', async () => {
		const latchkeyCookies = (await first.cookies()).filter((cookie) => cookie.name === SESSION_COOKIE)
		expect(latchkeyCookies).toHaveLength(1)
		await first.clearCookies()
		await first.addCookies(latchkeyCookies)
		const seen = navigations(tab, { [issuer]: 'latchkey', [notes]: 'notes' })
		await tab.goto(`${notes}/`)
		await tab.getByRole('link', { name: 'Sign in' }).click()
		await tab.waitForURL(`${notes}/`)
		expect(await tab.textContent('body')).toContain(`Signed in as ${email}`)
		expect(seen.filter((path) => path.startsWith('latchkey/'))).toEqual(['latchkey/oauth2/authorization'])
		await first.close()
		expect(refused.flat()).toEqual([])
		// Nothing the walk did was an error at the server (a 500 at /oauth2/token once was, behind a page that looked fine).
		expect(latchkey.output().split('\n').filter((line) => line.includes('"level":"error"'))).toEqual([])
	})
})

describe('PAGES_DIR at the binary', () => {
	test('a replaced sign-up template and a changed English text are what the binary serves', async () => {
		const pages = join(folder.folder, 'pages')
		mkdirSync(join(pages, 'templates'), { recursive: true })
		mkdirSync(join(pages, 'locales'), { recursive: true })
		const builtIn = readFileSync(join(ROOT, 'src/pages/templates/sign-up.mustache'), 'utf8')
		const terms = '<p class="terms">By creating an account you accept <a href="https://acme.example/terms">our terms</a>.</p>'
		writeFileSync(join(pages, 'templates', 'sign-up.mustache'), builtIn.replace('{{> error-summary}}\n', `{{> error-summary}}\n${terms}\n`))
		writeFileSync(join(pages, 'locales', 'en.json'), JSON.stringify({ signUp: { heading: 'Join {{appName}}', submit: 'Join' } }))
		const custom = await startBinary(folder, { PUBLIC_URL: 'http://localhost', APP_NAME: 'Acme', PAGES_DIR: pages, DATA_DIR: 'memory://' })
		try {
			const page = await (await fetch(`${custom.base}/sign-up`)).text()
			expect(page).toContain('<h1>Join Acme</h1>')
			expect(page).toContain(terms)
			expect(page).toContain('<button type="submit">Join</button>')
			// The rest of the page as built in.
			expect(page).toContain('<label for="email">Email address</label>')
		} finally {
			custom.process.kill('SIGTERM')
			await custom.process.exited
		}
	})

	test('a broken template stops the start with exit code 1 and a line naming the file and the fault', async () => {
		const pages = join(folder.folder, 'broken-pages')
		mkdirSync(join(pages, 'templates'), { recursive: true })
		writeFileSync(join(pages, 'templates', 'sign-up.mustache'), '<h1>{{t.signUp.heading}}</h1>\n{{#terms}}\n<p>Our terms</p>\n')
		const run = Bun.spawn([folder.binary], {
			cwd: folder.folder,
			env: bareEnv(folder.folder, { PAGES_DIR: pages, DATA_DIR: 'memory://' }),
			stdout: 'pipe',
			stderr: 'pipe',
		})
		expect(await run.exited).toBe(1)
		const stderr = await new Response(run.stderr as ReadableStream).text()
		expect(stderr.trim()).toBe(`latchkey: configuration: PAGES_DIR: ${join(pages, 'templates', 'sign-up.mustache')}: Unclosed section "terms" at 58`)
		// It stopped before listening.
		expect(await new Response(run.stdout as ReadableStream).text()).not.toContain('listening on')
	})
})
