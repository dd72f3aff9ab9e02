import {
  compileGraph,
  dagGraphType,
  persistRunDefinition,
  resolveGraphPlan,
  type CompiledGraph,
  type DagGraphData,
  type DagNodeData,
  type DagState,
  type GraphNode,
  type GraphNodeInput,
  type Permission,
} from '../../src/runtime/index.js';
import type { RunStorage } from '../../src/storage/index.js';

export const pkg = { source: 'npm:@test/runtime', version: '1.0.0', digest: `sha256:${'7'.repeat(64)}` } as const;

export const writePermission: Permission = { name: 'workspace.write', scope: { paths: ['src'] } };

export type DagGraph = CompiledGraph<DagGraphData, DagNodeData, DagState>;

export function dag(
  nodes: readonly GraphNodeInput<DagNodeData>[],
  edges: readonly { from: string; to: string }[] = [],
  data: Partial<DagGraphData> = {},
): DagGraph {
  return compileGraph(dagGraphType, {
    id: 'test-graph',
    definitionVersion: 1,
    data: { globalConcurrency: 4, keyedConcurrency: {}, stopOnError: true, retryCapPerNode: 0, ...data },
    nodes,
    edges,
  });
}

export const required = (id: string, key: string | null = null): GraphNodeInput<DagNodeData> => ({ id, data: { kind: 'required', key } });
export const optional = (id: string): GraphNodeInput<DagNodeData> => ({ id, data: { kind: 'optional', key: null } });
export const finalizer = (id: string): GraphNodeInput<DagNodeData> => ({ id, data: { kind: 'finalizer', key: null } });

export function planFor(graph: DagGraph, permissions: readonly Permission[] = [writePermission]) {
  return resolveGraphPlan(graph.describe(), { package: pkg, admission: { package: pkg, permissions }, executionLanes: [] });
}

export async function startRun(storage: RunStorage, runId: string, graph: DagGraph, permissions?: readonly Permission[]) {
  const plan = planFor(graph, permissions);
  await persistRunDefinition(storage, {
    runId,
    eventId: `${runId}-started`,
    timestamp: '2026-01-01T00:00:00.000Z',
    graphDefinition: graph.definition,
    resolvedPlan: plan,
    resolvedInputs: {},
    workspaceBinding: null,
    hostBinding: null,
  });
  return plan;
}

export function node(runData: GraphNode['runData'], overrides: Partial<GraphNode> = {}): GraphNode {
  return {
    prompt: null,
    scratchDirectory: null,
    workspace: { mode: 'none', directory: null, allowedPaths: [] },
    trustedCaller: {},
    permissions: [],
    policy: {
      inputBytes: 100_000,
      outputBytes: 100_000,
      timeoutMs: 5_000,
      teardownGraceMs: 50,
      memoryBytes: 100_000_000,
      filesChanged: 0,
      linesChanged: 0,
      callTokens: null,
    },
    resultContract: null,
    runData,
    parseResult: null,
    tokenBudget: null,
    decideAction: null,
    ...overrides,
  };
}

export function policy(overrides: Partial<GraphNode['policy']>): GraphNode['policy'] {
  return { ...node(() => null).policy, ...overrides };
}
