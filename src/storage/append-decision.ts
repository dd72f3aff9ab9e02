import { ProofgateError } from '../core/index.js';
import type { PreparedAppend } from './guard.js';
import type { AppendResult } from './ports.js';

/** A stored event that shares an id with the batch being appended. */
export interface ExistingEvent {
  readonly id: string;
  readonly streamId: string;
  readonly revision: number;
  readonly type: string;
  readonly dataText: string;
}

export type AppendDecision =
  | { readonly kind: 'insert' }
  | { readonly kind: 'retry'; readonly revision: number; readonly reason: string }
  | { readonly kind: 'conflict'; readonly current: number; readonly reason: string }
  | { readonly kind: 'duplicate'; readonly id: string; readonly reason: string };

/**
 * What to do with a batch, given the stream's current revision (read inside
 * the write transaction) and the stored events that share an id with it.
 * Pure: both adapters call it with what they read.
 *
 * - no id known and the revision matches: insert;
 * - every id known, in this stream, at expected+1.. in order, with identical
 *   type and canonical data: a safe retry (nothing written);
 * - any other known id: `DUPLICATE_EVENT_ID`;
 * - otherwise a stale revision: `REVISION_CONFLICT`.
 */
export function decideAppend(batch: PreparedAppend, currentRevision: number, existing: readonly ExistingEvent[]): AppendDecision {
  if (existing.length === 0) {
    if (currentRevision === batch.expectedRevision) return { kind: 'insert' };
    return {
      kind: 'conflict',
      current: currentRevision,
      reason: `stream ${batch.streamId} is at revision ${currentRevision}, not ${batch.expectedRevision}`,
    };
  }
  const byId = new Map(existing.map((event) => [event.id, event]));
  let identical = existing.length === batch.events.length;
  batch.events.forEach((event, index) => {
    const stored = byId.get(event.id);
    if (
      stored === undefined ||
      stored.streamId !== batch.streamId ||
      stored.revision !== batch.expectedRevision + index + 1 ||
      stored.type !== event.type ||
      stored.dataText !== event.dataText
    )
      identical = false;
  });
  if (identical) {
    return {
      kind: 'retry',
      revision: batch.expectedRevision + batch.events.length,
      reason: 'the identical batch is already stored at this revision',
    };
  }
  const first = batch.events.find((event) => byId.has(event.id)) ?? batch.events[0];
  const id = first?.id ?? '';
  return { kind: 'duplicate', id, reason: `event id ${id} is already stored with other content or at another place` };
}

/** Turn a decision that does not insert into its result or typed error. */
export function settleDecision(decision: Exclude<AppendDecision, { kind: 'insert' }>, streamId: string): AppendResult {
  switch (decision.kind) {
    case 'retry':
      return { revision: decision.revision, written: false };
    case 'conflict':
      throw new ProofgateError('REVISION_CONFLICT', decision.reason, { streamId, currentRevision: decision.current });
    case 'duplicate':
      throw new ProofgateError('DUPLICATE_EVENT_ID', decision.reason, { streamId, id: decision.id });
  }
}
