import { spawn, type ChildProcess } from 'node:child_process';
import { Readable } from 'node:stream';
import { killGroup } from './group.js';
import { launch, launcherWanted, type LaunchedProcess } from './launcher.js';
import { OutputCapture, type OutputCap } from './output.js';

/**
 * The one way proofgate starts a program: an argv (never a shell), in its own
 * process group, with exactly the environment the caller built (nothing is
 * inherited), a time limit, an optional abort signal and capped output.
 *
 * On timeout or abort the whole group gets SIGTERM, then SIGKILL after a grace
 * period (a grace of 0 sends SIGKILL at once). Output past a cap set to `kill`
 * kills the group at once. When the program exits, anything it left running in
 * its group is killed; output still buffered is read for at most `drainMs`, so
 * a process that escaped the group and holds the pipes cannot stall the caller.
 *
 * A plain start (no extra pipes, no handle wanted, stdin as bytes or none)
 * from a process past the launcher's resident size is made by the launcher
 * (launcher.ts), which only changes the program's parent.
 */

export type { OutputCap } from './output.js';

export interface ProcessRequest {
  /** The program and its arguments; the program is looked up on the PATH of `env`. */
  readonly argv: readonly string[];
  readonly cwd: string;
  /** The complete environment of the program: nothing else is inherited. */
  readonly env: Readonly<Record<string, string>>;
  /** Stop the group after this many milliseconds; `Infinity`: no limit (and no timer). */
  readonly timeoutMs: number;
  /** The cap on stdout (and on stderr too, when stderr is merged into it). */
  readonly output: OutputCap;
  /** `merge` (default) interleaves stderr into `output`; a cap keeps it apart in `stderr`. */
  readonly stderr?: 'merge' | OutputCap;
  /** Bytes written to the program's stdin, which is then closed, or a stream piped into it (stdin ends with it); without it stdin is empty. */
  readonly stdin?: string | Uint8Array | Readable;
  readonly signal?: AbortSignal;
  /** Time between SIGTERM and SIGKILL on timeout or abort (default 2000 ms; 0 = SIGKILL at once). */
  readonly killGraceMs?: number;
  /** How long to keep reading output after the program exited (default 1000 ms). */
  readonly drainMs?: number;
  /** Extra pipes handed to the program as fds 3, 4, ... (the jail uses them to talk to bubblewrap). */
  readonly extraPipes?: number;
  /** Called once the program was spawned, with its handle (its extra pipes are `child.stdio[3..]`). */
  readonly onSpawn?: (child: ChildProcess) => void;
}

export interface ProcessResult {
  /** The exit code, or null when the program was killed by a signal or never started. */
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly timedOut: boolean;
  readonly aborted: boolean;
  /** A cap set to `kill` was passed and the group was killed. */
  readonly overflowed: boolean;
  /** The program could not be started (spawn failed). */
  readonly startError: string | null;
  /** stdout, or stdout and stderr interleaved when stderr is merged; within the cap. */
  readonly output: Buffer;
  /** stderr when it is kept apart; empty when merged. */
  readonly stderr: Buffer;
  /** True when `output` lost bytes to its cap. */
  readonly truncated: boolean;
  readonly durationMs: number;
}

const DEFAULT_KILL_GRACE_MS = 2000;
const DEFAULT_DRAIN_MS = 5000;
/** setTimeout fires at once for longer delays, so longer limits are clamped to this. */
const MAX_TIMER_MS = 2 ** 31 - 1;

function notStarted(reason: Pick<ProcessResult, 'aborted' | 'startError'>): ProcessResult {
  const empty = Buffer.alloc(0);
  return { exitCode: null, signal: null, timedOut: false, overflowed: false, output: empty, stderr: empty, truncated: false, durationMs: 0, ...reason };
}

/**
 * Whether the process `pid` of this host is gone (signal 0 fails with ESRCH). This process, a pid that is not a
 * positive safe integer, and one that exists but is not ours to signal all count as not gone (a pid reused since is
 * taken for alive).
 */
