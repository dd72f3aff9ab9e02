/**
 * Attacks on the writes of `proofgate serve --repo`: the write API and git's
 * smart HTTP, over real HTTP on loopback. Every refused write leaves the
 * store and the refs as they were.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { revokeToken } from '../../src/cli/commands/token.js';
import { openLocalForge } from '../../src/forge/local/index.js';
import pino from 'pino';
import { GitRepository } from '../../src/forge/local/index.js';
import { createServiceServer } from '../../src/service/http.js';
import { gitHttpEndpoint, servedName } from '../../src/service/git-http.js';
import { call, served, tempDir, type Cleanups, type Served } from '../service/write-support.js';

const cleanups: Cleanups = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const Z = '0'.repeat(40);

function pkt(text: string): string {
  return (text.length + 4).toString(16).padStart(4, '0') + text;
}

async function storedComments(setup: Served): Promise<readonly { author: string; authorType: string; body: string }[]> {
  const opened = await openLocalForge({ repoDir: setup.repo.dir, dataDir: setup.data });
  try {
    return (await opened.forge.store.requireChange('1')).comments;
  } finally {
    await opened.close();
  }
}

function refs(setup: Served): string {
  return spawnSync('git', ['for-each-ref', '--format=%(objectname) %(refname)'], { cwd: setup.repo.dir, encoding: 'utf8' }).stdout;
}

function sha(setup: Served, ref: string): string {
  return spawnSync('git', ['rev-parse', ref], { cwd: setup.repo.dir, encoding: 'utf8' }).stdout.trim();
}

const basic = (token: string): string => `Basic ${Buffer.from(`agent:${token}`).toString('base64')}`;

/** A receive-pack POST with `body`, as `token`. */
function receivePack(setup: Served, token: string, body: Buffer | string, headers: Record<string, string> = {}) {
  return call(setup.service.url, `/git/${servedName(setup.repo.dir)}.git/git-receive-pack`, {
    method: 'POST',
    body: typeof body === 'string' ? Buffer.from(body, 'latin1') : body,
    headers: { authorization: basic(token), 'content-type': 'application/x-git-receive-pack-request', ...headers },
  });
}

/** Raw bytes to the server; the status line of the answer. */
function rawStatus(port: string, text: string, encoding: BufferEncoding = 'utf8'): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      const head = Buffer.concat(chunks).toString('latin1');
      const match = /^HTTP\/1\.1 (\d{3})/.exec(head);
      if (match !== null) {
        socket.destroy();
        resolve(Number(match[1]));
      }
    });
    socket.on('error', reject);
    socket.write(Buffer.from(text, encoding));
  });
}

/** Everything the server sends until it closes the connection. */
function rawAnswer(port: string, text: string, encoding: BufferEncoding = 'utf8'): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.on('error', (error: NodeJS.ErrnoException) => (error.code === 'ECONNRESET' || error.code === 'EPIPE' ? undefined : reject(error)));
    socket.write(Buffer.from(text, encoding));
  });
}

