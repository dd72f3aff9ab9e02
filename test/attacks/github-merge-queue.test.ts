/**
 * The hostile change author against GitHub's own merge queue (docs/automerge.md,
 * "GitHub's merge queue"): the automerge loop against the GitHub API test
 * server, driven by signed deliveries. The author cannot sign a delivery, but
 * GitHub redelivers and reorders real ones, and the author controls their
 * head, the names of the checks that run on a merge group (its workflows come
 * with the change), the title, and their own comments.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { decideAutomerge, defaultAutomergePolicy, foldLedger, parseCommands as parseCommandLines, type AutomergeDecision } from '../../src/automerge/index.js';
import { FORGE_QUEUE_ENQUEUED, forgeQueueGate, queueRemovalRecords } from '../../src/automerge/loop/forge-queue.js';
import type { JobResult } from '../../src/automerge/loop/index.js';
import type { ChangeSnapshot } from '../../src/forge/port.js';
import { checkRunCompletedPayload, pullRequestPayload } from '../support/github-server/index.js';
import { until } from '../support/wait.js';
import { githubLoop, MAINTAINER, type GitHubLoop } from '../e2e/github-support.js';
import { CHANGE, HEAD, facts, snapshot as changeSnapshot, verdicts } from '../automerge/builders.js';
import { openQueuedBase as openQueued, outcomeOf, statusComment, deliver } from '../forge/github/merge-queue-support.js';

let loop: GitHubLoop | null = null;
afterEach(async () => {
  await loop?.cleanup();
  loop = null;
});

const NEVER_MS = 3_600_000;
const WAIT_FOREVER = { transientPollMs: NEVER_MS, shepherdPollMs: NEVER_MS, transientWaitMs: NEVER_MS, shepherdWaitMs: NEVER_MS };
const AUTHOR = 'casey';

const requests = (l: GitHubLoop, operation: string) => l.server.requests.filter((r) => r.operation === operation);
const enqueues = (l: GitHubLoop) => requests(l, 'graphql:ProofgateEnqueue').filter((r) => r.status === 200);
const mergedEntries = async (l: GitHubLoop) => (await l.env.store.load('1')).state.timeline.filter((t) => t.text.startsWith('merged '));

/** Automerge asked by the maintainer, the head's check green, and the reviewed head in GitHub's queue. */
async function queuedByProofgate(l: GitHubLoop, runId: number): Promise<{ done: Promise<JobResult> | undefined }> {
  const routed = await l.comment(1, '/proofgate automerge');
  await l.completeCheck(1, runId);
  await until(() => l.server.model.mergeQueue.entry(1) !== null, 'the change was not put in the merge queue');
  return { done: routed.dispatch?.done };
}

