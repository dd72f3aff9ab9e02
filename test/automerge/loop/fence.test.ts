/**
 * Fencing by the lease: a job whose process was paused past its lease, while
 * another owner took the lease over and ran the change, makes no further
 * effect when it resumes. Two owners share one event store (as two processes
 * share one database); each has its own clock, so the paused one's time
 * stands still while the other's moves past the lease. Every forge write and
 * every store append is counted per owner.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  AutomergeRouter,
  ChangeJobs,
  ChangeSignals,
  LedgerStore,
  automergeStream,
  fencedForge,
  type AutomergeEnvironment,
  type JobResult,
  type Reviewer,
} from '../../../src/automerge/loop/index.js';
import { fixedClock, isProofgateError, type ManualClock } from '../../../src/core/index.js';
import type { ChangeSnapshot, Forge, ForgeComment } from '../../../src/forge/port.js';
import type { EventStore } from '../../../src/storage/ports.js';
import { defaultStoragePolicy } from '../../../src/storage/policy.js';
import type { RunStorage } from '../../../src/storage/policy-types.js';
import { createLocalRunStorage } from '../../../src/storage/sqlite/index.js';
import { until, within } from '../../support/wait.js';
import { loopFixture, MAINTAINER, type LoopFixture } from './local-support.js';

const LEASE_MS = 30_000;

interface Deferred<T = void> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
}

function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => (resolve = done));
  return { promise, resolve };
}

/** Every write an owner made: to the forge (method name) or to the event store (`append`). */
type Writes = string[];

const WRITE_METHODS = ['createComment', 'editComment', 'addLabels', 'removeLabel', 'merge', 'pushBranch', 'publish'] as const;

/** `inner`, with each write recorded in `writes` when it reaches the forge. */
function countingForge(inner: Forge, writes: Writes): Forge {
  return {
    kind: inner.kind,
    selfLogin: inner.selfLogin,
    snapshot: (id) => inner.snapshot(id),
    readFile: (ref, path) => inner.readFile(ref, path),
    permission: (login) => inner.permission(login),
    trustedBranch: () => inner.trustedBranch(),
    createComment: (id, body) => (writes.push('createComment'), inner.createComment(id, body)),
    editComment: (id, commentId, body) => (writes.push('editComment'), inner.editComment(id, commentId, body)),
    addLabels: (id, labels) => (writes.push('addLabels'), inner.addLabels(id, labels)),
    removeLabel: (id, label) => (writes.push('removeLabel'), inner.removeLabel(id, label)),
    merge: (id, request) => (writes.push('merge'), inner.merge(id, request)),
    pushBranch: (request) => (writes.push('pushBranch'), inner.pushBranch(request)),
    workspace: {
      prepare: (snapshot) => inner.workspace.prepare(snapshot),
      publish: (dir, request) => (writes.push('publish'), inner.workspace.publish(dir, request)),
    },
  };
}

/**
 * `inner`, with each append recorded in `writes` (and the step names it
 * appends in `steps`); `pauseReads` makes every read wait until `resume`.
 */
function countingEvents(inner: EventStore, writes: Writes, steps: string[] = []) {
  let gate: Deferred | null = null;
  let paused: Deferred | null = null;
  const events: EventStore = {
    async append(streamId, expectedRevision, batch) {
      const result = await inner.append(streamId, expectedRevision, batch);
      writes.push('append');
      for (const event of batch) {
        const step = (event.data as { step?: unknown }).step;
        if (event.type === 'step' && typeof step === 'string') steps.push(step);
      }
      return result;
    },
    async read(streamId, options) {
      if (gate !== null) {
        paused?.resolve();
        await gate.promise;
      }
      return inner.read(streamId, options);
    },
    revision: (streamId) => inner.revision(streamId),
    listStreams: (prefix) => inner.listStreams(prefix),
    readAll: (options) => inner.readAll(options),
  };
  return {
    events,
    /** From now on every read waits; resolves once one does. */
    pauseReads(): Promise<void> {
      gate = deferred();
      paused = deferred();
      return paused.promise;
    },
    resume(): void {
      gate?.resolve();
      gate = null;
    },
  };
}

