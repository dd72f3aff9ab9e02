import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GitRepository, openLocalForge } from '../../src/forge/local/index.js';
import { closeGitObjectReader, gitText, readObject } from '../../src/host/index.js';

/**
 * Attack by replace refs: whoever can write a ref in the repository (an agent
 * working in it, the author of a change in the local forge) can make
 * `refs/replace/<reviewed head>` name other bytes. Git then reads those bytes
 * for the reviewed sha everywhere: the review's diff, a merge's tree, the
 * object reader. A verdict bound to the head's sha would land bytes nobody
 * reviewed. proofgate's git reads every object as its name says.
 */

let root: string;
let repo: string;
let good: string;
let evil: string;

function git(args: readonly string[]): string {
  return execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

function commitFile(content: string, message: string): string {
  writeFileSync(join(repo, 'f.txt'), content);
  git(['add', '-A']);
  git(['-c', 'user.name=T', '-c', 'user.email=t@example.test', '-c', 'commit.gpgsign=false', 'commit', '-q', '-m', message]);
  return git(['rev-parse', 'HEAD']);
}

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'proofgate-attack-replace-'));
  repo = join(root, 'repo');
  execFileSync('git', ['init', '-q', '-b', 'main', repo]);
  commitFile('base\n', 'base');
  git(['checkout', '-q', '-b', 'feature']);
  good = commitFile('reviewed\n', 'the reviewed change');
  git(['checkout', '-q', '-b', 'sneaky', 'main']);
  evil = commitFile('NOT REVIEWED\n', 'what the author wants merged');
  git(['checkout', '-q', 'main']);
});

afterEach(() => {
  closeGitObjectReader(repo);
  rmSync(root, { recursive: true, force: true });
});

describe('attack: a replace ref for the reviewed head', () => {
  it('the trap is live for plain git: the reviewed sha reads as other bytes', () => {
    git(['replace', good, evil]);
    expect(git(['show', `${good}:f.txt`])).toBe('NOT REVIEWED');
  });

  it('reads, diffs and the merge tree see the reviewed bytes', async () => {
    git(['replace', good, evil]);
    expect((await readObject(repo, `${good}:f.txt`))?.bytes.toString('utf8')).toBe('reviewed\n');
    expect(await gitText(repo, ['show', `${good}:f.txt`])).toBe('reviewed');
    const opened = await GitRepository.open(repo);
    const merged = await opened.mergeTree('main', good);
    expect(merged.clean).toBe(true);
    expect(await gitText(repo, ['cat-file', 'blob', `${merged.tree}:f.txt`])).toBe('reviewed');
    const diff = await gitText(repo, ['diff', '--no-ext-diff', '--no-textconv', 'main', good]);
    expect(diff).toContain('+reviewed');
    expect(diff).not.toContain('NOT REVIEWED');
  });

  it('a change reviewed at its head and then replaced lands the reviewed bytes on the base', async () => {
    const dataDir = join(root, 'data');
    const opened = await openLocalForge({ repoDir: repo, dataDir });
    try {
      const change = await opened.forge.openChange({ head: 'feature', base: 'main', author: 'mallory' });
      expect(change.head.sha).toBe(good);
      // After the review, the author points the reviewed sha at other bytes.
      git(['replace', good, evil]);
      const result = await opened.forge.merge(change.id, { expectedHeadSha: good, title: 'reviewed change', message: 'squash' });
      expect(result.merged).toBe(true);
      expect(execFileSync('git', ['-C', repo, '--no-replace-objects', 'show', 'main:f.txt'], { encoding: 'utf8' })).toBe('reviewed\n');
    } finally {
      await opened.close();
    }
  });
});
