import type { App as Server } from '../app'

/**
 * The routes a client calls: everything under /api, with each route's body,
 * params, query, headers and responses by status. The server's runtime
 * (database, logger, plugins' decorations) stays out, and `bun run
 * build:client` writes this type out in full so the package needs nothing
 * of the server to type-check.
 */
export type Routes = Pick<Server['~Routes'], 'api'>
