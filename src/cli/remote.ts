/**
 * Client mode: with `PROOFGATE_URL` set (and `PROOFGATE_TOKEN`, the token of
 * `proofgate token create`), `proofgate change open|list|show|comment|close`,
 * `proofgate checks run` and `proofgate automerge ID` talk to a `proofgate
 * serve --repo` server instead of opening the repository and the data
 * directory. The token is the identity: `--as` is refused. A server's refusal
 * comes back as the typed error direct mode would raise (the same code, so the
 * same exit status). The token is sent only in the Authorization header and
 * never appears in any output or error text. A job a comment started or
 * joined is followed through the server's progress stream (NDJSON), whose
 * lines the command prints as direct mode prints its own.
 */
import { ProofgateError, type ErrorCode } from '../core/index.js';
import { ERROR_CODES } from '../core/errors.js';
import { loadHttp, loadHttps } from '../host/index.js';
import { usageError } from './io.js';

/** The request function for `url`'s protocol. */
function requestFor(url: URL): typeof import('node:http').request {
  return url.protocol === 'https:' ? loadHttps().request : loadHttp().request;
}

/** Where a client-mode command sends its requests. */
export interface RemoteTarget {
  /** The server's base URL (no path, no credentials). */
  readonly url: string;
  readonly token: string | null;
}

/** The server to talk to, from the environment, or null (direct mode). Bad settings are a usage error. */
export function remoteTarget(env: Readonly<Record<string, string | undefined>> = process.env): RemoteTarget | null {
  const url = env.PROOFGATE_URL;
  if (url === undefined || url === '') return null;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw usageError('PROOFGATE_URL is not a URL (e.g. http://127.0.0.1:8080)');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw usageError('PROOFGATE_URL must be an http:// or https:// URL');
  if (parsed.username !== '' || parsed.password !== '') throw usageError('PROOFGATE_URL must not hold credentials; set PROOFGATE_TOKEN');
  const token = env.PROOFGATE_TOKEN;
  return { url: parsed.origin, token: token === undefined || token === '' ? null : token };
}

/** Refuse `--as` in client mode: the token names who acts. */
export function refuseAs(as: string | undefined): void {
  if (as !== undefined) throw usageError('--as is not taken in client mode (PROOFGATE_URL): the token is the identity');
}

/** Refuse a command client mode does not offer. */
export function notRemote(command: string): ProofgateError {
  return usageError(`${command} is not available in client mode (PROOFGATE_URL); run it where the repository is served`);
}

const STATUS_CODES: Readonly<Record<number, ErrorCode>> = {
  400: 'INVALID_INPUT',
  401: 'FORGE_AUTH',
  403: 'READ_ONLY',
  404: 'NOT_FOUND',
  409: 'NOT_MERGEABLE',
  413: 'INVALID_INPUT',
  415: 'INVALID_INPUT',
  421: 'FORGE_AUTH',
};

/** The typed error of a refused request (the server's code when it sent a known one). Pure. */
export function remoteError(status: number, body: unknown, token: string | null): ProofgateError {
  const record = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  const sent = typeof record.code === 'string' && (ERROR_CODES as readonly string[]).includes(record.code) ? (record.code as ErrorCode) : null;
  const code = sent ?? STATUS_CODES[status] ?? 'FORGE_API';
  let message = typeof record.error === 'string' && record.error !== '' ? record.error : `the server answered ${status}`;
  if (token !== null && token !== '') message = message.split(token).join('[token]');
  if (status === 401) message = `${message} (check PROOFGATE_TOKEN)`;
  return new ProofgateError(code, message.slice(0, 2000), { status });
}

