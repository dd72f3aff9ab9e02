import { ProofgateError, canonicalJson } from '../../core/index.js';
import type { GraphDescription } from '../graph/contract.js';
import { isJsonObject } from '../json-types.js';
import type { GraphPlan, Permission } from '../plan/types.js';
import type { ExecutionEngine, GraphNode } from './types.js';

function bad(message: string): never {
  throw new ProofgateError('INVALID_INPUT', `graph executor: ${message}`);
}

const LIMITS = ['inputBytes', 'outputBytes', 'timeoutMs', 'teardownGraceMs', 'memoryBytes', 'filesChanged', 'linesChanged'] as const;

function checkNode(nodeId: string, node: GraphNode, admitted: ReadonlySet<string>): void {
  if (node === null || typeof node !== 'object') bad(`node ${nodeId} must be an object`);
  if (typeof node.runData !== 'function') bad(`node ${nodeId}: runData must be a function`);
  if (node.parseResult !== null && typeof node.parseResult !== 'function') bad(`node ${nodeId}: parseResult must be a function or null`);
  if (node.decideAction !== null && typeof node.decideAction !== 'function') bad(`node ${nodeId}: decideAction must be a function or null`);
  if (node.resultContract !== null && !isJsonObject(node.resultContract)) bad(`node ${nodeId}: resultContract must be an object or null`);
  const policy = node.policy as unknown as Record<string, unknown>;
  for (const limit of LIMITS) {
    const value = policy[limit];
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) bad(`node ${nodeId}: policy.${limit} must be an integer >= 0`);
  }
  if (node.policy.timeoutMs < 1) bad(`node ${nodeId}: policy.timeoutMs must be at least 1`);
  for (const permission of node.permissions) {
    if (!admitted.has(canonicalJson(permission))) bad(`node ${nodeId}: permission ${permission.name} is not admitted by the run plan`);
  }
}

export function permissionKeys(permissions: readonly Permission[]): Set<string> {
  return new Set(permissions.map((permission) => canonicalJson({ name: permission.name, scope: permission.scope })));
}

/** Check the node table against the graph and the plan; map each node to its lane's engine. */
export function bindNodes(
  description: GraphDescription,
  plan: GraphPlan,
  nodes: { readonly [nodeId: string]: GraphNode },
  engines: readonly ExecutionEngine[],
): Map<string, ExecutionEngine | null> {
  const known = new Set(description.nodes.map((node) => node.id));
  for (const id of Object.keys(nodes)) if (!known.has(id)) bad(`nodes.${id} is not a node of the graph`);
  const admitted = permissionKeys(plan.admission.permissions);
  const engineById = new Map<string, ExecutionEngine>();
  for (const engine of engines) {
    if (engineById.has(engine.id)) bad(`engine ${engine.id} is given twice`);
    engineById.set(engine.id, engine);
  }
  const binding = new Map<string, ExecutionEngine | null>();
  for (const { id } of description.nodes) {
    const node = nodes[id];
    if (!node) bad(`no implementation for node ${id}`);
    checkNode(id, node, admitted);
    binding.set(id, null);
  }
  for (const lane of plan.executionLanes) {
    const engine = engineById.get(lane.engineId);
    if (!engine) bad(`lane ${lane.id} needs engine ${lane.engineId}, which was not given`);
    for (const nodeId of lane.nodeIds) binding.set(nodeId, engine);
  }
  return binding;
}
