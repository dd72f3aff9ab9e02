/**
 * The GitHub forge's change workspace: a clone per change fetched from the
 * git remote (a local bare repository here, or an HTTP server that holds
 * requests), and publishing with `git push --force-with-lease`, credentials
 * kept off git's command line and out of every error.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../../src/core/index.js';
import { createGitHubForge } from '../../../src/forge/github/index.js';
import { pushWithLease } from '../../../src/forge/github/git-push.js';
import type { ChangeSnapshot, Forge } from '../../../src/forge/port.js';
import { runningWith, within } from '../../support/wait.js';
import { makeTempRepo, type TempRepo } from '../git-fixture.js';

const TOKEN = 'ghs_workspaceTestToken0123456789abcdef';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function forgeWith(workspace: Parameters<typeof createGitHubForge>[0]['workspace']): Forge {
  return createGitHubForge({
    auth: { kind: 'token', token: TOKEN },
    owner: 'octo',
    repo: 'demo',
    selfLogin: 'proofgate-bot',
    trustedBranch: 'main',
    ...(workspace === undefined ? {} : { workspace }),
  });
}

function snapshotOf(id: string, base: string, head: string, headRef = 'feature'): ChangeSnapshot {
  return {
    id,
    number: Number(id),
    title: 'a change',
    state: 'open',
    draft: false,
    reviewDecision: null,
    base: { ref: 'main', sha: base },
    head: { ref: headRef, sha: head },
    author: { login: 'casey' },
    mergeable: 'MERGEABLE',
    mergeStateStatus: 'CLEAN',
    labels: [],
    checks: [],
    comments: [],
    mergeCommitSha: null,
    url: null,
  };
}

/** A repository with main and feature, and a bare clone of it playing GitHub's git side. */
function remoteRepo(): { repo: TempRepo; remote: string; base: string; head: string; git(cwd: string, args: string[]): string } {
  const repo = makeTempRepo('proofgate-gh-workspace-');
  cleanups.push(() => repo.cleanup());
  const base = repo.commit('main', { 'README.md': '# demo\n' }, 'initial');
  const head = repo.commit('feature', { 'feature.txt': 'a feature\n' }, 'add feature', 'main');
  const remote = join(tempDir('proofgate-gh-remote-'), 'remote.git');
  execFileSync('git', ['clone', '-q', '--bare', repo.dir, remote]);
  const git = (cwd: string, args: string[]) => execFileSync('git', ['-C', cwd, ...args], { encoding: 'utf8' }).trim();
  return { repo, remote, base, head, git };
}

describe('GitHub forge: change workspace over a git remote', () => {
  it('prepares a clone per change holding base and head, also a head only under refs/pull/', async () => {
    const { repo, remote, base, head, git } = remoteRepo();
    // A fork's pull request: its head exists on GitHub only as refs/pull/2/head.
    const forked = repo.commit('fork-work', { 'fork.txt': 'from a fork\n' }, 'fork work', 'main');
    execFileSync('git', ['-C', repo.dir, 'push', '-q', remote, `${forked}:refs/pull/2/head`]);
    const forge = forgeWith({ directory: tempDir('proofgate-gh-clones-'), remoteUrl: remote });
    const one = await forge.workspace.prepare(snapshotOf('1', base, head));
    const two = await forge.workspace.prepare(snapshotOf('2', base, forked, 'fork-work'));
    expect(one).not.toBe(two);
    expect(git(one, ['cat-file', '-t', head])).toBe('commit');
    expect(git(two, ['cat-file', '-t', forked])).toBe('commit');
    const missing = await forge.workspace.prepare(snapshotOf('3', base, 'e'.repeat(40))).catch((error: unknown) => error);
    expect(isProofgateError(missing, 'NOT_FOUND')).toBe(true);
  });

  it('publishes with compare-and-swap: a branch someone moved between prepare and publish is HEAD_MOVED and keeps their commit', async () => {
    const { repo, remote, base, head, git } = remoteRepo();
    const forge = forgeWith({ directory: tempDir('proofgate-gh-clones-'), remoteUrl: remote });
    const dir = await forge.workspace.prepare(snapshotOf('1', base, head));
    // The repair's new head: a commit made in the clone.
    const tree = git(dir, ['rev-parse', `${head}^{tree}`]);
    const repaired = git(dir, ['-c', 'user.name=r', '-c', 'user.email=r@example.test', 'commit-tree', tree, '-p', head, '-m', 'repair']);
    // An attacker pushes to the pull request's branch meanwhile.
    const attacker = repo.commit('feature', { 'feature.txt': 'the attacker was here\n' }, 'attacker');
    execFileSync('git', ['-C', repo.dir, 'push', '-q', '--force', remote, `${attacker}:refs/heads/feature`]);
    const refused = await forge.workspace.publish(dir, { branch: 'feature', newSha: repaired, expectedOldSha: head }).catch((error: unknown) => error);
    expect(isProofgateError(refused, 'HEAD_MOVED')).toBe(true);
    expect(git(remote, ['rev-parse', 'refs/heads/feature'])).toBe(attacker);
    // Over the head the remote really has, the same publish goes through; a retry of it changes nothing.
    const again = git(dir, ['-c', 'user.name=r', '-c', 'user.email=r@example.test', 'commit-tree', tree, '-p', head, '-m', 'repair, rebased elsewhere']);
    execFileSync('git', ['-C', repo.dir, 'push', '-q', '--force', remote, `${head}:refs/heads/feature`]);
    await forge.workspace.publish(dir, { branch: 'feature', newSha: again, expectedOldSha: head });
    await forge.workspace.publish(dir, { branch: 'feature', newSha: again, expectedOldSha: head });
    expect(git(remote, ['rev-parse', 'refs/heads/feature'])).toBe(again);
  });

  it('refuses every use with CONFIG when the forge was created without a workspace', async () => {
    const forge = forgeWith(undefined);
    const error = await forge.workspace.prepare(snapshotOf('1', 'a'.repeat(40), 'b'.repeat(40))).catch((caught: unknown) => caught);
    expect(isProofgateError(error, 'CONFIG')).toBe(true);
  });
});

