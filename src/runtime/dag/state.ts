import { ProofgateError } from '../../core/index.js';
import type { GraphEvent } from '../graph/contract.js';
import { dagIndex, parseDagPosition, type DagDefinition, type DagIndex } from './definition.js';

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

/** Slots per chunk of `DagState.chunks`. */
export const DAG_CHUNK_SIZE = 32;

/**
 * A run of consecutive node slots. States after a `reduce` share every chunk
 * the event did not touch, so one event costs a chunk copy, not a node-table copy.
 */
export interface DagStateChunk {
  readonly nodes: readonly DagNodeState[];
  /** Per slot: how many of the node's dependencies have not completed. */
  readonly waiting: readonly number[];
  /** Slots of this chunk that are ready candidates: non-finalizer, idle, nothing waiting. */
  readonly candidates: number;
}

export interface DagState {
  /** Node states in declaration order, `DAG_CHUNK_SIZE` slots per chunk; read one with `dagNodeState`. */
  readonly chunks: readonly DagStateChunk[];
  /** The required node whose final failure stopped the run (stopOnError), or null. */
  readonly stoppedBy: string | null;
  /** Nodes recorded as running. */
  readonly running: number;
  /** Nodes recorded as running per concurrency key (aligned with the sorted keys in use). */
  readonly runningByKey: readonly number[];
  /** Non-finalizer nodes recorded as running or paused. */
  readonly activeNonFinalizers: number;
  /** Sum of `candidates` over all chunks. */
  readonly candidates: number;
}

const IDLE: DagNodeState = Object.freeze({ status: 'idle', attempt: 0, failures: 0, position: null, reason: null });

export function initialDagState(definition: DagDefinition): DagState {
  const index = dagIndex(definition);
  const chunks: DagStateChunk[] = [];
  let candidates = 0;
  for (let start = 0; start < index.slots.length; start += DAG_CHUNK_SIZE) {
    const slots = index.slots.slice(start, start + DAG_CHUNK_SIZE);
    const waiting = slots.map((slot) => slot.dependsOn.length);
    const count = slots.filter((slot, i) => slot.kind !== 'finalizer' && waiting[i] === 0).length;
    candidates += count;
    chunks.push(Object.freeze({ nodes: Object.freeze(slots.map(() => IDLE)), waiting: Object.freeze(waiting), candidates: count }));
  }
  return Object.freeze({
    chunks: Object.freeze(chunks),
    stoppedBy: null,
    running: 0,
    runningByKey: Object.freeze(index.keys.map(() => 0)),
    activeNonFinalizers: 0,
    candidates,
  });
}

type DraftChunk = { nodes: DagNodeState[]; waiting: number[]; candidates: number };

/**
 * The next state, built from copies of only the chunks it touches; every
 * counter moves with the status changes it is derived from.
 */
class DagDraft {
  private readonly chunks: DagStateChunk[];
  private readonly copied = new Map<number, DraftChunk>();
  private running: number;
  private runningByKey: number[] | null = null;
  private active: number;
  private candidates: number;

  constructor(
    private readonly index: DagIndex,
    private readonly base: DagState,
  ) {
    this.chunks = [...base.chunks];
    this.running = base.running;
    this.active = base.activeNonFinalizers;
    this.candidates = base.candidates;
  }

  // Copies use spread, not slice(): V8 slices frozen arrays on a slow path.
  private write(slot: number): { chunk: DraftChunk; at: number } {
    const c = Math.floor(slot / DAG_CHUNK_SIZE);
    let chunk = this.copied.get(c);
    if (!chunk) {
      const source = this.chunks[c];
      if (!source) throw new ProofgateError('INTERNAL', `dag state has no chunk for slot ${slot}`);
      chunk = { nodes: [...source.nodes], waiting: [...source.waiting], candidates: source.candidates };
      this.copied.set(c, chunk);
    }
    return { chunk, at: slot - c * DAG_CHUNK_SIZE };
  }

  private isCandidate(slot: number, node: DagNodeState, waiting: number): boolean {
    return node.status === 'idle' && waiting === 0 && this.index.slots[slot]?.kind !== 'finalizer';
  }

  private moveCandidate(chunk: DraftChunk, before: boolean, after: boolean): void {
    const delta = Number(after) - Number(before);
    chunk.candidates += delta;
    this.candidates += delta;
  }

