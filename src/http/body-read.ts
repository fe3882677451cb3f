/*
 * The bytes of a request's body as the parse hook (security.ts) read them. The body itself is spent by then, and
 * a hook that runs after parsing (the rate limits' per-client key) reads them here. Its own module, as both sides
 * import it and neither may import the other (problem.ts → rate-limit.ts → security.ts → problem.ts).
 */

/** The bodies the parse hook read, by request (gone with the request). */
const bodiesRead = new WeakMap<Request, ArrayBuffer>()

export const keepBodyRead = (request: Request, bytes: ArrayBuffer) => void bodiesRead.set(request, bytes)

export const bodyRead = (request: Request): ArrayBuffer | undefined => bodiesRead.get(request)
