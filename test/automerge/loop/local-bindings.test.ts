/**
 * A verdict binds everything it was judged on, and changes to what proofgate
 * trusts need a maintainer: the attacks performed for real on the local forge
 * (real git, the real review panel and its run store, the real loop).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { collectVerdicts } from '../../../src/automerge/index.js';
import { finished, loopFixture, MAINTAINER, repoConfig, type LoopFixture } from './local-support.js';

let fixture: LoopFixture | null = null;
afterEach(async () => {
  await fixture?.cleanup();
  fixture = null;
});

const FORBID_VENDOR = ['  rules:', '    forbiddenPaths:', '      - "vendor/**"'].join('\n');
const FORBID_MORE = `${FORBID_VENDOR}\n      - "third_party/**"`;

async function verdictsOf(f: LoopFixture, id: string) {
  const snapshot = await f.forge.snapshot(id);
  return collectVerdicts(snapshot.comments, { selfLogin: f.forge.selfLogin, secret: f.automerge.env.secret, changeId: id }).verdicts;
}

async function decisions(f: LoopFixture, id: string): Promise<{ kind: unknown; code: unknown }[]> {
  const { steps } = await f.automerge.env.store.load(id);
  return steps.filter((step) => step.step === 'decision').map((step) => ({ kind: step.kind, code: step.code }));
}

describe('a verdict binds the config, contract and diff it was judged on', () => {
  it('a pass under lenient rules is not reused after maintainers forbid a path on main: the re-review refutes and main stays', async () => {
    const f = (fixture = await loopFixture());
    const id = await f.openChange('vendor-drop', { 'vendor/notes.txt': 'third-party notes\n' });
    const head = f.repo.sha('vendor-drop');
    // Reviewed under the lenient rules: CONFIRMED (automerge is off, so nothing merges yet).
    await finished((await f.command(id, '/proofgate review')).dispatch?.done);
    const before = await verdictsOf(f, id);
    expect(before.map((v) => [v.fields.head, v.fields.verdict])).toEqual([[head, 'CONFIRMED']]);
    expect(before[0]?.fields.run).not.toBeNull();

    // The maintainers forbid vendor/ on main.
    const forbidden = f.repo.commit('main', { '.proofgate.yml': repoConfig(FORBID_VENDOR) }, 'forbid vendor/');
    const outcome = await finished((await f.command(id, '/proofgate automerge')).dispatch?.done);

    expect(outcome.kind).toBe('blocked');
    expect(outcome.verdict).toBe('REFUTED');
    expect(f.repo.sha('main')).toBe(forbidden);
    expect((await f.forge.snapshot(id)).state).toBe('open');
    // The old pass was not taken: the loop asked for a re-review and said why.
    expect(await decisions(f, id)).toContainEqual({ kind: 'review', code: 'bindings-changed' });
    // One review comment, edited in place: it now holds the REFUTED verdict, bound to the new config and the same diff.
    const after = await verdictsOf(f, id);
    expect(after.map((v) => v.fields.verdict)).toEqual(['REFUTED']);
    expect(after[0]?.commentId).toBe(before[0]?.commentId);
    expect(after[0]?.fields.config).not.toBe(before[0]?.fields.config);
    expect(after[0]?.fields.diff).toBe(before[0]?.fields.diff);
  });

  it('the base moving on with an unrelated commit leaves the verdict bound: it merges without a second review', async () => {
    const f = (fixture = await loopFixture());
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const head = f.repo.sha('feature');
    await finished((await f.command(id, '/proofgate review')).dispatch?.done);
    const unrelated = f.repo.commit('main', { 'NOTES.md': 'unrelated\n' }, 'unrelated work on main');

    const outcome = await finished((await f.command(id, '/proofgate automerge')).dispatch?.done);
    expect(outcome.kind).toBe('merged');
    expect(outcome.head).toBe(head);
    const { state } = await f.automerge.env.store.load(id);
    expect(state.reviews.map((r) => r.head)).toEqual([head]);
    expect(f.repo.git(['rev-parse', 'main^'])).toBe(unrelated);
    expect(f.repo.git(['show', 'main:feature.txt'])).toBe('a feature');
  });
});

describe('a change to what proofgate trusts needs a maintainer for its current head', () => {
  it("waits for /proofgate approve; a stranger's approve does nothing; an approval of an older head is void; the maintainer's approval merges", async () => {
    const f = (fixture = await loopFixture({ automerge: { waits: { transientWaitMs: 0, shepherdWaitMs: 0, transientPollMs: 200, shepherdPollMs: 200 } } }));
    const base = f.repo.sha('main');
    const id = await f.openChange('loosen', { '.proofgate.yml': repoConfig(FORBID_VENDOR) }, 'tighten the rules');
    const first = f.repo.sha('loosen');

    // A maintainer approves the first head; then the author pushes: that approval is void.
    const early = await f.command(id, '/proofgate approve');
    expect(early.ran.map((c) => c.kind)).toEqual(['approve']);
    expect((await f.automerge.env.store.load(id)).steps.filter((s) => s.step === 'approval-recorded').map((s) => s.head)).toEqual([first]);
    const second = f.repo.commit('loosen', { '.proofgate.yml': repoConfig(FORBID_MORE) }, 'tighten them more');
    expect(second).not.toBe(first);

    const waiting = await finished((await f.command(id, '/proofgate automerge')).dispatch?.done);
    expect(waiting.kind).toBe('waiting');
    expect(waiting.verdict).toBe('CONFIRMED');
    expect(waiting.code).toBe('approval-required');
    expect(waiting.reason).toContain('.proofgate.yml');
    expect(f.repo.sha('main')).toBe(base);

    // Someone without write permission approves: refused, nothing recorded, still waiting.
    const stranger = await f.command(id, '/proofgate approve', 'Mallory');
    expect(stranger.ran).toEqual([]);
    expect(stranger.refused).toHaveLength(1);
    expect(stranger.dispatch).toBeNull();
    await f.automerge.jobs.close();
    const still = await finished((await f.command(id, '/proofgate status')).dispatch?.done);
    expect(still.kind).toBe('waiting');
    expect(still.code).toBe('approval-required');
    expect(f.repo.sha('main')).toBe(base);

    // An approval naming another sha than the head is refused with the reason.
    const wrong = await f.command(id, `/proofgate approve ${first}`);
    expect(wrong.dispatch).toBeNull();
    expect(
      (await f.forge.snapshot(id)).comments.some(
        (c) => c.author === f.forge.selfLogin && c.body.includes(`names ${first}, but the change's head is ${second}`),
      ),
    ).toBe(true);

    // The maintainer approves the current head: it merges.
    const approved = await f.command(id, `/proofgate approve ${second}`);
    const merged = await finished(approved.dispatch?.done);
    expect(merged.kind).toBe('merged');
    expect(merged.head).toBe(second);
    expect(merged.reason).toMatch(new RegExp(`trust change approved by ${MAINTAINER}`));
    expect(f.repo.git(['show', 'main:.proofgate.yml'])).toBe(repoConfig(FORBID_MORE).trim());
    const { state } = await f.automerge.env.store.load(id);
    expect(state.reviews.map((r) => r.head)).toEqual([second]);
  });
});
