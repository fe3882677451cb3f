/**
 * Writes the OpenAPI document the app serves to a file, for the linter in
 * .ci/run: `bun test/support/openapi-document.ts /tmp/openapi.json`.
 */
import { startTestApp } from './app'

const target = process.argv[2]
if (!target) throw new Error('usage: bun test/support/openapi-document.ts <file>')
const t = await startTestApp({ LOG_LEVEL: 'warn' })
const response = await t.app.handle(new Request('http://localhost/api/docs/json'))
if (response.status !== 200) throw new Error(`GET /api/docs/json answered ${response.status}`)
await Bun.write(target, JSON.stringify(await response.json(), null, 2))
await t.close()
process.exit(0)
