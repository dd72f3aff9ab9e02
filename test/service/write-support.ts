/**
 * Shared by the write API, git HTTP, client-mode and identity-write attack
 * tests: a repository whose trusted config gives alice, bob and carol write,
 * served by `startLocalService` on loopback, and a small HTTP client.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { rawRequest } from '../support/http.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { expect } from 'vitest';
import { createToken } from '../../src/cli/commands/token.js';
import { openLocalForge } from '../../src/forge/local/index.js';
import { startLocalService, type LocalService } from '../../src/service/local.js';
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

/** A repository with branch `alice/feature` (and `bob/feature`), tokens, and the service on loopback. */
export async function served(cleanups: Cleanups, options: { openChange?: boolean; broken?: boolean; serve?: boolean } = {}): Promise<Served> {
  const repo = makeSeededRepo('proofgate-write-', { 'README.md': '# write\n', 'check.mjs': CHECK_SCRIPT, '.proofgate.yml': WRITERS_CONFIG });
  cleanups.push(() => repo.cleanup());
  repo.commit('alice/feature', { 'feature.txt': 'a feature\n', ...(options.broken === true ? { 'broken.txt': 'x\n' } : {}) }, 'add feature', 'main');
  repo.commit('bob/feature', { 'bob.txt': 'bob\n' }, 'add bob', 'main');
  const data = tempDir(cleanups, 'proofgate-write-data-');
  if (options.openChange === true) {
    const opened = await openLocalForge({ repoDir: repo.dir, dataDir: data });
    try {
      await opened.forge.openChange({ head: 'alice/feature', base: 'main', author: 'alice', title: 'feature' });
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
