/**
 * The GitHub API test server: real HTTP on 127.0.0.1 (port 0) over an
 * in-memory repository. It answers the REST operations proofgate uses and its
 * GraphQL snapshot query, authenticates tokens and GitHub App JWTs, counts
 * every request, can be told to fail the next requests (rate limits, 5xx),
 * and checks every REST answer against GitHub's published response schema.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { randomBytes, verify as verifySignature, type KeyObject } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { execute, GraphqlError, parseOperation } from './graphql.js';
import { graphqlRoot } from './graphql-resolvers.js';
import { RepositoryModel } from './model.js';
import { checkResponse, matchRoute, type SchemaSource } from './openapi.js';
import { answerRest } from './rest.js';
import { error } from './rest-shapes.js';
import type { SchemaViolation } from './json-schema.js';

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  /** GitHub operation id, `graphql:<operation name>`, or `unknown`. */
  readonly operation: string;
  readonly status: number;
}

export interface SchemaCheck {
  readonly operationId: string;
  readonly status: number;
  readonly checkedBy: SchemaSource | null;
  readonly violations: readonly SchemaViolation[];
}

export interface InjectedFailure {
  readonly method?: string;
  /** Matches when the request path (without query) starts with this. */
  readonly pathPrefix?: string;
  readonly status: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: unknown;
  /** How many matching requests fail. Default 1. */
  readonly times?: number;
}

export interface GitHubTestServerOptions {
  readonly owner?: string;
  readonly repo?: string;
  /** token -> login it authenticates as. Default: { 'test-token': 'proofgate-bot' }. */
  readonly tokens?: Readonly<Record<string, string>>;
  /** Serve REST under /api/v3 and GraphQL at /api/graphql, as GitHub Enterprise does. */
  readonly enterprise?: boolean;
}

export interface GitHubTestServer {
  readonly url: string;
  /** The base URL to give Octokit. */
  readonly baseUrl: string;
  readonly model: RepositoryModel;
  readonly requests: RecordedRequest[];
  readonly schemaChecks: SchemaCheck[];
  failNext(failure: InjectedFailure): void;
  /** Lets a GitHub App (its public key) mint installation tokens acting as `${slug}[bot]`. */
  registerApp(app: { appId: number; slug: string; publicKey: KeyObject; installationId: number }): void;
  close(): Promise<void>;
}