  setNode(slot: number, next: DagNodeState): void {
    const info = this.index.slots[slot];
    const { chunk, at } = this.write(slot);
    const prev = chunk.nodes[at] ?? IDLE;
    const waiting = chunk.waiting[at] ?? 0;
    chunk.nodes[at] = Object.freeze(next);
    this.moveCandidate(chunk, this.isCandidate(slot, prev, waiting), this.isCandidate(slot, next, waiting));
    const runs = Number(next.status === 'running') - Number(prev.status === 'running');
    if (runs !== 0) {
      this.running += runs;
      if (info && info.keySlot >= 0) {
        this.runningByKey ??= [...this.base.runningByKey];
        this.runningByKey[info.keySlot] = (this.runningByKey[info.keySlot] ?? 0) + runs;
      }
    }
    if (info?.kind !== 'finalizer') this.active += Number(isActive(next)) - Number(isActive(prev));
    const done = Number(next.status === 'completed') - Number(prev.status === 'completed');
    if (done !== 0) for (const dependent of info?.dependents ?? []) this.addWaiting(dependent, -done);
  }

  private addWaiting(slot: number, delta: number): void {
    const { chunk, at } = this.write(slot);
    const node = chunk.nodes[at] ?? IDLE;
    const before = chunk.waiting[at] ?? 0;
    chunk.waiting[at] = before + delta;
    this.moveCandidate(chunk, this.isCandidate(slot, node, before), this.isCandidate(slot, node, before + delta));
  }

  finish(stoppedBy: string | null): DagState {
    for (const [c, chunk] of this.copied) {
      this.chunks[c] = Object.freeze({ nodes: Object.freeze(chunk.nodes), waiting: Object.freeze(chunk.waiting), candidates: chunk.candidates });
    }
    return Object.freeze({
      chunks: Object.freeze(this.chunks),
      stoppedBy,
      running: this.running,
      runningByKey: this.runningByKey ? Object.freeze(this.runningByKey) : this.base.runningByKey,
      activeNonFinalizers: this.active,
      candidates: this.candidates,
    });
  }
}

function isActive(node: DagNodeState): boolean {
  return node.status === 'running' || node.status === 'paused';
}

function inconsistent(event: GraphEvent, why: string): never {
  throw new ProofgateError('INVALID_STORED_VALUE', `dag graph: ${event.kind} event at ${event.position} ${why}`);
}

/** The recorded state of the node at a declaration slot. */
export function dagSlotState(state: DagState, slot: number): DagNodeState | undefined {
  return state.chunks[Math.floor(slot / DAG_CHUNK_SIZE)]?.nodes[slot % DAG_CHUNK_SIZE];
}

/** The recorded state of one node. */
export function dagNodeState(definition: DagDefinition, state: DagState, nodeId: string): DagNodeState | undefined {
  const slot = dagIndex(definition).slot.get(nodeId);
  return slot === undefined ? undefined : dagSlotState(state, slot);
}

/** Fold one recorded fact into the state (pure; returns a new frozen state sharing untouched chunks). */
export function reduceDag(definition: DagDefinition, state: DagState, event: GraphEvent): DagState {
  const parsed = parseDagPosition(event.position);
  if (!parsed || parsed.nodeId !== event.nodeId) inconsistent(event, 'names another node or is not a dag position');
  const index = dagIndex(definition);
  const slot = index.slot.get(event.nodeId);
  const node = slot === undefined ? undefined : dagSlotState(state, slot);
  if (slot === undefined || !node) inconsistent(event, 'names an unknown node');
  const draft = new DagDraft(index, state);
  const set = (next: DagNodeState, stoppedBy = state.stoppedBy): DagState => {
    draft.setNode(slot, next);
    return draft.finish(stoppedBy);
  };
  if (event.kind === 'dispatched') {
    if (node.status !== 'idle' || parsed.attempt !== node.attempt + 1) inconsistent(event, `does not follow attempt ${node.attempt}`);
    return set({ ...node, status: 'running', attempt: parsed.attempt, position: event.position, reason: null });
  }
  const outstanding = node.status === 'running' || node.status === 'paused';
  if (!outstanding || node.position !== event.position) inconsistent(event, 'has no outstanding dispatch');
  switch (event.kind) {
    case 'completed':
      return set({ ...node, status: 'completed', position: null, reason: null });
    case 'paused':
      return set({ ...node, status: 'paused', reason: event.reason });
    case 'interrupted':
      return set({ ...node, status: 'idle', position: null, reason: event.reason });
    case 'failed': {
      const failures = node.failures + 1;
      const { data } = definition;
      if (failures <= data.retryCapPerNode) {
        return set({ ...node, status: 'idle', failures, position: null, reason: event.reason });
      }
      const kind = index.slots[slot]?.kind;
      const stop = data.stopOnError && kind === 'required' && state.stoppedBy === null ? event.nodeId : state.stoppedBy;
      return set({ ...node, status: 'failed', failures, position: null, reason: event.reason }, stop);
    }
  }
}
