/**
 * The service's HTTP front: `POST /webhooks` (GitHub deliveries, through the
 * intake), `GET /healthz` (the process answers), `GET /readyz` (what the
 * caller's `ready()` says, within `readyTimeoutMs`) and, when the caller
 * passes its metrics, `GET /metrics` (Prometheus text; no secret needed, like
 * the health routes). Answers are small JSON objects; the status of a webhook
 * answer is a pure function of the intake's outcome, and every delivery's end
 * is counted by the metrics (its event and outcome).
 *
 * Before any of a webhook body is read: a Content-Length over `maxBodyBytes`
 * (GitHub caps deliveries at 25 MiB) is 413, and a missing X-Hub-Signature-256,
 * or one that is not `sha256=` and 64 lowercase hex digits (the only form the
 * signature check can accept), is 401. A body is then read up to the limit
 * (a chunked body past it is 413), and all the bodies being read, none of them
 * verified yet, share one budget of `maxBufferedBytes`: a request whose next
 * chunk would pass it is 503 with `Retry-After`. After a 401, 413 or 503
 * nothing read is kept and the intake is not called; the rest of the body is
 * discarded without being kept, up to as much again as the limit, so that the
 * client reads the answer, and past that the connection is cut.
 *
 * Timeouts are explicit (`headersTimeoutMs`, `requestTimeoutMs`), and
 * `close()` does not wait on clients: it stops accepting, lets the deliveries
 * already handed to the intake get their answers (their group commits), then
 * cuts every connection left (idle, half-sent headers, a body that never comes).
 *
 * Text from headers and payloads reaches the log only through `logText`
 * (secret-looking parts redacted, cut to 200 characters).
 *
 * With `checkHost` (`proofgate serve --repo`; `'reads'`, the GitHub App
 * service: on the dashboard and `/api/` only), every request's Host header
 * must name the bound address and port (`localhost:port` too when bound to
 * loopback; any name with the bound port when bound to a wildcard address),
 * else 421 with a JSON error: a web page whose name was rebound to this
 * address cannot reach the server (DNS rebinding). A request a browser made
 * for another site's page (`foreignSiteProblem`: a fetch, script, image or
 * frame of another origin) is then 403 before any work. Every JSON answer
 * goes out with `X-Content-Type-Options: nosniff`. With `api`, `GET /api/...`
 * is answered by it for a caller named by `Authorization: Bearer <token>`
 * with at least read permission; on a server bound to loopback only, reads
 * may come without a token. A missing (off loopback), malformed, unknown or
 * revoked token is 401; too little permission is 403. A read's query string
 * reaches the API. With `dashboard` as well, `GET /` and `GET /assets/...`
 * are the dashboard's files under the same Host check and read rule, sent
 * with `Content-Security-Policy: default-src 'self'` and
 * `X-Content-Type-Options: nosniff`.
 *
 * Writes (`POST /api/...`, when the API has `post`) always need a bearer
 * token, on loopback too, and a body sent as `Content-Type:
 * application/json` (a browser form cannot send that cross-site without a
 * preflight), with no Content-Encoding, of at most `maxApiBodyBytes`
 * (default 64 KiB): 401, 415 and 413 are decided before any of the body is
 * kept; a body that is not JSON is 400. The API then decides (it makes every
 * write as the token's identity). An API with a `writeRefusal` (the GitHub
 * App service's) answers every POST with it, before anything is read. With
 * `git`, paths under `/git/` are handed to it whole (git's smart HTTP; it
 * authenticates on its own).
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { ProofgateError, errorMessage } from '../core/index.js';
import { loadHttp } from '../host/index.js';
import type { RepoPermission } from '../forge/port.js';
import { bearerToken, isTokenShape, permits } from './identities.js';
import { logText, type DeliveryFacts, type IntakeOutcome, type WebhookIntake } from './intake.js';
import { WEBHOOK_PATH } from './manifest.js';
import { METRICS_PATH, type ServiceMetrics } from './metrics.js';

/** GitHub's cap on a webhook payload. */
export const DEFAULT_MAX_BODY_BYTES = 25 * 1024 * 1024;
/** Bodies being read, unverified, may hold this many times `maxBodyBytes` together by default. */
export const DEFAULT_BUFFERED_BODIES = 4;
/** Longest a request may take to arrive, headers and body (GitHub gives up on a delivery after 10 s). */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
/** Longest a request's headers may take to arrive. */
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
/** Longest /readyz waits for `ready()` before answering 503. */
export const DEFAULT_READY_TIMEOUT_MS = 2_000;

