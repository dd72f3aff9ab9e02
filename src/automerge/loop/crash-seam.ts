/**
 * Test seam for crash-safety tests. When the environment variable
 * `PROOFGATE_TEST_CRASH_AT` names a point, the process kills itself with
 * SIGKILL right there: no `finally`, no flush, exactly what a power cut or an
 * OOM kill leaves behind. Unset (always, outside tests) it does nothing.
 *
 * Points of the loop (each fires at its first occurrence in the process):
 * - `status-comment-created`: the status comment was just created, nothing
 *   else about it is remembered;
 * - `label-added`: a label was just added to the change;
 * - `review-verdict-decided`: the reviewer answered, no verdict comment yet;
 * - `review-comment-written`: the verdict comment exists, the ledger does not
 *   know yet;
 * - `repair-committed`: the repair committed in its worktree and its push
 *   intent is recorded, nothing was pushed;
 * - `repair-pushed`: the head branch moved, the repair is not recorded;
 * - `merge-returned`: the forge merged, the ledger has no `merged` record.
 * The local forge has one more, in its own seam: `merge-base-updated`
 * (src/forge/local/merge.ts).
 */
export type CrashPoint =
  'status-comment-created' | 'label-added' | 'review-verdict-decided' | 'review-comment-written' | 'repair-committed' | 'repair-pushed' | 'merge-returned';

export const CRASH_ENV = 'PROOFGATE_TEST_CRASH_AT';

export function crashPoint(point: CrashPoint): void {
  if (process.env[CRASH_ENV] === point) process.kill(process.pid, 'SIGKILL');
}
