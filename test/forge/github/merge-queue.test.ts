/**
 * GitHub's own merge queue: where a ruleset on the base has a MERGE_QUEUE
 * rule, proofgate enqueues the reviewed head (the GraphQL mutation
 * `enqueuePullRequest` pinned with `expectedHeadOid`) and never calls the
 * REST merge endpoint; the change waits on GitHub's queue, woken by its
 * webhooks, and ends when GitHub says: merged, or removed with a reason.
 * The forge against the GitHub API test server first, then the automerge
 * loop driven by the signed deliveries the server's queue makes.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { isProofgateError } from '../../../src/core/index.js';
import { mapWebhookPayload, type GitHubForgeEvent } from '../../../src/forge/github/webhook-events.js';
import { jobsForDelivery, resumeJob } from '../../../src/service/github/work.js';
import { QUEUE_CHECKS_FAILED, QUEUE_REMOVED, queueRemovalCode } from '../../../src/automerge/decide.js';
import { FORGE_QUEUE_DEQUEUED, FORGE_QUEUE_ENQUEUED, mayBeInForgeQueue, queueRemovalRecords } from '../../../src/automerge/loop/forge-queue.js';
import type { ChangeSnapshot } from '../../../src/forge/port.js';
import { checkRunCompletedPayload, fixture, repositoryPayload, type ModelDelivery } from '../../support/github-server/index.js';
import { until } from '../../support/wait.js';
import { githubLoop, type GitHubLoop } from '../../e2e/github-support.js';
import { openQueuedBase, outcomeOf, statusComment, caught, deliver } from './merge-queue-support.js';
import { startHarness, type Harness } from './harness.js';
import { BOT, startServiceHarness, type ServiceHarness } from '../../service/github-service-support.js';

let harness: Harness | null = null;
let loop: GitHubLoop | null = null;
afterEach(async () => {
  await harness?.close();
  harness = null;
  await loop?.cleanup();
  loop = null;
});

const graphqlCalls = (h: { server: Harness['server'] }, name: string) => h.server.requests.filter((r) => r.operation === `graphql:${name}`);

describe("the GitHub forge and GitHub's merge queue (test server)", () => {
  it('reads the MERGE_QUEUE rule, enqueues pinned to the head, and the REST merge endpoint refuses such a base', async () => {
    const h = (harness = await startHarness());
    const { model } = h.server;
    const plain = model.openPullRequest({ author: 'casey' });
    expect((await h.forge.snapshot(String(plain.number))).forgeQueue).toBeUndefined();

    model.addRuleset('main', { name: 'queue', mergeQueue: true, requiredChecks: ['ci'] });
    const pr = model.openPullRequest({ author: 'casey' });
    const head = model.headSha(pr.number);
    const before = await h.forge.snapshot(String(pr.number));
    expect(before.forgeQueue).toEqual({ required: true, entry: null, lastRemoval: null });
    // Rulesets add up: the queue's ruleset still requires its checks.
    expect(before.requiredChecks).toEqual(['ci']);

    const direct = await caught(h.forge.merge(String(pr.number), { expectedHeadSha: head, title: 't', message: 'm' }));
    expect(isProofgateError(direct, 'NOT_MERGEABLE')).toBe(true);
    expect((direct as Error).message).toContain('merge queue');
    expect(model.pull(pr.number).merged).toBe(false);

    const queued = await h.forge.enqueue?.(String(pr.number), { expectedHeadSha: head });
    expect(queued?.enqueuedAt).toBe(model.mergeQueue.entry(pr.number)?.enqueuedAt);
    const calls = graphqlCalls(h, 'ProofgateEnqueue');
    expect(calls.map((c) => c.status)).toEqual([200]);
    const after = await h.forge.snapshot(String(pr.number));
    expect(after.forgeQueue?.entry).toMatchObject({ position: 1, state: 'AWAITING_CHECKS' });
    expect(after.checks.map((c) => c.headSha).every((sha) => sha === head)).toBe(true);

    // Queued again at the same head: the same entry, nothing twice.
    await h.forge.enqueue?.(String(pr.number), { expectedHeadSha: head });
    expect(model.mergeQueue.entries).toHaveLength(1);
  });

  it('a stale expected head is refused (HEAD_MOVED), nothing is queued and nothing merges', async () => {
    const h = (harness = await startHarness());
    const { model } = h.server;
    model.addRuleset('main', { mergeQueue: true });
    const pr = model.openPullRequest({ author: 'casey' });
    const reviewed = model.headSha(pr.number);
    model.pushHead(pr.number);
    const refusal = await caught(h.forge.enqueue?.(String(pr.number), { expectedHeadSha: reviewed }) ?? Promise.resolve());
    expect(isProofgateError(refusal, 'HEAD_MOVED')).toBe(true);
    expect(model.mergeQueue.entries).toEqual([]);
    expect(model.pull(pr.number).merged).toBe(false);
    // Without a merge queue on the base GitHub refuses the enqueue too: NOT_MERGEABLE, nothing queued.
    const other = model.openPullRequest({ author: 'casey', base: 'main' });
    model.rulesets.delete('main');
    const noQueue = await caught(h.forge.enqueue?.(String(other.number), { expectedHeadSha: model.headSha(other.number) }) ?? Promise.resolve());
    expect(isProofgateError(noQueue, 'NOT_MERGEABLE')).toBe(true);
  });

  it('dequeue takes the pull request out; the snapshot then shows the removal with its reason; dequeuing again is a no-op', async () => {
    const h = (harness = await startHarness());
    const { model } = h.server;
    model.addRuleset('main', { mergeQueue: true });
    const pr = model.openPullRequest({ author: 'casey' });
    const head = model.headSha(pr.number);
    await h.forge.enqueue?.(String(pr.number), { expectedHeadSha: head });
    await h.forge.dequeue?.(String(pr.number));
    const snapshot = await h.forge.snapshot(String(pr.number));
    expect(snapshot.forgeQueue).toMatchObject({ required: true, entry: null, lastRemoval: { headSha: head, reason: 'MANUAL' } });
    await h.forge.dequeue?.(String(pr.number));
    expect(graphqlCalls(h, 'ProofgateDequeue').map((c) => c.status)).toEqual([200, 200]);
  });

  it('a passing merge group merges by the queue method (squash); a failing one removes it with CI_FAILURE; both send their webhooks', async () => {
    const h = (harness = await startHarness());
    const { model } = h.server;
    model.addRuleset('main', { mergeQueue: true });
    const a = model.openPullRequest({ author: 'casey' });
    const b = model.openPullRequest({ author: 'casey' });
    await h.forge.enqueue?.(String(a.number), { expectedHeadSha: model.headSha(a.number) });
    await h.forge.enqueue?.(String(b.number), { expectedHeadSha: model.headSha(b.number) });
    expect((await h.forge.snapshot(String(b.number))).forgeQueue?.entry?.position).toBe(2);
    model.mergeQueue.takeDeliveries();
    model.mergeQueue.finish(a.number, 'success');
    expect(model.pull(a.number)).toMatchObject({ merged: true, mergeMethod: 'squash' });
    expect(model.parentsOf(model.pull(a.number).mergeCommitSha ?? '')).toHaveLength(1);
    const merged = model.mergeQueue.takeDeliveries();
    expect(merged.map((d) => `${d.eventName}.${String(d.payload.action)}`)).toEqual(['check_run.completed', 'merge_group.destroyed', 'pull_request.closed']);
    model.mergeQueue.finish(b.number, 'failure');
    expect(model.pull(b.number).merged).toBe(false);
    expect((await h.forge.snapshot(String(b.number))).forgeQueue?.lastRemoval?.reason).toBe('CI_FAILURE');
    const failed = model.mergeQueue.takeDeliveries();
    expect(failed.map((d) => `${d.eventName}.${String(d.payload.action)}`)).toEqual(['check_run.completed', 'merge_group.destroyed', 'pull_request.dequeued']);
  });
});

describe("GitHub's merge queue webhooks as forge events", () => {
  const map = (delivery: ModelDelivery) =>
    mapWebhookPayload({ ...delivery.payload, repository: repositoryPayload('octo-org', 'demo') }, { eventName: delivery.eventName, deliveryId: 'd-1' });

  it("GitHub's own merge_group example maps to the pull request its branch names, with the group's sha", () => {
    const example = fixture('merge_group', 'checks_requested.payload.json');
    const event = mapWebhookPayload(example, { eventName: 'merge_group', deliveryId: 'd-1' });
    expect(event).toMatchObject({
      kind: 'merge-group',
      action: 'checks_requested',
      changeIds: ['104'],
      headSha: '2ffea6db159f6b6c47a24e778fb9ef40cf6b1c7d',
      baseRef: 'main',
      reason: null,
    });
    // A branch that only looks like a queue branch names nothing.
    const group = example.merge_group as Record<string, unknown>;
    const odd = mapWebhookPayload(
      { ...example, merge_group: { ...group, head_ref: 'refs/heads/gh-readonly-queue/main/pr-104-short' } },
      { eventName: 'merge_group', deliveryId: 'd-2' },
    );
    expect(odd).toMatchObject({ kind: 'merge-group', changeIds: [] });
    expect(mapWebhookPayload({ ...example, action: 'other' }, { eventName: 'merge_group', deliveryId: 'd-3' })).toMatchObject({ kind: 'ignored' });
  });

  it('enqueued / dequeued (with the reason) name the pull request and its head; merge_group names the group sha, never as a head', async () => {
    const h = (harness = await startHarness());
    const { model } = h.server;
    model.addRuleset('main', { mergeQueue: true });
    const pr = model.openPullRequest({ author: 'casey' });
    const head = model.headSha(pr.number);
    model.mergeQueue.enqueue(pr.number, head);
    const entry = model.mergeQueue.entry(pr.number);
    model.mergeQueue.finish(pr.number, 'failure');
    const events = model.mergeQueue.takeDeliveries().map(map);
    expect(events).toMatchObject([
      { kind: 'change-enqueued', changeId: String(pr.number), headSha: head, reason: null },
      { kind: 'merge-group', action: 'checks_requested', changeIds: [String(pr.number)], headSha: entry?.groupSha, baseRef: 'main' },
      // The group's check lists no pull request: it only wakes the change its branch names, with the group's sha.
      { kind: 'check-completed', changeIds: [String(pr.number)], headSha: entry?.groupSha },
      { kind: 'merge-group', action: 'destroyed', reason: 'dequeued', headSha: entry?.groupSha },
      { kind: 'change-dequeued', changeId: String(pr.number), headSha: head, reason: 'CI_FAILURE' },
    ]);
    expect(entry?.groupSha).not.toBe(head);
  });
});

const NEVER_MS = 3_600_000;
const WAIT_FOREVER = { transientPollMs: NEVER_MS, shepherdPollMs: NEVER_MS, transientWaitMs: NEVER_MS, shepherdWaitMs: NEVER_MS };

/** Variables of the enqueue mutations sent, oldest first. */
function enqueues(l: GitHubLoop): string[] {
  return l.server.requests.filter((r) => r.operation === 'graphql:ProofgateEnqueue' && r.status === 200).map(() => 'enqueue');
}