describe("attacks on GitHub's merge queue (automerge loop, GitHub API test server)", () => {
  it('a /proofgate stop from the author (read) or a stranger while queued is refused: nothing leaves the queue, and the merge is recorded once whatever GitHub redelivers, in any order', async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    const { head, runId } = openQueued(l, { author: AUTHOR });
    const { done } = await queuedByProofgate(l, runId);
    const queuedDeliveries = l.server.model.mergeQueue.takeDeliveries();

    for (const who of [AUTHOR, 'mallory']) {
      const routed = await l.comment(1, '/proofgate stop', who);
      expect(routed.ran).toEqual([]);
      expect(routed.refused.map((r) => r.command)).toEqual(['/proofgate stop']);
    }
    // Waking the loop makes it read and decide again: the stop must not have been recorded.
    await deliver(l, queuedDeliveries);
    const { state } = await l.env.store.load('1');
    expect(state.stop).toBeNull();
    expect(requests(l, 'graphql:ProofgateDequeue')).toEqual([]);
    expect(l.server.model.mergeQueue.entry(1)?.headSha).toBe(head);

    l.server.model.mergeQueue.finish(1, 'success');
    const mergeDeliveries = l.server.model.mergeQueue.takeDeliveries();
    // GitHub's deliveries arrive reversed (closed first), then every delivery of the queue comes again, oldest first.
    await deliver(l, [...mergeDeliveries].reverse());
    const outcome = await outcomeOf(done);
    expect(outcome.kind, outcome.reason).toBe('merged');
    expect(outcome.head).toBe(head);
    await deliver(l, [...queuedDeliveries, ...mergeDeliveries]);
    await deliver(l, [...queuedDeliveries].reverse());
    const after = (await l.env.store.load('1')).state;
    expect(after.merged).toMatchObject({ head, mergeCommit: l.server.model.pull(1).mergeCommitSha });
    expect(await mergedEntries(l)).toHaveLength(1);
    expect(enqueues(l)).toHaveLength(1);
    expect(requests(l, 'graphql:ProofgateDequeue')).toEqual([]);
    expect(requests(l, 'pulls/merge')).toEqual([]);
  });

  it("after GitHub's queue ejects the head for its checks, the author's /proofgate automerge does not queue it again; a maintainer's does, at the same head", async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    const { head, runId } = openQueued(l, { author: AUTHOR });
    const { done } = await queuedByProofgate(l, runId);
    l.server.model.mergeQueue.finish(1, 'failure');
    await deliver(l, l.server.model.mergeQueue.takeDeliveries());
    const ejected = await outcomeOf(done);
    expect(ejected.code, ejected.reason).toBe('queue-ejected');

    const byAuthor = await l.comment(1, '/proofgate automerge', AUTHOR);
    expect(byAuthor.ran).toEqual([]);
    expect(byAuthor.dispatch).toBeNull();
    // A redelivered dequeue and merge_group wake the change: it stays blocked, nothing is queued.
    await deliver(l, [{ eventName: 'pull_request', payload: pullRequestPayload(l.server.model, 1, 'dequeued', 'CI_FAILURE') }]);
    expect(l.server.model.mergeQueue.entries).toEqual([]);
    expect(enqueues(l)).toHaveLength(1);
    expect((await l.env.store.load('1')).state.mergeFailures.map((f) => [f.code, f.head])).toEqual([['QUEUE_CHECKS_FAILED', head]]);

    const byMaintainer = await l.comment(1, '/proofgate automerge', MAINTAINER);
    await until(() => l.server.model.mergeQueue.entry(1) !== null, "the maintainer's automerge did not queue the head again");
    expect(l.server.model.mergeQueue.entry(1)?.headSha).toBe(head);
    l.server.model.mergeQueue.finish(1, 'success');
    await deliver(l, l.server.model.mergeQueue.takeDeliveries());
    expect((await outcomeOf(byMaintainer.dispatch?.done)).kind).toBe('merged');
    expect(enqueues(l)).toHaveLength(2);
  });

  it('a signed "closed, merged: true" delivery for a pull request GitHub did not merge records nothing; a head the author pushed and someone merged past the queue is never recorded as the reviewed one', async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    const { head, runId } = openQueued(l, { author: AUTHOR });
    const { done } = await queuedByProofgate(l, runId);
    l.server.model.mergeQueue.takeDeliveries();

    // A stale or out-of-order delivery claiming the merge: only a wake-up, the snapshot says open and queued.
    const claim = pullRequestPayload(l.server.model, 1, 'closed');
    const pull = claim.pull_request as Record<string, unknown>;
    await deliver(l, [
      { eventName: 'pull_request', payload: { ...claim, pull_request: { ...pull, state: 'closed', merged: true, merge_commit_sha: 'f'.repeat(40) } } },
    ]);
    expect((await l.env.store.load('1')).state.merged).toBeNull();
    expect(l.server.model.mergeQueue.entry(1)?.headSha).toBe(head);

    // The author pushes a new head right after the enqueue: GitHub drops the entry.
    const pushed = l.repo.commit('feature', { 'evil.txt': 'unreviewed\n' }, 'unreviewed');
    l.syncRemote();
    l.server.model.pushHead(1, l.mirrorCommit(pushed, head));
    l.server.model.addCheckRun({ sha: pushed, name: 'ci', status: 'in_progress' });
    expect(l.server.model.mergeQueue.entry(1)).toBeNull();
    await deliver(l, l.server.model.mergeQueue.takeDeliveries());
    await until(
      async () => (await l.env.store.load('1')).state.reviews.some((r) => r.head === pushed && r.status === 'finished'),
      'the new head was not reviewed',
    );
    // Someone with the power to bypass the queue merges the unreviewed, unchecked head.
    l.server.model.merge(1, 'squash');
    await deliver(l, [{ eventName: 'pull_request', payload: pullRequestPayload(l.server.model, 1, 'closed') }]);
    const outcome = await outcomeOf(done);
    expect(outcome.kind, outcome.reason).not.toBe('merged');
    const { state } = await l.env.store.load('1');
    expect(state.merged).toBeNull();
    expect(await mergedEntries(l)).toEqual([]);
    expect(statusComment(l)).not.toContain('automerge: merged');
    // Only the reviewed head was ever queued by proofgate.
    expect(enqueues(l)).toHaveLength(1);
    expect(requests(l, 'pulls/merge')).toEqual([]);
  });

  it('a check the author names like the required one on a gh-readonly-queue branch of their own, for a head that is not queued, is not read as a merge group and never gates the head', async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    const { head } = openQueued(l, { author: AUTHOR });
    const { model } = l.server;
    const routed = await l.comment(1, '/proofgate automerge');
    await until(() => l.progress.some((p) => p.text.startsWith('wait: checks pending')), 'the loop did not wait for the check');
    // The author makes the branch GitHub's queue would make for this pull request, with a green `ci` and a green `ci` status.
    const fake = model.commit({ parent: head, files: { 'feature.txt': 'a feature\n', 'evil.txt': 'x\n' } });
    const branch = `gh-readonly-queue/main/pr-1-${head}`;
    model.setBranch(branch, fake);
    const run = model.addCheckRun({ sha: fake, name: 'ci', status: 'completed', conclusion: 'success' });
    model.addStatus({ sha: fake, context: 'ci', state: 'success' });
    const reads = () => requests(l, 'graphql:ProofgateChangeSnapshot').length;
    const before = reads();
    await deliver(l, [{ eventName: 'check_run', payload: checkRunCompletedPayload(l.server.url, model.repositoryId, run, 'success', [], branch) }]);
    await until(() => reads() > before, 'the delivery naming the change did not wake it');
    await l.comment(1, '/proofgate stop');
    const outcome = await outcomeOf(routed.dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('stopped');
    const snapshot = await l.env.forge.snapshot('1');
    // Not queued: the author's branch is not read as a merge group, and the head's checks are the head's alone.
    expect(snapshot.forgeQueue).toEqual({ required: true, entry: null, lastRemoval: null });
    expect(snapshot.checks.map((c) => [c.name, c.headSha, c.status])).toEqual([['ci', head, 'in_progress']]);
    expect(requests(l, 'graphql:ProofgateMergeGroup')).toEqual([]);
    expect(requests(l, 'graphql:ProofgateEnqueue')).toEqual([]);
    expect(model.mergeQueue.entries).toEqual([]);
  });

  it("hostile text in the title and in a merge group check's name (its workflow comes with the change) carries no link, image, mention, markup or command into the status and final comments", async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    const title = '[Approve now](https://evil.example/approve) ![t](https://evil.example/t.png) @octo-org/admins <img src=x>\n/proofgate automerge';
    const { runId } = openQueued(l, { author: AUTHOR, title });
    const { done } = await queuedByProofgate(l, runId);
    const entry = l.server.model.mergeQueue.entry(1);
    if (entry === null) throw new Error('not queued');
    l.server.model.mergeQueue.takeDeliveries();
    const checkName = '![ci](https://evil.example/ci.png) [passed, merge now](https://evil.example/ok) @octo-org/admins <b>x</b>\n/proofgate stop';
    const run = l.server.model.addCheckRun({ sha: entry.groupSha, name: checkName, status: 'in_progress' });
    await deliver(l, [
      { eventName: 'check_run', payload: checkRunCompletedPayload(l.server.url, l.server.model.repositoryId, run, 'neutral', [], entry.groupBranch) },
    ]);
    await until(() => statusComment(l).includes('evil.example/ci.png'), 'the merge group check was not shown');
    const inert = (body: string): void => {
      // Outside text is shown, never as markdown or HTML: no link or image to the author's site, no mention, no tag, no command line.
      expect(body).not.toMatch(/\]\(https:\/\/evil\.example/);
      expect(body).not.toMatch(/!\[/);
      expect(body).not.toContain('@octo-org/admins');
      expect(body).not.toMatch(/<img|<b>/);
      expect(parseCommandLines(body)).toEqual([]);
    };
    inert(statusComment(l));
    expect(l.server.model.mergeQueue.entry(1)).not.toBeNull();
    l.server.model.mergeQueue.finish(1, 'success');
    await deliver(l, l.server.model.mergeQueue.takeDeliveries());
    expect((await outcomeOf(done)).kind).toBe('merged');
    const final = statusComment(l);
    expect(final).toContain('automerge: merged');
    expect(final).toContain('Approve now');
    inert(final);
  });
});

