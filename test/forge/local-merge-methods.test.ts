import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GitRepository } from '../../src/forge/local/index.js';
import { findLandedMerge } from '../../src/forge/local/snapshot.js';
import { localFixture, rejectionOf, type LocalFixture } from './local-support.js';

let fixture: LocalFixture | undefined;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = undefined;
});
const setup = async (config?: string) => {
  fixture = await localFixture(config);
  return fixture;
};

const parents = (f: LocalFixture, sha: string): string[] => f.repo.git(['rev-list', '--parents', '-n', '1', sha]).split(' ').slice(1);

describe('local forge: merge methods', () => {
  it('merge: one merge commit whose parents are the base and the reviewed head, found again by its trailers', async () => {
    const f = await setup();
    const change = await f.forge.openChange({ head: 'feature', base: 'main' });
    const result = await f.forge.merge(change.id, { expectedHeadSha: change.head.sha, title: 'Add the feature', message: '', method: 'merge' });
    expect(f.repo.sha('main')).toBe(result.sha);
    expect(parents(f, result.sha)).toEqual([f.repo.baseSha, f.repo.headSha]);
    expect(f.repo.git(['show', 'main:feature.txt'])).toBe('new feature');
    const message = f.repo.git(['log', '-1', '--format=%B', result.sha]);
    expect(message).toContain(`Proofgate-Reviewed-Head: ${f.repo.headSha}`);
    expect(message).toContain(`Proofgate-Base: ${f.repo.baseSha}`);
    expect(await f.forge.snapshot(change.id)).toMatchObject({ state: 'merged', mergeCommitSha: result.sha });
    // Merged once: a retry is refused and adds nothing.
    expect((await rejectionOf(f.forge.merge(change.id, { expectedHeadSha: change.head.sha, title: 'again', message: '', method: 'merge' }))).code).toBe(
      'NOT_MERGEABLE',
    );
    expect(f.repo.sha('main')).toBe(result.sha);
    const repo = await GitRepository.open(f.repo.dir);
    expect(await findLandedMerge(repo, change.id, result.sha, f.repo.baseSha)).toMatchObject({
      mergeCommitSha: result.sha,
      reviewedHeadSha: f.repo.headSha,
      baseBefore: f.repo.baseSha,
    });
  });

  it('squash stays the default: one parent, the base', async () => {
    const f = await setup();
    const change = await f.forge.openChange({ head: 'feature', base: 'main' });
    const result = await f.forge.merge(change.id, { expectedHeadSha: change.head.sha, title: 'Add', message: '' });
    expect(parents(f, result.sha)).toEqual([f.repo.baseSha]);
  });

  it('rebase is refused with CONFIG naming the setting, and nothing changes', async () => {
    const f = await setup();
    const change = await f.forge.openChange({ head: 'feature', base: 'main' });
    const error = await rejectionOf(f.forge.merge(change.id, { expectedHeadSha: change.head.sha, title: 'Add', message: '', method: 'rebase' }));
    expect(error.code).toBe('CONFIG');
    expect(error.message).toContain('automerge.mergeMethod');
    expect(error.message).not.toContain('\n');
    expect(f.repo.sha('main')).toBe(f.repo.baseSha);
    expect((await f.forge.snapshot(change.id)).state).toBe('open');
  });

  it('a merge commit of the change whose second parent is not the reviewed head is not taken as landed', async () => {
    const f = await setup();
    const change = await f.forge.openChange({ head: 'feature', base: 'main' });
    const other = f.repo.commit('other', { 'other.txt': 'x\n' }, 'other', 'main');
    const tree = f.repo.git(['rev-parse', `${f.repo.headSha}^{tree}`]);
    const message = `quoted\n\nProofgate-Change: ${change.id}\nProofgate-Reviewed-Head: ${f.repo.headSha}\nProofgate-Base: ${f.repo.baseSha}\n`;
    const fake = f.repo.git(['commit-tree', tree, '-p', f.repo.baseSha, '-p', other, '-m', message]);
    const repo = await GitRepository.open(f.repo.dir);
    expect(await findLandedMerge(repo, change.id, fake, f.repo.baseSha)).toBeNull();
  });

  it('a bad merge setting on the base is one CONFIG line and registers nothing', async () => {
    const f = await setup('automerge:\n  mergeMethod: fast-forward\n');
    const error = await rejectionOf(f.forge.openChange({ head: 'feature', base: 'main' }));
    expect(error.code).toBe('CONFIG');
    expect(error.message).toContain('automerge.mergeMethod');
    expect(error.message).not.toContain('\n');
    expect(await f.forge.listChanges()).toEqual([]);
  });
});

