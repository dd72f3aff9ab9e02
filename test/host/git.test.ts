import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import { gitEnvironment, gitText, runGit } from '../../src/host/index.js';
import { hasCommit, isAncestor } from '../../src/host/git.js';
import { runningWith, until, within } from '../support/wait.js';

let root: string;
let repo: string;
let other: string;

function init(dir: string): void {
  execFileSync('git', ['init', '-q', '-b', 'main', dir]);
  for (const [key, value] of [
    ['user.name', 'Tess Tester'],
    ['user.email', 'tess@example.test'],
    ['commit.gpgsign', 'false'],
  ]) {
    execFileSync('git', ['-C', dir, 'config', key as string, value as string]);
  }
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'proofgate-host-git-'));
  repo = join(root, 'repo');
  other = join(root, 'other');
  init(repo);
  init(other);
  const hook = join(repo, '.git', 'hooks', 'pre-commit');
  writeFileSync(hook, '#!/bin/sh\necho "hook refused" >&2\nexit 1\n');
  chmodSync(hook, 0o755);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Run `body` with `name` set in proofgate's own environment, as a caller inside a git hook would have it. */
async function withInherited<T>(name: string, value: string, body: () => Promise<T>): Promise<T> {
  process.env[name] = value;
  try {
    return await body();
  } finally {
    delete process.env[name];
  }
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.unreachable('expected a rejection'),
    (error: unknown) => error,
  );
}

describe('runGit', () => {
  it('returns stdout bytes, stderr text and the exit code; stdin carries input', async () => {
    const result = await runGit(repo, ['hash-object', '--stdin'], { input: 'hello\n' });
    expect(result.exitCode).toBe(0);
    expect(result.stdout.toString('utf8').trim()).toBe('ce013625030ba8dba906f756967f9e9ca394464a');
    expect(await gitText(repo, ['rev-parse', '--is-inside-work-tree'])).toBe('true');
  });

  it('accepts listed exit codes as answers', async () => {
    const result = await runGit(repo, ['config', '--get', 'no.such-key'], { okExitCodes: [1] });
    expect(result.exitCode).toBe(1);
  });

  it('turns a failure into one GIT error naming the command and git message', async () => {
    const error = await rejection(runGit(repo, ['rev-parse', '--verify', 'no-such-branch']));
    expect(isProofgateError(error, 'GIT')).toBe(true);
    expect((error as Error).message).toBe('git rev-parse --verify failed: fatal: Needed a single revision');
  });

  it('passes -c settings for one command', async () => {
    expect(await gitText(repo, ['config', '--get', 'core.quotepath'], { config: [['core.quotepath', 'false']] })).toBe('false');
  });

  it('lays extra environment over the base', async () => {
    const result = await runGit(repo, ['var', 'GIT_COMMITTER_IDENT'], { env: { GIT_COMMITTER_NAME: 'Robo', GIT_COMMITTER_EMAIL: 'robo@example.test' } });
    expect(result.stdout.toString('utf8')).toMatch(/^Robo <robo@example\.test> /);
  });
});

