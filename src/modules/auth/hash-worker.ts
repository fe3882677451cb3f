/**
 * One argon2id worker thread (see HashingPool in password.ts). It lowers its
 * own scheduling priority first, so that when hashing and request handling
 * compete for the cores, the kernel runs the requests; when nothing else
 * wants a core, hashing still gets all of it.
 */
import { readlinkSync } from 'node:fs'
import os from 'node:os'
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

/** A stored hash Bun cannot read (malformed, an unknown algorithm) matches no password: a failed check, not a failed request. */
function verify(password: string, hash: string): boolean {
	try {
		return Bun.password.verifySync(password, hash)
	} catch {
		return false
	}
}

self.onmessage = ({ data: job }: MessageEvent<HashJob>) => {
	if (job.op === 'init') return lowerPriority(job.niceness)
	let reply: HashReply
	try {
		reply =
			job.op === 'hash'
				? { id: job.id, value: Bun.password.hashSync(job.password, { algorithm: 'argon2id', memoryCost: job.memoryCost, timeCost: job.timeCost }) }
				: { id: job.id, value: verify(job.password, job.hash) }
	} catch {
		reply = { id: job.id, failed: true }
	}
	self.postMessage(reply)
}
