/**
 * Octokit client factory: token or GitHub App auth, a configurable base URL
 * (GitHub Enterprise, the test server), the throttling and retry plugins with
 * delays a caller can shorten (tests) and logs routed to an injected pino
 * logger. Secrets never reach the logger. An `observe` callback is told the
 * end of every request (its route template, its status, the rate limit left):
 * a service's metrics.
 */
import { Octokit } from '@octokit/core';
import { createAppAuth } from '@octokit/auth-app';
import { retry } from '@octokit/plugin-retry';
import { throttling, type ThrottlingOptions } from '@octokit/plugin-throttling';
import type { Logger } from 'pino';
import { ProofgateError } from '../../core/errors.js';
import { redactSecrets } from './redact.js';

export type GitHubAuth =
  | { readonly kind: 'token'; readonly token: string }
  | {
      readonly kind: 'app';
      readonly appId: number | string;
      readonly privateKey: string;
      /** The installation whose token authenticates requests; absent: the App itself (its JWT), for the `/app` endpoints only. */
      readonly installationId?: number;
    };

export interface GitHubRetryOptions {
  /** Retries of a failed request (5xx and other retryable statuses). Default 3. */
  readonly retries?: number;
  /** The n-th retry waits n^2 * baseDelayMs. Default 1000. */
  readonly baseDelayMs?: number;
}

export interface GitHubThrottleOptions {
  /** Retries after a primary or secondary rate limit. Default 2. */
  readonly maxRetries?: number;
  /** Give up instead of waiting longer than this for a rate limit. Default 120. */
  readonly maxWaitSeconds?: number;
  /** One second of GitHub's retry-after lasts this many milliseconds. Default 1000. */
  readonly secondMs?: number;
  /** Minimum spacing between writes and GraphQL queries (GitHub asks 1 s). Default 1000. */
  readonly writeIntervalMs?: number;
  /** Minimum spacing between writes that notify people (comments, merges). Default 3000. */
  readonly notificationIntervalMs?: number;
}

/** The end of one request as `GitHubClientOptions.observe` is told it. */
export interface GitHubRequestObservation {
  /**
   * The method and route template as the caller named it
   * (`GET /repos/{owner}/{repo}/pulls/{pull_number}`, `POST /graphql`), never
   * the filled URL; the base URL is left out.
   */
  readonly route: string;
  /** The status GitHub answered, or null when no answer came (connection refused, timeout, aborted). */
  readonly status: number | null;
  /** From the answer's `x-ratelimit-remaining` and `x-ratelimit-resource` headers, when it had them. */
  readonly rateLimit: { readonly remaining: number; readonly resource: string | null } | null;
}

export interface GitHubClientOptions {
  readonly auth: GitHubAuth;
  /** REST base URL; default https://api.github.com. GHE: https://HOST/api/v3. */
  readonly baseUrl?: string;
  readonly userAgent?: string;
  readonly retry?: GitHubRetryOptions;
  readonly throttle?: GitHubThrottleOptions;
  readonly logger?: Logger;
  /**
   * Told the end of every request: once per request as the caller sees it
   * (after the retry and throttling plugins, so a request retried twice is
   * told once, with its last answer). It must not throw.
   */
  readonly observe?: (observation: GitHubRequestObservation) => void;
}

/** Status codes whose answer is a judgment, never retried (405 not mergeable, 409 head moved ...). */
const DO_NOT_RETRY = [400, 401, 403, 404, 405, 409, 410, 422, 451];

const GitHubOctokit = Octokit.plugin(throttling, retry);
export type GitHubOctokit = InstanceType<typeof GitHubOctokit>;

export function createGitHubClient(options: GitHubClientOptions): GitHubOctokit {
  const logger = options.logger;
  const throttle = options.throttle ?? {};
  const maxRetries = throttle.maxRetries ?? 2;
  const maxWait = throttle.maxWaitSeconds ?? 120;
  const onLimit = (kind: string) => (retryAfter: number, request: { method: string; url: string }, _o: unknown, retryCount: number) => {
    const again = retryCount < maxRetries && retryAfter <= maxWait;
    logger?.warn({ method: request.method, url: redactSecrets(request.url), retryAfter, retryCount, again }, `GitHub ${kind} rate limit`);
    return again;
  };
  const throttleOptions = {
    onRateLimit: onLimit('primary'),
    onSecondaryRateLimit: onLimit('secondary'),
    retryAfterBaseValue: throttle.secondMs ?? 1000,
    fallbackSecondaryRateRetryAfter: 60,
    write: spacingGroup(throttle.writeIntervalMs ?? 1000),
    notifications: spacingGroup(throttle.notificationIntervalMs ?? 3000),
  } as unknown as ThrottlingOptions;

  const common = {
    baseUrl: (options.baseUrl ?? 'https://api.github.com').replace(/\/+$/, ''),
    userAgent: options.userAgent ?? 'proofgate',
    retry: {
      retries: options.retry?.retries ?? 3,
      retryAfterBaseValue: options.retry?.baseDelayMs ?? 1000,
      doNotRetry: DO_NOT_RETRY,
    },
    throttle: throttleOptions,
    log: octokitLog(logger),
  };
  const auth = options.auth;
  let octokit: GitHubOctokit;
  if (auth.kind === 'token') {
    if (auth.token.trim() === '') throw new ProofgateError('CONFIG', 'GitHub token is empty');
    octokit = new GitHubOctokit({ ...common, auth: auth.token });
  } else {
    if (auth.privateKey.trim() === '') throw new ProofgateError('CONFIG', 'GitHub App private key is empty');
    octokit = new GitHubOctokit({
      ...common,
      authStrategy: createAppAuth,
      auth: { appId: auth.appId, privateKey: auth.privateKey, ...(auth.installationId === undefined ? {} : { installationId: auth.installationId }) },
    });
  }
  if (options.observe !== undefined) observeRequests(octokit, options.observe);
  return octokit;
}

