import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commitOf, gitObjectReader, objectInfo, readObject } from '../../src/host/index.js';
import { localFixture, rejectionOf, type LocalFixture } from '../forge/local-support.js';
import { makeSeededRepo } from '../forge/git-fixture.js';
import { within } from '../support/wait.js';

/**
 * Attacks on the persistent git object reader (src/host/git-reader.ts): a
 * repository whose config names programs for git to run, names that would
 * inject a second request or pass for an option, and the reader killed
 * under a request.
 */

let root: string;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'proofgate-attack-reader-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

function git(dir: string, args: readonly string[]): string {
  return execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

/** An executable script that leaves `marker` behind when anything runs it. */
function trap(name: string, marker: string): string {
  const path = join(root, name);
  writeFileSync(path, `#!/bin/sh\ntouch ${JSON.stringify(marker)}\ncat\n`);
  chmodSync(path, 0o755);
  return path;
}

describe('a repository whose config names programs', () => {
  it('the reader runs none of them: fsmonitor, hooks, pager, aliases, textconv and filters', async () => {
    const repo = makeSeededRepo('proofgate-attack-reader-config-', { 'a.txt': 'plain\n', '.gitattributes': '* diff=evil filter=evil\n' });
    try {
      const marker = join(root, 'config-ran');
      const program = trap('config-trap.sh', marker);
      const hooks = join(root, 'hooks');
      mkdirSync(hooks, { recursive: true });
      for (const hook of ['post-checkout', 'pre-commit', 'reference-transaction', 'post-index-change']) {
        writeFileSync(join(hooks, hook), `#!/bin/sh\ntouch ${JSON.stringify(marker)}\n`);
        chmodSync(join(hooks, hook), 0o755);
      }
      for (const [key, value] of [
        ['core.fsmonitor', program],
        ['core.hooksPath', hooks],
        ['core.pager', program],
        ['alias.cat-file', `!${program}`],
        ['diff.evil.textconv', program],
        ['filter.evil.smudge', program],
        ['filter.evil.clean', program],
        ['filter.evil.process', program],
        ['core.sshCommand', program],
      ] as const) {
        git(repo.dir, ['config', key, value]);
      }
      // The trap is live: a git that honours the config runs it.
      execFileSync('git', ['-C', repo.dir, 'cat-file', '--textconv', 'main:a.txt'], { stdio: 'ignore' });
      expect(existsSync(marker)).toBe(true);
      rmSync(marker);

      expect((await readObject(repo.dir, 'main:a.txt'))?.bytes.toString('utf8')).toBe('plain\n');
      expect((await readObject(repo.dir, 'main:.gitattributes'))?.type).toBe('blob');
      expect(await commitOf(repo.dir, 'main')).toBe(repo.mainSha);
      expect(await objectInfo(repo.dir, 'main:absent')).toBeNull();
      expect(await objectInfo(repo.dir, 'f'.repeat(40))).toBeNull();
      expect(existsSync(marker)).toBe(false);
    } finally {
      repo.cleanup();
    }
  });

  it('a partial clone whose promisor remote names an upload-pack program: a missing object is no object, and nothing runs', async () => {
    const source = join(root, 'promisor-source');
    git(root, ['init', '-q', '-b', 'main', source]);
    git(source, ['config', 'uploadpack.allowFilter', 'true']);
    writeFileSync(join(source, 'f.txt'), 'remote bytes\n');
    git(source, ['add', 'f.txt']);
    git(source, ['-c', 'user.name=T', '-c', 'user.email=t@example.test', 'commit', '-q', '-m', 'one']);
    const clone = join(root, 'promisor-clone');
    git(root, ['clone', '-q', '--filter=blob:none', '--no-checkout', `file://${source}`, clone]);
    const marker = join(root, 'uploadpack-ran');
    git(clone, ['config', 'remote.origin.uploadpack', `touch ${marker}; git-upload-pack`]);
    const blob = git(source, ['rev-parse', 'main:f.txt']);

    // git dies on an object it may not fetch ("could not fetch ... from promisor remote"): no object, or a GIT error.
    const noObject = (promise: Promise<unknown>) =>
      promise.then(
        (value) => expect(value).toBeNull(),
        (error: unknown) => expect(error).toMatchObject({ code: 'GIT' }),
      );
    await noObject(objectInfo(clone, blob));
    await noObject(readObject(clone, 'main:f.txt'));
    await noObject(commitOf(clone, `${blob}^{commit}`));
    expect(existsSync(marker)).toBe(false);
    // Objects that are there are still read.
    expect(await commitOf(clone, 'main')).toBe(git(source, ['rev-parse', 'main']));
    // The trap is live: a git allowed to fetch runs the configured program.
    execFileSync('git', ['-C', clone, 'cat-file', '-t', blob], { stdio: 'ignore' });
    expect(existsSync(marker)).toBe(true);
  });
});

describe('names', () => {
  let fixture: LocalFixture;
  beforeAll(async () => {
    fixture = await localFixture();
  });
  afterAll(() => fixture.cleanup());

  it('a branch name carrying a newline cannot inject a second lookup through the forge', async () => {
    const { forge, repo } = fixture;
    // Each of these, sent as one request line, would have answered main's commit.
    for (const head of ['nope\nrefs/heads/main', 'nope\rrefs/heads/main', 'feature\nmain']) {
      expect(await forge.repo.branchSha(head)).toBeNull();
      const refused = await rejectionOf(forge.openChange({ head, base: 'main', author: 'alice' }));
      expect(refused.code, JSON.stringify(head)).toBe('NOT_FOUND');
    }
    expect((await rejectionOf(forge.readFile('nope\nmain', 'README.md'))).code).toBe('NOT_FOUND');
    expect(await forge.repo.resolveCommit(`nope\n${repo.baseSha}`)).toBeNull();
    // A path with a line break goes the ls-tree way: no file by that name.
    expect(await forge.readFile('main', 'README.md\nmain:README.md')).toBeNull();
    // And the reader still answers in step afterwards.
    expect(await forge.repo.branchSha('main')).toBe(repo.baseSha);
  });

  it('a branch named like an option is a name, never an option, as with --end-of-options', async () => {
    const { forge, repo } = fixture;
    for (const name of ['--all', '-h', '--output=/tmp/x', '--batch']) {
      expect(await forge.repo.branchSha(name)).toBeNull();
      expect(await forge.repo.resolveCommit(name)).toBeNull();
      expect((await rejectionOf(forge.openChange({ head: name, base: 'main', author: 'alice' }))).code).toBe('NOT_FOUND');
    }
    // A ref whose name starts with `-` resolves through the reader exactly as through rev-parse --end-of-options.
    git(repo.dir, ['update-ref', 'refs/heads/-looks-like-option', repo.headSha]);
    expect(await commitOf(repo.dir, '-looks-like-option')).toBe(git(repo.dir, ['rev-parse', '--verify', '--end-of-options', '-looks-like-option^{commit}']));
  });

  it('the reader killed under a request: the forge still answers, and the next read starts a new reader', async () => {
    const { forge, repo } = fixture;
    const reader = gitObjectReader(forge.repo.root);
    await forge.repo.branchSha('main');
    const pid = reader.pid ?? 0;
    expect(pid).toBeGreaterThan(0);
    process.kill(pid, 'SIGSTOP');
    const pending = forge.repo.branchSha('feature');
    process.kill(pid, 'SIGKILL');
    expect(await within(pending, 'the read is answered')).toBe(repo.headSha);
    expect((await forge.snapshot((await forge.openChange({ head: 'feature', base: 'main', author: 'alice' })).id)).head.sha).toBe(repo.headSha);
    expect(reader.pid).not.toBe(pid);
  });
});
