import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KnownStep } from '../../../src/contracts/automerge-steps.js';
import { automergeStream, interruptedCheckHeads, pushIntent, recoverInterrupted } from '../../../src/automerge/loop/index.js';
import { isProofgateError } from '../../../src/core/index.js';
import { loopFixture, type LoopFixture } from './local-support.js';

const AT = '2026-01-01T00:00:00.000Z';
const A = 'a'.repeat(40);
const B = 'b'.repeat(40);

describe('reading the step log (pure)', () => {
  const steps: KnownStep[] = [
    { step: 'checks-started', at: AT, head: A },
    { step: 'checks-started', at: AT, head: B },
    { step: 'repair-push', at: AT, repair: 'p1', branch: 'feature', oldSha: A, newSha: B, commits: [B] },
    { step: 'checks-finished', at: AT, head: A },
    { step: 'repair-push', at: AT, repair: 'p1', branch: 'feature', oldSha: A, newSha: A, commits: [] },
    { step: 'checks-started', at: AT, head: A },
    { step: 'checks-recovered', at: AT, head: A },
  ];

  it('a head whose checks started and never finished or recovered was cut short', () => {
    expect([...interruptedCheckHeads(steps)]).toEqual([B]);
    expect([...interruptedCheckHeads(steps.slice(0, 3))]).toEqual([A, B]);
  });

  it('the latest push intent of a repair counts', () => {
    expect(pushIntent(steps, 'p1')?.newSha).toBe(A);
    expect(pushIntent(steps.slice(0, 3), 'p1')?.newSha).toBe(B);
    expect(pushIntent(steps, 'p2')).toBeUndefined();
  });
});

describe('recoverInterrupted on a local forge', () => {
  let f: LoopFixture;
  beforeAll(async () => {
    f = await loopFixture();
  });
  afterAll(async () => {
    await f.cleanup();
  });

  async function change(branch: string) {
    const id = await f.openChange(branch, { [`${branch}.txt`]: `${branch}\n` });
    const snapshot = await f.forge.snapshot(id);
    return { id, head: snapshot.head.sha, base: snapshot.base.sha };
  }

  it('closes a repair whose push landed as pushed, with the commits of its intent', async () => {
    const { env } = f.automerge;
    const { id, head, base } = await change('landed');
    await env.store.record(id, { type: 'repair-dispatched', id: 'rpr_1', head: base, repair: 'rebase', automatic: true, reason: 'behind', at: AT });
    await env.store.step(id, 'repair-push', { repair: 'rpr_1', branch: 'landed', oldSha: base, newSha: head, commits: [head] });
    const recovery = await recoverInterrupted(env, id, { checks: false });
    expect(recovery).toMatchObject({ reviews: 0, repairs: 1 });
    const { state, steps } = await env.store.load(id);
    expect(state.repairs).toMatchObject([{ id: 'rpr_1', status: 'pushed', newHead: head, commits: [head] }]);
    expect(steps.filter((step) => step.step === 'repair-recovered')).toMatchObject([{ repair: 'rpr_1', pushed: true, headNow: head }]);
  });

  it('closes a repair whose push never landed as failed, and a review without a verdict comment as finished without one', async () => {
    const { env } = f.automerge;
    const { id, head } = await change('lost');
    await env.store.record(id, { type: 'review-dispatched', id: 'rvw_1', head, at: AT });
    await env.store.record(id, { type: 'repair-dispatched', id: 'rpr_2', head, repair: 'fix-checks', automatic: true, reason: 'lint', at: AT });
    await env.store.step(id, 'repair-push', { repair: 'rpr_2', branch: 'lost', oldSha: head, newSha: 'e'.repeat(40), commits: ['e'.repeat(40)] });
    await env.store.step(id, 'checks-started', { head });
    const recovery = await recoverInterrupted(env, id, { checks: true });
    expect(recovery).toMatchObject({ reviews: 1, repairs: 1 });
    expect([...recovery.rerunChecks]).toEqual([head]);
    const { state, typedSteps } = await env.store.load(id);
    expect(state.reviews).toMatchObject([{ id: 'rvw_1', status: 'failed', verdict: null }]);
    expect(state.repairs).toMatchObject([{ id: 'rpr_2', status: 'failed', newHead: null, commits: [] }]);
    expect(typedSteps.at(-1)).toMatchObject({ step: 'checks-recovered', head });
  });

  it('a malformed push intent is a typed error naming the step and the field, and nothing is recorded', async () => {
    const { env } = f.automerge;
    const { id, head, base } = await change('malformed');
    await env.store.record(id, { type: 'repair-dispatched', id: 'rpr_3', head: base, repair: 'rebase', automatic: true, reason: 'behind', at: AT });
    const stream = automergeStream(id);
    const revision = await env.store.events.revision(stream);
    await env.store.events.append(stream, revision, [
      {
        id: 'intent-bad',
        type: 'step',
        data: { step: 'repair-push', at: AT, repair: 'rpr_3', branch: 'malformed', oldSha: base, newSha: head, commits: ['HEAD'] },
      },
    ]);
    let error: unknown;
    try {
      await recoverInterrupted(env, id, { checks: false });
    } catch (caught) {
      error = caught;
    }
    expect(isProofgateError(error, 'INVALID_STORED_VALUE')).toBe(true);
    expect(error instanceof Error ? error.message : '').toMatch(
      new RegExp(`step event intent-bad \\(change ${id}, revision ${revision + 1}\\) is malformed at commits\\.0`),
    );
    expect(await env.store.events.revision(stream)).toBe(revision + 1);
  });
});
