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
    expect(outcome.reason).toMatch(/repair cap reached|made no change/);
    expect((await f.forge.snapshot(id)).labels).toContain(LABELS.humanReview);
  });
});
