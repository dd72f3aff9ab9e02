import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  classifyDag,
  compileGraph,
  dagGraphType,
  dagNodeState,
  type CompiledGraph,
  type DagGraphData,
  type DagNodeData,
  type DagNodeKind,
  type DagState,
  type GraphCommand,
  type GraphEvent,
} from '../../src/runtime/index.js';

type Graph = CompiledGraph<DagGraphData, DagNodeData, DagState>;

/** The decision rules restated over `classifyDag`, looking at every node: the oracle for the indexed `decide`. */
function oracle(graph: Graph, state: DagState): { dispatches: string[]; terminal: boolean } {
  const { definition } = graph;
  const views = classifyDag(definition, state);
  const ids = definition.nodes.map((node) => node.id);
  const keyOf = new Map(definition.nodes.map((node) => [node.id, node.data.key]));
  let running = ids.filter((id) => views.get(id)?.status === 'running').length;
  const perKey = new Map<string, number>();
  for (const id of ids) {
    const key = keyOf.get(id);
    if (views.get(id)?.status === 'running' && key) perKey.set(key, (perKey.get(key) ?? 0) + 1);
  }
  const dispatches: string[] = [];
  for (const id of ids) {
    if (running >= definition.data.globalConcurrency) break;
    if (views.get(id)?.status !== 'ready') continue;
    const key = keyOf.get(id) ?? null;
    if (key !== null && (perKey.get(key) ?? 0) >= (definition.data.keyedConcurrency[key] ?? 0)) continue;
    if (key !== null) perKey.set(key, (perKey.get(key) ?? 0) + 1);
    dispatches.push(`dag/${id}/${(dagNodeState(definition, state, id)?.attempt ?? 0) + 1}`);
    running += 1;
  }
  return { dispatches, terminal: dispatches.length === 0 && running === 0 };
}

function describeCommands(commands: readonly GraphCommand[]): { dispatches: string[]; terminal: boolean } {
  const dispatches = commands.flatMap((command) => (command.kind === 'dispatch' ? [command.position] : []));
  return { dispatches, terminal: commands.length === 1 && commands[0]?.kind !== 'dispatch' };
}

const KINDS: readonly DagNodeKind[] = ['required', 'required', 'optional', 'finalizer'];

const graphs = fc
  .record({
    size: fc.oneof(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 9, max: 31 }), fc.integer({ min: 32, max: 80 })),
    kinds: fc.array(fc.nat(KINDS.length - 1), { minLength: 80, maxLength: 80 }),
    keys: fc.array(fc.constantFrom(null, 'gpu', 'net'), { minLength: 80, maxLength: 80 }),
    edges: fc.array(fc.tuple(fc.nat(79), fc.nat(79)), { maxLength: 120 }),
    globalConcurrency: fc.integer({ min: 1, max: 6 }),
    gpu: fc.integer({ min: 1, max: 2 }),
    stopOnError: fc.boolean(),
    retryCapPerNode: fc.integer({ min: 0, max: 2 }),
  })
  .map((spec): Graph => {
    const nodes = Array.from({ length: spec.size }, (_, i) => ({
      id: `n${i}`,
      data: { kind: KINDS[spec.kinds[i] ?? 0] ?? 'required', key: spec.keys[i] ?? null },
    }));
    const seen = new Set<string>();
    const edges = spec.edges.flatMap(([x, y]) => {
      const from = Math.min(x, y) % spec.size;
      const to = Math.max(x, y) % spec.size;
      const fromKind = nodes[from]?.data.kind;
      const toKind = nodes[to]?.data.kind;
      if (from >= to || seen.has(`${from}-${to}`) || (fromKind === 'finalizer' && toKind !== 'finalizer')) return [];
      seen.add(`${from}-${to}`);
      return [{ from: `n${from}`, to: `n${to}` }];
    });
    return compileGraph(dagGraphType, {
      id: 'incremental',
      definitionVersion: 1,
      data: {
        globalConcurrency: spec.globalConcurrency,
        keyedConcurrency: { gpu: spec.gpu, net: 1 },
        stopOnError: spec.stopOnError,
        retryCapPerNode: spec.retryCapPerNode,
      },
      nodes,
      edges,
    });
  });