describe("the automerge loop on a base that requires GitHub's merge queue", () => {
  it('enqueues the reviewed head (never the REST merge), waits on the queue, and records the merge GitHub made, once', async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    const { head, runId } = openQueuedBase(l);
    const before = l.server.requests.length;
    const routed = await l.comment(1, '/proofgate automerge');
    await until(() => l.progress.some((p) => p.text.startsWith('wait: checks pending')), 'the loop did not wait for the check');
    await l.completeCheck(1, runId);
    await until(() => l.server.model.mergeQueue.entry(1) !== null, 'the change was not put in the merge queue');
    expect(l.server.model.mergeQueue.entry(1)?.headSha).toBe(head);
    await until(() => statusComment(l).includes("in GitHub's merge queue of main"), 'the status comment does not say the change is queued');
    expect(l.server.requests.filter((r) => r.operation === 'pulls/merge')).toEqual([]);
    // GitHub asks for the merge group's checks: they show on the change as the group's, never as the head's.
    const group = l.server.model.mergeQueue.entry(1)?.groupSha ?? '';
    l.server.model.addCheckRun({ sha: group, name: 'ci', status: 'in_progress' });
    await deliver(l, l.server.model.mergeQueue.takeDeliveries());
    await until(() => statusComment(l).includes(`merge group ${group.slice(0, 12)} checks: ci (in_progress)`), 'the merge group checks are not shown');
    const queuedSnapshot = await l.env.forge.snapshot('1');
    expect(queuedSnapshot.checks.map((c) => c.headSha)).toEqual([head]);
    expect(queuedSnapshot.forgeQueue?.entry?.group?.checks.map((c) => [c.name, c.headSha])).toEqual([['ci', group]]);

    l.server.model.mergeQueue.finish(1, 'success');
    const deliveries = l.server.model.mergeQueue.takeDeliveries();
    await deliver(l, deliveries);
    const outcome = await outcomeOf(routed.dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('merged');
    expect(outcome.head).toBe(head);
    expect(outcome.mergeCommit).toBe(l.server.model.pull(1).mergeCommitSha);
    const { state } = await l.env.store.load('1');
    expect(state.merged?.mergeCommit).toBe(l.server.model.pull(1).mergeCommitSha);
    expect(state.timeline.filter((t) => t.text.startsWith('merged '))).toHaveLength(1);
    expect(statusComment(l)).toContain('automerge: merged');
    // A redelivery of GitHub's webhooks starts nothing twice.
    await deliver(l, deliveries);
    expect((await l.env.store.load('1')).state.timeline.filter((t) => t.text.startsWith('merged '))).toHaveLength(1);
    expect(enqueues(l)).toHaveLength(1);
    expect(l.server.requests.filter((r) => r.operation === 'pulls/merge')).toEqual([]);
    // Figures for the report: the API requests of one change merged through GitHub's queue (a redelivery included).
    const used = l.server.requests.slice(before);
    const count = (operation: string) => used.filter((r) => r.operation === operation).length;
    console.info(
      `merge queue figures: ${JSON.stringify({ requests: used.length, snapshots: count('graphql:ProofgateChangeSnapshot'), mergeGroupReads: count('graphql:ProofgateMergeGroup'), enqueues: count('graphql:ProofgateEnqueue') })}`,
    );
  });

  it("dequeued because the merge group's checks failed: not merged, GitHub's reason on the status comment, not queued again", async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    const { runId } = openQueuedBase(l);
    const routed = await l.comment(1, '/proofgate automerge');
    await l.completeCheck(1, runId);
    await until(() => l.server.model.mergeQueue.entry(1) !== null, 'the change was not put in the merge queue');
    l.server.model.mergeQueue.finish(1, 'failure');
    await deliver(l, l.server.model.mergeQueue.takeDeliveries());
    const outcome = await outcomeOf(routed.dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('blocked');
    expect(outcome.code).toBe('queue-ejected');
    expect(outcome.reason).toContain('CI_FAILURE');
    expect(l.server.model.pull(1).merged).toBe(false);
    expect(statusComment(l)).toContain("GitHub's merge queue of main removed head");
    expect(statusComment(l)).toContain('CI_FAILURE');
    const { state } = await l.env.store.load('1');
    expect(state.mergeFailures.map((f) => f.code)).toEqual(['QUEUE_CHECKS_FAILED']);
    expect(enqueues(l)).toHaveLength(1);
    expect(l.server.model.mergeQueue.entries).toEqual([]);
  });

  it('a head pushed while queued: GitHub drops it, the new head is reviewed, and only the new head is queued', async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    const { head, runId } = openQueuedBase(l);
    const routed = await l.comment(1, '/proofgate automerge');
    await l.completeCheck(1, runId);
    await until(() => l.server.model.mergeQueue.entry(1) !== null, 'the change was not put in the merge queue');
    l.server.model.mergeQueue.takeDeliveries();
    const pushed = l.repo.commit('feature', { 'more.txt': 'more\n' }, 'more');
    l.syncRemote();
    l.server.model.pushHead(1, l.mirrorCommit(pushed, head));
    const run = l.server.model.addCheckRun({ sha: pushed, name: 'ci', status: 'in_progress' });
    expect(l.server.model.mergeQueue.entry(1)).toBeNull();
    await deliver(l, l.server.model.mergeQueue.takeDeliveries());
    await until(
      async () => (await l.env.store.load('1')).state.reviews.some((r) => r.head === pushed && r.status === 'finished'),
      'the new head was not reviewed',
    );
    await l.completeCheck(1, run.id);
    await until(() => l.server.model.mergeQueue.entry(1)?.headSha === pushed, 'the new head was not queued');
    l.server.model.mergeQueue.finish(1, 'success');
    await deliver(l, l.server.model.mergeQueue.takeDeliveries());
    const outcome = await outcomeOf(routed.dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('merged');
    expect(outcome.head).toBe(pushed);
    // The removal for the moved head is no failed merge of the new head.
    expect((await l.env.store.load('1')).state.mergeFailures).toEqual([]);
    expect(enqueues(l)).toHaveLength(2);
  });

  it('a head that moves between the merge decision and the enqueue: GitHub refuses the stale head, nothing is queued, the new head is reviewed', async () => {
    let moved = '';
    const l = (loop = await githubLoop({
      waits: WAIT_FOREVER,
      onProgress: (line) => {
        if (moved !== '' || !line.text.startsWith('merge:') || loop === null) return;
        const next = loop.repo.commit('feature', { 'late.txt': 'late push\n' }, 'late push');
        loop.syncRemote();
        loop.server.model.pushHead(1, loop.mirrorCommit(next, loop.server.model.headSha(1)));
        loop.server.model.addCheckRun({ sha: next, name: 'ci' });
        moved = next;
      },
    }));
    const { runId } = openQueuedBase(l);
    const routed = await l.comment(1, '/proofgate automerge');
    await l.completeCheck(1, runId);
    await until(() => l.server.model.mergeQueue.entry(1) !== null, 'the new head was not queued after its review');
    expect(l.server.model.mergeQueue.entry(1)?.headSha).toBe(moved);
    const refused = l.server.requests.filter((r) => r.operation === 'graphql:ProofgateEnqueue');
    expect(refused).toHaveLength(2);
    const { state } = await l.env.store.load('1');
    expect(state.mergeFailures.map((f) => f.code)).toEqual(['HEAD_MOVED']);
    expect(state.reviews.filter((r) => r.head === moved)).toHaveLength(1);
    l.server.model.mergeQueue.finish(1, 'success');
    await deliver(l, l.server.model.mergeQueue.takeDeliveries());
    expect((await outcomeOf(routed.dispatch?.done)).head).toBe(moved);
  });

  it('/proofgate stop while queued takes the change out of the queue (dequeuePullRequest), and that removal is no failed merge', async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    const { runId } = openQueuedBase(l);
    const routed = await l.comment(1, '/proofgate automerge');
    await l.completeCheck(1, runId);
    await until(() => l.server.model.mergeQueue.entry(1) !== null, 'the change was not put in the merge queue');
    await l.comment(1, '/proofgate stop');
    const outcome = await outcomeOf(routed.dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('stopped');
    expect(l.server.model.mergeQueue.entry(1)).toBeNull();
    expect(l.server.model.mergeQueue.lastRemoval(1)?.reason).toBe('MANUAL');
    expect(l.server.requests.filter((r) => r.operation === 'graphql:ProofgateDequeue').map((r) => r.status)).toEqual([200]);
    expect(l.server.model.pull(1).merged).toBe(false);
    // Automerge asked for again: the same head goes back in the queue (the stop's removal counted as nothing).
    await deliver(l, l.server.model.mergeQueue.takeDeliveries());
    const again = await l.comment(1, '/proofgate automerge');
    await until(() => l.server.model.mergeQueue.entry(1) !== null, 'the change was not queued again');
    expect((await l.env.store.load('1')).state.mergeFailures).toEqual([]);
    l.server.model.mergeQueue.finish(1, 'success');
    await deliver(l, l.server.model.mergeQueue.takeDeliveries());
    expect((await outcomeOf(again.dispatch?.done)).kind).toBe('merged');
  });

  it("attack: a passing check on another sha (a merge group's, or one the author made) naming the change never counts as its head's check", async () => {
    const l = (loop = await githubLoop({ waits: WAIT_FOREVER }));
    const { head } = openQueuedBase(l);
    const { model } = l.server;
    const routed = await l.comment(1, '/proofgate automerge');
    await until(() => l.progress.some((p) => p.text.startsWith('wait: checks pending')), 'the loop did not wait for the check');
    const reads = () => l.server.requests.filter((r) => r.operation === 'graphql:ProofgateChangeSnapshot').length;
    // A commit that is not the head gets a green `ci` twice: once in a delivery that names the change, once on a merge
    // group branch that names it (as GitHub's queue would, or as an author might try).
    const other = model.commit({ parent: head, files: { 'feature.txt': 'a feature\n', 'evil.txt': 'x\n' } });
    const fake = model.addCheckRun({ sha: other, name: 'ci', status: 'in_progress' });
    let before = reads();
    await l.completeCheck(1, fake.id);
    await until(() => reads() > before, 'the check_run delivery naming the change did not wake it');
    const branch = `gh-readonly-queue/main/pr-1-${head}`;
    model.setBranch(branch, other);
    const groupRun = model.addCheckRun({ sha: other, name: 'ci', status: 'completed', conclusion: 'success' });
    before = reads();
    await deliver(l, [{ eventName: 'check_run', payload: checkRunCompletedPayload(l.server.url, model.repositoryId, groupRun, 'success', [], branch) }]);
    await until(() => reads() > before, "the merge group check's delivery did not wake the change");
    // The loop decided on what it read before it reads the stop: had it taken either check as its head's, it would have queued.
    await l.comment(1, '/proofgate stop');
    const outcome = await outcomeOf(routed.dispatch?.done);
    expect(outcome.kind, outcome.reason).toBe('stopped');
    const snapshot = await l.env.forge.snapshot('1');
    expect(snapshot.checks.map((c) => [c.name, c.headSha, c.status])).toEqual([['ci', head, 'in_progress']]);
    const decided = (await l.env.store.load('1')).steps.filter((step) => step.step === 'decision').map((step) => step.code);
    expect(decided).not.toContain('ready');
    expect(model.mergeQueue.entries).toEqual([]);
    expect(l.server.requests.filter((r) => r.operation === 'graphql:ProofgateEnqueue')).toEqual([]);
    expect(l.server.requests.filter((r) => r.operation === 'pulls/merge')).toEqual([]);
  });
});

