/**
 * Race attacks on `proofgate serve` as a GitHub App, between processes and
 * between a pull request's two lanes (its queue of loop runs and its command
 * lane). Several services share one store: in this process on SQLite (each
 * behind a proxy of its own, so every GitHub request is attributed to its
 * process and any one can be held), and as child processes on PostgreSQL
 * (killed with SIGKILL or paused with SIGSTOP at exact points). Each test
 * asserts the safe behaviour; a defect found and fixed says so above its test.
 */
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { automergeActive } from '../../src/automerge/ledger.js';
import { changeQueue, reconcileJob, resumeJob, type GitHubServiceOptions } from '../../src/service/index.js';
import type { ModelComment } from '../support/github-server/index.js';
import { issueCommentPayload } from '../support/github-server/index.js';
import { describePostgres } from '../support/postgres.js';
import { until } from '../support/wait.js';
import {
  INSTALLATION_ID,
  MAINTAINER,
  REVIEW_HEADLINE,
  STATUS_HEADLINE,
  commentText,
  endedJob,
  eventOf,
  isWrite,
  overlappingLoops,
  startRaceRig,
  type RaceRig,
  type RaceService,
} from './github-races-rig.js';
import {
  bundleWorker,
  freshDatabase,
  isStopped,
  lineOf,
  openShared,
  startWorker,
  type RaceWorker,
  type Shared,
  type WorkerSettings,
} from './github-races-workers.js';

let rig: RaceRig | null = null;
afterEach(async () => {
  await rig?.cleanup();
  rig = null;
});

const QUEUE_1 = changeQueue('octo-org/demo', '1');

/** Wait until the change's ledger has a step that matches. */
async function step(r: RaceRig, pr: number, match: (s: { step: string; [key: string]: unknown }) => boolean, what: string): Promise<void> {
  await until(async () => (await r.ledger(pr)).steps.some(match), what);
}

/** The rig and two services on its store, their start-up reconciliation passes done. */
async function twoServices(extra: Partial<GitHubServiceOptions> = {}): Promise<{ r: RaceRig; a: RaceService; b: RaceService }> {
  const r = (rig = await startRaceRig());
  const a = await r.startService('a', extra);
  const b = await r.startService('b', extra);
  await r.quiet();
  return { r, a, b };
}

function commentPayload(r: RaceRig, pr: number, comment: ModelComment): Record<string, unknown> {
  return issueCommentPayload(r.server.url, 'octo-org/demo', pr, comment, comment.body);
}

const parked = (s: { step: string; outcome?: unknown }) => s.step === 'job-finished' && s.outcome === 'parked';

