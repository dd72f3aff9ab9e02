// Graph executor overhead. A DAG of 1,000 no-op required nodes (no edges,
// globalConcurrency 16) runs end to end on SQLite; the figure is wall time per
// node of executor.run(). Baseline, measured in the same run on the same
// database file: appending the very events the executor recorded (dispatch,
// start, completion and the run outcome, read back from its stream) directly
// to a fresh stream, in exactly the batches the executor appended them (its
// append calls are counted), so the ratio is the executor's own overhead.
// Two more lines replay them one event per append and 16 events per append.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { compileGraph, createGraphExecutor, dagGraphType, defaultStoragePolicy, persistRunDefinition, resolveGraphPlan } from '../dist/index.js';
import { createLocalRunStorage } from '../dist/storage/sqlite/index.js';

const NODES = 1000;
const policy = { ...defaultStoragePolicy, maxEventPayloadBytes: 8_000_000, maxAppendBatchBytes: 16_000_000 };
const pkg = { source: 'npm:bench', version: '1.0.0', digest: `sha256:${'7'.repeat(64)}` };
const noop = {
  prompt: null, scratchDirectory: null, workspace: { mode: 'none', directory: null, allowedPaths: [] }, trustedCaller: {}, permissions: [],
  policy: { inputBytes: 10_000, outputBytes: 10_000, timeoutMs: 10_000, teardownGraceMs: 10, memoryBytes: 1, filesChanged: 0, linesChanged: 0, callTokens: null },
  resultContract: null, runData: () => null, parseResult: null, tokenBudget: null, decideAction: null,
};

async function start(storage, runId, graph) {
  await persistRunDefinition(storage, {
    runId, eventId: `${runId}-started`, timestamp: new Date().toISOString(), graphDefinition: graph.definition,
    resolvedPlan: resolveGraphPlan(graph.describe(), { package: pkg, admission: { package: pkg, permissions: [] }, executionLanes: [] }),
    resolvedInputs: {}, workspaceBinding: null, hostBinding: null,
  });
}

/** Append `events` to a fresh run stream in batches of the given sizes; returns elapsed ms. */
async function replay(storage, runId, graph, events, sizes) {
  await start(storage, runId, graph);
  let revision = 1;
  let i = 0;
  const began = performance.now();
  for (const size of sizes) {
    const slice = events.slice(i, i + size).map((event, j) => ({ id: `${runId}-${i + j}`, type: event.type, data: event.data }));
    revision = (await storage.eventStore.append(`run/${runId}`, revision, slice)).revision;
    i += size;
  }
  return performance.now() - began;
}

function fixedSizes(total, batch) {
  return Array.from({ length: Math.ceil(total / batch) }, (_, k) => Math.min(batch, total - k * batch));
}

/** The same storage, with the sizes of the executor's appends to its run stream recorded. */
function counting(storage, stream, sizes) {
  const { eventStore } = storage;
  const append = (streamId, expected, events) => {
    if (streamId === stream) sizes.push(events.length);
    return eventStore.append(streamId, expected, events);
  };
  return {
    record: storage.record,
    artifactStore: storage.artifactStore,
    prepareJson: (...args) => storage.prepareJson(...args),
    close: () => storage.close(),
    eventStore: {
      append,
      read: (...args) => eventStore.read(...args),
      revision: (...args) => eventStore.revision(...args),
      listStreams: (...args) => eventStore.listStreams(...args),
      readAll: (...args) => eventStore.readAll(...args),
    },
  };
}

export default async function runtimeBench(report) {
  const dir = mkdtempSync(join(tmpdir(), 'proofgate-bench-runtime-'));
  const storage = createLocalRunStorage({ directory: dir, namespace: 'bench-runtime', policy });
  try {
    const ids = Array.from({ length: NODES }, (_, i) => `n${i}`);
    const graph = compileGraph(dagGraphType, {
      id: 'bench', definitionVersion: 1,
      data: { globalConcurrency: 16, keyedConcurrency: {}, stopOnError: true, retryCapPerNode: 0 },
      nodes: ids.map((id) => ({ id, data: { kind: 'required', key: null } })), edges: [],
    });
    const nodes = Object.fromEntries(ids.map((id) => [id, noop]));
    await start(storage, 'warm', graph);
    await (await createGraphExecutor({ runId: 'warm', graph, storage, nodes, engines: [] })).run();

    await start(storage, 'exec', graph);
    const sizes = [];
    const executor = await createGraphExecutor({ runId: 'exec', graph, storage: counting(storage, 'run/exec', sizes), nodes, engines: [] });
    const began = performance.now();
    const outcome = await executor.run();
    const executorMs = performance.now() - began;
    if (outcome.kind !== 'complete') throw new Error(`bench run ended ${outcome.kind}`);
    const events = (await storage.eventStore.read('run/exec')).slice(1);

    if (sizes.reduce((a, b) => a + b, 0) !== events.length) throw new Error('counted appends do not add up to the stream');
    const same = await replay(storage, 'direct-same', graph, events, sizes);
    const single = await replay(storage, 'direct-1', graph, events, fixedSizes(events.length, 1));
    const batched = await replay(storage, 'direct-16', graph, events, fixedSizes(events.length, 16));
    const perNode = (executorMs / NODES) * 1000;
    report({
      name: `executor, ${NODES} no-op nodes, concurrency 16, SQLite (${events.length} events in ${sizes.length} appends)`,
      value: perNode, unit: 'us/node',
      baseline: (same / NODES) * 1000, baselineUnit: 'us/node (the same events appended directly, same batches)',
      ratio: executorMs / same, target: { max: 2 },
    });
    report({
      name: 'executor vs direct appends, 1 event each',
      value: perNode, unit: 'us/node',
      baseline: (single / NODES) * 1000, baselineUnit: 'us/node',
      ratio: executorMs / single,
    });
    report({
      name: 'executor vs direct appends in batches of 16 events',
      value: perNode, unit: 'us/node',
      baseline: (batched / NODES) * 1000, baselineUnit: 'us/node',
      ratio: executorMs / batched,
    });
  } finally {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
