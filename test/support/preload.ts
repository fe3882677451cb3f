import { setDefaultTimeout } from 'bun:test'

// Starting an embedded PostgreSQL or creating a database takes a few seconds on a small machine.
setDefaultTimeout(30_000)