export function processGone(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** Run one program to its end; the promise never rejects: every way it ends is in the result. */
export function runProcess(request: ProcessRequest): Promise<ProcessResult> {
  const [file, ...args] = request.argv;
  if (file === undefined || file === '') return Promise.resolve(notStarted({ aborted: false, startError: 'empty command' }));
  if (request.signal?.aborted === true) return Promise.resolve(notStarted({ aborted: true, startError: null }));
  const started = performance.now();
  const grace = request.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
  return new Promise((resolve) => {
    let timedOut = false;
    let aborted = false;
    let overflowed = false;
    let startError: string | null = null;
    let exitCode: number | null = null;
    let exitSignal: string | null = null;
    let settled = false;
    let killTimer: NodeJS.Timeout | undefined;
    let drainTimer: NodeJS.Timeout | undefined;

    const plain = (request.extraPipes ?? 0) === 0 && request.onSpawn === undefined && !(request.stdin instanceof Readable);
    const child: ChildProcess | LaunchedProcess =
      plain && launcherWanted()
        ? launch({ file, args, cwd: request.cwd, env: request.env, stdin: (request.stdin as string | Uint8Array | undefined) ?? null })
        : spawn(file, args, {
            cwd: request.cwd,
            detached: true,
            stdio: [request.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe', ...Array.from({ length: request.extraPipes ?? 0 }, () => 'pipe' as const)],
            env: { ...request.env },
            windowsHide: true,
          });
    const signalChild = (signal: NodeJS.Signals): void => ('signalGroup' in child ? child.signalGroup(signal) : killGroup(child.pid, signal));
    const stop = () => {
      if (grace <= 0) {
        signalChild('SIGKILL');
        return;
      }
      signalChild('SIGTERM');
      killTimer ??= setTimeout(() => signalChild('SIGKILL'), grace);
    };
    const onOverflow = () => {
      if (overflowed) return;
      overflowed = true;
      signalChild('SIGKILL');
    };
    const output = new OutputCapture(request.output, onOverflow);
    const stderrCap = request.stderr ?? 'merge';
    const stderr = stderrCap === 'merge' ? output : new OutputCapture(stderrCap, onOverflow);
    // No limit (an infinite timeoutMs) sets no timer, so a long-lived helper that unrefs its handles does not keep node alive.
    const timer = Number.isFinite(request.timeoutMs)
      ? setTimeout(
          () => {
            timedOut = true;
            stop();
          },
          Math.min(Math.max(request.timeoutMs, 0), MAX_TIMER_MS),
        )
      : undefined;
    const onAbort = () => {
      aborted = true;
      stop();
    };
    request.signal?.addEventListener('abort', onAbort, { once: true });

    const settle = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(killTimer);
      clearTimeout(drainTimer);
      request.signal?.removeEventListener('abort', onAbort);
      child.stdout?.destroy();
      child.stderr?.destroy();
      if ('release' in child) child.release();
      resolve({
        exitCode,
        signal: exitSignal,
        timedOut,
        aborted,
        overflowed,
        startError,
        output: output.bytes(),
        stderr: stderr === output ? Buffer.alloc(0) : stderr.bytes(),
        truncated: output.truncated,
        durationMs: Math.round(performance.now() - started),
      });
    };

    child.stdout?.on('data', (chunk: Buffer) => output.add(chunk));
    child.stderr?.on('data', (chunk: Buffer) => stderr.add(chunk));
    child.on('error', (error) => {
      startError ??= error.message;
    });
    child.on('exit', (code, signal) => {
      exitCode = code;
      exitSignal = signal;
      clearTimeout(timer);
      clearTimeout(killTimer);
      // Nothing a program started may outlive it.
      signalChild('SIGKILL');
      drainTimer = setTimeout(settle, request.drainMs ?? DEFAULT_DRAIN_MS);
    });
    child.on('close', settle);
    if (!('release' in child)) request.onSpawn?.(child);
    if (child.stdin !== null) {
      // A program that exits without reading its input must not fail the run.
      child.stdin.on('error', () => undefined);
      if (request.stdin instanceof Readable) request.stdin.pipe(child.stdin);
      else child.stdin.end(request.stdin);
    }
  });
}
