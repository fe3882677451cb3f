/**
 * The shipped artifact for end-to-end tests: `dist/latchkey` (built when
 * missing), copied alone into an empty folder and run with a bare
 * environment, as an operator would run it.
 */
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import http from 'node:http'
import { join } from 'node:path'

const BUILT = join(import.meta.dir, '..', '..', 'dist', 'latchkey')

export interface BinaryFolder {
	folder: string
	binary: string
	remove(): void
}

/** A fresh folder holding only a copy of the binary. */
export function binaryFolder(label = 'bin'): BinaryFolder {
	if (!existsSync(BUILT)) {
		const build = Bun.spawnSync(['bun', 'run', 'build'], { cwd: join(import.meta.dir, '..', '..') })
		if (build.exitCode !== 0) throw new Error(`build failed: ${build.stderr.toString()}`)
	}
	const folder = mkdtempSync(join(tmpdir(), `latchkey-${label}-`))
	const binary = join(folder, 'latchkey')
	copyFileSync(BUILT, binary)
	Bun.spawnSync(['chmod', '+x', binary])
	return { folder, binary, remove: () => rmSync(folder, { recursive: true, force: true }) }
}

/** Only what an operator would set: no PATH to Bun, nothing inherited. */
export const bareEnv = (folder: string, extra: Record<string, string>) => ({
	HOME: folder,
	PORT: '0',
	HOST: '127.0.0.1',
	LOG_LEVEL: 'info',
	...extra,
})

export interface RunningBinary {
	base: string
	process: ReturnType<typeof Bun.spawn>
	/** Everything written to stdout so far. */
	output: () => string
}

/** Starts the binary and resolves once it logs its port (after migrations and key loading). */
export function startBinary(at: BinaryFolder, env: Record<string, string>, cwd = at.folder): Promise<RunningBinary> {
	return startProcess([at.binary], cwd, bareEnv(at.folder, env), 'the binary')
}

/** Starts `argv` (the binary, or `bun src/index.ts`) and resolves once it logs its port; the whole environment is `env`. */
export async function startProcess(argv: string[], cwd: string, env: Record<string, string>, what = argv.join(' ')): Promise<RunningBinary> {
	const child = Bun.spawn(argv, { cwd, env, stdout: 'pipe', stderr: 'pipe' })
	let output = ''
	const decoder = new TextDecoder()
	const reader = (child.stdout as ReadableStream<Uint8Array>).getReader()
	const deadline = Date.now() + 60_000
	while (Date.now() < deadline) {
		const { value, done } = await reader.read()
		if (done) break
		output += decoder.decode(value)
		// The listening line's port: the SMTP transport's line, logged before it, names a port too.
		const match = /"port":(\d+),"msg":"listening on /.exec(output)
		if (match) {
			void (async () => {
				for (;;) {
					const next = await reader.read()
					if (next.done) break
					output += decoder.decode(next.value)
				}
			})()
			return { base: `http://127.0.0.1:${match[1]}`, process: child, output: () => output }
		}
	}
	child.kill()
	throw new Error(`${what} did not start: ${output}${await new Response(child.stderr as ReadableStream).text()}`)
}

export const jsonPost = (body: unknown, headers: Record<string, string> = {}) => ({
	method: 'POST',
	headers: { 'content-type': 'application/json', ...headers },
	body: JSON.stringify(body),
})

const run = 1 + Math.floor(Math.random() * 250)
let next = 1
/** A loopback address no other client of this run (or, very likely, of another run) uses. */
export const client = () => `127.${run}.${Math.floor(next / 250)}.${(next++ % 250) + 1}`

export interface Answer {
	status: number
	headers: http.IncomingHttpHeaders
	body: string
}

/** One HTTP request whose socket is bound to `from`: the service's peer is that address. */
export function requestFrom(
	base: string,
	from: string,
	method: string,
	path: string,
	{ json, form, headers = {} }: { json?: unknown; form?: Record<string, string>; headers?: Record<string, string> } = {},
): Promise<Answer> {
	const url = new URL(path, base)
	const body = form !== undefined ? new URLSearchParams(form).toString() : json === undefined ? undefined : JSON.stringify(json)
	if (form !== undefined) headers = { 'content-type': 'application/x-www-form-urlencoded', ...headers }
	return new Promise((resolve, reject) => {
		const outgoing = http.request(
			{
				host: url.hostname,
				port: url.port,
				path: url.pathname + url.search,
				method,
				localAddress: from,
				agent: false,
				headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
			},
			(incoming) => {
				let text = ''
				incoming.setEncoding('utf8')
				incoming.on('data', (chunk: string) => (text += chunk))
				incoming.on('end', () => resolve({ status: incoming.statusCode ?? 0, headers: incoming.headers, body: text }))
			},
		)
		outgoing.on('error', reject)
		outgoing.end(body)
	})
}
