import { spawn } from 'node:child_process';

/**
 * Runs the agent-fix and gate commands: an argv (never a shell), in its own
 * process group, with an environment built from an allow-list (the process
 * environment is NOT inherited), a time limit, an abort signal and an output
 * cap. The LAST `maxOutputBytes` of output are kept (the tail is where a
 * failure explains itself). On timeout or abort the group gets SIGTERM, then
 * SIGKILL after a grace period; when the command exits, anything it left
 * running in its group is killed.
 */

/** Variables a repair command may see from the environment proofgate runs in. */
export const ALLOWED_ENVIRONMENT: readonly string[] = ['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'LANGUAGE', 'LC_ALL', 'LC_CTYPE', 'TERM', 'TMPDIR', 'TZ'];

/** A name that looks like it holds a credential never passes, even when allow-listed. */
const SECRET_NAME = /TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|PRIVATE|AUTH|SESSION|COOKIE/i;

/** The environment of a repair command: allow-listed variables of `source`, then `extra`. */
export function commandEnvironment(source: Readonly<Record<string, string | undefined>>, extra: Readonly<Record<string, string>> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ALLOWED_ENVIRONMENT) {
    const value = source[name];
    if (value !== undefined && !SECRET_NAME.test(name)) env[name] = value;
  }
  return { ...env, ...extra };
}

export interface CommandRequest {
  readonly argv: readonly string[];
  readonly cwd: string;
  /** The complete environment (nothing else is inherited). */
  readonly env: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly maxOutputBytes: number;
  readonly signal?: AbortSignal;
  /** Time between SIGTERM and SIGKILL (default 2000 ms). */
  readonly killGraceMs?: number;
}

export interface CommandResult {
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly timedOut: boolean;
  readonly aborted: boolean;
  /** The command could not be started. */
  readonly startError: string | null;
  /** stdout and stderr, interleaved: the last `maxOutputBytes` bytes. */
  readonly output: string;
  /** True when earlier output was dropped. */
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

export function runCommand(request: CommandRequest): Promise<CommandResult> {
  const started = performance.now();
  const [file = '', ...args] = request.argv;
  return new Promise((resolve) => {
    let chunks: Buffer[] = [];
    let kept = 0;
    let truncated = false;
    let timedOut = false;
    let aborted = false;
    let startError: string | null = null;
    let exitCode: number | null = null;
    let exitSignal: string | null = null;
    const cap = request.maxOutputBytes;
    const tailOf = (): Buffer => {
      const all = Buffer.concat(chunks);
      return all.length > cap ? all.subarray(all.length - cap) : all;
    };
    const keep = (chunk: Buffer) => {
      chunks.push(chunk);
      kept += chunk.length;
      if (kept > cap) truncated = true;
      // Compact now and then, so a chatty command costs memory of about twice the cap.
      if (kept > 2 * cap) {
        chunks = [Buffer.from(tailOf())];
        kept = chunks[0]?.length ?? 0;
      }
    };
    const child = spawn(file, args, { cwd: request.cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...request.env }, windowsHide: true });
    let killTimer: NodeJS.Timeout | undefined;
    const stop = () => {
      killGroup(child.pid, 'SIGTERM');
      killTimer ??= setTimeout(() => killGroup(child.pid, 'SIGKILL'), request.killGraceMs ?? 2000);
    };
    const timer = setTimeout(() => {
      timedOut = true;
      stop();
    }, request.timeoutMs);
    const onAbort = () => {
      aborted = true;
      stop();
    };
    if (request.signal?.aborted === true) onAbort();
    else request.signal?.addEventListener('abort', onAbort, { once: true });
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('error', (error) => {
      startError = error.message;
    });
    child.on('exit', (code, signal) => {
      exitCode = code;
      exitSignal = signal;
      killGroup(child.pid, 'SIGKILL');
    });
    child.on('close', () => {
      clearTimeout(timer);
      if (killTimer !== undefined) clearTimeout(killTimer);
      request.signal?.removeEventListener('abort', onAbort);
      resolve({
        exitCode,
        signal: exitSignal,
        timedOut,
        aborted,
        startError,
        output: tailOf().toString('utf8'),
        truncated,
        durationMs: Math.round(performance.now() - started),
      });
    });
  });
}

/** The last `maxChars` characters of `output`, for a one-paragraph reason. */
export function outputTail(output: string, maxChars = 2000): string {
  const trimmed = output.trimEnd();
  return trimmed.length <= maxChars ? trimmed : `…${trimmed.slice(trimmed.length - maxChars)}`;
}
