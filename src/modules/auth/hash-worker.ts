/**
 * One hashing worker thread: argon2id, and the imported schemes of hash-schemes.ts (see HashingPool in password.ts). It lowers its
 * own scheduling priority first, so that when hashing and request handling
 * compete for the cores, the kernel runs the requests; when nothing else
 * wants a core, hashing still gets all of it.
 */
import { readlinkSync } from 'node:fs'
import os from 'node:os'
import { verifyStoredHash } from './hash-schemes'
import type { HashJob, HashReply } from './password'

declare const self: Worker

/** Lowers this thread's priority (Linux: each thread has its own nice value, named by /proc/thread-self). */
function lowerPriority(niceness: number) {
	if (niceness <= 0 || process.platform !== 'linux') return
	try {
		os.setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), niceness)
	} catch {
		// Hashing then competes at normal priority: slower reads under a login flood, nothing worse.
	}
}

self.onmessage = ({ data: job }: MessageEvent<HashJob>) => {
	if (job.op === 'init') return lowerPriority(job.niceness)
	let reply: HashReply
	try {
		reply =
			job.op === 'hash'
				? { id: job.id, value: Bun.password.hashSync(job.password, { algorithm: 'argon2id', memoryCost: job.memoryCost, timeCost: job.timeCost }) }
				: // A stored hash that cannot be read (malformed, unknown, too costly) matches no password: a failed check, not a failed request.
					{ id: job.id, value: verifyStoredHash(job.password, job.hash, job.caps) }
	} catch {
		reply = { id: job.id, failed: true }
	}
	self.postMessage(reply)
}
