/**
 * Bisection of a failing candidate, pure. A candidate of several changes
 * whose checks fail is split: its changes become suspects and the next
 * candidate holds the first half of them (`bisectBatch`). A passing half
 * lands and leaves the suspects; a failing half narrows them; a lone
 * change that fails is the culprit and is ejected (charged). When every
 * suspect landed without the failure coming back, it did not reproduce:
 * the failure is reported flaky and charged to nobody.
 */
import type { QueueFailure } from './queue.js';

/** The first half of a failed candidate's suspects (the larger half when odd): what the next candidate tests. */
export function bisectBatch<T>(suspects: readonly T[]): readonly T[] {
  if (suspects.length <= 1) return suspects;
  return suspects.slice(0, Math.ceil(suspects.length / 2));
}

/** What the runner does once a candidate's checks answered. */
export type CheckedPlan =
  /** Land the batch; `flaky` when it cleared the last suspects of a failure that did not come back. */
  | {
      readonly kind: 'land';
      readonly changes: readonly string[];
      readonly flaky: { readonly changes: readonly string[]; readonly failure: QueueFailure } | null;
    }
  /** A lone change failed: it leaves the queue with the failure. */
  | { readonly kind: 'eject'; readonly change: string; readonly failure: QueueFailure }
  /** Several changes failed together: they become the suspects (the next candidate is their first half). */
  | { readonly kind: 'bisect'; readonly changes: readonly string[]; readonly failure: QueueFailure };

/**
 * The plan after a candidate of `batch` (change ids, queue order) was
 * checked (pure). `suspects` are the queue's suspects before the check.
 */
export function planAfterCheck(
  batch: readonly string[],
  result: { readonly passed: true } | { readonly passed: false; readonly failure: QueueFailure },
  suspects: { readonly changes: readonly string[]; readonly failure: QueueFailure } | null,
): CheckedPlan {
  if (result.passed) {
    const left = suspects === null ? [] : suspects.changes.filter((id) => !batch.includes(id));
    const cleared = suspects !== null && left.length === 0;
    return { kind: 'land', changes: batch, flaky: cleared ? { changes: suspects.changes, failure: suspects.failure } : null };
  }
  const [only] = batch;
  if (batch.length === 1 && only !== undefined) return { kind: 'eject', change: only, failure: result.failure };
  return { kind: 'bisect', changes: batch, failure: result.failure };
}