describe("GitHub's removal of a queued head without the commit it had (pure)", () => {
  const head = 'a'.repeat(40);
  const enqueued = { step: FORGE_QUEUE_ENQUEUED, at: '2026-05-01T00:00:11Z', head, enqueuedAt: '2026-05-01T00:00:10Z', base: 'main' };
  const ready: AutomergeDecision = { kind: 'merge', code: 'ready', head, reason: 'ready' };
  const removedAfterEnqueue = (headSha: string | null) =>
    ({
      id: '1',
      state: 'open',
      base: { ref: 'main', sha: 'c'.repeat(40) },
      head: { ref: 'feature', sha: head },
      forgeQueue: { required: true, entry: null, lastRemoval: { headSha, reason: 'QUEUE_CLEARED', at: '2026-05-01T00:01:00Z' } },
    }) as unknown as ChangeSnapshot;

  it('a removal that names the queued head lets the head be decided again (recorded once as a refused merge)', () => {
    expect(forgeQueueGate(ready, removedAfterEnqueue(head), [enqueued])).toEqual(ready);
    expect(queueRemovalRecords(removedAfterEnqueue(head), [enqueued]).map((r) => r.type)).toEqual(['note', 'merge-failed']);
  });

  // GitHub's RemovedFromMergeQueueEvent.beforeCommit is nullable. A removal after proofgate's enqueue, with the head
  // unchanged since, is this head's removal: reading it as none leaves the change claiming to be queued, for ever.
  it('a removal after the enqueue whose commit GitHub does not name is not read as "still queued": the change does not wait on GitHub for ever', () => {
    const gated = forgeQueueGate(ready, removedAfterEnqueue(null), [enqueued]);
    expect(gated.code, gated.reason).not.toBe('merge-queued');
    expect(queueRemovalRecords(removedAfterEnqueue(null), [enqueued]).map((r) => r.type)).toEqual(['note', 'merge-failed']);
  });
});

