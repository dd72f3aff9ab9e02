/**
 * `decideAutomerge`: the one judgment of the automerge loop, pure. From the live
 * snapshot of a change, its ledger, its trusted verdict markers and the facts
 * the loop read about them (`ReviewFacts`) it returns what to do next and why.
 * Merge is returned only for the exact current head, with a trusted CONFIRMED
 * marker naming that head whose diff, contract and config digests equal the
 * live ones and whose stored record still resolves, a maintainer's approval
 * when the change touches what proofgate trusts, no pending or failed check
 * (a check the forge requires, `snapshot.requiredChecks`, that has not
 * reported is pending), ready mergeability, and, last, the forge's review
 * decision (required approvals given, no changes requested).
 */
import type { ChangeSnapshot } from '../forge/port.js';
import { DEFAULT_IGNORED_CHECKS, compareWithBase, summarizeChecks, withForgeRequired, type CheckPolicy, type TerminalBlocker } from './checks.js';
import { automergeActive, timeOf, type AutomergeLedgerState, type RepairKind, type ReviewRecord } from './ledger.js';
import type { TrustedVerdict, VerdictBindings } from './markers.js';

export interface AutomergePolicy {
  readonly checks: CheckPolicy;
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
  maxRepairsPerChange: 3,
  maxRepairsPerHead: 2,
  maxMergeAttemptsPerHead: 2,
  maxReviewsPerHead: 3,
};

/**
 * Why an automerge decision is what it is, one stable code per distinct
 * reason (grouped by the kind of decision that carries it). Branch on the
 * code; the prose `reason` next to it is for people and may change. Most come
 * from `decideAutomerge`; the loop's gate (`gateDecision`) and the router add
 * the few marked below.
 */
export const AUTOMERGE_REASON_CODES = [
  // stop
  'change-merged',
  'change-closed',
  'already-merged',
  'not-requested',
  'stopped', // also the router's stop while no job runs
  // wait
  'draft',
  'repair-in-progress',
  'review-in-progress',
  'bindings-unreadable',
  'approval-required',
  'checks-pending',
  'mergeability-pending',
  'review-required', // the forge's review decision: required approvals are missing (a window; its expiry blocks)
  'new-head-pending', // gate: a repair pushed a head the forge does not show yet
  'merge-queued', // the change waits in its base's merge queue (proofgate's, or the forge's own: GitHub's)
  // review
  'no-verdict',
  'head-moved',
  'bindings-changed',
  'record-unverified',
  // repair (a block when a repair cap is reached)
  'merge-conflict',
  'behind',
  'checks-failed',
  'review-refuted',
  // block
  'review-hold',
  'refuted-without-findings',
  'review-cap',
  'repair-cap-per-change',
  'repair-cap-per-head',
  'checks-need-rerun',
  'merge-refused',
  'base-blocked',
  'queue-ejected', // a check failed on the change's merge-queue candidate (proofgate's queue), or GitHub's queue removed it for its checks
  'changes-requested', // the forge's review decision: a reviewer asked for changes
  'no-agent-fix', // gate
  'no-repair-worker', // gate
  'fork-no-repair', // gate: a fork's branch is its author's; proofgate never pushes to it
  'repair-made-no-change', // gate
  // merge
  'ready',
] as const;

export type AutomergeReasonCode = (typeof AUTOMERGE_REASON_CODES)[number];

type DecisionBody =
  | { readonly kind: 'wait'; readonly reason: string }
  | { readonly kind: 'review'; readonly head: string; readonly reason: string }
  | { readonly kind: 'repair'; readonly repair: RepairKind; readonly head: string; readonly reason: string }
  | { readonly kind: 'merge'; readonly head: string; readonly reason: string }
  | { readonly kind: 'block'; readonly reason: string }
  | { readonly kind: 'stop'; readonly reason: string };

/**
 * Codes of the `merge-failed` records the loop makes when the forge's own
 * merge queue (GitHub's) let the change go without merging it: its merge
 * group's checks failed or timed out, or another reason (a conflict, a
 * person took it out, the queue was cleared).
 */
export const QUEUE_CHECKS_FAILED = 'QUEUE_CHECKS_FAILED';
export const QUEUE_REMOVED = 'QUEUE_REMOVED';

/** The `merge-failed` code of a removal from GitHub's merge queue, from GitHub's reason (pure). */
export function queueRemovalCode(reason: string): typeof QUEUE_CHECKS_FAILED | typeof QUEUE_REMOVED {
  return /\bci[_ ]|check|status|timed?[_ ]?out/i.test(reason) ? QUEUE_CHECKS_FAILED : QUEUE_REMOVED;
}

