import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { startTestProcess } from './processes.js';

/** Whether the process still answers: `cat` echoes a line back unless it was killed. */
function echoes(child: ChildProcess): Promise<boolean> {
  return new Promise((resolve) => {
    child.stdout?.once('data', () => resolve(true));
    child.once('exit', () => resolve(false));
    child.stdin?.on('error', () => resolve(false));
    child.stdin?.write('ping\n');
  });
}

/** The process's end as an event: its exit signal, at once if it has already ended. */
async function ended(child: ChildProcess): Promise<NodeJS.Signals | null> {
  if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
  return child.signalCode;
}

describe.sequential('a process a test starts ends with that test', () => {
  let hung: ChildProcess | undefined;

  it.fails('(a test that times out while its process runs)', { timeout: 1_000 }, async () => {
    hung = startTestProcess('sleep', ['300'], { stdio: 'ignore' });
    await new Promise<never>(() => undefined);
  });

  it('is killed when its test timed out', async () => {
    expect(hung?.pid).toBeTypeOf('number');
    expect(await ended(hung as ChildProcess)).toBe('SIGKILL');
  });
});

describe("side by side (it.concurrent): the end of one test leaves the other test's processes alone", () => {
  let short: ChildProcess | undefined;
  let long: ChildProcess | undefined;
  let shortStarted!: () => void;
  const shortIsRunning = new Promise<void>((resolve) => (shortStarted = resolve));

  it.concurrent('a short test', async () => {
    short = startTestProcess('sleep', ['301'], { stdio: 'ignore' });
    shortStarted();
  });

  it.concurrent('a longer test', async () => {
    long = startTestProcess('cat', [], { stdio: ['pipe', 'pipe', 'ignore'] });
    await shortIsRunning;
    // The short test ended and took its process with it; this test's process still answers.
    expect(await ended(short as ChildProcess)).toBe('SIGKILL');
    expect(await echoes(long)).toBe(true);
  });

  it("and the longer test's process ended with it", async () => {
    expect(await ended(long as ChildProcess)).toBe('SIGKILL');
  });
});
