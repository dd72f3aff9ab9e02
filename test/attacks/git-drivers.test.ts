import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GitRepository } from '../../src/forge/local/index.js';
import { closeGitObjectReader, gitText, runGit } from '../../src/host/index.js';
import { repositoryFingerprint } from '../../src/review/repo-state.js';

/**
 * Attacks by programs that the repository's config names for attributes or
 * signatures: whatever ran in the repository (an agent working there, a
 * reviewer run without the jail) can write `.git/config` and
 * `.git/info/attributes`, and a change's author writes the commits. proofgate's
 * own git calls (a snapshot's merge-tree, a fingerprint's status, a checked-out
 * base following a merge, a title read with `git log`) must never run such a
 * program. Each case also runs plain git the same way, to show the trap is
 * live: the marker appears there and never through proofgate.
 */

let root: string;
let repo: string;
let marker: string;

function git(dir: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env): string {
  return execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env }).trim();
}

/** A program that leaves the marker and passes its input through (a filter) or keeps "ours" (a merge driver). */
function trap(name: string): string {
  const path = join(root, `${name}.sh`);
  writeFileSync(path, `#!/bin/sh\ntouch ${JSON.stringify(marker)}\ncat\nexit 0\n`);
  chmodSync(path, 0o755);
  return path;
}

function commitAll(message: string): string {
  git(repo, ['add', '-A']);
  git(repo, ['-c', 'user.name=T', '-c', 'user.email=t@example.test', '-c', 'commit.gpgsign=false', 'commit', '-q', '-m', message]);
  return git(repo, ['rev-parse', 'HEAD']);
}

/** Plain git's status, after the file is written again: proofgate's read may have refreshed the index's stat data, after which git would not hash the file. */
function plainStatus(): void {
  writeFileSync(join(repo, 'f.txt'), 'main\n');
  git(repo, ['status', '--porcelain']);
}

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'proofgate-attack-drivers-'));
  repo = join(root, 'repo');
  marker = join(root, 'RAN');
  git(root, ['init', '-q', '-b', 'main', repo]);
  writeFileSync(join(repo, 'f.txt'), 'base\n');
  commitAll('base');
  git(repo, ['checkout', '-q', '-b', 'head']);
  writeFileSync(join(repo, 'f.txt'), 'head\n');
  commitAll('head');
  git(repo, ['checkout', '-q', 'main']);
  writeFileSync(join(repo, 'f.txt'), 'main\n');
  commitAll('main');
});

afterEach(() => {
  closeGitObjectReader(repo);
  rmSync(root, { recursive: true, force: true });
});

