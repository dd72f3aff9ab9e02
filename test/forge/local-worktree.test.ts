import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { localFixture, type LocalFixture } from './local-support.js';

/**
 * A user's repository usually has the base branch checked out. Moving that
 * branch with update-ref alone would leave the work tree at the old commit, so
 * `git status` would show the merged change reverted; the forge brings such
 * work trees along as a fast-forward would.
 */
let fixture: LocalFixture | undefined;

afterEach(async () => {
  await fixture?.cleanup();
  fixture = undefined;
});

describe('local forge: checked-out branches follow a merge or a push', () => {
  it('a merge into the checked-out base leaves a clean work tree holding the merged files, keeping unrelated local edits', async () => {
    fixture = await localFixture();
    const { forge, repo } = fixture;
    writeFileSync(join(repo.dir, 'README.md'), 'hello, edited locally\n');
    writeFileSync(join(repo.dir, 'notes.txt'), 'untracked\n');
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const merged = await forge.merge(change.id, { expectedHeadSha: repo.headSha, title: 'Add feature', message: '' });
    expect(repo.sha('HEAD')).toBe(merged.sha);
    expect(readFileSync(join(repo.dir, 'feature.txt'), 'utf8')).toBe('new feature\n');
    expect(repo.git(['status', '--porcelain'])).toBe('M README.md\n?? notes.txt');
    expect(readFileSync(join(repo.dir, 'README.md'), 'utf8')).toBe('hello, edited locally\n');
  });

  it('a push (compare-and-swap) to the checked-out branch brings its work tree along', async () => {
    fixture = await localFixture();
    const { forge, repo } = fixture;
    repo.git(['checkout', '-q', 'feature']);
    const next = repo.commit('side', { 'feature.txt': 'new feature, repaired\n' }, 'repair', 'feature');
    await forge.pushBranch({ branch: 'feature', newSha: next, expectedOldSha: repo.headSha });
    expect(repo.sha('HEAD')).toBe(next);
    expect(repo.git(['status', '--porcelain'])).toBe('');
    expect(readFileSync(join(repo.dir, 'feature.txt'), 'utf8')).toBe('new feature, repaired\n');
  });

  it('a work tree whose local edits conflict with the move is left untouched (the ref still moves)', async () => {
    fixture = await localFixture();
    const { forge, repo } = fixture;
    writeFileSync(join(repo.dir, 'feature.txt'), 'my own local file\n');
    repo.git(['add', 'feature.txt']);
    const change = await forge.openChange({ head: 'feature', base: 'main' });
    const merged = await forge.merge(change.id, { expectedHeadSha: repo.headSha, title: 'Add feature', message: '' });
    expect(repo.sha('main')).toBe(merged.sha);
    expect(readFileSync(join(repo.dir, 'feature.txt'), 'utf8')).toBe('my own local file\n');
    expect(existsSync(join(repo.dir, 'README.md'))).toBe(true);
  });
});
