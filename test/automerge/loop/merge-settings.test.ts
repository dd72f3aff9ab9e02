import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseCommands } from '../../../src/automerge/commands.js';
import { runMergeStep } from '../../../src/automerge/loop/merge-step.js';
import type { AutomergeEnvironment } from '../../../src/automerge/loop/index.js';
import type { Forge } from '../../../src/forge/port.js';
import { finished, loopFixture, MAINTAINER, repoConfig, type LoopFixture } from './local-support.js';

let fixture: LoopFixture | null = null;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = null;
});

/** Automerge on in the ledger (the merge step merges only while it is), without starting a job. */
async function automergeOn(f: LoopFixture, id: string): Promise<void> {
  await f.automerge.env.store.applyCommands(id, {
    comment: { id: `on-${id}`, author: MAINTAINER, updatedAt: new Date().toISOString() },
    commands: parseCommands('/proofgate automerge'),
  });
}

async function headBranchSteps(f: LoopFixture, id: string) {
  return (await f.automerge.env.store.load(id)).steps.filter((s) => s.step.startsWith('head-branch-'));
}

const parentsOf = (f: LoopFixture, sha: string): string[] => f.repo.git(['rev-list', '--parents', '-n', '1', sha]).split(' ').slice(1);

/** A trusted config without checks (a merge needs none) and with `automerge` lines. */
const bare = (automerge: string) => [`maintainers:\n  - login: ${MAINTAINER}\n    permission: admin`, `automerge:\n${automerge}`].join('\n');