/** A decision with its reason code: what `decideAutomerge` returns, and what the loop acts on and shows. */
export type AutomergeDecision = DecisionBody & { readonly code: AutomergeReasonCode };

/** How a verdict's stored accepted-result record resolved against the live bindings (`resolveReviewRecord`). */
export type RecordStanding = { readonly kind: 'accepted' } | { readonly kind: 'wait'; readonly reason: string };

/** What the loop read for a decision besides the snapshot and the markers (plain data). */
export interface ReviewFacts {
  /** The digests a review of the current head would be bound to now, or why they cannot be read. */
  readonly live: VerdictBindings | { readonly problem: string };
  /** The stored record of each current-head verdict that names a review run, by review id. */
  readonly records: Readonly<Record<string, RecordStanding>>;
  /** Paths of the change that touch what proofgate trusts (`trustedPathsTouched`); empty: none. */
  readonly touchesTrusted: readonly string[];
  /** A maintainer's approval that binds the current head, or null. */
  readonly approval: { readonly by: string } | null;
}

/** Why a verdict cannot be taken: a bound digest `changed`, or its record could not be `unverified`. */
export type VerdictStanding = { readonly ok: true } | { readonly ok: false; readonly cause: 'changed' | 'unverified'; readonly reason: string };

const BOUND: readonly (readonly [keyof VerdictBindings, string])[] = [
  ['config', 'config'],
  ['contract', 'acceptance contract'],
  ['diff', 'diff'],
];

/**
 * Whether a trusted verdict still binds (pure): every digest it signed equals
 * the live one, and the accepted-result record it names (if any) resolved.
 * The reason names what changed, e.g. `config changed since review rvw_1`.
 */
export function verdictStanding(verdict: TrustedVerdict, facts: ReviewFacts): VerdictStanding {
  const { review } = verdict.fields;
  const { live } = facts;
  if ('problem' in live) return { ok: false, cause: 'unverified', reason: `the bindings of review ${review} cannot be checked: ${live.problem}` };
  const changed = BOUND.filter(([field]) => verdict.fields[field] !== live[field]).map(([, name]) => name);
  if (changed.length > 0) return { ok: false, cause: 'changed', reason: `${changed.join(', ')} changed since review ${review}` };
  if (verdict.fields.run === null) return { ok: true };
  const record = facts.records[review];
  if (record === undefined) return { ok: false, cause: 'unverified', reason: `the stored record of review ${review} was not checked` };
  if (record.kind !== 'accepted') return { ok: false, cause: 'unverified', reason: `the stored record of review ${review} does not hold: ${record.reason}` };
  return { ok: true };
}

interface HeadVerdict {
  /** The latest verdict for the head that still binds, or null. */
  readonly verdict: TrustedVerdict | null;
  /** Why the later verdicts for the head (newest first) no longer bind. */
  readonly stale: readonly { readonly review: string; readonly standing: Exclude<VerdictStanding, { ok: true }> }[];
}

function verdictFor(verdicts: readonly TrustedVerdict[], changeId: string, head: string, facts: ReviewFacts): HeadVerdict {
  const forHead = verdicts.filter((marker) => marker.fields.kind === 'review-verdict' && marker.fields.change === changeId && marker.fields.head === head);
  const stale: { review: string; standing: Exclude<VerdictStanding, { ok: true }> }[] = [];
  for (let i = forHead.length - 1; i >= 0; i -= 1) {
    const marker = forHead[i] as TrustedVerdict;
    const standing = verdictStanding(marker, facts);
    if (standing.ok) return { verdict: marker, stale };
    stale.push({ review: marker.fields.review, standing });
  }
  return { verdict: null, stale };
}

/** At most a few paths, then how many more. */
function listPaths(paths: readonly string[]): string {
  const shown = paths.slice(0, 5).join(', ');
  return paths.length > 5 ? `${shown} and ${paths.length - 5} more` : shown;
}

function short(sha: string): string {
  return sha.slice(0, 12);
}

function listChecks(blockers: readonly TerminalBlocker[]): string {
  return blockers.map((b) => `${b.label} (${b.conclusion})`).join(', ');
}