describe('local forge: deleteBranch', () => {
  it('deletes a merged head at the expected sha; a branch already gone counts as done', async () => {
    const f = await setup();
    const change = await f.forge.openChange({ head: 'feature', base: 'main' });
    await f.forge.merge(change.id, { expectedHeadSha: change.head.sha, title: 'Add', message: '' });
    await f.forge.deleteBranch({ branch: 'feature', expectedSha: f.repo.headSha });
    expect(f.repo.git(['branch', '--list', 'feature'])).toBe('');
    await f.forge.deleteBranch({ branch: 'feature', expectedSha: f.repo.headSha });
    // The merged change reads as before.
    expect(await f.forge.snapshot(change.id)).toMatchObject({ state: 'merged', head: { ref: 'feature', sha: f.repo.headSha } });
  });

  it('keeps a branch that moved (HEAD_MOVED), a protected branch, one an open change uses, and one checked out', async () => {
    const f = await setup('protectedBranches: [main, release]\n');
    f.repo.git(['branch', 'release', 'main']);
    const change = await f.forge.openChange({ head: 'feature', base: 'main' });
    // An open change uses it.
    expect(await rejectionOf(f.forge.deleteBranch({ branch: 'feature', expectedSha: f.repo.headSha }))).toMatchObject({
      code: 'INVALID_INPUT',
      message: expect.stringContaining(`open change ${change.id}`),
    });
    await f.forge.closeChange(change.id);
    // Moved since.
    const moved = f.repo.commit('feature', { 'more.txt': 'more\n' }, 'more');
    expect((await rejectionOf(f.forge.deleteBranch({ branch: 'feature', expectedSha: f.repo.headSha }))).code).toBe('HEAD_MOVED');
    expect(f.repo.sha('feature')).toBe(moved);
    // Protected, in any letter case; the trusted branch too.
    for (const branch of ['main', 'release', 'Release']) {
      expect((await rejectionOf(f.forge.deleteBranch({ branch, expectedSha: f.repo.baseSha }))).code).toBe('PROTECTED_BRANCH');
    }
    expect(f.repo.sha('release')).toBe(f.repo.baseSha);
    // Checked out in a work tree.
    const tree = mkdtempSync(join(tmpdir(), 'proofgate-delete-wt-'));
    try {
      f.repo.git(['worktree', 'add', '-q', join(tree, 'wt'), 'feature']);
      expect(await rejectionOf(f.forge.deleteBranch({ branch: 'feature', expectedSha: moved }))).toMatchObject({
        code: 'INVALID_INPUT',
        message: expect.stringContaining('checked out'),
      });
      expect(f.repo.sha('feature')).toBe(moved);
    } finally {
      f.repo.git(['worktree', 'remove', '--force', join(tree, 'wt')]);
      rmSync(tree, { recursive: true, force: true });
    }
    await f.forge.deleteBranch({ branch: 'feature', expectedSha: moved });
    expect(f.repo.git(['branch', '--list', 'feature'])).toBe('');
  });

  it('refuses a bad branch name or sha before anything', async () => {
    const f = await setup();
    expect((await rejectionOf(f.forge.deleteBranch({ branch: '-x', expectedSha: f.repo.headSha }))).code).toBe('INVALID_INPUT');
    expect((await rejectionOf(f.forge.deleteBranch({ branch: 'feature', expectedSha: 'abc' }))).code).toBe('INVALID_INPUT');
    expect(f.repo.sha('feature')).toBe(f.repo.headSha);
  });
});
