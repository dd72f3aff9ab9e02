import type {
  ReviewConfig,
  ReviewDisposition,
  ReviewFinding,
  ReviewLaneConfig,
  ReviewRequestV1,
  SemanticLaneResultV1,
  TransportLaneResultV1,
} from '../../contracts/index.js';
import { REVIEW_LANE_RESULT_SCHEMA } from '../../contracts/index.js';
import type { SandboxMode } from '../../host/index.js';
import type { LaneToolbox } from '../tools/port.js';
import type { LaneValidation } from '../validate.js';

/** A configured lane, resolved: its family and timeout are always known. */
export interface LaneSpec {
  readonly id: string;
  readonly family: string;
  readonly timeoutMs: number;
  readonly config: ReviewLaneConfig;
}

/**
 * The trusted side of a lane run: the commit the review's config was read
 * from, whose tree supplies every reviewer program (never the head under
 * review), and that config's jail policy.
 */
export interface TrustedTree {
  readonly sha: string;
  /** `jail` (the default), or `none` when the trusted config says `sandbox: none`. */
  readonly sandbox: SandboxMode;
  /** A shared cache directory the trusted config names (writable by every job), if any. */
  readonly cacheDir?: string;
}

/** The trusted tree of a review whose config (a parsed `.proofgate.yml`) was read from commit `sha`. */
export function trustedTreeOf(sha: string, config: { readonly sandbox?: SandboxMode | undefined; readonly cacheDir?: string | undefined }): TrustedTree {
  return { sha, sandbox: config.sandbox ?? 'jail', ...(config.cacheDir === undefined ? {} : { cacheDir: config.cacheDir }) };
}

/** Everything an adapter gets for one lane run. */
export interface LaneRunContext {
  readonly request: ReviewRequestV1;
  readonly lane: LaneSpec;
  /** The fresh reviewer context this run is (never the author's). */
  readonly contextId: string;
  readonly repoDir: string;
  readonly review: ReviewConfig;
  readonly trusted: TrustedTree;
  /** Environment the adapter reads its own settings from (API keys); a reviewer process gets only what its lane's `env` names. */
  readonly env: NodeJS.ProcessEnv;
  /** Tools this lane run is offered (live proof), if any: the adapter hands them to its reviewer and returns their answers into the same turn. */
  readonly tools?: LaneToolbox;
}

/** What an adapter hands back: the raw lane result, plus any breach the adapter itself detected. */
export interface LaneRun {
  readonly raw: unknown;
  readonly breach?: LaneValidation;
  /** How a reviewer program ran: `jail`, or `none` (unjailed, as the trusted config allowed); absent for in-process lanes. */
  readonly sandbox?: SandboxMode;
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
export function semanticResult(context: LaneRunContext, evidencePath: string, findings: ReviewFinding[], disposition: ReviewDisposition): SemanticLaneResultV1 {
  return { ...laneIdentity(context), evidence_path: evidencePath, findings, disposition };
}
