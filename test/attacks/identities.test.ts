/**
 * Attacks on the identities and read API of `proofgate serve --repo`: real
 * HTTP on 127.0.0.1 (raw sockets where a client library would tidy the
 * request), a real repository and store, tokens made by the `token` command's
 * functions or by the built CLI in separate processes.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createToken, listTokens, revokeToken } from '../../src/cli/commands/token.js';
import { openLocalForge } from '../../src/forge/local/index.js';
import { hostProblem } from '../../src/service/http.js';
import { bearerToken, loginProblem, openIdentityStore, tokenHash } from '../../src/service/identities.js';
import { startLocalService, type LocalService } from '../../src/service/local.js';
import { runCliAsync } from '../cli/helpers.js';
import { makeSeededRepo, type TempRepo } from '../forge/git-fixture.js';
import { CHECK_SCRIPT, repoConfig } from '../automerge/loop/local-support.js';

/** One CLI run may take this long on a loaded machine. */
const CLI_TIMEOUT = 120_000;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Every log line the service writes, kept in memory. */
function capturedLogger(): { logger: pino.Logger; text: () => string } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, sink), text: () => lines.join('') };
}

async function repoWithChange(title: string): Promise<{ repo: TempRepo; data: string }> {
  const repo = makeSeededRepo('proofgate-idatk-', { 'README.md': '# api\n', 'check.mjs': CHECK_SCRIPT, '.proofgate.yml': repoConfig() });
  cleanups.push(() => repo.cleanup());
  repo.commit('feature', { 'feature.txt': 'a feature\n' }, 'add feature', 'main');
  const data = tempDir('proofgate-idatk-data-');
  const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
  try {
    expect((await opened.forge.openChange({ head: 'feature', base: 'main', author: 'Casey Contributor', title })).id).toBe('1');
  } finally {
    await opened.close();
  }
  return { repo, data };
}

async function serve(repo: TempRepo, data: string, logger: pino.Logger, host = '127.0.0.1'): Promise<LocalService & { url: string; port: number }> {
  const service = await startLocalService({ repoDir: repo.dir, dataDir: data, host, port: 0, http: true, logger, pollMs: 50 });
  cleanups.push(() => service.stop(0));
  if (service.url === null) throw new Error('no url');
  return Object.assign(service, { url: service.url, port: Number(new URL(service.url).port) });
}

interface RawReply {
  readonly status: number;
  readonly head: string;
  readonly body: string;
}

/** Send `lines` (CRLF-joined, then a blank line) as one raw HTTP request and read the answer until the server closes. */
function raw(port: number, lines: readonly string[], host = '127.0.0.1'): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('end', () => socket.end());
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const head = split < 0 ? text : text.slice(0, split);
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
      resolve({ status, head, body: split < 0 ? '' : text.slice(split + 4) });
    });
    socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  });
}

/** A GET of `path` with `Connection: close`, the given Host and any extra header lines. */
function rawGet(port: number, path: string, host: string | null, extra: readonly string[] = [], bind = '127.0.0.1'): Promise<RawReply> {
  return raw(port, [`GET ${path} HTTP/1.1`, ...(host === null ? [] : [`Host: ${host}`]), ...extra, 'Connection: close'], bind);
}

function storeBytes(data: string): Buffer {
  return Buffer.concat(readdirSync(data).map((name) => readFileSync(join(data, name))));
}

/** None of the token, its base64url body, nor (for logs) its hash in `text`. */
function expectNoToken(text: string | Buffer, token: string, what: string): void {
  const haystack = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  expect(haystack.includes(token), `${what}: token`).toBe(false);
  expect(haystack.includes(token.slice(4)), `${what}: token body`).toBe(false);
  expect(haystack.includes(Buffer.from(token.slice(4), 'base64url')), `${what}: token bytes`).toBe(false);
}