interface Owner {
  readonly name: string;
  readonly env: AutomergeEnvironment;
  readonly jobs: ChangeJobs;
  readonly clock: ManualClock;
  /** Paces the owner's lease renewals: moved only when a test says so. */
  readonly renewal: ManualClock;
  readonly writes: Writes;
  readonly events: ReturnType<typeof countingEvents>;
  readonly steps: string[];
}

/** One owner of jobs on the fixture's change stream: its own clock, store, forge counter and signals. */
function owner(f: LoopFixture, name: string, start: string, changes: Partial<AutomergeEnvironment> = {}): Owner {
  const clock = fixedClock(start);
  const renewal = fixedClock(start);
  const writes: Writes = [];
  const steps: string[] = [];
  const events = countingEvents(f.automerge.env.store.events, writes, steps);
  const env: AutomergeEnvironment = {
    ...f.automerge.env,
    forge: countingForge(f.forge, writes),
    store: new LedgerStore(events.events, clock),
    signals: new ChangeSignals(clock),
    clock,
    ...changes,
  };
  const jobs = new ChangeJobs(env, { owner: name, leaseMs: LEASE_MS, renewalClock: renewal });
  return { name, env, jobs, clock, renewal, writes, events, steps };
}

const owners: Owner[] = [];
/** What a test paused, let go at its end whatever happened (so its jobs can end). */
const pauses: Array<() => void> = [];
let fixture: LoopFixture | null = null;
afterEach(async () => {
  for (const resume of pauses.splice(0)) resume();
  for (const o of owners.splice(0)) await o.jobs.close();
  await fixture?.cleanup();
  fixture = null;
});

/** Post `/proofgate automerge` as the maintainer and route it through `o`'s jobs: the job it starts (its result to come). */
async function automergeBy(f: LoopFixture, o: Owner, id: string): Promise<{ readonly done: Promise<JobResult> }> {
  const comment = await f.forge.commentAs(id, '/proofgate automerge', MAINTAINER);
  const routed = await new AutomergeRouter(o.jobs, { restartOnEvents: false }).handleComment(id, comment);
  if (routed.dispatch === null) throw new Error('no job was started');
  return { done: routed.dispatch.done };
}

function statusComments(comments: readonly ForgeComment[]): ForgeComment[] {
  return comments.filter((c) => c.author === 'proofgate' && c.body.includes('"kind":"automerge-status"'));
}

