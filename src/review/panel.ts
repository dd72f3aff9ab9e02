import type { DiversityMode, ReviewLaneResultV1, ReviewRequestV1 } from '../contracts/index.js';
import type { LaneAttempt } from './attempts.js';
import type { LaneToolReceipt } from './tools/port.js';
import type { LaneValidation } from './validate.js';

/** One lane as the panel sees it: what it returned (or nothing) and whether that counts. */
export interface PanelLane {
  readonly lane_id: string;
  /** The lane's final attempt: its result and validation. */
  readonly result: ReviewLaneResultV1 | null;
  readonly validation: LaneValidation;
  /** Every dispatch of the lane (absent: one). Only counted in the reasons: the final attempt is what the panel judges. */
  readonly attempts?: readonly Pick<LaneAttempt, 'attempt'>[];
}

export interface PanelPolicy {
  /** Every lane that must report; a missing one holds the review. */
  readonly expectedLanes: readonly string[];
  /** Distinct reviewer families required in multi-model mode (default 2). */
  readonly minFamilies?: number;
}

export type PanelVerdict = 'CONFIRMED' | 'REFUTED' | 'HOLD';

export interface PanelDecision {
  readonly verdict: PanelVerdict;
  readonly reasons: string[];
}

export type PanelRequest = Pick<ReviewRequestV1, 'author' | 'diversity_mode'>;

interface Sorted {
  confirmed: PanelLane[];
  refuted: PanelLane[];
  problems: string[];
}

function sortLanes(request: PanelRequest, lanes: readonly PanelLane[], policy: PanelPolicy): Sorted {
  const sorted: Sorted = { confirmed: [], refuted: [], problems: [] };
  const expected = new Set(policy.expectedLanes);
  const seen = new Map<string, number>();
  for (const lane of lanes) seen.set(lane.lane_id, (seen.get(lane.lane_id) ?? 0) + 1);
  for (const id of policy.expectedLanes) {
    if (!seen.has(id)) sorted.problems.push(`lane ${id}: missing`);
  }
  for (const lane of lanes) {
    const id = lane.lane_id;
    if (!expected.has(id)) {
      sorted.problems.push(`lane ${id}: not an expected lane`);
      continue;
    }
    if ((seen.get(id) ?? 0) > 1) {
      sorted.problems.push(`lane ${id}: reported more than once`);
      continue;
    }
    const result = lane.result;
    const tries = lane.attempts?.length ?? 1;
    // A lane still without a judgment after its retries says how many attempts it had; a judgment says which one counted.
    const after = tries > 1 ? ` after ${tries} attempts` : '';
    if (result === null) {
      sorted.problems.push(`lane ${id}: no result${after}`);
    } else if (!lane.validation.valid) {
      sorted.problems.push(`lane ${id}: invalid result (${lane.validation.code}: ${lane.validation.reason})${after}`);
    } else if (result.lane_id !== id) {
      sorted.problems.push(`lane ${id}: result names lane ${result.lane_id}`);
    } else if (result.context_id === request.author.context_id) {
      sorted.problems.push(`lane ${id}: reviewer context is the author's`);
    } else if ('failure' in result) {
      sorted.problems.push(`lane ${id}: transport failure (${result.failure.reason})${after}`);
    } else if (result.disposition === 'REFUTED') {
      if (result.findings.length > 0) sorted.refuted.push(lane);
      else sorted.problems.push(`lane ${id}: REFUTED without findings`);
    } else {
      sorted.confirmed.push(lane);
    }
  }
  return sorted;
}

function familyOf(lane: PanelLane): string {
  return lane.result?.family ?? '';
}

/** ` on attempt N` for a judgment that came after re-dispatches, else nothing. */
function onAttempt(lane: PanelLane): string {
  const last = lane.attempts?.[lane.attempts.length - 1]?.attempt ?? 1;
  return last > 1 ? ` on attempt ${last}` : '';
}

/**
 * Join lane results into one verdict (pure). Each lane is its final attempt:
 * a lane that failed in transport was re-dispatched before it got here, so a
 * failed lane is one that still has no valid judgment after its retries.
 * A valid REFUTED with findings
 * refutes; otherwise any missing, failed or invalid lane holds; otherwise the
 * diversity mode decides: fresh-context needs one valid CONFIRMED from a
 * context other than the author's, multi-model also needs every lane
 * CONFIRMED and at least `minFamilies` distinct families.
 *
 * `receipts` are what the review's tools ran (live proof). Evidence that
 * failed verification (`rejected`) holds the review on its own, whatever the
 * lanes concluded from it; a verified or inconclusive receipt changes nothing
 * here (the reviewer judged it), and proof never confirms anything itself.
 */
export function judgePanel(request: PanelRequest, lanes: readonly PanelLane[], policy: PanelPolicy, receipts: readonly LaneToolReceipt[] = []): PanelDecision {
  const mode: DiversityMode = request.diversity_mode;
  if (policy.expectedLanes.length === 0) return { verdict: 'HOLD', reasons: ['no reviewer lanes configured'] };
  const { confirmed, refuted, problems } = sortLanes(request, lanes, policy);
  if (refuted.length > 0) {
    return {
      verdict: 'REFUTED',
      reasons: refuted.map((lane) => `lane ${lane.lane_id}: REFUTED with ${lane.result?.findings.length ?? 0} finding(s)${onAttempt(lane)}`),
    };
  }
  for (const receipt of receipts) {
    if (receipt.status === 'rejected')
      problems.push(`proof ${receipt.tool} (plan ${receipt.subject_digest}): evidence rejected (${receipt.reason ?? 'unverifiable'})`);
  }
  if (problems.length > 0) return { verdict: 'HOLD', reasons: problems };
  if (confirmed.length === 0) return { verdict: 'HOLD', reasons: ['no valid CONFIRMED from a fresh context'] };
  const confirmedReasons = confirmed.map(
    (lane) => `lane ${lane.lane_id}: CONFIRMED by ${familyOf(lane)} in context ${lane.result?.context_id ?? ''}${onAttempt(lane)}`,
  );
  if (mode === 'multi-model') {
    const families = new Set(confirmed.map(familyOf));
    const needed = policy.minFamilies ?? 2;
    if (families.size < needed) {
      return {
        verdict: 'HOLD',
        reasons: [...confirmedReasons, `multi-model needs ${needed} distinct families, got ${families.size} (${[...families].sort().join(', ')})`],
      };
    }
  }
  return { verdict: 'CONFIRMED', reasons: confirmedReasons };
}
