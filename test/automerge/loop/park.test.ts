/**
 * Parking instead of holding a worker: a job started with `park` that meets
 * an open wait window records the window (a `wait-parked` step) and ends
 * `parked` with `wakeAt`; the next run takes the window back, so its deadline
 * holds across runs, and an expired window ends as it always did. The change's
 * check is held pending by the test (a CI that has not reported yet), and the
 * clock is a manual one: nothing sleeps.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  AutomergeRouter,
  ChangeJobs,
  parkedWindow,
  type AutomergeEnvironment,
  type ChangeJobsOptions,
  type JobResult,
  type LoopOutcome,
  type StepEvent,
} from '../../../src/automerge/loop/index.js';
import { fixedClock, type ManualClock } from '../../../src/core/index.js';
import { within } from '../../support/wait.js';
import { loopFixture, MAINTAINER, type LoopFixture } from './local-support.js';

const WAIT_MS = 60_000;
const POLL_MS = 5_000;

interface Gate {
  readonly promise: Promise<void>;
  open(): void;
}

function gate(): Gate {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

interface Parking {
  readonly f: LoopFixture;
  readonly clock: ManualClock;
  readonly jobs: ChangeJobs;
  readonly router: AutomergeRouter;
  /** Lets the held checks run (they run for real and report). */
  readonly checks: Gate;
  /** Resolves when a check run the test let go has finished. */
  readonly checksRan: Promise<void>;
  /** Resolves when a job first asked for the checks to start (its loop is running). */
  readonly checksAsked: Promise<void>;
}

const opened: Parking[] = [];
let fixture: LoopFixture | null = null;
afterEach(async () => {
  for (const p of opened.splice(0)) {
    p.checks.open();
    await p.jobs.close();
  }
  await fixture?.cleanup();
  fixture = null;
});

/**
 * The local wiring on a manual clock, with its own jobs (`options`, e.g.
 * `park`) whose checks start only once the test opens `checks`: until then the
 * change's check is pending. `realChecks: false` keeps it pending for good.
 */
async function parking(options: ChangeJobsOptions, realChecks = true): Promise<Parking> {
  const clock = fixedClock(new Date().toISOString());
  const f = (fixture = await loopFixture({ automerge: { clock, waits: { transientWaitMs: WAIT_MS, transientPollMs: POLL_MS } } }));
  const checks = gate();
  let ran!: () => void;
  const checksRan = new Promise<void>((resolve) => (ran = resolve));
  let asked!: () => void;
  const checksAsked = new Promise<void>((resolve) => (asked = resolve));
  const start = f.automerge.env.startChecks;
  const env: AutomergeEnvironment = {
    ...f.automerge.env,
    startChecks: async (changeId, head, signal) => {
      asked();
      await Promise.race([checks.promise, new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()))]);
      if (!realChecks || signal.aborted || start === undefined) return;
      await start(changeId, head, signal);
      ran();
    },
  };
  const jobs = new ChangeJobs(env, { owner: 'worker-1', ...options });
  const p = { f, clock, jobs, router: new AutomergeRouter(jobs, { restartOnEvents: false }), checks, checksRan, checksAsked };
  opened.push(p);
  return p;
}

/** Post `/proofgate automerge` as the maintainer through `p`'s router: the job it starts. */
async function automerge(p: Parking, id: string): Promise<{ readonly done: Promise<JobResult> }> {
  const comment = await p.f.forge.commentAs(id, '/proofgate automerge', MAINTAINER);
  const routed = await p.router.handleComment(id, comment);
  if (routed.dispatch === null) throw new Error('no job was started');
  return { done: routed.dispatch.done };
}

async function ran(done: Promise<JobResult>): Promise<LoopOutcome> {
  const result = await within(done, 'the job ends');
  if (result.kind !== 'ran') throw new Error(`the job did not run: ${result.kind}`);
  return result.outcome;
}

