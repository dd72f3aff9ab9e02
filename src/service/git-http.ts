/**
 * The repository over git's smart HTTP (`proofgate serve --repo`), through
 * git's own `git http-backend`: `GET /git/<name>.git/info/refs?service=...`,
 * `POST /git/<name>.git/git-upload-pack` (fetch, clone) and `POST
 * /git/<name>.git/git-receive-pack` (push). Nothing else of the repository
 * (no dumb-HTTP object paths, no `HEAD` of another directory, never the data
 * directory) is served.
 *
 * Every request is authenticated by HTTP Basic (any user name; the password is
 * a token of `proofgate token create`), or by a bearer token: fetch needs read
 * permission, push write (the effective permission: the lower of the token's
 * and the trusted config's). Without credentials the answer is 401 with a
 * Basic challenge, so git asks its credential helper.
 *
 * A push is checked before any of it reaches git: the receive-pack commands
 * (pkt-lines at the start of the body, up to the flush) are parsed, and the
 * push is refused (403, nothing handed to git) unless every command names a
 * branch `refs/heads/<login>/...` of the pusher's own login (never a tag,
 * never another identity's branch, never a protected branch, a delete only of
 * one's own), a well-formed ref name, and a well-formed pkt-line. A
 * receive-pack body with any Content-Encoding is refused (415): the commands
 * must be read as they are. Only the command list is read before git starts;
 * the rest of a body (the pack) is streamed to git, counted against
 * `maxBodyBytes`: past it git is stopped, the answer is 413 and the connection
 * is cut.
 *
 * All git requests share one budget (`GitBudget`): at most `maxProcesses`
 * authenticated requests are served at once (each runs one `git
 * http-backend`), and the command lists being read and held by all of them
 * together stay under `maxBufferedBytes`. A request past either is refused
 * at once, before git starts (503 with `Retry-After`; nothing stored), and
 * gives back what it took; so does every request when it ends, however it
 * ends. There is no queue: a refused client tries again.
 *
 * `git http-backend` runs as the service's user with exactly the environment
 * built here (the CGI variables, `REMOTE_USER` the login, nothing of the
 * service's own environment but PATH, HOME and the locale) and with
 * `receive.fsckObjects` on. The repository's hooks are the ones in its own
 * git directory, which belongs to the service's user: a pushed file is a
 * blob, never a hook. The service's ref watch sees a pushed branch move and
 * wakes its change.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { basename } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { PassThrough, Transform, type Readable } from 'node:stream';
import type { Logger } from 'pino';
import { protectedBranchNames } from '../contracts/repo-config.js';
import { allowListedEnv } from '../host/env.js';
import { runProcess } from '../host/process.js';
import type { TrustedConfig } from '../forge/protection.js';
import type { RepoPermission } from '../forge/port.js';
import type { ApiCaller, GitEndpoint } from './http.js';
import { bearerToken, isTokenShape, permits } from './identities.js';
import { logText } from './intake.js';
import { ProofgateError } from '../core/index.js';

/** Largest request body (a push's pack) by default. */
export const DEFAULT_GIT_MAX_BODY_BYTES = 256 * 1024 * 1024;
/** Longest one git request may run by default. */
export const DEFAULT_GIT_TIMEOUT_MS = 10 * 60_000;
/** Most ref updates one push may carry. */
export const MAX_PUSH_COMMANDS = 1000;
/** Bytes all git requests may hold in memory together by default (16 push command lists of the largest size). */
export const DEFAULT_GIT_MAX_BUFFERED_BYTES = 16 * 1024 * 1024;
/** git requests served (git http-backend processes running) at once by default. */
export const DEFAULT_GIT_MAX_PROCESSES = 8;
/** Most git requests at once that `PROOFGATE_GIT_MAX_PROCESSES` may allow. */
export const MAX_GIT_PROCESSES = 1024;

/** The environment variables of the git budget. */
export const GIT_BUDGET_SETTING = { maxBufferedBytes: 'PROOFGATE_GIT_MAX_BUFFERED_BYTES', maxProcesses: 'PROOFGATE_GIT_MAX_PROCESSES' } as const;

