import { join } from 'node:path';
import { PORTABLE_ENV, TOOLCHAIN_ENV, allowListedEnv, runUntrusted, type JailLimits, type SandboxMode, type UntrustedResult } from '../../host/index.js';

/**
 * How a configured check runs: a shell command line through `/bin/sh -c`, or
 * an argv array without a shell, through the jail (`runUntrusted`): jailed
 * under bubblewrap, or plainly when the trusted config says `sandbox: none`.
 * Jailed, the check sees PATH, locale and time zone of proofgate's
 * environment, HOME inside its job dir, TMPDIR=/tmp (private), plus `env`;
 * unjailed it sees the toolchain allow-list plus `env`. stdout and stderr are
 * interleaved and the LAST `outputCapBytes` bytes are kept (a failing check
 * explains itself at the end). A cut output starts at a character boundary:
 * the UTF-8 continuation bytes the cut left at its start are dropped too.
 */

export interface CheckProcessRequest {
  readonly command: string | readonly string[];
  /** The job's own directory (the only writable tree); `cwd` is inside it. */
  readonly jobDir: string;
  readonly cwd: string;
  readonly sandbox: SandboxMode;
  readonly network?: boolean;
  readonly cacheDir?: string;
  readonly limits?: Partial<JailLimits>;
  readonly timeoutMs: number;
  readonly outputCapBytes: number;
  readonly env?: Readonly<Record<string, string>>;
  /** Time between SIGTERM and SIGKILL on timeout or abort (default 2000 ms). */
  readonly killGraceMs?: number;
  /** Aborting kills the check's processes (the result says `aborted`). */
  readonly signal?: AbortSignal;
}

/** How a check ended; `output` is stdout and stderr interleaved, the tail within the cap; `sandbox` says whether it ran jailed. */
export type CheckProcessResult = Pick<
  UntrustedResult,
  'exitCode' | 'signal' | 'timedOut' | 'startError' | 'output' | 'truncated' | 'durationMs' | 'sandbox'
> & { readonly aborted?: boolean };

function checkEnv(request: CheckProcessRequest): Record<string, string> {
  if (request.sandbox === 'none') return allowListedEnv(process.env, TOOLCHAIN_ENV, request.env);
  return allowListedEnv(process.env, PORTABLE_ENV, { HOME: join(request.jobDir, 'home'), TMPDIR: '/tmp', ...request.env });
}

export async function runCheckProcess(request: CheckProcessRequest): Promise<CheckProcessResult> {
  const result = await runUntrusted({
    argv: typeof request.command === 'string' ? ['/bin/sh', '-c', request.command] : request.command,
    sandbox: request.sandbox,
    jobDir: request.jobDir,
    cwd: request.cwd,
    env: checkEnv(request),
    ...(request.network === undefined ? {} : { network: request.network }),
    ...(request.cacheDir === undefined ? {} : { cacheDir: request.cacheDir }),
    ...(request.limits === undefined ? {} : { limits: request.limits }),
    timeoutMs: request.timeoutMs,
    output: { maxBytes: request.outputCapBytes, keep: 'tail' },
    ...(request.killGraceMs === undefined ? {} : { killGraceMs: request.killGraceMs }),
    ...(request.signal === undefined ? {} : { signal: request.signal }),
  });
  const { exitCode, signal, timedOut, aborted, startError, truncated, durationMs, sandbox } = result;
  const output = truncated ? fromCharacterBoundary(result.output) : result.output;
  return { exitCode, signal, timedOut, aborted, startError, output, truncated, durationMs, sandbox };
}

/** Drop the UTF-8 continuation bytes (10xxxxxx, at most 3) a cut left at the start. */
function fromCharacterBoundary(bytes: Buffer): Buffer {
  let start = 0;
  while (start < 3 && start < bytes.length && ((bytes[start] ?? 0) & 0xc0) === 0x80) start += 1;
  return bytes.subarray(start);
}
