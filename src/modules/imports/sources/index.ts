import type { ImportSource, SourceName } from '../model'
import { readLatchkey } from './latchkey'

/**
 * The reader of each service's export (`latchkey import --from NAME`): one object, a source a line. A source
 * missing here is refused by the command with a clear message.
 */
export const SOURCE_READERS: { readonly [name in SourceName]?: ImportSource } = {
	latchkey: readLatchkey,
}
