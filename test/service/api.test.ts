/**
 * The read API and identities of `proofgate serve --repo`, over real HTTP:
 * `startLocalService` on a real temporary repository with a real change,
 * tokens made by the `token` command's functions in the same data directory.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createToken, listTokens, revokeToken } from '../../src/cli/commands/token.js';
import { openLocalForge } from '../../src/forge/local/index.js';
import { createServiceServer } from '../../src/service/http.js';
import { tokenHash } from '../../src/service/identities.js';
import { startLocalService, type LocalService } from '../../src/service/local.js';
import { makeSeededRepo, type TempRepo } from '../forge/git-fixture.js';
import { CHECK_SCRIPT, repoConfig } from '../automerge/loop/local-support.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const silent = pino({ level: 'silent' });
const TITLE = '<script>alert("x")</script> & "quotes"';

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A repository with the trusted config on main and one open change (id 1) from `feature`, with an HTML-ish title. */
async function repoWithChange(): Promise<{ repo: TempRepo; data: string }> {
  const repo = makeSeededRepo('proofgate-api-', { 'README.md': '# api\n', 'check.mjs': CHECK_SCRIPT, '.proofgate.yml': repoConfig() });
  cleanups.push(() => repo.cleanup());
  repo.commit('feature', { 'feature.txt': 'a feature\n' }, 'add feature', 'main');
  const data = tempDir('proofgate-api-data-');
  const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
  try {
    expect((await opened.forge.openChange({ head: 'feature', base: 'main', author: 'Casey Contributor', title: TITLE })).id).toBe('1');
  } finally {
    await opened.close();
  }
  return { repo, data };
}

async function serve(repo: TempRepo, data: string, host = '127.0.0.1'): Promise<LocalService & { url: string }> {
  const service = await startLocalService({ repoDir: repo.dir, dataDir: data, host, port: 0, http: true, logger: silent, pollMs: 50 });
  cleanups.push(() => service.stop(0));
  if (service.url === null) throw new Error('no url');
  return service as LocalService & { url: string };
}

interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  readonly json: Record<string, unknown>;
}

