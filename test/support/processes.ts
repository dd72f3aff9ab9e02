import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { once } from 'node:events';

/**
 * Background processes a test starts and that must end with it. Each runs in
 * its own process group; after every test (test/support/setup-each.ts runs
 * `stopTestProcesses` in an afterEach hook, whether the test passed, failed
 * or timed out) and when the worker exits, every group still alive gets
 * SIGKILL. A stop therefore never depends on a file or folder that a cleanup
 * may already have removed.
 */
const running = new Set<ChildProcess>();

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

/** spawn(), in a process group of its own, stopped with the test at the latest. */
export function startTestProcess(command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  const child = spawn(command, args, { ...options, detached: true });
  running.add(child);
  return child;
}

/** Kill the process's group now and wait until the process has exited. */
export async function stopTestProcess(child: ChildProcess): Promise<void> {
  const exited = child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : once(child, 'exit').then(() => undefined);
  killGroup(child);
  await exited;
  running.delete(child);
}

/** Stop every process a test started with startTestProcess and left running. */
export async function stopTestProcesses(): Promise<void> {
  await Promise.all([...running].map((child) => stopTestProcess(child)));
}
