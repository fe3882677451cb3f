import { TEST_OAUTH_SIGNING_KEY } from '../support/oauth-key'

/** What every bench run of the service signs and seals with: fixed, so that what one start sealed (TOTP secrets) opens after the next. */
export const BENCH_JWT_SECRET = 'latchkey-bench-signing-secret-of-more-than-32-bytes'
export const BENCH_DATA_ENCRYPTION_KEY = Buffer.alloc(32, 'latchkey-bench').toString('base64')

/**
 * The environment the bench starts the service with: an operator's few settings, nothing from the repository's
 * `.env` (the service runs in `home`, not the checkout), and every limit off — the load signs in faster than a
 * person would.
 */
export function benchServiceEnv({ home, port, databaseUrl, logLevel = 'warn' }: { home: string; port: number; databaseUrl: string; logLevel?: string }): Record<string, string> {
	return {
		PATH: process.env.PATH ?? '/usr/bin:/bin',
		HOME: home,
		NODE_ENV: 'production',
		JWT_SECRET: BENCH_JWT_SECRET,
		DATA_ENCRYPTION_KEY: BENCH_DATA_ENCRYPTION_KEY,
		OAUTH_SIGNING_KEY: TEST_OAUTH_SIGNING_KEY,
		DATABASE_URL: databaseUrl,
		DATABASE_POOL_MAX: '10',
		HOST: '127.0.0.1',
		PORT: String(port),
		WORKERS: '1',
		RATE_LIMIT_MAX: '0',
		AUTH_RATE_LIMIT_MAX: '0',
		LOCKOUT_THRESHOLD: '0',
		LOG_LEVEL: logLevel,
	}
}
