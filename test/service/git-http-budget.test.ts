/**
 * The budget all git requests of `proofgate serve --repo` share: the settings,
 * then real `git push`es through the served URL with small limits, while raw
 * pushes that never finish sending hold slots and bytes. A refused push is
 * 503 with Retry-After and changes no ref; the others land.
 */
import { request, type ClientRequest } from 'node:http';
import pino from 'pino';
import { GitRepository, openLocalForge } from '../../src/forge/local/index.js';
import { createServiceServer } from '../../src/service/http.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_GIT_MAX_BUFFERED_BYTES,
  DEFAULT_GIT_MAX_PROCESSES,
  GIT_BUDGET_SETTING,
  gitBudget,
  gitBudgetSettingsFrom,
  gitHttpEndpoint,
  servedName,
  type GitBudget,
} from '../../src/service/git-http.js';
import { branchSha, call, git, remoteUrl, served, tempDir, type Cleanups, type Served } from './write-support.js';

const cleanups: Cleanups = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('budget settings', () => {
  it('defaults, and one CONFIG error naming the variable (never its value) for a bad one', () => {
    expect(gitBudgetSettingsFrom({})).toEqual({ maxBufferedBytes: DEFAULT_GIT_MAX_BUFFERED_BYTES, maxProcesses: DEFAULT_GIT_MAX_PROCESSES });
    expect(gitBudgetSettingsFrom({ [GIT_BUDGET_SETTING.maxBufferedBytes]: '2097152', [GIT_BUDGET_SETTING.maxProcesses]: '3' })).toEqual({
      maxBufferedBytes: 2097152,
      maxProcesses: 3,
    });
    for (const [name, value] of [
      [GIT_BUDGET_SETTING.maxProcesses, '0'],
      [GIT_BUDGET_SETTING.maxProcesses, '1025'],
      [GIT_BUDGET_SETTING.maxProcesses, ''],
      [GIT_BUDGET_SETTING.maxProcesses, '2.5'],
      [GIT_BUDGET_SETTING.maxBufferedBytes, '1000'],
      [GIT_BUDGET_SETTING.maxBufferedBytes, '-5'],
      [GIT_BUDGET_SETTING.maxBufferedBytes, 'lots-secret-9f8e'],
    ] as const) {
      let error: unknown = null;
      try {
        gitBudgetSettingsFrom({ [name]: value });
      } catch (caught) {
        error = caught;
      }
      expect(error, `${name}=${value}`).toMatchObject({ code: 'CONFIG', message: expect.stringContaining(name) });
      expect((error as Error).message).not.toContain('secret');
    }
  });

  it('a hold takes a slot and bytes, and gives back all of them once', () => {
    const budget = gitBudget({ maxProcesses: 2, maxBufferedBytes: 100 });
    const one = budget.enter();
    const two = budget.enter();
    expect(one).not.toBeNull();
    expect(budget.enter()).toBeNull();
    expect(one?.take(60)).toBe(true);
    expect(two?.take(41)).toBe(false);
    expect(two?.take(40)).toBe(true);
    expect(budget.usage()).toEqual({ processes: 2, bufferedBytes: 100 });
    one?.release();
    one?.release();
    expect(one?.take(1)).toBe(false);
    expect(budget.usage()).toEqual({ processes: 1, bufferedBytes: 40 });
    two?.release();
    expect(budget.usage()).toEqual({ processes: 0, bufferedBytes: 0 });
  });
});

/**
 * A push that sends its headers and `bytes` bytes of an unfinished command
 * list, then nothing: it holds a slot (and those bytes) until destroyed.
 */
function stalledPush(setup: Served, token: string, bytes: number): ClientRequest {
  const url = new URL(`${remoteUrl(setup)}/git-receive-pack`);
  const req = request({
    hostname: url.hostname,
    port: url.port,
    path: url.pathname,
    method: 'POST',
    agent: false,
    headers: {
      authorization: `Basic ${Buffer.from(`agent:${token}`).toString('base64')}`,
      'content-type': 'application/x-git-receive-pack-request',
      'content-length': '1000000',
    },
  });
  req.on('error', () => undefined);
  // One pkt-line that claims 65520 bytes: the command list is never complete.
  if (bytes > 0) req.write(Buffer.concat([Buffer.from('fff0'), Buffer.alloc(bytes - 4, 'a')]));
  else req.flushHeaders();
  return req;
}