export interface ServiceServerOptions {
  readonly host: string;
  /** 0 picks a free port (see `url`). */
  readonly port: number;
  /** The webhook intake; without one (`proofgate serve --repo`: a local repository) there is no webhook route and `/webhooks` is 404. */
  readonly intake?: WebhookIntake;
  /** Whether the service can take work (database and queue reachable); /readyz answers 503 while false or failing. */
  readonly ready: () => Promise<boolean>;
  readonly logger: Logger;
  /** Largest webhook body (default `DEFAULT_MAX_BODY_BYTES`). */
  readonly maxBodyBytes?: number;
  /** Bytes all webhook bodies being read (before their signature is checked) may hold together; default 4 x `maxBodyBytes`, at least `maxBodyBytes`. */
  readonly maxBufferedBytes?: number;
  /** Node's `server.requestTimeout`: a request not received in full by then is answered 408 and its connection closed (default 30 s). */
  readonly requestTimeoutMs?: number;
  /** Node's `server.headersTimeout`: the same for the headers alone (default 10 s, at most `requestTimeoutMs`). */
  readonly headersTimeoutMs?: number;
  /** How long /readyz waits for `ready()`; past it, 503 (default 2 s). */
  readonly readyTimeoutMs?: number;
  /** The service's metrics: served on `GET /metrics`, and told each webhook delivery's end. Without them `/metrics` is 404. */
  readonly metrics?: Pick<ServiceMetrics, 'contentType' | 'render' | 'webhookDelivery'>;
  /**
   * Refuse (421) a request whose Host header does not name this server, and a request a browser made for another
   * site's page (403), see the module comment: on every route (true), or on the dashboard and `/api/` only
   * (`'reads'`: the GitHub App service, whose webhooks come through a proxy under the public name). Default false.
   */
  readonly checkHost?: boolean | 'reads';
  /** The JSON API under `/api/`; without it `/api/...` is 404. */
  readonly api?: ServiceApi;
  /**
   * The observer dashboard: `GET /` and `GET /assets/...` (with `api` only, under its Host check and read rule), answered
   * with `Content-Security-Policy: default-src 'self'` and `X-Content-Type-Options: nosniff`; null: 404.
   */
  readonly dashboard?: (path: string) => Promise<StaticAnswer | null>;
  /** Largest JSON body of an API write (default `DEFAULT_MAX_API_BODY_BYTES`). */
  readonly maxApiBodyBytes?: number;
  /** git's smart HTTP under `/git/`; without it `/git/...` is 404. */
  readonly git?: GitEndpoint;
}

/** The largest JSON body of an API write by default. */
export const DEFAULT_MAX_API_BODY_BYTES = 64 * 1024;

/** A handler of every request under `/git/` (it answers, and reads or discards the body, itself). */
export interface GitEndpoint {
  handle(req: IncomingMessage, res: ServerResponse, path: string, query: string): Promise<void>;
}

/** A file of the dashboard. */
export interface StaticAnswer {
  readonly contentType: string;
  readonly body: Buffer;
}

/** Who is asking, as the API's `authenticate` found them. */
export interface ApiCaller {
  readonly login: string;
  /** The effective permission (the lower of the token's and the trusted config's). */
  readonly permission: RepoPermission;
}

/** The JSON API of a service: reads (and, with `post`, writes) under `/api/`. */
export interface ServiceApi {
  /** The caller a well-formed bearer token names, or null (unknown or revoked). */
  authenticate(token: string): Promise<ApiCaller | null>;
  /** The answer to `GET path` (path starts with `/api/`), or null: no such path. `caller` is null for an anonymous read on loopback. */
  get(path: string, caller: ApiCaller | null, query?: URLSearchParams): Promise<Answer | null>;
  /**
   * The answer to `POST path` with a JSON body (parsed, not yet validated) for
   * an authenticated caller, or null: no such path. Without it every POST
   * under `/api/` is 405.
   */
  post?(path: string, body: unknown, caller: ApiCaller): Promise<Answer | null>;
  /** Whether `POST path` is a write this API has (else 405, decided before the token is read). */
  writes?(path: string): boolean;
  /** The answer to every `POST /api/...` of an API that has no writes (a typed refusal), before the token or the body is read. */
  readonly writeRefusal?: Answer;
  /** A streamed read (same rule as `get`): null, not one; an answer to send (a refusal); `streamed`, it answered on `res` itself. */
  stream?(path: string, caller: ApiCaller | null, query: URLSearchParams, res: ServerResponse): Promise<Answer | 'streamed' | null>;
}