/** The budget all git requests share. */
export interface GitBudgetSettings {
  /** Bytes of request bodies (push command lists) held in memory by all git requests together. */
  readonly maxBufferedBytes: number;
  /** Requests served at once, each running one git http-backend. */
  readonly maxProcesses: number;
}

/** What the git requests hold now. */
export interface GitBudgetUsage {
  readonly processes: number;
  readonly bufferedBytes: number;
}

/** One request's part of the budget. */
export interface GitHold {
  /** Hold `bytes` more; false (nothing taken) when that would pass the budget. */
  take(bytes: number): boolean;
  /** Give back the slot and every byte held. Safe to call more than once. */
  release(): void;
}

/** The budget of every git request of one endpoint. */
export interface GitBudget {
  readonly settings: GitBudgetSettings;
  /** A slot for one request, or null when `maxProcesses` are taken. */
  enter(): GitHold | null;
  usage(): GitBudgetUsage;
  /** Resolves once `test(usage())` holds (checked now and at each change). */
  until(test: (usage: GitBudgetUsage) => boolean): Promise<void>;
}

function budgetInteger(name: string, value: number, min: number, max: number): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new ProofgateError('CONFIG', `${name} must be an integer from ${min} to ${max}`);
  return value;
}

/**
 * The budget settings from the environment (pure): each variable unset means
 * its default; set, it must be a whole number, `PROOFGATE_GIT_MAX_BUFFERED_BYTES`
 * at least one command list's cap (1 MiB), `PROOFGATE_GIT_MAX_PROCESSES` from
 * 1 to 1024. A bad value is a CONFIG error naming the variable, never its value.
 */
export function gitBudgetSettingsFrom(env: Readonly<Record<string, string | undefined>>): GitBudgetSettings {
  const read = (name: string, fallback: number, min: number, max: number): number => {
    const text = env[name];
    if (text === undefined) return fallback;
    return budgetInteger(name, /^[0-9]{1,16}$/.test(text) ? Number(text) : Number.NaN, min, max);
  };
  return {
    maxBufferedBytes: read(GIT_BUDGET_SETTING.maxBufferedBytes, DEFAULT_GIT_MAX_BUFFERED_BYTES, MAX_COMMAND_LIST_BYTES, Number.MAX_SAFE_INTEGER),
    maxProcesses: read(GIT_BUDGET_SETTING.maxProcesses, DEFAULT_GIT_MAX_PROCESSES, 1, MAX_GIT_PROCESSES),
  };
}

/** A budget for one endpoint (the defaults where a setting is not given). */
export function gitBudget(settings: Partial<GitBudgetSettings> = {}): GitBudget {
  const limits: GitBudgetSettings = {
    maxBufferedBytes: budgetInteger('maxBufferedBytes', settings.maxBufferedBytes ?? DEFAULT_GIT_MAX_BUFFERED_BYTES, 1, Number.MAX_SAFE_INTEGER),
    maxProcesses: budgetInteger('maxProcesses', settings.maxProcesses ?? DEFAULT_GIT_MAX_PROCESSES, 1, MAX_GIT_PROCESSES),
  };
  let processes = 0;
  let bufferedBytes = 0;
  const checks = new Set<() => void>();
  const changed = (): void => {
    for (const check of [...checks]) check();
  };
  const usage = (): GitBudgetUsage => ({ processes, bufferedBytes });
  return {
    settings: limits,
    usage,
    until(test) {
      return new Promise((resolve) => {
        const check = (): void => {
          if (!test(usage())) return;
          checks.delete(check);
          resolve();
        };
        checks.add(check);
        check();
      });
    },
    enter() {
      if (processes >= limits.maxProcesses) return null;
      processes += 1;
      let held = 0;
      let released = false;
      changed();
      return {
        take(bytes) {
          if (released || bufferedBytes + bytes > limits.maxBufferedBytes) return false;
          bufferedBytes += bytes;
          held += bytes;
          changed();
          return true;
        },
        release() {
          if (released) return;
          released = true;
          processes -= 1;
          bufferedBytes -= held;
          held = 0;
          changed();
        },
      };
    },
  };
}

