/**
 * The service's HTTP front: `POST /webhooks` (GitHub deliveries, through the
 * intake), `GET /healthz` (the process answers) and `GET /readyz` (what the
 * caller's `ready()` says). Answers are small JSON objects; the status of a
 * webhook answer is a pure function of the intake's outcome.
 *
 * The body is read up to `maxBodyBytes` (GitHub caps deliveries at 25 MiB).
 * Past the limit (by Content-Length, or by counting a chunked body) the
 * answer is 413 at once, nothing read is kept and the intake is not called;
 * the rest of the body is discarded without being kept, up to as much again,
 * so that the client reads the answer, and past that the connection is cut.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { errorMessage } from '../core/index.js';
import type { DeliveryFacts, IntakeOutcome, WebhookIntake } from './intake.js';
import { WEBHOOK_PATH } from './manifest.js';

/** GitHub's cap on a webhook payload. */
export const DEFAULT_MAX_BODY_BYTES = 25 * 1024 * 1024;

export interface ServiceServerOptions {
  readonly host: string;
  /** 0 picks a free port (see `url`). */
  readonly port: number;
  readonly intake: WebhookIntake;
  /** Whether the service can take work (database and queue reachable); /readyz answers 503 while false or failing. */
  readonly ready: () => Promise<boolean>;
  readonly logger: Logger;
  readonly maxBodyBytes?: number;
}

export interface ServiceServer {
  /** `http://host:port` as bound. */
  readonly url: string;
  /** Stop listening, let requests in progress get their answers, then resolve. */
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

type BodyRead = { readonly kind: 'body'; readonly bytes: Buffer } | { readonly kind: 'too-large' } | { readonly kind: 'aborted' };

/** The declared length is over the limit (a missing or unreadable header is not). */
function declaredTooLarge(req: IncomingMessage, limit: number): boolean {
  const declared = req.headers['content-length'];
  return declared !== undefined && /^\d+$/.test(declared) && Number(declared) > limit;
}

function readBody(req: IncomingMessage, limit: number): Promise<BodyRead> {
  if (declaredTooLarge(req, limit)) return Promise.resolve({ kind: 'too-large' });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (result: BodyRead): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('aborted', onAborted);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        chunks.length = 0;
        done({ kind: 'too-large' });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => done({ kind: 'body', bytes: Buffer.concat(chunks, size) });
    const onAborted = (): void => done({ kind: 'aborted' });
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('aborted', onAborted);
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

function send(res: ServerResponse, answer: Answer, extraHeaders: Record<string, string> = {}): void {
  const text = JSON.stringify(answer.body);
  res.writeHead(answer.status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...extraHeaders });
  res.end(text);
}

/** A header value fit for a log line (unverified input: bounded). */
function headerText(req: IncomingMessage, name: string): string | null {
  const value = req.headers[name];
  const text = Array.isArray(value) ? value[0] : value;
  return text === undefined ? null : text.slice(0, 200);
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

export async function createServiceServer(options: ServiceServerOptions): Promise<ServiceServer> {
  const { intake, logger } = options;
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;

  const tooLarge = (req: IncomingMessage, res: ServerResponse): void => {
    logger.warn(
      { deliveryId: headerText(req, 'x-github-delivery'), event: headerText(req, 'x-github-event'), status: 413, limit },
      'webhook body over the limit',
    );
    send(res, { status: 413, body: { accepted: false, outcome: 'too-large', error: `the body is over ${limit} bytes` } });
    discardRest(req, limit);
  };

  const webhook = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const read = await readBody(req, limit);
    if (read.kind === 'aborted') return;
    if (read.kind === 'too-large') {
      tooLarge(req, res);
      return;
    }
    const outcome = await intake.receive(req.headers, read.bytes);
    const answer = webhookAnswer(outcome);
    const facts = factsOf(outcome);
    const line = {
      deliveryId: facts?.deliveryId ?? headerText(req, 'x-github-delivery'),
      event: facts?.eventName ?? headerText(req, 'x-github-event'),
      action: facts?.action ?? null,
      installationId: facts?.installationId ?? null,
      repository: facts?.repository ?? null,
      status: answer.status,
      outcome: outcome.kind,
      ...('reason' in outcome && outcome.kind !== 'duplicate' ? { reason: outcome.reason } : {}),
    };
    if (answer.status >= 500) logger.error(line, 'webhook delivery not recorded');
    else if (answer.status >= 400) logger.warn(line, 'webhook delivery refused');
    else logger.info(line, `webhook delivery ${outcome.kind}`);
    send(res, answer);
  };

  const readyz = async (res: ServerResponse): Promise<void> => {
    let ready = false;
    try {
      ready = await options.ready();
    } catch (error) {
      logger.warn({ err: errorMessage(error) }, 'readiness check failed');
    }
    send(res, ready ? { status: 200, body: { status: 'ready' } } : { status: 503, body: { status: 'not-ready' } });
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0];
    const method = req.method ?? 'GET';
    const only = (allowed: string): boolean => {
      if (method === allowed || (allowed === 'GET' && method === 'HEAD')) return true;
      send(res, { status: 405, body: { error: `${method} is not allowed on ${path}` } }, { allow: allowed === 'GET' ? 'GET, HEAD' : allowed });
      req.resume();
      return false;
    };
    switch (path) {
      case WEBHOOK_PATH:
        if (only('POST')) await webhook(req, res);
        return;
      case '/healthz':
        if (only('GET')) send(res, { status: 200, body: { status: 'ok' } });
        return;
      case '/readyz':
        if (only('GET')) await readyz(res);
        return;
      default:
        send(res, { status: 404, body: { error: `no such path: ${path}` } });
        req.resume();
    }
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      logger.error({ deliveryId: headerText(req, 'x-github-delivery'), err: errorMessage(error) }, 'request failed');
      if (!res.headersSent) send(res, { status: 500, body: { error: 'internal error' } });
      else res.destroy();
    });
  });
  // `Expect: 100-continue`: refuse an oversized body before the client sends it.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (declaredTooLarge(req, limit)) {
      logger.warn({ deliveryId: headerText(req, 'x-github-delivery'), status: 413, limit }, 'webhook body over the limit');
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
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  let closing: Promise<void> | null = null;
  return {
    url: `http://${host}:${address.port}`,
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeIdleConnections();
      });
      return closing;
    },
  };
}
