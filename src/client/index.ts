import { treaty } from '@elysiajs/eden'
import type { App } from './app'

/**
 * A typed client for Latchkey, for frontends and other services:
 *
 *   const api = createClient('https://auth.example.com')
 *   const { data, error } = await api.api.auth.login.post({ email, password })
 *
 * Types come from the server's route schemas; nothing is generated.
 */
export const createClient = (baseUrl: string, options?: Parameters<typeof treaty<App>>[1]) => treaty<App>(baseUrl, options)

export type LatchkeyClient = ReturnType<typeof createClient>
export type { App }