describe('a job that lost its lease makes no further effect', () => {
  it('A, paused in its review past its lease while B took over and merged, ends lease-lost with no write after the takeover', async () => {
    const f = (fixture = await loopFixture());
    const start = new Date().toISOString();
    const entered = deferred();
    const release = deferred();
    pauses.push(() => release.resolve());
    const review = f.automerge.env.reviewer;
    // A's reviewer answers, then A is paused before the effect that follows (the review comment).
    const pausedReviewer: Reviewer = async (request) => {
      const result = await review(request);
      entered.resolve();
      await release.promise;
      return result;
    };
    // A starts no checks of its own (B runs them): A's only work is the review it is paused in.
    const a = owner(f, 'owner-a', start, { reviewer: pausedReviewer, startChecks: undefined });
    const b = owner(f, 'owner-b', start);
    owners.push(a, b);
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const head = f.repo.sha('feature');
    const base = f.repo.sha('main');
    const progress = f.progress;

    const { done: doneA } = await automergeBy(f, a, id);
    await within(entered.promise, "A's review answered");
    // A's lease ran out on B's clock (A's own clock stands still: A is paused); B takes the change over.
    b.clock.advance(LEASE_MS + 1);
    const aWritesAtTakeover = a.writes.length;
    const dispatchB = b.jobs.dispatch(id);
    expect(dispatchB.joined).toBe(false);
    const resultB = await within(dispatchB.done, "B's job ends");
    expect(resultB.kind).toBe('ran');
    if (resultB.kind !== 'ran') return;
    expect(resultB.outcome.kind).toBe('merged');
    expect(resultB.outcome.head).toBe(head);
    expect(b.writes).toContain('merge');

    // A resumes: its next effect (the review comment) meets the fence.
    release.resolve();
    const resultA = await within(doneA, "A's job ends");
    expect(resultA).toMatchObject({ kind: 'lease-lost', holder: { owner: 'owner-b' } });
    expect(a.writes.slice(aWritesAtTakeover)).toEqual([]);
    expect(progress.some((line) => line.changeId === id && line.text.startsWith('lease lost to owner-b'))).toBe(true);

    // One merge on the base (B's); one status comment (found by its marker, edited by both); A finished nothing.
    expect(f.repo.git(['rev-list', '--count', `${base}..main`])).toBe('1');
    const snapshot = await f.forge.snapshot(id);
    expect(snapshot.state).toBe('merged');
    expect(statusComments(snapshot.comments)).toHaveLength(1);
    const { steps, lease } = await f.automerge.env.store.load(id);
    expect(steps.filter((step) => step.step === 'job-finished').map((step) => step.owner)).toEqual(['owner-b']);
    expect(a.steps).not.toContain('job-finished');
    expect(lease).toMatchObject({ owner: 'owner-b', released: true });
  });

  it('a renewal that finds the lease taken aborts A at once; A ends lease-lost without another write', async () => {
    const f = (fixture = await loopFixture());
    const start = new Date().toISOString();
    const entered = deferred();
    let sawAbort = false;
    // A is paused in its review until its job is aborted.
    const abortableReviewer: Reviewer = async (request) => {
      entered.resolve();
      await new Promise<void>((resolve) => request.signal?.addEventListener('abort', () => resolve()));
      sawAbort = request.signal?.aborted === true;
      throw new Error('review aborted');
    };
    const a = owner(f, 'owner-a', start, { reviewer: abortableReviewer, startChecks: undefined });
    const b = owner(f, 'owner-b', start);
    owners.push(a, b);
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });

    const { done: doneA } = await automergeBy(f, a, id);
    await within(entered.promise, "A's review started");
    b.clock.advance(LEASE_MS + 1);
    const taken = await b.env.store.acquireLease(id, 'owner-b', LEASE_MS);
    expect(taken.acquired).toBe(true);
    const aWritesAtTakeover = a.writes.length;

    // A's next renewal (a third of the lease later on its renewal clock) finds B's lease.
    a.renewal.advance(LEASE_MS / 3);
    const resultA = await within(doneA, "A's job ends");
    expect(sawAbort).toBe(true);
    expect(resultA).toMatchObject({ kind: 'lease-lost', holder: { owner: 'owner-b', released: false } });
    expect(a.writes.slice(aWritesAtTakeover)).toEqual([]);
    const { lease, steps } = await f.automerge.env.store.load(id);
    expect(lease).toMatchObject({ owner: 'owner-b', released: false });
    expect(steps.some((step) => step.step === 'review-failed')).toBe(false);
    expect(steps.some((step) => step.step === 'job-finished')).toBe(false);
  });

  /** The step after whose append A pauses, and what A's next effect would be. */
  const PAUSE_POINTS = [
    {
      after: 'its merge decision',
      next: 'the merge attempt (a fenced store append)',
      matches: (data: Record<string, unknown>) => data.step === 'decision' && data.kind === 'merge',
    },
    { after: 'its merge attempt', next: 'the merge', matches: (data: Record<string, unknown>) => data.step === 'merge-attempt' },
  ];

  it.each(PAUSE_POINTS)('A, paused right after recording $after, never makes $next once B took over; B merges once', async ({ matches }) => {
    const f = (fixture = await loopFixture());
    const start = new Date().toISOString();
    const a = owner(f, 'owner-a', start);
    const b = owner(f, 'owner-b', start);
    owners.push(a, b);
    pauses.push(() => a.events.resume());
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const head = f.repo.sha('feature');
    const base = f.repo.sha('main');

    // Right after that step is stored, A's process pauses: its next read of the store (a fence's check) waits.
    let paused: Promise<void> | null = null;
    let aWritesAtPause = -1;
    const append = a.events.events.append.bind(a.events.events);
    a.events.events.append = async (streamId, expected, batch) => {
      const result = await append(streamId, expected, batch);
      if (paused === null && batch.some((event) => event.type === 'step' && matches(event.data as Record<string, unknown>))) {
        aWritesAtPause = a.writes.length;
        paused = a.events.pauseReads();
      }
      return result;
    };
    const { done: doneA } = await automergeBy(f, a, id);
    await until(() => paused !== null, 'A records the step it pauses after');
    await within(paused ?? Promise.resolve(), "A's next read waits");

    b.clock.advance(LEASE_MS + 1);
    const resultB = await within(b.jobs.dispatch(id).done, "B's job ends");
    expect(resultB).toMatchObject({ kind: 'ran', outcome: { kind: 'merged', head } });

    a.events.resume();
    const resultA = await within(doneA, "A's job ends");
    expect(resultA).toMatchObject({ kind: 'lease-lost', holder: { owner: 'owner-b' } });
    // Nothing of A reached the forge or the store after its pause: no label, no merge, no step.
    expect(a.writes.slice(aWritesAtPause)).toEqual([]);
    expect(a.writes).not.toContain('merge');
    expect(b.writes.filter((write) => write === 'merge')).toHaveLength(1);
    expect(f.repo.git(['rev-list', '--count', `${base}..main`])).toBe('1');
  });
});

