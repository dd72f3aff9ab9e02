import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runRepair } from '../../../src/automerge/repair/index.js';
import { IDENTITY, repairFixture, type RepairFixture } from './fixture.js';

let fixture: RepairFixture | undefined;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = undefined;
});

const CHANGELOG = '# Changelog\n\n## Unreleased\n\n- existing entry\n\n## 1.0.0\n\n- first release\n';
const sum = (c: string, path: string) => `${c.repeat(64)}  ${path}\n`;

async function setup(extra: Record<string, string> = {}) {
  fixture = await repairFixture({ 'README.md': 'hello\n', 'src/app.txt': 'one\ntwo\nthree\n', 'CHANGELOG.md': CHANGELOG, ...extra });
  return fixture;
}

/** Everything a repair must leave alone: the user's work tree, and every ref except the change's head branch. */
function untouched(f: RepairFixture, before: string[], headRef: string) {
  expect(f.status()).toBe('');
  expect(f.worktrees()).toBe(1);
  const others = (refs: string[]) => refs.filter((line) => !line.startsWith(`refs/heads/${headRef} `));
  expect(others(f.refs())).toEqual(others(before));
}

describe('runRepair: the rebase fast path on the local forge', () => {
  it('rebases a change that is behind main and pushes it with compare-and-swap', async () => {
    const f = await setup();
    f.commit('feature', { 'feature.txt': 'feature 1\n' }, 'feature part 1', 'main');
    const oldHead = f.commit('feature', { 'feature.txt': 'feature 1\nfeature 2\n' }, 'feature part 2');
    const change = await f.forge.openChange({ head: 'feature', base: 'main' });
    const mainSha = f.commit('main', { 'other.txt': 'base work\n' }, 'base moves on');
    const snapshot = await f.forge.snapshot(change.id);
    // The user is in the middle of something in the main work tree.
    writeFileSync(join(f.dir, 'README.md'), 'hello, edited but not committed\n');
    writeFileSync(join(f.dir, 'notes.txt'), 'untracked\n');
    const userStatus = f.status();
    const before = f.refs();
    const lines: string[] = [];

    const outcome = await runRepair(f.context(snapshot, { repair: 'rebase', reason: 'behind main', onProgress: (line) => lines.push(line) }));

    expect(outcome).toMatchObject({ kind: 'pushed', method: 'rebase', oldHead, resolved: [], gated: false });
    if (outcome.kind !== 'pushed') throw new Error('not pushed');
    expect(f.sha('feature')).toBe(outcome.newHead);
    expect(outcome.commits).toHaveLength(2);
    expect(outcome.commits[1]).toBe(outcome.newHead);
    expect(f.git(['rev-parse', `${outcome.commits[0]}^`])).toBe(mainSha);
    expect(f.git(['log', '--format=%s|%an|%cn', '-2', outcome.newHead]).split('\n')).toEqual([
      `feature part 2|Rita Repo|${IDENTITY.name}`,
      `feature part 1|Rita Repo|${IDENTITY.name}`,
    ]);
    expect(f.show('feature', 'other.txt')).toBe('base work');
    expect(f.show('feature', 'feature.txt')).toBe('feature 1\nfeature 2');
    expect(f.pushes).toEqual([{ branch: 'feature', newSha: outcome.newHead, expectedOldSha: oldHead }]);
    const after = await f.forge.snapshot(change.id);
    expect(after.head.sha).toBe(outcome.newHead);
    expect(after.mergeStateStatus).toBe('CLEAN');
    expect(lines.some((line) => line.includes('replaying 2 commits'))).toBe(true);
    expect(f.status()).toBe(userStatus);
    expect(readFileSync(join(f.dir, 'README.md'), 'utf8')).toBe('hello, edited but not committed\n');
    expect(f.worktrees()).toBe(1);
    expect(f.refs().filter((line) => !line.startsWith('refs/heads/feature '))).toEqual(before.filter((line) => !line.startsWith('refs/heads/feature ')));
  });

  it('merges an isolated CHANGELOG.md conflict: main entries first, then the change', async () => {
    const f = await setup();
    f.commit(
      'feature',
      { 'src/app.txt': 'one\ntwo\nthree\nfour\n', 'CHANGELOG.md': CHANGELOG.replace('- existing', '- add four\n- existing') },
      'add four',
      'main',
    );
    const change = await f.forge.openChange({ head: 'feature', base: 'main' });
    f.commit('main', { 'README.md': 'hello again\n', 'CHANGELOG.md': CHANGELOG.replace('- existing', '- fix readme\n- existing') }, 'fix readme');
    const snapshot = await f.forge.snapshot(change.id);
    expect(snapshot.mergeable).toBe('CONFLICTING');
    const before = f.refs();

    const outcome = await runRepair(f.context(snapshot, { repair: 'rebase' }));

    expect(outcome).toMatchObject({ kind: 'pushed', method: 'rebase', resolved: ['CHANGELOG.md'] });
    if (outcome.kind !== 'pushed') throw new Error('not pushed');
    expect(outcome.resolutions).toEqual([{ path: 'CHANGELOG.md', resolver: 'changelog', commit: snapshot.head.sha }]);
    expect(f.show('feature', 'CHANGELOG.md')).toBe(CHANGELOG.replace('- existing', '- fix readme\n- add four\n- existing').trimEnd());
    expect(f.show('feature', 'src/app.txt')).toBe('one\ntwo\nthree\nfour');
    expect(f.show('feature', 'README.md')).toBe('hello again');
    const after = await f.forge.snapshot(change.id);
    expect(after).toMatchObject({ mergeable: 'MERGEABLE', mergeStateStatus: 'CLEAN' });
    untouched(f, before, 'feature');
  });

  it('merges a generated checksum file conflict entry by entry', async () => {
    const f = await setup({ 'config/checksums.txt': sum('0', 'config/a.yml') + sum('1', 'config/b.yml') });
    f.commit('feature', { 'config/b.yml': 'b: 2\n', 'config/checksums.txt': sum('0', 'config/a.yml') + sum('7', 'config/b.yml') }, 'tune b', 'main');
    const change = await f.forge.openChange({ head: 'feature', base: 'main' });
    f.commit('main', { 'config/a.yml': 'a: 2\n', 'config/checksums.txt': sum('5', 'config/a.yml') + sum('1', 'config/b.yml') }, 'tune a');
    const snapshot = await f.forge.snapshot(change.id);
    expect(snapshot.mergeable).toBe('CONFLICTING');

    const outcome = await runRepair(f.context(snapshot, { repair: 'rebase' }));

    expect(outcome).toMatchObject({ kind: 'pushed', method: 'rebase', resolved: ['config/checksums.txt'] });
    expect(f.show('feature', 'config/checksums.txt')).toBe((sum('5', 'config/a.yml') + sum('7', 'config/b.yml')).trimEnd());
    expect(f.status()).toBe('');
    expect(f.worktrees()).toBe(1);
  });

  it('stops at a real source conflict: no-change, nothing pushed, nothing touched', async () => {
    const f = await setup();
    const head = f.commit(
      'feature',
      { 'src/app.txt': 'one\nTWO (change)\nthree\n', 'CHANGELOG.md': CHANGELOG.replace('- existing', '- change\n- existing') },
      'edit two',
      'main',
    );
    const change = await f.forge.openChange({ head: 'feature', base: 'main' });
    f.commit('main', { 'src/app.txt': 'one\nTWO (main)\nthree\n', 'CHANGELOG.md': CHANGELOG.replace('- existing', '- main\n- existing') }, 'edit two on main');
    const snapshot = await f.forge.snapshot(change.id);
    const before = f.refs();

    const outcome = await runRepair(f.context(snapshot, { repair: 'rebase' }));

    expect(outcome).toMatchObject({ kind: 'no-change', conflicts: expect.arrayContaining(['src/app.txt']) });
    if (outcome.kind !== 'no-change') throw new Error('expected no-change');
    expect(outcome.reason).toContain('src/app.txt: no mechanical resolver applies');
    expect(f.pushes).toEqual([]);
    expect(f.sha('feature')).toBe(head);
    expect(f.refs()).toEqual(before);
    untouched(f, before, 'feature');
  });

  it('publishes nothing when the head moved during the repair (HEAD_MOVED is transient)', async () => {
    const f = await setup();
    f.commit('feature', { 'feature.txt': 'v1\n' }, 'feature', 'main');
    const change = await f.forge.openChange({ head: 'feature', base: 'main' });
    f.commit('main', { 'other.txt': 'base\n' }, 'base moves on');
    const snapshot = await f.forge.snapshot(change.id);
    let moved = '';
    // The author pushes again while the repair is replaying commits.
    const onProgress = (line: string) => {
      if (line.startsWith('replaying')) moved = f.commit('feature', { 'feature.txt': 'v2\n' }, 'author pushes again');
    };

    const outcome = await runRepair(f.context(snapshot, { repair: 'rebase', onProgress }));

    expect(outcome).toEqual({
      kind: 'failed',
      reason: `feature moved away from ${snapshot.head.sha.slice(0, 12)} during the repair; nothing pushed`,
      transient: true,
    });
    expect(moved).not.toBe('');
    expect(f.sha('feature')).toBe(moved);
    expect(f.pushes).toHaveLength(1);
    expect((await f.forge.snapshot(change.id)).head.sha).toBe(moved);
    expect(f.status()).toBe('');
    expect(f.worktrees()).toBe(1);
  });

  it('changes nothing when the head already contains the base, or when the base already has every commit', async () => {
    const f = await setup();
    f.commit('feature', { 'feature.txt': 'x\n' }, 'feature', 'main');
    const change = await f.forge.openChange({ head: 'feature', base: 'main' });
    const upToDate = await runRepair(f.context(await f.forge.snapshot(change.id), { repair: 'rebase' }));
    expect(upToDate).toMatchObject({ kind: 'no-change', reason: expect.stringContaining('already contains main') });

    // main gets the same change by another road (a cherry-pick): replaying drops the commit.
    f.commit('main', { 'feature.txt': 'x\n' }, 'same feature, applied on main');
    f.commit('main', { 'more.txt': 'm\n' }, 'more');
    const outcome = await runRepair(f.context(await f.forge.snapshot(change.id), { repair: 'rebase' }));
    expect(outcome).toMatchObject({ kind: 'no-change', reason: expect.stringContaining('every commit of the change is already in main') });
    expect(f.pushes).toEqual([]);
    expect(f.worktrees()).toBe(1);
  });

  it('refuses a closed change and a head that is not in the repository', async () => {
    const f = await setup();
    f.commit('feature', { 'feature.txt': 'x\n' }, 'feature', 'main');
    const change = await f.forge.openChange({ head: 'feature', base: 'main' });
    const snapshot = await f.forge.snapshot(change.id);
    expect(await runRepair(f.context({ ...snapshot, state: 'merged' }))).toEqual({
      kind: 'failed',
      reason: `change ${change.id} is merged; only open changes are repaired`,
      transient: false,
    });
    const missing = 'f'.repeat(40);
    expect(await runRepair(f.context({ ...snapshot, head: { ref: 'feature', sha: missing } }))).toMatchObject({
      kind: 'failed',
      reason: expect.stringContaining(`head commit ${missing.slice(0, 12)} is not in`),
    });
    await expect(runRepair(f.context({ ...snapshot, head: { ref: 'feature', sha: 'abc' } }))).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(runRepair(f.context(snapshot, { config: { gate: [], agentFix: null, timeoutSeconds: 1, maxOutputBytes: 10 } }))).rejects.toMatchObject({
      code: 'INVALID_INPUT',
    });
    expect(f.pushes).toEqual([]);
  });
});
