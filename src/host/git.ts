import { execFile } from 'node:child_process';
import { ProofgateError } from '../core/index.js';

import { allowListedEnv } from './env.js';

/**
 * The one way proofgate runs the git binary: `execFile` (no shell), bytes in
 * and out, never a prompt, a fixed locale, and a typed `GIT` error that names
 * the command and git's own message.
 *
 * Every call is hardened, whatever the caller asks: the repository's own
 * `.git/config` and `.git/hooks/` are writable by anything that ran in it (a
 * reviewer, a check, an agent), so git must not run what they name with
 * proofgate's environment. Each call therefore
 * - sees only an allow-listed environment (locale, time zone, PATH, HOME and
 *   the user's identity; no token, no inherited `GIT_*` redirection, no
 *   system config),
 * - runs no hook (`core.hooksPath=/dev/null`), no fsmonitor, no configured
 *   ssh command, pager or askpass, no credential helper and no `ext::`
 *   transport (see `SAFE_CONFIG`). Callers that produce diffs add
 *   `--no-ext-diff --no-textconv` (an empty `diff.external` would break diff).
 *
 * `isolated` adds what a writer of commits needs on top: no editor can open,
 * commits and tags are never signed, and rerere and automatic gc/maintenance
 * stay off so the repository gains no cache or repack.
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
  /** Extra environment, laid over the allow-listed base environment. */
  readonly env?: Readonly<Record<string, string>>;
  readonly maxBuffer?: number;
  /** `-c key=value` settings for this one command. */
  readonly config?: readonly (readonly [string, string])[];
  /** Also switch off editors, signing, rerere and auto gc. */
  readonly isolated?: boolean;
}

const DEFAULT_MAX_BUFFER = 256 * 1024 * 1024;

/** Settings on every call: each one names a way repository config could make git run a program. */
export const SAFE_CONFIG: readonly (readonly [string, string])[] = [
  ['core.hooksPath', '/dev/null'],
  ['core.fsmonitor', 'false'],
  ['core.sshCommand', 'ssh'],
  ['core.pager', 'cat'],
  ['core.askPass', ''],
  ['credential.helper', ''],
  ['protocol.ext.allow', 'never'],
];

const ISOLATED_CONFIG: readonly (readonly [string, string])[] = [
  ['commit.gpgsign', 'false'],
  ['tag.gpgsign', 'false'],
  ['rerere.enabled', 'false'],
  ['gc.auto', '0'],
  ['maintenance.auto', 'false'],
  ['advice.detachedHead', 'false'],
];

/** What git may see of proofgate's environment: plain session facts and the user's git identity, never a credential. */
export const GIT_ENV = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'LANG',
  'TZ',
  'TMPDIR',
  'XDG_CONFIG_HOME',
] as const;

/** The user's git identity: not a credential, so copied as it is (the credential rule would drop `GIT_AUTHOR_*`). */
const GIT_IDENTITY_ENV = [
  'GIT_AUTHOR_NAME',
  'GIT_AUTHOR_EMAIL',
  'GIT_AUTHOR_DATE',
  'GIT_COMMITTER_NAME',
  'GIT_COMMITTER_EMAIL',
  'GIT_COMMITTER_DATE',
] as const;

/**
 * The environment git runs with: the allow-listed part of the process
 * environment, the fixed settings (config passed as GIT_CONFIG_* so it also
 * reaches git's own sub-commands), then `extra`.
 */
export function gitEnvironment(extra: Readonly<Record<string, string>> = {}, isolated = false): Record<string, string> {
  const env = allowListedEnv(process.env, GIT_ENV);
  for (const name of GIT_IDENTITY_ENV) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  env.GIT_TERMINAL_PROMPT = '0';
  env.GIT_CONFIG_NOSYSTEM = '1';
  env.GIT_PAGER = 'cat';
  env.LC_ALL = 'C';
  if (isolated) {
    env.GIT_EDITOR = 'true';
    env.GIT_SEQUENCE_EDITOR = 'true';
    env.GIT_MERGE_AUTOEDIT = 'no';
  }
  const config = isolated ? [...SAFE_CONFIG, ...ISOLATED_CONFIG] : SAFE_CONFIG;
  env.GIT_CONFIG_COUNT = String(config.length);
  config.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return { ...env, ...extra };
}

/** The same settings as `-c` arguments, for the front of a git command line (they win over every config file). */
export function safeGitArgs(): string[] {
  return SAFE_CONFIG.flatMap(([key, value]) => ['-c', `${key}=${value}`]);
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
      ['-C', cwd, ...safeGitArgs(), ...config, ...args],
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
