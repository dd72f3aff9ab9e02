import { resolve } from 'node:path';
import { ProofgateError, redactSecrets } from '../core/index.js';

import { allowListedEnv } from './env.js';
import { runProcess } from './process.js';

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
 *
 * git runs through the process runner (src/host/process.ts): in its own
 * process group, so a time limit or an abort stops git and every helper it
 * started (`git-remote-https`, `ssh`, ...). Nothing secret reaches an error
 * or the returned stderr: credentials in URLs (`https://user:token@host`),
 * every value the caller names in `redact` or passes in `secretConfig`, and
 * whatever the secret catalogue recognises are blanked out.
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
  /**
   * Settings passed in git's environment (`GIT_CONFIG_KEY_n`), never on its
   * command line, which every user of the machine can read: credentials such
   * as an `http.<url>.extraHeader`. Their values are redacted like `redact`.
   */
  readonly secretConfig?: readonly (readonly [string, string])[];
  /** Also switch off editors, signing, rerere and auto gc. */
  readonly isolated?: boolean;
  /** Stop git (its whole process group) after this many milliseconds: a `GIT` error saying the command timed out. Default: no limit. */
  readonly timeoutMs?: number;
  /** Aborting stops git (its whole process group): an `ABORTED` error. */
  readonly signal?: AbortSignal;
  /** Values that never appear in an error or in the returned stderr (tokens, passwords, paths that hold them). */
  readonly redact?: readonly string[];
}

const DEFAULT_MAX_BUFFER = 256 * 1024 * 1024;
/** What is kept of git's stderr (its first bytes: git explains a failure in its first lines). */
const STDERR_BYTES = 4 * 1024 * 1024;
/** Between SIGTERM and SIGKILL: time for git to remove its lock files. */
const KILL_GRACE_MS = 1000;

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
export const GIT_ENV = ['PATH', 'HOME', 'USER', 'LOGNAME', 'LANG', 'TZ', 'TMPDIR', 'XDG_CONFIG_HOME'] as const;

/** The user's git identity: not a credential, so copied as it is (the credential rule would drop `GIT_AUTHOR_*`). */
const GIT_IDENTITY_ENV = ['GIT_AUTHOR_NAME', 'GIT_AUTHOR_EMAIL', 'GIT_AUTHOR_DATE', 'GIT_COMMITTER_NAME', 'GIT_COMMITTER_EMAIL', 'GIT_COMMITTER_DATE'] as const;

/**
 * The environment git runs with: the allow-listed part of the process
 * environment, the fixed settings (config passed as GIT_CONFIG_* so it also
 * reaches git's own sub-commands), then `extra`.
 */