/** GET `path` with an explicit Host header (default: the URL's) and optional bearer token. */
function get(url: string, path: string, options: { host?: string; token?: string; authorization?: string } = {}): Promise<Reply> {
  const target = new URL(path, url);
  const headers: Record<string, string> = { host: options.host ?? target.host };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  if (options.authorization !== undefined) headers.authorization = options.authorization;
  return new Promise((resolve, reject) => {
    const req = request({ hostname: target.hostname.replace(/^\[|\]$/g, ''), port: target.port, path: target.pathname, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: JSON.parse(text) as Record<string, unknown> });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** Every byte of the data directory's files, as one buffer. */
function storeBytes(data: string): Buffer {
  return Buffer.concat(readdirSync(data).map((name) => readFileSync(join(data, name))));
}

describe('token commands', () => {
  it('create prints a token once, stores only its hash, and list never shows either', async () => {
    const data = tempDir('proofgate-tokens-');
    const created = await createToken('agent-1', { data, permission: 'write' });
    expect(created.token).toMatch(/^pgt_[A-Za-z0-9_-]{43}$/);
    expect(created.identity).toMatchObject({ name: 'agent-1', permission: 'write', revokedAt: null });
    const listed = await listTokens({ data });
    expect(listed).toEqual([created.identity]);
    expect(JSON.stringify(listed)).not.toContain('sha256');
    const bytes = storeBytes(data);
    expect(bytes.includes(tokenHash(created.token))).toBe(true);
    expect(bytes.includes(created.token)).toBe(false);
    expect(bytes.includes(created.token.slice(4))).toBe(false);

    expect((await createToken('reader', { data })).identity.permission).toBe('read');
    const revoked = await revokeToken('AGENT-1', { data });
    expect(revoked.name).toBe('agent-1');
    expect(revoked.revokedAt).not.toBeNull();
    expect((await listTokens({ data })).map((entry) => [entry.name, entry.revokedAt === null])).toEqual([
      ['agent-1', false],
      ['reader', true],
    ]);
    // A revoked name may have a new token.
    expect((await createToken('agent-1', { data })).identity.revokedAt).toBeNull();
  });

  it.each([
    ['proofgate', {}, 'RESERVED_IDENTITY'],
    ['PROOFGATE', {}, 'RESERVED_IDENTITY'],
    ['two words', {}, 'INVALID_INPUT'],
    ['', {}, 'INVALID_INPUT'],
    ['agent', { permission: 'root' }, 'USAGE'],
    ['agent', { permission: 'none' }, 'USAGE'],
  ])('create %j %j is refused (%s) and stores nothing', async (name, flags, code) => {
    const data = tempDir('proofgate-tokens-');
    await expect(createToken(name, { data, ...flags })).rejects.toMatchObject({ code });
    expect(readdirSync(data)).toEqual([]);
  });

  it('refuse a second live token for one name, and a revoke of nobody', async () => {
    const data = tempDir('proofgate-tokens-');
    await createToken('agent', { data });
    await expect(createToken('Agent', { data })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(revokeToken('nobody', { data })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(await listTokens({ data })).toHaveLength(1);
  });

  it('use the repository data directory without --data', async () => {
    const { repo } = await repoWithChange();
    await createToken('agent', { repo: repo.dir });
    expect(existsSync(join(repo.dir, '.git', 'proofgate', 'proofgate.sqlite'))).toBe(true);
    expect((await listTokens({ repo: repo.dir })).map((entry) => entry.name)).toEqual(['agent']);
  });
});

describe('serve --repo: the read API', () => {
  it('lists and shows changes on loopback with or without a token, refuses bad tokens, and a revoke takes effect at once', async () => {
    const { repo, data } = await repoWithChange();
    const { token } = await createToken('agent', { data });
    const service = await serve(repo, data);

    const anonymous = await get(service.url, '/api/changes');
    expect(anonymous.status).toBe(200);
    expect(anonymous.headers['content-type']).toBe('application/json; charset=utf-8');
    // One page of the dashboard's projection: every change the service has seen, with its stage.
    expect(anonymous.json).toMatchObject({
      changes: [{ id: '1', number: 1, title: TITLE, state: 'open', stage: 'arriving', base: 'main', head: 'feature', headSha: repo.sha('feature') }],
      nextCursor: null,
    });
    expect(anonymous.json.changes).toHaveLength(1);
    // Untrusted text is a JSON string: no HTML escaping, no raw markup outside a string.
    expect(anonymous.text).toContain(JSON.stringify(TITLE));

    const listed = await get(service.url, '/api/changes', { token });
    expect(listed.status).toBe(200);
    expect(listed.json).toEqual(anonymous.json);

    const shown = await get(service.url, '/api/changes/1', { token });
    expect(shown.status).toBe(200);
    const change = shown.json.change as Record<string, unknown>;
    expect(change).toMatchObject({
      id: '1',
      title: TITLE,
      state: 'open',
      base: { ref: 'main', sha: repo.sha('main') },
      head: { ref: 'feature', sha: repo.sha('feature') },
      author: { login: 'Casey Contributor' },
    });
    expect(change).not.toHaveProperty('comments');
    expect(change).not.toHaveProperty('checks');

    for (const path of ['/api/changes/2', '/api/changes/abc', '/api/changes/1/x', '/api/nothing']) {
      expect((await get(service.url, path, { token })).status, path).toBe(404);
    }

    const unknown = await get(service.url, '/api/changes', { token: `pgt_${'A'.repeat(43)}` });
    expect(unknown.status).toBe(401);
    expect(unknown.headers['www-authenticate']).toContain('Bearer');
    expect((await get(service.url, '/api/changes', { token: 'not-a-token' })).status).toBe(401);
    expect((await get(service.url, '/api/changes', { authorization: 'Basic YWdlbnQ6eA==' })).status).toBe(401);

    await revokeToken('agent', { data });
    const revoked = await get(service.url, '/api/changes/1', { token });
    expect(revoked.status).toBe(401);
    expect(revoked.json).toEqual({ error: 'the token is unknown or revoked' });
  });

  it('refuses a Host header that does not name the server, on every route', async () => {
    const { repo, data } = await repoWithChange();
    const { token } = await createToken('agent', { data });
    const service = await serve(repo, data);
    const port = new URL(service.url).port;
    for (const path of ['/api/changes', '/healthz', '/metrics', '/nowhere']) {
      const refused = await get(service.url, path, { host: `rebound.example:${port}`, token });
      expect(refused.status, path).toBe(421);
      expect(refused.json.error).toContain('Host');
    }
    expect((await get(service.url, '/api/changes', { host: `127.0.0.1:${Number(port) + 1}` })).status).toBe(421);
    expect((await get(service.url, '/api/changes', { host: `localhost:${port}` })).status).toBe(200);
    expect((await get(service.url, '/healthz', { host: `LOCALHOST:${port}` })).status).toBe(200);
  });

  const lan = Object.values(networkInterfaces())
    .flat()
    .find((entry) => entry !== undefined && !entry.internal && entry.family === 'IPv4');
  it.skipIf(lan === undefined)('off loopback, a read needs a token (no non-loopback IPv4 address here otherwise)', async () => {
    const { repo, data } = await repoWithChange();
    const { token } = await createToken('agent', { data });
    const service = await serve(repo, data, lan?.address);
    const anonymous = await get(service.url, '/api/changes');
    expect(anonymous.status).toBe(401);
    expect(anonymous.json.error).toContain('needs a token');
    expect((await get(service.url, '/api/changes', { token })).status).toBe(200);
    // The health routes stay open (they say nothing about the repository).
    expect((await get(service.url, '/healthz')).status).toBe(200);
  });

  it('never keeps a token in the clear in the store files', async () => {
    const { repo, data } = await repoWithChange();
    const { token } = await createToken('agent', { data, permission: 'admin' });
    const service = await serve(repo, data);
    expect((await get(service.url, '/api/changes', { token })).status).toBe(200);
    await service.stop(0);
    const bytes = storeBytes(data);
    expect(bytes.includes(tokenHash(token))).toBe(true);
    expect(bytes.includes(token)).toBe(false);
    expect(bytes.includes(token.slice(4))).toBe(false);
    expect(bytes.includes(Buffer.from(token.slice(4), 'base64url'))).toBe(false);
  });
});

describe('the HTTP front', () => {
  it('answers 403 to a caller whose effective permission is below read', async () => {
    const server = await createServiceServer({
      host: '127.0.0.1',
      port: 0,
      logger: silent,
      ready: async () => true,
      checkHost: true,
      api: {
        authenticate: async (token) => (token.endsWith('A') ? { login: 'outsider', permission: 'none' } : null),
        get: async () => ({ status: 200, body: { secret: true } }),
      },
    });
    cleanups.push(() => server.close());
    const denied = await get(server.url, '/api/changes', { token: `pgt_${'A'.repeat(43)}` });
    expect(denied.status).toBe(403);
    expect(denied.json.error).toContain('outsider');
    expect(denied.text).not.toContain('secret');
  });
});
