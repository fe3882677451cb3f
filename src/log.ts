import pino, { type DestinationStream, type Logger as PinoLogger } from 'pino'
import pretty from 'pino-pretty'

export type Logger = PinoLogger
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent'

/**
 * JSON lines on stdout (pretty when a person is watching a terminal).
 * Redaction is a second line of defence: nothing secret should be passed in
 * the first place, but a stray header or body never leaves in clear.
 */
export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
	const options = {
		level,
		base: undefined,
		timestamp: pino.stdTimeFunctions.isoTime,
		formatters: { level: (label: string) => ({ level: label }) },
		redact: {
			paths: [
				'password',
				'*.password',
				'currentPassword',
				'*.currentPassword',
				'token',
				'*.token',
				'accessToken',
				'refreshToken',
				'*.refreshToken',
				'authorization',
				'*.authorization',
				'headers.cookie',
			],
			censor: '[redacted]',
		},
	}
	if (destination) return pino(options, destination)
	if (process.stdout.isTTY) return pino(options, pretty({ colorize: true, sync: true }))
	return pino(options, pino.destination({ fd: 1, sync: true }))
}