describe('attack: a stop routed in another process while a loop runs', () => {
  it("a /proofgate stop routed by process B while process A's loop reviews a pushed head: nothing merges", async () => {
    const { r, a, b } = await twoServices();
    const pr = r.openPullRequest('feature', 'pending');
    await r.comment(a.url, pr.number, '/proofgate automerge');
    await step(r, pr.number, parked, 'the first loop did not park');
    // A push whose check is green: the resume reviews the new head and would merge it.
    const reviews = r.holdReviews();
    r.pushHead(pr.number, { 'more.txt': 'more\n' });
    await r.send(a.url, 'pull_request', r.pullRequestBody('synchronize', pr.number));
    const reviewer = await reviews.reviewing();
    const other = reviewer === 'a' ? b : a;
    const from = other.events.length;
    const stop = await r.comment(other.url, pr.number, '/proofgate stop');
    // The other process routes the stop (the reviewing one's only worker is busy with the change's loop).
    await eventOf(other, from, (e) => endedJob(e, `comment:${stop.deliveryId}`) && e.kind === 'completed', 'the other process did not route the stop');
    expect(automergeActive((await r.ledger(pr.number)).state)).toBe(false);
    reviews.release();
    await r.quiet();
    expect(r.server.model.pull(pr.number).merged).toBe(false);
    expect(r.seen.filter((s) => s.method === 'PUT' && s.path.endsWith('/merge'))).toEqual([]);
  });

  // Was a defect (fixed: only automerge waits for a slot, and only when no loop of the change runs here): a command that may start a loop (status, approve, review, rebase, automerge) waits for a loop slot while it
  // holds the change's command lane (service.ts comment -> loopSlot, LOOP_STARTERS); with one worker (the default) a
  // change's own loop fills the slot, so a /proofgate stop queued behind that command is routed only after the loop
  // ends: after the merge. The stop, delivered while the head was still being reviewed, does not win.
  it('one process with one worker: a /proofgate stop delivered after a /proofgate status, both while the head is reviewed: nothing merges', async () => {
    const r = (rig = await startRaceRig());
    const a = await r.startService('a');
    await r.quiet();
    const pr = r.openPullRequest('feature', 'success');
    const reviews = r.holdReviews();
    await r.comment(a.url, pr.number, '/proofgate automerge');
    await reviews.reviewing();
    const status = await r.comment(a.url, pr.number, '/proofgate status');
    const stop = await r.comment(a.url, pr.number, '/proofgate stop');
    expect([status.status, stop.status]).toEqual([202, 202]);
    await eventOf(a, 0, (e) => e.kind === 'started' && e.job.key === `comment:${status.deliveryId}`, 'the status command did not start');
    // The stop is routed while the review still runs, as any stop is.
    await until(
      async () => automergeActive((await r.ledger(pr.number)).state) === false,
      'the stop was not routed while the head was reviewed',
      10_000,
    ).finally(() => reviews.release());
    await r.quiet();
    expect(r.server.model.pull(pr.number).merged).toBe(false);
  });

  // A stop recorded after A's loop decided to merge and before the merge is recorded (`merge-attempt`) wins: the
  // attempt is appended only while automerge is on, in one compare-and-swap. That window has no GitHub round trip
  // to hold any more (the merge-ready label is written only after a refused merge), so the race is made in the store:
  // test/automerge/loop/fence.test.ts, "a stop recorded between the merge decision and the merge attempt".
});

describe('attack: two automerge comments for one change, delivered to two processes at once', () => {
  it('both delivered while the first loop reviews: one loop at a time, one merge at the reviewed head, one status comment saying merged, one review comment', async () => {
    const { r, a, b } = await twoServices({ leaseMs: 4_000 });
    const pr = r.openPullRequest('feature', 'success');
    const reviews = r.holdReviews();
    const first = r.server.model.addComment(pr.number, MAINTAINER, '/proofgate automerge');
    const second = r.server.model.addComment(pr.number, MAINTAINER, '/proofgate automerge\n\n(again)');
    const answers = await Promise.all([
      r.send(a.url, 'issue_comment', commentPayload(r, pr.number, first)),
      r.send(b.url, 'issue_comment', commentPayload(r, pr.number, second)),
    ]);
    expect(answers.map((x) => x.status)).toEqual([202, 202]);
    await reviews.reviewing();
    reviews.release();
    await until(() => r.server.model.pull(pr.number).merged, 'not merged');
    for (const answer of answers)
      await until(() => r.services.some((s) => s.events.some((e) => endedJob(e, `comment:${answer.deliveryId}`))), 'a comment was not routed');
    await r.quiet();
    const merges = r.seen.filter((s) => s.method === 'PUT' && s.path.endsWith('/merge'));
    expect(merges.map((m) => m.status)).toEqual([200]);
    expect(merges[0]?.body).toContain(pr.head);
    expect(r.reviews).toHaveLength(1);
    // The second comment was routed during the loop (its own process starts no second loop: the lease is held) or after
    // the merge (a one-line reply); either way one status comment, saying merged.
    const headlines = r.botComments(pr.number).map((c) => c.body.split('\n')[0]);
    expect(headlines.filter((h) => !h!.includes('this change is merged'))).toEqual([`${STATUS_HEADLINE} merged`, `${REVIEW_HEADLINE} CONFIRMED`]);
    expect(headlines.length).toBeLessThanOrEqual(3);
    expect(overlappingLoops((await r.ledger(pr.number)).steps)).toEqual([]);
  });

  // Was a defect (fixed: the router writes no status comment or label; the loop writes them all, under the change's
  // lease): an automerge comment routed by B, whose status write ("automerge requested; starting") was still on its way
  // while A's loop merged and wrote the final comment, overwrote the final comment; B's loop then found A holding the
  // lease and its later resume found the change merged and ran nothing: the merged pull request said "waiting" for good.
  it("an automerge comment routed by B while A's loop merges: B writes nothing, and the final comment says merged when all is done", async () => {
    const { r, a, b } = await twoServices({ leaseMs: 4_000 });
    const pr = r.openPullRequest('feature', 'pending');
    await r.comment(a.url, pr.number, '/proofgate automerge');
    await step(r, pr.number, parked, 'the first loop did not park');
    // A's loop runs as a queue job: it reviews a pushed head, then merges it; the merge request is held on its way.
    const pushed = r.pushHead(pr.number, { 'more.txt': 'more\n' });
    const merge = r.hold((s) => s.method === 'PUT' && s.path.endsWith('/merge'));
    await r.send(a.url, 'pull_request', r.pullRequestBody('synchronize', pr.number));
    const held = await merge.hit();
    const looping = held.proxy === 'a' ? a : b;
    const routing = looping === a ? b : a;
    // B routes a second automerge comment while A holds the lease and its merge is on its way.
    const from = routing.events.length;
    const mark = r.seen.length;
    const again = await r.comment(routing.url, pr.number, '/proofgate automerge');
    await eventOf(routing, from, (e) => endedJob(e, `comment:${again.deliveryId}`), 'the second automerge comment was not routed');
    expect(r.seen.slice(mark).filter((s) => s.proxy === routing.name && isWrite(s))).toEqual([]);
    merge.release();
    await until(() => r.server.model.pull(pr.number).merged, 'not merged');
    await until(async () => (await a.service.queue.list()).every((j) => j.failed || j.runAt.getTime() > Date.now() + 60_000), 'the change did not go quiet');
    await r.quiet();
    const status = r.botComments(pr.number).filter((c) => c.body.startsWith(STATUS_HEADLINE));
    expect(status).toHaveLength(1);
    expect(status[0]?.body.split('\n')[0]).toBe(`${STATUS_HEADLINE} merged`);
    expect(status[0]?.body).toContain(pushed);
    expect(r.server.model.pull(pr.number).labels).toEqual([]);
    // Nothing but the loop holding the lease wrote to the status comment or the labels after B's route.
    const visible = r.seen.slice(mark).filter((s) => isWrite(s) && !s.path.endsWith('/merge') && !s.body.includes('proofgate review'));
    expect([...new Set(visible.map((s) => s.proxy))]).toEqual([looping.name]);
  });
});