export async function startGitHubServer(options: GitHubTestServerOptions = {}): Promise<GitHubTestServer> {
  const model = new RepositoryModel(options.owner ?? 'octo-org', options.repo ?? 'demo');
  const tokens = new Map(Object.entries(options.tokens ?? { 'test-token': 'proofgate-bot' }));
  const apps = new Map<number, { appId: number; slug: string; publicKey: KeyObject; installationId: number }>();
  const failures: (InjectedFailure & { left: number })[] = [];
  const requests: RecordedRequest[] = [];
  const schemaChecks: SchemaCheck[] = [];
  const restPrefix = options.enterprise === true ? '/api/v3' : '';
  const graphqlPath = options.enterprise === true ? '/api/graphql' : '/graphql';
  let url = '';

  const server = createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => {
      send(res, 500, { message: `test server error: ${String(err)}` });
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const target = new URL(req.url ?? '/', url);
    const method = req.method ?? 'GET';
    const isGraphql = method === 'POST' && target.pathname === graphqlPath;
    const restPath = target.pathname.startsWith(restPrefix) ? target.pathname.slice(restPrefix.length) : null;
    const route = isGraphql || restPath === null ? null : matchRoute(method, restPath);
    const operation = isGraphql ? 'graphql' : (route?.operationId ?? 'unknown');
    const reply = (status: number, body: unknown, headers: Readonly<Record<string, string>> = {}, op = operation) => {
      requests.push({ method, path: target.pathname, operation: op, status });
      if (route !== null) {
        const { checkedBy, violations } = checkResponse(route.operationId, status, body);
        schemaChecks.push({ operationId: route.operationId, status, checkedBy, violations });
      }
      send(res, status, body, headers);
    };

    const failure = failures.find((f) => f.left > 0 && (f.method === undefined || f.method === method) && target.pathname.startsWith(f.pathPrefix ?? ''));
    if (failure !== undefined) {
      failure.left--;
      reply(failure.status, failure.body ?? error('Injected failure', failure.status), failure.headers);
      return;
    }
    if (route?.operationId === 'apps/create-installation-access-token') {
      const minted = mintInstallationToken(req.headers.authorization, Number(route.params.installation_id));
      if (typeof minted === 'number') reply(minted, error(minted === 404 ? 'Not Found' : 'A JSON web token could not be decoded', minted));
      else reply(201, minted);
      return;
    }
    const actor = authenticate(req.headers.authorization);
    if (actor === null) {
      reply(401, error('Bad credentials', 401));
      return;
    }
    if (isGraphql) {
      const { status, body, name } = answerGraphql(raw);
      reply(status, body, {}, `graphql:${name}`);
      return;
    }
    if (route === null || restPath === null) {
      reply(404, error('Not Found', 404));
      return;
    }
    if (route.params.owner !== undefined && (route.params.owner !== model.owner || route.params.repo !== model.repo)) {
      reply(404, error('Not Found', 404));
      return;
    }
    let body: unknown = undefined;
    try {
      body = raw === '' ? undefined : JSON.parse(raw);
    } catch {
      reply(400, error('Problems parsing JSON', 400));
      return;
    }
    const web = url;
    const answer = answerRest({
      model,
      operationId: route.operationId,
      params: route.params,
      query: target.searchParams,
      body,
      actor,
      web,
      api: url + restPrefix,
    });
    if (answer === null) reply(404, error('Not Found', 404));
    else reply(answer.status, answer.body);
  }

  function answerGraphql(raw: string): { status: number; body: unknown; name: string } {
    let request: { query?: unknown; variables?: unknown };
    try {
      request = JSON.parse(raw) as { query?: unknown; variables?: unknown };
    } catch {
      return { status: 400, body: { message: 'Problems parsing JSON' }, name: 'invalid' };
    }
    if (typeof request.query !== 'string')
      return { status: 200, body: { errors: [{ message: 'A query attribute must be specified and must be a string.' }] }, name: 'invalid' };
    let name = 'anonymous';
    try {
      const op = parseOperation(request.query);
      name = op.name ?? 'anonymous';
      const variables = (typeof request.variables === 'object' && request.variables !== null ? request.variables : {}) as Record<string, unknown>;
      return { status: 200, body: { data: execute(op.selections, graphqlRoot(model, url), variables) }, name };
    } catch (err) {
      if (!(err instanceof GraphqlError)) throw err;
      // GitHub keeps the data above a missing object: a missing pull request still returns its repository.
      const path = Array.isArray(err.extra.path) ? err.extra.path.join('.') : '';
      const data = path === 'repository.pullRequest' ? { repository: { pullRequest: null } } : null;
      return { status: 200, body: { data, errors: [{ message: err.message, ...err.extra }] }, name };
    }
  }

  function authenticate(header: string | undefined): string | null {
    const m = /^(token|bearer)\s+(\S+)$/i.exec(header ?? '');
    return m === null ? null : (tokens.get(m[2] as string) ?? null);
  }

  function mintInstallationToken(header: string | undefined, installationId: number): number | { token: string; expires_at: string } {
    const jwt = /^bearer\s+(\S+)$/i.exec(header ?? '')?.[1];
    if (jwt === undefined) return 401;
    const [head, payload, signature] = jwt.split('.');
    if (head === undefined || payload === undefined || signature === undefined) return 401;
    let claims: { iss?: unknown; exp?: unknown };
    try {
      claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { iss?: unknown; exp?: unknown };
    } catch {
      return 401;
    }
    const app = apps.get(Number(claims.iss));
    if (app === undefined) return 401;
    const valid = verifySignature('RSA-SHA256', Buffer.from(`${head}.${payload}`), app.publicKey, Buffer.from(signature, 'base64url'));
    if (!valid || typeof claims.exp !== 'number' || claims.exp * 1000 < Date.now()) return 401;
    if (app.installationId !== installationId) return 404;
    const token = `ghs_${randomBytes(18).toString('hex')}`;
    tokens.set(token, `${app.slug}[bot]`);
    return { token, expires_at: new Date(Date.now() + 3600_000).toISOString().replace(/\.\d{3}Z$/, 'Z') };
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  for (const login of tokens.values()) model.user(login);

  return {
    url,
    baseUrl: url + restPrefix,
    model,
    requests,
    schemaChecks,
    failNext(failure: InjectedFailure): void {
      failures.push({ ...failure, left: failure.times ?? 1 });
    },
    registerApp(app): void {
      apps.set(app.appId, app);
      model.user(`${app.slug}[bot]`, 'Bot');
    },
    close(): Promise<void> {
      server.closeAllConnections();
      return new Promise((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'x-github-request-id': randomBytes(8).toString('hex').toUpperCase(),
    ...headers,
  });
  res.end(text);
}