/** One HTTP exchange (node:http, no time limit: a check run or an automerge wait may take long). */
function exchange(url: URL, method: string, headers: Record<string, string>, body: string | undefined): Promise<{ status: number; text: string }> {
  const send = requestFor(url);
  return new Promise((resolve, reject) => {
    const req = send(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES) req.destroy(new Error('the answer is too large'));
        else chunks.push(chunk);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The largest answer read from a server. */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/** One request to the server; the parsed JSON answer, or the typed error of a refusal. */
export async function remoteCall<T = Record<string, unknown>>(target: RemoteTarget, method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (target.token !== null) headers.authorization = `Bearer ${target.token}`;
  const text = body === undefined ? undefined : JSON.stringify(body);
  if (text !== undefined) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(Buffer.byteLength(text));
  }
  let answer: { status: number; text: string };
  try {
    answer = await exchange(new URL(path, target.url), method, headers, text);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ProofgateError('IO', `cannot reach the proofgate server at ${target.url}${code === undefined ? '' : ` (${code})`}`);
  }
  let parsed: unknown = null;
  try {
    parsed = answer.text === '' ? null : JSON.parse(answer.text);
  } catch {
    parsed = null;
  }
  if (answer.status < 200 || answer.status > 299) throw remoteError(answer.status, parsed, target.token);
  if (parsed === null || typeof parsed !== 'object') throw new ProofgateError('FORGE_API', `the server's answer to ${method} ${path} is not JSON`);
  return parsed as T;
}

/** What `outcomeJson` on the server sends: the fields `proofgate automerge --json` prints. */
export interface RemoteOutcome {
  readonly change: string;
  readonly outcome: 'merged' | 'blocked' | 'waiting' | 'parked' | 'stopped' | 'interrupted';
  readonly code: string | null;
  readonly reason: string;
  readonly head: string | null;
  readonly mergeCommit: string | null;
  readonly verdict: string | null;
  readonly repairs: number;
  readonly timeline: unknown;
}

/** How a followed job ended: it ran to an outcome, or another process holds the change's job. */
export type FollowedJob =
  { readonly kind: 'ran'; readonly outcome: RemoteOutcome } | { readonly kind: 'held-elsewhere'; readonly holder: string; readonly until: string };

/** One progress line of a followed job, as the server streams it (`text` is untrusted: print it escaped). */
export interface RemoteProgress {
  readonly changeId: string;
  readonly at: string;
  readonly text: string;
}

/** What one line of a progress stream says. Pure. */
export type StreamItem =
  | { readonly kind: 'progress'; readonly seq: number; readonly progress: RemoteProgress }
  | { readonly kind: 'dropped'; readonly count: number }
  | { readonly kind: 'end'; readonly end: Record<string, unknown> };

/** Read one NDJSON line of a progress stream; null for one this client does not know (skipped). Pure. */
export function streamItem(line: string): StreamItem | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw new ProofgateError('FORGE_API', "the server's progress stream holds a line that is not JSON");
  }
  const record = typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
  const progress = record.progress as Record<string, unknown> | undefined;
  if (typeof progress === 'object' && progress !== null) {
    const { seq, changeId, at, text } = progress;
    if (typeof seq === 'number' && typeof changeId === 'string' && typeof at === 'string' && typeof text === 'string')
      return { kind: 'progress', seq, progress: { changeId, at, text } };
  }
  const dropped = record.dropped as Record<string, unknown> | undefined;
  if (typeof dropped === 'object' && dropped !== null && typeof dropped.count === 'number') return { kind: 'dropped', count: dropped.count };
  if (typeof record.end === 'object' && record.end !== null) return { kind: 'end', end: record.end as Record<string, unknown> };
  return null;
}

/** The longest line of a progress stream this client reads. */
const MAX_STREAM_LINE = 4 * 1024 * 1024;

/**
 * Read one progress stream to its end line (null: the answer ended without
 * one, e.g. the server stopped), handing each item to `onItem`. A refusal is
 * its typed error, as for `remoteCall`.
 */