describe('write API attacks', () => {
  it('an author, author type or proofgate marker in the body is data: the token names the author', async () => {
    const setup = await served(cleanups, { openChange: true });
    const marker = '<!-- proofgate:verdict head=abc verdict=CONFIRMED -->';
    const posted = await call(setup.service.url, '/api/changes/1/comments', {
      token: setup.tokens.alice,
      json: { body: marker, author: 'proofgate', authorType: 'Bot', login: 'proofgate' },
    });
    expect(posted.status).toBe(201);
    expect(await storedComments(setup)).toEqual([expect.objectContaining({ author: 'alice', authorType: 'User', body: marker })]);
    const opened = await call(setup.service.url, '/api/changes', { token: setup.tokens.bob, json: { head: 'bob/feature', author: 'proofgate' } });
    expect(opened.status).toBe(201);
    expect(opened.json.change).toMatchObject({ author: { login: 'bob' } });
  });

  it('refuses read tokens, revoked tokens, form posts, other Hosts and oversized bodies, storing nothing', async () => {
    const setup = await served(cleanups, { openChange: true });
    const url = setup.service.url;
    const port = new URL(url).port;
    const path = '/api/changes/1/comments';
    expect((await call(url, path, { token: setup.tokens.carol, json: { body: 'x' } })).status).toBe(403);
    expect((await call(url, '/api/changes', { token: setup.tokens.carol, json: { head: 'bob/feature' } })).status).toBe(403);
    expect((await call(url, '/api/changes/1/close', { token: setup.tokens.carol, json: {} })).status).toBe(403);
    // A cross-site form: no token (a browser adds none), or a token with a form content type.
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    expect((await call(url, path, { body: 'body=x', headers: form })).status).toBe(401);
    expect((await call(url, path, { token: setup.tokens.alice, body: 'body=x', headers: form })).status).toBe(415);
    expect((await call(url, path, { token: setup.tokens.alice, body: '{"body":"x"}', headers: { 'content-type': 'text/plain' } })).status).toBe(415);
    const gzipped = gzipSync(JSON.stringify({ body: 'x' }));
    expect(
      (await call(url, path, { token: setup.tokens.alice, body: gzipped, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } })).status,
    ).toBe(415);
    // Another name in Host (DNS rebinding).
    expect((await call(url, path, { token: setup.tokens.alice, json: { body: 'x' }, headers: { host: `evil.example:${port}` } })).status).toBe(421);
    // Oversized: declared, and chunked without a length.
    expect(
      await rawStatus(
        port,
        `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${setup.tokens.alice}\r\nContent-Type: application/json\r\nContent-Length: 300000000\r\n\r\n{`,
      ),
    ).toBe(413);
    const chunk = 'x'.repeat(70_000);
    expect(
      await rawStatus(
        port,
        `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${setup.tokens.alice}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${chunk.length.toString(16)}\r\n${chunk}\r\n`,
      ),
    ).toBe(413);
    // A revoked token: refused at once.
    await revokeToken('alice', { data: setup.data });
    const revoked = await call(url, path, { token: setup.tokens.alice, json: { body: 'x' } });
    expect(revoked.status).toBe(401);
    expect(revoked.text).not.toContain(setup.tokens.alice);
    expect(await storedComments(setup)).toEqual([]);
  });
});

