/**
 * The GitHub API test server: real HTTP on 127.0.0.1 (port 0) over an
 * in-memory repository. It answers the REST operations proofgate uses and its
 * GraphQL snapshot query, authenticates tokens and GitHub App JWTs, counts
 * every request, can be told to fail the next requests (rate limits, 5xx),
 * and checks every REST answer against GitHub's published response schema.
 *
 * GitHub Apps: `registerApp` gives an App (its public key) one installation
 * on the model's owner. Its JWT (RS256, `iss` = App id) mints installation
 * tokens and is the only credential GET /app and GET /app/installations take;
 * an installation token acts as `${slug}[bot]` and is the only credential
 * GET /installation/repositories takes.
 *
 * GitHub Actions: workflows a test registers in `model.actions` can be
 * dispatched, their runs listed and read, their artifacts listed and
 * downloaded; a download redirects to `storage`, a second server on another
 * port (another origin) that records each request's headers.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { randomBytes, verify as verifySignature, type KeyObject } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { execute, GraphqlError, parseOperation } from './graphql.js';
import { graphqlMutations, graphqlRoot } from './graphql-resolvers.js';
import { RepositoryModel } from './model.js';
import { checkResponse, matchRoute, type SchemaSource } from './openapi.js';
import { answerRest } from './rest.js';
import { error } from './rest-shapes.js';
import { startArtifactStorage, type ArtifactStorage } from './storage.js';
import type { SchemaViolation } from './json-schema.js';
import type { AppPermissionLevel, ModelApp } from './model.js';

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

/** What a test tells the server about a GitHub App; everything after `installationId` has a default. */
export interface AppRegistration {
  readonly appId: number;
  readonly slug: string;
  readonly publicKey: KeyObject;
  /** The App's one installation, on the model's owner. */
  readonly installationId: number;
  /** Default: the slug. */
  readonly name?: string;
  /** Default: null. */
  readonly description?: string | null;
  /** Login of the App's owner. Default: the model's owner. */
  readonly owner?: string;
  /** The App's and its installation's permissions. Default: DEFAULT_APP_PERMISSIONS. */
  readonly permissions?: Readonly<Record<string, AppPermissionLevel>>;
  /** Webhook events it subscribes to. Default: DEFAULT_APP_EVENTS. */
  readonly events?: readonly string[];
  /** Default: 'selected' (the model's one repository). */
  readonly repositorySelection?: 'all' | 'selected';
}

/** What a proofgate App asks for: read and write what it reviews and merges, read what it checks. */
export const DEFAULT_APP_PERMISSIONS: Readonly<Record<string, AppPermissionLevel>> = {
  actions: 'write',
  checks: 'write',
  contents: 'write',
  issues: 'write',
  metadata: 'read',
  pull_requests: 'write',
  statuses: 'read',
};

export const DEFAULT_APP_EVENTS: readonly string[] = ['check_run', 'check_suite', 'issue_comment', 'pull_request', 'pull_request_review', 'push', 'status'];

/** Operations only an App's JWT may call (apps/create-installation-access-token has its own branch). */
const JWT_OPERATIONS = new Set(['apps/get-authenticated', 'apps/list-installations']);

const JWT_UNDECODABLE = 'A JSON web token could not be decoded';
const JWT_EXPIRED = "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires";
const JWT_TOO_LONG = "'Expiration time' claim ('exp') is too far in the future";
const JWT_IAT = "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued";
const NOT_INSTALLATION = 'You must authenticate with an installation access token in order to list repositories for an installation.';

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
  /** Where artifact downloads redirect to (another origin), with every request it received. */
  readonly storage: ArtifactStorage;
  failNext(failure: InjectedFailure): void;
  /**
   * Lets a GitHub App (its public key) mint installation tokens acting as
   * `${slug}[bot]`, and answers GET /app, GET /app/installations and
   * GET /installation/repositories for it. Answers the App as registered.
   */
  registerApp(app: AppRegistration): ModelApp;
  /** The App a token was minted for (null: not an installation token of this server). */
  installationOf(token: string): ModelApp | null;
  close(): Promise<void>;
}

