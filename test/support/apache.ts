/**
 * Apache httpd with mod_auth_openidc (Debian's `apache2` and `libapache2-mod-auth-openidc`) as a relying party
 * of Latchkey: a self-contained configuration in a folder of its own, run in the foreground as a child of the
 * test (never the system's service, never /etc/apache2). docs/guides/apache.md explains the same configuration.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir, userInfo } from 'node:os'
import { join } from 'node:path'

const MODULES = '/usr/lib/apache2/modules'
export const APACHE = '/usr/sbin/apache2'

export interface ApacheSettings {
	/** Loopback port Apache listens on; the app is http://localhost:{port}. */
	port: number
	/** Latchkey's issuer (its PUBLIC_URL). */
	issuer: string
	clientId: string
	clientSecret: string
}

/** The protected page: server-side includes echo what mod_auth_openidc put in the request's environment. */
const PROTECTED_PAGE = `<!doctype html>
<title>Internal tool</title>
<p>Signed in as <span id="email"><!--#echo var="OIDC_CLAIM_email" --></span></p>
<p>Name: <span id="name"><!--#echo var="OIDC_CLAIM_name" --></span></p>
<p>Subject: <span id="sub"><!--#echo var="OIDC_CLAIM_sub" --></span></p>
<p>Remote user: <span id="remote-user"><!--#echo var="REMOTE_USER" --></span></p>
`

const SIGNED_OUT_PAGE = `<!doctype html>
<title>Signed out</title>
<p id="signed-out">You are signed out.</p>
`

/** httpd.conf for `folder`: Apache's own files in it, /protected/ behind Latchkey, /signed-out.html open. */
export function apacheConfig(folder: string, settings: ApacheSettings): string {
	const app = `http://localhost:${settings.port}`
	// Apache refuses to serve as root; its children then run as www-data (the folder is readable to them).
	const runAs = userInfo().uid === 0 ? 'User www-data\nGroup www-data\n' : ''
	return `# Apache itself: a foreground process whose files all live in ${folder}.
ServerRoot ${folder}
ServerName localhost
Listen 127.0.0.1:${settings.port}
PidFile ${folder}/httpd.pid
DefaultRuntimeDir ${folder}/run
ErrorLog ${folder}/error.log
LogLevel warn auth_openidc:debug
${runAs}
LoadModule mpm_prefork_module ${MODULES}/mod_mpm_prefork.so
LoadModule authn_core_module ${MODULES}/mod_authn_core.so
LoadModule authz_core_module ${MODULES}/mod_authz_core.so
LoadModule authz_user_module ${MODULES}/mod_authz_user.so
LoadModule mime_module ${MODULES}/mod_mime.so
LoadModule dir_module ${MODULES}/mod_dir.so
LoadModule include_module ${MODULES}/mod_include.so
LoadModule auth_openidc_module ${MODULES}/mod_auth_openidc.so

TypesConfig /etc/mime.types
DocumentRoot ${folder}/htdocs
DirectoryIndex index.shtml index.html
<Directory ${folder}/htdocs>
    Require all granted
</Directory>

# The relying party: Latchkey's discovery document gives every endpoint and the keys.
OIDCProviderMetadataURL ${settings.issuer}/.well-known/openid-configuration
OIDCClientID ${settings.clientId}
OIDCClientSecret ${settings.clientSecret}
OIDCRedirectURI ${app}/protected/redirect_uri
OIDCCryptoPassphrase ${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64url')}
OIDCScope "openid email profile"
OIDCPKCEMethod S256
OIDCRemoteUserClaim email

<Location /protected/>
    AuthType openid-connect
    Require valid-user
    Options +Includes
    AddOutputFilter INCLUDES .shtml
</Location>
`
}

export interface RunningApache {
	base: string
	folder: string
	/** Apache's error log so far (mod_auth_openidc's debug lines among it). */
	log(): string
	stop(): Promise<void>
}

/** Writes the folder and starts `apache2 -X` (one process, in the foreground); resolves once it answers. */
export async function startApache(settings: ApacheSettings): Promise<RunningApache> {
	const folder = mkdtempSync(join(tmpdir(), 'latchkey-apache-'))
	chmodSync(folder, 0o755)
	mkdirSync(join(folder, 'run'))
	mkdirSync(join(folder, 'htdocs', 'protected'), { recursive: true })
	writeFileSync(join(folder, 'htdocs', 'protected', 'index.shtml'), PROTECTED_PAGE)
	writeFileSync(join(folder, 'htdocs', 'signed-out.html'), SIGNED_OUT_PAGE)
	const configFile = join(folder, 'httpd.conf')
	writeFileSync(configFile, apacheConfig(folder, settings), { mode: 0o600 })
	const check = Bun.spawnSync([APACHE, '-t', '-f', configFile])
	if (check.exitCode !== 0) throw new Error(`apache2 -t: ${check.stderr.toString()}`)
	const child = Bun.spawn([APACHE, '-X', '-f', configFile], { cwd: folder, stdout: 'pipe', stderr: 'pipe', env: { PATH: '/usr/sbin:/usr/bin:/bin' } })
	const base = `http://127.0.0.1:${settings.port}`
	const log = () => (existsSync(join(folder, 'error.log')) ? readFileSync(join(folder, 'error.log'), 'utf8') : '')
	const deadline = Date.now() + 20_000
	for (;;) {
		if (child.exitCode !== null) throw new Error(`apache2 exited ${child.exitCode}: ${await new Response(child.stderr as ReadableStream).text()}${log()}`)
		const answer = await fetch(`${base}/signed-out.html`).catch(() => undefined)
		if (answer?.status === 200) break
		if (Date.now() > deadline) {
			child.kill()
			throw new Error(`apache2 did not answer: ${log()}`)
		}
		await Bun.sleep(100)
	}
	return {
		base,
		folder,
		log,
		async stop() {
			child.kill('SIGTERM')
			await child.exited
			rmSync(folder, { recursive: true, force: true })
		},
	}
}