describe('attack: a push delivered to one process while the change runs in another', () => {
  it("a synchronize delivered to B while A's resume has decided to merge the old head: the old head is refused, the new one is reviewed, then merged", async () => {
    const { r, a, b } = await twoServices();
    const pr = r.openPullRequest('feature', 'pending');
    await r.comment(a.url, pr.number, '/proofgate automerge');
    await step(r, pr.number, parked, 'the first loop did not park');
    // Held: A's merge of the old head, on its way (decided and recorded).
    const label = r.hold((s) => s.method === 'PUT' && s.path.endsWith('/merge'));
    await r.completeCheck(a.url, pr.number, pr.runId);
    const held = await label.hit();
    const other = held.proxy === 'a' ? b : a;
    const pushed = r.pushHead(pr.number, { 'sneaky.txt': 'not reviewed yet\n' });
    const sync = await r.send(other.url, 'pull_request', r.pullRequestBody('synchronize', pr.number));
    expect(sync.status).toBe(202);
    // The wake waits behind the running job on the change's queue (one job of a change at a time, anywhere).
    await until(async () => (await a.service.queue.list()).some((j) => j.queue === QUEUE_1 && j.lockedBy === null && !j.failed), 'no resume waits');
    label.release();
    await until(() => r.server.model.pull(pr.number).merged, 'not merged');
    await r.quiet();
    const merges = r.seen.filter((s) => s.method === 'PUT' && s.path.endsWith('/merge'));
    expect(merges.map((m) => [m.status, JSON.parse(m.body).sha])).toEqual([
      [409, pr.head],
      [200, pushed],
    ]);
    expect(r.reviews.map((x) => x.head)).toEqual([pr.head, pushed]);
    // The new head's review came before its merge.
    const review = r.seen.findIndex((s) => isWrite(s) && s.path.includes('/comments') && s.body.includes(pushed) && s.body.includes('proofgate review'));
    expect(review).toBeGreaterThanOrEqual(0);
    expect(review).toBeLessThan(merges[1]!.seq);
    expect(r.server.model.headSha(pr.number)).toBe(pushed);
  });
});

