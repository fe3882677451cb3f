/**
 * The console's browser code and stylesheet, bundled by Bun for the browser (minified, one file each):
 *
 *   from source (`bun run start`, `bun test`)  bundled in memory at the first request for the console, once per
 *                                             process (a fresh clone needs no step of its own; an edit shows at
 *                                             the next start)
 *   in the binary (`bun run build`)           bundled by `bun src/console/build.ts` into
 *                                             dist/latchkey-console.json.gz, which the binary embeds
 *
 * Either way each file is kept gzipped beside its plain bytes, named by a hash of its contents (cached for a year).
 */
import { join } from 'node:path'
import { isCompiledBinary } from '../runtime'

const NAME = 'latchkey-console'
const APP = join(import.meta.dir, 'app')

export interface ConsoleAsset {
	/** `console-<hash>.js` or `.css`: the name changes whenever the contents do. */
	name: string
	contentType: string
	body: Uint8Array<ArrayBuffer>
	gzip: Uint8Array<ArrayBuffer>
}

export interface ConsoleAssets {
	script: ConsoleAsset
	styles: ConsoleAsset
}

/** The embedded form: the two files' text. */
interface Bundled {
	script: string
	styles: string
}

/** Bundles the app's sources with Bun (browser target, minified). */
export async function bundleConsole(): Promise<Bundled> {
	const result = await Bun.build({
		entrypoints: [join(APP, 'main.ts'), join(APP, 'styles.css')],
		target: 'browser',
		format: 'esm',
		minify: true,
		sourcemap: 'none',
		define: { 'process.env.NODE_ENV': '"production"' },
	})
	if (!result.success) throw new AggregateError(result.logs, 'the console could not be bundled')
	const text = async (extension: string) => {
		const output = result.outputs.find((artifact) => (artifact.kind === 'entry-point' || artifact.kind === 'asset') && artifact.path.endsWith(extension))
		if (!output) throw new Error(`the console's bundle has no ${extension} file`)
		return output.text()
	}
	return { script: await text('.js'), styles: await text('.css') }
}

const asset = (base: string, extension: string, contentType: string, text: string): ConsoleAsset => {
	const body = new TextEncoder().encode(text)
	const hash = new Bun.CryptoHasher('sha256').update(body).digest('hex').slice(0, 12)
	return { name: `${base}-${hash}.${extension}`, contentType, body, gzip: Bun.gzipSync(body, { level: 9 }) }
}

export const toAssets = ({ script, styles }: Bundled): ConsoleAssets => ({
	script: asset('console', 'js', 'text/javascript; charset=utf-8', script),
	styles: asset('console', 'css', 'text/css; charset=utf-8', styles),
})

async function embedded(): Promise<Bundled> {
	const file = Bun.embeddedFiles.find((blob) => (blob as Blob & { name: string }).name.startsWith(NAME))
	if (!file) throw new Error('the binary carries no console bundle')
	return JSON.parse(new TextDecoder().decode(Bun.gunzipSync(new Uint8Array(await file.arrayBuffer())))) as Bundled
}

let loading: Promise<ConsoleAssets> | undefined

/** The console's assets, made once per process. */
export function consoleAssets(): Promise<ConsoleAssets> {
	loading ??= (isCompiledBinary ? embedded() : bundleConsole()).then(toAssets)
	// A failed bundle is tried again at the next request rather than kept.
	loading.catch(() => (loading = undefined))
	return loading
}

/** The file `bun run build` embeds in the binary (an entry point of `bun build --compile`). */
export const buildBundlePath = () => join(import.meta.dir, '..', '..', 'dist', `${NAME}.json.gz`)