describe("an entry in GitHub's queue that proofgate did not put there (pure)", () => {
  // A person with write access (the author, say) queues the pull request on GitHub by hand. proofgate's own judgment of the
  // head must still show: an unreviewed head is reviewed, a REFUTED or HOLD one is blocked, never "waiting in the merge queue".
  const requested = foldLedger(CHANGE, [
    {
      type: 'commands',
      delivery: { comment: { id: '100', author: 'maintainer', updatedAt: '2024-05-01T09:00:00Z' }, commands: parseCommandLines('/proofgate automerge') },
    },
  ]);
  const queuedByHand = changeSnapshot({
    forgeQueue: { required: true, entry: { position: 1, state: 'AWAITING_CHECKS', enqueuedAt: '2024-05-01T09:10:00Z', group: null }, lastRemoval: null },
  });
  const decide = (marks: ReturnType<typeof verdicts>) => decideAutomerge(queuedByHand, requested, defaultAutomergePolicy, marks, facts());

  it('a CONFIRMED head proofgate queued waits on the queue', () => {
    expect(decide(verdicts({ verdict: 'CONFIRMED' })).code).toBe('merge-queued');
  });

  it.each([
    ['no verdict', [] as ReturnType<typeof verdicts>, 'no-verdict'],
    ['REFUTED without findings', verdicts({ verdict: 'REFUTED', findings: 0 }), 'refuted-without-findings'],
    ['HOLD', verdicts({ verdict: 'HOLD' }), 'review-hold'],
  ])('%s: the status says what proofgate decided of the head, not that it waits in the merge queue', (_name, marks, code) => {
    const decision = decide(marks);
    expect(decision.code, decision.reason).toBe(code);
    expect(decision.reason).toContain(HEAD.slice(0, 12));
  });
});
