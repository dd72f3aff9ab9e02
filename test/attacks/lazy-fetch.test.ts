import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../src/core/index.js';
import { pushWithLease } from '../../src/forge/github/git-push.js';
import { GitRepository, openLocalForge } from '../../src/forge/local/index.js';
import { remoteProtocol } from '../../src/host/git.js';
import { closeGitObjectReader, exportCommit, gitText, readObject, runGit, safeGitArgs } from '../../src/host/index.js';
import { readReviewedChange } from '../../src/review/diff-read.js';

/**
 * Attacks by lazy fetch: a change author turns the repository proofgate works
 * in into a partial clone (`extensions.partialClone`, `remote.origin.promisor`)
 * with objects missing, whose promisor remote is a local path with an
 * `uploadpack` program of the author's choosing, and allows the `file`
 * protocol in the repository's own config (which beats a command-line
 * `protocol.allow=never`). A git that may fetch a missing object runs that
 * program through the shell. Every proofgate operation here needs a missing
 * blob: it must fail with a typed error (or answer from what is there) and the
 * program must never run.
 */

let root: string;
let origin: string;
let mainSha: string;
let featureSha: string;
let clones = 0;

function git(dir: string, args: readonly string[]): string {
  return execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

function commitAll(dir: string, message: string): void {
  git(dir, ['add', '-A']);
  git(dir, ['-c', 'user.name=T', '-c', 'user.email=t@example.test', '-c', 'commit.gpgsign=false', 'commit', '-q', '-m', message]);
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'proofgate-attack-lazy-'));
  origin = join(root, 'origin');
  git(root, ['init', '-q', '-b', 'main', origin]);
  git(origin, ['config', 'uploadpack.allowFilter', 'true']);
  const lines = Array.from({ length: 12 }, (_, i) => `line ${i}`);
  writeFileSync(join(origin, 'a.txt'), `${lines.join('\n')}\n`);
  writeFileSync(join(origin, 'b.txt'), 'b\n');
  commitAll(origin, 'one');
  git(origin, ['checkout', '-q', '-b', 'feature']);
  writeFileSync(join(origin, 'a.txt'), `${['feature', ...lines.slice(1)].join('\n')}\n`);
  writeFileSync(join(origin, 'c.txt'), 'new on feature\n');
  commitAll(origin, 'feature');
  git(origin, ['checkout', '-q', 'main']);
  // Both sides change a.txt: a merge needs its bytes.
  writeFileSync(join(origin, 'a.txt'), `${[...lines.slice(0, 11), 'main'].join('\n')}\n`);
  commitAll(origin, 'main');
  mainSha = git(origin, ['rev-parse', 'main']);
  featureSha = git(origin, ['rev-parse', 'feature']);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Trap {
  readonly dir: string;
  readonly marker: string;
  ran(): boolean;
}

/** A fresh partial clone of `origin` (commits and trees, no blob) whose promisor remote runs a program that leaves `marker`. */
function trappedClone(): Trap {
  clones += 1;
  const dir = join(root, `clone-${clones}`);
  const marker = join(root, `uploadpack-ran-${clones}`);
  git(root, ['clone', '-q', '--filter=blob:none', '--no-local', '--no-checkout', `file://${origin}`, dir]);
  git(dir, ['branch', 'feature', 'origin/feature']);
  git(dir, ['config', 'remote.origin.uploadpack', `touch ${marker}; git-upload-pack`]);
  // The repository's own word beats `-c protocol.allow=never`: only the environment (GIT_ALLOW_PROTOCOL) overrides it.
  git(dir, ['config', 'protocol.allow', 'always']);
  git(dir, ['config', 'protocol.file.allow', 'always']);
  const missing = git(dir, ['rev-list', '--objects', '--all', '--missing=print']).split('\n');
  expect(missing).toContain(`?${git(origin, ['rev-parse', 'feature:a.txt'])}`);
  return { dir, marker, ran: () => existsSync(marker) };
}