const ZERO = /^0+$/;
const OID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/** One ref update of a push. */
export interface RefCommand {
  readonly oldOid: string;
  readonly newOid: string;
  readonly ref: string;
}

/**
 * The ref updates at the start of a receive-pack body (pkt-lines up to the
 * first flush `0000`), or why they cannot be read. Pure. A line whose length
 * is under 4 (other than the flush) or past the body, a line that is not
 * `<old> <new> <ref>` (the first with `\0` and capabilities), a push
 * certificate, or a body without the flush is a problem.
 */
export function parseReceiveCommands(body: Buffer): { readonly commands: RefCommand[] } | { readonly problem: string } {
  const commands: RefCommand[] = [];
  let at = 0;
  for (;;) {
    if (at + 4 > body.length) return { problem: 'the push ends before its command list does' };
    const head = body.subarray(at, at + 4).toString('latin1');
    if (!/^[0-9a-f]{4}$/i.test(head)) return { problem: 'a push command line has no valid pkt-line length' };
    const length = parseInt(head, 16);
    if (length === 0) return commands.length === 0 ? { problem: 'the push names no ref' } : { commands };
    if (length < 4) return { problem: `a push command line has the reserved length ${length}` };
    if (at + length > body.length) return { problem: 'a push command line claims more bytes than the push has' };
    let line = body.subarray(at + 4, at + length).toString('latin1');
    at += length;
    if (line.endsWith('\n')) line = line.slice(0, -1);
    if (line.startsWith('shallow ')) continue;
    if (line.startsWith('push-cert')) return { problem: 'signed pushes are not taken' };
    const nul = line.indexOf('\0');
    if (nul >= 0) line = line.slice(0, nul);
    const match = /^(\S+) (\S+) (.+)$/s.exec(line);
    if (match === null || !OID.test(match[1] as string) || !OID.test(match[2] as string)) return { problem: 'a push command is not "<old> <new> <ref>"' };
    commands.push({ oldOid: match[1] as string, newOid: match[2] as string, ref: match[3] as string });
    if (commands.length > MAX_PUSH_COMMANDS) return { problem: `a push may update at most ${MAX_PUSH_COMMANDS} refs` };
  }
}

