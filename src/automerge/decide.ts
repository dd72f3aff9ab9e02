/**
 * `decideAutomerge`: the one judgment of the automerge loop, pure. From the live
 * snapshot of a change, its ledger and its trusted verdict markers it returns
 * what to do next and why. Merge is returned only for the exact current head,
 * with a trusted CONFIRMED marker naming that head, no pending or failed check,
 * and ready mergeability.
 */
import type { ChangeSnapshot } from '../forge/port.js';
import { DEFAULT_IGNORED_CHECKS, summarizeChecks, type CheckPolicy } from './checks.js';
import { automergeActive, type AutomergeLedgerState, type RepairKind } from './ledger.js';
import type { TrustedVerdict } from './markers.js';

export interface AutomergePolicy {
  readonly checks: CheckPolicy;
  /** Branch protection requires the head to be up to date with the base: BEHIND is repaired by a rebase. */
  readonly requireUpToDate: boolean;
  /** Automatic repairs per change (human `rebase` commands do not count). */
  readonly maxRepairsPerChange: number;
  /** Automatic repairs started from the same head. */
  readonly maxRepairsPerHead: number;
  /** Refused merge attempts on the same head before a human must look. */
  readonly maxMergeAttemptsPerHead: number;
  /** Reviews of the same head that may end without a verdict before a human must look. */
  readonly maxReviewsPerHead: number;
}

export const defaultAutomergePolicy: AutomergePolicy = {
  checks: { ignored: DEFAULT_IGNORED_CHECKS },
  requireUpToDate: false,
  maxRepairsPerChange: 3,
  maxRepairsPerHead: 2,
  maxMergeAttemptsPerHead: 2,
  maxReviewsPerHead: 3,
};

export type AutomergeDecision =
  | { readonly kind: 'wait'; readonly reason: string }
  | { readonly kind: 'review'; readonly head: string; readonly reason: string }
  | { readonly kind: 'repair'; readonly repair: RepairKind; readonly head: string; readonly reason: string }
  | { readonly kind: 'merge'; readonly head: string; readonly reason: string }
  | { readonly kind: 'block'; readonly reason: string }
  | { readonly kind: 'stop'; readonly reason: string };

function short(sha: string): string {
  return sha.slice(0, 12);
}

function latestVerdictFor(verdicts: readonly TrustedVerdict[], changeId: string, head: string): TrustedVerdict | null {
  let latest: TrustedVerdict | null = null;
  for (const marker of verdicts) {
    if (marker.fields.kind === 'review-verdict' && marker.fields.change === changeId && marker.fields.head === head) latest = marker;
  }
  return latest;
}

function repairOrBlock(
  repair: RepairKind,
  reason: string,
  head: string,
  ledger: AutomergeLedgerState,
  policy: AutomergePolicy,
): AutomergeDecision {
  const automatic = ledger.repairs.filter((r) => r.automatic);
  const onHead = automatic.filter((r) => r.head === head).length;
  if (automatic.length >= policy.maxRepairsPerChange) {
    return { kind: 'block', reason: `${reason}; repair cap reached: ${automatic.length} automatic repairs on this change (max ${policy.maxRepairsPerChange})` };
  }
  if (onHead >= policy.maxRepairsPerHead) {
    return { kind: 'block', reason: `${reason}; repair cap reached: ${onHead} automatic repairs from head ${short(head)} (max ${policy.maxRepairsPerHead})` };
  }
  return { kind: 'repair', repair, head, reason };
}

/**
 * Decide the next automerge step. `verdicts` are markers that `readMarkers` /
 * `collectVerdicts` already verified, oldest first by their signed time; later
 * ones win for a head.
 */