describe('attack: a wake while a loop started by a command decides to wait', () => {
  // Was a defect (fixed: the resume wakes the running loop): a `resume` job (a check completed) for a change whose loop runs in this process beside the command lane is
  // dropped (service.ts runIfActive: the loop is active here, so nothing is dispatched and its signal is not notified);
  // a loop that read its snapshot before the check completed parks past the event, until its poll (15 s by default,
  // the trusted config's transientPollMs) or the next event. Events are to wake a change at once.
  it('a check completing between the loop reading its snapshot and parking: the change merges without waiting for its poll', async () => {
    const r = (rig = await startRaceRig());
    const a = await r.startService('a');
    await r.quiet();
    const pr = r.openPullRequest('feature', 'pending');
    // Held: the loop's status write of its wait (after it read the pending check, before it parks).
    const waiting = r.hold((s) => (commentText(s)?.startsWith(`${STATUS_HEADLINE} waiting`) ?? false) && !(commentText(s) ?? '').includes('starting'));
    await r.comment(a.url, pr.number, '/proofgate automerge');
    await waiting.hit();
    const from = a.events.length;
    const check = await r.completeCheck(a.url, pr.number, pr.runId);
    await eventOf(a, from, (e) => e.kind === 'completed' && e.job.task === 'resume', 'the check did not wake the change');
    expect(check.status).toBe(202);
    waiting.release();
    await r.quiet();
    expect(r.server.model.pull(pr.number).merged).toBe(true);
  });
});

describe('attack: wakes of a parked change from many deliveries, to two processes', () => {
  it('while a resume runs, 20 redeliveries, 10 other checks and 5 synchronize deliveries leave one resume waiting; two runs in all', async () => {
    const { r, a, b } = await twoServices();
    const pr = r.openPullRequest('feature', 'pending');
    await r.comment(a.url, pr.number, '/proofgate automerge');
    await step(r, pr.number, parked, 'the first loop did not park');
    const started = () => r.services.flatMap((s) => s.events).filter((e) => e.kind === 'started' && e.job.queue === QUEUE_1).length;
    const before = started();
    // Another check completes (ci still runs): the resume reads the change, held.
    const snapshot = r.hold((s) => s.path === '/graphql');
    const lint = r.server.model.addCheckRun({ sha: pr.head, name: 'lint', status: 'completed', conclusion: 'success' });
    const lintBody = r.checkBody(pr.number, lint.id);
    expect((await r.send(a.url, 'check_run', lintBody)).status).toBe(202);
    await snapshot.hit();
    const others = Array.from({ length: 10 }, (_, i) => {
      const run = r.server.model.addCheckRun({ sha: pr.head, name: `other-${i}`, status: 'completed', conclusion: 'success' });
      return r.checkBody(pr.number, run.id);
    });
    const answers = await Promise.all([
      ...Array.from({ length: 20 }, (_, i) => r.send(i % 2 === 0 ? a.url : b.url, 'check_run', lintBody)),
      ...others.map((body, i) => r.send(i % 2 === 0 ? b.url : a.url, 'check_run', body)),
      ...Array.from({ length: 5 }, (_, i) => r.send(i % 2 === 0 ? a.url : b.url, 'pull_request', r.pullRequestBody('synchronize', pr.number))),
    ]);
    // The same body again is a duplicate however many ids it comes under (and to whichever process).
    const statuses = (from: number, to: number) =>
      answers
        .slice(from, to)
        .map((x) => x.status)
        .sort();
    expect(statuses(0, 20)).toEqual(Array<number>(20).fill(200));
    expect(statuses(20, 30)).toEqual(Array<number>(10).fill(202));
    expect(statuses(30, 35)).toEqual([200, 200, 200, 200, 202]);
    const jobs = (await a.service.queue.list()).filter((j) => j.queue === QUEUE_1 && !j.failed);
    expect(jobs.map((j) => (j.lockedBy === null ? 'waiting' : 'running')).sort()).toEqual(['running', 'waiting']);
    snapshot.release();
    await r.quiet();
    expect(started() - before).toBe(2);
    expect(r.server.model.pull(pr.number).merged).toBe(false);
    expect(r.seen.filter((s) => isWrite(s) && s.path.includes('/comments') && s.method === 'POST')).toHaveLength(2);
  });
});