/** Why `branch` is not a well-formed branch name (git's check-ref-format rules), or null. Pure. */
export function branchNameProblem(branch: string): string | null {
  if (branch === '' || branch.length > 255) return 'an empty or overlong branch name';
  if ([...branch].some((char) => char.charCodeAt(0) <= 0x20 || char.charCodeAt(0) === 0x7f) || /[~^:?*[\\]/.test(branch))
    return 'a branch name with a control character, a space or one of ~^:?*[\\';
  if (branch.includes('..') || branch.includes('@{') || branch.includes('//') || branch === '@') return 'a branch name with "..", "@{" or "//"';
  if (branch.endsWith('/') || branch.endsWith('.')) return 'a branch name ending in "/" or "."';
  if (branch.split('/').some((part) => part.startsWith('.') || part.endsWith('.lock'))) return 'a branch name part starting with "." or ending in ".lock"';
  return null;
}

/**
 * Why `login` may not make this ref update, or null when it may (pure): only
 * `refs/heads/<login>/<name>` (a branch of its own), never a protected branch
 * (`protectedNames`, compared without letter case).
 */
export function pushRefusal(command: RefCommand, login: string, protectedNames: readonly string[]): string | null {
  const shown = logText(command.ref, 120);
  if (!command.ref.startsWith('refs/heads/')) {
    return command.ref.startsWith('refs/tags/') ? `tags are not pushed here (${shown})` : `only branches are pushed here, not ${shown}`;
  }
  const branch = command.ref.slice('refs/heads/'.length);
  const problem = branchNameProblem(branch);
  if (problem !== null) return `${problem}: ${shown}`;
  if (protectedNames.some((name) => name.toLowerCase() === branch.toLowerCase())) return `"${shown}" is a protected branch: it moves only by a merge`;
  if (!branch.startsWith(`${login}/`) || branch.length === login.length + 1) {
    const what = ZERO.test(command.newOid) ? 'delete' : 'push to';
    return `${login} may ${what} only branches under refs/heads/${login}/, not ${shown}`;
  }
  return null;
}

/** The part of a served path after `/git/<name>.git/`, when it is one git's smart HTTP uses; else null. Pure. */
export function gitRoute(path: string, name: string): 'info/refs' | 'git-upload-pack' | 'git-receive-pack' | null {
  const prefix = `/git/${name}.git/`;
  if (!path.startsWith(prefix)) return null;
  const rest = path.slice(prefix.length);
  return rest === 'info/refs' || rest === 'git-upload-pack' || rest === 'git-receive-pack' ? rest : null;
}

/** The token of a Basic (password) or Bearer Authorization header, or why there is none usable. Pure. */
export function gitCredential(header: string | readonly string[] | undefined): { readonly token: string | null } | { readonly problem: string } {
  if (header === undefined) return { token: null };
  if (typeof header !== 'string') return { problem: 'more than one Authorization header' };
  const basic = /^Basic +([A-Za-z0-9+/=]+) *$/i.exec(header);
  if (basic === null) return bearerToken(header);
  const decoded = Buffer.from(basic[1] as string, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? { problem: 'the Basic credentials have no password' } : { token: decoded.slice(colon + 1) };
}

export interface GitHttpOptions {
  /** The repository's root and git directory. */
  readonly repo: { readonly root: string; readonly commonDir: string };
  readonly authenticate: (token: string) => Promise<ApiCaller | null>;
  /** The trusted branch and its config, read at each push (its protected branches). */
  readonly trusted: () => Promise<TrustedConfig>;
  readonly logger: Logger;
  readonly maxBodyBytes?: number;
  readonly timeoutMs?: number;
  /** Shared by every request (default: `gitBudget()`, the defaults). */
  readonly budget?: GitBudget;
  /** The environment the service runs in (PATH, HOME and the locale are passed on; default process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/** The name a repository is served under: its directory's name, `/git/<name>.git/`. Pure. */
export function servedName(root: string): string {
  return basename(root).replace(/\.git$/, '') || 'repo';
}

/** A POST body: the bytes read so far, and whether the request ended there (else the rest is still in it). */
interface BodySource {
  readonly head: Buffer;
  readonly ended: boolean;
}

interface Refusal {
  readonly status: number;
  readonly text: string;
  readonly headers?: Record<string, string>;
}

function refuse(req: IncomingMessage, res: ServerResponse, refusal: Refusal): void {
  const text = `${refusal.text}\n`;
  res.writeHead(refusal.status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text), ...refusal.headers });
  res.end(text);
  let discarded = 0;
  req.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > 1024 * 1024) req.socket.destroy();
  });
  req.resume();
}

/**
 * Read the start of a body until `complete` says it has enough (or the body
 * ends); what follows stays in the (paused) request. Past `maxHead` bytes:
 * `too-large`.
 */
function readHead(
  req: IncomingMessage,
  maxHead: number,
  complete: (head: Buffer) => boolean,
  hold: GitHold,
): Promise<{ readonly head: Buffer; readonly ended: boolean } | 'too-large' | 'over-budget' | 'aborted'> {
  return new Promise((resolve) => {
    let head = Buffer.alloc(0);
    const finish = (value: { readonly head: Buffer; readonly ended: boolean } | 'too-large' | 'over-budget' | 'aborted'): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      if (typeof value !== 'string' && !value.ended) req.pause();
      resolve(value);
    };
    const onData = (chunk: Buffer): void => {
      if (!hold.take(chunk.length)) return finish('over-budget');
      head = Buffer.concat([head, chunk]);
      if (complete(head)) finish({ head, ended: false });
      else if (head.length > maxHead) finish('too-large');
    };
    const onEnd = (): void => finish({ head, ended: true });
    const onClose = (): void => finish('aborted');
    // A client that left while its token was checked: its 'close' has passed.
    if (req.destroyed) return resolve('aborted');
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('close', onClose);
    if (complete(head)) finish({ head, ended: false });
  });
}

