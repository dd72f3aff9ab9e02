import { expect, it } from 'vitest';
import { createGraphExecutor, readRunEvents, type GraphNode } from '../../src/runtime/index.js';
import type { EventStore, RunStorage } from '../../src/storage/index.js';
import { dag, finalizer, node, policy, required, startRun } from './fixtures.js';
import { describeEachStore } from './stores.js';

const never = (): Promise<never> => new Promise(() => undefined);

/** `storage` with its event store's reads counted: `readsAtLeast(n)` resolves once n reads have returned. */
function countingReads(storage: RunStorage): { storage: RunStorage; reads(): number; readsAtLeast(n: number): Promise<void> } {
  let reads = 0;
  const waiting: Array<{ n: number; resolve: () => void }> = [];
  const inner = storage.eventStore;
  const eventStore: EventStore = {
    append: (streamId, expectedRevision, events) => inner.append(streamId, expectedRevision, events),
    async read(streamId, options) {
      const events = await inner.read(streamId, options);
      reads += 1;
      for (const waiter of waiting.filter((w) => w.n <= reads)) {
        waiting.splice(waiting.indexOf(waiter), 1);
        waiter.resolve();
      }
      return events;
    },
    revision: (streamId) => inner.revision(streamId),
    listStreams: (prefix) => inner.listStreams(prefix),
    readAll: (options) => inner.readAll(options),
  };
  return {
    storage: {
      record: storage.record,
      eventStore,
      artifactStore: storage.artifactStore,
      prepareJson: (value, where) => storage.prepareJson(value, where),
      close: () => storage.close(),
    },
    reads: () => reads,
    readsAtLeast: (n) => (n <= reads ? Promise.resolve() : new Promise((resolve) => waiting.push({ n, resolve }))),
  };
}

