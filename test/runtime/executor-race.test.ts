import { expect, it } from 'vitest';
import { createGraphExecutor, readRunEvents, type GraphEvent, type ReadonlyJsonValue, type RunEvent } from '../../src/runtime/index.js';
import type { RunStorage } from '../../src/storage/index.js';
import { dag, node, required, startRun } from './fixtures.js';
import { describeEachStore } from './stores.js';

/** The same storage, counting the revision conflicts its event store reports. */
function countingConflicts(storage: RunStorage, counter: { conflicts: number }): RunStorage {
  const { eventStore } = storage;
  return {
    ...storage,
    eventStore: {
      append: async (streamId, expected, events) => {
        try {
          return await eventStore.append(streamId, expected, events);
        } catch (error) {
          if ((error as { code?: unknown }).code === 'REVISION_CONFLICT') counter.conflicts += 1;
          throw error;
        }
      },
      read: (streamId, options) => eventStore.read(streamId, options),
      revision: (streamId) => eventStore.revision(streamId),
      listStreams: (prefix) => eventStore.listStreams(prefix),
      readAll: (options) => eventStore.readAll(options),
    },
  };
}

function graphEventOf(event: RunEvent): GraphEvent | null {
  switch (event.type) {
    case 'dispatch-decided':
      return { kind: 'dispatched', position: event.data.position, nodeId: event.data.nodeId };
    case 'attempt-completed':
      return { kind: 'completed', position: event.data.position, nodeId: event.data.nodeId, result: event.data.result as ReadonlyJsonValue };
    default:
      return null;
  }
}

describeEachStore('graph executor state after lost races', (newStore) => {
  it('two executors racing over 70 nodes keep their folded state right: inputs, positions and outcome match a fresh fold', async () => {
    const store = newStore();
    const counter = { conflicts: 0 };
    const [one, two] = [countingConflicts(await store.open(), counter), countingConflicts(await store.open(), counter)];
    const ids = Array.from({ length: 70 }, (_, i) => `n${i}`);
    const edges = ids.slice(10).map((id, i) => ({ from: `n${i}`, to: id }));
    const graph = dag(
      ids.map((id) => required(id)),
      edges,
      { globalConcurrency: 4 },
    );
    await startRun(one, 'race', graph);
    const wrongInputs: string[] = [];
    const work = node(async ({ input }) => {
      const index = Number(input.nodeId.slice(1));
      const expected = index >= 10 ? { [`n${index - 10}`]: `n${index - 10}` } : {};
      if (JSON.stringify(input.upstream) !== JSON.stringify(expected)) wrongInputs.push(`${input.nodeId}: ${JSON.stringify(input.upstream)}`);
      await new Promise((resolve) => setTimeout(resolve, index % 3));
      return input.nodeId;
    });
    const nodes = Object.fromEntries(ids.map((id) => [id, work]));
    const a = await createGraphExecutor({ runId: 'race', graph, storage: one, nodes, engines: [], pollMs: 5 });
    const b = await createGraphExecutor({ runId: 'race', graph, storage: two, nodes, engines: [], pollMs: 5 });
    const outcomes = await Promise.all([a.run(), b.run()]);
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(['complete', 'complete']);
    expect(counter.conflicts).toBeGreaterThan(0);
    expect(wrongInputs).toEqual([]);

    const events = await readRunEvents(one.eventStore, 'race');
    const dispatched = events.flatMap((event) => (event.type === 'dispatch-decided' ? [event.data.position] : []));
    expect([...dispatched].sort()).toEqual(ids.map((id) => `dag/${id}/1`).sort());
    expect(events.filter((event) => event.type === 'attempt-completed')).toHaveLength(70);
    expect(events.filter((event) => event.type === 'run-completed')).toHaveLength(1);

    let state = graph.initialState();
    for (const event of events) {
      const fact = graphEventOf(event);
      if (fact) state = graph.reduce(state, fact);
    }
    expect(graph.decide(state)).toEqual([{ kind: 'complete', reason: 'all required nodes completed' }]);

    // Each executor numbers its event ids in the order it records them (one may have won every race).
    const byExecutor = new Map<string, string[]>();
    for (const event of events.slice(1)) {
      const token = event.id.split('_')[1] ?? '';
      byExecutor.set(token, [...(byExecutor.get(token) ?? []), event.id]);
    }
    expect(byExecutor.size).toBeGreaterThan(0);
    for (const list of byExecutor.values()) expect([...list].sort()).toEqual(list);
  });
});