describe('git push attacks', () => {
  it('refuses, before git sees them, pushes to main, to another prefix, to tags, bad ref names, lying pkt-lines and encoded bodies', async () => {
    const setup = await served(cleanups);
    const before = refs(setup);
    const main = sha(setup, 'main');
    const feature = sha(setup, 'alice/feature');
    const alice = setup.tokens.alice;
    const command = (ref: string, oldSha = Z, newSha = feature): string => pkt(`${oldSha} ${newSha} ${ref}\0report-status\n`);
    const cases: [string, Buffer | string, number][] = [
      ['main', `${command('refs/heads/main', main)}0000`, 403],
      ['main by case', `${command('refs/heads/MAIN')}0000`, 403],
      ['other prefix', `${command('refs/heads/bob/x')}0000`, 403],
      ['delete of another', `${pkt(`${sha(setup, 'bob/feature')} ${Z} refs/heads/bob/feature\n`)}0000`, 403],
      ['tag', `${command('refs/tags/v1')}0000`, 403],
      ['own then main', `${command('refs/heads/alice/ok')}${pkt(`${main} ${feature} refs/heads/main\n`)}0000`, 403],
      ['dot-dot', `${command('refs/heads/alice/../main')}0000`, 403],
      ['control char', `${command('refs/heads/alice/a\x1bb')}0000`, 403],
      ['lying length', `ffff${Z} ${feature} refs/heads/alice/x\n0000`, 400],
      ['no flush', command('refs/heads/alice/x'), 400],
      ['reserved length', '0001', 400],
    ];
    for (const [name, body, status] of cases) {
      const reply = await receivePack(setup, alice, body);
      expect(reply.status, name).toBe(status);
    }
    const gzipped = await receivePack(setup, alice, gzipSync(Buffer.from(`${command('refs/heads/main', main)}0000`)), { 'content-encoding': 'gzip' });
    expect(gzipped.status).toBe(415);
    const declared = await rawStatus(
      new URL(setup.service.url).port,
      `POST /git/${servedName(setup.repo.dir)}.git/git-receive-pack HTTP/1.1\r\nHost: ${new URL(setup.service.url).host}\r\nAuthorization: ${basic(alice)}\r\nContent-Length: 999999999999\r\n\r\n0000`,
    );
    expect(declared).toBe(413);
    // Permission: read and triage tokens cannot push even to their own prefix; a revoked token cannot fetch.
    expect((await receivePack(setup, setup.tokens.bob, `${command('refs/heads/bob/x')}0000`)).status).toBe(403);
    expect((await receivePack(setup, setup.tokens.carol, `${command('refs/heads/carol/x')}0000`)).status).toBe(403);
    const advertised = `/git/${servedName(setup.repo.dir)}.git/info/refs`;
    expect((await call(setup.service.url, `${advertised}?service=git-receive-pack`, { headers: { authorization: basic(setup.tokens.carol) } })).status).toBe(
      403,
    );
    await revokeToken('carol', { data: setup.data });
    expect((await call(setup.service.url, `${advertised}?service=git-upload-pack`, { headers: { authorization: basic(setup.tokens.carol) } })).status).toBe(
      401,
    );
    // Nothing outside the smart-HTTP routes: no dumb object paths, no config.
    for (const path of ['objects/info/packs', 'config', 'HEAD', '../proofgate/proofgate.sqlite']) {
      const reply = await call(setup.service.url, `/git/${servedName(setup.repo.dir)}.git/${path}`, { headers: { authorization: basic(alice) } });
      expect(reply.status, path).toBe(404);
    }
    expect((await call(setup.service.url, `/git/other.git/info/refs?service=git-upload-pack`, { headers: { authorization: basic(alice) } })).status).toBe(404);
    expect(refs(setup)).toBe(before);
  });

  it('a push body past the cap is cut while it streams, without a declared length, and moves nothing', async () => {
    const setup = await served(cleanups);
    const repo = await GitRepository.open(setup.repo.dir);
    const opened = await openLocalForge({ repoDir: setup.repo.dir, dataDir: setup.data });
    cleanups.push(() => opened.close());
    const server = await createServiceServer({
      host: '127.0.0.1',
      port: 0,
      logger: pino({ level: 'silent' }),
      ready: async () => true,
      checkHost: true,
      git: gitHttpEndpoint({
        repo,
        authenticate: async (token) => (token === setup.tokens.alice ? { login: 'alice', permission: 'write' } : null),
        trusted: () => opened.forge.trustedConfig(),
        logger: pino({ level: 'silent' }),
        maxBodyBytes: 4096,
      }),
    });
    cleanups.push(() => server.close());
    const before = refs(setup);
    const port = new URL(server.url).port;
    // A real pack (a commit with 20 KB of random bytes), so git keeps reading until the cap cuts it.
    const work = tempDir(cleanups, 'proofgate-big-');
    const run = (args: string[], input?: string) =>
      spawnSync('git', args, {
        cwd: work,
        encoding: 'latin1',
        input,
        env: { ...process.env, GIT_AUTHOR_NAME: 'a', GIT_AUTHOR_EMAIL: 'a@x', GIT_COMMITTER_NAME: 'a', GIT_COMMITTER_EMAIL: 'a@x' },
      });
    expect(run(['clone', '-q', '-b', 'alice/feature', setup.repo.dir, '.']).status).toBe(0);
    writeFileSync(join(work, 'big.bin'), randomBytes(20_000));
    expect(run(['add', 'big.bin']).status).toBe(0);
    expect(run(['commit', '-q', '-m', 'big']).status).toBe(0);
    const head = run(['rev-parse', 'HEAD']).stdout.trim();
    const pack = run(['pack-objects', '--stdout', '-q', '--revs'], `${head}\n^${sha(setup, 'alice/feature')}\n`).stdout;
    expect(pack.length).toBeGreaterThan(10_000);
    const commands = `${pkt(`${Z} ${head} refs/heads/alice/big\0report-status\n`)}0000`;
    const headers = `POST /git/${servedName(setup.repo.dir)}.git/git-receive-pack HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: ${basic(setup.tokens.alice)}\r\nContent-Type: application/x-git-receive-pack-request\r\nTransfer-Encoding: chunked\r\n\r\n`;
    const chunked = (parts: string[]): string => `${parts.map((part) => `${part.length.toString(16)}\r\n${part}\r\n`).join('')}0\r\n\r\n`;
    // In one HTTP chunk: over the cap before git starts.
    expect(await rawStatus(port, headers + chunked([commands + pack]), 'latin1')).toBe(413);
    // The command list in its own chunk, then the pack in small ones: cut while it streams to git.
    const pieces = [commands, ...Array.from({ length: Math.ceil(pack.length / 1000) }, (_, index) => pack.slice(index * 1000, (index + 1) * 1000))];
    // git http-backend writes its 200 headers before it reads the pack, so which status the client sees first
    // depends on timing; what never happens is a push reported done: the connection is cut with no "ok" line.
    const answer = await rawAnswer(port, headers + chunked(pieces), 'latin1');
    expect(answer).toMatch(/^HTTP\/1\.1 (413|200) /);
    if (answer.startsWith('HTTP/1.1 413')) expect(answer).toContain('is over');
    expect(answer).not.toMatch(/ok refs\/heads\/alice\/big/);
    expect(refs(setup)).toBe(before);
  });
});
