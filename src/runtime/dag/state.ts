import { ProofgateError } from '../../core/index.js';
import type { GraphEvent } from '../graph/contract.js';
import { dagIndex, parseDagPosition, type DagDefinition } from './definition.js';

/** What is recorded about one node; everything else is derived by `classifyDag`. */
export interface DagNodeState {
  readonly status: 'idle' | 'running' | 'completed' | 'failed' | 'paused';
  /** Highest attempt number dispatched so far (0: none). */
  readonly attempt: number;
  /** Attempts that ended in failure (interruptions do not count). */
  readonly failures: number;
  /** The outstanding position while running or paused. */
  readonly position: string | null;
  readonly reason: string | null;
}

export interface DagState {
  /** One entry per node, in declaration order. */
  readonly nodes: readonly DagNodeState[];
  /** The required node whose final failure stopped the run (stopOnError), or null. */
  readonly stoppedBy: string | null;
}

const IDLE: DagNodeState = Object.freeze({ status: 'idle', attempt: 0, failures: 0, position: null, reason: null });

export function initialDagState(definition: DagDefinition): DagState {
  dagIndex(definition);
  return Object.freeze({ nodes: Object.freeze(definition.nodes.map(() => IDLE)), stoppedBy: null });
}

function inconsistent(event: GraphEvent, why: string): never {
  throw new ProofgateError('INVALID_STORED_VALUE', `dag graph: ${event.kind} event at ${event.position} ${why}`);
}

function withNode(state: DagState, slot: number, node: DagNodeState, stoppedBy = state.stoppedBy): DagState {
  const nodes = state.nodes.slice();
  nodes[slot] = Object.freeze(node);
  return Object.freeze({ nodes: Object.freeze(nodes), stoppedBy });
}

/** The recorded state of one node. */
export function dagNodeState(definition: DagDefinition, state: DagState, nodeId: string): DagNodeState | undefined {
  const slot = dagIndex(definition).slot.get(nodeId);
  return slot === undefined ? undefined : state.nodes[slot];
}

/** Fold one recorded fact into the state (pure; returns a new frozen state). */
export function reduceDag(definition: DagDefinition, state: DagState, event: GraphEvent): DagState {
  const parsed = parseDagPosition(event.position);
  if (!parsed || parsed.nodeId !== event.nodeId) inconsistent(event, 'names another node or is not a dag position');
  const slot = dagIndex(definition).slot.get(event.nodeId);
  const node = slot === undefined ? undefined : state.nodes[slot];
  if (slot === undefined || !node) inconsistent(event, 'names an unknown node');
  if (event.kind === 'dispatched') {
    if (node.status !== 'idle' || parsed.attempt !== node.attempt + 1) inconsistent(event, `does not follow attempt ${node.attempt}`);
    return withNode(state, slot, { ...node, status: 'running', attempt: parsed.attempt, position: event.position, reason: null });
  }
  const outstanding = node.status === 'running' || node.status === 'paused';
  if (!outstanding || node.position !== event.position) inconsistent(event, 'has no outstanding dispatch');
  switch (event.kind) {
    case 'completed':
      return withNode(state, slot, { ...node, status: 'completed', position: null, reason: null });
    case 'paused':
      return withNode(state, slot, { ...node, status: 'paused', reason: event.reason });
    case 'interrupted':
      return withNode(state, slot, { ...node, status: 'idle', position: null, reason: event.reason });
    case 'failed': {
      const failures = node.failures + 1;
      const { data } = definition;
      if (failures <= data.retryCapPerNode) {
        return withNode(state, slot, { ...node, status: 'idle', failures, position: null, reason: event.reason });
      }
      const kind = dagIndex(definition).data.get(event.nodeId)?.kind;
      const stop = data.stopOnError && kind === 'required' && state.stoppedBy === null ? event.nodeId : state.stoppedBy;
      return withNode(state, slot, { ...node, status: 'failed', failures, position: null, reason: event.reason }, stop);
    }
  }
}
