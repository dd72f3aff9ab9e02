import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { ProofgateError, isProofgateError, redactSecrets } from '../core/index.js';

import { allowListedEnv } from './env.js';
import { gitObjectReader, readerCanAsk, type GitObject, type GitObjectInfo } from './git-reader.js';
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
 * - talks to no remote unless the caller names the protocols it may use
 *   (`transport`; see `gitEnvironment`): a lazy fetch is a way to run a program,
 * - reads every object as its name says: no replace refs and no grafts,
 * - runs no filter or merge driver the repository's config defines, in the
 *   commands that would (`DRIVER_COMMANDS`, see `driverOverrides`), and no
 *   signature verifier (`log.showSignature`, `gpg.*.program`).
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
  /**
   * The protocols this one command may use to reach a remote (default: none): only the calls that transfer on
   * purpose (fetch, push, ls-remote) name one, the protocol of the remote they were configured with (`remoteProtocol`).
   */
  readonly transport?: readonly GitProtocol[];
}

/** A protocol a transferring call may open (never `ext`, `fd` or another remote helper). */
export type GitProtocol = 'file' | 'git' | 'http' | 'https' | 'ssh';

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
  // A commit may carry a signature header its author wrote: with `log.showSignature` set, `git log` and `git show`
  // would hand it to the configured verifier program.
  ['log.showSignature', 'false'],
  ['gpg.program', 'false'],
  ['gpg.ssh.program', 'false'],
  ['gpg.x509.program', 'false'],
  // No transport unless the call names one: gitEnvironment's GIT_ALLOW_PROTOCOL is what decides (it also beats a
  // `protocol.<name>.allow` in the repository's config, which beats this).
  ['protocol.allow', 'never'],
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
 * reaches git's own sub-commands), then `extra`, then the transport rule.
 *
 * The transport rule: git may reach a remote only over the protocols in
 * `transport` (none by default). In a partial clone (`extensions.partialClone`,
 * `remote.<name>.promisor`) a missing object makes any command (diff,
 * merge-tree, log, cat-file, ...) fetch it from the promisor remote, and for a
 * remote on a local path git runs that remote's configured `uploadpack`
 * through the shell: the repository's config would choose a program to run.
 * Two settings stop that, both in the environment, so they reach every git
 * process the command starts, including the `upload-pack` of a local remote
 * (git drops `GIT_CONFIG_*` for that one):
 * - `GIT_ALLOW_PROTOCOL`, the allowed protocols: it overrides every
 *   `protocol.*.allow` setting, also one in the repository's config (which
 *   would beat `protocol.allow=never`);
 * - `GIT_NO_LAZY_FETCH=1`: no lazy fetch at all, over any protocol (honoured
 *   since the May 2024 security releases, 2.39.4 and 2.45.1 among them; an
 *   older git ignores it).
 * A call that transfers on purpose allows only its remote's protocol: over
 * https a lazy fetch could reach a server but run no local program; a
 * `file` transfer (proofgate's own local fetches, a path remote) is
 * protected from a promisor remote on a local path by `GIT_NO_LAZY_FETCH`
 * alone, so on a git without it the repository it runs in must be one no
 * change author shapes (the jail export fetches into a new repository).
 */
export function gitEnvironment(
  extra: Readonly<Record<string, string>> = {},
  isolated = false,
  secretConfig: readonly (readonly [string, string])[] = [],
  transport: readonly GitProtocol[] = [],
  drivers: readonly (readonly [string, string])[] = [],
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
  const config = [...SAFE_CONFIG, ...(isolated ? ISOLATED_CONFIG : []), ...secretConfig, ...drivers];
  env.GIT_CONFIG_COUNT = String(config.length);
  config.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  // Replace refs (`refs/replace/<sha>`, which anyone who can write a ref can make) would make git read other bytes for a
  // commit than the ones its sha names, and grafts other parents: every read sees the objects as their names say.
  return {
    ...env,
    ...extra,
    GIT_ALLOW_PROTOCOL: transport.join(':'),
    GIT_NO_LAZY_FETCH: '1',
    GIT_NO_REPLACE_OBJECTS: '1',
    GIT_GRAFT_FILE: '/dev/null',
  };
}

/** The same settings as `-c` arguments, for the front of a git command line (they win over every config file). */
export function safeGitArgs(): string[] {
  return SAFE_CONFIG.flatMap(([key, value]) => ['-c', `${key}=${value}`]);
}

const REMOTE_SCHEMES: ReadonlyMap<string, GitProtocol> = new Map<string, GitProtocol>([
  ['file', 'file'],
  ['git', 'git'],
  ['http', 'http'],
  ['https', 'https'],
  ['ssh', 'ssh'],
  ['git+ssh', 'ssh'],
  ['ssh+git', 'ssh'],
]);

/**
 * The protocol git uses for `remote` (a URL, `host:path` or a path), as git itself tells them apart: `scheme://`, a
 * colon before any slash (ssh), else a local path. A remote helper (`name::address`) or another scheme is
 * `INVALID_INPUT`: proofgate opens no other transport.
 */
export function remoteProtocol(remote: string): GitProtocol {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(remote)?.[1]?.toLowerCase();
  const helper = /^[A-Za-z][A-Za-z0-9+.-]*::/.test(remote);
  const protocol = scheme !== undefined ? REMOTE_SCHEMES.get(scheme) : helper ? undefined : /^[^/]*:/.test(remote) ? 'ssh' : 'file';
  if (protocol === undefined) throw new ProofgateError('INVALID_INPUT', 'a git remote must be an https, http, ssh or git URL, or a path');
  return protocol;
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
 * The commands that can run a program an attribute names: a filter driver's
 * `clean`, `smudge` or `process` (whenever git reads or writes work-tree files:
 * `status` hashes a file whose stat changed, `read-tree -u` and `checkout`
 * write files) or a merge driver's `driver` (`merge-tree`, `merge`,
 * `cherry-pick`, `rebase`). The attribute may come from a `.gitattributes` in
 * the work tree or from `info/attributes`, and the program from the
 * repository's config, both writable by whatever ran in the repository.
 */
export const DRIVER_COMMANDS: ReadonlySet<string> = new Set([
  'add',
  'am',
  'apply',
  'checkout',
  'cherry-pick',
  'commit',
  'merge',
  'merge-tree',
  'read-tree',
  'rebase',
  'reset',
  'restore',
  'stash',
  'status',
  'switch',
  'worktree',
]);

const DRIVER_KEY = /^(filter|merge)\.(.+)\.(clean|smudge|process|required|driver)$/i;

/**
 * Settings that switch off every filter and merge driver the repository's own
 * config at `cwd` defines (its `config` and `config.worktree` and what they
 * include; the user's global drivers stay) (names are the config's, so they are read first,
 * with `git config`, which runs nothing; they reach git in its environment,
 * where a name with `=` in it stays whole): a filter's programs become
 * empty (git then passes the bytes through) and it is not required, and a
 * merge driver becomes `false`, so a file it would merge is a conflict. A
 * directory that is not a repository has none.
 */
export async function driverOverrides(cwd: string): Promise<[string, string][]> {
  // Exit 1: no such key; 128: no repository there or a config git cannot read, which the command itself then fails on
  // alike. Any other failure is runGit's GIT error: the command that needed the list does not run with drivers on.
  const listed = await runGit(cwd, ['config', '--show-scope', '--null', '--name-only', '--get-regexp', '^(filter|merge)[.]'], {
    okExitCodes: [1, 128],
    timeoutMs: 60_000,
    maxBuffer: 4 * 1024 * 1024,
  });
  return listed.exitCode === 128 ? [] : driverSwitches(listed.stdout.toString('utf8'));
}

/** The settings that switch off the drivers `git config --show-scope --null --name-only` listed (scope, then name). Pure. */
export function driverSwitches(listing: string): [string, string][] {
  const overrides = new Map<string, string>();
  const fields = listing.split('\0');
  for (let i = 0; i + 1 < fields.length; i += 2) {
    // The user's own (global) drivers, such as git-lfs's filter, are the user's choice and stay.
    if (fields[i] !== 'local' && fields[i] !== 'worktree') continue;
    const found = DRIVER_KEY.exec(fields[i + 1] ?? '');
    if (found === null) continue;
    const [, kind = '', name = ''] = found;
    if (kind.toLowerCase() === 'filter') {
      for (const part of ['clean', 'smudge', 'process']) overrides.set(`filter.${name}.${part}`, '');
      overrides.set(`filter.${name}.required`, 'false');
    } else {
      overrides.set(`merge.${name}.driver`, 'false');
    }
  }
  return [...overrides];
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
  const drivers = DRIVER_COMMANDS.has(args[0] ?? '') ? await driverOverrides(cwd) : [];
  const run = await runProcess({
    // git changes to `cwd` itself (-C): a missing directory is git's own error, and proofgate's working directory never matters.
    argv: ['git', '-C', resolve(cwd), ...safeGitArgs(), ...config, ...args],
    cwd: '/',
    env: gitEnvironment(options.env, options.isolated === true, secretConfig, options.transport ?? [], drivers),
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

/**
 * Ask the repository's persistent object reader (git-reader.ts) about `name`,
 * answering exactly as the one-process command `spawn` would: the reader
 * cannot take every name (a line break, or an empty name), and it stops when
 * git dies on a name (`branch@{upstream}` without an upstream), so those and
 * a reader killed under the request go to `spawn`. A repository directory
 * that is gone is a `GIT` error, never "no such object" (a reader started
 * before it went would answer that).
 */
async function askReader<T extends GitObjectInfo>(
  dir: string,
  name: string,
  ask: (name: string) => Promise<T | null>,
  spawn: () => Promise<T | null>,
): Promise<T | null> {
  let answer: T | null;
  try {
    answer = readerCanAsk(name) ? await ask(name) : await spawn();
  } catch (error) {
    if (!isProofgateError(error, 'GIT')) throw error;
    answer = await spawn();
  }
  if (answer === null && !existsSync(resolve(dir))) throw new ProofgateError('GIT', `not a git repository: ${resolve(dir)} (no such directory)`, { path: dir });
  return answer;
}

export interface ReadOptions {
  /**
   * When the one-process fallback's git fails outright (exit 128: not a repository, or git died on the name), answer
   * null (default) or throw its `GIT` error.
   */
  readonly gitFailureIsNone?: boolean;
}

/**
 * The object id, type and size `name` resolves to in the repository at `dir` (any name `git rev-parse --verify
 * --end-of-options` takes), or null when it names no object the repository has (unlike rev-parse, which prints a
 * full object id without looking for the object).
 */
export function objectInfo(dir: string, name: string, options: ReadOptions = {}): Promise<GitObjectInfo | null> {
  return askReader(
    dir,
    name,
    (line) => gitObjectReader(dir).info(line),
    async () => {
      const okExitCodes = options.gitFailureIsNone === false ? [1] : [1, 128];
      const run = await runGit(dir, ['rev-parse', '--verify', '--quiet', '--end-of-options', name], { okExitCodes });
      const oid = run.stdout.toString('utf8').trim();
      if (run.exitCode !== 0 || oid === '') return null;
      const found = /^(\S+) (commit|tree|blob|tag) (\d+)$/.exec(await gitText(dir, ['cat-file', '--batch-check'], { input: `${oid}\n` }));
      return found === null ? null : { oid, type: found[2] as GitObjectInfo['type'], size: Number(found[3]) };
    },
  );
}

/** The object `name` resolves to with its bytes, or null when it names none (see `objectInfo`). */
export function readObject(dir: string, name: string): Promise<GitObject | null> {
  return askReader(
    dir,
    name,
    (line) => gitObjectReader(dir).contents(line),
    async () => {
      const info = await objectInfo(dir, name).catch(() => null);
      if (info === null) return null;
      const bytes = (await runGit(dir, ['cat-file', info.type, info.oid])).stdout;
      return { ...info, bytes };
    },
  );
}

/** The commit `rev` names (`rev^{commit}`), or null when it names none: what `git rev-parse --verify --quiet --end-of-options <rev>^{commit}` prints. */
export async function commitOf(dir: string, rev: string, options: ReadOptions = {}): Promise<string | null> {
  if (rev === '') return null;
  return (await objectInfo(dir, `${rev}^{commit}`, options))?.oid ?? null;
}

/** True when `rev` names a commit in the repository at `dir`; false for anything else (a missing object, a tree, a bad name). */
export async function hasCommit(dir: string, rev: string): Promise<boolean> {
  if (rev === '' || rev.startsWith('-')) return false;
  return (await commitOf(dir, rev)) !== null;
}

/** Full object ids proven related by `isAncestor` (oldest forgotten first). */
const knownAncestry = new Map<string, true>();
const KNOWN_ANCESTRY_ENTRIES = 4096;
const FULL_OID = /^([0-9a-f]{40}|[0-9a-f]{64})$/;

/**
 * True when `ancestor` is an ancestor of `descendant` or the same commit; a commit the repository lacks is a `GIT`
 * error. A yes for two full object ids is remembered while both commits are there: a commit's id fixes its parents
 * and so its whole history, and new objects or refs cannot undo an ancestry (a no is asked again: a shallow
 * repository may learn more history).
 */
export async function isAncestor(dir: string, ancestor: string, descendant: string, options: QueryOptions = {}): Promise<boolean> {
  if ([ancestor, descendant].some((rev) => rev === '' || rev.startsWith('-'))) throw new ProofgateError('INVALID_INPUT', 'isAncestor needs two commit names');
  const key = FULL_OID.test(ancestor) && FULL_OID.test(descendant) ? `${resolve(dir)}\0${ancestor}\0${descendant}` : null;
  // Remembered, and both commits are still there (asked of the object reader): a missing one is git's error below.
  if (key !== null && knownAncestry.has(key) && (await hasCommit(dir, ancestor)) && (await hasCommit(dir, descendant))) return true;
  const yes = (await runGit(dir, ['merge-base', '--is-ancestor', ancestor, descendant], { ...options, okExitCodes: [1] })).exitCode === 0;
  if (yes && key !== null) {
    if (knownAncestry.size >= KNOWN_ANCESTRY_ENTRIES) knownAncestry.delete(knownAncestry.keys().next().value as string);
    knownAncestry.set(key, true);
  }
  return yes;
}