/** An HTTP git remote that holds each request until told to answer, recording its headers. */
async function holdingRemote() {
  const seen: { url: string; headers: IncomingHttpHeaders }[] = [];
  const held: ServerResponse[] = [];
  let arrived: (() => void) | null = null;
  const server = createServer((request, response) => {
    seen.push({ url: request.url ?? '', headers: request.headers });
    held.push(response);
    arrived?.();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    firstRequest: () => (seen.length > 0 ? Promise.resolve() : new Promise<void>((resolve) => (arrived = resolve))),
    refuseAll: () => {
      for (const response of held.splice(0)) response.writeHead(500).end('no\n');
    },
  };
}

describe('GitHub forge: credentials of the git remote', () => {
  it('sends the forge token as an Authorization header from git’s environment: never on its command line, never in the error', async () => {
    const { remote: bare, head, git } = remoteRepo();
    const dir = join(tempDir('proofgate-gh-clones-'), 'clone');
    execFileSync('git', ['clone', '-q', bare, dir]);
    const http = await holdingRemote();
    const marker = `repo-${randomUUID()}`;
    const forge = forgeWith({ directory: tempDir('proofgate-gh-clones-'), remoteUrl: `${http.origin}/${marker}.git` });
    const tree = git(dir, ['rev-parse', `${head}^{tree}`]);
    const repaired = git(dir, ['-c', 'user.name=r', '-c', 'user.email=r@example.test', 'commit-tree', tree, '-p', head, '-m', 'repair']);
    const publish = forge.workspace.publish(dir, { branch: 'feature', newSha: repaired, expectedOldSha: head }).catch((error: unknown) => error);
    await within(http.firstRequest(), 'git push never reached the remote');
    const commandLines = runningWith(marker).map((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8'));
    expect(commandLines.length).toBeGreaterThan(0);
    for (const line of commandLines) expect(line).not.toContain(TOKEN);
    http.refuseAll();
    const error = await within(publish, 'git push did not end');
    expect(isProofgateError(error, 'FORGE_API')).toBe(true);
    expect(JSON.stringify({ message: (error as Error).message, details: (error as { details?: unknown }).details })).not.toContain(TOKEN);
    expect(http.seen[0]?.headers.authorization).toBe(`Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`);
  });

  it('moves credentials written into the remote URL off git’s command line too', async () => {
    const { remote: bare, head } = remoteRepo();
    const dir = join(tempDir('proofgate-gh-clones-'), 'clone');
    execFileSync('git', ['clone', '-q', bare, dir]);
    const http = await holdingRemote();
    const marker = `repo-${randomUUID()}`;
    const password = 'url-password-5e0f1a';
    const push = pushWithLease({
      dir,
      remoteUrl: `http://deploy:${password}@${http.origin.slice('http://'.length)}/${marker}.git`,
      branch: 'feature',
      newSha: head,
      expectedOldSha: null,
    }).catch((error: unknown) => error);
    await within(http.firstRequest(), 'git push never reached the remote');
    const commandLines = runningWith(marker).map((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8'));
    expect(commandLines.length).toBeGreaterThan(0);
    for (const line of commandLines) expect(line).not.toContain(password);
    http.refuseAll();
    const error = await within(push, 'git push did not end');
    expect(isProofgateError(error, 'FORGE_API')).toBe(true);
    expect((error as Error).message).not.toContain(password);
    expect(http.seen[0]?.headers.authorization).toBe(`Basic ${Buffer.from(`deploy:${password}`).toString('base64')}`);
  });
});
