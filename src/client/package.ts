/**
 * `bun run build:client`: writes the npm package @latchkey/client to dist/client
 * (`npm pack ./dist/client` makes the tarball; publishing is the operator's step).
 *
 * It holds the Eden Treaty wrapper as JavaScript and its declarations, with the
 * `Routes` type written out in full by the TypeScript compiler itself, so that a
 * frontend type-checks against nothing of the server: no Bun globals, Worker,
 * asset imports, database or logger types. `elysia` and `@elysiajs/eden` are
 * peer dependencies, at the ranges the server itself is built with.
 */
import { mkdir, rm } from 'node:fs/promises'
import { dirname, join, relative, resolve } from 'node:path'
import ts from 'typescript'
import serverPackage from '../../package.json'

const ROOT = resolve(import.meta.dir, '../..')
const ENTRY = join(ROOT, 'src/client/index.ts')
const ROUTES = join(ROOT, 'src/client/routes.ts')
const PEERS = ['elysia', '@elysiajs/eden'] as const

export const CLIENT_PACKAGE_NAME = '@latchkey/client'

export async function buildClientPackage(outDir = join(ROOT, 'dist/client')): Promise<string> {
	await rm(outDir, { recursive: true, force: true })
	await mkdir(outDir, { recursive: true })
	const program = clientProgram()
	await Bun.write(join(outDir, 'index.d.ts'), entryDeclarations(program))
	await Bun.write(join(outDir, 'routes.d.ts'), routesDeclarations(program))
	checkDeclarations(outDir)
	await bundleJavaScript(outDir)
	await Bun.write(join(outDir, 'package.json'), `${JSON.stringify(packageManifest(), null, 2)}\n`)
	await Bun.write(join(outDir, 'README.md'), PACKAGE_README)
	return outDir
}

/** The project's own compiler settings (strict, bundler resolution), emitting declarations only. */
function clientProgram(): ts.Program {
	const configPath = join(ROOT, 'tsconfig.json')
	const { config, error } = ts.readConfigFile(configPath, ts.sys.readFile)
	if (error) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, '\n'))
	const { options, fileNames } = ts.parseJsonConfigFileContent(config, ts.sys, dirname(configPath))
	// The server's ambient declarations of embedded files (SQL, WASM, scripts), which its sources import.
	const ambient = fileNames.filter((name) => name.startsWith(join(ROOT, 'src')) && name.endsWith('.d.ts'))
	const program = ts.createProgram([ENTRY, ...ambient], { ...options, noEmit: false, declaration: true, emitDeclarationOnly: true })
	const diagnostics = ts.getPreEmitDiagnostics(program)
	if (diagnostics.length > 0) throw new Error(formatDiagnostics(diagnostics))
	return program
}

/** The entry's declarations as tsc writes them; they reach the server only through `./routes`. */
function entryDeclarations(program: ts.Program): string {
	let declarations: string | undefined
	program.emit(program.getSourceFile(ENTRY), (fileName, text) => {
		if (fileName.endsWith('index.d.ts')) declarations = text
	}, undefined, true)
	if (declarations === undefined) throw new Error('tsc wrote no declarations for src/client/index.ts')
	return declarations
}

