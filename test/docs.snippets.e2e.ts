/**
 * Every TypeScript snippet of the README and the frontend guide (docs/frontend.md) type-checks as a
 * frontend developer would paste it: in a fresh folder with the packed @latchkey/client (built here),
 * @simplewebauthn/browser and openapi-fetch installed from npm, under a frontend's tsconfig (strict,
 * `lib: ["DOM", "ES2022"]`, bundler resolution, no Bun or Node types). A block fenced ```ts server is
 * server code (a webhook receiver) and is left out. Needs npm and its registry, as the package test does.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import packageJson from '../package.json'

setDefaultTimeout(300_000)

const ROOT = join(import.meta.dir, '..')
const BIN = join(ROOT, 'node_modules', '.bin')
/** The README and the frontend guide: the code a frontend developer copies. */
const DOCUMENTS = ['README.md', 'docs/frontend.md']

/** The names the snippets leave to the page they are pasted in, typed as a page would have them. */
const PLACEHOLDERS = `// The page's own names, which the snippets use without declaring them.
declare const api: import('@latchkey/client').LatchkeyClient
declare const email: string
declare const password: string
declare const newPassword: string
declare const headers: { authorization: string }
declare const qrBox: HTMLElement
declare function showError(message: string): void
declare function showMessage(message: string): void
declare function markInvalid(pointer: string, detail: string): void
declare function askForCode(): Promise<string>
declare function userPrefersPasskey(): Promise<boolean>
declare function showOnce(recoveryCodes: string[]): void
declare function offerNewMail(): void
declare function showPolicyProblems(errors: Array<{ pointer: string; detail: string }>): void
declare function goToLogin(): void
declare function askForSecondFactor(owed: { mfaToken: string; methods: string[] }): void
declare function keepTokens(tokens: { accessToken: string; refreshToken: string; expiresIn: number }): void
`

/** A frontend's settings, as the docs say them (docs/frontend.md, "TypeScript settings"). */
const tsconfig = (files: string[], skipLibCheck: boolean) => ({
	compilerOptions: { target: 'ES2022', lib: ['DOM', 'ES2022'], module: 'ESNext', moduleResolution: 'bundler', strict: true, noEmit: true, types: [], skipLibCheck },
	files,
})

interface Snippet {
	file: string
	/** Where it was found, for the failure message: `docs/frontend.md:42`. */
	at: string
	code: string
}

/** The ```ts blocks of a Markdown file, each with the line its code starts on. */
function snippetsOf(document: string): Snippet[] {
	const lines = readFileSync(join(ROOT, document), 'utf8').split('\n')
	const found: Snippet[] = []
	for (let i = 0; i < lines.length; i++) {
		if (!/^```(ts|typescript)\s*$/.test(lines[i] as string)) continue
		const start = i + 1
		let end = start
		while (end < lines.length && lines[end] !== '```') end++
		found.push({ file: `${document.replace(/[/.]/g, '-')}-${start + 1}.ts`, at: `${document}:${start + 1}`, code: lines.slice(start, end).join('\n') })
		i = end
	}
	return found
}

let frontend: string
let snippets: Snippet[]

function run(command: string[], cwd: string, { allowFailure = false } = {}) {
	const result = Bun.spawnSync(command, { cwd, stdout: 'pipe', stderr: 'pipe', env: { ...process.env, NO_UPDATE_NOTIFIER: '1', npm_config_fund: 'false', npm_config_audit: 'false' } })
	const output = `${result.stdout}${result.stderr}`
	if (result.exitCode !== 0 && !allowFailure) throw new Error(`${command.join(' ')} exited ${result.exitCode}:\n${output}`)
	return output
}

beforeAll(async () => {
	run(['bun', 'run', 'build:client'], ROOT)
	frontend = mkdtempSync(join(tmpdir(), 'latchkey-snippets-'))
	await Bun.write(join(frontend, 'package.json'), JSON.stringify({ name: 'a-frontend', private: true, type: 'module' }))
	const [packed] = JSON.parse(run(['npm', 'pack', '--json', './dist/client', '--pack-destination', frontend], ROOT)) as { filename: string }[]
	const { devDependencies } = packageJson
	run(['npm', 'install', `./${packed?.filename}`, `@simplewebauthn/browser@${devDependencies['@simplewebauthn/browser']}`, `openapi-fetch@${devDependencies['openapi-fetch']}`], frontend)
	// The generated client's types, where the docs' snippet imports them from (`./latchkey`).
	run(['bun', 'test/support/openapi-document.ts', join(frontend, 'openapi.json')], ROOT)
	run([join(BIN, 'openapi-typescript'), 'openapi.json', '--output', 'latchkey.d.ts'], frontend)

	snippets = DOCUMENTS.flatMap(snippetsOf)
	for (const snippet of snippets) await Bun.write(join(frontend, snippet.file), `${snippet.code}\n\nexport {}\n`)
	await Bun.write(join(frontend, 'placeholders.d.ts'), PLACEHOLDERS)
})

afterAll(() => {
	if (frontend) rmSync(frontend, { recursive: true, force: true })
})

describe('the snippets of the docs', () => {
	test('are found: the frontend guide’s login, TOTP, passkey and generated-client blocks', () => {
		const guide = snippets.filter((snippet) => snippet.at.startsWith('docs/frontend.md'))
		expect(guide.length).toBeGreaterThanOrEqual(7)
		expect(guide.some((snippet) => snippet.code.includes('startRegistration({ optionsJSON: options })'))).toBe(true)
		// No cast is needed between @simplewebauthn/browser and the client, in either direction.
		for (const snippet of snippets) expect(snippet.code).not.toMatch(/\bas (never|any|unknown)\b/)
	})

	test('type-check under a frontend’s strict DOM tsconfig: 0 errors', async () => {
		await Bun.write(join(frontend, 'tsconfig.json'), JSON.stringify(tsconfig(['placeholders.d.ts', ...snippets.map((snippet) => snippet.file)], true), null, 2))
		const output = run([join(BIN, 'tsc'), '-p', 'tsconfig.json'], frontend, { allowFailure: true })
		// Name each failing block by its place in the docs.
		const named = snippets.reduce((text, snippet) => text.replaceAll(snippet.file, snippet.at), output)
		expect(named.trim()).toBe('')
	})

	test('need skipLibCheck only for the declarations of elysia and its peers, never for the client’s own', async () => {
		await Bun.write(join(frontend, 'tsconfig.strict-libs.json'), JSON.stringify(tsconfig(['placeholders.d.ts', ...snippets.map((snippet) => snippet.file)], false), null, 2))
		const output = run([join(BIN, 'tsc'), '-p', 'tsconfig.strict-libs.json'], frontend, { allowFailure: true })
		const failing = new Set([...output.matchAll(/^([^\s(]+)\(\d+,\d+\): error/gm)].map((match) => match[1] as string))
		// If this fails, elysia's declarations check without it: say so in docs/frontend.md and drop the setting.
		expect(failing.size).toBeGreaterThan(0)
		for (const file of failing) expect(file).toMatch(/^node_modules\/(elysia|@elysiajs|@sinclair|exact-mirror|file-type|memoirist|cookie|@tokenizer|strtok3|token-types)\//)
	})
})
