import { canonicalBytes, errorMessage } from '../../core/index.js';
import type { FailureClass } from '../../contracts/runtime-events.js';
import type { ReadonlyJsonValue } from '../json-types.js';
import { schemaViolation } from '../schema/json-schema-subset.js';
import type { ExecutionEngine, GraphNode, NodeInput } from './types.js';

/**
 * How an attempt ended, as the node produced it. A completed result is JSON
 * within the node's limits but not yet in its stored form: the executor turns
 * every outcome into a `StorableOutcome` (storable.ts) before recording it.
 */
export type AttemptOutcome =
  | { readonly kind: 'completed'; readonly result: ReadonlyJsonValue }
  | { readonly kind: 'failed'; readonly failureClass: FailureClass; readonly reason: string }
  | { readonly kind: 'paused'; readonly reason: string }
  | { readonly kind: 'interrupted'; readonly reason: string };

// Reasons are kept whole here: the executor shortens them only after the
// storage policy has seen the full text (a cut could hide part of a secret).
function failed(failureClass: FailureClass, reason: string): AttemptOutcome {
  return { kind: 'failed', failureClass, reason };
}

export interface AttemptRequest {
  readonly node: GraphNode;
  readonly input: NodeInput;
  /** Canonical byte length of `input` (the executor already measured it for the start event). */
  readonly inputBytes: number;
  readonly restart: number;
  readonly engine: ExecutionEngine | null;
  /** The run's signal: its abort turns into `interrupted`. */
  readonly runSignal: AbortSignal;
}

type Raced =
  | { readonly kind: 'value'; readonly value: unknown }
  | { readonly kind: 'error'; readonly error: unknown }
  | { readonly kind: 'stopped'; readonly why: 'timeout' | 'aborted'; readonly settled: boolean };

function delay(ms: number): { promise: Promise<void>; cancel: () => void } {
  let timer: NodeJS.Timeout | undefined;
  const promise = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return { promise, cancel: () => clearTimeout(timer) };
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function';
}

/**
 * Run the node's work under its limits; a run-signal abort or a timeout stops it.
 * The work starts one microtask after the call, as before; a node that
 * returns (or throws) synchronously has finished before any timer or abort
 * could have fired, so it settles at once without arming either.
 */
async function raceWork(request: AttemptRequest, controller: AbortController): Promise<Raced> {
  const { node, input, restart, engine, runSignal } = request;
  await undefined;
  let returned: unknown;
  try {
    returned = node.runData({
      input,
      signal: controller.signal,
      restart,
      engine,
      scratchDirectory: node.scratchDirectory,
      workspace: node.workspace,
      permissions: node.permissions,
      trustedCaller: node.trustedCaller,
      tokenBudget: node.tokenBudget,
    });
  } catch (error) {
    if (!runSignal.aborted) return { kind: 'error', error };
    returned = Promise.reject(error);
  }
  if (!isThenable(returned) && !runSignal.aborted) return { kind: 'value', value: returned };
  const work: Promise<Raced> = Promise.resolve(returned).then(
    (value): Raced => ({ kind: 'value', value }),
    (error: unknown): Raced => ({ kind: 'error', error }),
  );
  const timeout = delay(node.policy.timeoutMs);
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<Raced>((resolve) => {
    onAbort = () => resolve({ kind: 'stopped', why: 'aborted', settled: false });
    if (runSignal.aborted) onAbort();
    else runSignal.addEventListener('abort', onAbort, { once: true });
  });
  const raced = await Promise.race([work, aborted, timeout.promise.then((): Raced => ({ kind: 'stopped', why: 'timeout', settled: false }))]);
  timeout.cancel();
  if (onAbort) runSignal.removeEventListener('abort', onAbort);
  if (raced.kind !== 'stopped') return raced;
  controller.abort(new Error(raced.why));
  const grace = delay(node.policy.teardownGraceMs);
  const stopped = await Promise.race([work.then(() => true), grace.promise.then(() => false)]);
  grace.cancel();
  return { ...raced, settled: stopped };
}

async function judge(node: GraphNode, input: NodeInput, raw: unknown): Promise<AttemptOutcome> {
  let result: ReadonlyJsonValue;
  let bytes: Uint8Array;
  try {
    bytes = canonicalBytes(raw);
    result = node.parseResult ? node.parseResult(raw as ReadonlyJsonValue) : (raw as ReadonlyJsonValue);
  } catch (error) {
    return failed('invalid-result', `result rejected: ${errorMessage(error)}`);
  }
  if (node.parseResult) {
    try {
      bytes = canonicalBytes(result);
    } catch (error) {
      return failed('invalid-result', `parsed result is not JSON: ${errorMessage(error)}`);
    }
  }
  if (bytes.byteLength > node.policy.outputBytes) {
    return failed('output-too-large', `result is ${bytes.byteLength} bytes, policy allows ${node.policy.outputBytes}`);
  }
  if (node.resultContract) {
    const violation = schemaViolation(node.resultContract, result);
    if (violation) return failed('invalid-result', `result breaks its contract: ${violation}`);
  }
  if (node.decideAction) {
    let decision;
    try {
      decision = await node.decideAction({ nodeId: input.nodeId, position: input.position, result });
    } catch (error) {
      return failed('error', `decideAction threw: ${errorMessage(error)}`);
    }
    if (decision.kind === 'deny') return failed('denied', `action denied: ${decision.reason}`);
    if (decision.kind === 'ask') return { kind: 'paused', reason: `action needs a decision: ${decision.reason}` };
  }
  return { kind: 'completed', result };
}

/** Run one attempt under the node's policy and say how it ended. Never throws. */
export async function runAttempt(request: AttemptRequest): Promise<AttemptOutcome> {
  const { node, input, inputBytes } = request;
  if (inputBytes > node.policy.inputBytes) {
    return failed('input-too-large', `input is ${inputBytes} bytes, policy allows ${node.policy.inputBytes}`);
  }
  if (request.runSignal.aborted) return { kind: 'interrupted', reason: 'run aborted before the attempt began' };
  const controller = new AbortController();
  const raced = await raceWork(request, controller);
  if (raced.kind === 'stopped') {
    const teardown = raced.settled ? 'stopped within teardown grace' : `still running after teardownGraceMs ${node.policy.teardownGraceMs}`;
    if (raced.why === 'aborted') return { kind: 'interrupted', reason: `run aborted (${teardown})` };
    return failed('timeout', `attempt exceeded timeoutMs ${node.policy.timeoutMs} (${teardown})`);
  }
  if (raced.kind === 'error') return failed('error', errorMessage(raced.error));
  return judge(node, input, raced.value);
}
