/**
 * Client mode: with `PROOFGATE_URL` set (and `PROOFGATE_TOKEN`, the token of
 * `proofgate token create`), `proofgate change open|list|show|comment|close`,
 * `proofgate checks run` and `proofgate automerge ID` talk to a `proofgate
 * serve --repo` server instead of opening the repository and the data
 * directory. The token is the identity: `--as` is refused. A server's refusal
 * comes back as the typed error direct mode would raise (the same code, so the
 * same exit status). The token is sent only in the Authorization header and
 * never appears in any output or error text.
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { ProofgateError, type ErrorCode } from '../core/index.js';
import { ERROR_CODES } from '../core/errors.js';
import { usageError } from './io.js';

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
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
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

/** The end of an automerge job a comment started, waited for (each request waits on the server; no sleeping here). */
export async function followComment(target: RemoteTarget, changeId: string, commentId: string): Promise<FollowedJob> {
  for (;;) {
    const end = await remoteCall<{ status: string; result?: string; outcome?: RemoteOutcome; holder?: string; until?: string; error?: string }>(
      target,
      'GET',
      `/api/changes/${encodeURIComponent(changeId)}/comments/${encodeURIComponent(commentId)}/outcome`,
    );
    if (end.status === 'running') continue;
    if (end.result === 'ran' && end.outcome !== undefined) return { kind: 'ran', outcome: end.outcome };
    if (end.result === 'held-elsewhere' || end.result === 'lease-lost') return { kind: 'held-elsewhere', holder: end.holder ?? '?', until: end.until ?? '?' };
    throw new ProofgateError('FORGE_API', `the server's automerge job of change ${changeId} failed: ${end.error ?? 'unknown'}`);
  }
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
