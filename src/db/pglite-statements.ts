import { messages as protocolMessages, parse, protocol, type PGlite, type QueryOptions, type Results } from '@electric-sql/pglite'

type BackendMessage = protocolMessages.BackendMessage

/** What Drizzle's PGlite driver asks of its client: queries, and queries inside a transaction. */
export interface PgliteQueries {
	query<T>(text: string, params?: unknown[], options?: QueryOptions): Promise<Results<T>>
	transaction<T>(run: (tx: Pick<PgliteQueries, 'query'>) => Promise<T>): Promise<T>
}

/** Named statements kept per handle, the least recently used closed beyond it (each holds its parse tree and plans). */
const STATEMENTS_KEPT = 200
/** Names unique in the process: a database can outlive a handle over it (the tests lend one to several in turn). */
let named = 0

type Step = (message: Uint8Array) => Promise<BackendMessage[]>

/**
 * A named statement the database no longer has (`deallocate all`, `discard all`: 26000), or whose result columns a
 * change of the schema altered under it (0A000). Nothing in Latchkey does either while it runs; an operator's SQL could.
 */
const isStale = (error: unknown) =>
	error instanceof protocolMessages.DatabaseError && (error.code === '26000' || (error.code === '0A000' && error.message.startsWith('cached plan')))

/**
 * PGlite's own `query()` sends each statement unnamed: PostgreSQL parses and plans it again at every call. On the
 * embedded database that was half of the database's share of a request (a sign-up and its login: 14.6 ms inside
 * PGlite over 128 protocol steps, 6.9 ms of it parsing and planning). Drizzle writes the same SQL text for the same
 * query every time, so here each text is parsed once into a named statement and afterwards only bound and run;
 * PostgreSQL also keeps a generic plan for it once that plan is as good as a fresh one. The same protocol steps PGlite
 * takes (bind, describe, execute, sync), with the same parsers and serializers, and its locks: a query outside a
 * transaction waits for the transaction in progress, as PGlite's does. PostgreSQL over the network needs none of this
 * (postgres.js prepares).
 *
 * It leans on three of PGlite's underscored methods (_checkReady, _runExclusiveTransaction, _runExclusiveQuery), which
 * its own query() uses: after an upgrade of PGlite (its version is locked in bun.lock),
 * test/db.named-statements.test.ts says whether they still behave.
 */
export function withNamedStatements(client: PGlite): PgliteQueries {
	const statements = new Map<string, { name: string; paramTypes: number[] }>()

	/** The statement for `text`, parsed now if it is new (its messages added to `messages`), as the most recently used. */
	async function statementFor(text: string, options: QueryOptions | undefined, messages: BackendMessage[], step: Step) {
		const kept = statements.get(text)
		if (kept) {
			statements.delete(text)
			statements.set(text, kept)
			return kept
		}
		const name = `latchkey_statement_${++named}`
		messages.push(...(await step(protocol.serialize.parse({ name, text, types: options?.paramTypes }))))
		const statement = { name, paramTypes: parse.parseDescribeStatementResults(await step(protocol.serialize.describe({ type: 'S', name }))) }
		statements.set(text, statement)
		if (statements.size > STATEMENTS_KEPT) {
			const [oldestText, oldest] = statements.entries().next().value!
			statements.delete(oldestText)
			messages.push(...(await step(protocol.serialize.close({ type: 'S', name: oldest.name }))))
		}
		return statement
	}

	async function run<T>(text: string, params: unknown[], options: QueryOptions | undefined, inTransaction: boolean): Promise<Results<T>> {
		return client._runExclusiveQuery(async () => {
			// The steps go to the database this query started on, to the end (a handle the tests revoke meanwhile included).
			const execProtocolStream = client.execProtocolStream.bind(client)
			const step: Step = (message) => execProtocolStream(message, { syncToFs: false })
			const messages: BackendMessage[] = []
			try {
				const statement = await statementFor(text, options, messages, step)
				const values = params.map((value, i) => {
					if (value === null || value === undefined) return null
					const type = statement.paramTypes[i] as number
					const serializer = options?.serializers?.[type] ?? client.serializers[type]
					return serializer ? serializer(value) : String(value)
				})
				messages.push(
					...(await step(protocol.serialize.bind({ statement: statement.name, values }))),
					...(await step(protocol.serialize.describe({ type: 'P' }))),
					...(await step(protocol.serialize.execute({}))),
				)
			} catch (error) {
				// Gone or no longer valid in the database: parsed again next time instead of failing at every call. One gone
				// means all were (`deallocate all`, `discard all`): all are forgotten, so that each fails at most once.
				if (isStale(error)) {
					if ((error as protocolMessages.DatabaseError).code === '26000') statements.clear()
					else statements.delete(text)
				}
				// As PGlite's own query: the statement and its parameters ride on the error (never logged: http/problem.ts
				// describeError keeps only its name, code, message and frames).
				if (error instanceof protocolMessages.DatabaseError) Object.assign(error, { query: text, params, queryOptions: options })
				throw error
			} finally {
				messages.push(...(await step(protocol.serialize.sync())))
			}
			if (!inTransaction) await client.syncToFs()
			return parse.parseResults(messages, client.parsers, options)[0] as Results<T>
		})
	}

	// Statements without parameters go as PGlite sends them: migrations, transaction control, one-off SQL, which are
	// seldom run twice and would only crowd out the statements that are.
	return {
		query: async (text, params = [], options) => {
			if (params.length === 0) return client.query(text, params, options)
			await client._checkReady()
			return client._runExclusiveTransaction(async () => {
				try {
					return await run(text, params, options, false)
				} catch (error) {
					// Outside a transaction nothing was done yet: once more, parsed anew. Inside one, the transaction has
					// failed with it, as it would on PostgreSQL; the next query parses anew.
					if (!isStale(error)) throw error
					return run(text, params, options, false)
				}
			})
		},
		transaction: (body) =>
			client.transaction((tx) =>
				body({
					query: (text, params = [], options) => {
						if (params.length === 0 || tx.closed) return tx.query(text, params, options)
						return run(text, params, options, true)
					},
				}),
			),
	}
}
