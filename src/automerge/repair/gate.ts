import { commandEnvironment, outputTail, runCommand } from './process.js';
import type { Workspace } from './workspace.js';

/**
 * The gate: the configured command run in the repaired worktree, with the same
 * allow-listed environment as the agent. Only exit code 0 passes; a timeout,
 * a signal or a start failure fails, and the output tail goes into the reason.
 */

export type GateResult =
  | { readonly passed: true; readonly durationMs: number }
  | { readonly passed: false; readonly reason: string; readonly transient: boolean };

export interface GateRequest {
  readonly ws: Workspace;
  readonly command: readonly string[];
  readonly timeoutSeconds: number;
  readonly maxOutputBytes: number;
  readonly env: Readonly<Record<string, string>>;
  readonly redact: (text: string) => string;
  readonly signal?: AbortSignal;
}

export async function runGate(request: GateRequest): Promise<GateResult> {
  const run = await runCommand({
    argv: request.command,
    cwd: request.ws.dir,
    env: commandEnvironment(process.env, request.env),
    timeoutMs: request.timeoutSeconds * 1000,
    maxOutputBytes: request.maxOutputBytes,
    signal: request.signal,
  });
  if (run.exitCode === 0 && !run.timedOut && !run.aborted) return { passed: true, durationMs: run.durationMs };
  const text = request.redact(outputTail(run.output));
  const tail = text === '' ? ' (no output)' : `; output tail: ${text}`;
  if (run.aborted) return { passed: false, reason: 'gate aborted; process group killed', transient: true };
  if (run.timedOut) return { passed: false, reason: `gate timed out after ${request.timeoutSeconds}s${tail}`, transient: false };
  if (run.startError !== null) return { passed: false, reason: `gate could not start: ${run.startError}`, transient: false };
  const how = run.exitCode === null ? `was killed by ${run.signal ?? 'a signal'}` : `exited with ${run.exitCode}`;
  return { passed: false, reason: `gate ${how}${tail}`, transient: false };
}
