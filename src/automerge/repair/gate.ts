import type { SandboxMode } from '../../host/index.js';
import { openJob } from './job.js';
import { commandEnvironment, outputTail, runCommand, whatWasKilled } from './process.js';

/**
 * The gate: the configured command run on a fresh export of the exact commit
 * the repair would publish, in its own job directory (jailed unless the
 * trusted config says `sandbox: none`), with the same allow-listed
 * environment as the agent. Only exit code 0 passes; a timeout, a signal or a
 * start failure fails, and the output tail goes into the reason.
 */

export type GateResult =
  | { readonly passed: true; readonly durationMs: number; readonly sandbox: SandboxMode }
  | { readonly passed: false; readonly reason: string; readonly transient: boolean };

export interface GateRequest {
  readonly repoDir: string;
  /** The commit the gate judges. */
  readonly sha: string;
  readonly command: readonly string[];
  readonly timeoutSeconds: number;
  readonly maxOutputBytes: number;
  readonly sandbox: SandboxMode;
  readonly cacheDir?: string | undefined;
  readonly env: Readonly<Record<string, string>>;
  readonly redact: (text: string) => string;
  readonly signal?: AbortSignal | undefined;
}

export async function runGate(request: GateRequest): Promise<GateResult> {
  const job = await openJob(request.repoDir, request.sha);
  try {
    const run = await runCommand({
      argv: request.command,
      job,
      env: commandEnvironment(process.env, request.env),
      sandbox: request.sandbox,
      cacheDir: request.cacheDir,
      timeoutMs: request.timeoutSeconds * 1000,
      maxOutputBytes: request.maxOutputBytes,
      signal: request.signal,
    });
    if (run.exitCode === 0 && !run.timedOut && !run.aborted) return { passed: true, durationMs: run.durationMs, sandbox: run.sandbox };
    const text = request.redact(outputTail(run.output));
    const tail = text === '' ? ' (no output)' : `; output tail: ${text}`;
    if (run.aborted) return { passed: false, reason: `gate aborted; ${whatWasKilled(run.sandbox)}`, transient: true };
    if (run.timedOut) return { passed: false, reason: `gate timed out after ${request.timeoutSeconds}s; ${whatWasKilled(run.sandbox)}${tail}`, transient: false };
    if (run.startError !== null) return { passed: false, reason: `gate could not start: ${run.startError}`, transient: false };
    const how = run.exitCode === null ? `was killed by ${run.signal ?? 'a signal'}` : `exited with ${run.exitCode}`;
    return { passed: false, reason: `gate ${how}${tail}`, transient: false };
  } finally {
    await job.dispose();
  }
}
