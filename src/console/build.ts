/**
 * `bun src/console/build.ts` (run by `bun run build`): bundles the console into dist/latchkey-console.json.gz, which
 * `bun build --compile` embeds in the binary (bundle.ts reads it there), and says how large each file is.
 */
import { buildBundlePath, bundleConsole, toAssets, type ConsoleAsset } from './bundle'

const bundled = await bundleConsole()
await Bun.write(buildBundlePath(), Bun.gzipSync(new TextEncoder().encode(JSON.stringify(bundled)), { level: 9 }))
const assets = toAssets(bundled)
const size = (file: ConsoleAsset) => `${file.name} ${(file.body.byteLength / 1024).toFixed(1)} KiB, ${(file.gzip.byteLength / 1024).toFixed(1)} KiB gzipped`
console.log(`console: ${size(assets.script)}; ${size(assets.styles)}`)
