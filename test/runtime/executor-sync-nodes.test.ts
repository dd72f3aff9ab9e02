import { expect, it } from 'vitest';
import { canonicalBytes, sha256Digest } from '../../src/core/index.js';
import { createGraphExecutor, readRunEvents, type ReadonlyJsonValue } from '../../src/runtime/index.js';
import { dag, node, policy, required, startRun } from './fixtures.js';
import { describeEachStore } from './stores.js';

// Nodes that answer synchronously settle without a timer or an abort
// listener; their outcomes must be recorded exactly as asynchronous ones.
describeEachStore('graph executor, synchronous and literal results', (newStore) => {
  it('records null, true, false and other results of sync and async nodes with the digest of their stored bytes', async () => {
    const storage = await newStore().open();
    const values: Record<string, ReadonlyJsonValue> = { nul: null, yes: true, no: false, num: 7, txt: 'plain', obj: { k: [1, null] } };
    const ids = Object.keys(values).flatMap((id) => [`${id}-sync`, `${id}-async`]);
    const graph = dag(
      ids.map((id) => required(id)),
      [],
      { stopOnError: false },
    );
    await startRun(storage, 'sync-1', graph);
    const nodes = Object.fromEntries(
      ids.map((id) => {
        const value = values[id.replace(/-(a)?sync$/, '')] ?? null;
        return [id, node(id.endsWith('-async') ? async () => value : () => value, { policy: policy({ timeoutMs: 1 }) })];
      }),
    );
    const executor = await createGraphExecutor({ runId: 'sync-1', graph, storage, nodes, engines: [] });
    expect((await executor.run()).kind).toBe('complete');
    const completed = (await readRunEvents(storage.eventStore, 'sync-1')).flatMap((event) => (event.type === 'attempt-completed' ? [event.data] : []));
    expect(completed.map((data) => data.nodeId).sort()).toEqual([...ids].sort());
    for (const data of completed) {
      const expected = values[data.nodeId.replace(/-(a)?sync$/, '')];
      expect(data.result).toEqual(expected);
      const bytes = canonicalBytes(expected);
      expect(data.resultDigest).toBe(sha256Digest(bytes));
      expect(data.outputBytes).toBe(bytes.byteLength);
    }
  });

  it('still fails a synchronous node that throws, and times out an async one that never settles', async () => {
    const storage = await newStore().open();
    const graph = dag([required('throws'), required('hangs')], [], { stopOnError: false });
    await startRun(storage, 'sync-2', graph);
    const nodes = {
      throws: node(() => {
        throw new Error('sync boom');
      }),
      hangs: node(() => new Promise(() => undefined), { policy: policy({ timeoutMs: 20, teardownGraceMs: 5 }) }),
    };
    const executor = await createGraphExecutor({ runId: 'sync-2', graph, storage, nodes, engines: [] });
    expect((await executor.run()).kind).toBe('failed');
    const failures = (await readRunEvents(storage.eventStore, 'sync-2')).flatMap((event) =>
      event.type === 'attempt-failed' ? [`${event.data.nodeId} ${event.data.failureClass} ${event.data.reason}`] : [],
    );
    expect(failures.sort()).toEqual(['hangs timeout attempt exceeded timeoutMs 20 (still running after teardownGraceMs 5)', 'throws error sync boom']);
  });
});
