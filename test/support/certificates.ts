import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** `openssl ca` with the least configuration it accepts: any subject, the request's extensions copied. */
const CA_CONFIG = `[ca]
default_ca = ca
[ca]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = any
copy_extensions = copy
[any]
commonName = supplied
`

/**
 * A self-signed certificate and its key (PEM) for a test server, made by `openssl` at test time (nothing
 * committed): for `host` (a DNS name or an IP address), valid now, or `expired` (January 2020 only).
 * Its own CA, so that a client told to trust it (`tls.ca`) is refused for nothing but what is asked.
 */
export function selfSignedCertificate({ host = '127.0.0.1', expired = false }: { host?: string; expired?: boolean } = {}): { key: string; cert: string } {
	const dir = mkdtempSync(join(tmpdir(), 'latchkey-cert-'))
	try {
		writeFileSync(join(dir, 'ca.cnf'), CA_CONFIG)
		writeFileSync(join(dir, 'index.txt'), '')
		writeFileSync(join(dir, 'serial'), '01\n')
		const altName = /^[\d.]+$/.test(host) ? `IP:${host}` : `DNS:${host}`
		openssl(dir, ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'key.pem', '-subj', `/CN=${host}`,
			'-addext', `subjectAltName=${altName}`, '-addext', 'basicConstraints=critical,CA:TRUE', '-out', 'request.pem'])
		const validity = expired ? ['-startdate', '20200101000000Z', '-enddate', '20200201000000Z'] : ['-days', '2']
		openssl(dir, ['ca', '-config', 'ca.cnf', '-selfsign', '-keyfile', 'key.pem', '-in', 'request.pem', ...validity, '-batch', '-notext', '-out', 'cert.pem'])
		return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') }
	} finally {
		rmSync(dir, { recursive: true, force: true })
	}
}

function openssl(cwd: string, args: string[]) {
	const result = Bun.spawnSync(['openssl', ...args], { cwd, stdout: 'pipe', stderr: 'pipe' })
	if (result.exitCode !== 0) throw new Error(`openssl ${args[0]} exited ${result.exitCode}: ${result.stderr}`)
}
