import type { ChildProcess } from 'node:child_process';
import { lstatSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PassThrough } from 'node:stream';
import { ProofgateError } from '../core/index.js';

import { gitEnvironment, gitRedactor, safeGitArgs } from './git.js';
import { runProcess } from './process.js';

/**
 * A persistent read-only object reader on one repository: one
 * `git cat-file --batch-command` kept running, asked one line per request
 * (`info <name>` or `contents <name>`), answers read back in order. It
 * replaces a `rev-parse`/`cat-file` process per question with one line on a
 * pipe.
 *
 * - It is started by the process runner like every git (own process group,
 *   the hardened environment and `-c` settings of git.ts, no shell); cat-file
 *   reads objects and refs and runs nothing of the repository's (no hook,
 *   filter, textconv or fsmonitor is consulted by `--batch-command` without
 *   `--textconv`/`--filters`, and the environment allows no transport, so a
 *   partial clone never fetches a missing object through its remote).
 * - It never keeps node alive: its handles are unref'd while no request is
 *   pending. When node ends, even by SIGKILL, the pipe closes and cat-file
 *   exits at end of input.
 * - Freshness: git reads a loose ref file on every lookup and re-reads
 *   `packed-refs` when its stat changed, and looks for new packs when an
 *   object is missing, so refs and objects written by other processes are
 *   seen by the next request.
 * - A name holding a newline, carriage return or NUL is refused
 *   (`INVALID_INPUT`): it would end the request line early and inject a
 *   second request (git also strips a trailing CR). A name starting with `-`
 *   is only ever a name here, as after `--end-of-options`.
 * - When cat-file stops (killed, or git `die()`s on a name such as
 *   `branch@{upstream}` without an upstream), every pending request fails
 *   with a `GIT` error and the next request starts a new process. So does
 *   an answer when the directory or its `.git` is no longer the one the
 *   process started in (removed, moved away, or made again at the same path).
 */

export type GitObjectType = 'commit' | 'tree' | 'blob' | 'tag';

export interface GitObjectInfo {
  readonly oid: string;
  readonly type: GitObjectType;
  readonly size: number;
}

export interface GitObject extends GitObjectInfo {
  readonly bytes: Buffer;
}

/** Characters that would end a request line (git strips a trailing CR) or cannot be sent at all. */
const LINE_BREAKING = /[\n\r\0]/;
const FOUND = /^([0-9a-f]{40}|[0-9a-f]{64}) (commit|tree|blob|tag) (\d+)$/;
/** A reader with nothing to do stops after this long; the next request starts it again. */
const IDLE_MS = 10_000;
/** Readers kept running at once (the least recently used one is closed first). */
const MAX_READERS = 8;
const STDERR_BYTES = 64 * 1024;

/**
 * Which directory `dir` and its `.git` are (device and inode; "absent" when gone). git in the reader works
 * relative to the directory it started in, so a repository removed and made again at the same path, or a `.git`
 * replaced, is another repository to a new git but not to a running reader.
 */
function identity(dir: string): string {
  const of = (path: string) => {
    try {
      const info = lstatSync(path);
      return `${info.dev}:${info.ino}`;
    } catch {
      return 'absent';
    }
  };
  return `${of(dir)}/${of(join(dir, '.git'))}`;
}

/** True when `name` can be sent to the reader as one request line. */
export function readerCanAsk(name: string): boolean {
  return name !== '' && !LINE_BREAKING.test(name);
}

interface Pending {
  readonly line: string;
  readonly contents: boolean;
  readonly resolve: (value: GitObject | GitObjectInfo | null) => void;
  readonly reject: (error: unknown) => void;
}

/** One running cat-file process and the requests it owes answers to, oldest first. */
class ReaderProcess {
  readonly pending: Pending[] = [];
  /** `identity` of the directory when the process started. */
  readonly identity: string;
  readonly #input = new PassThrough();
  #child: ChildProcess | null = null;
  #chunks: Buffer[] = [];
  #buffered = 0;
  #ended = false;
  #referenced = true;