/** `Routes` resolved by the checker into one self-contained type literal. */
function routesDeclarations(program: ts.Program): string {
	const source = program.getSourceFile(ROUTES)
	const alias = source?.statements.find((statement): statement is ts.TypeAliasDeclaration => ts.isTypeAliasDeclaration(statement) && statement.name.text === 'Routes')
	if (!alias) throw new Error('src/client/routes.ts no longer declares `Routes`')
	const checker = program.getTypeChecker()
	const text = checker.typeToString(
		checker.getTypeAtLocation(alias.name),
		undefined,
		ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.InTypeAlias | ts.TypeFormatFlags.UseStructuralFallback,
	)
	// A name the checker could not inline would be a dangling reference in the package.
	if (/\bimport\(/.test(text)) throw new Error(`Routes still refers to a server module: ${text.match(/import\([^)]*\)/)?.[0]}`)
	const formatted = formatTypeScript(`export type Routes = ${text}\n`)
	return `// Written by \`bun run build:client\` from the server's route schemas.\n/** Every route under /api: its body, params, query, headers and responses by status. */\n${formatted}`
}

/**
 * Type-checks the package's own declarations as a frontend would see them (the DOM, no Bun or Node types).
 * Only ours: elysia's and eden's declarations need `skipLibCheck`, which frontends set, and which would
 * also hide a dangling name in ours.
 */
function checkDeclarations(outDir: string) {
	const program = ts.createProgram([join(outDir, 'index.d.ts')], {
		target: ts.ScriptTarget.ES2022,
		lib: ['lib.dom.d.ts', 'lib.es2022.d.ts'],
		module: ts.ModuleKind.ESNext,
		moduleResolution: ts.ModuleResolutionKind.Bundler,
		strict: true,
		types: [],
		noEmit: true,
	})
	const ours = ts.getPreEmitDiagnostics(program).filter((diagnostic) => diagnostic.file?.fileName.startsWith(outDir))
	if (ours.length > 0) throw new Error(formatDiagnostics(ours))
	// The routes alone, without the DOM: a server type the checker printed by name (@simplewebauthn's
	// PublicKeyCredentialCreationOptionsJSON, say) would otherwise resolve to the DOM's namesake.
	const routes = ts.createProgram([join(outDir, 'routes.d.ts')], { target: ts.ScriptTarget.ES2022, lib: ['lib.es2022.d.ts'], strict: true, types: [], noEmit: true })
	const dangling = ts.getPreEmitDiagnostics(routes)
	if (dangling.length > 0) throw new Error(formatDiagnostics(dangling))
}

const formatDiagnostics = (diagnostics: readonly ts.Diagnostic[]) =>
	ts.formatDiagnostics(diagnostics, { getCanonicalFileName: (name) => name, getCurrentDirectory: () => ROOT, getNewLine: () => '\n' })

/** Pretty-prints generated TypeScript (one line of 20 kB otherwise) with the compiler's printer. */
function formatTypeScript(text: string): string {
	const source = ts.createSourceFile('routes.d.ts', text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS)
	return ts.createPrinter({ newLine: ts.NewLineKind.LineFeed }).printFile(source)
}

async function bundleJavaScript(outDir: string) {
	const result = await Bun.build({
		entrypoints: [ENTRY],
		outdir: outDir,
		target: 'browser',
		format: 'esm',
		external: [...PEERS],
		naming: 'index.js',
	})
	if (!result.success) throw new AggregateError(result.logs, 'bundling the client failed')
}

function packageManifest() {
	const dependencies: Record<string, string> = serverPackage.dependencies
	const peerDependencies = Object.fromEntries(PEERS.map((name) => [name, dependencies[name]]))
	return {
		name: CLIENT_PACKAGE_NAME,
		version: serverPackage.version,
		description: 'Typed client (Eden Treaty) for the Latchkey account and authentication API',
		type: 'module',
		main: './index.js',
		types: './index.d.ts',
		exports: { '.': { types: './index.d.ts', default: './index.js' } },
		files: ['index.js', 'index.d.ts', 'routes.d.ts', 'README.md'],
		sideEffects: false,
		peerDependencies,
	}
}

const PACKAGE_README = `# @latchkey/client

The typed client of a Latchkey server's API, made with Eden Treaty from the server's own route schemas.

\`\`\`ts
import { createClient } from '@latchkey/client'

const api = createClient('https://auth.example.com')
const { data, error } = await api.api.auth.login.post({ email, password })
if (error) console.log(error.status, error.value.type, error.value.detail) // RFC 9457 problem
else if ('mfaRequired' in data.data) console.log(data.data.methods) // a second factor is owed: POST /auth/mfa
else console.log(data.data.user.email)
\`\`\`

Peer dependencies: \`elysia\` (types only) and \`@elysiajs/eden\`. The version of this package is the server's:
use the client of the server version you call. See the server's docs/frontend.md: login, passkeys, and why \`skipLibCheck\` is needed.
`

if (import.meta.main) {
	const outDir = await buildClientPackage()
	console.log(`${CLIENT_PACKAGE_NAME} written to ${outDir}; \`npm pack ./${relative(process.cwd(), outDir)}\` makes the tarball`)
}
