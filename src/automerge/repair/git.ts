import { execFile } from 'node:child_process';
import { ProofgateError } from '../../core/index.js';

/**
 * How the repair runs git: `execFile` (no shell), in a given directory, with an
 * environment that cannot redirect it or run anything else. Inherited `GIT_*`
 * variables are dropped (a caller inside a git hook would otherwise point git
 * at another repository or index), hooks are switched off, no editor or
 * password prompt can open, commits are never signed, and rerere and
 * automatic gc stay off so the user's repository gains no cache or repack.
 */

export interface RepairGitResult {
  readonly exitCode: number;
  readonly stdout: Buffer;
  readonly stderr: string;
}

export interface RepairGitOptions {
  /** Exit codes that are answers rather than failures (0 is always accepted). */
  readonly okExitCodes?: readonly number[];
  readonly input?: string | Uint8Array;
  readonly env?: Readonly<Record<string, string>>;
}

const SAFE_CONFIG: readonly (readonly [string, string])[] = [
  ['core.hooksPath', '/dev/null'],
  ['commit.gpgsign', 'false'],
  ['tag.gpgsign', 'false'],
  ['rerere.enabled', 'false'],
  ['gc.auto', '0'],
  ['maintenance.auto', 'false'],
  ['advice.detachedHead', 'false'],
];

/** The environment git runs with: the process environment without `GIT_*`, plus the fixed settings. */
export function gitEnvironment(extra: Readonly<Record<string, string>> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !name.startsWith('GIT_')) env[name] = value;
  }
  env.GIT_TERMINAL_PROMPT = '0';
  env.GIT_EDITOR = 'true';
  env.GIT_SEQUENCE_EDITOR = 'true';
  env.GIT_MERGE_AUTOEDIT = 'no';
  env.LC_ALL = 'C';
  env.GIT_CONFIG_COUNT = String(SAFE_CONFIG.length);
  SAFE_CONFIG.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return { ...env, ...extra };
}

/** Run `git -C dir args...`; resolve when the exit code is accepted, else one `GIT` error. */
export function repairGit(dir: string, args: readonly string[], options: RepairGitOptions = {}): Promise<RepairGitResult> {
  const accepted = new Set([0, ...(options.okExitCodes ?? [])]);
  return new Promise((resolve, reject) => {
    const child = execFile(
      'git',
      ['-C', dir, ...args],
      { encoding: 'buffer', maxBuffer: 256 * 1024 * 1024, env: gitEnvironment(options.env), windowsHide: true },
      (error, stdout, stderr) => {
        const stderrText = stderr.toString('utf8');
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        if (code !== null && accepted.has(code)) {
          resolve({ exitCode: code, stdout, stderr: stderrText });
          return;
        }
        const why = stderrText.split('\n').find((line) => line.trim() !== '')?.trim() ?? (error?.message || `exit code ${code ?? 'unknown'}`);
        reject(new ProofgateError('GIT', `git ${args.slice(0, 2).join(' ')} failed: ${why}`, { args: [...args], exitCode: code }));
      },
    );
    if (options.input !== undefined) child.stdin?.end(options.input);
    else child.stdin?.end();
  });
}

export async function repairGitText(dir: string, args: readonly string[], options: RepairGitOptions = {}): Promise<string> {
  return (await repairGit(dir, args, options)).stdout.toString('utf8').trim();
}

/** True when `ancestor` is an ancestor of (or equal to) `descendant`. */
export async function isAncestor(dir: string, ancestor: string, descendant: string): Promise<boolean> {
  return (await repairGit(dir, ['merge-base', '--is-ancestor', ancestor, descendant], { okExitCodes: [1] })).exitCode === 0;
}

/** True when `sha` names a commit present in the repository. */
export async function hasCommit(dir: string, sha: string): Promise<boolean> {
  return (await repairGit(dir, ['cat-file', '-e', `${sha}^{commit}`], { okExitCodes: [1, 128] })).exitCode === 0;
}

/** Environment that makes git record `identity` as author and committer. */
export function identityEnvironment(identity: { readonly name: string; readonly email: string }, author = true): Record<string, string> {
  const env: Record<string, string> = { GIT_COMMITTER_NAME: identity.name, GIT_COMMITTER_EMAIL: identity.email };
  if (author) {
    env.GIT_AUTHOR_NAME = identity.name;
    env.GIT_AUTHOR_EMAIL = identity.email;
  }
  return env;
}