/**
 * Whether `head` holds the whole command list of a push (its flush), or a
 * malformed line that ends the reading anyway: more bytes cannot change
 * what `parseReceiveCommands` says. Pure.
 */
export function commandListComplete(head: Buffer): boolean {
  let at = 0;
  for (;;) {
    if (at + 4 > head.length) return false;
    const text = head.subarray(at, at + 4).toString('latin1');
    if (!/^[0-9a-f]{4}$/i.test(text)) return true;
    const length = parseInt(text, 16);
    if (length < 4) return true;
    if (at + length > head.length) return false;
    at += length;
  }
}

/** The most bytes of a push's command list read before it is judged. */
export const MAX_COMMAND_LIST_BYTES = 1024 * 1024;

/** The answer to a request over the budget (pure). */
function busy(why: string): Refusal {
  return { status: 503, text: `busy: ${why}; retry later (nothing was changed)`, headers: { 'retry-after': '1' } };
}

/** Parse the CGI header block of http-backend's output; null until it is complete. Pure. */
export function cgiHeaders(buffered: Buffer): { status: number; headers: [string, string][]; rest: Buffer } | null {
  let end = buffered.indexOf('\r\n\r\n');
  let skip = 4;
  const lf = buffered.indexOf('\n\n');
  if (end < 0 || (lf >= 0 && lf < end)) {
    end = lf;
    skip = 2;
  }
  if (end < 0) return null;
  const headers: [string, string][] = [];
  let status = 200;
  for (const line of buffered.subarray(0, end).toString('latin1').split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === 'status') status = Number(/^\d{3}/.exec(value)?.[0] ?? 500);
    else headers.push([name, value]);
  }
  return { status, headers, rest: buffered.subarray(end + skip) };
}

