/**
 * The dashboard's projection: its pure rules with tables (percentiles, the
 * chart series, list queries), then the stored rows of a seeded repository
 * read through the service's read API over real HTTP, kept up as new ledger
 * events arrive, and rebuilt at a restart.
 */
import { rawRequest } from '../support/http.js';
import { afterEach, describe, expect, it } from 'vitest';
import { AUTOMERGE_NAMESPACE } from '../../src/automerge/loop/local.js';
import { LedgerStore } from '../../src/automerge/loop/ledger-store.js';
import { ProofgateError } from '../../src/core/index.js';
import { initialLedger } from '../../src/automerge/ledger.js';
import type { QueueState } from '../../src/automerge/queue/queue.js';
import type { ChangeRecord } from '../../src/forge/local/index.js';
import { listQueryFrom, mergeQueueDepth, openChangeProjection, percentile, projectChange, summarize, type ChangeFacts } from '../../src/service/projection.js';
import { defaultStoragePolicy } from '../../src/storage/policy.js';
import { createLocalRunStorage } from '../../src/storage/sqlite/index.js';
import { until } from '../support/wait.js';
import { seedRepository, serveSeed, type SeedChange } from './dashboard-support.js';
import { HOSTILE_TITLE, queueScenario } from './queue-support.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const C = 'c'.repeat(40);
const record: ChangeRecord = {
  changeId: '7',
  number: 7,
  title: 'A title',
  baseRef: 'main',
  headRef: 'topic',
  openedBaseSha: C,
  openedHeadSha: A,
  author: 'casey',
  openedAt: '2026-01-05T10:00:00.000Z',
  state: 'open',
  labels: [],
  comments: [
    {
      id: 'c1',
      author: 'tess',
      authorType: 'User',
      body: 'looks good\n/proofgate automerge',
      createdAt: '2026-01-05T10:05:00.000Z',
      updatedAt: '2026-01-05T10:05:00.000Z',
    },
    { id: 'c2', author: 'tess', authorType: 'User', body: 'no command here', createdAt: '2026-01-05T10:06:00.000Z', updatedAt: '2026-01-05T10:06:00.000Z' },
  ],
  merge: null,
  revision: 3,
} as unknown as ChangeRecord;
const facts = (over: Partial<ChangeFacts> = {}): ChangeFacts => ({
  repo: 'r',
  record,
  forgeEvents: [{ type: 'head-pushed', data: { before: A, headSha: B, at: '2026-01-05T10:03:00.000Z' }, recordedAt: '2026-01-05T10:03:00.000Z' }],
  branchSha: B,
  ledger: { state: initialLedger('7'), steps: [] },
  checks: [],
  bindings: new Map(),
  ...over,
});

describe('projectChange', () => {
  it('orders the timeline by time, keeps only command comments, and takes the head from the branch', () => {
    const projected = projectChange(
      facts({
        ledger: {
          state: initialLedger('7'),
          steps: [{ step: 'decision', at: '2026-01-05T10:04:00.000Z', kind: 'wait', reason: 'checks pending: test', head: B }],
        },
      }),
    );
    expect(projected.timeline.map((item) => [item.kind, item.at.slice(11, 16)])).toEqual([
      ['opened', '10:00'],
      ['push', '10:03'],
      ['decision', '10:04'],
      ['command', '10:05'],
    ]);
    expect(projected.timeline[3]).toMatchObject({ actor: 'tess', text: '/proofgate automerge' });
    expect(projected.row).toMatchObject({ headSha: B, stage: 'waiting', stageDetail: 'checks pending: test', updatedAt: '2026-01-05T10:06:00.000Z' });
  });

  it('a merged change shows the reviewed head and the merge commit; a gone branch falls back to the opened head', () => {
    const merged = projectChange(facts({ record: { ...record, state: 'merged', merge: { mergeCommitSha: C, reviewedHeadSha: B, baseBefore: A } } }));
    expect(merged.row).toMatchObject({ stage: 'merged', headSha: B, mergeCommit: C });
    expect(projectChange(facts({ branchSha: null })).row.headSha).toBe(A);
  });

  it('binds a verdict to the bindings of its signed marker, per head', () => {
    const bindings = { head: B, diff: 'sha256:1', contract: 'sha256:2', config: 'sha256:3' };
    let state = initialLedger('7');
    state = { ...state, reviews: [{ id: 'rv', head: B, status: 'finished', verdict: 'CONFIRMED', at: '2026-01-05T10:07:00.000Z' }] };
    const projected = projectChange(
      facts({
        ledger: { state, steps: [{ step: 'review-verdict', at: '2026-01-05T10:08:00.000Z', review: 'rv', head: B, verdict: 'CONFIRMED' }] },
        bindings: new Map([['rv', bindings]]),
      }),
    );
    expect(projected.timeline.find((item) => item.kind === 'verdict')).toMatchObject({ verdict: 'CONFIRMED', bindings, head: B });
    expect(projected.heads).toEqual([{ head: B, verdicts: [{ review: 'rv', verdict: 'CONFIRMED', at: '2026-01-05T10:08:00.000Z', bindings }], checks: [] }]);
    expect(projected.reviews).toEqual([
      { reviewId: 'rv', head: B, startedAt: '2026-01-05T10:07:00.000Z', finishedAt: '2026-01-05T10:08:00.000Z', verdict: 'CONFIRMED' },
    ]);
  });
});

