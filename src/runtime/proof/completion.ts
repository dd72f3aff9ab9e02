import { canonicalJson } from '../../core/index.js';
import type { ReadonlyJsonValue } from '../json-types.js';
import type { RunEvent } from '../run/stream.js';

export type Completion =
  { readonly kind: 'completed'; readonly nodeId: string; readonly result: ReadonlyJsonValue } | { readonly kind: 'invalid'; readonly reason: string };

/**
 * What the run says about a position: exactly one dispatch, then exactly one
 * completed event for the same node, and no failure or interruption there.
 */
export function completionAt(events: readonly RunEvent[], position: string): Completion {
  const dispatches = events.filter((event) => event.type === 'dispatch-decided' && event.data.position === position);
  if (dispatches.length !== 1) return { kind: 'invalid', reason: `position ${position} has ${dispatches.length} dispatches, expected exactly 1` };
  const dispatch = dispatches[0] as Extract<RunEvent, { type: 'dispatch-decided' }>;
  const after = events.filter((event) => event.revision > dispatch.revision);
  let completed: Extract<RunEvent, { type: 'attempt-completed' }> | null = null;
  for (const event of after) {
    if (event.type !== 'attempt-completed' && event.type !== 'attempt-failed' && event.type !== 'attempt-interrupted') continue;
    if (event.data.position !== position) continue;
    if (event.type !== 'attempt-completed') return { kind: 'invalid', reason: `position ${position} ended with ${event.type}` };
    if (completed) return { kind: 'invalid', reason: `position ${position} has more than one completed event` };
    completed = event;
  }
  if (!completed) return { kind: 'invalid', reason: `position ${position} has no completed event` };
  if (completed.data.nodeId !== dispatch.data.nodeId) {
    return { kind: 'invalid', reason: `position ${position} was dispatched to ${dispatch.data.nodeId} but completed by ${completed.data.nodeId}` };
  }
  return { kind: 'completed', nodeId: completed.data.nodeId, result: completed.data.result as ReadonlyJsonValue };
}

export function sameJson(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}