async function stepsOf(p: Parking, id: string, name: string): Promise<StepEvent[]> {
  return (await p.f.automerge.env.store.load(id)).steps.filter((step) => step.step === name);
}

const iso = (ms: number): string => new Date(ms).toISOString();

describe('a job with park', () => {
  it('parks on a pending check with wakeAt and its lease released; once the check reported, the next run merges', async () => {
    const p = await parking({ park: true });
    const id = await p.f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const head = p.f.repo.sha('feature');
    const t0 = p.clock.now().getTime();

    const parked = await ran((await automerge(p, id)).done);
    expect(parked.kind).toBe('parked');
    expect(parked.code).toBe('checks-pending');
    expect(parked.verdict).toBe('CONFIRMED');
    expect(parked.wakeAt).toBe(iso(t0 + POLL_MS));
    expect(p.jobs.active(id)).toBe(false);
    const [step] = await stepsOf(p, id, 'wait-parked');
    expect(step).toMatchObject({ window: 'transient', head, openedAt: iso(t0), deadline: iso(t0 + WAIT_MS), pollMs: POLL_MS, wakeAt: iso(t0 + POLL_MS) });
    expect(await stepsOf(p, id, 'job-finished')).toEqual([expect.objectContaining({ outcome: 'parked', wakeAt: iso(t0 + POLL_MS) })]);
    const { lease, typedSteps } = await p.f.automerge.env.store.load(id);
    expect(lease).toMatchObject({ owner: 'worker-1', released: true });
    // Both steps are typed (validated against their schema when read).
    expect(typedSteps.map((s) => s.step)).toEqual(expect.arrayContaining(['wait-parked', 'job-finished']));
    expect(p.f.progress.some((line) => line.text.startsWith(`parked until ${iso(t0 + POLL_MS)}`))).toBe(true);

    // The check reports; the queue runs the change again: it merges.
    p.checks.open();
    await within(p.checksRan, 'the check ran');
    const merged = await ran(p.jobs.dispatch(id).done);
    expect(merged.kind).toBe('merged');
    expect(merged.head).toBe(head);
    expect(merged.wakeAt).toBeUndefined();
    expect(p.f.repo.git(['show', 'main:feature.txt'])).toBe('a feature');
  });

  it("keeps the window's deadline across runs, and a run past it ends as an expired window, not a fresh one", async () => {
    const p = await parking({ park: true }, false);
    const id = await p.f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const head = p.f.repo.sha('feature');
    const t0 = p.clock.now().getTime();

    const first = await ran((await automerge(p, id)).done);
    expect(first.kind).toBe('parked');
    expect(first.wakeAt).toBe(iso(t0 + POLL_MS));

    // Later, still inside the window: the same window, and the wake-up is its deadline (sooner than the poll).
    p.clock.advance(WAIT_MS - 1_000);
    const second = await ran(p.jobs.dispatch(id).done);
    expect(second.kind).toBe('parked');
    expect(second.wakeAt).toBe(iso(t0 + WAIT_MS));
    const windows = (await stepsOf(p, id, 'wait-parked')).map((step) => [step.window, step.head, step.openedAt, step.deadline]);
    expect(windows).toEqual([
      ['transient', head, iso(t0), iso(t0 + WAIT_MS)],
      ['transient', head, iso(t0), iso(t0 + WAIT_MS)],
    ]);

    // Past the deadline: the window restored from the ledger has expired; the run ends waiting, as without park.
    p.clock.advance(1_001);
    const third = await ran(p.jobs.dispatch(id).done);
    expect(third.kind).toBe('waiting');
    expect(third.wakeAt).toBeUndefined();
    expect(third.reason).toContain(`transient wait window of ${WAIT_MS} ms expired`);
    expect(await stepsOf(p, id, 'wait-expired')).toHaveLength(1);
    expect(await stepsOf(p, id, 'wait-parked')).toHaveLength(2);
    expect((await stepsOf(p, id, 'job-finished')).map((step) => step.outcome)).toEqual(['parked', 'parked', 'waiting']);

    // After the expiry the next run opens a fresh window (the expired one is closed).
    const fourth = await ran(p.jobs.dispatch(id).done);
    expect(fourth.kind).toBe('parked');
    const latest = (await stepsOf(p, id, 'wait-parked')).at(-1);
    expect(latest).toMatchObject({ openedAt: iso(t0 + WAIT_MS + 1), deadline: iso(t0 + 2 * WAIT_MS + 1) });
  });

  it('a dispatch that joins a parking job makes it run once more, in the same window', async () => {
    const p = await parking({ park: true }, false);
    const id = await p.f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const t0 = p.clock.now().getTime();
    const comment = await p.f.forge.commentAs(id, '/proofgate automerge', MAINTAINER);
    const routed = await p.router.handleComment(id, comment);
    // The job's loop runs (it asked for the checks): a second dispatch joins it.
    await within(p.checksAsked, 'the job starts the checks');
    const joined = p.jobs.dispatch(id);
    expect(joined.joined).toBe(true);
    const outcome = await ran(joined.done);
    expect(outcome.kind).toBe('parked');
    // Two rounds of one job, both parked in the one window; one job-finished.
    const windows = (await stepsOf(p, id, 'wait-parked')).map((step) => [step.openedAt, step.deadline]);
    expect(windows).toEqual([
      [iso(t0), iso(t0 + WAIT_MS)],
      [iso(t0), iso(t0 + WAIT_MS)],
    ]);
    expect(await stepsOf(p, id, 'job-finished')).toHaveLength(1);
    expect(await routed.dispatch?.done).toEqual(await joined.done);
  });

  it('without park the job still waits in its process until the check reports, then merges', async () => {
    const p = await parking({});
    const id = await p.f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const { done } = await automerge(p, id);
    await within(p.clock.whenPending(), 'the job waits on its poll timer');
    expect(p.jobs.active(id)).toBe(true);
    p.checks.open();
    const merged = await ran(done);
    expect(merged.kind).toBe('merged');
    expect(await stepsOf(p, id, 'wait-parked')).toEqual([]);
  });
});