describe('runGit hardening (every call)', () => {
  it('ignores an inherited GIT_DIR, in plain and isolated mode', async () => {
    const gitDir = async (isolated: boolean) => gitText(repo, ['rev-parse', '--absolute-git-dir'], { isolated });
    await withInherited('GIT_DIR', join(other, '.git'), async () => {
      expect(await gitDir(false)).toBe(join(repo, '.git'));
      expect(await gitDir(true)).toBe(join(repo, '.git'));
    });
  });

  it('runs no hook, in plain and isolated mode', async () => {
    const commit = (isolated: boolean) => runGit(repo, ['commit', '--allow-empty', '--quiet', '-m', 'x'], { isolated });
    expect((await commit(false)).exitCode).toBe(0);
    expect((await commit(true)).exitCode).toBe(0);
  });

  it('runs no fsmonitor command planted in the repository config, and git sees no token', async () => {
    const marker = join(root, 'fsmonitor-ran.txt');
    execFileSync('git', ['-C', repo, 'config', 'core.fsmonitor', `env > ${marker}; false #`]);
    try {
      await withInherited('GITHUB_TOKEN', 'ghp_hosttesthosttesthosttest0123456789', async () => {
        await runGit(repo, ['status', '--porcelain']);
        const env = gitEnvironment();
        expect(env.GITHUB_TOKEN).toBeUndefined();
      });
      expect(existsSync(marker)).toBe(false);
    } finally {
      execFileSync('git', ['-C', repo, 'config', '--unset', 'core.fsmonitor']);
    }
  });

  it('builds its environment from an allow-list and fixed settings', async () => {
    await withInherited('AWS_SECRET_ACCESS_KEY', 'nope', async () => {
      const env = gitEnvironment({ GIT_AUTHOR_NAME: 'A' }, true);
      expect(env).toMatchObject({
        GIT_TERMINAL_PROMPT: '0',
        GIT_CONFIG_NOSYSTEM: '1',
        LC_ALL: 'C',
        GIT_EDITOR: 'true',
        GIT_AUTHOR_NAME: 'A',
        GIT_CONFIG_KEY_0: 'core.hooksPath',
        GIT_CONFIG_VALUE_0: '/dev/null',
      });
      expect(env.AWS_SECRET_ACCESS_KEY).toBeUndefined();
      const keys = Array.from({ length: Number(env.GIT_CONFIG_COUNT) }, (_, i) => env[`GIT_CONFIG_KEY_${i}`]);
      expect(keys).toEqual(expect.arrayContaining(['core.fsmonitor', 'commit.gpgsign', 'tag.gpgsign', 'gc.auto', 'rerere.enabled']));
      const plainKeys = Array.from({ length: Number(gitEnvironment().GIT_CONFIG_COUNT) }, (_, i) => gitEnvironment()[`GIT_CONFIG_KEY_${i}`]);
      expect(plainKeys).toEqual(expect.arrayContaining(['core.hooksPath', 'core.fsmonitor', 'core.sshCommand', 'credential.helper']));
      expect(plainKeys).not.toContain('commit.gpgsign');
    });
  });
});

/** An HTTP server on 127.0.0.1 that holds each request until told to answer, recording what it saw. */
interface StallingServer {
  readonly url: string;
  readonly requests: { url: string; headers: IncomingHttpHeaders }[];
  /** Resolves once a request whose URL contains `marker` arrived. */
  requestFor(marker: string): Promise<void>;
  /** Sockets still open. */
  open(): number;
  /** Answer every held request whose URL contains `marker`. */
  answer(marker: string, status: number): void;
  close(): Promise<void>;
}