describe("proofgate serve (the GitHub App) and GitHub's merge queue", () => {
  let service: ServiceHarness | null = null;
  afterEach(async () => {
    await service?.cleanup();
    service = null;
  });

  it('the change parks while queued (no worker held), and the merge webhook brings it back to record the merge', async () => {
    const h = (service = await startServiceHarness());
    await until(() => h.events.some((e) => e.kind === 'completed' && e.job.task === 'repository'), 'the start pass did not run');
    const { number, head, runId } = h.openPullRequest();
    h.server.model.addRuleset('main', { name: 'merge queue', mergeQueue: true });
    await h.comment(number, '/proofgate automerge');
    await until(async () => h.service.runningLoops() === 0 && (await h.service.queue.list()).some((job) => job.task === 'resume'), 'the change did not park');
    await h.completeCheck(number, runId);
    await until(() => h.server.model.mergeQueue.entry(number) !== null, 'the change was not put in the merge queue');
    expect(h.server.model.mergeQueue.entry(number)?.headSha).toBe(head);
    // Waiting on GitHub's queue holds no worker: the job parks, a resume job waits for a webhook.
    await until(
      async () => h.service.runningLoops() === 0 && (await h.service.queue.list()).some((job) => job.task === 'resume'),
      'the queued change did not park',
    );
    const bot = () => h.server.model.commentsOf(number).filter((c) => c.author === BOT);
    expect(bot().some((c) => c.body.includes("in GitHub's merge queue of main"))).toBe(true);

    h.server.model.mergeQueue.finish(number, 'success');
    for (const delivery of h.server.model.mergeQueue.takeDeliveries()) expect((await h.send(delivery.eventName, delivery.payload)).status).toBe(202);
    await until(() => bot().some((c) => c.body.includes('automerge: merged')), 'the merge GitHub made was not recorded');
    expect(h.server.requests.filter((r) => r.operation === 'pulls/merge')).toEqual([]);
    expect(h.server.requests.filter((r) => r.operation === 'graphql:ProofgateEnqueue').map((r) => r.status)).toEqual([200]);
    expect(h.server.schemaChecks.filter((c) => c.violations.length > 0)).toEqual([]);
  });
});

