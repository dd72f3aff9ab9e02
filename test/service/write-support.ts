/**
 * Shared by the write API, git HTTP, client-mode and identity-write attack
 * tests: a repository whose trusted config gives alice, bob and carol write,
 * served by `startLocalService` on loopback, and a small HTTP client.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { rawRequest } from '../support/http.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { expect } from 'vitest';
import { createToken } from '../../src/cli/commands/token.js';
import { openLocalForge } from '../../src/forge/local/index.js';
import { servedName } from '../../src/service/git-http.js';
import { startTestProcess, stopTestProcess } from '../support/processes.js';
import { startLocalService, type LocalService, type LocalServiceOptions } from '../../src/service/local.js';
import { makeSeededRepo, type TempRepo } from '../forge/git-fixture.js';
import { CHECK_SCRIPT, repoConfig } from '../automerge/loop/local-support.js';

export type Cleanups = Array<() => Promise<void> | void>;

export const WRITERS_CONFIG = repoConfig().replace(
  'maintainers:\n',
  'maintainers:\n  - login: alice\n    permission: write\n  - login: bob\n    permission: write\n  - login: carol\n    permission: write\n',
);

export function tempDir(cleanups: Cleanups, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export interface Served {
  readonly repo: TempRepo;
  readonly data: string;
  readonly service: LocalService & { url: string };
  /** Tokens by login: alice write, bob triage, carol read (the config gives all three write). */
  readonly tokens: { readonly alice: string; readonly bob: string; readonly carol: string };
}

/** A repository with branch `alice/feature` (and `bob/feature`), tokens, and the service on loopback (with `service`'s options added). */
export async function served(
  cleanups: Cleanups,
  options: {
    openChange?: boolean;
    broken?: boolean;
    serve?: boolean;
    title?: string;
    service?: Pick<LocalServiceOptions, 'progress' | 'gitBudget'>;
  } = {},
): Promise<Served> {
  const repo = makeSeededRepo('proofgate-write-', { 'README.md': '# write\n', 'check.mjs': CHECK_SCRIPT, '.proofgate.yml': WRITERS_CONFIG });
  cleanups.push(() => repo.cleanup());
  repo.commit('alice/feature', { 'feature.txt': 'a feature\n', ...(options.broken === true ? { 'broken.txt': 'x\n' } : {}) }, 'add feature', 'main');
  repo.commit('bob/feature', { 'bob.txt': 'bob\n' }, 'add bob', 'main');
  const data = tempDir(cleanups, 'proofgate-write-data-');
  if (options.openChange === true) {
    const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
    try {
      await opened.forge.openChange({ head: 'alice/feature', base: 'main', author: 'alice', title: options.title ?? 'feature' });
    } finally {
      await opened.close();
    }
  }
  const alice = (await createToken('alice', { data, permission: 'write' })).token;
  const bob = (await createToken('bob', { data, permission: 'triage' })).token;
  const carol = (await createToken('carol', { data, permission: 'read' })).token;
  // Without a server (direct mode's side of a comparison): `service` is never started.
  if (options.serve === false) return { repo, data, service: null as unknown as Served['service'], tokens: { alice, bob, carol } };
  const service = await startLocalService({
    repoDir: repo.dir,
    dataDir: data,
    host: '127.0.0.1',
    port: 0,
    http: true,
    logger: pino({ level: 'silent' }),
    pollMs: 50,
    ...options.service,
  });
  cleanups.push(() => service.stop(0));
  expect(service.url).not.toBeNull();
  return { repo, data, service: service as LocalService & { url: string }, tokens: { alice, bob, carol } };
}

export interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  readonly json: Record<string, unknown>;
}

export interface Send {
  readonly method?: string;
  readonly token?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
  /** JSON body (sets Content-Type: application/json). */
  readonly json?: unknown;
}

/** One request to `url` + `path` (Host: the URL's unless given). */
export function call(url: string, path: string, options: Send = {}): Promise<Reply> {
  const target = new URL(path, url);
  const headers: Record<string, string> = { host: target.host, ...options.headers };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  let body = options.body;
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    headers['content-type'] ??= 'application/json';
  }
  if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
  return rawRequest(url, `${target.pathname}${target.search}`, {
    method: options.method ?? (body === undefined ? 'GET' : 'POST'),
    headers,
    ...(body === undefined ? {} : { body }),
  });
}

/** Run git with a clean environment (async: the server answers in this process); the token (if any) as the Basic password of every request. */
export async function git(
  home: string,
  args: readonly string[],
  options: { cwd?: string; token?: string } = {},
): Promise<{ status: number | null; out: string }> {
  const auth = options.token === undefined ? [] : ['-c', `http.extraHeader=Authorization: Basic ${Buffer.from(`agent:${options.token}`).toString('base64')}`];
  const child = startTestProcess('git', [...auth, ...args], {
    cwd: options.cwd ?? home,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home,
      GIT_TERMINAL_PROMPT: '0',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_AUTHOR_NAME: 'agent',
      GIT_AUTHOR_EMAIL: 'agent@example.invalid',
      GIT_COMMITTER_NAME: 'agent',
      GIT_COMMITTER_EMAIL: 'agent@example.invalid',
    },
  });
  const out: Buffer[] = [];
  child.stdout?.on('data', (chunk: Buffer) => out.push(chunk));
  child.stderr?.on('data', (chunk: Buffer) => out.push(chunk));
  try {
    const status = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (code) => resolve(code));
    });
    return { status, out: Buffer.concat(out).toString('utf8') };
  } finally {
    await stopTestProcess(child);
  }
}

/** The served repository's git URL. */
export function remoteUrl(setup: Served): string {
  return `${setup.service.url}/git/${servedName(setup.repo.dir)}.git`;
}

/** A branch's sha in the served repository, or null when it does not exist. */
export function branchSha(setup: Served, branch: string): string | null {
  const result = spawnSync('git', ['rev-parse', '--verify', '--quiet', `refs/heads/${branch}`], { cwd: setup.repo.dir, encoding: 'utf8' });
  return result.status === 0 ? result.stdout.trim() : null;
}
