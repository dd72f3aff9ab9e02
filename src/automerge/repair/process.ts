import { PORTABLE_ENV, SESSION_ENV, allowListedEnv, runUntrusted, type ProcessResult, type SandboxMode } from '../../host/index.js';
import type { RepairJob } from './job.js';

/**
 * How the agent-fix and gate commands run: an argv (never a shell) through
 * the host's runner for untrusted code, in a job's exported tree: jailed
 * (unless the trusted config says `sandbox: none`), the job dir the only
 * writable tree, an environment built from an allow-list, a time limit and
 * an abort signal; every process the command started is gone when it ends.
 * The LAST `maxOutputBytes` of output are kept: the tail is where a failure
 * explains itself.
 */

/** Variables a repair command may see from the environment proofgate runs in. */
export const ALLOWED_ENVIRONMENT: readonly string[] = [...PORTABLE_ENV, 'LANGUAGE', ...SESSION_ENV];

/** The environment of a repair command: allow-listed variables of `source`, then `extra`. */
export function commandEnvironment(source: Readonly<Record<string, string | undefined>>, extra: Readonly<Record<string, string>> = {}): Record<string, string> {
  return allowListedEnv(source, ALLOWED_ENVIRONMENT, extra);
}

/** A repair command: an argv run in `job.tree` with its complete environment (HOME and TMPDIR are the job's). */
export interface CommandRequest {
  readonly argv: readonly string[];
  readonly job: Pick<RepairJob, 'jobDir' | 'tree' | 'home' | 'tmp'>;
  readonly env: Readonly<Record<string, string>>;
  readonly sandbox: SandboxMode;
  readonly cacheDir?: string | undefined;
  readonly network?: boolean;
  readonly timeoutMs: number;
  /** How many bytes of output to keep: the last ones. */
  readonly maxOutputBytes: number;
  readonly signal?: AbortSignal | undefined;
  readonly killGraceMs?: number;
}

/** How it ended; `output` is stdout and stderr interleaved, the last `maxOutputBytes` bytes as text. */
export type CommandResult = Pick<ProcessResult, 'exitCode' | 'signal' | 'timedOut' | 'aborted' | 'startError' | 'truncated' | 'durationMs'> & {
  readonly output: string;
  /** How it ran: `jail`, or `none` when the trusted config said so. */
  readonly sandbox: SandboxMode;
};

export async function runCommand(request: CommandRequest): Promise<CommandResult> {
  const { job } = request;
  const run = await runUntrusted({
    argv: request.argv,
    sandbox: request.sandbox,
    jobDir: job.jobDir,
    cwd: job.tree,
    env: { ...request.env, HOME: job.home, TMPDIR: job.tmp },
    ...(request.cacheDir === undefined ? {} : { cacheDir: request.cacheDir }),
    network: request.network === true,
    timeoutMs: request.timeoutMs,
    output: { maxBytes: request.maxOutputBytes, keep: 'tail' },
    ...(request.signal === undefined ? {} : { signal: request.signal }),
    ...(request.killGraceMs === undefined ? {} : { killGraceMs: request.killGraceMs }),
  });
  const { exitCode, signal, timedOut, aborted, startError, truncated, durationMs, sandbox } = run;
  return { exitCode, signal, timedOut, aborted, startError, output: run.output.toString('utf8'), truncated, durationMs, sandbox };
}

/** What was killed when a command was stopped: in the jail everything it started; unjailed its process group. */
export function whatWasKilled(sandbox: SandboxMode): string {
  return sandbox === 'jail' ? 'its jail and everything in it killed' : 'process group killed';
}

/**
 * Output the runner kept only the tail of may begin inside a secret that the
 * redactor no longer recognises there (half a token, the end of a known value):
 * drop that partial first line (with no line break, its first 4096 characters)
 * before redacting.
 */
export function withoutCutLine(output: string, cut: boolean): string {
  if (!cut) return output;
  const newline = output.indexOf('\n');
  return newline === -1 ? output.slice(Math.min(output.length, 4096)) : output.slice(newline + 1);
}

/** The last `maxChars` characters of `output`, for a one-paragraph reason. */
export function outputTail(output: string, maxChars = 2000): string {
  const trimmed = output.trimEnd();
  return trimmed.length <= maxChars ? trimmed : `…${trimmed.slice(trimmed.length - maxChars)}`;
}
