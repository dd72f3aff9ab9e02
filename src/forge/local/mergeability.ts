import type { ChangeState, ForgeCheck, Mergeable, MergeStateStatus } from '../port.js';

/**
 * Mergeability of a local change: a pure judgment from what git and the store
 * said. Precedence, first match wins:
 *
 * 1. not open                                  -> UNKNOWN / UNKNOWN
 * 2. `git merge-tree` reports conflicts        -> CONFLICTING / DIRTY
 * 3. `requireUpToDate` and the base moved ahead
 *    of the head's merge base                  -> MERGEABLE / BEHIND
 * 4. a configured check has no successful run
 *    on the current head (missing, queued,
 *    running or failed)                        -> MERGEABLE / BLOCKED
 * 5. a check that is not configured (left over
 *    from an older config) failed on the head  -> MERGEABLE / UNSTABLE
 * 6. otherwise                                 -> MERGEABLE / CLEAN
 *
 * `merge` refuses DIRTY, BEHIND and BLOCKED with NOT_MERGEABLE; UNSTABLE and
 * CLEAN may merge.
 */

export interface MergeabilityInput {
  readonly state: ChangeState;
  readonly conflicts: boolean;
  /** True when the base sha is an ancestor of (or equal to) the head sha. */
  readonly upToDate: boolean;
  readonly requireUpToDate: boolean;
  readonly configuredChecks: readonly string[];
  /** Check runs of the current head. */
  readonly checks: readonly ForgeCheck[];
}

export interface MergeabilityJudgment {
  readonly mergeable: Mergeable;
  readonly mergeStateStatus: MergeStateStatus;
  /** Why, in words (for errors and `change show`). */
  readonly reason: string;
}

const PASSING: ReadonlySet<string> = new Set(['success', 'neutral', 'skipped']);

export function judgeMergeability(input: MergeabilityInput): MergeabilityJudgment {
  if (input.state !== 'open') return { mergeable: 'UNKNOWN', mergeStateStatus: 'UNKNOWN', reason: `change is ${input.state}` };
  if (input.conflicts) return { mergeable: 'CONFLICTING', mergeStateStatus: 'DIRTY', reason: 'head conflicts with base' };
  if (input.requireUpToDate && !input.upToDate) {
    return { mergeable: 'MERGEABLE', mergeStateStatus: 'BEHIND', reason: 'base moved ahead and the config requires up-to-date branches' };
  }
  const byName = new Map(input.checks.map((check) => [check.name, check]));
  const missing: string[] = [];
  const pending: string[] = [];
  const failing: string[] = [];
  for (const name of input.configuredChecks) {
    const check = byName.get(name);
    if (check === undefined) missing.push(name);
    else if (check.status !== 'completed') pending.push(name);
    else if (check.conclusion === null || !PASSING.has(check.conclusion)) failing.push(name);
  }
  if (missing.length + pending.length + failing.length > 0) {
    const parts = [
      failing.length > 0 ? `failed: ${failing.join(', ')}` : '',
      pending.length > 0 ? `pending: ${pending.join(', ')}` : '',
      missing.length > 0 ? `not run: ${missing.join(', ')}` : '',
    ].filter((part) => part !== '');
    return { mergeable: 'MERGEABLE', mergeStateStatus: 'BLOCKED', reason: `required checks ${parts.join('; ')}` };
  }
  const configured = new Set(input.configuredChecks);
  const otherFailing = input.checks.filter(
    (check) => !configured.has(check.name) && check.status === 'completed' && (check.conclusion === null || !PASSING.has(check.conclusion)),
  );
  if (otherFailing.length > 0) {
    return {
      mergeable: 'MERGEABLE',
      mergeStateStatus: 'UNSTABLE',
      reason: `non-required checks failed: ${otherFailing.map((check) => check.name).join(', ')}`,
    };
  }
  return { mergeable: 'MERGEABLE', mergeStateStatus: 'CLEAN', reason: 'clean' };
}

/** True when `merge` may go ahead under this judgment. */
export function allowsMerge(judgment: MergeabilityJudgment): boolean {
  return judgment.mergeable === 'MERGEABLE' && (judgment.mergeStateStatus === 'CLEAN' || judgment.mergeStateStatus === 'UNSTABLE');
}