  constructor(
    readonly dir: string,
    onEnd: (process: ReaderProcess) => void,
  ) {
    const redact = gitRedactor();
    this.identity = identity(dir);
    void runProcess({
      argv: ['git', '-C', dir, ...safeGitArgs(), 'cat-file', '--batch-command'],
      cwd: '/',
      env: gitEnvironment(),
      timeoutMs: Number.POSITIVE_INFINITY,
      // Answers are read from the pipe as they come (onSpawn); nothing is kept by the runner.
      output: { maxBytes: 0 },
      // The last bytes: git says why it stopped last (after any warnings about earlier names).
      stderr: { maxBytes: STDERR_BYTES, keep: 'tail' },
      stdin: this.#input,
      killGraceMs: 0,
      onSpawn: (child) => {
        this.#child = child;
        child.stdout?.on('data', (chunk: Buffer) => this.#receive(chunk));
        this.#reference(this.pending.length > 0);
      },
    }).then((result) => {
      this.#ended = true;
      const said = redact(result.stderr.toString('utf8')).trim().split('\n').pop() ?? '';
      const why =
        result.startError !== null
          ? `git could not be started: ${redact(result.startError)}`
          : said !== ''
            ? said
            : result.exitCode === null
              ? `killed by ${result.signal ?? 'a signal'}`
              : `exit code ${String(result.exitCode)}`;
      const error = new ProofgateError('GIT', `git cat-file --batch-command stopped: ${why}`, { dir, exitCode: result.exitCode, signal: result.signal });
      for (const request of this.pending.splice(0)) request.reject(error);
      onEnd(this);
    });
  }

  get ended(): boolean {
    return this.#ended;
  }

  get pid(): number | null {
    return this.#child?.pid ?? null;
  }

  ask(line: string, contents: boolean): Promise<GitObject | GitObjectInfo | null> {
    return new Promise((resolve, reject) => {
      this.pending.push({ line, contents, resolve, reject });
      this.#reference(true);
      this.#input.write(`${contents ? 'contents' : 'info'} ${line}\n`);
    });
  }

  /** End of input: cat-file answers what it was asked, then exits. */
  close(): void {
    this.#input.end();
  }

  /** Keep node alive only while an answer is owed. */
  #reference(on: boolean): void {
    const child = this.#child;
    if (child === null || on === this.#referenced) return;
    this.#referenced = on;
    for (const handle of [child, child.stdin, child.stdout, child.stderr] as const) {
      const target = handle as { ref?: () => void; unref?: () => void } | null;
      if (on) target?.ref?.();
      else target?.unref?.();
    }
  }

  #receive(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    const data = this.#chunks.length === 1 ? chunk : Buffer.concat(this.#chunks, this.#buffered);
    let offset = 0;
    for (;;) {
      const request = this.pending[0];
      if (request === undefined) break;
      const eol = data.indexOf(0x0a, offset);
      if (eol < 0) break;
      const header = data.subarray(offset, eol).toString('utf8');
      const found = FOUND.exec(header);
      if (found === null) {
        // `<name> missing` or `<name> ambiguous`: no object by that name.
        offset = eol + 1;
        this.pending.shift();
        request.resolve(null);
        continue;
      }
      const info: GitObjectInfo = { oid: found[1] ?? '', type: found[2] as GitObjectType, size: Number(found[3]) };
      if (!request.contents) {
        offset = eol + 1;
        this.pending.shift();
        request.resolve(info);
        continue;
      }
      const end = eol + 1 + info.size;
      if (data.length < end + 1) break;
      offset = end + 1;
      this.pending.shift();
      request.resolve({ ...info, bytes: Buffer.from(data.subarray(eol + 1, end)) });
    }
    const rest = data.subarray(offset);
    this.#chunks = rest.length === 0 ? [] : [rest];
    this.#buffered = rest.length;
    if (this.pending.length === 0) this.#reference(false);
  }
}

/** The reader of one directory (see the module comment); get one with `gitObjectReader`. */
export class GitObjectReader {
  readonly dir: string;
  #process: ReaderProcess | null = null;
  #idle: NodeJS.Timeout | undefined;

  constructor(dir: string) {
    this.dir = resolve(dir);
  }

  /** The id, type and size of the object `name` resolves to (any name `git rev-parse` takes), or null when there is none (missing or ambiguous). */
  info(name: string): Promise<GitObjectInfo | null> {
    return this.#ask(name, false) as Promise<GitObjectInfo | null>;
  }

  /** The object `name` resolves to with its bytes, or null when there is none. */
  contents(name: string): Promise<GitObject | null> {
    return this.#ask(name, true) as Promise<GitObject | null>;
  }

  /** The pid of the running cat-file, or null when none runs. */
  get pid(): number | null {
    return this.#process === null || this.#process.ended ? null : this.#process.pid;
  }

  /** Stop the process (what it was asked is still answered); the next request starts a new one. */
  close(): void {
    clearTimeout(this.#idle);
    this.#process?.close();
    this.#process = null;
  }

  async #ask(name: string, contents: boolean): Promise<GitObject | GitObjectInfo | null> {
    if (!readerCanAsk(name))
      throw new ProofgateError('INVALID_INPUT', 'an object name for the git reader must be nonempty and hold no newline, carriage return or NUL');
    clearTimeout(this.#idle);
    if (this.#process === null || this.#process.ended) {
      this.#process = new ReaderProcess(this.dir, (ended) => {
        if (this.#process === ended) this.#process = null;
      });
    }
    const running = this.#process;
    try {
      const answer = await running.ask(name, contents);
      // An answer from a reader whose repository directory was replaced, moved away or removed since it started says
      // nothing about the repository there now.
      if (identity(this.dir) !== running.identity) {
        if (this.#process === running) this.close();
        throw new ProofgateError('GIT', `git cat-file --batch-command: the repository at ${this.dir} changed under the reader`, { dir: this.dir });
      }
      return answer;
    } finally {
      if (running.pending.length === 0 && this.#process === running) {
        clearTimeout(this.#idle);
        this.#idle = setTimeout(() => this.close(), IDLE_MS);
        this.#idle.unref();
      }
    }
  }
}

const readers = new Map<string, GitObjectReader>();

/**
 * The shared reader of the repository at `dir` (one per directory, at most
 * `MAX_READERS` running; the least recently used is closed first).
 */
export function gitObjectReader(dir: string): GitObjectReader {
  const key = resolve(dir);
  let reader = readers.get(key);
  if (reader !== undefined) {
    readers.delete(key);
    readers.set(key, reader);
    return reader;
  }
  reader = new GitObjectReader(key);
  readers.set(key, reader);
  for (const [oldest, evicted] of readers) {
    if (readers.size <= MAX_READERS) break;
    readers.delete(oldest);
    evicted.close();
  }
  return reader;
}

/** Stop the shared reader of `dir`, if one runs (a later request starts it again). */
export function closeGitObjectReader(dir: string): void {
  readers.get(resolve(dir))?.close();
}

/** Stop every shared reader (a later request starts its reader again). */
export function closeGitObjectReaders(): void {
  for (const reader of readers.values()) reader.close();
  readers.clear();
}
