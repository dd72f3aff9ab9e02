import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { AsyncLocalStorage } from 'node:async_hooks';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';

/**
 * Background processes a test starts and that must end with it. Each runs in
 * its own process group. test/support/setup-each.ts wraps every test in
 * `withTestProcesses`, which remembers the processes that test started (also
 * when tests of one file run side by side with `it.concurrent`) and kills
 * their groups with SIGKILL when the test ends, whether it passed, failed or
 * timed out. Processes started outside a test (in `beforeAll`) end after the
 * file, and every group still alive gets SIGKILL when the worker exits. A stop
 * therefore never depends on a file or folder that a cleanup may already have
 * removed, and never on another test of the same file.
 */
const running = new Set<ChildProcess>();
const currentTest = new AsyncLocalStorage<Set<ChildProcess>>();

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // the whole group is gone
  }
}

process.once('exit', () => {
  for (const child of running) killGroup(child);
});

/** spawn(), in a process group of its own, stopped with the test (or the file, outside a test) at the latest. */
export function startTestProcess(command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  const child = spawn(command, args, { ...options, detached: true });
  running.add(child);
  currentTest.getStore()?.add(child);
  return child;
}

/** Kill the process's group now and wait until the process has exited. */
export async function stopTestProcess(child: ChildProcess): Promise<void> {
  const exited =
    child.exitCode !== null || child.signalCode !== null || child.pid === undefined ? Promise.resolve() : once(child, 'exit').then(() => undefined);
  killGroup(child);
  await exited;
  running.delete(child);
}

/** Run one test; every process it started with startTestProcess is stopped when it ends, however it ends. */
export async function withTestProcesses(runTest: () => Promise<void>): Promise<void> {
  const started = new Set<ChildProcess>();
  try {
    await currentTest.run(started, runTest);
  } finally {
    await Promise.all([...started].map((child) => stopTestProcess(child)));
  }
}

/** Stop every process of this file started with startTestProcess and still running. */
export async function stopTestProcesses(): Promise<void> {
  await Promise.all([...running].map((child) => stopTestProcess(child)));
}

/** Is the process stopped (SIGSTOP)? Read from /proc (Linux). */
export function isStopped(pid: number): boolean {
  try {
    return /^\d+ \(.*\) T/s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
