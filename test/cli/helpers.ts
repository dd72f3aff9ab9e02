import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startTestProcess, stopTestProcess } from '../support/processes.js';

export const CLI = fileURLToPath(new URL('../../dist/cli/main.cjs', import.meta.url));

/** A time limit for one CLI run that fits a loaded machine. */
const CLI_TIMEOUT_MS = 120_000;

export interface CliOptions {
  input?: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** How long the command may run before it is killed (default CLI_TIMEOUT_MS). */
  timeoutMs?: number;
}

/** Run the built CLI as a user would. */
export function runCli(args: readonly string[], options: CliOptions = {}): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [CLI, ...args], {
    encoding: 'utf8',
    input: options.input ?? '',
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    timeout: CLI_TIMEOUT_MS,
    killSignal: 'SIGKILL',
  });
}

export interface CliResult {
  readonly status: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Run the built CLI without blocking the test's worker, so that tests of one
 * file can run side by side (`it.concurrent`). The CLI runs in its own process
 * group, which ends with the test at the latest (test/support/processes.ts).
 */
export async function runCliAsync(args: readonly string[], options: CliOptions = {}): Promise<CliResult> {
  const child = startTestProcess(process.execPath, [CLI, ...args], {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk));
  child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
  child.stdin?.end(options.input ?? '');
  const closed = new Promise<{ status: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (status, signal) => resolve({ status, signal }));
  });
  const timer = setTimeout(() => void stopTestProcess(child), options.timeoutMs ?? CLI_TIMEOUT_MS);
  try {
    const { status, signal } = await closed;
    return { status, signal, stdout: Buffer.concat(stdout).toString('utf8'), stderr: Buffer.concat(stderr).toString('utf8') };
  } finally {
    clearTimeout(timer);
    await stopTestProcess(child);
  }
}
