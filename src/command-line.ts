import { parseArgs } from 'node:util'
import type { ImportArguments } from './modules/imports/command'

/** The command line as index.ts reads it: strict, so an unknown option is a usage error (exit 2). */
export function parseCommandLine(argv: string[]) {
	return parseArgs({
		args: argv,
		allowPositionals: true,
		strict: true,
		options: {
			help: { type: 'boolean', short: 'h' },
			version: { type: 'boolean', short: 'v' },
			email: { type: 'string' },
			name: { type: 'string' },
			'password-file': { type: 'string' },
			// import and export
			from: { type: 'string' },
			'dry-run': { type: 'boolean' },
			'on-conflict': { type: 'string' },
			provider: { type: 'string', multiple: true },
			'emit-events': { type: 'boolean' },
			'hash-key': { type: 'string' },
			'salt-separator': { type: 'string' },
			rounds: { type: 'string' },
			'mem-cost': { type: 'string' },
			'with-hashes': { type: 'boolean' },
		},
	})
}

export type CommandLineOptions = ReturnType<typeof parseCommandLine>['values']

/** `latchkey import FILE …`'s options as the import command takes them (checked there). */
export function importArguments(values: CommandLineOptions, file: string): ImportArguments {
	return {
		file,
		from: values.from,
		dryRun: values['dry-run'] ?? false,
		onConflict: values['on-conflict'],
		providers: values.provider ?? [],
		emitEvents: values['emit-events'] ?? false,
		firebase: { hashKey: values['hash-key'], saltSeparator: values['salt-separator'], rounds: values.rounds, memCost: values['mem-cost'] },
	}
}