describeEachStore('graph executor', (newStore) => {
  it('runs a DAG to completion, recording dispatch, start and completion, and passes upstream results', async () => {
    const storage = await newStore().open();
    const graph = dag([required('a'), required('b'), finalizer('f')], [{ from: 'a', to: 'b' }]);
    await startRun(storage, 'r1', graph);
    const seen: unknown[] = [];
    const nodes = {
      a: node(() => ({ n: 1 })),
      b: node(({ input }) => {
        seen.push(input.upstream);
        return { n: 2 };
      }),
      f: node(() => 'cleaned'),
    };
    const executor = await createGraphExecutor({ runId: 'r1', graph, storage, nodes, engines: [] });
    expect(await executor.run(new AbortController().signal)).toEqual({ kind: 'complete', reason: 'all required nodes completed' });
    expect(seen).toEqual([{ a: { n: 1 } }]);
    const types = (await readRunEvents(storage.eventStore, 'r1')).map((event) => event.type);
    expect(types).toEqual([
      'run-started',
      'dispatch-decided',
      'attempt-started',
      'attempt-completed',
      'dispatch-decided',
      'attempt-started',
      'attempt-completed',
      'dispatch-decided',
      'attempt-started',
      'attempt-completed',
      'run-completed',
    ]);
    const again = await createGraphExecutor({ runId: 'r1', graph, storage, nodes, engines: [] });
    expect((await again.run()).kind).toBe('complete');
    expect(await storage.eventStore.revision('run/r1')).toBe(types.length);
  });

  it('enforces timeout, output and input limits and retries up to the cap', async () => {
    const storage = await newStore().open();
    const graph = dag([required('slow'), required('big'), required('fat'), required('flaky')], [], { stopOnError: false, retryCapPerNode: 1 });
    await startRun(storage, 'r2', graph);
    let flakyCalls = 0;
    let slowAborted = false;
    const nodes: Record<string, GraphNode> = {
      slow: node(
        ({ signal }) => {
          signal.addEventListener('abort', () => {
            slowAborted = true;
          });
          return never();
        },
        { policy: policy({ timeoutMs: 40, teardownGraceMs: 20 }) },
      ),
      big: node(() => 'x'.repeat(200), { policy: policy({ outputBytes: 100 }) }),
      fat: node(() => 'ok', { prompt: 'y'.repeat(500), policy: policy({ inputBytes: 200 }) }),
      flaky: node(() => {
        flakyCalls += 1;
        if (flakyCalls === 1) throw new Error('first try fails');
        return 'second try';
      }),
    };
    const executor = await createGraphExecutor({ runId: 'r2', graph, storage, nodes, engines: [] });
    const outcome = await executor.run();
    expect(outcome.kind).toBe('failed');
    expect(slowAborted).toBe(true);
    const events = await readRunEvents(storage.eventStore, 'r2');
    const failures = events.flatMap((event) => (event.type === 'attempt-failed' ? [`${event.data.position} ${event.data.failureClass}`] : []));
    expect(failures.sort()).toEqual([
      'dag/big/1 output-too-large',
      'dag/big/2 output-too-large',
      'dag/fat/1 input-too-large',
      'dag/fat/2 input-too-large',
      'dag/flaky/1 error',
      'dag/slow/1 timeout',
      'dag/slow/2 timeout',
    ]);
    expect(events.some((event) => event.type === 'attempt-completed' && event.data.position === 'dag/flaky/2')).toBe(true);
  });

  it('honours the abort signal: running attempts are interrupted and later re-dispatched', async () => {
    const storage = await newStore().open();
    const graph = dag([required('a')]);
    await startRun(storage, 'r3', graph);
    const controller = new AbortController();
    const hanging = node(
      ({ signal }) =>
        new Promise((resolve) => {
          signal.addEventListener('abort', () => resolve('stopped'));
          // The attempt is running: abort the run now.
          controller.abort();
        }),
    );
    const first = await createGraphExecutor({ runId: 'r3', graph, storage, nodes: { a: hanging }, engines: [] });
    expect(await first.run(controller.signal)).toEqual({ kind: 'paused', reason: 'aborted', requests: [] });
    const second = await createGraphExecutor({ runId: 'r3', graph, storage, nodes: { a: node(() => 'done') }, engines: [] });
    expect((await second.run()).kind).toBe('complete');
    const positions = (await readRunEvents(storage.eventStore, 'r3')).flatMap((event) => (event.type === 'dispatch-decided' ? [event.data.position] : []));
    expect(positions).toEqual(['dag/a/1', 'dag/a/2']);
  });

  it('two executors on one run never dispatch the same position', async () => {
    const store = newStore();
    const [one, two] = [await store.open(), await store.open()];
    const graph = dag(
      ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((id) => required(id)),
      [],
      { globalConcurrency: 3 },
    );
    await startRun(one, 'r4', graph);
    const runs: string[] = [];
    // Each attempt stays open until the next one starts (the last one, once every position has started), so every
    // dispatch after the first races a live attempt.
    const held: Array<() => void> = [];
    const work = (who: string) =>
      node(async ({ input }) => {
        runs.push(`${input.position}`);
        for (const release of held.splice(0)) release();
        if (runs.length < graph.definition.nodes.length) await new Promise<void>((resolve) => held.push(resolve));
        return who;
      });
    const nodesFor = (who: string) => Object.fromEntries(graph.definition.nodes.map((n) => [n.id, work(who)]));
    const a = await createGraphExecutor({ runId: 'r4', graph, storage: one, nodes: nodesFor('one'), engines: [], pollMs: 5 });
    const b = await createGraphExecutor({ runId: 'r4', graph, storage: two, nodes: nodesFor('two'), engines: [], pollMs: 5 });
    const outcomes = await Promise.all([a.run(), b.run()]);
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(['complete', 'complete']);
    expect([...runs].sort()).toEqual(graph.definition.nodes.map((n) => `dag/${n.id}/1`).sort());
    const events = await readRunEvents(one.eventStore, 'r4');
    expect(events.filter((event) => event.type === 'dispatch-decided')).toHaveLength(8);
    expect(events.filter((event) => event.type === 'run-completed')).toHaveLength(1);
  });

  it('after a crash re-runs a retry-safe attempt and pauses an unsafe one for reconcile', async () => {
    const storage = await newStore().open();
    const graph = dag([required('safe'), required('unsafe')]);
    await startRun(storage, 'r5', graph);
    const crashed = new Date(Date.now() - 60_000).toISOString();
    let revision = await storage.eventStore.revision('run/r5');
    for (const id of ['safe', 'unsafe']) {
      const position = `dag/${id}/1`;
      const result = await storage.eventStore.append('run/r5', revision, [
        { id: `crash-d-${id}`, type: 'dispatch-decided', data: { position, nodeId: id, attempt: 1, executorId: 'exec_dead' } },
        {
          id: `crash-s-${id}`,
          type: 'attempt-started',
          data: { position, nodeId: id, executorId: 'exec_dead', restart: 0, inputDigest: `sha256:${'0'.repeat(64)}`, inputBytes: 2, leaseExpiresAt: crashed },
        },
      ]);
      revision = result.revision;
    }
    const restarts: number[] = [];
    const nodes = {
      safe: node(
        ({ restart }) => {
          restarts.push(restart);
          return 'again';
        },
        { retrySafe: true },
      ),
      unsafe: node(() => 'must not run'),
    };
    const executor = await createGraphExecutor({ runId: 'r5', graph, storage, nodes, engines: [] });
    const outcome = await executor.run();
    expect(outcome).toMatchObject({ kind: 'paused', requests: [{ position: 'dag/unsafe/1', nodeId: 'unsafe', kind: 'reconcile' }] });
    expect(restarts).toEqual([1]);
    const again = await executor.run();
    expect(again.kind).toBe('paused');
    const pausedEvents = (await readRunEvents(storage.eventStore, 'r5')).filter((event) => event.type === 'run-paused');
    expect(pausedEvents).toHaveLength(1);
    await executor.resolvePaused('dag/unsafe/1', { kind: 'completed', result: 'reconciled by host' });
    expect((await executor.run()).kind).toBe('complete');
    await expect(executor.resolvePaused('dag/unsafe/1', { kind: 'failed', reason: 'late' })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
  });

  it('waits for a live attempt of another executor instead of recovering it', async () => {
    const storage = await newStore().open();
    const graph = dag([required('a')]);
    await startRun(storage, 'r6', graph);
    await storage.eventStore.append('run/r6', 1, [
      { id: 'live-d', type: 'dispatch-decided', data: { position: 'dag/a/1', nodeId: 'a', attempt: 1, executorId: 'exec_other' } },
      {
        id: 'live-s',
        type: 'attempt-started',
        data: {
          position: 'dag/a/1',
          nodeId: 'a',
          executorId: 'exec_other',
          restart: 0,
          inputDigest: `sha256:${'0'.repeat(64)}`,
          inputBytes: 2,
          leaseExpiresAt: new Date(Date.now() + 3_600_000).toISOString(),
        },
      },
    ]);
    const counted = countingReads(storage);
    const executor = await createGraphExecutor({
      runId: 'r6',
      graph,
      storage: counted.storage,
      nodes: { a: node(() => 'mine', { retrySafe: true }) },
      engines: [],
      pollMs: 5,
    });
    const running = executor.run();
    // The executor has read the run three more times: it saw the live attempt and polled again, without starting its own.
    await counted.readsAtLeast(counted.reads() + 3);
    expect((await readRunEvents(storage.eventStore, 'r6')).filter((event) => event.type === 'attempt-started')).toHaveLength(1);
    await storage.eventStore.append('run/r6', 3, [
      {
        id: 'live-c',
        type: 'attempt-completed',
        data: { position: 'dag/a/1', nodeId: 'a', result: 'theirs', resultDigest: `sha256:${'1'.repeat(64)}`, outputBytes: 8, resolvedBy: 'executor' },
      },
    ]);
    expect((await running).kind).toBe('complete');
    const events = await readRunEvents(storage.eventStore, 'r6');
    expect(events.filter((event) => event.type === 'attempt-started')).toHaveLength(1);
  });

  it('applies parseResult, resultContract and decideAction', async () => {
    const storage = await newStore().open();
    const graph = dag([required('parsed'), required('contract'), required('denied'), required('asks')], [], { stopOnError: false });
    await startRun(storage, 'r7', graph);
    const nodes = {
      parsed: node(() => '{"n":1}', { parseResult: (raw) => JSON.parse(String(raw)) as { n: number } }),
      contract: node(() => ({ verdict: 7 }), { resultContract: { type: 'object', properties: { verdict: { type: 'string' } }, required: ['verdict'] } }),
      denied: node(() => 'x', { decideAction: () => ({ kind: 'deny', reason: 'not today' }) }),
      asks: node(() => 'y', { decideAction: async () => ({ kind: 'ask', reason: 'confirm' }) }),
    };
    const executor = await createGraphExecutor({ runId: 'r7', graph, storage, nodes, engines: [] });
    const outcome = await executor.run();
    expect(outcome).toMatchObject({ kind: 'paused', requests: [{ nodeId: 'asks', kind: 'action' }] });
    const events = await readRunEvents(storage.eventStore, 'r7');
    const completed = events.find((event) => event.type === 'attempt-completed');
    expect(completed?.data).toMatchObject({ position: 'dag/parsed/1', result: { n: 1 } });
    const classes = events.flatMap((event) => (event.type === 'attempt-failed' ? [event.data.failureClass] : []));
    expect(classes.sort()).toEqual(['denied', 'invalid-result']);
    await executor.resolvePaused('dag/asks/1', { kind: 'rerun', reason: 'try again' });
  });

  it('refuses a graph that is not the stored one and nodes outside the plan', async () => {
    const storage = await newStore().open();
    const graph = dag([required('a')]);
    await startRun(storage, 'r8', graph);
    const other = dag([required('b')]);
    await expect(createGraphExecutor({ runId: 'r8', graph: other, storage, nodes: { b: node(() => 1) }, engines: [] })).rejects.toMatchObject({
      code: 'INVALID_INPUT',
    });
    await expect(createGraphExecutor({ runId: 'r8', graph, storage, nodes: {}, engines: [] })).rejects.toThrow(/no implementation/);
    const outside = node(() => 1, { permissions: [{ name: 'network', scope: null }] });
    await expect(createGraphExecutor({ runId: 'r8', graph, storage, nodes: { a: outside }, engines: [] })).rejects.toThrow(/not admitted/);
    await expect(createGraphExecutor({ runId: 'nope', graph, storage, nodes: {}, engines: [] })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});
