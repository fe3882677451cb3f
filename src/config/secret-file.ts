import { closeSync, fstatSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import type { Logger } from '../log'
import type { Config } from './env'
import { isDataKey } from './env'
import { generateRsaPem, readRsaPrivateKey } from './rsa-key'
import { generatedSecret } from './settings'

/** The folder inside DATA_DIR that holds secrets made up in development (the snapshot unpacking ignores it). */
export const KEYS_FOLDER = 'keys'

/** A secret file that cannot be read or made, or does not hold what it should: the service does not start. */
export class SecretFileError extends Error {}

export interface SecretFileSpec {
	/** The setting the file stands in for, named in messages. */
	setting: string
	/** Its name inside the folder. */
	file: string
	/** A new random value, as text. */
	generate: () => string
	/** Whether the text read back is a value this secret may have, and what that is in words. */
	check: (value: string) => boolean
	expected: string
}

export interface KeptSecret {
	value: string
	path: string
	created: boolean
	/** The file's permission bits (0o600 unless someone changed them). */
	mode: number
}

const code = (error: unknown) => (error as NodeJS.ErrnoException).code ?? 'unknown error'

/**
 * The secret kept in `folder/spec.file`, made the first time: the folder is created 0700 if missing, the
 * file 0600. Several processes may start at once on an empty folder, so a new value is written whole to a
 * temporary file of this process and hard-linked to the name; link(2) fails when the name exists, so exactly
 * one process wins and every other reads the winner's file, never a half-written one. Messages name the
 * file, never its content.
 */
export function readOrCreateSecretFile(folder: string, spec: SecretFileSpec): KeptSecret {
	const path = join(folder, spec.file)
	try {
		mkdirSync(folder, { recursive: true, mode: 0o700 })
	} catch (error) {
		throw new SecretFileError(`${spec.setting}: cannot create ${folder} to keep it in (${code(error)})`)
	}
	let created = false
	if (!exists(path, spec)) {
		const temporary = join(folder, `.${spec.file}.${process.pid}.${Bun.randomUUIDv7()}`)
		try {
			const fd = openSync(temporary, 'wx', 0o600)
			try {
				writeSync(fd, `${spec.generate()}\n`)
				fsyncSync(fd)
			} finally {
				closeSync(fd)
			}
			linkSync(temporary, path)
			created = true
		} catch (error) {
			if (code(error) !== 'EEXIST') throw new SecretFileError(`${spec.setting}: cannot write ${path} (${code(error)})`)
		} finally {
			try {
				unlinkSync(temporary)
			} catch {}
		}
	}
	return { ...read(path, spec), path, created }
}

function exists(path: string, spec: SecretFileSpec): boolean {
	try {
		closeSync(openSync(path, 'r'))
		return true
	} catch (error) {
		if (code(error) === 'ENOENT') return false
		throw new SecretFileError(`${spec.setting}: cannot read ${path} (${code(error)})`)
	}
}

function read(path: string, spec: SecretFileSpec): { value: string; mode: number } {
	let text: string
	let mode: number
	try {
		const fd = openSync(path, 'r')
		try {
			const stat = fstatSync(fd)
			if (!stat.isFile()) throw Object.assign(new Error(), { code: 'not a file' })
			mode = stat.mode
			text = readFileSync(fd, 'utf8')
		} finally {
			closeSync(fd)
		}
	} catch (error) {
		throw new SecretFileError(`${spec.setting}: cannot read ${path} (${code(error)})`)
	}
	const value = text.trim()
	if (!spec.check(value))
		throw new SecretFileError(
			`${spec.setting}: ${path} is damaged (expected ${spec.expected}); restore it, or set ${spec.setting}, or delete the file to make a new one (what the old one signed or sealed is then lost)`,
		)
	return { value, mode: mode & 0o777 }
}

const random = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes)))

/** JWT_SECRET as made in development: 48 random bytes, base64url. */
export const JWT_SECRET_FILE: SecretFileSpec = {
	setting: 'JWT_SECRET',
	file: 'jwt-secret',
	generate: () => random(48).toString('base64url'),
	check: (value) => /^[A-Za-z0-9_-]{43,}$/.test(value),
	expected: 'at least 32 bytes in base64url',
}

/** DATA_ENCRYPTION_KEY as made in development: 32 random bytes, base64. */
export const DATA_ENCRYPTION_KEY_FILE: SecretFileSpec = {
	setting: 'DATA_ENCRYPTION_KEY',
	file: 'data-encryption-key',
	generate: () => random(32).toString('base64'),
	check: isDataKey,
	expected: '32 bytes in base64',
}

/** OAUTH_SIGNING_KEY as made in development: an RSA 2048 private key, PKCS#8 PEM. */
export const OAUTH_SIGNING_KEY_KEPT: SecretFileSpec = {
	setting: 'OAUTH_SIGNING_KEY',
	file: 'oauth-signing-key',
	generate: generateRsaPem,
	check: (value) => 'key' in readRsaPrivateKey(value),
	expected: 'an RSA private key of at least 2048 bits in PEM',
}

/**
 * Development only: the secrets the environment leaves unset, read from DATA_DIR/keys or made there once,
 * so that a restart keeps sessions, TOTP factors, webhook secrets and the ID tokens' key (OAUTH_SIGNING_KEY).
 * The environment always wins; production requires each from it (the config refuses to start without them)
 * and never writes them. With DATA_DIR=memory:// nothing is kept: each process makes its own, as the
 * database is its own.
 */
export function keepDevelopmentSecrets(config: Config, log: Logger): Config {
	if (config.production || config.dataDir.startsWith('memory://')) return config
	let settings = config.settings
	const folder = join(config.dataDir, KEYS_FOLDER)
	const keep = (spec: SecretFileSpec) => {
		const kept = readOrCreateSecretFile(folder, spec)
		settings = generatedSecret(settings, spec.setting, `generated in development, kept in DATA_DIR (${join(KEYS_FOLDER, spec.file)})`)
		const fields = { setting: spec.setting, file: kept.path }
		if (kept.created)
			log.warn(fields, `${spec.setting} is not set: generated one and kept it in ${kept.path} (development only; production requires ${spec.setting})`)
		else log.info(fields, `${spec.setting} is not set: read it from ${kept.path}`)
		// Refusing would stop a development server over a umask or a mounted volume; the log says how to fix it.
		if (kept.mode & 0o077)
			log.warn(
				{ ...fields, mode: kept.mode.toString(8).padStart(4, '0') },
				`${spec.setting}: ${kept.path} can be read or changed by other users; chmod 600 it`,
			)
		return kept.value
	}
	const jwtSecret = config.jwt.algorithm === 'HS256' && config.jwt.secret === undefined ? keep(JWT_SECRET_FILE) : config.jwt.secret
	const dataKey = config.dataKeys.current ?? keep(DATA_ENCRYPTION_KEY_FILE)
	const { signingKey } = config.oauth
	const oauthKey = signingKey.pem === undefined && signingKey.file === undefined ? { pem: keep(OAUTH_SIGNING_KEY_KEPT), file: undefined } : signingKey
	return {
		...config,
		jwt: { ...config.jwt, secret: jwtSecret },
		dataKeys: { ...config.dataKeys, current: dataKey },
		oauth: { ...config.oauth, signingKey: oauthKey },
		settings,
	}
}