/** One recorded fact the reducer accepts in `state`: mostly what decide asks for, sometimes any legal event. */
function nextEvent(graph: Graph, state: DagState, choice: number, pick: number): GraphEvent | null {
  const commands = graph.decide(state);
  const dispatches = commands.flatMap((command) => (command.kind === 'dispatch' ? [command] : []));
  if (choice < 3 && dispatches.length > 0) {
    const command = dispatches[pick % dispatches.length];
    if (command) return { kind: 'dispatched', position: command.position, nodeId: command.nodeId };
  }
  const legal: GraphEvent[] = [];
  for (const { id: nodeId } of graph.definition.nodes) {
    const node = dagNodeState(graph.definition, state, nodeId);
    if (!node) continue;
    if (node.status === 'idle' && choice === 9) legal.push({ kind: 'dispatched', position: `dag/${nodeId}/${node.attempt + 1}`, nodeId });
    if (node.position === null || (node.status !== 'running' && node.status !== 'paused')) continue;
    const position = node.position;
    const outcomes: GraphEvent[] = [
      { kind: 'completed', position, nodeId, result: nodeId },
      { kind: 'completed', position, nodeId, result: null },
      { kind: 'failed', position, nodeId, reason: 'boom' },
      { kind: 'paused', position, nodeId, reason: 'ask' },
      { kind: 'interrupted', position, nodeId, reason: 'stop' },
    ];
    legal.push(outcomes[(choice + pick) % outcomes.length] as GraphEvent);
  }
  return legal.length === 0 ? null : (legal[pick % legal.length] ?? null);
}

describe('dag state kept incrementally', () => {
  it('decides exactly what a full classification of every node decides, at every step of random runs', () => {
    fc.assert(
      fc.property(graphs, fc.array(fc.tuple(fc.nat(9), fc.nat(1000)), { minLength: 1, maxLength: 400 }), (graph, steps) => {
        let state = graph.initialState();
        const history: { state: DagState; decided: readonly GraphCommand[] }[] = [];
        for (const [choice, pick] of steps) {
          const decided = graph.decide(state);
          expect(describeCommands(decided)).toEqual(oracle(graph, state));
          const views = classifyDag(graph.definition, state);
          expect(state.running).toBe([...views.values()].filter((view) => view.status === 'running').length);
          history.push({ state, decided });
          const event = nextEvent(graph, state, choice, pick);
          if (!event) break;
          state = graph.reduce(state, event);
        }
        // Later states share chunks with earlier ones: folding further must not have changed any earlier answer.
        for (const { state: earlier, decided } of history) expect(graph.decide(earlier)).toEqual(decided);
      }),
      { numRuns: 400 },
    );
  });

  it('folds from a shared state along two branches without one branch seeing the other', () => {
    const graph = compileGraph(dagGraphType, {
      id: 'branches',
      definitionVersion: 1,
      data: { globalConcurrency: 2, keyedConcurrency: {}, stopOnError: false, retryCapPerNode: 0 },
      nodes: Array.from({ length: 40 }, (_, i) => ({ id: `n${i}`, data: { kind: 'required' as const, key: null } })),
      edges: [{ from: 'n0', to: 'n39' }],
    });
    const base = graph.reduce(graph.initialState(), { kind: 'dispatched', position: 'dag/n0/1', nodeId: 'n0' });
    const done = graph.reduce(base, { kind: 'completed', position: 'dag/n0/1', nodeId: 'n0', result: 1 });
    const failed = graph.reduce(base, { kind: 'failed', position: 'dag/n0/1', nodeId: 'n0', reason: 'no' });
    expect(dagNodeState(graph.definition, base, 'n0')?.status).toBe('running');
    expect(classifyDag(graph.definition, done).get('n39')?.status).toBe('ready');
    expect(classifyDag(graph.definition, failed).get('n39')).toEqual({ status: 'skipped', reason: 'dependency n0 did not complete' });
    expect(graph.decide(base).map((command) => (command.kind === 'dispatch' ? command.position : command.kind))).toEqual(['dag/n1/1']);
    expect(Object.isFrozen(done) && Object.isFrozen(done.chunks) && Object.isFrozen(done.chunks[1])).toBe(true);
  });
});