describe("reading GitHub's removals (pure)", () => {
  const head = 'a'.repeat(40);
  const snapshot = (removal: { headSha: string | null; reason: string; at: string } | null) =>
    ({ id: '1', state: 'open', head: { ref: 'f', sha: head }, forgeQueue: { required: true, entry: null, lastRemoval: removal } }) as unknown as ChangeSnapshot;
  const enqueued = { step: FORGE_QUEUE_ENQUEUED, at: '2026-05-01T00:00:00Z', head, enqueuedAt: '2026-01-01T00:00:10Z' };

  it.each([
    ['CI_FAILURE', QUEUE_CHECKS_FAILED],
    ['CI_TIMEOUT', QUEUE_CHECKS_FAILED],
    ['The merge group failed its required status checks', QUEUE_CHECKS_FAILED],
    ['MERGE_CONFLICT', QUEUE_REMOVED],
    ['MANUAL', QUEUE_REMOVED],
    ['QUEUE_CLEARED', QUEUE_REMOVED],
  ])('%s is %s', (reason, code) => {
    expect(queueRemovalCode(reason)).toBe(code);
  });

  it('records a removal of the queued head at or after the enqueue, once by its time; never an older one, another head, or its own stop', () => {
    const removal = { headSha: head, reason: 'CI_FAILURE', at: '2026-01-01T00:00:20Z' };
    expect(queueRemovalRecords(snapshot(removal), [enqueued])).toEqual([
      { type: 'note', id: 'queue-removed-2026-01-01T00:00:20Z', text: `GitHub's merge queue removed ${head.slice(0, 12)}: CI_FAILURE`, at: removal.at },
      { type: 'merge-failed', id: 'queue-removed-2026-01-01T00:00:20Z', head, code: QUEUE_CHECKS_FAILED, at: removal.at },
    ]);
    expect(queueRemovalRecords(snapshot({ ...removal, at: '2026-01-01T00:00:05Z' }), [enqueued])).toEqual([]);
    expect(queueRemovalRecords(snapshot({ ...removal, headSha: 'b'.repeat(40) }), [enqueued])).toEqual([]);
    expect(queueRemovalRecords(snapshot(removal), [])).toEqual([]);
    expect(queueRemovalRecords(snapshot(removal), [enqueued, { step: FORGE_QUEUE_DEQUEUED, at: enqueued.at, head, reason: 'stopped' }])).toEqual([]);
    expect(queueRemovalRecords(snapshot(null), [enqueued])).toEqual([]);
  });

  it('a stop takes the change out when GitHub shows it queued, or when proofgate queued its head and saw no removal since (GitHub may not show it yet)', () => {
    const shown = {
      ...snapshot(null),
      forgeQueue: { required: true, entry: { position: 1, state: 'QUEUED', enqueuedAt: enqueued.enqueuedAt, group: null }, lastRemoval: null },
    } as ChangeSnapshot;
    expect(mayBeInForgeQueue(shown, [])).toBe(true);
    expect(mayBeInForgeQueue(snapshot(null), [enqueued])).toBe(true);
    expect(mayBeInForgeQueue(snapshot(null), [])).toBe(false);
    expect(mayBeInForgeQueue(snapshot(null), [enqueued, { step: FORGE_QUEUE_DEQUEUED, at: enqueued.at, head, reason: 'stopped' }])).toBe(false);
    expect(mayBeInForgeQueue(snapshot({ headSha: head, reason: 'CI_FAILURE', at: '2026-01-01T00:00:20Z' }), [enqueued])).toBe(false);
    // A removal older than the enqueue is of an earlier time in the queue.
    expect(mayBeInForgeQueue(snapshot({ headSha: head, reason: 'MANUAL', at: '2026-01-01T00:00:05Z' }), [enqueued])).toBe(true);
  });
});

