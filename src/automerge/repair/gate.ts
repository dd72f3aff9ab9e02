import type { SandboxMode } from '../../host/index.js';
import { openJob } from './job.js';
import { commandEnvironment, outputTail, runCommand, whatWasKilled, withoutCutLine } from './process.js';

/**
 * The gate: the configured command run on a fresh export of the exact commit
 * the repair would publish, in its own job directory (jailed unless the
 * trusted config says `sandbox: none`), with the same allow-listed
 * environment as the agent. Only exit code 0 passes; a timeout, a signal or a
 * start failure fails, and the output tail goes into the reason. The output
 * is redacted as a whole before any of it is cut, so a cut never splits a
 * secret the redactor would have recognised.
 */

export interface GateFailure {
  readonly passed: false;
  readonly reason: string;
  readonly transient: boolean;
  /** How the gate ended, in a few words: `exited with 1`, `was killed by SIGKILL`, `timed out after 600s`. */
  readonly ended: string;
  /**
   * The output the runner kept, redacted (`cut`: the runner kept only its
   * tail), when the gate ran to an end the agent can answer: an exit code or a
   * signal. Null after a timeout (the gate spent its whole time budget), an
   * abort or a failed start: there is nothing there for a validation pass.
   */
  readonly output: { readonly text: string; readonly cut: boolean } | null;
}

export type GateResult = { readonly passed: true; readonly durationMs: number; readonly sandbox: SandboxMode } | GateFailure;

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
    const output = { text: request.redact(withoutCutLine(run.output, run.truncated)), cut: run.truncated };
    const text = outputTail(output.text);
    const tail = text === '' ? ' (no output)' : `; output tail: ${text}`;
    const fail = (ended: string, reason: string, transient: boolean, answerable: boolean): GateFailure => ({
      passed: false,
      reason,
      transient,
      ended,
      output: answerable ? output : null,
    });
    if (run.aborted) return fail('aborted', `gate aborted; ${whatWasKilled(run.sandbox)}`, true, false);
    if (run.timedOut) {
      const ended = `timed out after ${request.timeoutSeconds}s`;
      return fail(ended, `gate ${ended}; ${whatWasKilled(run.sandbox)}${tail}`, false, false);
    }
    if (run.startError !== null) return fail('could not start', `gate could not start: ${run.startError}`, false, false);
    const ended = run.exitCode === null ? `was killed by ${run.signal ?? 'a signal'}` : `exited with ${run.exitCode}`;
    return fail(ended, `gate ${ended}${tail}`, false, true);
  } finally {
    await job.dispose();
  }
}