describe('attack: the reconciliation sweep racing a comment job for the same comment', () => {
  it('a sweep (from a reconciliation pass in B) of a /proofgate status whose first route in A is held: one reply', async () => {
    const { r, a, b } = await twoServices();
    const pr = r.openPullRequest('feature', 'pending');
    const reply = r.hold((s) => s.method === 'POST' && s.path.endsWith(`/issues/${pr.number}/comments`) && s.body.includes('proofgate status (asked by'));
    const sent = await r.comment(a.url, pr.number, '/proofgate status');
    const held = await reply.hit();
    const other = held.proxy === 'a' ? b : a;
    await other.service.queue.add(reconcileJob(null));
    // The pass queues a sweep of the change on its command lane, where it waits for the held route.
    const lane = `${QUEUE_1}:commands`;
    await until(async () => (await a.service.queue.list()).some((j) => j.task === 'sweep' && j.queue === lane && j.lockedBy === null), 'no sweep was queued');
    reply.release();
    const routed = r.services.find((s) => s.name === held.proxy)!;
    await eventOf(routed, 0, (e) => endedJob(e, `comment:${sent.deliveryId}`), 'the comment job did not end');
    await until(() => r.services.some((s) => s.events.some((e) => e.kind === 'completed' && e.job.task === 'sweep')), 'the sweep did not run');
    await r.quiet();
    expect(r.botComments(pr.number).filter((c) => c.body.includes('proofgate status (asked by'))).toHaveLength(1);
    expect(r.seen.filter(isWrite)).toHaveLength(1);
  });
});

describe("attack: a job whose payload names a pull request of another lane (an operator's mistake)", () => {
  // Defense in depth only (noted, not a defect): the handlers run the payload's change whatever the job's queue
  // (service.ts resume/addressOf never compare them); the change's lease keeps two loops of it apart.
  it("a resume for #1 queued on #2's lane and on another repository's, beside #1's own resume: #1 merges once, #2 sees nothing", async () => {
    const { r, a, b } = await twoServices();
    const pr = r.openPullRequest('feature', 'pending');
    const two = r.openPullRequest('second', 'pending');
    await r.comment(a.url, pr.number, '/proofgate automerge');
    await step(r, pr.number, parked, 'the first loop did not park');
    const run = r.server.model.checkRuns.find((x) => x.id === pr.runId)!;
    run.status = 'completed';
    run.conclusion = 'success';
    const address = { installationId: INSTALLATION_ID, repository: 'octo-org/demo', changeId: String(pr.number) };
    await Promise.all([
      b.service.queue.add({ task: 'resume', queue: changeQueue('octo-org/demo', String(two.number)), key: 'resume:mistaken', payload: address }),
      b.service.queue.add({ task: 'resume', queue: changeQueue('octo-org/other', '1'), key: 'resume:mistaken-repository', payload: address }),
      a.service.queue.add(resumeJob(address)),
    ]);
    await until(() => r.server.model.pull(pr.number).merged, 'not merged');
    for (const key of ['resume:mistaken', 'resume:mistaken-repository'])
      await until(() => r.services.some((s) => s.events.some((e) => e.kind === 'completed' && e.job.key === key)), 'a mistaken job did not run');
    await r.quiet();
    expect(r.seen.filter((s) => s.method === 'PUT' && s.path.endsWith('/merge')).map((s) => [s.path, s.status])).toEqual([
      [`/repos/octo-org/demo/pulls/${pr.number}/merge`, 200],
    ]);
    expect(r.seen.filter((s) => isWrite(s) && s.path.includes(`/issues/${two.number}/`))).toEqual([]);
    expect(r.server.model.pull(two.number).merged).toBe(false);
    expect(overlappingLoops((await r.ledger(pr.number)).steps)).toEqual([]);
    expect(r.botComments(pr.number).filter((c) => c.body.startsWith(STATUS_HEADLINE))).toHaveLength(1);
  });
});