/** The `/git/` endpoint of a served repository. */
export function gitHttpEndpoint(options: GitHttpOptions): GitEndpoint {
  const { logger } = options;
  const name = servedName(options.repo.root);
  const limit = options.maxBodyBytes ?? DEFAULT_GIT_MAX_BODY_BYTES;
  const timeoutMs = options.timeoutMs ?? DEFAULT_GIT_TIMEOUT_MS;
  const parentEnv = options.env ?? process.env;
  const budget = options.budget ?? gitBudget();

  return {
    async handle(req, res, path, query) {
      const route = gitRoute(path, name);
      const method = req.method ?? 'GET';
      if (route === null) return refuse(req, res, { status: 404, text: `no such path: ${logText(path)}` });
      const service = route === 'info/refs' ? /(?:^|&)service=(git-upload-pack|git-receive-pack)(?:&|$)/.exec(query)?.[1] : route;
      if (service === undefined)
        return refuse(req, res, { status: 403, text: 'only smart HTTP is served: info/refs?service=git-upload-pack or git-receive-pack' });
      if ((route === 'info/refs' && method !== 'GET') || (route !== 'info/refs' && method !== 'POST')) {
        return refuse(req, res, {
          status: 405,
          text: `${logText(method)} is not allowed on ${logText(path)}`,
          headers: { allow: route === 'info/refs' ? 'GET' : 'POST' },
        });
      }
      const challenge = { 'www-authenticate': 'Basic realm="proofgate", charset="UTF-8"' };
      const credential = gitCredential(
        req.headersDistinct.authorization === undefined
          ? undefined
          : req.headersDistinct.authorization.length === 1
            ? req.headersDistinct.authorization[0]
            : req.headersDistinct.authorization,
      );
      if ('problem' in credential) return refuse(req, res, { status: 401, text: credential.problem, headers: challenge });
      if (credential.token === null) return refuse(req, res, { status: 401, text: 'a token is needed (the password of HTTP Basic)', headers: challenge });
      const caller = isTokenShape(credential.token) ? await options.authenticate(credential.token) : null;
      if (caller === null) {
        logger.warn({ path: logText(path), status: 401 }, 'git request with an unknown or revoked token');
        return refuse(req, res, { status: 401, text: 'the token is unknown or revoked', headers: challenge });
      }
      const needed: RepoPermission = service === 'git-receive-pack' ? 'write' : 'read';
      if (!permits(caller.permission, needed)) {
        return refuse(req, res, { status: 403, text: `${caller.login} may not ${needed === 'write' ? 'push' : 'fetch'} (permission ${caller.permission})` });
      }
      const hold = budget.enter();
      if (hold === null) {
        logger.warn({ login: caller.login, service, status: 503, maxProcesses: budget.settings.maxProcesses }, 'git request over the budget');
        return refuse(req, res, busy(`${budget.settings.maxProcesses} git requests are being served`));
      }
      try {
        await serve(req, res, { service, route, query, caller, hold });
      } finally {
        hold.release();
      }
    },
  };

  async function serve(
    req: IncomingMessage,
    res: ServerResponse,
    request: { service: string; route: 'info/refs' | 'git-upload-pack' | 'git-receive-pack'; query: string; caller: ApiCaller; hold: GitHold },
  ): Promise<void> {
    const { service, route, query, caller } = request;
    const method = req.method ?? 'GET';
    let body: BodySource | undefined;
    if (method === 'POST') {
      if (service === 'git-receive-pack' && req.headers['content-encoding'] !== undefined) {
        return refuse(req, res, { status: 415, text: 'a push body may not have a Content-Encoding' });
      }
      const declared = req.headers['content-length'];
      if (declared !== undefined && /^\d+$/.test(declared) && Number(declared) > limit)
        return refuse(req, res, { status: 413, text: `the body is over ${limit} bytes` });
      // Only a push's command list is read here; the rest (the pack) is streamed to git.
      const read =
        service === 'git-receive-pack'
          ? await readHead(req, MAX_COMMAND_LIST_BYTES, commandListComplete, request.hold)
          : await readHead(req, 0, () => true, request.hold);
      if (read === 'aborted') return;
      if (read === 'over-budget') {
        logger.warn({ login: caller.login, service, status: 503, maxBufferedBytes: budget.settings.maxBufferedBytes }, 'git request over the budget');
        return refuse(req, res, busy(`the git requests being served hold ${budget.settings.maxBufferedBytes} bytes`));
      }
      if (read === 'too-large') return refuse(req, res, { status: 413, text: `a push's command list is over ${MAX_COMMAND_LIST_BYTES} bytes` });
      if (read.head.length > limit) return refuse(req, res, { status: 413, text: `the body is over ${limit} bytes` });
      body = read;
      if (service === 'git-receive-pack') {
        const parsed = parseReceiveCommands(read.head);
        if ('problem' in parsed) return refuse(req, res, { status: 400, text: `push refused: ${parsed.problem}` });
        const trusted = await options.trusted();
        const names = protectedBranchNames(trusted.branch, trusted.config);
        for (const command of parsed.commands) {
          const refusal = pushRefusal(command, caller.login, names);
          if (refusal !== null) {
            logger.warn({ login: caller.login, ref: logText(command.ref, 120), status: 403 }, 'push refused');
            return refuse(req, res, { status: 403, text: `push refused: ${refusal}` });
          }
        }
        logger.info({ login: caller.login, refs: parsed.commands.map((command) => logText(command.ref, 120)) }, 'push accepted for git');
      }
    }
    await runBackend(req, res, { service, route, query, body, caller });
  }

  async function runBackend(
    req: IncomingMessage,
    res: ServerResponse,
    request: { service: string; route: string; query: string; body: BodySource | undefined; caller: ApiCaller },
  ): Promise<void> {
    const gitDir = options.repo.commonDir;
    const env = allowListedEnv(parentEnv, ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TZ'], {
      GIT_PROJECT_ROOT: gitDir,
      GIT_HTTP_EXPORT_ALL: '1',
      PATH_INFO: `/${request.route}`,
      REQUEST_METHOD: req.method ?? 'GET',
      QUERY_STRING: request.route === 'info/refs' ? `service=${request.service}` : '',
      CONTENT_TYPE: String(req.headers['content-type'] ?? ''),
      REMOTE_USER: request.caller.login,
      REMOTE_ADDR: req.socket.remoteAddress ?? '',
      GIT_COMMITTER_NAME: request.caller.login,
      GIT_COMMITTER_EMAIL: `${request.caller.login}@proofgate.invalid`,
      GIT_CONFIG_NOSYSTEM: '1',
      ...(request.body !== undefined && /^\d+$/.test(req.headers['content-length'] ?? '') ? { CONTENT_LENGTH: req.headers['content-length'] as string } : {}),
      ...(req.headers['content-encoding'] === undefined ? {} : { HTTP_CONTENT_ENCODING: String(req.headers['content-encoding']) }),
      ...(req.headers['git-protocol'] === undefined ? {} : { GIT_PROTOCOL: String(req.headers['git-protocol']) }),
    });
    let buffered: Buffer | null = Buffer.alloc(0);
    const stream = (child: ChildProcess): void => {
      child.stdout?.on('data', (chunk: Buffer) => {
        if (buffered !== null) {
          buffered = Buffer.concat([buffered, chunk]);
          const parsed = cgiHeaders(buffered);
          if (parsed === null) {
            if (buffered.length > 64 * 1024) child.kill('SIGKILL');
            return;
          }
          buffered = null;
          res.writeHead(parsed.status, Object.fromEntries(parsed.headers.filter(([key]) => !/^(connection|transfer-encoding)$/i.test(key))));
          chunk = parsed.rest;
        }
        if (chunk.length > 0 && !res.write(chunk)) {
          child.stdout?.pause();
          res.once('drain', () => child.stdout?.resume());
        }
      });
    };
    // A client gone before git starts: nothing to run (its 'close' has passed, so it would not stop git).
    if (res.destroyed) return;
    const aborter = new AbortController();
    res.once('close', () => aborter.abort());
    let overLimit = false;
    let stdin: Readable | undefined;
    if (request.body !== undefined) {
      // The bytes already read, then the rest of the request, counted against the cap as it passes.
      let total = request.body.head.length;
      const counted = new PassThrough();
      counted.write(request.body.head);
      if (request.body.ended) counted.end();
      else {
        const cap = new Transform({
          transform(chunk: Buffer, _encoding, done) {
            total += chunk.length;
            if (total > limit) {
              overLimit = true;
              aborter.abort();
              done(new Error('over the limit'));
            } else done(null, chunk);
          },
        });
        cap.on('error', () => counted.destroy());
        req.pipe(cap).pipe(counted);
      }
      stdin = counted;
    }
    const result = await runProcess({
      argv: ['git', '-c', 'receive.fsckObjects=true', 'http-backend'],
      cwd: gitDir,
      env,
      timeoutMs,
      // Streamed to the client as it comes: only a byte of it is kept here.
      output: { maxBytes: 1 },
      stderr: { maxBytes: 16 * 1024, keep: 'tail' },
      ...(stdin === undefined ? {} : { stdin }),
      signal: aborter.signal,
      onSpawn: stream,
    });
    if (result.startError !== null || (result.exitCode !== 0 && buffered !== null)) {
      logger.error({ err: result.startError ?? logText(result.stderr.toString('utf8'), 500), exitCode: result.exitCode }, 'git http-backend failed');
    }
    if (overLimit) {
      if (!res.headersSent) res.writeHead(413, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' });
      res.end(`the body is over ${limit} bytes\n`);
      req.socket.destroy();
      return;
    }
    if (!res.headersSent) {
      const text = 'git could not answer\n';
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    res.end();
    logger.info({ login: request.caller.login, service: request.service, exitCode: result.exitCode }, 'git request served');
  }
}
