import { runUntrusted, type JailMount, type SandboxMode } from '../../host/index.js';

/** How a reviewer process ended. */
export type ProcessOutcome =
  | { readonly kind: 'exited'; readonly code: number; readonly stdout: Buffer; readonly stderr: string }
  | { readonly kind: 'signaled'; readonly signal: string; readonly stderr: string }
  | { readonly kind: 'timeout'; readonly ms: number }
  | { readonly kind: 'too-large'; readonly limit: number }
  | { readonly kind: 'spawn-error'; readonly message: string };

export interface ReviewerRun {
  readonly argv: readonly string[];
  readonly sandbox: SandboxMode;
  /** The only writable tree (besides writable `mounts` and `cacheDir`). */
  readonly jobDir: string;
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  readonly mounts: readonly JailMount[];
  readonly cacheDir?: string;
  readonly network: boolean;
  readonly stdin: string;
  readonly timeoutMs: number;
  readonly outputLimit: number;
  readonly stderrLimit?: number;
}

/**
 * Run a reviewer program through the host's runner for untrusted code: in the
 * jail (unless the trusted config said `sandbox: none`), `env` as its whole
 * environment, the request on stdin. Past the deadline or past `outputLimit`
 * bytes of stdout everything it started is killed at once (no grace: a
 * reviewer has no state worth saving); stderr is kept apart (its first
 * `stderrLimit` bytes) for the failure reason. A machine without a working
 * jail is not a reviewer's failure: runUntrusted's JAIL_UNAVAILABLE goes up
 * to the caller, and the review stops with it.
 */
export async function runContained(request: ReviewerRun): Promise<ProcessOutcome & { readonly sandbox: SandboxMode }> {
  const { sandbox } = request;
  const run = await runUntrusted({
    argv: request.argv,
    sandbox,
    jobDir: request.jobDir,
    cwd: request.cwd,
    env: request.env,
    mounts: request.mounts,
    ...(request.cacheDir === undefined ? {} : { cacheDir: request.cacheDir }),
    network: request.network,
    stdin: request.stdin,
    timeoutMs: request.timeoutMs,
    output: { maxBytes: request.outputLimit, keep: 'head', onOverflow: 'kill' },
    stderr: { maxBytes: request.stderrLimit ?? 4096, keep: 'head' },
    killGraceMs: 0,
  });
  const stderr = run.stderr.toString('utf8');
  if (run.startError !== null) return { kind: 'spawn-error', message: run.startError, sandbox };
  if (run.timedOut) return { kind: 'timeout', ms: request.timeoutMs, sandbox };
  if (run.overflowed) return { kind: 'too-large', limit: request.outputLimit, sandbox };
  if (run.signal !== null) return { kind: 'signaled', signal: run.signal, stderr, sandbox };
  return { kind: 'exited', code: run.exitCode ?? 0, stdout: run.output, stderr, sandbox };
}