describe('percentile', () => {
  it.each([
    [[], 0.5, null],
    [[7], 0.9, 7],
    [[1, 2, 3, 4], 0.5, 2],
    [[4, 3, 2, 1], 0.9, 4],
    [[10, 20, 30, 40, 50, 60, 70, 80, 90, 100], 0.9, 90],
    [[10, 20, 30, 40, 50, 60, 70, 80, 90, 100], 0.5, 50],
  ] as [number[], number, number | null][])('%j at %d is %s', (values, p, expected) => {
    expect(percentile(values, p)).toBe(expected);
  });
});

describe('summarize', () => {
  const zero = { arriving: 0, reviewing: 0, proving: 0, repairing: 0, waiting: 0, merged: 0, blocked: 0, closed: 0 };
  it('groups lead times by the UTC day of the merge and skips unreadable spans', () => {
    const summary = summarize(
      [
        { automergeAt: '2026-01-05T10:00:00Z', mergedAt: '2026-01-05T10:01:00Z' },
        { automergeAt: '2026-01-05T10:00:00Z', mergedAt: '2026-01-05T10:10:00Z' },
        { automergeAt: '2026-01-05T23:59:00Z', mergedAt: '2026-01-06T00:01:00Z' },
        { automergeAt: 'never', mergedAt: '2026-01-06T00:01:00Z' },
        { automergeAt: '2026-01-07T00:00:00Z', mergedAt: '2026-01-06T00:00:00Z' },
      ],
      [
        { startedAt: '2026-01-05T10:00:00Z', finishedAt: '2026-01-05T10:00:30Z' },
        { startedAt: '2026-01-05T09:00:00Z', finishedAt: '2026-01-05T09:00:05Z' },
      ],
      [
        { at: '2026-01-05T10:00:00Z', depth: 1 },
        { at: '2026-01-05T10:05:00Z', depth: 0 },
      ],
      zero,
      new Date('2026-01-05T11:00:00Z'),
    );
    const day5 = Date.parse('2026-01-05T00:00:00Z') / 1000;
    expect(summary.mergeLeadTime).toEqual({ day: [day5, day5 + 86_400], p50: [60, 120], p90: [600, 120], count: [2, 1] });
    // Ordered by the end of the review.
    expect(summary.reviewDuration.seconds).toEqual([5, 30]);
    // The last sample is carried to now.
    expect(summary.queueDepth.depth).toEqual([1, 0, 0]);
    expect(summary.queueDepth.at[2]).toBe(Date.parse('2026-01-05T11:00:00Z') / 1000);
  });
});

describe('mergeQueueDepth', () => {
  const waiting = (n: number) => ({ entries: Array.from({ length: n }, (_, i) => ({ change: String(i) })) }) as unknown as QueueState;
  it.each([
    [[], 0],
    [[0], 0],
    [[2], 2],
    [[2, 3], 5],
  ] as const)('queues of %j waiting changes: %d', (sizes, expected) => {
    expect(mergeQueueDepth(sizes.map(waiting))).toBe(expected);
  });
});

