import { TOOLCHAIN_ENV, allowListedEnv, runProcess, type ProcessResult } from '../../host/index.js';

/**
 * How a configured check runs: a shell command line through `/bin/sh -c`, or
 * an argv array without a shell, through the host process runner (own process
 * group, SIGTERM then SIGKILL of the group on timeout, nothing left running
 * after it exits). The check sees the toolchain allow-list of proofgate's
 * environment plus `env`; stdout and stderr are interleaved and the LAST
 * `outputCapBytes` bytes are kept (a failing check explains itself at the
 * end). A cut output starts at a character boundary: the UTF-8 continuation
 * bytes the cut left at its start are dropped too.
 */

export interface CheckProcessRequest {
  readonly command: string | readonly string[];
  readonly cwd: string;
  readonly timeoutMs: number;
  readonly outputCapBytes: number;
  readonly env?: Readonly<Record<string, string>>;
  /** Time between SIGTERM and SIGKILL on timeout or abort (default 2000 ms). */
  readonly killGraceMs?: number;
  /** Aborting kills the check's process group (the result says `aborted`). */
  readonly signal?: AbortSignal;
}

/** How a check ended; `output` is stdout and stderr interleaved, the tail within the cap. */
export type CheckProcessResult = Pick<ProcessResult, 'exitCode' | 'signal' | 'timedOut' | 'startError' | 'output' | 'truncated' | 'durationMs'> & { readonly aborted?: boolean };

export async function runCheckProcess(request: CheckProcessRequest): Promise<CheckProcessResult> {
  const result = await runProcess({
    argv: typeof request.command === 'string' ? ['/bin/sh', '-c', request.command] : request.command,
    cwd: request.cwd,
    env: allowListedEnv(process.env, TOOLCHAIN_ENV, request.env),
    timeoutMs: request.timeoutMs,
    output: { maxBytes: request.outputCapBytes, keep: 'tail' },
    killGraceMs: request.killGraceMs,
    signal: request.signal,
  });
  const { exitCode, signal, timedOut, aborted, startError, truncated, durationMs } = result;
  const output = truncated ? fromCharacterBoundary(result.output) : result.output;
  return { exitCode, signal, timedOut, aborted, startError, output, truncated, durationMs };
}

/** Drop the UTF-8 continuation bytes (10xxxxxx, at most 3) a cut left at the start. */
function fromCharacterBoundary(bytes: Buffer): Buffer {
  let start = 0;
  while (start < 3 && start < bytes.length && ((bytes[start] ?? 0) & 0xc0) === 0x80) start += 1;
  return bytes.subarray(start);
}