/** What a call ends with: `ok`, or the code of the typed error it threw (any other error fails the test). */
async function outcome(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'ok';
  } catch (error) {
    if (!isProofgateError(error)) throw error;
    return error.code;
  }
}

/** A read of a missing object: no object (null), or git's `GIT` error. */
async function noObject(promise: Promise<unknown>): Promise<void> {
  let answer: unknown = null;
  const code = await outcome(promise.then((value) => (answer = value)));
  expect(code === 'ok' ? answer : code).toBe(code === 'ok' ? null : 'GIT');
}

/** git as it ran before this rule: the `-c` settings (with `protocol.allow=never`) but an environment that allows every protocol and lazy fetch. */
function oldStyleGit(dir: string, args: readonly string[], env: Record<string, string> = {}): number | null {
  const base = { ...process.env };
  delete base.GIT_ALLOW_PROTOCOL;
  delete base.GIT_NO_LAZY_FETCH;
  return spawnSync('git', ['-C', dir, ...safeGitArgs(), ...args], { env: { ...base, ...env }, stdio: 'ignore' }).status;
}

describe('the trap is live (controls)', () => {
  it('git with the -c settings alone (protocol.allow=never included) runs the promisor remote upload-pack', () => {
    const trap = trappedClone();
    expect(safeGitArgs()).toContain('protocol.allow=never');
    oldStyleGit(trap.dir, ['diff', '--no-ext-diff', '--no-textconv', 'main', 'feature']);
    expect(trap.ran()).toBe(true);
  });

  it('a file transfer that allows only `file` still runs it when lazy fetch is on (a push from the clone)', () => {
    const trap = trappedClone();
    const bare = join(root, `bare-control-${clones}`);
    git(root, ['init', '-q', '--bare', bare]);
    oldStyleGit(trap.dir, ['push', '-q', bare, `${featureSha}:refs/heads/feature`], { GIT_ALLOW_PROTOCOL: 'file' });
    expect(trap.ran()).toBe(true);
  });
});