export function decideAutomerge(
  snapshot: ChangeSnapshot,
  ledger: AutomergeLedgerState,
  policy: AutomergePolicy,
  verdicts: readonly TrustedVerdict[],
): AutomergeDecision {
  const head = snapshot.head.sha;
  if (snapshot.state === 'merged') return { kind: 'stop', reason: `change is merged${snapshot.mergeCommitSha === null ? '' : ` (${short(snapshot.mergeCommitSha)})`}` };
  if (snapshot.state === 'closed') return { kind: 'stop', reason: 'change is closed' };
  if (ledger.merged !== null) return { kind: 'stop', reason: `already merged head ${short(ledger.merged.head)} as ${short(ledger.merged.mergeCommit)}` };
  if (ledger.automerge === null) return { kind: 'stop', reason: 'automerge was not requested' };
  if (!automergeActive(ledger) && ledger.stop !== null) {
    return { kind: 'stop', reason: `stopped by ${ledger.stop.actor} (comment ${ledger.stop.commentId} at ${ledger.stop.at})` };
  }
  if (snapshot.draft) return { kind: 'wait', reason: 'change is a draft' };

  const activeRepair = ledger.repairs.find((r) => r.status === 'dispatched' && r.head === head);
  if (activeRepair !== undefined) return { kind: 'wait', reason: `repair ${activeRepair.id} (${activeRepair.repair}) of head ${short(head)} in progress` };

  const verdict = latestVerdictFor(verdicts, snapshot.id, head);
  if (verdict?.fields.verdict === 'HOLD') {
    return { kind: 'block', reason: `review of head ${short(head)} is HOLD: a human must review (comment ${verdict.commentId})` };
  }

  if (snapshot.mergeable === 'CONFLICTING' || snapshot.mergeStateStatus === 'DIRTY') {
    return repairOrBlock('rebase', `head ${short(head)} conflicts with ${snapshot.base.ref} (${snapshot.mergeable}/${snapshot.mergeStateStatus})`, head, ledger, policy);
  }
  if (snapshot.mergeStateStatus === 'BEHIND' && policy.requireUpToDate) {
    return repairOrBlock('rebase', `head ${short(head)} is behind ${snapshot.base.ref}, which must be up to date`, head, ledger, policy);
  }

  const checks = summarizeChecks(snapshot.checks.filter((c) => c.headSha === head), policy.checks);
  const failed = checks.terminalBlockers.filter((b) => b.repairable);
  if (failed.length > 0) {
    return repairOrBlock('fix-checks', `failed checks on ${short(head)}: ${failed.map((b) => `${b.label} (${b.conclusion})`).join(', ')}`, head, ledger, policy);
  }

  const inFlight = ledger.reviews.find(
    (r) => r.head === head && r.status === 'dispatched' && !verdicts.some((v) => v.fields.review === r.id && v.fields.head === head),
  );
  if (inFlight !== undefined) return { kind: 'wait', reason: `review ${inFlight.id} of head ${short(head)} in progress; checks: ${checks.text}` };

  if (verdict === null) {
    const stale = verdicts.filter((v) => v.fields.change === snapshot.id && v.fields.head !== head);
    const tried = ledger.reviews.filter((r) => r.head === head).length;
    if (tried >= policy.maxReviewsPerHead) {
      return { kind: 'block', reason: `${tried} reviews of head ${short(head)} ended without a verdict (max ${policy.maxReviewsPerHead})` };
    }
    const why = stale.length > 0 ? `verdicts name older heads (${[...new Set(stale.map((v) => short(v.fields.head)))].join(', ')})` : 'no verdict yet';
    return { kind: 'review', head, reason: `head ${short(head)} needs an exact-head review: ${why}` };
  }
  if (verdict.fields.verdict === 'REFUTED') {
    if (verdict.fields.findings > 0) {
      return repairOrBlock('fix-findings', `review of head ${short(head)} is REFUTED with ${verdict.fields.findings} finding(s)`, head, ledger, policy);
    }
    return { kind: 'block', reason: `review of head ${short(head)} is REFUTED without actionable findings: a human must review` };
  }

  const rerun = checks.terminalBlockers.filter((b) => !b.repairable);
  if (rerun.length > 0) {
    return { kind: 'block', reason: `checks not green on ${short(head)} and need a re-run: ${rerun.map((b) => `${b.label} (${b.conclusion})`).join(', ')}` };
  }
  if (checks.hasPending) return { kind: 'wait', reason: `checks pending on ${short(head)}: ${checks.text}` };

  const refused = ledger.mergeFailures.filter((f) => f.head === head);
  if (refused.length >= policy.maxMergeAttemptsPerHead) {
    return { kind: 'block', reason: `merge of head ${short(head)} refused ${refused.length} times (last: ${refused[refused.length - 1]?.code ?? 'unknown'})` };
  }
  const readyState =
    snapshot.mergeStateStatus === 'CLEAN' || snapshot.mergeStateStatus === 'HAS_HOOKS' || (snapshot.mergeStateStatus === 'BEHIND' && !policy.requireUpToDate);
  if (snapshot.mergeable !== 'MERGEABLE' || !readyState) {
    return { kind: 'wait', reason: `mergeability not ready on ${short(head)}: ${snapshot.mergeable}/${snapshot.mergeStateStatus}` };
  }
  return { kind: 'merge', head, reason: `head ${short(head)} CONFIRMED (comment ${verdict.commentId}), checks green, ${snapshot.mergeable}/${snapshot.mergeStateStatus}` };
}
