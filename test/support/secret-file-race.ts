/**
 * One contender in the race for secret files (test/config.development-keys.test.ts): once loaded, says `ready`
 * and waits for the line that starts every contender at the same moment (see `race` there), then reads or
 * creates a secret file (the JWT secret, or with `oauth` the RSA key of OAUTH_SIGNING_KEY) in each of `count`
 * folders under `root`, in order, as every other contender does at the same moment. Prints one JSON line per
 * folder: the value's digest (never the value) and whether this process made the file.
 */
import { join } from 'node:path'
import { JWT_SECRET_FILE, OAUTH_SIGNING_KEY_KEPT, readOrCreateSecretFile } from '../../src/config/secret-file'

const [root = '', count = '0', which = 'jwt'] = Bun.argv.slice(2)
const spec = which === 'oauth' ? OAUTH_SIGNING_KEY_KEPT : JWT_SECRET_FILE
console.log('ready')
for await (const _go of console) break
const lines: string[] = []
for (let i = 0; i < Number(count); i++) {
	const kept = readOrCreateSecretFile(join(root, String(i)), spec)
	lines.push(JSON.stringify({ folder: i, digest: new Bun.CryptoHasher('sha256').update(kept.value).digest('hex'), created: kept.created }))
}
console.log(lines.join('\n'))