describe('automerge merge settings on the local forge', () => {
  it('the loop merges by automerge.mergeMethod: merge, a merge commit of the reviewed head', async () => {
    const f = (fixture = await loopFixture({ config: repoConfig('automerge:\n  mergeMethod: merge\n') }));
    const base = f.repo.sha('main');
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const head = f.repo.sha('feature');
    const outcome = await finished((await f.command(id, '/proofgate automerge')).dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('merged');
    const merge = outcome.mergeCommit ?? '';
    expect(f.repo.sha('main')).toBe(merge);
    expect(parentsOf(f, merge)).toEqual([base, head]);
    expect(await f.forge.snapshot(id)).toMatchObject({ state: 'merged', mergeCommitSha: merge });
  });

  it('a whole automerge job (its writes fenced by its lease) deletes the merged head when deleteHeadBranch is on', async () => {
    const f = (fixture = await loopFixture({ config: repoConfig('automerge:\n  deleteHeadBranch: true\n') }));
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const head = f.repo.sha('feature');
    const outcome = await finished((await f.command(id, '/proofgate automerge')).dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('merged');
    expect(f.repo.git(['branch', '--list', 'feature'])).toBe('');
    expect(await headBranchSteps(f, id)).toEqual([expect.objectContaining({ step: 'head-branch-deleted', branch: 'feature', sha: head })]);
  });

  it('the merge step merges nothing once a stop is recorded after the decision (one compare-and-swap with its merge-attempt)', async () => {
    const f = (fixture = await loopFixture({ config: bare('  mergeMethod: squash') }));
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const snapshot = await f.forge.snapshot(id);
    const main = f.repo.sha('main');
    await automergeOn(f, id);
    await f.automerge.env.store.applyCommands(id, {
      comment: { id: 'stop-1', author: MAINTAINER, updatedAt: new Date(Date.now() + 1000).toISOString() },
      commands: parseCommands('/proofgate stop'),
    });
    const result = await runMergeStep(f.automerge.env, snapshot, snapshot.head.sha);
    expect(result).toMatchObject({ kind: 'refused', reason: 'automerge was stopped after the merge was decided' });
    expect(f.repo.sha('main')).toBe(main);
    expect((await f.automerge.env.store.load(id)).steps.some((step) => step.step === 'merge-attempt')).toBe(false);
  });

  it('the merge step deletes the merged head when deleteHeadBranch is on, at the merged sha', async () => {
    const f = (fixture = await loopFixture({ config: bare('  deleteHeadBranch: true') }));
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const snapshot = await f.forge.snapshot(id);
    await automergeOn(f, snapshot.id);
    const result = await runMergeStep(f.automerge.env, snapshot, snapshot.head.sha);
    expect(result.kind).toBe('merged');
    expect(parentsOf(f, f.repo.sha('main'))).toHaveLength(1);
    expect(f.repo.git(['branch', '--list', 'feature'])).toBe('');
    expect(await headBranchSteps(f, id)).toEqual([expect.objectContaining({ step: 'head-branch-deleted', branch: 'feature', sha: snapshot.head.sha })]);
  });

  it('a head branch that cannot be deleted (checked out) is kept, the step says why, and the merge stands', async () => {
    const f = (fixture = await loopFixture({ config: bare('  deleteHeadBranch: true\n  mergeMethod: merge') }));
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const snapshot = await f.forge.snapshot(id);
    const trees = mkdtempSync(join(tmpdir(), 'proofgate-loop-wt-'));
    try {
      f.repo.git(['worktree', 'add', '-q', join(trees, 'wt'), 'feature']);
      await automergeOn(f, snapshot.id);
      const result = await runMergeStep(f.automerge.env, snapshot, snapshot.head.sha);
      expect(result.kind).toBe('merged');
      expect(parentsOf(f, f.repo.sha('main'))).toEqual([snapshot.base.sha, snapshot.head.sha]);
      expect(f.repo.sha('feature')).toBe(snapshot.head.sha);
      expect(await headBranchSteps(f, id)).toEqual([
        expect.objectContaining({
          step: 'head-branch-delete-failed',
          branch: 'feature',
          code: 'INVALID_INPUT',
          reason: expect.stringContaining('checked out'),
        }),
      ]);
    } finally {
      f.repo.git(['worktree', 'remove', '--force', join(trees, 'wt')]);
      rmSync(trees, { recursive: true, force: true });
    }
  });

  it('without deleteHeadBranch the head branch stays and no step is written', async () => {
    const f = (fixture = await loopFixture({ config: bare('  mergeMethod: squash') }));
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const snapshot = await f.forge.snapshot(id);
    await automergeOn(f, snapshot.id);
    expect((await runMergeStep(f.automerge.env, snapshot, snapshot.head.sha)).kind).toBe('merged');
    expect(f.repo.sha('feature')).toBe(snapshot.head.sha);
    expect(await headBranchSteps(f, id)).toEqual([]);
  });

  it('a forge that does not delete branches keeps the head, and says so', async () => {
    const f = (fixture = await loopFixture({ config: bare('  deleteHeadBranch: true') }));
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const snapshot = await f.forge.snapshot(id);
    const local = f.forge;
    const forge = new Proxy(local, {
      get: (target, key) => {
        if (key === 'deleteBranch') return undefined;
        const value: unknown = Reflect.get(target, key, target);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    }) as Forge;
    const env: AutomergeEnvironment = { ...f.automerge.env, forge };
    await automergeOn(f, snapshot.id);
    expect((await runMergeStep(env, snapshot, snapshot.head.sha)).kind).toBe('merged');
    expect(f.repo.sha('feature')).toBe(snapshot.head.sha);
    expect(await headBranchSteps(f, id)).toEqual([expect.objectContaining({ step: 'head-branch-kept', code: 'unsupported' })]);
  });

  it('mergeMethod: rebase on the local forge is a CONFIG error naming the setting; nothing merges', async () => {
    const f = (fixture = await loopFixture({ config: bare('  mergeMethod: rebase') }));
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const base = f.repo.sha('main');
    const snapshot = await f.forge.snapshot(id);
    await automergeOn(f, snapshot.id);
    await expect(runMergeStep(f.automerge.env, snapshot, snapshot.head.sha)).rejects.toMatchObject({
      code: 'CONFIG',
      message: expect.stringContaining('automerge.mergeMethod'),
    });
    expect(f.repo.sha('main')).toBe(base);
    expect((await f.forge.snapshot(id)).state).toBe('open');
  });
});
