import { runProcess } from '../../host/index.js';

/** How a reviewer process ended. */
export type ProcessOutcome =
  | { readonly kind: 'exited'; readonly code: number; readonly stdout: Buffer; readonly stderr: string }
  | { readonly kind: 'signaled'; readonly signal: string; readonly stderr: string }
  | { readonly kind: 'timeout'; readonly ms: number }
  | { readonly kind: 'too-large'; readonly limit: number }
  | { readonly kind: 'spawn-error'; readonly message: string };

export interface SpawnLimits {
  readonly cwd: string;
  readonly env: Record<string, string>;
  readonly stdin: string;
  readonly timeoutMs: number;
  readonly outputLimit: number;
  readonly stderrLimit?: number;
}

/**
 * Run a reviewer program through the host process runner: its own process
 * group, `env` as its whole environment, the request on stdin. Past the
 * deadline or past `outputLimit` bytes of stdout the whole group is killed at
 * once (no grace: a reviewer has no state worth saving); stderr is kept apart
 * (its first `stderrLimit` bytes) for the failure reason.
 */
export async function runContained(argv: readonly string[], limits: SpawnLimits): Promise<ProcessOutcome> {
  const run = await runProcess({
    argv,
    cwd: limits.cwd,
    env: limits.env,
    stdin: limits.stdin,
    timeoutMs: limits.timeoutMs,
    output: { maxBytes: limits.outputLimit, keep: 'head', onOverflow: 'kill' },
    stderr: { maxBytes: limits.stderrLimit ?? 4096, keep: 'head' },
    killGraceMs: 0,
    drainMs: 2000,
  });
  const stderr = run.stderr.toString('utf8');
  if (run.startError !== null) return { kind: 'spawn-error', message: run.startError };
  if (run.timedOut) return { kind: 'timeout', ms: limits.timeoutMs };
  if (run.overflowed) return { kind: 'too-large', limit: limits.outputLimit };
  if (run.signal !== null) return { kind: 'signaled', signal: run.signal, stderr };
  return { kind: 'exited', code: run.exitCode ?? 0, stdout: run.output, stderr };
}
