import { spawn } from 'node:child_process';

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

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // The group is already gone.
  }
}

/**
 * Run a program in its own process group with a deadline and an output cap.
 * Past the deadline or the cap the whole group is killed; when the program
 * exits, anything it left running in its group is killed too.
 */
export function runContained(argv: readonly string[], limits: SpawnLimits): Promise<ProcessOutcome> {
  return new Promise((resolve) => {
    const [program, ...args] = argv as [string, ...string[]];
    const child = spawn(program, args, { cwd: limits.cwd, env: limits.env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let stderr = '';
    const stderrLimit = limits.stderrLimit ?? 4096;
    let settled: ProcessOutcome | undefined;
    const finish = (outcome: ProcessOutcome) => {
      if (settled) return;
      settled = outcome;
      clearTimeout(timer);
      killGroup(child.pid);
      child.stdout?.destroy();
      child.stderr?.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => finish({ kind: 'timeout', ms: limits.timeoutMs }), limits.timeoutMs);
    child.on('error', (error) => finish({ kind: 'spawn-error', message: error.message }));
    child.stdin?.on('error', () => undefined);
    child.stdout?.on('data', (chunk: Buffer) => {
      stdoutBytes += chunk.length;
      if (stdoutBytes > limits.outputLimit) finish({ kind: 'too-large', limit: limits.outputLimit });
      else stdout.push(chunk);
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      if (stderr.length < stderrLimit) stderr += chunk.toString('utf8').slice(0, stderrLimit - stderr.length);
    });
    child.on('exit', (code, signal) => {
      // Let buffered output drain briefly, then settle even if a straggler holds the pipes open.
      const settle = () =>
        finish(
          signal !== null
            ? { kind: 'signaled', signal, stderr }
            : { kind: 'exited', code: code ?? 0, stdout: Buffer.concat(stdout), stderr },
        );
      if (child.stdout?.readableEnded !== false) settle();
      else {
        const grace = setTimeout(settle, 200);
        child.stdout.once('end', () => {
          clearTimeout(grace);
          setImmediate(settle);
        });
      }
    });
    child.stdin?.end(limits.stdin);
  });
}