describe('listQueryFrom', () => {
  it.each([
    ['', { stage: null, repo: null, limit: 100, cursor: null }],
    ['stage=blocked&repo=r&limit=5&cursor=12', { stage: 'blocked', repo: 'r', limit: 5, cursor: 12 }],
    ['stage=&limit=', { stage: null, repo: null, limit: 100, cursor: null }],
  ])('%s', (query, expected) => {
    expect(listQueryFrom(new URLSearchParams(query))).toEqual(expected);
  });
  it.each(['stage=nope', 'limit=0', 'limit=1001', 'limit=abc', 'cursor=-1', 'cursor=0', 'stage=merged&stage=blocked', `repo=${'x'.repeat(201)}`])(
    '%s is INVALID_INPUT',
    (query) => {
      let caught: unknown;
      try {
        listQueryFrom(new URLSearchParams(query));
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(ProofgateError);
      expect((caught as ProofgateError).code).toBe('INVALID_INPUT');
    },
  );
});

async function getJson(url: string, path: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const target = new URL(path, url);
  const { status, json } = await rawRequest(url, `${target.pathname}${target.search}`);
  return { status, json };
}

const SEED: SeedChange[] = [
  { kind: 'merged', branch: 'merged-one', title: 'Merged one' },
  { kind: 'blocked', branch: 'blocked-one', title: 'Blocked one', reason: 'REFUTED: the parser breaks on empty input' },
  { kind: 'waiting', branch: 'waiting-one', title: 'Waiting one' },
  { kind: 'reviewing', branch: 'reviewing-one', title: 'Reviewing one' },
  { kind: 'arriving', branch: 'arriving-one', title: 'Arriving one' },
];

describe('the stored projection through the read API', () => {
  it('lists changes by stage, pages them, shows a timeline with bindings, and follows new ledger events', async () => {
    const seed = await seedRepository(SEED);
    cleanups.push(seed.cleanup);
    const service = await serveSeed(seed);
    cleanups.push(() => service.stop(0));

    const all = await getJson(service.url, '/api/changes?limit=10');
    expect(all.status).toBe(200);
    const rows = all.json.changes as Record<string, unknown>[];
    // Newest first.
    expect(rows.map((row) => [row.number, row.stage])).toEqual([
      [5, 'arriving'],
      [4, 'reviewing'],
      [3, 'waiting'],
      [2, 'blocked'],
      [1, 'merged'],
    ]);
    expect(all.json.nextCursor).toBeNull();
    expect(all.json.repos).toEqual([rows[0]?.repo]);
    expect(rows[3]).toMatchObject({ stageDetail: 'REFUTED: the parser breaks on empty input', stageCode: 'review-refuted', head: 'blocked-one', base: 'main' });
    expect(rows[2]).toMatchObject({ stageDetail: 'checks pending: test' });
    expect(rows[4]).toMatchObject({ mergeCommit: seed.repo.sha('main'), automergeOn: true });

    const page1 = await getJson(service.url, '/api/changes?limit=2');
    expect((page1.json.changes as { number: number }[]).map((row) => row.number)).toEqual([5, 4]);
    const page2 = await getJson(service.url, `/api/changes?limit=2&cursor=${String(page1.json.nextCursor)}`);
    expect((page2.json.changes as { number: number }[]).map((row) => row.number)).toEqual([3, 2]);
    const blocked = await getJson(service.url, '/api/changes?stage=blocked');
    expect((blocked.json.changes as { id: string }[]).map((row) => row.id)).toEqual([seed.ids[1]]);
    expect((await getJson(service.url, '/api/changes?repo=elsewhere')).json.changes).toEqual([]);
    expect((await getJson(service.url, '/api/changes?stage=sideways')).status).toBe(400);

    const timeline = await getJson(service.url, `/api/changes/${seed.ids[1]}/timeline`);
    expect(timeline.status).toBe(200);
    const items = timeline.json.timeline as { kind: string; at: string; bindings?: unknown; text: string }[];
    expect(items.map((item) => item.kind)).toEqual(['opened', 'command', 'review', 'verdict', 'decision']);
    const times = items.map((item) => Date.parse(item.at));
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    const head = seed.repo.sha('blocked-one');
    expect(items[3]?.bindings).toEqual({
      head,
      diff: expect.stringMatching(/^sha256:/),
      contract: expect.stringMatching(/^sha256:/),
      config: expect.stringMatching(/^sha256:/),
    });
    expect(timeline.json.heads).toEqual([{ head, verdicts: [expect.objectContaining({ verdict: 'REFUTED', bindings: items[3]?.bindings })], checks: [] }]);
    expect((await getJson(service.url, '/api/changes/99/timeline')).status).toBe(404);

    const summary = await getJson(service.url, '/api/summary');
    expect(summary.status).toBe(200);
    expect((summary.json.mergeLeadTime as { count: number[] }).count).toEqual([1]);
    expect((summary.json.reviewDuration as { seconds: number[] }).seconds).toHaveLength(3);
    expect(summary.json.stages).toMatchObject({ merged: 1, blocked: 1, waiting: 1, reviewing: 1, arriving: 1 });

    // A new ledger event moves the change on the board without a restart (the service follows the store).
    const storage = createLocalRunStorage({ directory: seed.data, namespace: AUTOMERGE_NAMESPACE, policy: defaultStoragePolicy });
    try {
      const ledger = new LedgerStore(storage.eventStore);
      await ledger.step(seed.ids[2] as string, 'decision', {
        kind: 'block',
        code: 'checks-failed',
        reason: 'check test failed',
        head: seed.repo.sha('waiting-one'),
      });
    } finally {
      await storage.close();
    }
    await until(async () => {
      const answer = await getJson(service.url, '/api/changes?stage=blocked');
      return (answer.json.changes as { id: string }[]).some((row) => row.id === seed.ids[2]);
    }, 'the new block reached the projection');

    // A push to a change's branch with git alone (no forge event) moves its row's head.
    const pushed = seed.repo.commit('arriving-one', { 'more.txt': 'more\n' }, 'more');
    await until(async () => {
      const answer = await getJson(service.url, '/api/changes?stage=arriving');
      return (answer.json.changes as { id: string; headSha: string }[]).some((row) => row.id === seed.ids[4] && row.headSha === pushed);
    }, "the pushed head reached the change's row");

    // A restart rebuilds the rows from the events.
    await service.stop(0);
    const again = await serveSeed(seed);
    cleanups.push(() => again.stop(0));
    const rebuilt = await getJson(again.url, '/api/changes?stage=blocked');
    expect((rebuilt.json.changes as { id: string }[]).map((row) => row.id).sort()).toEqual([seed.ids[1], seed.ids[2]].sort());
  });
});

describe('the merge queue in the projection', () => {
  it('a queued change waits on its place in line; its timeline holds the queue events; the depth chart counts the queue; a rebuild agrees', async () => {
    const scenario = await queueScenario();
    cleanups.push(scenario.cleanup);
    const { fixture } = scenario;
    const sources = { forge: fixture.forge, ledger: fixture.automerge.env.store, secret: fixture.automerge.env.secret };
    const projection = openChangeProjection(fixture.dataDir, sources);
    cleanups.push(() => projection.close());
    await projection.rebuild();
    const [a, hostile, b] = scenario.ids;

    for (const [index, id] of scenario.ids.entries()) {
      expect(projection.change(id)).toMatchObject({
        stage: 'waiting',
        stageCode: 'merge-queued',
        stageDetail: `merge queue (position ${index + 1} of 3, base main); the queue is paused`,
      });
    }
    // The hostile title is kept as data (the dashboard and the CLI show it as text).
    expect(projection.change(hostile)?.title).toBe(HOSTILE_TITLE);
    expect(projection.timeline(hostile)?.queue).toMatchObject({ base: 'main', status: 'waiting', position: 2, of: 3, paused: true, candidate: null });
    expect(
      projection
        .timeline(hostile)
        ?.timeline.filter((item) => item.kind === 'queue')
        .map((item) => item.queueEvent),
    ).toEqual(['enqueued']);
    expect(projection.summary().queueDepth.depth.slice(0, 3)).toEqual([1, 2, 3]);

    await scenario.release();
    await projection.refresh();
    expect(projection.change(a)).toMatchObject({ stage: 'merged' });
    expect(projection.change(hostile)).toMatchObject({ stage: 'merged' });
    expect(projection.change(b)).toMatchObject({ stage: 'blocked', stageDetail: expect.stringMatching(/^left the merge queue of main: check "test" failed/) });
    const events = (id: string) => projection.timeline(id)?.timeline.filter((item) => item.kind === 'queue') ?? [];
    expect(events(a).map((item) => item.queueEvent)).toEqual(['enqueued', 'candidate', 'checks', 'bisect', 'candidate', 'checks', 'landed']);
    expect(events(b).map((item) => item.queueEvent)).toEqual(['enqueued', 'candidate', 'checks', 'bisect', 'candidate', 'checks', 'ejected']);
    expect(events(b).map((item) => item.conclusion ?? null)).toEqual([null, null, 'failure', null, null, 'failure', 'failure']);
    expect(events(a)[6]?.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(events(b)[1]?.text).toMatch(/^in candidate \S+ \(3 of 3\) on main, tip [0-9a-f]{12}$/);
    expect(events(b)[3]?.text).toBe('bisecting 3 suspects after test (failure) failed');
    expect(events(b)[6]?.text).toMatch(/^ejected from the merge queue of main: .*check "test" failed/);
    expect(projection.timeline(b)?.queue).toMatchObject({ status: 'ejected', position: null, candidate: null });
    // Queue depth over time: the line filled to 3, the two that passed landed together, the third was ejected.
    expect(projection.summary().queueDepth.depth.slice(0, 5)).toEqual([1, 2, 3, 1, 0]);

    // A restart rebuilds the same history from the queue's stream.
    const again = openChangeProjection(fixture.dataDir, sources);
    cleanups.push(() => again.close());
    await again.rebuild();
    for (const id of scenario.ids) expect(again.timeline(id)).toEqual(projection.timeline(id));
    expect(again.summary().queueDepth.depth.slice(0, 5)).toEqual([1, 2, 3, 1, 0]);
  });
});
