import { execFile } from 'node:child_process';
import { ProofgateError } from '../../core/index.js';

/**
 * The one place the local forge runs git: `execFile` (no shell), bytes in and
 * out, and a typed `GIT` error that names the command and git's own message.
 */

export interface GitResult {
  readonly exitCode: number;
  readonly stdout: Buffer;
  readonly stderr: string;
}

export interface GitOptions {
  /** Exit codes that are answers rather than failures (0 is always accepted). */
  readonly okExitCodes?: readonly number[];
  readonly input?: string | Uint8Array;
  /** Extra environment (merged over a copy of process.env). */
  readonly env?: Readonly<Record<string, string>>;
  readonly maxBuffer?: number;
}

const DEFAULT_MAX_BUFFER = 256 * 1024 * 1024;

function firstLine(text: string): string {
  const line = text
    .split('\n')
    .map((part) => part.trim())
    .find((part) => part !== '');
  return line ?? '';
}

/** Run `git -C cwd args...`; resolve with the result when the exit code is accepted. */
export function runGit(cwd: string, args: readonly string[], options: GitOptions = {}): Promise<GitResult> {
  const accepted = new Set([0, ...(options.okExitCodes ?? [])]);
  return new Promise((resolve, reject) => {
    const child = execFile(
      'git',
      ['-C', cwd, ...args],
      {
        encoding: 'buffer',
        maxBuffer: options.maxBuffer ?? DEFAULT_MAX_BUFFER,
        env: { ...process.env, GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C', ...options.env },
        windowsHide: true,
      },
      (error, stdout, stderr) => {
        const stderrText = stderr.toString('utf8');
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        if (code !== null && accepted.has(code)) {
          resolve({ exitCode: code, stdout, stderr: stderrText });
          return;
        }
        const command = `git ${args.slice(0, 2).join(' ')}`;
        const why = error !== null && code === null ? error.message : firstLine(stderrText) || `exit code ${code ?? 'unknown'}`;
        reject(new ProofgateError('GIT', `${command} failed: ${why}`, { args: [...args], exitCode: code, stderr: stderrText.slice(0, 2000) }));
      },
    );
    if (options.input !== undefined) child.stdin?.end(options.input);
    else child.stdin?.end();
  });
}

/** stdout of a git command as trimmed text. */
export async function gitText(cwd: string, args: readonly string[], options: GitOptions = {}): Promise<string> {
  const result = await runGit(cwd, args, options);
  return result.stdout.toString('utf8').trim();
}