describe('parkedWindow (pure)', () => {
  const head = 'a'.repeat(40);
  const parkedStep = (openedAt: string): StepEvent => ({
    step: 'wait-parked',
    at: openedAt,
    window: 'review',
    head,
    openedAt,
    deadline: '2030-01-01T00:10:00.000Z',
    pollMs: 15_000,
    wakeAt: '2030-01-01T00:00:15.000Z',
    reason: 'approvals missing',
  });

  it('takes the last parked window back unless a later decision other than a wait, or its expiry, closed it', () => {
    const window = { kind: 'review', head, openedAt: Date.parse('2030-01-01T00:00:00.000Z'), deadline: Date.parse('2030-01-01T00:10:00.000Z'), pollMs: 15_000 };
    expect(parkedWindow([])).toBeNull();
    expect(parkedWindow([parkedStep('2030-01-01T00:00:00.000Z')])).toEqual(window);
    expect(
      parkedWindow([parkedStep('2030-01-01T00:00:00.000Z'), { step: 'decision', at: 't', kind: 'wait', reason: 'r' }, { step: 'job-finished', at: 't' }]),
    ).toEqual(window);
    expect(parkedWindow([parkedStep('2030-01-01T00:00:00.000Z'), { step: 'decision', at: 't', kind: 'review', reason: 'r' }])).toBeNull();
    expect(parkedWindow([parkedStep('2030-01-01T00:00:00.000Z'), { step: 'wait-expired', at: 't', window: 'review' }])).toBeNull();
    expect(parkedWindow([{ step: 'decision', at: 't', kind: 'review', reason: 'r' }, parkedStep('2030-01-01T00:00:00.000Z')])).toEqual(window);
  });
});