export async function startGitHubServer(options: GitHubTestServerOptions = {}): Promise<GitHubTestServer> {
  const model = new RepositoryModel(options.owner ?? 'octo-org', options.repo ?? 'demo');
  const tokens = new Map(Object.entries(options.tokens ?? { 'test-token': 'proofgate-bot' }));
  const apps = new Map<number, { app: ModelApp; publicKey: KeyObject }>();
  /** Installation token -> id of the App it was minted for. */
  const installationTokens = new Map<string, number>();
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
      if ('status' in minted) reply(minted.status, error(minted.message, minted.status));
      else reply(201, minted);
      return;
    }
    let app: ModelApp | null = null;
    let actor: string | null;
    if (route !== null && JWT_OPERATIONS.has(route.operationId)) {
      // GitHub answers any other credential (a user or installation token) as an undecodable JWT.
      const verified = verifyAppJwt(req.headers.authorization);
      if ('status' in verified) {
        reply(verified.status, error(verified.message, verified.status));
        return;
      }
      app = verified.app;
      actor = `${app.slug}[bot]`;
    } else {
      actor = authenticate(req.headers.authorization);
      if (actor === null && route?.operationId === 'apps/list-repos-accessible-to-installation' && !('status' in verifyAppJwt(req.headers.authorization))) {
        reply(403, error(NOT_INSTALLATION, 403));
        return;
      }
      if (actor === null) {
        reply(401, error('Bad credentials', 401));
        return;
      }
      const appId = installationTokens.get(credential(req.headers.authorization) ?? '');
      app = appId === undefined ? null : (apps.get(appId)?.app ?? null);
      if (route?.operationId === 'apps/list-repos-accessible-to-installation' && app === null) {
        reply(403, error(NOT_INSTALLATION, 403));
        return;
      }
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
      app,
      path: restPath,
      web,
      api: url + restPrefix,
      storageUrl: storage.url,
    });
    if (answer === null) reply(404, error('Not Found', 404));
    else if (answer.drop === 'reset') {
      // The change is made, but the answer is lost on the way: recorded with status 0, the connection reset.
      requests.push({ method, path: target.pathname, operation, status: 0 });
      res.socket?.destroy();
    } else reply(answer.status, answer.body, answer.headers);
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
      const root = op.type === 'mutation' ? graphqlMutations(model) : graphqlRoot(model, url);
      return { status: 200, body: { data: execute(op.selections, root, variables) }, name };
    } catch (err) {
      if (!(err instanceof GraphqlError)) throw err;
      // GitHub keeps the data above a missing object: a missing pull request still returns its repository.
      const path = Array.isArray(err.extra.path) ? err.extra.path.join('.') : '';
      const data =
        path === 'repository.pullRequest'
          ? { repository: { pullRequest: null } }
          : path === 'enqueuePullRequest' || path === 'dequeuePullRequest'
            ? { [path]: null }
            : null;
      return { status: 200, body: { data, errors: [{ message: err.message, ...err.extra }] }, name };
    }
  }

  function credential(header: string | undefined): string | null {
    return /^(?:token|bearer)\s+(\S+)$/i.exec(header ?? '')?.[1] ?? null;
  }

  function authenticate(header: string | undefined): string | null {
    const token = credential(header);
    return token === null ? null : (tokens.get(token) ?? null);
  }

  /**
   * A GitHub App's JWT: `Bearer` header.payload.signature, RS256-signed by a
   * registered App's key (`iss` = its id), issued (`iat`) no later than now
   * and expiring (`exp`) in the future but at most ten minutes ahead, with
   * GitHub's messages for each refusal (@octokit/auth-app reads the clock
   * ones to correct its clock).
   */
  function verifyAppJwt(header: string | undefined): { app: ModelApp } | { status: 401; message: string } {
    const refuse = (message: string) => ({ status: 401 as const, message });
    const jwt = /^bearer\s+(\S+)$/i.exec(header ?? '')?.[1];
    if (jwt === undefined) return refuse(JWT_UNDECODABLE);
    const [head, payload, signature, extra] = jwt.split('.');
    if (head === undefined || payload === undefined || signature === undefined || extra !== undefined) return refuse(JWT_UNDECODABLE);
    let claims: { iss?: unknown; exp?: unknown; iat?: unknown; alg?: unknown };
    try {
      claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as typeof claims;
      if (typeof claims !== 'object' || claims === null) return refuse(JWT_UNDECODABLE);
    } catch {
      return refuse(JWT_UNDECODABLE);
    }
    const registered = apps.get(Number(claims.iss));
    if (registered === undefined) return refuse(JWT_UNDECODABLE);
    const valid = verifySignature('RSA-SHA256', Buffer.from(`${head}.${payload}`), registered.publicKey, Buffer.from(signature, 'base64url'));
    if (!valid) return refuse(JWT_UNDECODABLE);
    const now = Date.now() / 1000;
    if (typeof claims.iat !== 'number' || !Number.isInteger(claims.iat) || claims.iat > now + 60) return refuse(JWT_IAT);
    if (typeof claims.exp !== 'number' || claims.exp < now) return refuse(JWT_EXPIRED);
    if (claims.exp > now + 600) return refuse(JWT_TOO_LONG);
    return { app: registered.app };
  }

  function mintInstallationToken(
    header: string | undefined,
    installationId: number,
  ): { status: number; message: string } | { token: string; expires_at: string; permissions: Record<string, string>; repository_selection: string } {
    const verified = verifyAppJwt(header);
    if ('status' in verified) return verified;
    const { app } = verified;
    if (app.installationId !== installationId) return { status: 404, message: 'Not Found' };
    const token = `ghs_${randomBytes(18).toString('hex')}`;
    tokens.set(token, `${app.slug}[bot]`);
    installationTokens.set(token, app.appId);
    return {
      token,
      expires_at: new Date(Date.now() + 3600_000).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      permissions: { ...app.permissions },
      repository_selection: app.repositorySelection,
    };
  }

  const storage = await startArtifactStorage(model.actions);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  model.serverUrl = url;
  for (const login of tokens.values()) model.user(login);

  return {
    url,
    baseUrl: url + restPrefix,
    model,
    requests,
    schemaChecks,
    storage,
    failNext(failure: InjectedFailure): void {
      failures.push({ ...failure, left: failure.times ?? 1 });
    },
    registerApp(registration): ModelApp {
      const app: ModelApp = {
        appId: registration.appId,
        slug: registration.slug,
        name: registration.name ?? registration.slug,
        description: registration.description ?? null,
        owner: registration.owner ?? model.owner,
        permissions: { ...(registration.permissions ?? DEFAULT_APP_PERMISSIONS) },
        events: [...(registration.events ?? DEFAULT_APP_EVENTS)],
        installationId: registration.installationId,
        repositorySelection: registration.repositorySelection ?? 'selected',
        createdAt: model.epoch,
      };
      apps.set(app.appId, { app, publicKey: registration.publicKey });
      model.user(`${app.slug}[bot]`, 'Bot');
      model.user(app.owner);
      return app;
    },
    installationOf(token: string): ModelApp | null {
      const appId = installationTokens.get(token);
      return appId === undefined ? null : (apps.get(appId)?.app ?? null);
    },
    async close(): Promise<void> {
      server.closeAllConnections();
      await Promise.all([new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve()))), storage.close()]);
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

/** An undefined body is no body at all (a 204), without content headers. */
function send(res: ServerResponse, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void {
  const text = body === undefined ? null : JSON.stringify(body);
  res.writeHead(status, {
    ...(text === null ? {} : { 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(text)) }),
    'x-github-request-id': randomBytes(8).toString('hex').toUpperCase(),
    ...headers,
  });
  res.end(text ?? undefined);
}