export function gitEnvironment(
  extra: Readonly<Record<string, string>> = {},
  isolated = false,
  secretConfig: readonly (readonly [string, string])[] = [],
): Record<string, string> {
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
  const config = [...SAFE_CONFIG, ...(isolated ? ISOLATED_CONFIG : []), ...secretConfig];
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

/** `scheme://user:password@` and `scheme://token@`: the credential part of a URL. */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@'"]+@/gi;

/**
 * A function that blanks out of a text every credential in a URL, every one
 * of `values` (also percent-encoded) and what the secret catalogue
 * recognises.
 */
export function gitRedactor(values: readonly string[] = []): (text: string) => string {
  const secrets = [...new Set(values.flatMap((value) => [value, encodeURIComponent(value)]).filter((value) => value !== ''))].sort(
    (a, b) => b.length - a.length,
  );
  return (text) => {
    let out = text.replace(URL_CREDENTIALS, '$1[redacted]@');
    for (const secret of secrets) out = out.split(secret).join('[redacted]');
    return redactSecrets(out);
  };
}

/**
 * Run `git -C cwd args...`; resolve with the result when the exit code is
 * accepted, else reject with one `GIT` error naming the command and git's
 * first line (`ABORTED` when `signal` aborted it).
 */
export async function runGit(cwd: string, args: readonly string[], options: GitOptions = {}): Promise<GitResult> {
  const accepted = new Set([0, ...(options.okExitCodes ?? [])]);
  const config = (options.config ?? []).flatMap(([key, value]) => ['-c', `${key}=${value}`]);
  const secretConfig = options.secretConfig ?? [];
  const redact = gitRedactor([...(options.redact ?? []), ...secretConfig.map(([, value]) => value)]);
  const maxBuffer = options.maxBuffer ?? DEFAULT_MAX_BUFFER;
  const run = await runProcess({
    // git changes to `cwd` itself (-C): a missing directory is git's own error, and proofgate's working directory never matters.
    argv: ['git', '-C', resolve(cwd), ...safeGitArgs(), ...config, ...args],
    cwd: '/',
    env: gitEnvironment(options.env, options.isolated === true, secretConfig),
    timeoutMs: options.timeoutMs ?? Number.POSITIVE_INFINITY,
    output: { maxBytes: maxBuffer, onOverflow: 'kill' },
    stderr: { maxBytes: Math.min(maxBuffer, STDERR_BYTES) },
    ...(options.input === undefined ? {} : { stdin: options.input }),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    killGraceMs: KILL_GRACE_MS,
  });
  const stderr = redact(run.stderr.toString('utf8'));
  const ended = !run.timedOut && !run.aborted && !run.overflowed && run.startError === null;
  if (ended && run.exitCode !== null && accepted.has(run.exitCode)) return { exitCode: run.exitCode, stdout: run.output, stderr };
  const command = redact(`git ${args.slice(0, 2).join(' ')}`);
  const details = { args: args.map(redact), exitCode: run.exitCode, stderr: stderr.slice(0, 2000) };
  if (run.aborted) throw new ProofgateError('ABORTED', `${command} was aborted; git was stopped`, details);
  if (run.timedOut)
    throw new ProofgateError('GIT', `${command} timed out after ${String(options.timeoutMs)} ms; git was stopped`, { ...details, timedOut: true });
  let why: string;
  if (run.startError !== null) why = `git could not be started: ${redact(run.startError)}`;
  else if (run.overflowed) why = `its output passed ${maxBuffer} bytes; git was stopped`;
  else why = firstLine(stderr) || (run.exitCode === null ? `killed by ${run.signal ?? 'a signal'}` : `exit code ${run.exitCode}`);
  throw new ProofgateError('GIT', `${command} failed: ${why}`, details);
}

/** stdout of a git command as trimmed text. */
export async function gitText(cwd: string, args: readonly string[], options: GitOptions = {}): Promise<string> {
  const result = await runGit(cwd, args, options);
  return result.stdout.toString('utf8').trim();
}

type QueryOptions = Pick<GitOptions, 'timeoutMs' | 'signal'>;

/** True when `rev` names a commit in the repository at `dir`; false for anything else (a missing object, a tree, a bad name). */
export async function hasCommit(dir: string, rev: string, options: QueryOptions = {}): Promise<boolean> {
  if (rev === '' || rev.startsWith('-')) return false;
  return (await runGit(dir, ['cat-file', '-e', `${rev}^{commit}`], { ...options, okExitCodes: [1, 128] })).exitCode === 0;
}

/** True when `ancestor` is an ancestor of `descendant` or the same commit; a commit the repository lacks is a `GIT` error. */
export async function isAncestor(dir: string, ancestor: string, descendant: string, options: QueryOptions = {}): Promise<boolean> {
  if ([ancestor, descendant].some((rev) => rev === '' || rev.startsWith('-'))) throw new ProofgateError('INVALID_INPUT', 'isAncestor needs two commit names');
  return (await runGit(dir, ['merge-base', '--is-ancestor', ancestor, descendant], { ...options, okExitCodes: [1] })).exitCode === 0;
}
