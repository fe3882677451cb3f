#!/usr/bin/env bun
/**
 * The guides stay navigable: every relative link in README.md and docs/ (outside code) leads to a file
 * of this repository and, with a #fragment, to a heading of that file, as GitHub names headings; and
 * every page under docs/ can be reached from docs/README.md. Prints one line per problem; exit 1 if any.
 *
 *   bun .ci/check-doc-links.ts
 */
import { existsSync, readdirSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'

const ROOT = resolve(import.meta.dir, '..')

const pagesUnder = (dir: string): string[] =>
	readdirSync(dir).flatMap((name) => {
		const path = join(dir, name)
		return statSync(path).isDirectory() ? pagesUnder(path) : name.endsWith('.md') ? [path] : []
	})

const pages = [join(ROOT, 'README.md'), ...pagesUnder(join(ROOT, 'docs'))]

/** The text outside fenced code blocks and inline code, where links are links. */
const prose = (text: string) => text.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '')

/** GitHub's anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchorsOf(text: string): Set<string> {
	const seen = new Map<string, number>()
	const anchors = new Set<string>()
	for (const [, heading] of prose(text.replace(/`/g, '')).matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
		const base = (heading ?? '')
			.replace(/<[^>]+>/g, '')
			.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
			.toLowerCase()
			.replace(/[^\p{L}\p{N}\s_-]/gu, '')
			.replace(/\s/g, '-')
		const count = seen.get(base) ?? 0
		seen.set(base, count + 1)
		anchors.add(count === 0 ? base : `${base}-${count}`)
	}
	return anchors
}

const texts = new Map<string, string>()
const read = async (path: string) => texts.get(path) ?? texts.set(path, await Bun.file(path).text()).get(path)!

const problems: string[] = []
const linksFrom = new Map<string, string[]>()
for (const page of pages) {
	const text = await read(page)
	const targets: string[] = []
	for (const [, target] of prose(text).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
		if (!target || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue
		const [pathPart = '', fragment] = target.split('#', 2)
		const file = pathPart === '' ? page : resolve(dirname(page), decodeURIComponent(pathPart))
		const where = `${relative(ROOT, page)}: (${target})`
		if (relative(ROOT, file).startsWith('..')) continue // outside the repository: not ours to check
		if (!existsSync(file)) {
			problems.push(`${where} leads to no file`)
			continue
		}
		targets.push(file)
		if (fragment && file.endsWith('.md') && !anchorsOf(await read(file)).has(fragment))
			problems.push(`${where} names no heading of ${relative(ROOT, file)}`)
	}
	linksFrom.set(page, targets)
}

const reached = new Set<string>()
const queue = [join(ROOT, 'docs', 'README.md')]
while (queue.length > 0) {
	const page = queue.pop()!
	if (reached.has(page)) continue
	reached.add(page)
	queue.push(...(linksFrom.get(page) ?? []).filter((file) => file.endsWith('.md')))
}
for (const page of pages)
	if (page.startsWith(join(ROOT, 'docs')) && !reached.has(page)) problems.push(`${relative(ROOT, page)}: not reachable from docs/README.md`)

for (const problem of problems) console.error(problem)
console.log(`${pages.length} pages, ${[...linksFrom.values()].flat().length} relative links: ${problems.length === 0 ? 'all lead somewhere' : `${problems.length} problems`}`)
process.exit(problems.length === 0 ? 0 : 1)
