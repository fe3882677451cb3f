/**
 * Memory and CPU of a process tree, read from /proc (Linux only). A tree,
 * because with WORKERS > 1 the binary is a supervisor plus one child per worker.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'

const CLOCK_TICKS = 100 // USER_HZ on every Linux the bench targets

const read = (path: string) => {
	try {
		return readFileSync(path, 'utf8')
	} catch {
		return undefined
	}
}

/** The pid and all its descendants still alive. */
export function processTree(pid: number): number[] {
	const children = (read(`/proc/${pid}/task/${pid}/children`) ?? '').trim().split(/\s+/).filter(Boolean).map(Number)
	return [pid, ...children.flatMap(processTree)]
}

/** A `VmRSS:`-style line of /proc/<pid>/status, in KiB. */
function statusKiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
	const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(read(`/proc/${pid}/status`) ?? '')
	return match ? Number(match[1]) : 0
}

export const rssMiB = (pid: number) => processTree(pid).reduce((sum, p) => sum + statusKiB(p, 'VmRSS'), 0) / 1024

/** User + system CPU seconds of the tree (exited children are not counted). */
export function cpuSeconds(pid: number): number {
	return processTree(pid).reduce((sum, p) => {
		// Fields after the command name, which may itself hold spaces: utime is the 14th field overall.
		const stat = read(`/proc/${p}/stat`) ?? ''
		const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
		return sum + (Number(fields[11] ?? 0) + Number(fields[12] ?? 0)) / CLOCK_TICKS
	}, 0)
}

/** Busy and total jiffies of the whole machine, to tell how loaded it was (it may be shared). */
export function machineCpu(): { busy: number; total: number } {
	const line = (read('/proc/stat') ?? '').split('\n')[0] ?? ''
	const values = line.trim().split(/\s+/).slice(1).map(Number)
	const total = values.reduce((a, b) => a + b, 0)
	const idle = (values[3] ?? 0) + (values[4] ?? 0)
	return { busy: total - idle, total }
}

/**
 * Watches a process tree during one scenario: samples VmRSS every 100 ms and,
 * where the kernel lets us reset it (`clear_refs` = 5), also reads the exact
 * high-water mark VmHWM, which catches peaks between samples.
 */
export class RssWatch {
	private peakKiB = 0
	private readonly timer: Timer
	private readonly hwmReset: boolean
	private readonly cpuStart: number
	private readonly machineStart = machineCpu()
	private readonly started = performance.now()

	constructor(private readonly pid: number) {
		this.hwmReset = processTree(pid).every((p) => {
			try {
				writeFileSync(`/proc/${p}/clear_refs`, '5')
				return true
			} catch {
				return false
			}
		})
		this.cpuStart = cpuSeconds(pid)
		this.sample()
		this.timer = setInterval(() => this.sample(), 100)
	}

	private sample() {
		const kib = processTree(this.pid).reduce((sum, p) => sum + statusKiB(p, 'VmRSS'), 0)
		this.peakKiB = Math.max(this.peakKiB, kib)
	}

	/** Peak RSS (MiB), CPU cores the tree used on average, and how busy the whole machine was (0–1). */
	stop(): { peakRssMiB: number; serviceCores: number; machineBusy: number } {
		clearInterval(this.timer)
		this.sample()
		const tree = processTree(this.pid)
		// Summed per-process peaks can only overstate a multi-process peak, so the sampled sum is used there.
		const hwm = this.hwmReset && tree.length === 1 ? statusKiB(this.pid, 'VmHWM') : 0
		const seconds = (performance.now() - this.started) / 1000
		const machine = machineCpu()
		return {
			peakRssMiB: Math.max(this.peakKiB, hwm) / 1024,
			serviceCores: seconds > 0 ? (cpuSeconds(this.pid) - this.cpuStart) / seconds : 0,
			machineBusy: (machine.busy - this.machineStart.busy) / Math.max(1, machine.total - this.machineStart.total),
		}
	}
}

/**
 * User + system CPU seconds of the process's own main thread (its JavaScript thread; the JIT's compiler threads, the
 * collector's helpers and the allocator's are its other tasks), and of the whole process, from /proc/<pid>/task.
 */
export function threadCpuSeconds(pid: number): { main: number; all: number } {
	let main = 0
	let all = 0
	for (const task of readdirSafe(`/proc/${pid}/task`)) {
		const stat = read(`/proc/${pid}/task/${task}/stat`) ?? ''
		const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
		const seconds = (Number(fields[11] ?? 0) + Number(fields[12] ?? 0)) / CLOCK_TICKS
		all += seconds
		if (task === String(pid)) main = seconds
	}
	return { main, all }
}

function readdirSafe(path: string): string[] {
	try {
		return readdirSync(path)
	} catch {
		return []
	}
}
