import { describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { EnvSchema } from '../src/config/env'

// docs/configuration.md is where an operator looks a setting up: it must name every one the schema reads, with its default.
const page = await Bun.file(join(import.meta.dir, '..', 'docs', 'configuration.md')).text()
const rows = new Map(
	page
		.split('\n')
		.map((line) => /^\| `([A-Z0-9_<>]+)` \| (.*?) \| .* \|$/.exec(line))
		.filter((match) => match !== null)
		.map((match) => [match[1] as string, match[2] as string]),
)

describe('docs/configuration.md', () => {
	test('has a row for every setting of the schema, and none for a setting it does not read', () => {
		const settings = Object.keys(EnvSchema.properties).sort()
		const documented = [...rows.keys()].filter((name) => !name.startsWith('OIDC_<NAME>_')).sort()
		expect(documented).toEqual(settings)
	})

	test('gives each setting the default the schema gives it', () => {
		const defaults = Object.entries(EnvSchema.properties)
			.filter(([, schema]) => schema.default !== undefined)
			.map(([name, schema]) => [name, `\`${schema.default}\``])
		expect(defaults.filter(([name, shown]) => !rows.get(name as string)?.startsWith(shown as string))).toEqual([])
	})
})