/** The address a server is bound to. */
export interface BoundAddress {
  readonly address: string;
  readonly family: string;
  readonly port: number;
}

/** Whether `address` is a loopback address (127.0.0.0/8, ::1, or IPv4-mapped 127.x). Pure. */
export function isLoopbackAddress(address: string): boolean {
  return address === '::1' || /^(::ffff:)?127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/i.test(address);
}

/**
 * Why a Host header does not name the bound server, or null when it does
 * (pure). Bound to one address: `address:port` (IPv6 in brackets), plus
 * `localhost:port` on loopback, and the bare name when the port is 80.
 * Bound to a wildcard (0.0.0.0, ::): any name, with the bound port.
 */
export function hostProblem(header: string | undefined, bound: BoundAddress): string | null {
  if (header === undefined || header === '') return 'the request has no Host header';
  const host = header.trim().toLowerCase();
  const wildcard = bound.address === '0.0.0.0' || bound.address === '::';
  if (wildcard) {
    const match = /^(?:\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::(\d{1,5}))?$/.exec(host);
    const port = match === null ? null : match[1] === undefined ? 80 : Number(match[1]);
    return port === bound.port ? null : `the Host header does not name this server's port ${bound.port}`;
  }
  const name = bound.family === 'IPv6' ? `[${bound.address.toLowerCase()}]` : bound.address;
  const names = isLoopbackAddress(bound.address) ? [name, 'localhost'] : [name];
  const allowed = names.flatMap((entry) => (bound.port === 80 ? [`${entry}:80`, entry] : [`${entry}:${bound.port}`]));
  return allowed.includes(host) ? null : `the Host header does not name this server (${allowed[0] as string})`;
}

/**
 * Why a request a browser made for another site's page is refused, or null
 * (pure; Fetch Metadata, `Sec-Fetch-*`): a fetch, a script, an image, a form
 * or a frame of another origin (another port of this host too) is refused
 * before any work, so such a page can neither read nor time nor load the
 * service; a top-level navigation (a link followed), this origin's own
 * requests, and clients that send no such header (curl, git, the CLI) pass.
 */
export function foreignSiteProblem(headers: IncomingMessage['headers']): string | null {
  const site = headers['sec-fetch-site'];
  if (site === undefined || site === 'same-origin' || site === 'none') return null;
  const mode = headers['sec-fetch-mode'];
  const dest = headers['sec-fetch-dest'];
  if (mode === 'navigate' && dest === 'document') return null;
  return "a request made by another site's page is refused";
}

export interface ServiceServer {
  /** `http://host:port` as bound. */
  readonly url: string;
  /**
   * Stop accepting connections, let every delivery already handed to the intake
   * get its answer (its group commits), then cut all connections left (idle ones,
   * half-sent headers, bodies still being read) and resolve.
   */
  close(): Promise<void>;
}

export interface Answer {
  readonly status: number;
  readonly body: Readonly<Record<string, unknown>>;
}

/** The HTTP answer to an intake outcome. Pure. */
export function webhookAnswer(outcome: IntakeOutcome): Answer {
  switch (outcome.kind) {
    case 'accepted':
      return {
        status: 202,
        body: { accepted: true, outcome: 'accepted', deliveryId: outcome.delivery.deliveryId, kind: outcome.delivery.result.kind },
      };
    case 'duplicate':
      return { status: 200, body: { accepted: false, outcome: 'duplicate', deliveryId: outcome.facts.deliveryId } };
    case 'ping':
      return { status: 200, body: { accepted: false, outcome: 'ping', deliveryId: outcome.facts.deliveryId } };
    case 'unauthenticated':
      return { status: 401, body: { accepted: false, outcome: 'unauthenticated', error: outcome.reason } };
    case 'invalid':
      return { status: 400, body: { accepted: false, outcome: 'invalid', error: outcome.reason } };
    case 'refused':
      return { status: 422, body: { accepted: false, outcome: 'refused', deliveryId: outcome.facts.deliveryId, error: 'the store refused the record' } };
    case 'unavailable':
      return {
        status: 503,
        body: { accepted: false, outcome: 'unavailable', deliveryId: outcome.facts.deliveryId, error: 'the delivery could not be recorded' },
      };
  }
}

