import { afterEach, describe, expect, it } from 'vitest';
import { LABELS } from '../../../src/automerge/loop/index.js';
import { finished, loopFixture, repoConfig, type LoopFixture } from './local-support.js';

let fixture: LoopFixture | null = null;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = null;
});

/** A real agent-fix program: deletes the file the check complains about. */
const AGENT_FIX = [
  'automerge:',
  '  gate: [node, check.mjs]',
  '  agentFix:',
  "    command: [node, -e, \"require('node:fs').rmSync('broken.txt', { force: true })\"]",
].join('\n');

describe('automerge repairs on the local forge', () => {
  it('a failing check dispatches the agent-fix repair, then re-reviews and merges the repaired head', async () => {
    const f = (fixture = await loopFixture({ config: repoConfig(AGENT_FIX) }));
    const id = await f.openChange('broken', { 'broken.txt': 'this breaks the check\n', 'feature.txt': 'a feature\n' });
    const first = f.repo.sha('broken');
    const outcome = await finished((await f.command(id, '/proofgate automerge')).dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('merged');
    expect(outcome.repairs).toBe(1);
    const { state } = await f.automerge.env.store.load(id);
    const repair = state.repairs[0];
    expect(repair?.repair).toBe('fix-checks');
    expect(repair?.head).toBe(first);
    expect(repair?.status).toBe('pushed');
    expect(outcome.head).toBe(repair?.newHead);
    // The repaired head was reviewed before it merged, and the old head's verdict did not count for it.
    expect(state.reviews.map((r) => r.head)).toContain(repair?.newHead);
    expect(f.repo.git(['ls-tree', '--name-only', 'main'])).not.toContain('broken.txt');
    const final = (await f.forge.snapshot(id)).comments.find((c) => c.body.includes('### proofgate automerge: merged'));
    expect(final?.body).toContain('fix-checks from');
    expect(final?.body).toContain(repair?.commits[0]?.slice(0, 12) ?? 'missing');
  });

  it('a failing check with no agent-fix, on a head behind its base, is repaired by the rebase alone and merges', async () => {
    const f = (fixture = await loopFixture());
    const id = await f.openChange('broken', { 'broken.txt': 'this file used to break the check\n', 'feature.txt': 'a feature\n' });
    const first = f.repo.sha('broken');
    // The base fixes the check (it no longer minds broken.txt) after the change branched off.
    f.repo.commit('main', { 'check.mjs': "console.log('ok');\n" }, 'relax the check');
    const outcome = await finished((await f.command(id, '/proofgate automerge')).dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('merged');
    const { state } = await f.automerge.env.store.load(id);
    expect(state.repairs.map((r) => [r.repair, r.head, r.status])).toEqual([['fix-checks', first, 'pushed']]);
    expect(state.reviews.map((r) => r.head)).toContain(outcome.head);
    expect(f.repo.git(['show', 'main:feature.txt'])).toBe('a feature');
  });

  it('an isolated CHANGELOG.md conflict is solved by the rebase fast path', async () => {
    const f = (fixture = await loopFixture());
    const id = await f.openChange('entry', { 'CHANGELOG.md': '# Changelog\n\n## Unreleased\n\n- add the entry feature\n', 'entry.txt': 'entry\n' });
    f.repo.commit('main', { 'CHANGELOG.md': '# Changelog\n\n## Unreleased\n\n- something else landed first\n' }, 'other change');
    const before = await f.forge.snapshot(id);
    expect(before.mergeable).toBe('CONFLICTING');
    const outcome = await finished((await f.command(id, '/proofgate automerge')).dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('merged');
    const { state } = await f.automerge.env.store.load(id);
    expect(state.repairs.map((r) => [r.repair, r.status])).toEqual([['rebase', 'pushed']]);
    const changelog = f.repo.git(['show', 'main:CHANGELOG.md']);
    expect(changelog).toContain('- add the entry feature');
    expect(changelog).toContain('- something else landed first');
    expect(changelog).not.toContain('<<<<<<<');
  });

  it('BEHIND (the base requires up-to-date heads) is repaired by the rebase fast path and merges the rebased head after its own review and checks', async () => {
    const f = (fixture = await loopFixture({ config: repoConfig('requireUpToDate: true') }));
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const old = f.repo.sha('feature');
    // The old head is reviewed and passes: that verdict must not carry over to the rebased head.
    await finished((await f.command(id, '/proofgate review')).dispatch?.done);
    const unrelated = f.repo.commit('main', { 'NOTES.md': 'unrelated work\n' }, 'unrelated work on main');
    expect((await f.forge.snapshot(id)).mergeStateStatus).toBe('BEHIND');

    const outcome = await finished((await f.command(id, '/proofgate automerge')).dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('merged');
    const { state, steps } = await f.automerge.env.store.load(id);
    expect(steps.filter((step) => step.step === 'decision').map((step) => step.code)).toContain('behind');
    // One automatic rebase from the old head: it counts against the caps like any repair.
    expect(state.repairs.map((r) => [r.repair, r.head, r.status, r.automatic])).toEqual([['rebase', old, 'pushed', true]]);
    const rebased = state.repairs[0]?.newHead ?? 'missing';
    expect(rebased).not.toBe(old);
    expect(f.repo.git(['merge-base', '--is-ancestor', unrelated, rebased])).toBe('');
    // The rebased head was reviewed and checked before it merged; the old head never merged.
    expect(outcome.head).toBe(rebased);
    expect(state.merged?.head).toBe(rebased);
    expect(state.reviews.filter((r) => r.verdict === 'CONFIRMED').map((r) => r.head)).toEqual([old, rebased]);
    expect((await f.forge.store.checks(rebased)).map((c) => [c.name, c.conclusion])).toEqual([['test', 'success']]);
    expect(f.repo.git(['log', '-1', '--format=%B', 'main'])).toContain(`Proofgate-Reviewed-Head: ${rebased}`);
    expect(f.repo.git(['rev-parse', 'main^'])).toBe(unrelated);
    expect(f.repo.git(['show', 'main:feature.txt'])).toBe('a feature');
  });

  it('a check that also fails on main is reported as the base being blocked: no repair, no cap spent, nothing pushed', async () => {
    const f = (fixture = await loopFixture({ config: repoConfig(AGENT_FIX) }));
    // main itself fails the check; the change only adds a feature on top.
    const broken = f.repo.commit('main', { 'broken.txt': 'main is broken\n' }, 'break main');
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const head = f.repo.sha('feature');

    const outcome = await finished((await f.command(id, '/proofgate automerge')).dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('blocked');
    expect(outcome.code).toBe('base-blocked');
    expect(outcome.reason).toContain('proofgate / test');
    expect(outcome.reason).toContain(broken.slice(0, 12));
    // The check ran on main's commit itself, and failed there too.
    expect((await f.forge.store.checks(broken)).map((c) => [c.name, c.conclusion])).toEqual([['test', 'failure']]);
    // Not charged to the change: the agent (which would delete broken.txt) never ran, nothing was pushed or merged.
    const { state } = await f.automerge.env.store.load(id);
    expect(state.repairs).toEqual([]);
    expect(f.repo.sha('feature')).toBe(head);
    expect(f.repo.sha('main')).toBe(broken);
    expect((await f.forge.snapshot(id)).labels).toContain(LABELS.humanReview);
  });

  it('blocks with the human-review label when the repair cap is reached', async () => {
    const cap = [
      'automerge:',
      '  maxRepairsPerHead: 1',
      '  maxRepairsPerChange: 1',
      '  gate: [node, check.mjs]',
      '  agentFix:',
      "    command: [node, -e, \"require('node:fs').writeFileSync('note.txt', 'tried\\\\n')\"]",
    ].join('\n');
    const f = (fixture = await loopFixture({ config: repoConfig(cap) }));
    const id = await f.openChange('broken', { 'broken.txt': 'this breaks the check\n' });
    const outcome = await finished((await f.command(id, '/proofgate automerge')).dispatch?.done);
    expect(outcome.kind).toBe('blocked');
    expect(['repair-cap-per-change', 'repair-cap-per-head', 'repair-made-no-change']).toContain(outcome.code);
    expect((await f.forge.snapshot(id)).labels).toContain(LABELS.humanReview);
  });
});