async function commitIn(home: string, work: string, file: string): Promise<string> {
  writeFileSync(join(work, file), `${file}\n`);
  expect((await git(home, ['add', file], { cwd: work })).status).toBe(0);
  expect((await git(home, ['commit', '-q', '-m', file], { cwd: work })).status).toBe(0);
  return (await git(home, ['rev-parse', 'HEAD'], { cwd: work })).out.trim();
}

async function setupWith(budget: GitBudget): Promise<{ setup: Served; home: string; work: string; url: string }> {
  const setup = await served(cleanups, { service: { gitBudget: budget } });
  const home = tempDir(cleanups, 'proofgate-git-budget-');
  const url = remoteUrl(setup);
  expect((await git(home, ['clone', '-q', url, 'work'], { token: setup.tokens.alice })).status).toBe(0);
  return { setup, home, work: join(home, 'work'), url };
}

const idle = (budget: GitBudget) => budget.until((usage) => usage.processes === 0 && usage.bufferedBytes === 0);

describe('one budget for all git requests', () => {
  it('past maxProcesses a push is 503 with Retry-After and moves nothing; pushes land again once the slots are free', async () => {
    const budget = gitBudget({ maxProcesses: 2 });
    const { setup, home, work, url } = await setupWith(budget);
    await idle(budget);
    const sha = await commitIn(home, work, 'one.txt');
    const held = [stalledPush(setup, setup.tokens.alice, 0), stalledPush(setup, setup.tokens.alice, 0)];
    await budget.until((usage) => usage.processes === 2);

    const busy = await call(setup.service.url, `/git/${url.split('/git/')[1]}/info/refs?service=git-upload-pack`, {
      headers: { authorization: `Basic ${Buffer.from(`x:${setup.tokens.carol}`).toString('base64')}` },
    });
    expect(busy.status).toBe(503);
    expect(busy.headers['retry-after']).toBe('1');
    expect(busy.text).toContain('busy');
    const refused = await git(home, ['push', url, 'HEAD:refs/heads/alice/one'], { cwd: work, token: setup.tokens.alice });
    expect(refused.status).not.toBe(0);
    expect(refused.out).toContain('503');
    expect(branchSha(setup, 'alice/one')).toBeNull();

    for (const req of held) req.destroy();
    await idle(budget);
    const landed = await git(home, ['push', '-q', url, 'HEAD:refs/heads/alice/one'], { cwd: work, token: setup.tokens.alice });
    expect(landed.status, landed.out).toBe(0);
    expect(branchSha(setup, 'alice/one')).toBe(sha);
  });

  it('pushes that each fit are refused together past maxBufferedBytes: the refused one moves no ref, the concurrent others land', async () => {
    const budget = gitBudget({ maxProcesses: 8, maxBufferedBytes: 8192 });
    const { setup, home, work, url } = await setupWith(budget);
    await idle(budget);
    const sha = await commitIn(home, work, 'two.txt');
    // Another push holds 6000 bytes of its command list.
    const held = stalledPush(setup, setup.tokens.alice, 6000);
    await budget.until((usage) => usage.bufferedBytes >= 6000);
    const before = budget.usage();

    // A push of 40 branches: its command list (about 4.5 KiB) fits the budget alone, not beside the held one.
    const many = Array.from({ length: 40 }, (_, i) => `HEAD:refs/heads/alice/many-${String(i).padStart(2, '0')}`);
    const refused = await git(home, ['push', url, ...many], { cwd: work, token: setup.tokens.alice });
    expect(refused.status).not.toBe(0);
    expect(refused.out).toContain('503');
    for (let i = 0; i < 40; i += 1) expect(branchSha(setup, `alice/many-${String(i).padStart(2, '0')}`)).toBeNull();
    // Each request gives back what it took when it ends (the held one's bytes stay).
    await budget.until((usage) => usage.processes === before.processes && usage.bufferedBytes === before.bufferedBytes);

    // Small pushes at the same time, beside the held one: all land.
    const small = await Promise.all(
      ['a', 'b', 'c'].map((name) => git(home, ['push', '-q', url, `HEAD:refs/heads/alice/small-${name}`], { cwd: work, token: setup.tokens.alice })),
    );
    for (const [i, pushed] of small.entries()) {
      expect(pushed.status, pushed.out).toBe(0);
      expect(branchSha(setup, `alice/small-${'abc'[i] as string}`)).toBe(sha);
    }
    await budget.until((usage) => usage.processes === before.processes && usage.bufferedBytes === before.bufferedBytes);

    // Once the held push is gone, the big one fits on its own.
    held.destroy();
    await idle(budget);
    const alone = await git(home, ['push', '-q', url, ...many], { cwd: work, token: setup.tokens.alice });
    expect(alone.status, alone.out).toBe(0);
    expect(branchSha(setup, 'alice/many-39')).toBe(sha);
    await idle(budget);
  });

  it('requests whose clients leave while their token is checked give their slots back', async () => {
    const setup = await served(cleanups, { serve: false });
    const opened = await openLocalForge({ repoDir: setup.repo.dir, dataDir: setup.data });
    cleanups.push(() => opened.close());
    const budget = gitBudget({ maxProcesses: 4 });
    let arrived = 0;
    let allArrived!: () => void;
    const arrivedAll = new Promise<void>((resolve) => (allArrived = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const server = await createServiceServer({
      host: '127.0.0.1',
      port: 0,
      logger: pino({ level: 'silent' }),
      ready: async () => true,
      checkHost: true,
      git: gitHttpEndpoint({
        repo: await GitRepository.open(setup.repo.dir),
        authenticate: async () => {
          arrived += 1;
          if (arrived === 8) allArrived();
          await gate;
          return { login: 'alice', permission: 'write' };
        },
        trusted: () => opened.forge.trustedConfig(),
        logger: pino({ level: 'silent' }),
        budget,
      }),
    });
    cleanups.push(() => server.close());
    const name = servedName(setup.repo.dir);
    const target = new URL(server.url);
    // Four pushes (their command lists half sent) and four ref listings, all gone before their tokens are known.
    const reqs = Array.from({ length: 8 }, (_, i) => {
      const req = request({
        hostname: target.hostname,
        port: target.port,
        agent: false,
        method: i < 4 ? 'POST' : 'GET',
        path: i < 4 ? `/git/${name}.git/git-receive-pack` : `/git/${name}.git/info/refs?service=git-upload-pack`,
        headers: { authorization: `Basic ${Buffer.from(`x:${setup.tokens.alice}`).toString('base64')}`, 'content-length': i < 4 ? '1000' : '0' },
      });
      req.on('error', () => undefined);
      if (i < 4) req.write('fff0aaaa');
      else req.end();
      return req;
    });
    await arrivedAll;
    const closed = reqs.map((req) => new Promise((resolve) => req.once('close', resolve)));
    for (const req of reqs) req.destroy();
    await Promise.all(closed);
    // A round trip on another connection: the server has taken the closes in by its answer.
    expect((await call(server.url, '/healthz')).status).toBe(200);
    release();
    await idle(budget);
    // Every slot is free again: four requests at once are served.
    const listings = await Promise.all(
      Array.from({ length: 4 }, () =>
        call(server.url, `/git/${name}.git/info/refs?service=git-upload-pack`, {
          headers: { authorization: `Basic ${Buffer.from(`x:${setup.tokens.alice}`).toString('base64')}` },
        }),
      ),
    );
    expect(listings.map((answer) => answer.status)).toEqual([200, 200, 200, 200]);
  });
});