function readStream(target: RemoteTarget, path: string, onItem: (item: Exclude<StreamItem, { kind: 'end' }>) => void): Promise<Record<string, unknown> | null> {
  const url = new URL(path, target.url);
  const send = requestFor(url);
  const headers: Record<string, string> = { accept: 'application/x-ndjson' };
  if (target.token !== null) headers.authorization = `Bearer ${target.token}`;
  return new Promise((resolve, reject) => {
    const req = send(url, { method: 'GET', headers }, (res) => {
      const status = res.statusCode ?? 0;
      if (status < 200 || status > 299) {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.length < 64 && chunks.push(chunk));
        res.on('end', () => {
          let parsed: unknown = null;
          try {
            parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          } catch {
            parsed = null;
          }
          reject(remoteError(status, parsed, target.token));
        });
        res.on('error', reject);
        return;
      }
      res.setEncoding('utf8');
      let pending = '';
      let end: Record<string, unknown> | null = null;
      res.on('data', (chunk: string) => {
        pending += chunk;
        try {
          for (let newline = pending.indexOf('\n'); newline >= 0 && end === null; newline = pending.indexOf('\n')) {
            const line = pending.slice(0, newline);
            pending = pending.slice(newline + 1);
            if (line.trim() === '') continue;
            const item = streamItem(line);
            if (item === null) continue;
            if (item.kind === 'end') end = item.end;
            else onItem(item);
          }
          if (pending.length > MAX_STREAM_LINE) throw new ProofgateError('FORGE_API', "a line of the server's progress stream is too long");
        } catch (error) {
          req.destroy();
          reject(error);
        }
      });
      // Ended, or cut (a server that stopped): without the end line, the caller reads again.
      res.on('close', () => resolve(end));
      res.on('error', () => resolve(end));
    });
    req.on('error', (error) => {
      const code = (error as NodeJS.ErrnoException).code;
      reject(
        error instanceof ProofgateError
          ? error
          : new ProofgateError('IO', `cannot reach the proofgate server at ${target.url}${code === undefined ? '' : ` (${code})`}`),
      );
    });
    req.end();
  });
}

/**
 * Follow the automerge job a comment started or joined to its end, through
 * the server's progress stream: each progress line goes to `onProgress` as it
 * comes (a count of lines the server dropped for this reader too, as a line
 * of its own), then the end is returned. A stream cut before its end is read
 * again from the last line seen; one that gives nothing new twice is an error.
 */
export async function followComment(
  target: RemoteTarget,
  changeId: string,
  commentId: string,
  onProgress: (progress: RemoteProgress) => void = () => undefined,
): Promise<FollowedJob> {
  const path = `/api/changes/${encodeURIComponent(changeId)}/comments/${encodeURIComponent(commentId)}/progress`;
  let after = 0;
  let idle = 0;
  for (;;) {
    let moved = false;
    const end = await readStream(target, `${path}?after=${after}`, (item) => {
      moved = true;
      if (item.kind === 'progress') {
        after = item.seq;
        onProgress(item.progress);
      } else {
        onProgress({ changeId, at: '', text: `(${item.count} progress line${item.count === 1 ? '' : 's'} dropped: this client read too slowly)` });
      }
    });
    if (end !== null) return followedEnd(changeId, end);
    idle = moved ? 0 : idle + 1;
    if (idle >= 2) throw new ProofgateError('FORGE_API', `the server's progress stream of change ${changeId} ended before the job did`);
  }
}

/** How a followed job ended, from the server's end record. Pure. */
function followedEnd(
  changeId: string,
  end: { status?: unknown; result?: unknown; outcome?: unknown; holder?: unknown; until?: unknown; error?: unknown },
): FollowedJob {
  if (end.result === 'ran' && typeof end.outcome === 'object' && end.outcome !== null) return { kind: 'ran', outcome: end.outcome as RemoteOutcome };
  if (end.result === 'held-elsewhere' || end.result === 'lease-lost')
    return { kind: 'held-elsewhere', holder: typeof end.holder === 'string' ? end.holder : '?', until: typeof end.until === 'string' ? end.until : '?' };
  throw new ProofgateError('FORGE_API', `the server's automerge job of change ${changeId} failed: ${typeof end.error === 'string' ? end.error : 'unknown'}`);
}

/** The loop-outcome shape the human renderer reads, from a server's outcome. Pure. */
export function renderable(outcome: RemoteOutcome) {
  return {
    kind: outcome.outcome,
    changeId: outcome.change,
    head: outcome.head,
    repairs: outcome.repairs,
    verdict: outcome.verdict,
    mergeCommit: outcome.mergeCommit,
    reason: outcome.reason,
  };
}
