import { PORTABLE_ENV, SESSION_ENV, allowListedEnv, runProcess, type ProcessRequest, type ProcessResult } from '../../host/index.js';

/**
 * How the agent-fix and gate commands run: an argv (never a shell) through the
 * host process runner (own process group, time limit, abort signal, SIGTERM
 * then SIGKILL of the group), with an environment built from an allow-list.
 * The LAST `maxOutputBytes` of output are kept: the tail is where a failure
 * explains itself.
 */

/** Variables a repair command may see from the environment proofgate runs in. */
export const ALLOWED_ENVIRONMENT: readonly string[] = [...PORTABLE_ENV, 'LANGUAGE', ...SESSION_ENV];

/** The environment of a repair command: allow-listed variables of `source`, then `extra`. */
export function commandEnvironment(source: Readonly<Record<string, string | undefined>>, extra: Readonly<Record<string, string>> = {}): Record<string, string> {
  return allowListedEnv(source, ALLOWED_ENVIRONMENT, extra);
}

/** A repair command: an argv with its complete environment (nothing else is inherited). */
export type CommandRequest = Pick<ProcessRequest, 'argv' | 'cwd' | 'env' | 'timeoutMs' | 'signal' | 'killGraceMs'> & {
  /** How many bytes of output to keep: the last ones. */
  readonly maxOutputBytes: number;
};

/** How it ended; `output` is stdout and stderr interleaved, the last `maxOutputBytes` bytes as text. */
export type CommandResult = Pick<ProcessResult, 'exitCode' | 'signal' | 'timedOut' | 'aborted' | 'startError' | 'truncated' | 'durationMs'> & {
  readonly output: string;
};

export async function runCommand(request: CommandRequest): Promise<CommandResult> {
  const run = await runProcess({
    argv: request.argv,
    cwd: request.cwd,
    env: request.env,
    timeoutMs: request.timeoutMs,
    output: { maxBytes: request.maxOutputBytes, keep: 'tail' },
    signal: request.signal,
    killGraceMs: request.killGraceMs,
  });
  const { exitCode, signal, timedOut, aborted, startError, truncated, durationMs } = run;
  return { exitCode, signal, timedOut, aborted, startError, output: run.output.toString('utf8'), truncated, durationMs };
}

/** The last `maxChars` characters of `output`, for a one-paragraph reason. */
export function outputTail(output: string, maxChars = 2000): string {
  const trimmed = output.trimEnd();
  return trimmed.length <= maxChars ? trimmed : `…${trimmed.slice(trimmed.length - maxChars)}`;
}