describe('attack: filter and merge drivers and signature verifiers from the repository config', () => {
  it('a merge driver named in .gitattributes and defined in .git/config does not run in a snapshot merge-tree: the file is a conflict', async () => {
    writeFileSync(join(repo, '.gitattributes'), '* merge=evil\n');
    git(repo, ['config', 'merge.evil.driver', `${trap('merge')} %O %A %B`]);
    const opened = await GitRepository.open(repo);
    const result = await opened.mergeTree('main', 'head');
    expect(existsSync(marker)).toBe(false);
    expect(result.clean).toBe(false);
    expect(result.conflictedPaths).toContain('f.txt');
    // The same call without proofgate's settings runs the driver.
    git(repo, ['merge-tree', '--write-tree', '--name-only', '--no-messages', 'main', 'head']);
    expect(existsSync(marker)).toBe(true);
  });

  it('a clean filter in .git/config with the attribute in info/attributes does not run when a fingerprint reads the status', async () => {
    writeFileSync(join(repo, '.git', 'info', 'attributes'), '* filter=evil\n');
    git(repo, ['config', 'filter.evil.clean', trap('clean')]);
    // A file whose stat no longer matches the index makes git status hash it again, through the filter.
    writeFileSync(join(repo, 'f.txt'), 'main\n');
    await repositoryFingerprint(repo);
    expect(existsSync(marker)).toBe(false);
    plainStatus();
    expect(existsSync(marker)).toBe(true);
  });

  it('a filter whose name holds "=" (which a -c setting would cut there) is switched off as well', async () => {
    writeFileSync(join(repo, '.git', 'info', 'attributes'), '* filter=a=b\n');
    execFileSync('sh', ['-c', `printf '[filter "a=b"]\\n\\tclean = %s\\n' "$1" >> "$2"`, 'sh', trap('eq'), join(repo, '.git', 'config')]);
    expect(git(repo, ['config', '--get-regexp', '^filter[.]'])).toContain('filter.a=b.clean');
    writeFileSync(join(repo, 'f.txt'), 'main\n');
    const status = await runGit(repo, ['status', '--porcelain=v1', '-z', '--untracked-files=no']);
    expect(status.exitCode).toBe(0);
    expect(existsSync(marker)).toBe(false);
    plainStatus();
    expect(existsSync(marker)).toBe(true);
  });

  it('a smudge filter does not run when a merge moves the checked-out base and its files follow', async () => {
    writeFileSync(join(repo, '.git', 'info', 'attributes'), '* filter=evil\n');
    git(repo, ['config', 'filter.evil.smudge', trap('smudge')]);
    const before = git(repo, ['rev-parse', 'main']);
    const after = git(repo, ['rev-parse', 'head']);
    const opened = await GitRepository.open(repo);
    // Through proofgate's own move: the ref by compare-and-swap, then the work tree follows (read-tree -m -u).
    git(repo, ['reset', '-q', '--hard']);
    const moved = await opened.moveBranch('main', after, before, 'test: move main');
    expect(moved.swapped).toBe(true);
    expect(moved.left).toEqual([]);
    // The file was written (the work tree followed), and not through the filter.
    expect(readFileSync(join(repo, 'f.txt'), 'utf8')).toBe('head\n');
    expect(existsSync(marker)).toBe(false);
    // The same move back with plain git runs the smudge filter.
    git(repo, ['update-ref', 'refs/heads/main', before, after]);
    git(repo, ['read-tree', '-m', '-u', after, before]);
    expect(readFileSync(join(repo, 'f.txt'), 'utf8')).toBe('main\n');
    expect(existsSync(marker)).toBe(true);
  });

  it('a commit with a signature header does not make git log run the verifier the config names', async () => {
    git(repo, ['config', 'log.showSignature', 'true']);
    git(repo, ['config', 'gpg.program', trap('gpg')]);
    const plain = execFileSync('git', ['-C', repo, 'cat-file', 'commit', 'head'], { encoding: 'utf8' });
    const signed = plain.replace(/^(committer .*)$/m, '$1\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n -----END PGP SIGNATURE-----');
    const sha = execFileSync('git', ['-C', repo, 'hash-object', '-t', 'commit', '-w', '--stdin'], { input: signed, encoding: 'utf8' }).trim();
    expect(await gitText(repo, ['log', '-1', '--format=%s', sha])).toBe('head');
    expect(existsSync(marker)).toBe(false);
    git(repo, ['log', '-1', '--format=%s', sha]);
    expect(existsSync(marker)).toBe(true);
  });

  it("the user's own global filter (as git-lfs sets one up) still runs", async () => {
    const home = join(root, 'home');
    mkdirSync(home);
    writeFileSync(join(home, '.gitconfig'), `[filter "mine"]\n\tclean = ${trap('global')}\n`);
    writeFileSync(join(repo, '.git', 'info', 'attributes'), '* filter=mine\n');
    writeFileSync(join(repo, 'f.txt'), 'main\n');
    const saved = process.env.HOME;
    process.env.HOME = home;
    try {
      await runGit(repo, ['status', '--porcelain=v1', '-z', '--untracked-files=no']);
    } finally {
      process.env.HOME = saved;
    }
    expect(existsSync(marker)).toBe(true);
  });
});
