import { ProofgateError, canonicalBytes, errorMessage, sha256Digest, type JsonValue, type Sha256Digest } from '../../core/index.js';
import type { FailureClass } from '../../contracts/runtime-events.js';
import type { RunStorage } from '../../storage/policy-types.js';
import type { NewEvent } from '../../storage/ports.js';
import { policyRefusal } from '../../storage/sensitive.js';
import type { AttemptOutcome } from './attempt.js';

const MAX_REASON = 500;

function shortReason(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}

/**
 * An attempt outcome in the form the store keeps: the result is the value the
 * storage policy lets through (redacted where it says so), its digest and
 * byte count are of those stored bytes, and no reason holds text the policy
 * refuses. Only this type can be recorded.
 */
export type StorableOutcome =
  | {
      readonly kind: 'completed';
      readonly result: JsonValue;
      readonly resultDigest: Sha256Digest;
      readonly outputBytes: number;
      /** Canonical byte length of the attempt-completed event's data (measured once, reused to batch appends). */
      readonly eventBytes: number;
    }
  | { readonly kind: 'failed'; readonly failureClass: FailureClass; readonly reason: string }
  | { readonly kind: 'paused'; readonly reason: string }
  | { readonly kind: 'interrupted'; readonly reason: string };

/** What the executor needs from its storage to make outcomes storable. */
export interface StorageFit {
  readonly prepare: RunStorage['prepareJson'];
  readonly maxEventPayloadBytes: number;
  readonly maxAppendBatchBytes: number;
}

export function storageFit(storage: RunStorage): StorageFit {
  if (typeof (storage as Partial<RunStorage>).prepareJson !== 'function') {
    // Without it results could not be hashed in their stored form.
    throw new ProofgateError(
      'INVALID_INPUT',
      'graph executor: storage.prepareJson is missing; pass the binding from createLocalRunStorage or createPostgresRunStorage (a wrapper must keep prepareJson)',
    );
  }
  const { policy } = storage.record;
  return {
    prepare: (value, where) => storage.prepareJson(value, where),
    maxEventPayloadBytes: policy.maxEventPayloadBytes,
    maxAppendBatchBytes: policy.maxAppendBatchBytes,
  };
}

/**
 * Text as the store keeps it (the policy applied to the whole text first, then
 * cut to `max` characters), or a fixed note naming why the policy refused it.
 */
export function storableText(fit: StorageFit, text: string, what: string, max = MAX_REASON): string {
  try {
    return shortReason(fit.prepare(text, what) as string, max);
  } catch (error) {
    return `${what} withheld: rejected by the storage policy: ${policyRefusal(error, what) ?? errorMessage(error)}`;
  }
}

/**
 * `null`, `true` and `false`: the JSON values no storage policy can change or
 * refuse (no text, no number that could spell a secret), with their stored
 * bytes and digest computed once.
 */
const LITERALS = new Map<unknown, { readonly result: JsonValue; readonly bytes: Uint8Array; readonly digest: Sha256Digest }>(
  [null, true, false].map((value) => {
    const bytes = canonicalBytes(value);
    return [value, { result: value, bytes, digest: sha256Digest(bytes) }];
  }),
);

function literalResult(value: unknown): { readonly result: JsonValue; readonly bytes: Uint8Array; readonly digest: Sha256Digest } | undefined {
  return value === null || typeof value === 'boolean' ? LITERALS.get(value) : undefined;
}

/** The data of the event that records an outcome (see records.ts for the event). */
export function outcomeData(
  position: string,
  nodeId: string,
  outcome: StorableOutcome | Omit<Extract<StorableOutcome, { kind: 'completed' }>, 'eventBytes'>,
): { readonly type: string; readonly data: JsonValue } {
  switch (outcome.kind) {
    case 'completed':
      return {
        type: 'attempt-completed',
        data: { position, nodeId, result: outcome.result, resultDigest: outcome.resultDigest, outputBytes: outcome.outputBytes, resolvedBy: 'executor' },
      };
    case 'failed':
      return { type: 'attempt-failed', data: { position, nodeId, failureClass: outcome.failureClass, reason: outcome.reason } };
    case 'paused':
      return { type: 'attempt-paused', data: { position, nodeId, reason: outcome.reason, request: { kind: 'action', detail: outcome.reason } } };
    case 'interrupted':
      return { type: 'attempt-interrupted', data: { position, nodeId, reason: outcome.reason } };
  }
}

/**
 * Turn how an attempt ended into what can be recorded. A result holding a
 * known secret, or content the policy rejects, fails the attempt
 * (`invalid-result`) with a reason naming the code and path only; a result
 * whose event would pass the policy's payload limit fails as
 * `output-too-large`. Reasons are stored as the policy lets them through.
 * Never throws: whatever a node returns or throws ends as a recorded attempt.
 */
export function storableOutcome(fit: StorageFit, position: string, nodeId: string, outcome: AttemptOutcome): StorableOutcome {
  switch (outcome.kind) {
    case 'completed': {
      let stored: { readonly result: JsonValue; readonly bytes: Uint8Array; readonly digest: Sha256Digest };
      const literal = literalResult(outcome.result);
      if (literal) {
        stored = literal;
      } else {
        let result: JsonValue;
        try {
          result = fit.prepare(outcome.result, 'result');
        } catch (error) {
          const why = policyRefusal(error, 'result') ?? errorMessage(error);
          return { kind: 'failed', failureClass: 'invalid-result', reason: `result rejected by the storage policy: ${why}` };
        }
        const bytes = canonicalBytes(result);
        stored = { result, bytes, digest: sha256Digest(bytes) };
      }
      const completed = { kind: 'completed', result: stored.result, resultDigest: stored.digest, outputBytes: stored.bytes.byteLength } as const;
      const eventBytes = canonicalBytes(outcomeData(position, nodeId, completed).data).byteLength;
      if (eventBytes > fit.maxEventPayloadBytes) {
        return {
          kind: 'failed',
          failureClass: 'output-too-large',
          reason: `the attempt-completed event would be ${eventBytes} bytes; the storage policy allows ${fit.maxEventPayloadBytes}`,
        };
      }
      return { ...completed, eventBytes };
    }
    case 'failed':
      return { kind: 'failed', failureClass: outcome.failureClass, reason: storableText(fit, outcome.reason, 'error text') };
    case 'paused':
      return { kind: 'paused', reason: storableText(fit, outcome.reason, 'pause reason') };
    case 'interrupted':
      return { kind: 'interrupted', reason: storableText(fit, outcome.reason, 'interruption reason') };
  }
}

/**
 * Split events into consecutive appends that each stay within the policy's
 * batch limit (counted as the guard counts). `dataBytes` may give the
 * canonical byte length of an event's data where it is already known.
 */
export function appendBatches(
  events: readonly NewEvent[],
  maxBatchBytes: number,
  dataBytes: (index: number) => number | undefined = () => undefined,
): NewEvent[][] {
  const batches: NewEvent[][] = [];
  let current: NewEvent[] = [];
  let bytes = 0;
  events.forEach((event, index) => {
    const size = (dataBytes(index) ?? canonicalBytes(event.data).byteLength) + Buffer.byteLength(event.id, 'utf8') + Buffer.byteLength(event.type, 'utf8');
    if (current.length > 0 && bytes + size > maxBatchBytes) {
      batches.push(current);
      current = [];
      bytes = 0;
    }
    current.push(event);
    bytes += size;
  });
  if (current.length > 0) batches.push(current);
  return batches;
}
