import type { ReviewConfig, ReviewDisposition, ReviewFinding, ReviewLaneConfig, ReviewRequestV1, SemanticLaneResultV1, TransportLaneResultV1 } from '../../contracts/index.js';
import { REVIEW_LANE_RESULT_SCHEMA } from '../../contracts/index.js';
import type { LaneValidation } from '../validate.js';

/** A configured lane, resolved: its family and timeout are always known. */
export interface LaneSpec {
  readonly id: string;
  readonly family: string;
  readonly timeoutMs: number;
  readonly config: ReviewLaneConfig;
}

/** Everything an adapter gets for one lane run. */
export interface LaneRunContext {
  readonly request: ReviewRequestV1;
  readonly lane: LaneSpec;
  /** The fresh reviewer context this run is (never the author's). */
  readonly contextId: string;
  readonly repoDir: string;
  readonly review: ReviewConfig;
  /** Environment the adapter may read its own settings from (API keys); never passed to a reviewer process. */
  readonly env: NodeJS.ProcessEnv;
}

/** What an adapter hands back: the raw lane result, plus any breach the adapter itself detected. */
export interface LaneRun {
  readonly raw: unknown;
  readonly breach?: LaneValidation;
}

export type LaneAdapter = (context: LaneRunContext) => Promise<LaneRun>;

/** Who answers: the fields every lane result carries, from the run context (the nonce echoed). */
function laneIdentity(context: LaneRunContext) {
  return {
    schema: REVIEW_LANE_RESULT_SCHEMA,
    lane_id: context.lane.id,
    family: context.lane.family,
    context_id: context.contextId,
    nonce: context.request.nonce,
    read_only: true,
  } as const;
}

/** A transport failure in the lane's name: no disposition, a reason, the echoed nonce. */
export function transportFailure(context: LaneRunContext, reason: string): TransportLaneResultV1 {
  return { ...laneIdentity(context), findings: [], failure: { class: 'transport', reason } };
}

/** A semantic verdict in the lane's name, pointing at the evidence the adapter wrote. */
export function semanticResult(
  context: LaneRunContext,
  evidencePath: string,
  findings: ReviewFinding[],
  disposition: ReviewDisposition,
): SemanticLaneResultV1 {
  return { ...laneIdentity(context), evidence_path: evidencePath, findings, disposition };
}