async function stallingServer(): Promise<StallingServer> {
  const requests: StallingServer['requests'] = [];
  const held: { url: string; response: ServerResponse }[] = [];
  const sockets = new Set<Socket>();
  const waiters: { marker: string; wake: () => void }[] = [];
  const server = createServer((request, response) => {
    const url = request.url ?? '';
    requests.push({ url, headers: request.headers });
    held.push({ url, response });
    for (const waiter of waiters.filter((entry) => url.includes(entry.marker))) waiter.wake();
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    requestFor: (marker) =>
      requests.some((request) => request.url.includes(marker)) ? Promise.resolve() : new Promise<void>((wake) => waiters.push({ marker, wake })),
    open: () => sockets.size,
    answer(marker, status) {
      for (const entry of held.filter((item) => item.url.includes(marker))) entry.response.writeHead(status).end('no\n');
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('runGit: time limit, abort and redaction', () => {
  let http: StallingServer;
  beforeAll(async () => {
    http = await stallingServer();
  });
  afterAll(async () => http.close());

  it('stops a git that hangs (and the helper it started) at the time limit: one GIT error saying it timed out', async () => {
    const marker = `hang-${randomUUID()}`;
    const error = await within(
      rejection(runGit(repo, ['ls-remote', `${http.url}/${marker}.git`], { timeoutMs: 300, transport: ['http'] })),
      'git ls-remote to a server that never answers did not end',
    );
    expect(isProofgateError(error, 'GIT')).toBe(true);
    expect((error as Error).message).toBe(`git ls-remote ${http.url}/${marker}.git timed out after 300 ms; git was stopped`);
    expect(http.requests.some((request) => request.url.includes(marker))).toBe(true);
    // git and its git-remote-http are gone, and so is their connection.
    await until(() => runningWith(marker).length === 0 && http.open() === 0, 'git processes of the timed-out call still run');
  });

  it('stops a git that hangs when the signal aborts: ABORTED', async () => {
    const marker = `abort-${randomUUID()}`;
    const controller = new AbortController();
    const seen = http.requestFor(marker);
    const call = rejection(runGit(repo, ['ls-remote', `${http.url}/${marker}.git`], { signal: controller.signal, transport: ['http'] }));
    await within(seen, 'git never reached the server');
    expect(runningWith(marker).length).toBeGreaterThan(0);
    controller.abort();
    const error = await within(call, 'the aborted git did not end');
    expect(isProofgateError(error, 'ABORTED')).toBe(true);
    expect((error as Error).message).toMatch(/^git ls-remote \S+ was aborted; git was stopped$/);
    await until(() => runningWith(marker).length === 0 && http.open() === 0, 'git processes of the aborted call still run');
    // An already aborted signal starts nothing.
    expect(await rejection(runGit(repo, ['status'], { signal: controller.signal }))).toMatchObject({ code: 'ABORTED' });
  });

  it('never repeats a credential of a URL, in the message or in the details', async () => {
    const token = 'tok-url-credential-4d1c9a';
    const marker = `private-${randomUUID()}`;
    const seen = http.requestFor(marker);
    const call = rejection(runGit(repo, ['ls-remote', `http://someone:${token}@${http.url.slice('http://'.length)}/${marker}.git`], { transport: ['http'] }));
    await within(seen, 'git never reached the server');
    http.answer(marker, 500);
    const error = await within(call, 'git ls-remote did not end');
    expect(isProofgateError(error, 'GIT')).toBe(true);
    const shown = JSON.stringify({ message: (error as Error).message, details: (error as { details?: unknown }).details });
    expect(shown).toContain('[redacted]@127.0.0.1');
    expect(shown).not.toContain(token);
  });

  it('never repeats a value the caller names, in the error or in the returned stderr', async () => {
    const secret = 'named-secret-77c1f0';
    const path = join(root, secret, 'missing.git');
    const error = await rejection(runGit(repo, ['ls-remote', path], { redact: [secret], transport: ['file'] }));
    expect(isProofgateError(error, 'GIT')).toBe(true);
    expect(JSON.stringify({ message: (error as Error).message, details: (error as { details?: unknown }).details })).not.toContain(secret);
    expect((error as Error).message).toContain('[redacted]');
    const answered = await runGit(repo, ['ls-remote', path], { redact: [secret], okExitCodes: [128], transport: ['file'] });
    expect(answered.stderr).toContain('does not appear to be a git repository');
    expect(answered.stderr).not.toContain(secret);
  });

  it('passes secretConfig in the environment, never on the command line, and redacts its value', async () => {
    const header = 'X-Probe: header-secret-0b8e2d';
    const marker = `config-${randomUUID()}`;
    const target = `${http.url}/${marker}.git`;
    const seen = http.requestFor(marker);
    const call = rejection(runGit(repo, ['ls-remote', target], { secretConfig: [[`http.${http.url}/.extraHeader`, header]], transport: ['http'] }));
    await within(seen, 'git never reached the server');
    const pids = runningWith(marker);
    expect(pids.length).toBeGreaterThan(0);
    for (const pid of pids) expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).not.toContain('header-secret');
    http.answer(marker, 500);
    const error = await within(call, 'git ls-remote did not end');
    expect(http.requests.find((request) => request.url.includes(marker))?.headers['x-probe']).toBe('header-secret-0b8e2d');
    expect(JSON.stringify({ message: (error as Error).message, details: (error as { details?: unknown }).details })).not.toContain('header-secret');
  });
});

describe('hasCommit and isAncestor', () => {
  it('answer about commits, and refuse what could be read as an option', async () => {
    const tree = await gitText(other, ['write-tree']);
    const first = await gitText(other, ['commit-tree', '-m', 'first', tree]);
    const second = await gitText(other, ['commit-tree', '-m', 'second', '-p', first, tree]);
    expect(await hasCommit(other, first)).toBe(true);
    expect(await hasCommit(repo, first)).toBe(false);
    expect(await hasCommit(other, 'f'.repeat(40))).toBe(false);
    expect(await hasCommit(other, tree)).toBe(false);
    expect(await hasCommit(other, '--all')).toBe(false);
    expect(await isAncestor(other, first, second)).toBe(true);
    expect(await isAncestor(other, second, second)).toBe(true);
    expect(await isAncestor(other, second, first)).toBe(false);
    expect(await rejection(isAncestor(other, 'f'.repeat(40), second))).toMatchObject({ code: 'GIT' });
    expect(await rejection(isAncestor(other, '--help', second))).toMatchObject({ code: 'INVALID_INPUT' });
  });
});