describe('a stop recorded between the merge decision and the merge attempt', () => {
  // The window between the loop's decision (made on a ledger it read) and the `merge-attempt` append has no forge
  // round trip any more, so this race is made here, in the store: the stop is routed by another process right after the
  // decision is stored. The attempt is appended only while automerge is on, in one compare-and-swap: the stop wins.
  it("a /proofgate stop routed by B right after A's loop stored its merge decision: no merge attempt, nothing merges, A ends stopped", async () => {
    const f = (fixture = await loopFixture());
    const start = new Date().toISOString();
    const a = owner(f, 'owner-a', start);
    const b = owner(f, 'owner-b', start);
    owners.push(a, b);
    const id = await f.openChange('feature', { 'feature.txt': 'a feature\n' });
    const base = f.repo.sha('main');
    let stopped: Promise<unknown> | null = null;
    const append = a.events.events.append.bind(a.events.events);
    a.events.events.append = async (streamId, expected, batch) => {
      const result = await append(streamId, expected, batch);
      const decided = batch.some(
        (event) =>
          event.type === 'step' &&
          (event.data as { step?: unknown; kind?: unknown }).step === 'decision' &&
          (event.data as { kind?: unknown }).kind === 'merge',
      );
      if (stopped === null && decided) {
        stopped = (async () => {
          const comment = await f.forge.commentAs(id, '/proofgate stop', MAINTAINER);
          return new AutomergeRouter(b.jobs, { restartOnEvents: false }).handleComment(id, comment);
        })();
        await stopped;
      }
      return result;
    };
    const { done } = await automergeBy(f, a, id);
    const result = await within(done, "A's job ends");
    expect(stopped).not.toBeNull();
    expect(result).toMatchObject({ kind: 'ran', outcome: { kind: 'stopped' } });
    expect(a.writes).not.toContain('merge');
    expect(a.steps).not.toContain('merge-attempt');
    expect(f.repo.sha('main')).toBe(base);
    const status = statusComments((await f.forge.snapshot(id)).comments);
    expect(status).toHaveLength(1);
    expect(status[0]?.body).toContain(`stopped by ${MAINTAINER}`);
  });
});

