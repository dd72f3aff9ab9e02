/**
 * Required approvals on the local forge: a base whose trusted config says
 * `requiredApprovals: 1` makes a reviewed, green change wait
 * (`review-required`) for a maintainer's `/proofgate approve` of its current
 * head; the review window expiring ends the loop blocked; an approval of an
 * older head and the author's own approval do not count.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { parseRepoConfigYaml } from '../../../src/contracts/repo-config.js';
import { fixedClock, isProofgateError, type ManualClock } from '../../../src/core/index.js';
import type { JobResult, LoopOutcome } from '../../../src/automerge/loop/index.js';
import { within, until } from '../../support/wait.js';
import { finished, loopFixture, MAINTAINER, type LoopFixture } from './local-support.js';

const AUTHOR = 'Casey Contributor';

/** The fixture's config, with the change's author a maintainer too (so the author's approve is recorded) and one approval required. */
const CONFIG = [
  'maintainers:',
  `  - login: ${MAINTAINER}`,
  '    permission: admin',
  `  - login: ${AUTHOR}`,
  '    permission: write',
  'requiredApprovals: 1',
  'checks:',
  '  - name: test',
  '    run: node check.mjs',
  'review:',
  '  lanes:',
  '    - id: rules',
  '      builtin: rules',
  '    - id: tests',
  '      builtin: tests',
  '',
].join('\n');

let fixture: LoopFixture | null = null;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = null;
});

async function decisions(f: LoopFixture, id: string): Promise<{ kind: unknown; code: unknown; head: unknown }[]> {
  const { steps } = await f.automerge.env.store.load(id);
  return steps.filter((step) => step.step === 'decision').map((step) => ({ kind: step.kind, code: step.code, head: step.head }));
}

describe('requiredApprovals in the trusted config', () => {
  it('is an integer from 0 to 10; anything else is one CONFIG error naming the key', () => {
    expect(parseRepoConfigYaml('requiredApprovals: 2\n', 'main:.proofgate.yml').requiredApprovals).toBe(2);
    expect(parseRepoConfigYaml('', 'main:.proofgate.yml').requiredApprovals).toBeUndefined();
    for (const bad of ['requiredApprovals: 11\n', 'requiredApprovals: -1\n', 'requiredApprovals: 1.5\n', 'requiredApprovals: two\n']) {
      let caught: unknown;
      try {
        parseRepoConfigYaml(bad, 'main:.proofgate.yml');
      } catch (error) {
        caught = error;
      }
      expect(isProofgateError(caught, 'CONFIG')).toBe(true);
      expect((caught as Error).message).toContain('requiredApprovals');
      expect((caught as Error).message).not.toContain('\n');
    }
  });
});

/** The review window's default span: the manual clock is moved past it instead of anyone sleeping. */
const REVIEW_WINDOW_MS = 600_000;

/**
 * A loop fixture on a manual clock with the default wait windows, and the
 * number of times a loop began waiting for a required approval (the loop
 * shows that decision, then sets its wait's timer on the clock).
 */
async function manualClockFixture(): Promise<{ f: LoopFixture; expireReviewWindow: (done: Promise<JobResult> | undefined) => Promise<LoopOutcome> }> {
  const clock: ManualClock = fixedClock(new Date().toISOString());
  let approvalWaits = 0;
  const watchers: { readonly count: number; readonly resolve: () => void }[] = [];
  const f = await loopFixture({
    config: CONFIG,
    automerge: {
      clock,
      waits: {},
      onProgress: (line) => {
        if (!(line.text.startsWith('wait: ') && line.text.includes('needs the approvals'))) return;
        approvalWaits += 1;
        for (const watcher of watchers.splice(0)) if (approvalWaits >= watcher.count) watcher.resolve();
      },
    },
  });
  /** The next loop waits in its review window: move the clock past it, and return how the loop ended. */
  const expireReviewWindow = async (done: Promise<JobResult> | undefined): Promise<LoopOutcome> => {
    const count = approvalWaits + 1;
    await within(
      new Promise<void>((resolve) => (approvalWaits >= count ? resolve() : watchers.push({ count, resolve }))),
      'the loop waits for a required approval',
    );
    await within(clock.whenPending(), "the loop's wait sets its timer on the clock");
    clock.advance(REVIEW_WINDOW_MS);
    return finished(done);
  };
  return { f, expireReviewWindow };
}