describePostgres('attack: worker processes killed or paused at exact points (PostgreSQL)', (url) => {
  let bundled: { script: string; cleanup(): void } | null = null;
  let database: { url: string; drop(): Promise<void> } | null = null;
  let shared: Shared | null = null;
  beforeAll(async () => {
    bundled = await bundleWorker();
  });
  afterAll(() => bundled?.cleanup());
  afterEach(async () => {
    await shared?.close();
    shared = null;
    await database?.drop();
    database = null;
  });

  /** The rig, a fresh database and two worker processes (one after the other: the first migrates). */
  async function twoWorkers(settings: {
    retakeMs: number;
    leaseMs: number;
    pause?: { pattern: string; action: 'stop' | 'kill' };
  }): Promise<{ r: RaceRig; workers: [RaceWorker, RaceWorker]; db: Shared }> {
    const r = (rig = await startRaceRig());
    database = await freshDatabase(url);
    // The first worker whose log line matches `pause` takes the claim (a directory) and pauses; the other goes on.
    const all: WorkerSettings = {
      retakeMs: settings.retakeMs,
      leaseMs: settings.leaseMs,
      databaseUrl: database.url,
      ...(settings.pause === undefined ? {} : { pause: { ...settings.pause, claim: join(r.root, 'paused') } }),
    };
    const first = await startWorker(r, bundled!.script, 'a', all);
    const second = await startWorker(r, bundled!.script, 'b', all);
    shared = await openShared(database.url);
    const db = shared;
    // Their start-up reconciliation passes are done before the test's pull request exists.
    await until(
      async () => (await db.queue.list()).every((j) => j.failed || (j.lockedBy === null && j.runAt.getTime() > Date.now() + 1_000)),
      'the workers did not go quiet',
    );
    return { r, workers: [first, second], db };
  }

  const byProxy = (workers: readonly RaceWorker[], name: string) => workers.find((w) => w.proxy.name === name)!;

  it("SIGKILL of the process whose loop a command started (not a queue job): the change's safety-net resume brings it to its merge in the other, once", async () => {
    const { r, workers, db } = await twoWorkers({ retakeMs: 1_500, leaseMs: 4_000 });
    const pr = r.openPullRequest('feature', 'success');
    // The review comment of the first loop is held: that process is mid-loop, holding the change's lease.
    const review = r.hold(
      (s) => s.method === 'POST' && s.path.endsWith(`/issues/${pr.number}/comments`) && (commentText(s)?.startsWith(REVIEW_HEADLINE) ?? false),
    );
    const sentAt = performance.now();
    const sent = await r.comment(workers[0].url, pr.number, '/proofgate automerge');
    const held = await review.hit();
    const victim = byProxy(workers, held.proxy);
    const survivor = workers.find((w) => w !== victim)!;
    // The comment job itself ended (its loop runs on beside the command lane).
    await lineOf(victim, 0, (l) => l.kind === 'completed' && l.key === `comment:${sent.deliveryId}`, 'the comment job did not end');
    const from = survivor.lines.length;
    const killedAt = performance.now();
    process.kill(-victim.pid, 'SIGKILL');
    await victim.exited;
    review.drop();
    await until(() => r.server.model.pull(pr.number).merged, 'not merged after the kill');
    const resumed = await lineOf(survivor, from, (l) => l.kind === 'started' && l.task === 'resume' && l.queue === QUEUE_1, 'no resume ran');
    // Figures for the report (never asserted against a clock): how long the change waited for its safety net.
    console.info(
      `safety-net figures: ${JSON.stringify({ leaseMs: 4_000, resumedAfterCommandMs: Math.round(resumed.at - sentAt), resumedAfterKillMs: Math.round(resumed.at - killedAt) })}`,
    );
    await until(async () => (await db.queue.list()).every((j) => j.failed || (j.lockedBy === null && j.runAt.getTime() > Date.now() + 1_000)), 'not quiet');
    const merges = r.seen.filter((s) => s.method === 'PUT' && s.path.endsWith('/merge'));
    expect(merges.map((m) => [m.proxy, m.status])).toEqual([[survivor.proxy.name, 200]]);
    expect(merges[0]?.body).toContain(pr.head);
    const own = r.botComments(pr.number);
    expect(own.filter((c) => c.body.startsWith(STATUS_HEADLINE))).toHaveLength(1);
    expect(own.filter((c) => c.body.startsWith(REVIEW_HEADLINE))).toHaveLength(1);
    const started = (await db.ledger(pr.number)).steps.filter((s) => s.step === 'job-started');
    expect(started.map((s) => String(s.owner).split(':')[1])).toEqual([String(victim.pid), String(survivor.pid)]);
  });

  it('a worker paused (SIGSTOP) right after deciding to merge, past the retake delay and its lease, then continued: it writes nothing after the takeover', async () => {
    const { r, workers, db } = await twoWorkers({ retakeMs: 1_500, leaseMs: 3_000, pause: { pattern: '^merge: ', action: 'stop' } });
    const pr = r.openPullRequest('feature', 'pending');
    await r.comment(workers[0].url, pr.number, '/proofgate automerge');
    await until(async () => (await db.ledger(pr.number)).steps.some(parked), 'the first loop did not park');
    await r.completeCheck(workers[1].url, pr.number, pr.runId);
    let paused: RaceWorker | null = null;
    await until(() => (paused = workers.find((w) => w.lines.some((l) => l.kind === 'pausing')) ?? null) !== null, 'no worker paused');
    const victim = paused as unknown as RaceWorker;
    const survivor = workers.find((w) => w !== victim)!;
    await until(() => isStopped(victim.pid), 'the paused worker is not stopped');
    // The other takes the job over (retake delay), then the change (the lease runs out), and merges.
    await lineOf(survivor, 0, (l) => l.kind === 'unlocked' && (l.jobs ?? 0) > 0, "the paused worker's job was not taken over");
    await until(() => r.server.model.pull(pr.number).merged, 'not merged by the other worker');
    await until(
      async () => (await db.ledger(pr.number)).steps.some((s) => s.step === 'job-finished' && s.outcome === 'merged'),
      'the merge job did not finish',
    );
    await until(async () => (await db.queue.list()).every((j) => j.failed || (j.lockedBy === null && j.runAt.getTime() > Date.now() + 1_000)), 'not quiet');
    const revision = (await db.ledger(pr.number)).revision;
    const mark = r.seen.length;
    const from = victim.lines.length;
    process.kill(victim.pid, 'SIGCONT');
    await lineOf(victim, from, (l) => l.kind === 'log' && (l.msg ?? '').startsWith('lease lost to'), 'the continued worker did not find its lease lost');
    await lineOf(victim, from, (l) => (l.kind === 'completed' || l.kind === 'failed') && l.task === 'resume', 'the continued job did not end');
    expect(r.seen.slice(mark).filter((s) => s.proxy === victim.proxy.name && isWrite(s))).toEqual([]);
    expect((await db.ledger(pr.number)).revision).toBe(revision);
    const merges = r.seen.filter((s) => s.method === 'PUT' && s.path.endsWith('/merge'));
    expect(merges.map((m) => [m.proxy, m.status])).toEqual([[survivor.proxy.name, 200]]);
    expect(r.botComments(pr.number).filter((c) => c.body.startsWith(STATUS_HEADLINE))).toHaveLength(1);
  });

  // Was a defect (fixed: the resume re-adds the safety net): the same dropped wake loses the change's safety net. A `resume` for a change whose loop a command started
  // in this process does nothing (service.ts runIfActive), yet it was the change's one waiting resume: the key's earlier
  // run time won, so the safety-net resume queued at now + leaseMs (afterCommands) is the job that just ran. When the
  // process then dies mid-loop, nothing is queued for the change: it waits for another event or the next
  // reconciliation pass (10 minutes).
  it("a check's resume run by the process whose command loop is mid-review, then SIGKILL of that process: the change is still taken up and merges", async () => {
    const { r, workers, db } = await twoWorkers({ retakeMs: 1_500, leaseMs: 4_000 });
    const pr = r.openPullRequest('feature', 'pending');
    const review = r.hold(
      (s) => s.method === 'POST' && s.path.endsWith(`/issues/${pr.number}/comments`) && (commentText(s)?.startsWith(REVIEW_HEADLINE) ?? false),
    );
    const sent = await r.comment(workers[0].url, pr.number, '/proofgate automerge');
    const held = await review.hit();
    const victim = byProxy(workers, held.proxy);
    const survivor = workers.find((w) => w !== victim)!;
    await lineOf(victim, 0, (l) => l.kind === 'completed' && l.key === `comment:${sent.deliveryId}`, 'the comment job did not end');
    // The check completes; its resume is run by the process whose loop reviews (the other one is paused for this moment).
    process.kill(survivor.pid, 'SIGSTOP');
    const from = victim.lines.length;
    await r.completeCheck(victim.url, pr.number, pr.runId);
    await lineOf(victim, from, (l) => l.kind === 'completed' && l.task === 'resume', 'the check did not wake the change');
    process.kill(survivor.pid, 'SIGCONT');
    process.kill(-victim.pid, 'SIGKILL');
    await victim.exited;
    review.drop();
    expect((await db.queue.list()).filter((j) => j.queue === QUEUE_1 && !j.failed).length).toBeGreaterThan(0);
    await until(() => r.server.model.pull(pr.number).merged, 'the change was not taken up after the kill');
  });

  // Was a defect (fixed: a comment job asks the queue whether it still holds the job before each command and reply,
  // and the router writes no status comment): a comment job whose worker was paused past the retake delay went on
  // routing when it was continued, writing the status comment from the snapshot it read before the pause, while the
  // retried job had resumed the change, whose loop wrote the status comment too: two of them.
  it('a worker paused (SIGSTOP) while routing /proofgate automerge, past the retake delay, then continued: one status comment', async () => {
    const { r, workers, db } = await twoWorkers({ retakeMs: 1_500, leaseMs: 3_000, pause: { pattern: '^maint: automerge$', action: 'stop' } });
    const pr = r.openPullRequest('feature', 'pending');
    const sent = await r.comment(workers[0].url, pr.number, '/proofgate automerge');
    let paused: RaceWorker | null = null;
    await until(() => (paused = workers.find((w) => w.lines.some((l) => l.kind === 'pausing')) ?? null) !== null, 'no worker paused');
    const victim = paused as unknown as RaceWorker;
    const survivor = workers.find((w) => w !== victim)!;
    await until(() => isStopped(victim.pid), 'the paused worker is not stopped');
    // The other retries the comment job (retake delay): the commands are applied already, so it resumes the change, which parks.
    await lineOf(survivor, 0, (l) => l.kind === 'completed' && l.key === `comment:${sent.deliveryId}`, 'the comment job was not retried');
    await until(async () => (await db.ledger(pr.number)).steps.some(parked), 'the resumed change did not park');
    const from = victim.lines.length;
    const mark = r.seen.length;
    process.kill(victim.pid, 'SIGCONT');
    await lineOf(
      victim,
      from,
      (l) => (l.kind === 'completed' || l.kind === 'failed') && l.key === `comment:${sent.deliveryId}`,
      'the continued comment job did not end',
    );
    // Its job was taken over: it writes nothing more, and the change has one status comment.
    expect(r.seen.slice(mark).filter((s) => s.proxy === victim.proxy.name && isWrite(s))).toEqual([]);
    expect(r.botComments(pr.number).filter((c) => c.body.startsWith(STATUS_HEADLINE))).toHaveLength(1);
  });

  // Was a defect (fixed: the append that applies a comment's commands records the lines to run, a route that ends
  // records `commands-finished`, and the service's routes are serial): a comment job whose worker died after the
  // ledger applied its commands lost them: the retried job found the comment applied and nothing recorded a failure,
  // so nothing was resumed. A /proofgate status got no reply; an approve was never recorded.
  it("a worker killed (SIGKILL) while routing /proofgate status, after the ledger applied it: the other worker's retry answers it", async () => {
    const { r, workers } = await twoWorkers({ retakeMs: 1_500, leaseMs: 3_000, pause: { pattern: '^maint: status$', action: 'kill' } });
    const pr = r.openPullRequest('feature', 'pending');
    const sent = await r.comment(workers[0].url, pr.number, '/proofgate status');
    let killed: RaceWorker | null = null;
    await until(() => (killed = workers.find((w) => w.lines.some((l) => l.kind === 'pausing')) ?? null) !== null, 'no worker was killed');
    const victim = killed as unknown as RaceWorker;
    await victim.exited;
    const survivor = workers.find((w) => w !== victim)!;
    await lineOf(survivor, 0, (l) => l.kind === 'completed' && l.key === `comment:${sent.deliveryId}`, 'the comment job was not retried');
    expect(r.botComments(pr.number).filter((c) => c.body.includes('proofgate status (asked by'))).toHaveLength(1);
  });
});