describe('the fences themselves', () => {
  let dir: string;
  let storage: RunStorage;
  const CHANGE = '7';
  const SNAPSHOT = { id: CHANGE } as ChangeSnapshot;

  function fakeForge(writes: Writes, reads: string[]): Forge {
    const comment: ForgeComment = { id: 'c1', author: 'proofgate', authorType: 'Bot', body: 'x', createdAt: 't', updatedAt: 't' };
    return {
      kind: 'local',
      selfLogin: 'proofgate',
      snapshot: async () => (reads.push('snapshot'), SNAPSHOT),
      readFile: async () => (reads.push('readFile'), null),
      permission: async () => (reads.push('permission'), 'admin'),
      trustedBranch: async () => (reads.push('trustedBranch'), 'main'),
      createComment: async () => (writes.push('createComment'), comment),
      editComment: async () => (writes.push('editComment'), comment),
      addLabels: async () => void writes.push('addLabels'),
      removeLabel: async () => void writes.push('removeLabel'),
      merge: async () => (writes.push('merge'), { merged: true, sha: 'a'.repeat(40) }),
      pushBranch: async () => void writes.push('pushBranch'),
      workspace: {
        prepare: async () => (reads.push('prepare'), '/tmp'),
        publish: async () => void writes.push('publish'),
      },
    };
  }

  const everyWrite = (forge: Forge): Promise<unknown>[] => [
    forge.createComment(CHANGE, 'body'),
    forge.editComment(CHANGE, 'c1', 'body'),
    forge.addLabels(CHANGE, ['x']),
    forge.removeLabel(CHANGE, 'x'),
    forge.merge(CHANGE, { expectedHeadSha: 'a'.repeat(40), title: 't', message: 'm' }),
    forge.pushBranch({ branch: 'feature', newSha: 'b'.repeat(40), expectedOldSha: 'a'.repeat(40) }),
    forge.workspace.publish('/tmp', { branch: 'feature', newSha: 'b'.repeat(40), expectedOldSha: 'a'.repeat(40) }),
  ];

  afterEach(async () => {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('every forge write passes while the owner holds the lease and none reaches the forge once another owner took it; reads pass through', async () => {
    dir = mkdtempSync(join(tmpdir(), 'proofgate-fence-'));
    storage = createLocalRunStorage({ directory: dir, namespace: 'automerge', policy: defaultStoragePolicy });
    const clock = fixedClock('2030-01-01T00:00:00.000Z');
    const store = new LedgerStore(storage.eventStore, clock);
    const writes: Writes = [];
    const reads: string[] = [];
    const forge = fencedForge(fakeForge(writes, reads), store, CHANGE, 'owner-a');

    expect(await store.acquireLease(CHANGE, 'owner-a', LEASE_MS)).toMatchObject({ acquired: true });
    await Promise.all(everyWrite(forge));
    expect([...writes].sort()).toEqual([...WRITE_METHODS].sort());

    clock.advance(LEASE_MS + 1);
    expect(await store.acquireLease(CHANGE, 'owner-b', LEASE_MS)).toMatchObject({ acquired: true });
    writes.length = 0;
    const refused = await Promise.allSettled(everyWrite(forge));
    for (const outcome of refused) {
      expect(outcome.status).toBe('rejected');
      const reason = outcome.status === 'rejected' ? (outcome.reason as Error) : null;
      expect(isProofgateError(reason, 'LEASE_LOST')).toBe(true);
      expect(reason?.message).toMatch(/^change 7: the lease is held by owner-b \(until [^)]+\), not owner-a; no further effect is made$/);
    }
    expect(writes).toEqual([]);
    // Reads are no effect: they pass.
    await forge.snapshot(CHANGE);
    await forge.readFile('main', 'x');
    await forge.permission('someone');
    await forge.trustedBranch();
    await forge.workspace.prepare(SNAPSHOT);
    expect(reads).toEqual(['snapshot', 'readFile', 'permission', 'trustedBranch', 'prepare']);
    // A write naming another change is never this job's to make.
    await expect(forge.createComment('8', 'elsewhere')).rejects.toMatchObject({ code: 'INTERNAL' });
  });

  it("the store's fenced view: the lease check and the append are one compare-and-swap", async () => {
    dir = mkdtempSync(join(tmpdir(), 'proofgate-fence-'));
    storage = createLocalRunStorage({ directory: dir, namespace: 'automerge', policy: defaultStoragePolicy });
    const clock = fixedClock('2030-01-01T00:00:00.000Z');
    const stream = automergeStream(CHANGE);
    const b = new LedgerStore(storage.eventStore, clock);
    // A's event store lets B take the lease right after A decided its append, before A's append lands.
    let race = false;
    const racing: EventStore = {
      ...storage.eventStore,
      append: async (streamId, expected, batch) => {
        if (race) {
          race = false;
          clock.advance(LEASE_MS + 1);
          expect(await b.acquireLease(CHANGE, 'owner-b', LEASE_MS)).toMatchObject({ acquired: true });
        }
        return storage.eventStore.append(streamId, expected, batch);
      },
      read: (streamId, options) => storage.eventStore.read(streamId, options),
      revision: (streamId) => storage.eventStore.revision(streamId),
      listStreams: (prefix) => storage.eventStore.listStreams(prefix),
      readAll: (options) => storage.eventStore.readAll(options),
    };
    const plain = new LedgerStore(racing, clock);
    const a = plain.fenced(CHANGE, 'owner-a');
    expect(await plain.acquireLease(CHANGE, 'owner-a', LEASE_MS)).toMatchObject({ acquired: true });
    await a.step(CHANGE, 'decision', { kind: 'wait', reason: 'checks pending', head: 'a'.repeat(40) });
    await a.record(CHANGE, { type: 'note', id: 'n1', text: 'a note', at: clock.now().toISOString() });
    expect(await a.updateLease(CHANGE, 'owner-a', LEASE_MS)).toBe(true);
    // Appends to another change are not fenced by this view.
    await a.step('8', 'decision', { kind: 'wait', reason: 'r', head: 'a'.repeat(40) });

    race = true;
    const before = await storage.eventStore.revision(stream);
    const lost = await a.step(CHANGE, 'merge-attempt', { attempt: 'm1', head: 'a'.repeat(40) }).catch((error: unknown) => error);
    expect(isProofgateError(lost, 'LEASE_LOST')).toBe(true);
    expect((lost as Error).message).toContain('held by owner-b');
    // Only B's lease landed; A's step did not.
    const after = await new LedgerStore(storage.eventStore, clock).load(CHANGE);
    expect(after.revision).toBe(before + 1);
    expect(after.lease).toMatchObject({ owner: 'owner-b', released: false });
    expect(after.steps.some((step) => step.step === 'merge-attempt')).toBe(false);
    // Every later write of A is refused the same way; its renewal and release change nothing.
    await expect(a.record(CHANGE, { type: 'note', id: 'n2', text: 'late', at: clock.now().toISOString() })).rejects.toMatchObject({ code: 'LEASE_LOST' });
    expect(await a.updateLease(CHANGE, 'owner-a', LEASE_MS)).toBe(false);
    expect(await a.updateLease(CHANGE, 'owner-a', 'release')).toBe(false);
    await expect(plain.requireLease(CHANGE, 'owner-a')).rejects.toMatchObject({ code: 'LEASE_LOST' });
    expect(await plain.requireLease(CHANGE, 'owner-b')).toMatchObject({ owner: 'owner-b' });
    // The plain store (the router's) is not fenced; an explicit `heldBy` is.
    await plain.step(CHANGE, 'command-run', { comment: 'c9' });
    await expect(
      plain.appendWith(CHANGE, () => ({ events: [{ id: 'x1', type: 'step', data: { step: 'x', at: clock.now().toISOString() } }], result: null }), {
        heldBy: 'owner-a',
      }),
    ).rejects.toMatchObject({ code: 'LEASE_LOST' });
  });
});
