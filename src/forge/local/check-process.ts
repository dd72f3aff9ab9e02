import { spawn } from 'node:child_process';
import { TOOLCHAIN_ENV, allowListedEnv } from '../../core/index.js';

/**
 * Run one check command in its own process group: a shell command line through
 * `/bin/sh -c`, or an argv array without a shell. Output (stdout and stderr,
 * interleaved) is kept up to a cap. On timeout the whole group gets SIGTERM,
 * then SIGKILL after a grace period; when the command exits, whatever it left
 * running in its group is killed too.
 */

export interface CheckProcessRequest {
  readonly command: string | readonly string[];
  readonly cwd: string;
  readonly timeoutMs: number;
  readonly outputCapBytes: number;
  readonly env?: Readonly<Record<string, string>>;
  /** Time between SIGTERM and SIGKILL on timeout (default 2000 ms). */
  readonly killGraceMs?: number;
}

export interface CheckProcessResult {
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly timedOut: boolean;
  /** The command could not be started (spawn failed). */
  readonly startError: string | null;
  readonly output: Buffer;
  readonly truncated: boolean;
  readonly durationMs: number;
}

function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // The group is already gone.
  }
}

export function runCheckProcess(request: CheckProcessRequest): Promise<CheckProcessResult> {
  const started = performance.now();
  const [file, args] = typeof request.command === 'string' ? ['/bin/sh', ['-c', request.command]] : [request.command[0] ?? '', request.command.slice(1)];
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let kept = 0;
    let truncated = false;
    let timedOut = false;
    let startError: string | null = null;
    let exitCode: number | null = null;
    let exitSignal: string | null = null;
    const keep = (chunk: Buffer) => {
      if (kept >= request.outputCapBytes) {
        truncated = true;
        return;
      }
      const room = request.outputCapBytes - kept;
      const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
      if (part.length < chunk.length) truncated = true;
      chunks.push(part);
      kept += part.length;
    };
    const child = spawn(file, args, {
      cwd: request.cwd,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: allowListedEnv(process.env, TOOLCHAIN_ENV, request.env),
      windowsHide: true,
    });
    let killTimer: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child.pid, 'SIGTERM');
      killTimer = setTimeout(() => killGroup(child.pid, 'SIGKILL'), request.killGraceMs ?? 2000);
    }, request.timeoutMs);
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('error', (error) => {
      startError = error.message;
    });
    child.on('exit', (code, signal) => {
      exitCode = code;
      exitSignal = signal;
      // Nothing a check started may outlive it.
      killGroup(child.pid, 'SIGKILL');
    });
    child.on('close', () => {
      clearTimeout(timer);
      if (killTimer !== undefined) clearTimeout(killTimer);
      resolve({
        exitCode,
        signal: exitSignal,
        timedOut,
        startError,
        output: Buffer.concat(chunks),
        truncated,
        durationMs: Math.round(performance.now() - started),
      });
    });
  });
}