describe("the service's jobs for GitHub's merge queue deliveries", () => {
  const base = { repository: { owner: 'octo', repo: 'demo' }, installationId: 7, deliveryId: 'd-1' } as const;
  const work = (result: GitHubForgeEvent) =>
    jobsForDelivery({ deliveryId: 'd-1', eventName: result.eventName, installationId: 7, result, record: { streamId: 's', eventId: 'e' } });
  const resume = (changeId: string) => resumeJob({ installationId: 7, repository: 'octo/demo', changeId });

  it('enqueued, dequeued and merge_group wake the change they name (a parked wait becomes due); a group naming none queues nothing', () => {
    const sha = 'c'.repeat(40);
    for (const kind of ['change-enqueued', 'change-dequeued'] as const) {
      expect(work({ ...base, eventName: 'pull_request', kind, changeId: '5', headSha: sha, reason: null })).toEqual([resume('5')]);
    }
    const group = { ...base, eventName: 'merge_group', kind: 'merge-group', action: 'destroyed', headSha: sha, baseRef: 'main', reason: 'merged' } as const;
    expect(work({ ...group, changeIds: ['5'] })).toEqual([resume('5')]);
    expect(work({ ...group, changeIds: [] })).toEqual([]);
    expect(work({ ...group, changeIds: ['0'] })).toEqual([]);
  });
});
