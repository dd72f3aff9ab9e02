import type { RunStorage } from '../../storage/policy-types.js';
import type { Clock } from '../../core/index.js';
import type { CompiledGraph } from '../graph/contract.js';
import type { ReadonlyJsonObject, ReadonlyJsonValue } from '../json-types.js';
import type { Permission } from '../plan/types.js';

/** Limits the executor enforces on every attempt of a node. */
export type NodePolicy = {
  /** Most canonical bytes of the node's input (its own data plus upstream results). */
  readonly inputBytes: number;
  /** Most canonical bytes of the node's result. */
  readonly outputBytes: number;
  /** Wall time of one attempt; on expiry the attempt's signal aborts and the attempt fails with `timeout`. */
  readonly timeoutMs: number;
  /** How long an aborted attempt may take to stop before the executor records it and moves on. */
  readonly teardownGraceMs: number;
  /** Recorded limits for sandboxing hosts; the in-process executor stores them in the node input but does not meter them. */
  readonly memoryBytes: number;
  readonly filesChanged: number;
  readonly linesChanged: number;
  readonly callTokens: number | null;
};

export type NodeWorkspace = {
  readonly mode: 'none' | 'read-only' | 'read-write';
  readonly directory: string | null;
  readonly allowedPaths: readonly string[];
};

/** A decision a node makes about its own result before it is recorded. */
export type ActionDecision =
  { readonly kind: 'allow' } | { readonly kind: 'deny'; readonly reason: string } | { readonly kind: 'ask'; readonly reason: string };

/** An engine the nodes of an execution lane call (e.g. a model endpoint). */
export interface ExecutionEngine {
  readonly id: string;
  invoke(request: ReadonlyJsonValue, signal: AbortSignal): Promise<ReadonlyJsonValue>;
}

/** The input of one attempt; its canonical bytes are what `policy.inputBytes` limits. */
export type NodeInput = {
  readonly runId: string;
  readonly nodeId: string;
  readonly position: string;
  readonly attempt: number;
  readonly prompt: ReadonlyJsonValue;
  /** Results of the node's completed dependencies, by node id. */
  readonly upstream: { readonly [nodeId: string]: ReadonlyJsonValue };
};

export interface NodeRunContext {
  readonly input: NodeInput;
  /** Aborts on timeout and when the run's signal aborts. */
  readonly signal: AbortSignal;
  /** 0 for the first start of this position, then 1, 2, ... for re-runs after a crash. */
  readonly restart: number;
  readonly engine: ExecutionEngine | null;
  readonly scratchDirectory: string | null;
  readonly workspace: NodeWorkspace;
  readonly permissions: readonly Permission[];
  readonly trustedCaller: ReadonlyJsonObject;
  readonly tokenBudget: number | null;
}

/** How the executor runs one graph node. */
export type GraphNode = {
  readonly prompt: ReadonlyJsonValue;
  readonly scratchDirectory: string | null;
  readonly workspace: NodeWorkspace;
  /** Facts about the caller that the host vouches for; handed to the node, never stored. */
  readonly trustedCaller: ReadonlyJsonObject;
  /** Must be a subset of the permissions the run plan admitted. */
  readonly permissions: readonly Permission[];
  readonly policy: NodePolicy;
  /** JSON Schema subset the (parsed) result must satisfy, or null. */
  readonly resultContract: ReadonlyJsonObject | null;
  /** The work. Its return value must be JSON. */
  readonly runData: (context: NodeRunContext) => Promise<ReadonlyJsonValue> | ReadonlyJsonValue;
  /** Turn the raw value into the result to record, or null to record it as is. Throwing fails the attempt. */
  readonly parseResult: ((raw: ReadonlyJsonValue) => ReadonlyJsonValue) | null;
  readonly tokenBudget: number | null;
  /** Judge the result before it is recorded: allow records it, deny fails the attempt, ask pauses it. */
  readonly decideAction:
    ((decision: { readonly nodeId: string; readonly position: string; readonly result: ReadonlyJsonValue }) => Promise<ActionDecision> | ActionDecision) | null;
  /** May an attempt found started-but-unfinished after a crash simply run again? Default false: pause for reconcile. */
  readonly retrySafe?: boolean;
};

/** A question the run waits on. */
export type PausedRequest = {
  readonly position: string;
  readonly nodeId: string;
  readonly kind: 'reconcile' | 'action';
  readonly detail: string;
};

export type RunOutcome =
  | { readonly kind: 'complete'; readonly reason: string }
  | { readonly kind: 'failed'; readonly reason: string }
  | { readonly kind: 'paused'; readonly reason: string; readonly requests: readonly PausedRequest[] };

/** How a host settles a paused attempt. */
export type PausedResolution =
  | { readonly kind: 'completed'; readonly result: ReadonlyJsonValue }
  | { readonly kind: 'failed'; readonly reason: string }
  | { readonly kind: 'rerun'; readonly reason: string };

export interface GraphExecutorOptions<D, N, S> {
  readonly runId: string;
  readonly graph: CompiledGraph<D, N, S>;
  readonly storage: RunStorage;
  readonly nodes: { readonly [nodeId: string]: GraphNode };
  readonly engines: readonly ExecutionEngine[];
  readonly clock?: Clock;
  /** Extra time past timeout + teardown grace before another executor may treat an attempt as crashed (default 2000 ms). */
  readonly leaseMarginMs?: number;
  /** How often to look again while another executor's attempts are in flight (default 50 ms). */
  readonly pollMs?: number;
}

export interface GraphExecutor {
  readonly runId: string;
  readonly executorId: string;
  /** Drive the run until it completes, fails, pauses or `signal` aborts. */
  run(signal?: AbortSignal): Promise<RunOutcome>;
  /** Settle a paused attempt (a reconcile or action request). */
  resolvePaused(position: string, resolution: PausedResolution): Promise<void>;
}