describe('a base that requires one approval', () => {
  it("blocks when the review window expires; the author's and an older head's approvals do not count; a maintainer's approval of the current head merges", async () => {
    const { f, expireReviewWindow } = await manualClockFixture();
    fixture = f;
    const base = f.repo.sha('main');
    const id = await f.openChange('feature', { 'feature.txt': 'one\n' }, 'add a feature');
    const first = f.repo.sha('feature');
    expect((await f.forge.snapshot(id)).reviewDecision).toBe('REVIEW_REQUIRED');

    // Reviewed and green, it waits for the approval; the clock passes the window's 600000 ms: blocked.
    const blocked = await expireReviewWindow((await f.command(id, '/proofgate automerge')).dispatch?.done);
    expect(blocked.kind).toBe('blocked');
    expect(blocked.code).toBe('review-required');
    expect(blocked.verdict).toBe('CONFIRMED');
    expect(blocked.reason).toContain(`no required approval within the ${REVIEW_WINDOW_MS} ms review window`);
    expect(await decisions(f, id)).toContainEqual({ kind: 'wait', code: 'review-required', head: first });
    expect((await f.automerge.env.store.load(id)).steps.some((step) => step.step === 'wait-expired' && step.window === 'review')).toBe(true);
    expect(f.repo.sha('main')).toBe(base);

    // The author approves their own change: recorded, not counted.
    const own = await f.command(id, '/proofgate approve', AUTHOR);
    expect(own.ran.map((c) => c.kind)).toEqual(['approve']);
    const ownOutcome = await expireReviewWindow(own.dispatch?.done);
    expect(ownOutcome.kind).toBe('blocked');
    expect(ownOutcome.code).toBe('review-required');
    expect((await f.forge.snapshot(id)).reviewDecision).toBe('REVIEW_REQUIRED');
    expect(
      (await f.forge.snapshot(id)).comments.some((c) => c.author === f.forge.selfLogin && c.body.includes('does not count toward the 1 required approval')),
    ).toBe(true);
    expect(f.repo.sha('main')).toBe(base);

    // Stopped, a maintainer approves this head: the forge says APPROVED, for this head only.
    await f.command(id, '/proofgate stop');
    const early = await f.command(id, '/proofgate approve');
    expect(early.ran.map((c) => c.kind)).toEqual(['approve']);
    expect(early.dispatch).toBeNull();
    expect((await f.forge.snapshot(id)).reviewDecision).toBe('APPROVED');

    // A new head voids it: automerge waits for an approval again.
    const second = f.repo.commit('feature', { 'feature.txt': 'two\n' }, 'change the feature');
    expect(second).not.toBe(first);
    expect((await f.forge.snapshot(id)).reviewDecision).toBe('REVIEW_REQUIRED');
    const again = await expireReviewWindow((await f.command(id, '/proofgate automerge')).dispatch?.done);
    expect(again.kind).toBe('blocked');
    expect(again.code).toBe('review-required');
    expect(again.head).toBe(second);
    expect(await decisions(f, id)).toContainEqual({ kind: 'wait', code: 'review-required', head: second });
    expect(f.repo.sha('main')).toBe(base);

    // The maintainer approves the current head: it merges.
    const approved = await f.command(id, `/proofgate approve ${second}`);
    const merged = await finished(approved.dispatch?.done);
    expect(merged.kind).toBe('merged');
    expect(merged.head).toBe(second);
    expect(merged.reason).toContain('required approvals given');
    expect(f.repo.git(['show', 'main:feature.txt'])).toBe('two');
  });

  it("waits with review-required while the window is open, and a maintainer's approval wakes it to merge", async () => {
    const f = (fixture = await loopFixture({ config: CONFIG }));
    const id = await f.openChange('feature', { 'feature.txt': 'one\n' }, 'add a feature');
    const head = f.repo.sha('feature');
    const started = await f.command(id, '/proofgate automerge');
    await until(async () => (await decisions(f, id)).some((d) => d.code === 'review-required'), 'the loop waits for a required approval');
    expect(f.automerge.jobs.active(id)).toBe(true);
    expect((await f.automerge.env.store.load(id)).steps.some((step) => step.step === 'wait-expired')).toBe(false);

    const approved = await f.command(id, '/proofgate approve');
    expect(approved.ran.map((c) => c.kind)).toEqual(['approve']);
    const merged = await within(finished(started.dispatch?.done), 'the waiting job ends');
    expect(merged.kind).toBe('merged');
    expect(merged.head).toBe(head);
    expect(f.repo.git(['show', 'main:feature.txt'])).toBe('one');
  });
});
