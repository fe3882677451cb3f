import type { ImportSource, SourceName } from '../model'
import { readAuth0 } from './auth0'
import { readBetterAuth } from './better-auth'
import { readFirebase } from './firebase'
import { readKeycloak } from './keycloak'
import { readLatchkey } from './latchkey'
import { readSupabase } from './supabase'

export { SourceFileError } from './shared'

/** The reader of each service's export (`latchkey import --from NAME`): one object, a source a line. */
export const SOURCE_READERS: { readonly [name in SourceName]: ImportSource } = {
	latchkey: readLatchkey,
	supabase: readSupabase,
	auth0: readAuth0,
	keycloak: readKeycloak,
	firebase: readFirebase,
	'better-auth': readBetterAuth,
}
