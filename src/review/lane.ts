import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { canonicalJson, errorMessage, isProofgateError, newId, systemClock, type Clock } from '../core/index.js';
import { reviewLaneResultSchema, type ReviewConfig, type ReviewLaneResultV1, type ReviewRequestV1 } from '../contracts/index.js';
import { adapterFor, transportFailure, type AdapterSet, type LaneRun, type LaneRunContext, type LaneSpec, type TrustedTree } from './adapters/index.js';
import { repositoryFingerprint } from './repo-state.js';
import { checkBeforeDispatch, createLaneRequest, type ReviewInputs } from './request.js';
import { invalid, validateLaneResult, type LaneValidation } from './validate.js';

/** What one lane produced and whether it counts. */
export interface LaneOutcome {
  readonly lane_id: string;
  readonly family: string;
  readonly context_id: string;
  readonly request: ReviewRequestV1;
  /** The result when it has the review-lane-result.v1 shape, else null. */
  readonly result: ReviewLaneResultV1 | null;
  readonly validation: LaneValidation;
  /** Where the request and the raw result were written. */
  readonly request_file: string;
  readonly result_file: string;
}

export interface RunLaneOptions {
  readonly inputs: ReviewInputs;
  readonly spec: LaneSpec;
  readonly review: ReviewConfig;
  readonly repoDir: string;
  readonly dataDir: string;
  /** The trusted commit whose tree supplies reviewer programs, and its jail policy. */
  readonly trusted: TrustedTree;
  readonly adapters: AdapterSet;
  readonly env?: NodeJS.ProcessEnv;
  readonly clock?: Clock;
  /** The reviewer context to use (default: a fresh one). */
  readonly contextId?: string;
}

/** A result too deep (or otherwise impossible) to serialize is the reviewer's transport failure, never proofgate's error. */
function storable(context: LaneRunContext, run: LaneRun): LaneRun {
  try {
    JSON.stringify(run.raw ?? null);
    return run;
  } catch (error) {
    return { ...run, raw: transportFailure(context, `the lane result cannot be stored: ${errorMessage(error)}`) };
  }
}

/**
 * Run one lane: build its request, check the bound inputs and the context
 * right before dispatch (throws MUTABLE_INPUT / SELF_REVIEW), dispatch,
 * validate the answer, and write request and result next to the evidence.
 * An adapter's error is the lane's transport failure, except JAIL_UNAVAILABLE
 * (untrusted code cannot run on this machine), which is thrown.
 */
export async function runLane(options: RunLaneOptions): Promise<LaneOutcome> {
  const { spec, inputs } = options;
  const request = await createLaneRequest(inputs, spec.id, spec.timeoutMs, options.clock ?? systemClock);
  const laneDir = join(inputs.reviewDir, 'lanes', spec.id);
  const requestFile = join(laneDir, 'request.json');
  await writeFile(requestFile, `${canonicalJson(request)}\n`);
  const contextId = options.contextId ?? newId('ctx');
  const context = { request, lane: spec, contextId, repoDir: options.repoDir, review: options.review, trusted: options.trusted, env: options.env ?? process.env };
  await checkBeforeDispatch(request, contextId);
  const before = await repositoryFingerprint(options.repoDir, options.dataDir, inputs.refNames);
  let run: LaneRun;
  try {
    run = await adapterFor(spec, options.adapters)(context);
  } catch (error) {
    // No working jail is not this lane's failure but the machine's: the review stops with that one error, no verdict.
    if (isProofgateError(error, 'JAIL_UNAVAILABLE')) throw error;
    run = { raw: transportFailure(context, `adapter error: ${errorMessage(error)}`) };
  }
  run = storable(context, run);
  let validation = run.breach ?? (await validateLaneResult(run.raw, request, { laneId: spec.id, contextId }));
  if (!validation.valid && validation.code === 'EVIDENCE_MISSING') {
    // Missing evidence is the transport's failure, not a reviewer's verdict: the lane counts as failed, never as an answer.
    const answered = (run.raw as { disposition?: unknown }).disposition;
    run = { raw: transportFailure(context, `missing evidence (the reviewer answered ${String(answered)}): ${validation.reason}`) };
    validation = await validateLaneResult(run.raw, request, { laneId: spec.id, contextId });
  }
  const after = await repositoryFingerprint(options.repoDir, options.dataDir, inputs.refNames);
  if (after !== before) validation = invalid('REPOSITORY_MODIFIED', 'the repository changed while the lane ran (HEAD, the reviewed refs, tracked files, or .git config, hooks or info)');
  const parsed = reviewLaneResultSchema.safeParse(run.raw);
  const resultFile = join(laneDir, 'result.json');
  await writeFile(resultFile, `${JSON.stringify(run.raw ?? null)}\n`);
  return {
    lane_id: spec.id,
    family: spec.family,
    context_id: contextId,
    request,
    result: parsed.success ? parsed.data : null,
    validation,
    request_file: requestFile,
    result_file: resultFile,
  };
}