type BodyRead =
  { readonly kind: 'body'; readonly bytes: Buffer } | { readonly kind: 'too-large' } | { readonly kind: 'over-budget' } | { readonly kind: 'aborted' };

/** The declared length is over the limit (a missing or unreadable header is not). */
function declaredTooLarge(req: IncomingMessage, limit: number): boolean {
  const declared = req.headers['content-length'];
  return declared !== undefined && /^\d+$/.test(declared) && Number(declared) > limit;
}

/**
 * Why the signature header cannot match any body, or null when it may. Pure.
 * `verifyWebhookDelivery` compares the header's (first) value byte for byte
 * with `sha256=` and the lowercase hex HMAC, so any other shape is refused
 * there too: refusing it here, before the body is read, refuses nothing it
 * would take.
 */
export function signatureShapeProblem(headers: IncomingMessage['headers']): string | null {
  const value = headers['x-hub-signature-256'];
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || text === '') return 'webhook delivery has no X-Hub-Signature-256 header';
  return /^sha256=[0-9a-f]{64}$/.test(text) ? null : 'X-Hub-Signature-256 is not sha256= and 64 lowercase hex digits';
}

/** Bytes of webhook bodies held before their signature is checked, shared by all requests. */
interface BodyBudget {
  /** Take `bytes` more for `hold`; false (nothing taken) when that would pass the budget. */
  take(hold: Hold, bytes: number): boolean;
  /** Give back all that `hold` took. Safe to call more than once. */
  release(hold: Hold): void;
}

interface Hold {
  bytes: number;
}

function bodyBudget(max: number): BodyBudget {
  let held = 0;
  return {
    take(hold, bytes) {
      if (held + bytes > max) return false;
      held += bytes;
      hold.bytes += bytes;
      return true;
    },
    release(hold) {
      held -= hold.bytes;
      hold.bytes = 0;
    },
  };
}

function readBody(req: IncomingMessage, limit: number, budget: BodyBudget, hold: Hold): Promise<BodyRead> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (result: BodyRead): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('aborted', onAborted);
      req.off('close', onAborted);
      if (result.kind !== 'body') {
        chunks.length = 0;
        budget.release(hold);
      }
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) done({ kind: 'too-large' });
      else if (!budget.take(hold, chunk.length)) done({ kind: 'over-budget' });
      else chunks.push(chunk);
    };
    // A body that came in one chunk is that chunk, not a copy of it (it is read once, synchronously, by the intake).
    const onEnd = (): void => done({ kind: 'body', bytes: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size) });
    const onAborted = (): void => done({ kind: 'aborted' });
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('aborted', onAborted);
    // A connection cut by a timeout or by close(): the body will not end.
    req.on('close', onAborted);
  });
}

/** Throw away the rest of a refused body, keeping none of it; cut the connection past `budget` more bytes. */
function discardRest(req: IncomingMessage, budget: number): void {
  let discarded = 0;
  req.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > budget) req.socket.destroy();
  });
  req.resume();
}

/** A JSON answer; `nosniff`: a browser never reads it as anything else (a script or a style sheet of another page), whatever text it holds. */
function send(res: ServerResponse, answer: Answer, extraHeaders: Record<string, string> = {}): void {
  const text = JSON.stringify(answer.body);
  res.writeHead(answer.status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'x-content-type-options': 'nosniff',
    ...extraHeaders,
  });
  res.end(text);
}

/** A header value fit for a log line (unverified input: redacted and bounded). */
function headerText(req: IncomingMessage, name: string): string | null {
  const value = req.headers[name];
  const text = Array.isArray(value) ? value[0] : value;
  return text === undefined ? null : logText(text);
}

const orNull = (text: string | null): string | null => (text === null ? null : logText(text));

function positiveInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new ProofgateError('CONFIG', `${name} must be an integer >= 1`);
  return value;
}

function factsOf(outcome: IntakeOutcome): DeliveryFacts | null {
  switch (outcome.kind) {
    case 'accepted':
      return outcome.delivery;
    case 'duplicate':
    case 'ping':
    case 'refused':
    case 'unavailable':
      return outcome.facts;
    default:
      return null;
  }
}

/** The X-GitHub-Event header as sent (unverified: only ever a metrics label after `eventLabel` bounds it). */
function eventHeader(req: IncomingMessage): string | null {
  const value = req.headers['x-github-event'];
  return (Array.isArray(value) ? value[0] : value) ?? null;
}

