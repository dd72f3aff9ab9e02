import { ProofgateError } from '../../core/index.js';
import type { GraphDefinition, GraphDefinitionInput } from '../graph/contract.js';

export type DagNodeKind = 'required' | 'optional' | 'finalizer';

/** Graph-wide settings of a DAG. */
export interface DagGraphData {
  /** Most attempts running at once across the whole run. */
  readonly globalConcurrency: number;
  /** Most attempts running at once per concurrency key; every key a node uses needs a limit here. */
  readonly keyedConcurrency: { readonly [key: string]: number };
  /** After a required node fails for good, start no further non-finalizer node. */
  readonly stopOnError: boolean;
  /** Extra attempts a node gets after failed ones (0: no retry). */
  readonly retryCapPerNode: number;
}

export interface DagNodeData {
  readonly kind: DagNodeKind;
  /** Concurrency key, or null for none. */
  readonly key: string | null;
}

export type DagDefinition = GraphDefinition<DagGraphData, DagNodeData>;

/** Facts derived once per definition: dependencies and declaration index. */
export interface DagIndex {
  readonly order: readonly string[];
  /** Declaration index of each node (its slot in `DagState.nodes`). */
  readonly slot: ReadonlyMap<string, number>;
  readonly dependsOn: ReadonlyMap<string, readonly string[]>;
  readonly data: ReadonlyMap<string, DagNodeData>;
  /** Per declaration slot: what `reduce` and `decide` need without map lookups. */
  readonly slots: readonly DagSlot[];
  /** The concurrency keys in use, sorted; `DagSlot.keySlot` points into this list. */
  readonly keys: readonly string[];
  readonly hasFinalizers: boolean;
}

export interface DagSlot {
  readonly id: string;
  readonly kind: DagNodeKind;
  /** Index of the node's key in `DagIndex.keys`, or -1 for none. */
  readonly keySlot: number;
  /** Slots of the node's dependencies. */
  readonly dependsOn: readonly number[];
  /** Slots of the nodes that depend on this one. */
  readonly dependents: readonly number[];
}

const KINDS: readonly string[] = ['required', 'optional', 'finalizer'];

function bad(message: string): never {
  throw new ProofgateError('INVALID_INPUT', `dag graph: ${message}`);
}

function isPositiveInteger(value: unknown, min: number): boolean {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= min;
}

function checkGraphData(data: unknown): DagGraphData {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) bad('data must be an object');
  const keys = Object.keys(data).sort().join(',');
  if (keys !== 'globalConcurrency,keyedConcurrency,retryCapPerNode,stopOnError') {
    bad(`data has exactly globalConcurrency, keyedConcurrency, stopOnError, retryCapPerNode (got ${keys})`);
  }
  const value = data as DagGraphData;
  if (!isPositiveInteger(value.globalConcurrency, 1)) bad('globalConcurrency must be an integer >= 1');
  if (!isPositiveInteger(value.retryCapPerNode, 0) || value.retryCapPerNode > 1000) bad('retryCapPerNode must be an integer from 0 to 1000');
  if (typeof value.stopOnError !== 'boolean') bad('stopOnError must be a boolean');
  const keyed = value.keyedConcurrency as unknown;
  if (keyed === null || typeof keyed !== 'object' || Array.isArray(keyed)) bad('keyedConcurrency must be an object');
  for (const [key, limit] of Object.entries(keyed)) {
    if (key.length === 0) bad('a keyedConcurrency key must not be empty');
    if (!isPositiveInteger(limit, 1)) bad(`keyedConcurrency.${key} must be an integer >= 1`);
  }
  return value;
}

