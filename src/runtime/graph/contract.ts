import type { Sha256Digest } from '../../core/index.js';
import type { ReadonlyJsonObject, ReadonlyJsonValue } from '../json-types.js';

/** One node of a graph definition as a caller writes it. */
export interface GraphNodeInput<N> {
  readonly id: string;
  readonly data: N;
}

/** A dependency: `to` runs only after `from`. */
export interface GraphEdgeInput {
  readonly from: string;
  readonly to: string;
}

/** A graph definition as a caller writes it. */
export interface GraphDefinitionInput<D, N> {
  readonly id: string;
  readonly definitionVersion: number;
  readonly data: D;
  readonly nodes: readonly GraphNodeInput<N>[];
  readonly edges: readonly GraphEdgeInput[];
}

/** A validated, deep-frozen graph definition. */
export type GraphDefinition<D, N> = GraphDefinitionInput<D, N>;

/** A run position: the one place in a run where a single dispatch may be recorded. */
export type GraphPosition = string;

/** What a graph type asks the executor to do next. */
export type GraphCommand =
  | { readonly kind: 'dispatch'; readonly position: GraphPosition; readonly nodeId: string; readonly attempt: number }
  | { readonly kind: 'pause'; readonly reason: string }
  | { readonly kind: 'complete'; readonly reason: string }
  | { readonly kind: 'fail'; readonly reason: string };

export type DispatchCommand = Extract<GraphCommand, { kind: 'dispatch' }>;

/** The facts a graph type folds into its state, in stream order. */
export type GraphEvent =
  | { readonly kind: 'dispatched'; readonly position: GraphPosition; readonly nodeId: string }
  | { readonly kind: 'completed'; readonly position: GraphPosition; readonly nodeId: string; readonly result: ReadonlyJsonValue }
  | { readonly kind: 'failed'; readonly position: GraphPosition; readonly nodeId: string; readonly reason: string }
  | { readonly kind: 'paused'; readonly position: GraphPosition; readonly nodeId: string; readonly reason: string }
  | { readonly kind: 'interrupted'; readonly position: GraphPosition; readonly nodeId: string; readonly reason: string };

/** A stable summary of a compiled graph; the input of `resolveGraphPlan`. */
export interface GraphDescription {
  readonly typeId: string;
  readonly typeVersion: number;
  readonly graphId: string;
  readonly definitionVersion: number;
  readonly definitionDigest: Sha256Digest;
  readonly nodes: readonly { readonly id: string; readonly summary: ReadonlyJsonObject; readonly dependsOn: readonly string[] }[];
}

/**
 * A graph type: a validator plus four pure functions. None of them may touch
 * storage, time or randomness; the executor is the only effectful part.
 */
export interface GraphType<D, N, S> {
  readonly id: string;
  readonly version: number;
  /** Check `data` of the graph and of each node; throw a typed error on bad input. */
  validate(definition: GraphDefinitionInput<D, N>): void;
  initialState(definition: GraphDefinition<D, N>): S;
  reduce(definition: GraphDefinition<D, N>, state: S, event: GraphEvent): S;
  /**
   * Dispatch commands with distinct positions (never one already recorded), or
   * exactly one pause/complete/fail, or nothing while work is in flight.
   */
  decide(definition: GraphDefinition<D, N>, state: S): readonly GraphCommand[];
  describe(definition: GraphDefinition<D, N>, definitionDigest: Sha256Digest): GraphDescription;
}

/** A graph definition bound to its type, with its canonical digest. */
export interface CompiledGraph<D, N, S> {
  readonly type: { readonly id: string; readonly version: number };
  readonly definition: GraphDefinition<D, N>;
  readonly definitionDigest: Sha256Digest;
  initialState(): S;
  reduce(state: S, event: GraphEvent): S;
  decide(state: S): readonly GraphCommand[];
  describe(): GraphDescription;
  /** Whether a node id belongs to this graph. */
  hasNode(nodeId: string): boolean;
}