describe('DNS rebinding: the Host header', () => {
  it('refuses every Host that is not the bound address or localhost with the bound port, and answers nothing else', async () => {
    const { repo, data } = await repoWithChange('plain');
    const { token } = await createToken('agent', { data });
    const log = capturedLogger();
    const service = await serve(repo, data, log.logger);
    const port = service.port;
    const auth = [`Authorization: Bearer ${token}`];
    const refused = [
      `evil.example:${port}`,
      `evil.example`,
      `127.0.0.1.:${port}`,
      `localhost.:${port}`,
      `[::1]:${port}`,
      `[::ffff:127.0.0.1]:${port}`,
      `[::ffff:7f00:1]:${port}`,
      `2130706433:${port}`,
      `0x7f.0.0.1:${port}`,
      `127.1:${port}`,
      `127.0.0.2:${port}`,
      `0.0.0.0:${port}`,
      `user@127.0.0.1:${port}`,
      `127.0.0.1:${port}@evil.example`,
      `127.0.0.1:0${port}`,
      `127.0.0.1:${port}:${port}`,
      `127.0.0.1`,
      `localhost`,
      `127.0.0.1:${port}.evil.example`,
      `localhost:${port}/x`,
      `${token}:${port}`,
    ];
    for (const host of refused) {
      for (const path of ['/api/changes', '/api/changes/1', '/metrics', '/healthz']) {
        const reply = await rawGet(port, path, host, auth);
        expect(reply.status, `${host} ${path}`).toBe(421);
        expect(reply.body, `${host} ${path}`).not.toContain('feature');
        expect(reply.body).not.toContain('nodejs_');
      }
    }
    // HTTP/1.0 without a Host header.
    const noHost = await raw(port, ['GET /api/changes HTTP/1.0']);
    expect(noHost.status).toBe(421);
    // HTTP/1.1 without a Host header: Node itself refuses it.
    expect((await rawGet(port, '/api/changes', null)).status).toBe(400);
    // Letter case of a DNS name does not matter; the names of the server are still accepted.
    for (const host of [`LOCALHOST:${port}`, `LocalHost:${port}`, `127.0.0.1:${port}`, `localhost:${port}`]) {
      expect((await rawGet(port, '/api/changes', host, auth)).status, host).toBe(200);
    }
    // The Host header went to the log redacted; the token never did.
    expectNoToken(log.text(), token, 'log');
    expect(log.text()).toContain('request for another host refused');
  });

  it('does not let an absolute-form request URI name another host or route past the check', async () => {
    const { repo, data } = await repoWithChange('plain');
    const service = await serve(repo, data, capturedLogger().logger);
    const port = service.port;
    // The authority in the request line is another host: never the API's answer.
    const evil = await raw(port, [`GET http://evil.example:${port}/api/changes HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Connection: close']);
    expect(evil.body).not.toContain('"changes"');
    expect([400, 404, 421]).toContain(evil.status);
    // Even naming this server in the request line, a wrong Host is refused.
    const wrongHost = await raw(port, [`GET http://127.0.0.1:${port}/api/changes HTTP/1.1`, `Host: evil.example:${port}`, 'Connection: close']);
    expect(wrongHost.status).toBe(421);
  });

  it('duplicate Host headers never let a foreign name through', async () => {
    const { repo, data } = await repoWithChange('plain');
    const service = await serve(repo, data, capturedLogger().logger);
    const port = service.port;
    const evilFirst = await rawGet(port, '/api/changes', `evil.example:${port}`, [`Host: 127.0.0.1:${port}`]);
    expect(evilFirst.status).not.toBe(200);
    expect(evilFirst.body).not.toContain('"changes"');
    // The right name first and a foreign one after: refused too (a proxy reading the last line would disagree).
    const evilLast = await rawGet(port, '/api/changes', `127.0.0.1:${port}`, [`Host: evil.example:${port}`]);
    expect(evilLast.status).toBe(421);
    expect(evilLast.body).not.toContain('"changes"');
  });

  it('bound to a wildcard, any name with the port passes the Host check, but nothing is read without a token', async () => {
    const { repo, data } = await repoWithChange('plain');
    const { token } = await createToken('agent', { data });
    const service = await serve(repo, data, capturedLogger().logger, '0.0.0.0');
    const port = service.port;
    const anonymous = await rawGet(port, '/api/changes', `evil.example:${port}`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.body).not.toContain('"changes"');
    expect((await rawGet(port, '/api/changes', `127.0.0.1:${port}`)).status).toBe(401);
    expect((await rawGet(port, '/api/changes', `evil.example:${port + 1}`, [`Authorization: Bearer ${token}`])).status).toBe(421);
    expect((await rawGet(port, '/api/changes', `localhost:${port}`, [`Authorization: Bearer ${token}`])).status).toBe(200);
  });

  it('hostProblem (pure): forms a browser can be made to send', () => {
    const bound = { address: '127.0.0.1', family: 'IPv4', port: 8080 };
    expect(hostProblem('127.0.0.1:8080', bound)).toBeNull();
    expect(hostProblem(' localhost:8080 ', bound)).toBeNull();
    for (const host of ['', 'localhost.:8080', '127.0.0.1.:8080', 'localhost:80', 'LOCALHOST', '[::1]:8080', 'evil:8080', 'localhost:8080\r\nx: y']) {
      expect(hostProblem(host, bound), host).not.toBeNull();
    }
    expect(hostProblem(undefined, bound)).not.toBeNull();
    const six = { address: '::1', family: 'IPv6', port: 8080 };
    expect(hostProblem('[::1]:8080', six)).toBeNull();
    expect(hostProblem('localhost:8080', six)).toBeNull();
    for (const host of ['[0:0:0:0:0:0:0:1]:8080', '[::0001]:8080', '::1:8080', '[::1]', '127.0.0.1:8080', '[::1%25lo]:8080']) {
      expect(hostProblem(host, six), host).not.toBeNull();
    }
  });

  it('on ::1, only [::1]:port and localhost:port are this server', async () => {
    const { repo, data } = await repoWithChange('plain');
    let service;
    try {
      service = await serve(repo, data, capturedLogger().logger, '::1');
    } catch {
      return; // no IPv6 loopback on this machine
    }
    const port = service.port;
    expect((await rawGet(port, '/api/changes', `[::1]:${port}`, [], '::1')).status).toBe(200);
    expect((await rawGet(port, '/api/changes', `localhost:${port}`, [], '::1')).status).toBe(200);
    for (const host of [`[0:0:0:0:0:0:0:1]:${port}`, `[::0:1]:${port}`, `127.0.0.1:${port}`, `evil.example:${port}`]) {
      expect((await rawGet(port, '/api/changes', host, [], '::1')).status, host).toBe(421);
    }
  });
});

describe('path tricks', () => {
  it('never reaches another route or a change by a path that is not exactly the route', async () => {
    const { repo, data } = await repoWithChange('plain');
    const { token } = await createToken('agent', { data });
    const log = capturedLogger();
    const service = await serve(repo, data, log.logger);
    const port = service.port;
    const host = `127.0.0.1:${port}`;
    const auth = [`Authorization: Bearer ${token}`];
    const notFound = [
      '/api',
      '/api/',
      '/api/../metrics',
      '/api/..%2fmetrics',
      '/api/%2e%2e/metrics',
      '/api/./changes',
      '/api//changes',
      '/API/changes',
      '/Api/changes',
      '/api/Changes',
      '/api/changes/',
      '/api/%63hanges',
      '/api/changes/1/',
      '/api/changes//1',
      '/api/changes/../../x',
      '/api/changes/..%2f..%2fx',
      '/api/changes/%2e%2e',
      '/api/changes/1%00',
      '/api/changes/1%2f',
      '/api/changes/%31',
      '/api/changes/01',
      '/api/changes/+1',
      '/api/changes/1.0',
      '/api/changes/0x1',
      '/api/changes/0',
      '/api/changes/-1',
      '/api/changes/1e0',
      '/api/changes/9999999999999999',
      '/api/changes/99999999999999999999',
      '/api/changes;1',
      '/api/changes/1;x',
      '/api/changes#x',
      `/api/${'a'.repeat(8000)}`,
      '/metrics/../api/changes',
    ];
    for (const path of notFound) {
      const reply = await rawGet(port, path, host, auth);
      expect(reply.status, path).toBe(404);
      expect(reply.body, path).not.toContain('nodejs_');
      expect(reply.body, path).not.toContain('"change"');
      expect(reply.body, path).not.toContain('"changes"');
    }
    // Query strings are not part of the route.
    expect((await rawGet(port, '/api/changes?x=../metrics', host, auth)).status).toBe(200);
    expect((await rawGet(port, '/api/changes/1?x=1', host, auth)).status).toBe(200);
    // Raw bytes the HTTP parser must refuse before any route.
    for (const path of ['/api/changes/1\x00', '/api/changes /1', '/api/changes/1\x7f']) {
      const reply = await rawGet(port, path, host, auth);
      expect(reply.status, JSON.stringify(path)).toBe(400);
    }
    // A path past Node's header limit is refused by Node (431), not routed.
    expect((await rawGet(port, `/api/${'a'.repeat(20_000)}`, host, auth)).status).toBe(431);
    // Methods other than GET/HEAD on a read route (POST /api/changes is a write: test/attacks/identity-writes.test.ts).
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
      const reply = await raw(port, [`${method} /api/changes/1 HTTP/1.1`, `Host: ${host}`, ...auth, 'Content-Length: 0', 'Connection: close']);
      expect(reply.status, method).toBe(405);
    }
    const head = await raw(port, [`HEAD /api/changes HTTP/1.1`, `Host: ${host}`, ...auth, 'Connection: close']);
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    // A long path reaches the log cut short; the log has no token.
    for (const line of log
      .text()
      .split('\n')
      .filter((entry) => entry !== ''))
      expect(line.length).toBeLessThan(2000);
    expectNoToken(log.text(), token, 'log');
  });
});

describe('bearer auth tricks', () => {
  it('reads the scheme case-insensitively, refuses any other shape, and always checks a token given on loopback', async () => {
    const { repo, data } = await repoWithChange('plain');
    const { token } = await createToken('agent', { data });
    const log = capturedLogger();
    const service = await serve(repo, data, log.logger);
    const port = service.port;
    const host = `127.0.0.1:${port}`;
    const accepted = [`Bearer ${token}`, `bearer ${token}`, `BEARER ${token}`, `Bearer   ${token}`, `Bearer ${token}   `, `  Bearer ${token}`];
    for (const value of accepted) expect((await rawGet(port, '/api/changes', host, [`Authorization: ${value}`])).status, value).toBe(200);
    const refused = [
      '',
      'Bearer',
      'Bearer ',
      `Bearer\t${token}`,
      `Bearer ${token} extra`,
      `Bearer ${token},Bearer ${token}`,
      `Bearer "${token}"`,
      `Bearer ${token.toUpperCase()}`,
      `Bearer ${token.slice(0, -1)}`,
      `Bearer ${token}A`,
      `Bearer ${token.slice(4)}`,
      `Bearer PGT_${token.slice(4)}`,
      `Token ${token}`,
      `Basic ${Buffer.from(`agent:${token}`).toString('base64')}`,
      `Bearer=${token}`,
      `Bearer ${tokenHash(token)}`,
    ];
    for (const value of refused) {
      const reply = await rawGet(port, '/api/changes', host, [`Authorization: ${value}`]);
      expect(reply.status, value).toBe(401);
      expect(reply.head.toLowerCase()).toContain('www-authenticate: bearer');
      expect(reply.body).not.toContain('"changes"');
      expectNoToken(reply.body, token, `answer to ${value}`);
    }
    expectNoToken(log.text(), token, 'log');
  });

  it('two Authorization headers: a good token after a bad one never gets in', async () => {
    const { repo, data } = await repoWithChange('plain');
    const { token } = await createToken('agent', { data });
    const service = await serve(repo, data, capturedLogger().logger);
    const host = `127.0.0.1:${service.port}`;
    const reply = await rawGet(service.port, '/api/changes', host, [`Authorization: Bearer pgt_${'B'.repeat(43)}`, `Authorization: Bearer ${token}`]);
    expect(reply.status).toBe(401);
    expect(reply.body).not.toContain('"changes"');
    // The good token first and a bad one after: refused as well, never read as the first alone.
    const goodFirst = await rawGet(service.port, '/api/changes', host, [`Authorization: Bearer ${token}`, `Authorization: Bearer pgt_${'B'.repeat(43)}`]);
    expect(goodFirst.status).toBe(401);
    expect(goodFirst.body).not.toContain('"changes"');
  });

  it('a token put in a path is never echoed by a 404 or 405 answer, and a long path is cut', async () => {
    const { repo, data } = await repoWithChange('plain');
    const { token } = await createToken('agent', { data });
    const service = await serve(repo, data, capturedLogger().logger);
    const host = `127.0.0.1:${service.port}`;
    for (const path of [`/api/${token}`, `/x/${token}`]) {
      const reply = await rawGet(service.port, path, host);
      expect(reply.status).toBe(404);
      expectNoToken(reply.body, token, `GET ${path}`);
    }
    const posted = await raw(service.port, [`POST /api/${token} HTTP/1.1`, `Host: ${host}`, 'Content-Length: 0', 'Connection: close']);
    expect(posted.status).toBe(405);
    expectNoToken(posted.body, token, 'POST');
    const long = await rawGet(service.port, `/api/${'a'.repeat(8000)}`, host);
    expect(long.status).toBe(404);
    expect(long.body.length).toBeLessThan(1000);
  });

  it('`token revoke` given a token instead of a name does not print it', async () => {
    const data = tempDir('proofgate-idatk-revoke-');
    const { token } = await createToken('agent', { data });
    const result = await runCliAsync(['token', 'revoke', token, '--data', data]);
    expect(result.status).toBe(1);
    expectNoToken(result.stderr, token, 'stderr');
    expectNoToken(result.stdout, token, 'stdout');
  });

  it('pure bearerToken: two header values are refused', () => {
    expect(bearerToken(['Bearer a', 'Bearer b'])).toHaveProperty('problem');
    expect(bearerToken('Bearer\nx')).toHaveProperty('problem');
    expect(bearerToken(undefined)).toEqual({ token: null });
  });

  it('a revoked token stays dead after its name gets a new one', async () => {
    const { repo, data } = await repoWithChange('plain');
    const first = await createToken('agent', { data, permission: 'admin' });
    const service = await serve(repo, data, capturedLogger().logger);
    const host = `127.0.0.1:${service.port}`;
    const ok = (token: string): Promise<number> => rawGet(service.port, '/api/changes', host, [`Authorization: Bearer ${token}`]).then((reply) => reply.status);
    expect(await ok(first.token)).toBe(200);
    await revokeToken('Agent', { data });
    expect(await ok(first.token)).toBe(401);
    const second = await createToken('AGENT', { data, permission: 'read' });
    expect(await ok(first.token)).toBe(401);
    expect(await ok(second.token)).toBe(200);
    await revokeToken('agent', { data });
    const third = await createToken('agent', { data });
    for (const token of [first.token, second.token]) expect(await ok(token)).toBe(401);
    expect(await ok(third.token)).toBe(200);
    const listed = await listTokens({ data });
    expect(listed.map((entry) => [entry.name, entry.revokedAt === null])).toEqual([
      ['agent', false],
      ['AGENT', false],
      ['agent', true],
    ]);
    // A second revoke of a revoked name finds nothing; the live one is untouched.
    await revokeToken('agent', { data });
    await expect(revokeToken('agent', { data })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    for (const token of [first.token, second.token, third.token]) expect(await ok(token)).toBe(401);
  });
});

describe('token leakage', () => {
  it(
    'no token, token body or hash in the store, the logs, `token list --json`, or the answers; a token in a title never reaches a log',
    async () => {
      const planted = `pgt_${'Q'.repeat(43)}`;
      const { repo, data } = await repoWithChange(`leaked ${planted} here`);
      const created = await createToken('agent', { data, permission: 'write' });
      const { token } = created;
      const log = capturedLogger();
      const service = await serve(repo, data, log.logger);
      const host = `127.0.0.1:${service.port}`;
      const auth = [`Authorization: Bearer ${token}`];
      const list = await rawGet(service.port, '/api/changes', host, auth);
      expect(list.status).toBe(200);
      expectNoToken(list.body, token, 'list answer');
      const shown = await rawGet(service.port, '/api/changes/1', host, auth);
      expect(shown.status).toBe(200);
      expectNoToken(shown.body, token, 'change answer');
      expect(shown.body).not.toContain(tokenHash(token));
      // Wrong-host, unknown-token and not-found answers carry the token nowhere.
      expectNoToken((await rawGet(service.port, '/api/changes', `evil:${service.port}`, auth)).body, token, '421');
      expectNoToken((await rawGet(service.port, '/api/changes', host, [`Authorization: Bearer ${token}x`])).body, token, '401');
      expectNoToken((await rawGet(service.port, '/api/changes/2', host, auth)).body, token, '404');
      await service.stop(0);
      const logged = log.text();
      expectNoToken(logged, token, 'log');
      expect(logged).not.toContain(tokenHash(token).slice(7));
      expect(logged).not.toContain(planted);

      // The store: the hash, never the token.
      const bytes = storeBytes(data);
      expect(bytes.includes(tokenHash(token))).toBe(true);
      expectNoToken(bytes, token, 'store');

      // The built CLI's list, both forms.
      for (const args of [
        ['token', 'list', '--data', data, '--json'],
        ['token', 'list', '--data', data],
      ]) {
        const run = await runCliAsync(args);
        expect(run.status, run.stderr).toBe(0);
        expectNoToken(run.stdout + run.stderr, token, args.join(' '));
        expect(run.stdout).not.toContain('sha256');
        expect(run.stdout).toContain('agent');
      }
    },
    CLI_TIMEOUT,
  );

  it(
    'the CLI prints a new token once, on stdout, and nowhere else',
    async () => {
      const data = tempDir('proofgate-idatk-cli-');
      const run = await runCliAsync(['token', 'create', 'agent', '--data', data, '--permission', 'write', '--json']);
      expect(run.status, run.stderr).toBe(0);
      const parsed = JSON.parse(run.stdout) as { token: string; identity: Record<string, unknown> };
      expect(parsed.token).toMatch(/^pgt_[A-Za-z0-9_-]{43}$/);
      expect(parsed.identity).toMatchObject({ name: 'agent', permission: 'write', revokedAt: null });
      expect(Object.keys(parsed.identity).sort()).toEqual(['createdAt', 'name', 'permission', 'revokedAt']);
      expectNoToken(run.stderr, parsed.token, 'stderr');
      expectNoToken(storeBytes(data), parsed.token, 'store');
      // A second create of the name: refused, and the message carries no token.
      const again = await runCliAsync(['token', 'create', 'AGENT', '--data', data]);
      expect(again.status).toBe(1);
      expect(again.stdout).toBe('');
      expect(again.stderr).not.toMatch(/pgt_/);
      expectNoToken(again.stderr, parsed.token, 'second create');
    },
    CLI_TIMEOUT,
  );
});

describe('names', () => {
  const reserved = ['proofgate', 'PROOFGATE', 'ProofGate', 'pRoOfGaTe'];
  const invalid = [
    '',
    ' ',
    ' proofgate',
    'proofgate ',
    'proofgate\n',
    'agent\nevil',
    'agent\r',
    'agent\u0000',
    'agent\u2028x',
    'pr\u043e\u043efgate', // Cyrillic o
    '\uff50roofgate', // fullwidth p
    'proofgate\u200b', // zero-width space
    'a'.repeat(40),
    'a'.repeat(1000),
    '-agent',
    '.agent',
    '_agent',
    'agent[bot]',
    'two words',
    'agent/x',
    '../x',
    'agent:1',
    'agent@host',
    '\u00e9t\u00e9',
  ];

  it.each(reserved)('%j is proofgate (RESERVED_IDENTITY), nothing stored, also on a store with identities', async (name) => {
    const empty = tempDir('proofgate-idatk-names-');
    await expect(createToken(name, { data: empty, permission: 'admin' })).rejects.toMatchObject({ code: 'RESERVED_IDENTITY' });
    expect(readdirSync(empty)).toEqual([]);
    const used = tempDir('proofgate-idatk-names-');
    await createToken('agent', { data: used });
    const before = storeBytes(used);
    const opened = openIdentityStore(used);
    try {
      await expect(Promise.resolve().then(() => opened.store.create(name, 'admin'))).rejects.toMatchObject({ code: 'RESERVED_IDENTITY' });
      expect(await opened.store.list()).toHaveLength(1);
    } finally {
      await opened.close();
    }
    expect((await listTokens({ data: used })).map((entry) => entry.name)).toEqual(['agent']);
    expect(before.length).toBeGreaterThan(0);
  });

  it.each(invalid)('%j is not a name (INVALID_INPUT) and nothing is stored', async (name) => {
    expect(loginProblem(name)).not.toBeNull();
    const empty = tempDir('proofgate-idatk-names-');
    // A name that is proofgate's once trimmed may be called reserved instead; either way it is refused.
    await expect(createToken(name, { data: empty })).rejects.toMatchObject({ code: expect.stringMatching(/^(INVALID_INPUT|RESERVED_IDENTITY)$/) });
    expect(readdirSync(empty)).toEqual([]);
    const used = tempDir('proofgate-idatk-names-');
    await createToken('agent', { data: used });
    const opened = openIdentityStore(used);
    try {
      await expect(Promise.resolve().then(() => opened.store.create(name, 'read'))).rejects.toMatchObject({
        code: expect.stringMatching(/^(INVALID_INPUT|RESERVED_IDENTITY)$/),
      });
      expect((await opened.store.list()).map((entry) => entry.login)).toEqual(['agent']);
    } finally {
      await opened.close();
    }
  });

  it('the 39-character name is the longest; bad permissions store nothing', async () => {
    const data = tempDir('proofgate-idatk-names-');
    expect((await createToken('a'.repeat(39), { data })).identity.name).toBe('a'.repeat(39));
    for (const permission of ['none', 'owner', 'ADMIN', ' read', 'read\n', '', 'admin,write']) {
      const empty = tempDir('proofgate-idatk-names-');
      await expect(createToken('agent', { data: empty, permission })).rejects.toMatchObject({ code: 'USAGE' });
      expect(readdirSync(empty), JSON.stringify(permission)).toEqual([]);
    }
    const opened = openIdentityStore(data);
    try {
      await expect(Promise.resolve().then(() => opened.store.create('agent', 'owner' as 'read'))).rejects.toMatchObject({ code: 'INVALID_INPUT' });
      expect(await opened.store.list()).toHaveLength(1);
    } finally {
      await opened.close();
    }
  });

  it(
    'the CLI refuses a name with a newline or a confusable with one line naming its code, and stores nothing',
    async () => {
      const data = tempDir('proofgate-idatk-names-');
      for (const name of ['agent\nINJECTED', 'pr\u043e\u043efgate', 'PROOFGATE']) {
        const run = await runCliAsync(['token', 'create', name, '--data', data]);
        expect(run.status, JSON.stringify(name)).toBe(1);
        expect(run.stdout).toBe('');
        expect(run.stderr).toMatch(/RESERVED_IDENTITY|INVALID_INPUT/);
        expect(run.stderr.split('\n').filter((line) => line.startsWith('INJECTED'))).toEqual([]);
      }
      expect(readdirSync(data)).toEqual([]);
    },
    CLI_TIMEOUT,
  );
});

describe('concurrent creates', () => {
  it(
    'several processes creating one name (in any letter case) at once: exactly one live token',
    async () => {
      for (let round = 0; round < 3; round += 1) {
        const data = tempDir('proofgate-idatk-race-');
        const names = ['agent', 'agent', 'AGENT', 'Agent', 'agent', 'aGENT'];
        const runs = await Promise.all(names.map((name) => runCliAsync(['token', 'create', name, '--data', data, '--json'])));
        const won = runs.filter((run) => run.status === 0);
        expect(won, runs.map((run) => run.stderr).join('\n')).toHaveLength(1);
        for (const run of runs.filter((entry) => entry.status !== 0)) {
          expect(run.status).toBe(1);
          // --json: the error is a JSON object on stdout.
          expect(JSON.parse(run.stdout)).toMatchObject({ error: { code: 'INVALID_INPUT' } });
          expect(run.stdout).toContain('already has a token');
        }
        const listed = await listTokens({ data });
        expect(listed.filter((entry) => entry.revokedAt === null)).toHaveLength(1);
        expect(listed).toHaveLength(1);
        // The winner's token is the one the store knows.
        const winner = JSON.parse((won[0] as { stdout: string }).stdout) as { token: string };
        expect(storeBytes(data).includes(tokenHash(winner.token))).toBe(true);
      }
    },
    CLI_TIMEOUT * 3,
  );

  it(
    'a revoke racing creates never leaves two live tokens of one name',
    async () => {
      const data = tempDir('proofgate-idatk-race-');
      await createToken('agent', { data });
      const runs = await Promise.all([
        runCliAsync(['token', 'revoke', 'agent', '--data', data]),
        runCliAsync(['token', 'create', 'agent', '--data', data]),
        runCliAsync(['token', 'create', 'Agent', '--data', data]),
        runCliAsync(['token', 'create', 'AGENT', '--data', data]),
      ]);
      expect(runs[0]?.status, runs[0]?.stderr).toBe(0);
      const live = (await listTokens({ data })).filter((entry) => entry.revokedAt === null);
      expect(live.length).toBeLessThanOrEqual(1);
    },
    CLI_TIMEOUT,
  );
});
