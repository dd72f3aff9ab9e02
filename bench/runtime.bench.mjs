// Graph executor overhead. A DAG of 1,000 no-op required nodes (no edges,
// globalConcurrency 16) runs end to end on SQLite; the figure is wall time per
// node of executor.run(). Baseline, measured in the same run on the same
// database file: appending the very events the executor recorded (dispatch,
// start, completion and the run outcome, read back from its stream) directly
// to a fresh stream, in exactly the batches the executor appended them (its
// append calls are counted), so the ratio is the executor's own overhead.
// The executor run and the direct replay alternate for ROUNDS rounds on fresh
// run ids (after one warm-up executor run); the reported figures are the
// medians over the rounds, and the note lists every round's ratio.
// Two more lines replay them one event per append and 16 events per append.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { compileGraph, createGraphExecutor, dagGraphType, defaultStoragePolicy, persistRunDefinition, resolveGraphPlan } from '../dist/index.js';
import { createLocalRunStorage } from '../dist/storage/sqlite/index.js';

const NODES = 1000;
const ROUNDS = 3;
const policy = { ...defaultStoragePolicy, maxEventPayloadBytes: 8_000_000, maxAppendBatchBytes: 16_000_000 };
const pkg = { source: 'npm:bench', version: '1.0.0', digest: `sha256:${'7'.repeat(64)}` };
const noop = {
  prompt: null,
  scratchDirectory: null,
  workspace: { mode: 'none', directory: null, allowedPaths: [] },
  trustedCaller: {},
  permissions: [],
  policy: {
    inputBytes: 10_000,
    outputBytes: 10_000,
    timeoutMs: 10_000,
    teardownGraceMs: 10,
    memoryBytes: 1,
    filesChanged: 0,
    linesChanged: 0,
    callTokens: null,
  },
  resultContract: null,
  runData: () => null,
  parseResult: null,
  tokenBudget: null,
  decideAction: null,
};

async function start(storage, runId, graph) {
  await persistRunDefinition(storage, {
    runId,
    eventId: `${runId}-started`,
    timestamp: new Date().toISOString(),
    graphDefinition: graph.definition,
    resolvedPlan: resolveGraphPlan(graph.describe(), { package: pkg, admission: { package: pkg, permissions: [] }, executionLanes: [] }),
    resolvedInputs: {},
    workspaceBinding: null,
    hostBinding: null,
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

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** One executor run on a fresh run id; returns its wall time, its events and the sizes of its appends. */
async function executorRound(storage, runId, graph, nodes) {
  await start(storage, runId, graph);
  const sizes = [];
  const executor = await createGraphExecutor({ runId, graph, storage: counting(storage, `run/${runId}`, sizes), nodes, engines: [] });
  const began = performance.now();
  const outcome = await executor.run();
  const ms = performance.now() - began;
  if (outcome.kind !== 'complete') throw new Error(`bench run ended ${outcome.kind}`);
  const events = (await storage.eventStore.read(`run/${runId}`)).slice(1);
  if (sizes.reduce((a, b) => a + b, 0) !== events.length) throw new Error('counted appends do not add up to the stream');
  return { ms, events, sizes };
}

const fmtRatio = (r) => r.toFixed(2);

export default async function runtimeBench(report) {
  const dir = mkdtempSync(join(tmpdir(), 'proofgate-bench-runtime-'));
  const storage = createLocalRunStorage({ directory: dir, namespace: 'bench-runtime', policy });
  try {
    const ids = Array.from({ length: NODES }, (_, i) => `n${i}`);
    const graph = compileGraph(dagGraphType, {
      id: 'bench',
      definitionVersion: 1,
      data: { globalConcurrency: 16, keyedConcurrency: {}, stopOnError: true, retryCapPerNode: 0 },
      nodes: ids.map((id) => ({ id, data: { kind: 'required', key: null } })),
      edges: [],
    });
    const nodes = Object.fromEntries(ids.map((id) => [id, noop]));
    await executorRound(storage, 'warm', graph, nodes);

    const rounds = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const exec = await executorRound(storage, `exec-${round}`, graph, nodes);
      const same = await replay(storage, `direct-same-${round}`, graph, exec.events, exec.sizes);
      rounds.push({ executorMs: exec.ms, same, events: exec.events.length, appends: exec.sizes.length, ratio: exec.ms / same });
    }
    const last = rounds[rounds.length - 1];
    const single = await replay(storage, 'direct-1', graph, (await storage.eventStore.read(`run/exec-${ROUNDS - 1}`)).slice(1), fixedSizes(last.events, 1));
    const batched = await replay(storage, 'direct-16', graph, (await storage.eventStore.read(`run/exec-${ROUNDS - 1}`)).slice(1), fixedSizes(last.events, 16));
    const executorMs = median(rounds.map((r) => r.executorMs));
    const perNode = (executorMs / NODES) * 1000;
    report({
      name: `executor, ${NODES} no-op nodes, concurrency 16, SQLite (${last.events} events in ${rounds.map((r) => r.appends).join('/')} appends), median of ${ROUNDS} alternating rounds`,
      value: perNode,
      unit: 'us/node',
      baseline: (median(rounds.map((r) => r.same)) / NODES) * 1000,
      baselineUnit: 'us/node (the same events appended directly, same batches)',
      ratio: median(rounds.map((r) => r.ratio)),
      target: { max: 2 },
      note: `per-round ratios ${rounds.map((r) => fmtRatio(r.ratio)).join(', ')} (executor ${rounds.map((r) => ((r.executorMs / NODES) * 1000).toFixed(0)).join('/')} us/node, direct ${rounds.map((r) => ((r.same / NODES) * 1000).toFixed(0)).join('/')} us/node)`,
    });
    report({
      name: 'executor (median) vs direct appends, 1 event each',
      value: perNode,
      unit: 'us/node',
      baseline: (single / NODES) * 1000,
      baselineUnit: 'us/node',
      ratio: executorMs / single,
    });
    report({
      name: 'executor (median) vs direct appends in batches of 16 events',
      value: perNode,
      unit: 'us/node',
      baseline: (batched / NODES) * 1000,
      baselineUnit: 'us/node',
      ratio: executorMs / batched,
    });
  } finally {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