function checkNodeData(nodeId: string, data: unknown, graph: DagGraphData): void {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) bad(`node ${nodeId}: data must be an object`);
  if (Object.keys(data).sort().join(',') !== 'key,kind') bad(`node ${nodeId}: data has exactly kind and key`);
  const value = data as DagNodeData;
  if (!KINDS.includes(value.kind)) bad(`node ${nodeId}: kind must be required, optional or finalizer`);
  if (value.key !== null) {
    if (typeof value.key !== 'string' || value.key.length === 0) bad(`node ${nodeId}: key must be a nonempty string or null`);
    if (!Object.prototype.hasOwnProperty.call(graph.keyedConcurrency, value.key)) {
      bad(`node ${nodeId}: concurrency key ${JSON.stringify(value.key)} has no limit in keyedConcurrency`);
    }
  }
}

function findCycle(order: readonly string[], dependsOn: ReadonlyMap<string, readonly string[]>): string[] | null {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (id: string): string[] | null => {
    const mark = state.get(id);
    if (mark === 'done') return null;
    if (mark === 'open') return [...stack.slice(stack.indexOf(id)), id];
    state.set(id, 'open');
    stack.push(id);
    for (const dep of dependsOn.get(id) ?? []) {
      const cycle = visit(dep);
      if (cycle) return cycle;
    }
    stack.pop();
    state.set(id, 'done');
    return null;
  };
  for (const id of order) {
    const cycle = visit(id);
    if (cycle) return cycle;
  }
  return null;
}

/** Build the dependency index; bad data, unknown keys and cycles are typed errors. */
export function indexDag(definition: GraphDefinitionInput<DagGraphData, DagNodeData>): DagIndex {
  const graph = checkGraphData(definition.data);
  const order = definition.nodes.map((node) => node.id);
  const data = new Map<string, DagNodeData>();
  const dependsOn = new Map<string, string[]>(order.map((id) => [id, []]));
  for (const node of definition.nodes) {
    checkNodeData(node.id, node.data, graph);
    data.set(node.id, node.data);
  }
  for (const edge of definition.edges) {
    dependsOn.get(edge.to)?.push(edge.from);
    if (data.get(edge.from)?.kind === 'finalizer' && data.get(edge.to)?.kind !== 'finalizer') {
      bad(`node ${edge.to} cannot depend on finalizer ${edge.from}`);
    }
  }
  const cycle = findCycle(order, dependsOn);
  if (cycle) bad(`dependency cycle ${cycle.join(' -> ')}`);
  const slot = new Map(order.map((id, i) => [id, i]));
  const keys = [...new Set(definition.nodes.flatMap((node) => (node.data.key === null ? [] : [node.data.key])))].sort();
  const dependents = order.map((): number[] => []);
  for (const edge of definition.edges) {
    const from = slot.get(edge.from);
    const to = slot.get(edge.to);
    if (from !== undefined && to !== undefined) dependents[from]?.push(to);
  }
  const slots = definition.nodes.map((node, i): DagSlot => ({
    id: node.id,
    kind: node.data.kind,
    keySlot: node.data.key === null ? -1 : keys.indexOf(node.data.key),
    dependsOn: (dependsOn.get(node.id) ?? []).map((dep) => slot.get(dep) ?? -1),
    dependents: dependents[i] ?? [],
  }));
  const hasFinalizers = slots.some((entry) => entry.kind === 'finalizer');
  return { order, slot, dependsOn, data, slots, keys, hasFinalizers };
}

const cache = new WeakMap<object, DagIndex>();

/** The index of a compiled (frozen) definition, computed once. */
export function dagIndex(definition: DagDefinition): DagIndex {
  let index = cache.get(definition);
  if (!index) {
    index = indexDag(definition);
    cache.set(definition, index);
  }
  return index;
}

export function dagPosition(nodeId: string, attempt: number): string {
  return `dag/${nodeId}/${attempt}`;
}

export function parseDagPosition(position: string): { nodeId: string; attempt: number } | null {
  const match = /^dag\/([A-Za-z0-9][A-Za-z0-9._-]*)\/([1-9][0-9]*)$/.exec(position);
  if (!match || match[1] === undefined || match[2] === undefined) return null;
  return { nodeId: match[1], attempt: Number(match[2]) };
}