function repairOrBlock(
  repair: RepairKind,
  code: AutomergeReasonCode,
  reason: string,
  head: string,
  ledger: AutomergeLedgerState,
  policy: AutomergePolicy,
): AutomergeDecision {
  const automatic = ledger.repairs.filter((r) => r.automatic);
  const onHead = automatic.filter((r) => r.head === head).length;
  if (automatic.length >= policy.maxRepairsPerChange) {
    return {
      kind: 'block',
      code: 'repair-cap-per-change',
      reason: `${reason}; repair cap reached: ${automatic.length} automatic repairs on this change (max ${policy.maxRepairsPerChange})`,
    };
  }
  if (onHead >= policy.maxRepairsPerHead) {
    return {
      kind: 'block',
      code: 'repair-cap-per-head',
      reason: `${reason}; repair cap reached: ${onHead} automatic repairs from head ${short(head)} (max ${policy.maxRepairsPerHead})`,
    };
  }
  return { kind: 'repair', code, repair, head, reason };
}

/**
 * Decide the next automerge step: the decision's `code`
 * (`AUTOMERGE_REASON_CODES`) says why in a stable form, its `reason` says the
 * same in prose for the timeline and the status comment. `verdicts` are markers that `readMarkers` /
 * `collectVerdicts` already verified, oldest first by their signed time; the
 * latest one for the head that still binds (`verdictStanding`) is taken. A
 * verdict whose config, contract or diff digest differs from the live one, or
 * whose stored record does not resolve, is never a pass: the head is reviewed
 * again, with the reason naming what changed.
 */
