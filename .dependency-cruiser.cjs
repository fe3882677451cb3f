// The floors of src/ and how modules meet (docs/architecture.md). `bun run lint:layers` checks them in CI.
// Type-only imports count like any other (tsPreCompilationDeps): a type is a dependency too.

/** Module folders, lowest first: a module imports only from those before it (and from the meeting points below). */
const MODULE_ORDER = ['auth', 'audit', 'users', 'factors', 'email', 'oidc', 'webhooks', 'oauth', 'organizations', 'imports', 'settings', 'health', 'docs']

/**
 * Where modules meet without an order: a module's model.ts (its contract: schemas and how a row is shown), the
 * audit trail every module records to, and the events outbox every change writes to.
 */
const MEETING_POINTS = ['^src/modules/[^/]+/model\\.ts$', '^src/modules/audit/service\\.ts$', '^src/modules/webhooks/outbox\\.ts$']

const LOWER_FLOORS = '^src/(config|crypto|db|jobs|mail|http)/|^src/(log|runtime)\\.ts$'

const moduleOrder = MODULE_ORDER.slice(0, -1).map((name, rank) => ({
	name: `module-order-${name}`,
	comment: `${name} sits below ${MODULE_ORDER.slice(rank + 1).join(', ')}: it reaches them only through a meeting point or an interface given in app.ts.`,
	severity: 'error',
	from: { path: `^src/modules/${name}/` },
	to: { path: `^src/modules/(${MODULE_ORDER.slice(rank + 1).join('|')})/`, pathNot: MEETING_POINTS },
}))

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
	forbidden: [
		{
			name: 'no-circular',
			comment: 'No import cycles anywhere in src/: every file can be read (and tested) after what it imports.',
			severity: 'error',
			from: { path: '^src/' },
			to: { circular: true },
		},
		{
			name: 'lower-floors-not-modules',
			comment: 'config, crypto, db, jobs, mail, http, log.ts and runtime.ts serve the modules and never import one.',
			severity: 'error',
			from: { path: LOWER_FLOORS },
			to: { path: '^src/modules/' },
		},
		{
			name: 'log-and-runtime-at-the-bottom',
			comment: 'log.ts and runtime.ts are what every floor may use; they import nothing of src/.',
			severity: 'error',
			from: { path: '^src/(log|runtime)\\.ts$' },
			to: { path: '^src/', pathNot: '^src/(log|runtime)\\.ts$' },
		},
		{
			name: 'config-is-lowest',
			comment: 'Settings are read before anything runs: config imports no other floor (log.ts and runtime.ts aside).',
			severity: 'error',
			from: { path: '^src/config/' },
			to: { path: '^src/(crypto|db|jobs|mail|http)/' },
		},
		{
			name: 'crypto-and-db-above-config',
			comment: 'crypto and db stand on config only, side by side: neither imports the other nor a floor above.',
			severity: 'error',
			from: { path: '^src/(crypto|db)/' },
			to: { path: '^src/(crypto|db|jobs|mail|http)/', pathNot: '^src/$1/' },
		},
		{
			name: 'jobs-above-db',
			comment: 'The queue stands on db (and config, crypto): it runs mail and webhooks, never imports them, nor http.',
			severity: 'error',
			from: { path: '^src/jobs/' },
			to: { path: '^src/(mail|http)/' },
		},
		{
			name: 'mail-is-a-job-kind',
			comment: 'Mail is queued as a job (jobs/queue) and run by the worker; it does not import the worker, nor http.',
			severity: 'error',
			from: { path: '^src/mail/' },
			to: { path: '^src/jobs/worker\\.ts$|^src/http/' },
		},
		{
			name: 'http-above-config-db-crypto',
			comment: 'The cross-cutting plugins stand on config, db and crypto; the queue and mail are not theirs.',
			severity: 'error',
			from: { path: '^src/http/' },
			to: { path: '^src/(jobs|mail)/' },
		},
		{
			name: 'pages-above-modules',
			comment: 'The pages stand above every module (they use services as app.ts does): no module and no lower floor imports a page.',
			severity: 'error',
			from: { path: `^src/modules/|${LOWER_FLOORS}` },
			to: { path: '^src/pages/' },
		},
		{
			name: 'console-app-calls-only-the-api',
			comment: "The console's browser code reaches the server only through the typed client (src/client): nothing the API cannot do.",
			severity: 'error',
			from: { path: '^src/console/app/' },
			to: { path: '^src/', pathNot: '^src/(console/app|client)/' },
		},
		...moduleOrder,
		{
			name: 'meeting-points-stay-light',
			comment: 'A meeting point (model.ts, audit/service.ts, webhooks/outbox.ts) imports no other module beyond its meeting points, so that meeting adds no order.',
			severity: 'error',
			from: {
				path: '^src/modules/([^/]+)/(model|service|outbox)\\.ts$',
				pathNot: ['^src/modules/(?!audit/)[^/]+/service\\.ts$', '^src/modules/(?!webhooks/)[^/]+/outbox\\.ts$'],
			},
			to: { path: '^src/modules/', pathNot: [...MEETING_POINTS, '^src/modules/$1/'] },
		},
		{
			name: 'no-unresolvable',
			comment: 'An import that resolves to nothing is a typo or a file that went away.',
			severity: 'error',
			from: {},
			to: { couldNotResolve: true },
		},
	],
	options: {
		includeOnly: '^src/',
		tsPreCompilationDeps: true,
		tsConfig: { fileName: 'tsconfig.json' },
		exclude: { path: '\\.d\\.ts$' },
		reporterOptions: { text: { highlightFocused: true } },
	},
}
