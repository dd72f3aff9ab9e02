/**
 * A base moved from outside the queue while a candidate's checks run: the
 * landing's compare-and-swap refuses, the candidate is built again on the new
 * tip and checked, and every change lands without a human.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { MergeQueuePort } from '../../../src/forge/port.js';
import { QueueStore } from '../../../src/automerge/queue/store.js';
import { finished, loopFixture, type LoopFixture } from '../loop/local-support.js';

let fixture: LoopFixture | null = null;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = null;
});

describe('merge queue: the base moves from outside', () => {
  it('the candidate is rebuilt on the moved base and lands; no block, one squash per change', async () => {
    const f = (fixture = await loopFixture({ config: undefined }));
    const ids = [await f.openChange('one', { 'one.txt': 'one\n' }), await f.openChange('two', { 'two.txt': 'two\n' })];
    const start = f.repo.sha('main');
    const port = f.forge.mergeQueue;
    let moved: string | null = null;
    const candidates: string[] = [];
    const wrapped: MergeQueuePort = {
      buildCandidate: (base, entries) => port.buildCandidate(base, entries),
      async checkCandidate(candidate, options) {
        candidates.push(candidate.baseSha);
        const result = await port.checkCandidate(candidate, options);
        if (moved === null) {
          // Someone pushes to main by hand while the first candidate is being checked.
          moved = f.repo.commit('main', { 'outside.txt': 'pushed by hand\n' }, 'a commit from outside the queue');
        }
        return result;
      },
      landCandidate: (candidate) => port.landCandidate(candidate),
    };
    (f.forge as { mergeQueue: MergeQueuePort }).mergeQueue = wrapped;

    const routed = await Promise.all(ids.map((id) => f.command(id, '/proofgate automerge')));
    const outcomes = await Promise.all(routed.map((r) => finished(r.dispatch?.done)));
    // On a failure, say why each change ended as it did, with the comments the change got (a review's reasons).
    const why = (
      await Promise.all(
        outcomes.map(async (o, i) => {
          if (o.kind === 'merged') return o.kind;
          const { comments } = await f.forge.snapshot(ids[i]!);
          return `${o.kind}: ${'reason' in o ? String(o.reason) : ''}; comments: ${comments.map((c) => c.body).join(' // ')}`;
        }),
      )
    ).join(' | ');
    expect(
      outcomes.map((o) => o.kind),
      why,
    ).toEqual(['merged', 'merged']);
    expect(moved).not.toBeNull();
    // The first candidate was built on the old tip; a later one on the moved tip.
    expect(candidates[0]).toBe(start);
    expect(candidates).toContain(moved);
    const log = f.repo
      .git(['log', '--first-parent', '--format=%H %s', `${start}..main`])
      .trim()
      .split('\n')
      .reverse();
    expect(log[0]).toBe(`${moved ?? ''} a commit from outside the queue`);
    expect(log).toHaveLength(3);
    const trailers = f.repo
      .git(['log', '--first-parent', '--format=%(trailers:key=Proofgate-Change,valueonly)', `${moved ?? ''}..main`])
      .trim()
      .split(/\s+/);
    expect(trailers.sort()).toEqual([...ids].sort());
    // The queue recorded both landings; nothing was ejected or removed.
    const queue = await new QueueStore(f.automerge.env.store.events).load('main');
    expect(queue.stats.ejected).toBe(0);
    expect(Object.values(queue.outcomes).map((o) => o.kind)).toEqual(['landed', 'landed']);
  });
});