describe('proofgate on an attacker-shaped partial clone', () => {
  it('the git runner: reads that need a missing blob fail with GIT; what needs none still answers', async () => {
    const trap = trappedClone();
    try {
      expect(await gitText(trap.dir, ['merge-base', 'main', 'feature'])).toBe(git(origin, ['merge-base', 'main', 'feature']));
      for (const args of [
        ['diff', '--no-ext-diff', '--no-textconv', 'main', 'feature'],
        ['diff', '--numstat', 'main', 'feature'],
        ['merge-tree', '--write-tree', '--no-messages', 'main', 'feature'],
        ['log', '-p', '--no-ext-diff', 'feature'],
        ['show', '--no-ext-diff', 'feature'],
        ['ls-tree', '-r', '-l', 'feature'],
        ['cat-file', '-p', 'feature:a.txt'],
        ['cat-file', '-t', git(origin, ['rev-parse', 'feature:c.txt'])],
        ['read-tree', '-m', '-u', 'feature'],
      ]) {
        expect(await outcome(runGit(trap.dir, args)), args.join(' ')).toBe('GIT');
      }
      await noObject(readObject(trap.dir, 'feature:a.txt'));
      expect(trap.ran()).toBe(false);
    } finally {
      closeGitObjectReader(trap.dir);
    }
  });

  it('the local repository: merge-tree and a worktree fail with GIT, a blob is not there', async () => {
    const trap = trappedClone();
    const repo = await GitRepository.open(trap.dir);
    try {
      expect(await repo.mergeBase(mainSha, featureSha)).toBe(git(origin, ['merge-base', 'main', 'feature']));
      expect(await outcome(repo.mergeTree(mainSha, featureSha))).toBe('GIT');
      expect(await outcome(repo.addWorktree(join(root, `worktree-${clones}`), featureSha))).toBe('GIT');
      await noObject(repo.readBlob(featureSha, 'a.txt'));
      expect(trap.ran()).toBe(false);
    } finally {
      repo.close();
    }
  });

  it('the local forge: opening a change and reading a file run nothing', async () => {
    const trap = trappedClone();
    const dataDir = join(root, `data-${clones}`);
    const opened = await openLocalForge({ repoDir: trap.dir, dataDir });
    try {
      const opening = await outcome(opened.forge.openChange({ head: 'feature', base: 'main', author: 'mallory' }));
      expect(['ok', 'GIT']).toContain(opening);
      await noObject(opened.forge.readFile(featureSha, 'a.txt'));
      expect(trap.ran()).toBe(false);
    } finally {
      await opened.close();
      closeGitObjectReader(trap.dir);
    }
  });

  it('the review diff read fails with GIT', async () => {
    const trap = trappedClone();
    const request = { base_sha: mainSha, head_sha: featureSha, diff: { sha256: '0'.repeat(64) } } as Parameters<typeof readReviewedChange>[1];
    expect(await outcome(readReviewedChange(trap.dir, request, { content: true, maxBytes: 1024 * 1024 }))).toBe('GIT');
    expect(trap.ran()).toBe(false);
  });

  it('the jail export, as a tree and as a standalone clone (a file transfer out of the clone), fails with GIT', async () => {
    const trap = trappedClone();
    try {
      expect(await outcome(exportCommit(trap.dir, featureSha, join(root, `export-tree-${clones}`)))).toBe('GIT');
      const out = join(root, `export-git-${clones}`);
      mkdirSync(out);
      expect(await outcome(exportCommit(trap.dir, featureSha, out, { git: true }))).toBe('GIT');
      expect(trap.ran()).toBe(false);
    } finally {
      closeGitObjectReader(trap.dir);
    }
  });

  it('a push with lease from the clone to a path remote (file allowed) fails and runs nothing', async () => {
    const trap = trappedClone();
    const bare = join(root, `bare-${clones}`);
    git(root, ['init', '-q', '--bare', bare]);
    const pushed = await outcome(pushWithLease({ dir: trap.dir, remoteUrl: bare, branch: 'feature', newSha: featureSha, expectedOldSha: null }));
    expect(pushed).toBe('FORGE_API');
    expect(trap.ran()).toBe(false);
    expect(spawnSync('git', ['-C', bare, 'rev-parse', '--verify', '--quiet', 'refs/heads/feature']).status).not.toBe(0);
  });
});

describe('the protocol a transferring call may open', () => {
  it('is the remote own, as git tells remotes apart; a remote helper or another scheme is refused', () => {
    expect(remoteProtocol('https://github.com/o/r.git')).toBe('https');
    expect(remoteProtocol('HTTP://example.test/r.git')).toBe('http');
    expect(remoteProtocol('git@github.com:o/r.git')).toBe('ssh');
    expect(remoteProtocol('git+ssh://host/r.git')).toBe('ssh');
    expect(remoteProtocol('git://host/r.git')).toBe('git');
    expect(remoteProtocol('/srv/r.git')).toBe('file');
    expect(remoteProtocol('./dir/with:colon')).toBe('file');
    expect(remoteProtocol('file:///srv/r.git')).toBe('file');
    for (const remote of ['ext::sh -c touch% /tmp/x', 'fd::3', 'constructor://x', 'ftp://host/r.git']) {
      expect(() => remoteProtocol(remote), remote).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }) as Error);
    }
  });

  it('a call that names no protocol reaches no remote, even one the repository config allows', async () => {
    const bare = join(root, 'bare-plain');
    git(root, ['init', '-q', '--bare', bare]);
    const trap = trappedClone();
    expect(await outcome(runGit(trap.dir, ['ls-remote', bare]))).toBe('GIT');
    // Only `transport` opens one: extra environment cannot.
    expect(await outcome(runGit(trap.dir, ['ls-remote', bare], { env: { GIT_ALLOW_PROTOCOL: 'file', GIT_NO_LAZY_FETCH: '0' } }))).toBe('GIT');
    expect((await runGit(trap.dir, ['ls-remote', bare], { transport: ['file'] })).exitCode).toBe(0);
  });
});