export function decideAutomerge(
  snapshot: ChangeSnapshot,
  ledger: AutomergeLedgerState,
  policy: AutomergePolicy,
  verdicts: readonly TrustedVerdict[],
  facts: ReviewFacts,
): AutomergeDecision {
  const head = snapshot.head.sha;
  if (snapshot.state === 'merged')
    return { kind: 'stop', code: 'change-merged', reason: `change is merged${snapshot.mergeCommitSha === null ? '' : ` (${short(snapshot.mergeCommitSha)})`}` };
  if (snapshot.state === 'closed') return { kind: 'stop', code: 'change-closed', reason: 'change is closed' };
  if (ledger.merged !== null)
    return { kind: 'stop', code: 'already-merged', reason: `already merged head ${short(ledger.merged.head)} as ${short(ledger.merged.mergeCommit)}` };
  if (ledger.automerge === null) return { kind: 'stop', code: 'not-requested', reason: 'automerge was not requested' };
  if (!automergeActive(ledger) && ledger.stop !== null) {
    return { kind: 'stop', code: 'stopped', reason: `stopped by ${ledger.stop.actor} (comment ${ledger.stop.commentId} at ${ledger.stop.at})` };
  }
  // In the forge's own merge queue (GitHub's), the forge merges it or lets it go: wait for that. Only a head whose
  // CONFIRMED verdict still binds waits there; an entry a person made for any other head hides nothing (it is
  // reviewed, or blocked, as usual).
  const queued = snapshot.forgeQueue?.entry ?? null;
  if (queued !== null && verdictFor(verdicts, snapshot.id, head, facts).verdict?.fields.verdict === 'CONFIRMED') {
    const group = queued.group;
    // The merge group's checks are the candidate's, shown as such: they never count as the head's checks.
    const groupChecks =
      group === null
        ? ''
        : `; merge group ${short(group.sha)} checks: ${group.checks.length === 0 ? 'none reported yet' : group.checks.map((c) => `${c.name} (${c.conclusion ?? c.status})`).join(', ')}`;
    return {
      kind: 'wait',
      code: 'merge-queued',
      reason: `in GitHub's merge queue of ${snapshot.base.ref} at head ${short(head)}: position ${queued.position} (${queued.state.toLowerCase().replace(/_/g, ' ')})${groupChecks}`,
    };
  }
  if (snapshot.draft) return { kind: 'wait', code: 'draft', reason: 'change is a draft' };

  const activeRepair = ledger.repairs.find((r) => r.status === 'dispatched' && r.head === head);
  if (activeRepair !== undefined)
    return { kind: 'wait', code: 'repair-in-progress', reason: `repair ${activeRepair.id} (${activeRepair.repair}) of head ${short(head)} in progress` };

  const { verdict, stale } = verdictFor(verdicts, snapshot.id, head, facts);
  if (verdict?.fields.verdict === 'HOLD') {
    return { kind: 'block', code: 'review-hold', reason: `review of head ${short(head)} is HOLD: a human must review (comment ${verdict.commentId})` };
  }

  if (snapshot.mergeable === 'CONFLICTING' || snapshot.mergeStateStatus === 'DIRTY') {
    return repairOrBlock(
      'rebase',
      'merge-conflict',
      `head ${short(head)} conflicts with ${snapshot.base.ref} (${snapshot.mergeable}/${snapshot.mergeStateStatus})`,
      head,
      ledger,
      policy,
    );
  }
  // The forge says BEHIND only when the base requires up-to-date heads: the rebase fast path repairs it.
  if (snapshot.mergeStateStatus === 'BEHIND') {
    return repairOrBlock('rebase', 'behind', `head ${short(head)} is behind ${snapshot.base.ref}, which must be up to date`, head, ledger, policy);
  }

  // The forge's own required checks (branch protection) gate too: one not reported yet is pending.
  const checkPolicy = withForgeRequired(policy.checks, snapshot.requiredChecks);
  const checks = summarizeChecks(
    snapshot.checks.filter((c) => c.headSha === head),
    checkPolicy,
  );
  const failed = checks.terminalBlockers.filter((b) => b.repairable);
  if (failed.length > 0) {
    // The same checks on the base commit, when the snapshot carries them: a failure the base shares is not the change's to repair.
    const base = compareWithBase(
      failed,
      snapshot.checks.filter((c) => c.headSha === snapshot.base.sha),
      checkPolicy,
    );
    const at = `${snapshot.base.ref} at ${short(snapshot.base.sha)}`;
    if (base.own.length === 0) {
      return {
        kind: 'block',
        code: 'base-blocked',
        reason: `the base is blocked: ${listChecks(base.onBase)} also fail${base.onBase.length === 1 ? 's' : ''} on ${at}; no repair of this change is attempted`,
      };
    }
    const shared = base.onBase.length === 0 ? '' : `; also failing on ${at}: ${listChecks(base.onBase)}`;
    return repairOrBlock('fix-checks', 'checks-failed', `failed checks on ${short(head)}: ${listChecks(failed)}${shared}`, head, ledger, policy);
  }

  const inFlight = ledger.reviews.find(
    (r) => r.head === head && r.status === 'dispatched' && !verdicts.some((v) => v.fields.review === r.id && v.fields.head === head),
  );
  if (inFlight !== undefined)
    return { kind: 'wait', code: 'review-in-progress', reason: `review ${inFlight.id} of head ${short(head)} in progress; checks: ${checks.text}` };

  if (verdict === null) {
    const latestStale = stale[0];
    // The head's bindings cannot be read: a new review could not be checked either.
    if (latestStale !== undefined && 'problem' in facts.live) return { kind: 'wait', code: 'bindings-unreadable', reason: latestStale.standing.reason };
    // A review whose verdict went stale because the rules or the bytes changed answered in its time: it does not count.
    const outdated = new Set(stale.filter((entry) => entry.standing.cause === 'changed').map((entry) => entry.review));
    // Neither does one that gave a verdict a later review of the same head replaced (the one review comment is edited in place).
    const ofHead = ledger.reviews.filter((r) => r.head === head);
    const replaced = (r: ReviewRecord, at: number) => r.status === 'finished' && at < ofHead.length - 1 && !verdicts.some((v) => v.fields.review === r.id);
    const tried = ofHead.filter((r, at) => !outdated.has(r.id) && !replaced(r, at)).length;
    if (tried >= policy.maxReviewsPerHead) {
      return {
        kind: 'block',
        code: 'review-cap',
        reason: `${tried} reviews of head ${short(head)} ended without a verdict that holds (max ${policy.maxReviewsPerHead})${latestStale === undefined ? '' : `; last: ${latestStale.standing.reason}`}`,
      };
    }
    if (latestStale !== undefined) {
      const code = latestStale.standing.cause === 'changed' ? 'bindings-changed' : 'record-unverified';
      return { kind: 'review', code, head, reason: `head ${short(head)} needs a re-review: ${latestStale.standing.reason}` };
    }
    const older = verdicts.filter((v) => v.fields.change === snapshot.id && v.fields.head !== head);
    if (older.length > 0) {
      const heads = [...new Set(older.map((v) => short(v.fields.head)))].join(', ');
      return { kind: 'review', code: 'head-moved', head, reason: `head ${short(head)} needs an exact-head review: verdicts name older heads (${heads})` };
    }
    return { kind: 'review', code: 'no-verdict', head, reason: `head ${short(head)} needs an exact-head review: no verdict yet` };
  }
  if (verdict.fields.verdict === 'REFUTED') {
    if (verdict.fields.findings > 0) {
      return repairOrBlock(
        'fix-findings',
        'review-refuted',
        `review of head ${short(head)} is REFUTED with ${verdict.fields.findings} finding(s)`,
        head,
        ledger,
        policy,
      );
    }
    return {
      kind: 'block',
      code: 'refuted-without-findings',
      reason: `review of head ${short(head)} is REFUTED without actionable findings: a human must review`,
    };
  }
  if (facts.touchesTrusted.length > 0 && facts.approval === null) {
    return {
      kind: 'wait',
      code: 'approval-required',
      reason: `needs a maintainer's approval: touches ${listPaths(facts.touchesTrusted)} (a maintainer comments \`/proofgate approve\` for head ${short(head)})`,
    };
  }

  const rerun = checks.terminalBlockers.filter((b) => !b.repairable);
  if (rerun.length > 0) {
    return { kind: 'block', code: 'checks-need-rerun', reason: `checks not green on ${short(head)} and need a re-run: ${listChecks(rerun)}` };
  }
  if (checks.hasPending) return { kind: 'wait', code: 'checks-pending', reason: `checks pending on ${short(head)}: ${checks.text}` };

  // GitHub's merge queue let this head go because its merge group's checks failed, since automerge was last asked for:
  // the same head would fail the same way, so a person decides (a new `/proofgate automerge` queues it again).
  const requested = timeOf(ledger.automerge.at);
  if (ledger.mergeFailures.some((f) => f.head === head && f.code === QUEUE_CHECKS_FAILED && timeOf(f.at) >= requested)) {
    const removal = snapshot.forgeQueue?.lastRemoval;
    const why = removal !== null && removal !== undefined && removal.headSha === head ? removal.reason : 'its merge group failed its checks';
    return {
      kind: 'block',
      code: 'queue-ejected',
      reason: `GitHub's merge queue of ${snapshot.base.ref} removed head ${short(head)}: ${why}; a maintainer's \`/proofgate automerge\` queues it again`,
    };
  }
  const refused = ledger.mergeFailures.filter((f) => f.head === head);
  if (refused.length >= policy.maxMergeAttemptsPerHead) {
    return {
      kind: 'block',
      code: 'merge-refused',
      reason: `merge of head ${short(head)} refused ${refused.length} times (last: ${refused[refused.length - 1]?.code ?? 'unknown'})`,
    };
  }
  // A base that requires the forge's own merge queue may show a ready change as BLOCKED (its merge goes
  // through the queue only): proofgate's own reading of the required checks and reviews decides, and the
  // queue refuses an enqueue that something else blocks (a refusal the loop counts like a merge's).
  const queueBase = snapshot.forgeQueue?.required === true;
  const readyState =
    snapshot.mergeStateStatus === 'CLEAN' || snapshot.mergeStateStatus === 'HAS_HOOKS' || (queueBase && snapshot.mergeStateStatus === 'BLOCKED');
  // The review decision is asked last, so a change is reviewed, checked and repaired first. A base that
  // requires approvals shows a MERGEABLE change as BLOCKED until it has them: the decision says why.
  const reviewPending = snapshot.reviewDecision === 'REVIEW_REQUIRED' || snapshot.reviewDecision === 'CHANGES_REQUESTED';
  if (reviewPending && snapshot.mergeable === 'MERGEABLE' && (readyState || snapshot.mergeStateStatus === 'BLOCKED')) {
    if (snapshot.reviewDecision === 'CHANGES_REQUESTED') {
      return {
        kind: 'block',
        code: 'changes-requested',
        reason: `changes requested on ${snapshot.base.ref}'s required review of head ${short(head)}: a human must look`,
      };
    }
    return {
      kind: 'wait',
      code: 'review-required',
      reason: `head ${short(head)} needs the approvals ${snapshot.base.ref} requires (a maintainer comments \`/proofgate approve\` for head ${short(head)}, or approves it on the forge)`,
    };
  }
  if (snapshot.mergeable !== 'MERGEABLE' || !readyState) {
    return {
      kind: 'wait',
      code: 'mergeability-pending',
      reason: `mergeability not ready on ${short(head)}: ${snapshot.mergeable}/${snapshot.mergeStateStatus}`,
    };
  }
  const trust = facts.touchesTrusted.length > 0 && facts.approval !== null ? `, trust change approved by ${facts.approval.by}` : '';
  const approved = `${trust}${snapshot.reviewDecision === 'APPROVED' ? ', required approvals given' : ''}`;
  return {
    kind: 'merge',
    code: 'ready',
    head,
    reason: `head ${short(head)} CONFIRMED (comment ${verdict.commentId}), checks green${approved}, ${snapshot.mergeable}/${snapshot.mergeStateStatus}`,
  };
}
