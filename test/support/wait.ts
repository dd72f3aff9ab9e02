import { readdirSync, readFileSync } from 'node:fs';

/**
 * Waiting for an event in a test, with a bound that fits a loaded machine. The
 * bound is never an expected duration: it only turns a hang into a message
 * that names what did not happen.
 */

/** Below the suite's test limit (vitest.config.ts, 300 s), so that a hang is named before the test is stopped. */
export const WAIT_BOUND_MS = 240_000;

/** Resolves with `promise`, or fails naming `what` after `boundMs` (instead of a bare test timeout). */
export function within<T>(promise: Promise<T>, what: string, boundMs = WAIT_BOUND_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} (nothing after ${boundMs} ms)`)), boundMs);
  });
  return Promise.race([promise, bound]).finally(() => clearTimeout(timer));
}

/** Polls `done` (every 10 ms) until it holds, for at most `boundMs`; resolves with its last answer. */
export async function eventually(done: () => boolean | Promise<boolean>, boundMs = WAIT_BOUND_MS): Promise<boolean> {
  const deadline = Date.now() + boundMs;
  for (;;) {
    if (await done()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((wake) => setTimeout(wake, 10));
  }
}

/** Resolves once `done()` holds, or fails naming `what` after `boundMs`. */
export async function until(done: () => boolean | Promise<boolean>, what: string, boundMs = WAIT_BOUND_MS): Promise<void> {
  if (!(await eventually(done, boundMs))) throw new Error(`${what} (not within ${boundMs} ms)`);
}

/** Whether process `pid` is alive: /proc lists it and it is not a zombie waiting to be reaped (Linux). */
export function alive(pid: number | string): boolean {
  try {
    return !/^\d+ \(.*\) [ZX]/s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Live host processes (zombies do not count) whose command line contains `marker`. */
export function runningWith(marker: string): string[] {
  return readdirSync('/proc').filter((pid) => {
    if (!/^\d+$/.test(pid) || !alive(pid)) return false;
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker);
    } catch {
      return false;
    }
  });
}