interface RequestOptions {
  readonly method?: unknown;
  readonly url?: unknown;
  readonly baseUrl?: unknown;
}

type Headers = Readonly<Record<string, unknown>> | undefined;

/** `GET /repos/{owner}/{repo}`: the method and the route template of a request's options, without the base URL. Pure. */
export function requestRoute(options: RequestOptions): string {
  const method = typeof options.method === 'string' ? options.method.toUpperCase() : 'GET';
  let url = typeof options.url === 'string' ? options.url : '';
  const base = typeof options.baseUrl === 'string' ? options.baseUrl.replace(/\/+$/, '') : '';
  if (base !== '' && url.startsWith(base)) url = url.slice(base.length);
  return `${method} ${url.split('?')[0] ?? ''}`;
}

function rateLimitOf(headers: Headers): GitHubRequestObservation['rateLimit'] {
  const remaining = headers?.['x-ratelimit-remaining'];
  const text = typeof remaining === 'number' ? String(remaining) : remaining;
  if (typeof text !== 'string' || !/^\d{1,12}$/.test(text)) return null;
  const resource = headers?.['x-ratelimit-resource'];
  return { remaining: Number(text), resource: typeof resource === 'string' ? resource : null };
}

/**
 * The outermost hooks on `request` (added after the plugins, whose hooks run
 * inside them): each request's end is told once, with the answer the caller
 * gets. An error hook rethrows what it was given, so nothing else changes.
 */
function observeRequests(octokit: GitHubOctokit, observe: (observation: GitHubRequestObservation) => void): void {
  const tell = (options: RequestOptions, status: number | null, headers: Headers): void => {
    try {
      observe({ route: requestRoute(options), status, rateLimit: rateLimitOf(headers) });
    } catch {
      // metrics must never change what a request does
    }
  };
  octokit.hook.after('request', (response, options) => tell(options, response.status, response.headers));
  octokit.hook.error('request', (error, options) => {
    const answered = (error as { response?: { status?: unknown; headers?: Headers } }).response;
    tell(options, typeof answered?.status === 'number' ? answered.status : null, answered?.headers);
    throw error;
  });
}

function octokitLog(logger: Logger | undefined) {
  const line = (level: 'debug' | 'info' | 'warn' | 'error') => (message: string) => {
    logger?.[level](redactSecrets(String(message)));
  };
  return { debug: line('debug'), info: line('info'), warn: line('warn'), error: line('error') };
}

interface SpacingLane {
  schedule<T>(options: unknown, job: (...args: unknown[]) => Promise<T>, ...args: unknown[]): Promise<T>;
}

/**
 * The throttling plugin asks a group for a lane per client id and schedules a
 * no-op in it before each write: one lane runs jobs one at a time, each
 * starting at least `intervalMs` after the previous one started.
 */
function spacingGroup(intervalMs: number): { key(id: string): SpacingLane } {
  const lanes = new Map<string, SpacingLane>();
  return {
    key(id: string): SpacingLane {
      let lane = lanes.get(id);
      if (lane === undefined) {
        lane = spacingLane(intervalMs);
        lanes.set(id, lane);
      }
      return lane;
    },
  };
}

function spacingLane(intervalMs: number): SpacingLane {
  let tail: Promise<void> = Promise.resolve();
  let lastStart = Number.NEGATIVE_INFINITY;
  return {
    schedule<T>(_options: unknown, job: (...args: unknown[]) => Promise<T>, ...args: unknown[]): Promise<T> {
      const turn = tail.then(async () => {
        const wait = lastStart + intervalMs - Date.now();
        if (wait > 0) await new Promise<void>((resolve) => setTimeout(resolve, wait));
        lastStart = Date.now();
      });
      const result = turn.then(() => job(...args));
      tail = result.then(
        () => undefined,
        () => undefined,
      );
      return result;
    },
  };
}
