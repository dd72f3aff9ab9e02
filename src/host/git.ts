import { execFile } from 'node:child_process';
import { ProofgateError } from '../core/index.js';

/**
 * The one way proofgate runs the git binary: `execFile` (no shell), bytes in
 * and out, never a prompt, a fixed locale, and a typed `GIT` error that names
 * the command and git's own message.
 *
 * `isolated` runs git so that nothing around it can redirect it or make it run
 * anything else: inherited `GIT_*` variables are dropped (a caller inside a git
 * hook would otherwise point git at another repository or index), hooks are
 * switched off, no editor can open, commits and tags are never signed, and
 * rerere and automatic gc/maintenance stay off so the repository gains no
 * cache or repack.
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
  /** Extra environment, laid over the base environment. */
  readonly env?: Readonly<Record<string, string>>;
  readonly maxBuffer?: number;
  /** `-c key=value` settings for this one command. */
  readonly config?: readonly (readonly [string, string])[];
  /** Drop inherited `GIT_*` variables and switch off hooks, editors, signing, rerere and auto gc. */
  readonly isolated?: boolean;
}

const DEFAULT_MAX_BUFFER = 256 * 1024 * 1024;

const ISOLATED_CONFIG: readonly (readonly [string, string])[] = [
  ['core.hooksPath', '/dev/null'],
  ['commit.gpgsign', 'false'],
  ['tag.gpgsign', 'false'],
  ['rerere.enabled', 'false'],
  ['gc.auto', '0'],
  ['maintenance.auto', 'false'],
  ['advice.detachedHead', 'false'],
];

/** The environment git runs with: the process environment plus the fixed settings, then `extra`. */
export function gitEnvironment(extra: Readonly<Record<string, string>> = {}, isolated = false): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !(isolated && name.startsWith('GIT_'))) env[name] = value;
  }
  env.GIT_TERMINAL_PROMPT = '0';
  env.LC_ALL = 'C';
  if (isolated) {
    env.GIT_EDITOR = 'true';
    env.GIT_SEQUENCE_EDITOR = 'true';
    env.GIT_MERGE_AUTOEDIT = 'no';
    env.GIT_CONFIG_COUNT = String(ISOLATED_CONFIG.length);
    ISOLATED_CONFIG.forEach(([key, value], i) => {
      env[`GIT_CONFIG_KEY_${i}`] = key;
      env[`GIT_CONFIG_VALUE_${i}`] = value;
    });
  }
  return { ...env, ...extra };
}

function firstLine(text: string): string {
  const line = text
    .split('\n')
    .map((part) => part.trim())
    .find((part) => part !== '');
  return line ?? '';
}

/** Run `git -C cwd args...`; resolve with the result when the exit code is accepted, else reject with one `GIT` error. */
export function runGit(cwd: string, args: readonly string[], options: GitOptions = {}): Promise<GitResult> {
  const accepted = new Set([0, ...(options.okExitCodes ?? [])]);
  const config = (options.config ?? []).flatMap(([key, value]) => ['-c', `${key}=${value}`]);
  return new Promise((resolve, reject) => {
    const child = execFile(
      'git',
      ['-C', cwd, ...config, ...args],
      {
        encoding: 'buffer',
        maxBuffer: options.maxBuffer ?? DEFAULT_MAX_BUFFER,
        env: gitEnvironment(options.env, options.isolated === true),
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
    child.stdin?.on('error', () => undefined);
    if (options.input !== undefined) child.stdin?.end(options.input);
    else child.stdin?.end();
  });
}

/** stdout of a git command as trimmed text. */
export async function gitText(cwd: string, args: readonly string[], options: GitOptions = {}): Promise<string> {
  const result = await runGit(cwd, args, options);
  return result.stdout.toString('utf8').trim();
}