/** One header's copies as `bearerToken` reads them: none, one, or several. */
function distinct(values: readonly string[] | undefined): string | readonly string[] | undefined {
  if (values === undefined || values.length === 0) return undefined;
  return values.length === 1 ? values[0] : values;
}

export async function createServiceServer(options: ServiceServerOptions): Promise<ServiceServer> {
  const { intake, logger, metrics, api } = options;
  /** Known once listening (no request is handled before). */
  let bound: BoundAddress | null = null;
  /** Count a delivery's end (its event label is bounded by the metrics). */
  const counted = (event: string | null, outcome: string): void => metrics?.webhookDelivery(event, outcome);
  const limit = positiveInteger('maxBodyBytes', options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES);
  const maxBuffered = positiveInteger('maxBufferedBytes', options.maxBufferedBytes ?? DEFAULT_BUFFERED_BODIES * limit);
  if (maxBuffered < limit) throw new ProofgateError('CONFIG', 'maxBufferedBytes must be at least maxBodyBytes');
  const requestTimeout = positiveInteger('requestTimeoutMs', options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS);
  const headersTimeout = positiveInteger('headersTimeoutMs', options.headersTimeoutMs ?? Math.min(DEFAULT_HEADERS_TIMEOUT_MS, requestTimeout));
  if (headersTimeout > requestTimeout) throw new ProofgateError('CONFIG', 'headersTimeoutMs must be at most requestTimeoutMs');
  const readyTimeout = positiveInteger('readyTimeoutMs', options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS);
  const apiLimit = positiveInteger('maxApiBodyBytes', options.maxApiBodyBytes ?? DEFAULT_MAX_API_BODY_BYTES);
  const budget = bodyBudget(maxBuffered);
  /** Deliveries handed to the intake whose answers are not sent yet: close() waits for these, and only these. */
  const answering = new Set<Promise<void>>();
  let stopping = false;

  /** Answer before (or instead of) reading the body, and throw the rest of it away. */
  const refuseBody = (
    req: IncomingMessage,
    res: ServerResponse,
    answer: Answer,
    message: string,
    extra: Record<string, unknown> = {},
    headers: Record<string, string> = {},
  ): void => {
    logger.warn(
      {
        deliveryId: headerText(req, 'x-github-delivery'),
        event: headerText(req, 'x-github-event'),
        status: answer.status,
        outcome: answer.body.outcome,
        ...extra,
      },
      message,
    );
    counted(eventHeader(req), String(answer.body.outcome));
    send(res, answer, headers);
    discardRest(req, limit);
  };

  const tooLarge = (req: IncomingMessage, res: ServerResponse): void =>
    refuseBody(
      req,
      res,
      { status: 413, body: { accepted: false, outcome: 'too-large', error: `the body is over ${limit} bytes` } },
      'webhook body over the limit',
      { limit },
    );

  const webhook = async (req: IncomingMessage, res: ServerResponse, intake: WebhookIntake): Promise<void> => {
    if (stopping) {
      counted(eventHeader(req), 'stopping');
      send(res, { status: 503, body: { accepted: false, outcome: 'stopping', error: 'the service is stopping' } }, { 'retry-after': '1', connection: 'close' });
      req.resume();
      return;
    }
    if (declaredTooLarge(req, limit)) {
      tooLarge(req, res);
      return;
    }
    const unsigned = signatureShapeProblem(req.headers);
    if (unsigned !== null) {
      refuseBody(req, res, { status: 401, body: { accepted: false, outcome: 'unauthenticated', error: unsigned } }, 'webhook delivery refused', {
        reason: unsigned,
      });
      return;
    }
    const pending = await receiveBody(req, res, intake);
    if (pending === null) return;
    // close() waits for this delivery: its group's commit, then its answer sent (or its connection gone).
    const answered = new Promise<void>((resolve) => res.once('close', () => resolve()));
    const tracked = Promise.allSettled([pending, answered]).then(() => undefined);
    answering.add(tracked);
    void tracked.then(() => answering.delete(tracked));
    const outcome = await pending;
    const answer = webhookAnswer(outcome);
    logDelivery(req, answer, outcome);
    send(res, answer);
  };

  /**
   * Read the body and hand it to the intake; null when the request ended otherwise (answered here, or cut).
   * The body is referenced only from here, so it is not kept while the delivery waits for its group's commit.
   */
  const receiveBody = async (req: IncomingMessage, res: ServerResponse, intake: WebhookIntake): Promise<Promise<IntakeOutcome> | null> => {
    const hold: Hold = { bytes: 0 };
    const read = await readBody(req, limit, budget, hold);
    if (read.kind === 'aborted') {
      counted(eventHeader(req), 'aborted');
      return null;
    }
    if (read.kind === 'too-large') {
      tooLarge(req, res);
      return null;
    }
    if (read.kind === 'over-budget') {
      const answer: Answer = { status: 503, body: { accepted: false, outcome: 'busy', error: 'too many webhook bodies are being received; retry later' } };
      refuseBody(req, res, answer, 'webhook bodies over the memory budget', { maxBufferedBytes: maxBuffered }, { 'retry-after': '1' });
      return null;
    }
    try {
      return intake.receive(req.headers, read.bytes);
    } finally {
      // receive checks the signature before it returns: the bytes are no longer unverified.
      budget.release(hold);
    }
  };

  /** The delivery's one log line (built only when its level is on) and its count in the metrics. */
  const logDelivery = (req: IncomingMessage, answer: Answer, outcome: IntakeOutcome): void => {
    const facts = factsOf(outcome);
    const level = answer.status >= 500 ? 'error' : answer.status >= 400 ? 'warn' : 'info';
    if (logger.isLevelEnabled(level)) {
      const line = {
        deliveryId: facts === null ? headerText(req, 'x-github-delivery') : logText(facts.deliveryId),
        event: facts === null ? headerText(req, 'x-github-event') : logText(facts.eventName),
        action: orNull(facts?.action ?? null),
        installationId: facts?.installationId ?? null,
        repository: orNull(facts?.repository ?? null),
        status: answer.status,
        outcome: outcome.kind,
        ...('reason' in outcome && outcome.kind !== 'duplicate' ? { reason: logText(outcome.reason, 500) } : {}),
      };
      if (level === 'error') logger.error(line, 'webhook delivery not recorded');
      else if (level === 'warn') logger.warn(line, 'webhook delivery refused');
      else logger.info(line, `webhook delivery ${outcome.kind}`);
    }
    counted(facts === null ? eventHeader(req) : facts.eventName, outcome.kind);
  };

  const scrape = async (res: ServerResponse, served: Pick<ServiceMetrics, 'contentType' | 'render'>): Promise<void> => {
    let text: string;
    try {
      text = await served.render();
    } catch (error) {
      logger.error({ err: errorMessage(error) }, 'metrics could not be read');
      send(res, { status: 500, body: { error: 'metrics could not be read' } });
      return;
    }
    res.writeHead(200, { 'content-type': served.contentType, 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };

  const readyz = async (res: ServerResponse): Promise<void> => {
    let ready = false;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), readyTimeout)));
    try {
      const answer = await Promise.race([Promise.resolve().then(() => options.ready()), late]);
      if (answer === 'late') logger.warn({ timeoutMs: readyTimeout }, 'readiness check did not answer in time');
      else ready = answer;
    } catch (error) {
      logger.warn({ err: errorMessage(error) }, 'readiness check failed');
    } finally {
      clearTimeout(timer);
    }
    send(res, ready ? { status: 200, body: { status: 'ready' } } : { status: 503, body: { status: 'not-ready' } });
  };

  /** Answer a read allowed by `apiRequest`: the API's JSON (default), or a dashboard file. */
  const apiAnswer = async (req: IncomingMessage, res: ServerResponse, path: string, served: ServiceApi, caller: ApiCaller | null): Promise<void> => {
    const url = req.url ?? '';
    const query = new URLSearchParams(url.includes('?') ? url.slice(url.indexOf('?') + 1) : '');
    const streamed = (await served.stream?.(path, caller, query, res)) ?? null;
    if (streamed === 'streamed') return;
    const answer = streamed ?? (await served.get(path, caller, query));
    send(res, answer ?? { status: 404, body: { error: `no such path: ${logText(path)}` } });
  };
  const dashboardAnswer = async (res: ServerResponse, path: string, file: StaticAnswer | null): Promise<void> => {
    if (file === null) return send(res, { status: 404, body: { error: `no such path: ${logText(path)}` } });
    res.writeHead(200, {
      'content-type': file.contentType,
      'content-length': file.body.length,
      'content-security-policy': "default-src 'self'",
      'x-content-type-options': 'nosniff',
      'cache-control': 'no-cache',
    });
    res.end(file.body);
  };

  const apiRequest = async (
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    served: ServiceApi,
    at: BoundAddress,
    answer: (caller: ApiCaller | null) => Promise<void> = (caller) => apiAnswer(req, res, path, served, caller),
  ): Promise<void> => {
    const unauthorized = (error: string): void => send(res, { status: 401, body: { error } }, { 'www-authenticate': 'Bearer realm="proofgate"' });
    // Every copy of the header, not Node's first one only: two Authorization headers are refused.
    const bearer = bearerToken(distinct(req.headersDistinct.authorization));
    if ('problem' in bearer) return unauthorized(bearer.problem);
    let caller: ApiCaller | null = null;
    if (bearer.token !== null) {
      caller = isTokenShape(bearer.token) ? await served.authenticate(bearer.token) : null;
      if (caller === null) {
        logger.warn({ path: logText(path), status: 401 }, 'api request with an unknown or revoked token');
        return unauthorized('the token is unknown or revoked');
      }
      if (!permits(caller.permission, 'read')) {
        send(res, { status: 403, body: { error: `${caller.login} may not read (permission ${caller.permission})` } });
        return;
      }
    } else if (!isLoopbackAddress(at.address)) {
      return unauthorized('this server needs a token to read: Authorization: Bearer <token>');
    }
    await answer(caller);
  };

  const apiBudget = bodyBudget(DEFAULT_BUFFERED_BODIES * apiLimit);
  /** `POST /api/...`: a token always, JSON only, a small body; the API decides the rest. */
  const apiWrite = async (req: IncomingMessage, res: ServerResponse, path: string, served: ServiceApi): Promise<void> => {
    const post = served.post?.bind(served);
    const refuse = (status: number, error: string, headers: Record<string, string> = {}): void => {
      send(res, { status, body: { error } }, headers);
      discardRest(req, apiLimit);
    };
    if (served.writeRefusal !== undefined) {
      send(res, served.writeRefusal, { allow: 'GET, HEAD' });
      discardRest(req, apiLimit);
      return;
    }
    if (post === undefined || served.writes?.(path) !== true) return refuse(405, `POST is not allowed on ${logText(path)}`, { allow: 'GET, HEAD' });
    const bearer = bearerToken(distinct(req.headersDistinct.authorization));
    const challenge = { 'www-authenticate': 'Bearer realm="proofgate"' };
    if ('problem' in bearer) return refuse(401, bearer.problem, challenge);
    if (bearer.token === null) return refuse(401, 'a write needs a token: Authorization: Bearer <token>', challenge);
    const caller = isTokenShape(bearer.token) ? await served.authenticate(bearer.token) : null;
    if (caller === null) {
      logger.warn({ path: logText(path), status: 401 }, 'api write with an unknown or revoked token');
      return refuse(401, 'the token is unknown or revoked', challenge);
    }
    const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
    if (type !== 'application/json') return refuse(415, 'a write needs Content-Type: application/json');
    if (req.headers['content-encoding'] !== undefined) return refuse(415, 'a write body may not have a Content-Encoding');
    if (declaredTooLarge(req, apiLimit)) return refuse(413, `the body is over ${apiLimit} bytes`);
    const hold: Hold = { bytes: 0 };
    const read = await readBody(req, apiLimit, apiBudget, hold);
    apiBudget.release(hold);
    if (read.kind === 'aborted') return;
    if (read.kind === 'too-large') return refuse(413, `the body is over ${apiLimit} bytes`);
    if (read.kind === 'over-budget') return refuse(503, 'too many bodies are being received; retry later', { 'retry-after': '1' });
    let body: unknown;
    try {
      body = JSON.parse(read.bytes.toString('utf8'));
    } catch {
      send(res, { status: 400, body: { error: 'the body is not JSON', code: 'INVALID_INPUT' } });
      return;
    }
    const answer = await post(path, body, caller);
    send(res, answer ?? { status: 404, body: { error: `no such path: ${logText(path)}` } });
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0] as string;
    const method = req.method ?? 'GET';
    if (bound === null) {
      send(res, { status: 503, body: { error: 'the server is starting' } }, { 'retry-after': '1' });
      req.resume();
      return;
    }
    const readPath = path === '/' || path.startsWith('/assets/') || path === '/api' || path.startsWith('/api/');
    if (options.checkHost === true || (options.checkHost === 'reads' && readPath)) {
      const hosts = req.headersDistinct.host ?? [];
      // More than one Host line is refused (RFC 9112 3.2): a proxy that reads the last one would disagree with us.
      const wrongHost = hosts.length > 1 ? 'the request has more than one Host header' : hostProblem(hosts[0], bound);
      if (wrongHost !== null) {
        logger.warn({ host: headerText(req, 'host'), path: logText(path), status: 421 }, 'request for another host refused');
        send(res, { status: 421, body: { error: wrongHost } }, { connection: 'close' });
        req.resume();
        return;
      }
      const foreign = foreignSiteProblem(req.headers);
      if (foreign !== null) {
        logger.warn({ path: logText(path), status: 403 }, 'request made by another site refused');
        send(res, { status: 403, body: { error: foreign } });
        req.resume();
        return;
      }
    }
    const only = (allowed: string): boolean => {
      if (method === allowed || (allowed === 'GET' && method === 'HEAD')) return true;
      send(
        res,
        { status: 405, body: { error: `${logText(method)} is not allowed on ${logText(path)}` } },
        { allow: allowed === 'GET' ? 'GET, HEAD' : allowed },
      );
      req.resume();
      return false;
    };
    if (options.git !== undefined && path.startsWith('/git/')) {
      await options.git.handle(req, res, path, (req.url ?? '').includes('?') ? (req.url ?? '').slice((req.url ?? '').indexOf('?') + 1) : '');
      return;
    }
    const dashboard = options.dashboard;
    if (dashboard !== undefined && api !== undefined && (path === '/' || path.startsWith('/assets/'))) {
      if (only('GET')) {
        req.resume();
        await apiRequest(req, res, path, api, bound, async () => dashboardAnswer(res, path, await dashboard(path)));
      }
      return;
    }
    if (api !== undefined && (path === '/api' || path.startsWith('/api/'))) {
      if (method === 'POST') {
        await apiWrite(req, res, path, api);
        return;
      }
      if (only('GET')) {
        req.resume();
        await apiRequest(req, res, path, api, bound);
      }
      return;
    }
    switch (path) {
      case WEBHOOK_PATH:
        if (intake === undefined) break;
        if (only('POST')) await webhook(req, res, intake);
        return;
      case '/healthz':
        if (only('GET')) send(res, { status: 200, body: { status: 'ok' } });
        return;
      case '/readyz':
        if (only('GET')) await readyz(res);
        return;
      case METRICS_PATH:
        if (metrics === undefined) break;
        if (only('GET')) await scrape(res, metrics);
        return;
    }
    send(res, { status: 404, body: { error: `no such path: ${logText(path)}` } });
    req.resume();
  };

  const server: Server = loadHttp().createServer(
    // Node checks both timeouts every `connectionsCheckingInterval` (30 s by default): often enough here that they hold.
    { requestTimeout, headersTimeout, connectionsCheckingInterval: Math.min(1000, headersTimeout) },
    (req, res) => {
      handle(req, res).catch((error: unknown) => {
        logger.error({ deliveryId: headerText(req, 'x-github-delivery'), err: errorMessage(error) }, 'request failed');
        if (!res.headersSent) send(res, { status: 500, body: { error: 'internal error' } });
        else res.destroy();
      });
    },
  );
  // `Expect: 100-continue`: refuse an oversized body before the client sends it.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (declaredTooLarge(req, limit)) {
      logger.warn({ deliveryId: headerText(req, 'x-github-delivery'), status: 413, limit }, 'webhook body over the limit');
      if (intake !== undefined && (req.url ?? '/').split('?')[0] === WEBHOOK_PATH) counted(eventHeader(req), 'too-large');
      send(res, { status: 413, body: { accepted: false, outcome: 'too-large', error: `the body is over ${limit} bytes` } }, { connection: 'close' });
      return;
    }
    res.writeContinue();
    server.emit('request', req, res);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  bound = { address: address.address, family: address.family, port: address.port };
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  let closing: Promise<void> | null = null;
  const stop = async (): Promise<void> => {
    stopping = true;
    const closed = new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
    server.closeIdleConnections();
    // Deliveries whose bodies were in full when close() began (or that finish arriving meanwhile) are answered; then nobody is waited for.
    while (answering.size > 0) await Promise.allSettled([...answering]);
    server.closeAllConnections();
    await closed;
  };
  return {
    url: `http://${host}:${address.port}`,
    close(): Promise<void> {
      closing ??= stop();
      return closing;
    },
  };
}
