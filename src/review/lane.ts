import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { canonicalJson, errorMessage, isProofgateError, newId, systemClock, type Clock } from '../core/index.js';
import { reviewLaneResultSchema, type ReviewConfig, type ReviewDisposition, type ReviewLaneResultV1, type ReviewRequestV1 } from '../contracts/index.js';
import { adapterFor, transportFailure, type AdapterSet, type LaneRun, type LaneRunContext, type LaneSpec, type TrustedTree } from './adapters/index.js';
import { attemptRecord, decideRetry, laneRetryPolicy, type AttemptFacts, type LaneAttempt, type LaneRetryPolicy } from './attempts.js';
import { repositoryFingerprint } from './repo-state.js';
import { checkBeforeDispatch, createLaneRequest, laneAttemptDir, type ReviewInputs } from './request.js';
import type { LaneToolPort } from './tools/port.js';
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
  /** Which dispatch of the lane this outcome is (1: the first). */
  readonly attempt: number;
  /** Every dispatch of the lane in order, this one last: how each ended and what followed. */
  readonly attempts: readonly LaneAttempt[];
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
  /** The reviewer context to use (default: a fresh one). Only the first attempt uses it: a re-dispatch always gets a fresh one. */
  readonly contextId?: string;
  /** Re-dispatches after transport failures (default: `laneRetryPolicy(review)`). */
  readonly policy?: LaneRetryPolicy;
  /** When the review started, in ms on `clock` (default: when the lane starts): the budget counts from here. */
  readonly startedAtMs?: number;
  /** The review's tools (live proof): each dispatch asks it for the toolbox this lane run is offered. */
  readonly tools?: LaneToolPort | null;
}

export interface LaneAttemptOptions extends RunLaneOptions {
  /** 1 for the first dispatch, then 2, 3, ... */
  readonly attempt: number;
  /** The lane's earlier attempts, oldest first. */
  readonly earlier: readonly LaneAttempt[];
  readonly policy: LaneRetryPolicy;
  readonly startedAtMs: number;
}

export interface LaneAttemptStep {
  /** This attempt's outcome, its `attempts` holding the earlier ones and this one. */
  readonly outcome: LaneOutcome;
  /** True when the lane is to be dispatched again (this attempt was a transport failure the policy allows to retry). */
  readonly retry: boolean;
}

/** The disposition a raw answer carries, valid or not. */
function answeredOf(raw: unknown): ReviewDisposition | null {
  if (raw === null || typeof raw !== 'object') return null;
  const disposition = (raw as { disposition?: unknown }).disposition;
  return disposition === 'CONFIRMED' || disposition === 'REFUTED' ? disposition : null;
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
 * The refs a lane's repository fingerprint counts (pure): the review's base
 * and head names only for a lane that ran code from outside proofgate
 * unjailed (under `sandbox: none`: a command lane, a proof lane, or any lane
 * offered tools, whose proof runs execute the change's scenarios), the one
 * kind of lane that could have moved them. A builtin rules or tests lane runs
 * only proofgate's code, an HTTP reviewer without tools runs nothing here,
 * and a jailed program sees no repository: while those run, the names move
 * only by others (another change landing on the base, a push), which says
 * nothing about the lane; the review is bound to the commits, not to the
 * names.
 */
export function fingerprintRefs(spec: LaneSpec, trusted: TrustedTree, offeredTools: boolean, refNames: readonly string[]): readonly string[] {
  const runsOutsideCode = spec.config.command !== undefined || spec.config.builtin === 'proof' || offeredTools;
  return runsOutsideCode && trusted.sandbox === 'none' ? refNames : [];
}

/**
 * One dispatch of a lane: build its request (fresh nonce, the attempt's own
 * evidence directory), check the bound inputs and the context right before
 * dispatch (throws MUTABLE_INPUT / SELF_REVIEW), dispatch, validate the
 * answer, and write request and result next to the evidence.
 * An adapter's error is the lane's transport failure, except JAIL_UNAVAILABLE
 * (untrusted code cannot run on this machine), which is thrown.
 */
async function dispatchLane(
  options: RunLaneOptions,
  attempt: number,
): Promise<Omit<LaneOutcome, 'attempts'> & { readonly answered: ReviewDisposition | null }> {
  const { spec, inputs } = options;
  const request = await createLaneRequest(inputs, spec.id, spec.timeoutMs, options.clock ?? systemClock, attempt);
  const laneDir = laneAttemptDir(inputs.reviewDir, spec.id, attempt);
  const requestFile = join(laneDir, 'request.json');
  await writeFile(requestFile, `${canonicalJson(request)}\n`);
  const contextId = attempt === 1 && options.contextId !== undefined ? options.contextId : newId('ctx');
  const toolbox = options.tools?.open({ laneId: spec.id, contextId, attempt }) ?? null;
  const context: LaneRunContext = {
    request,
    lane: spec,
    contextId,
    repoDir: options.repoDir,
    review: options.review,
    trusted: options.trusted,
    env: options.env ?? process.env,
    ...(toolbox === null ? {} : { tools: toolbox }),
  };
  await checkBeforeDispatch(request, contextId);
  const refNames = fingerprintRefs(spec, options.trusted, toolbox !== null && toolbox.tools.length > 0, inputs.refNames);
  const before = await repositoryFingerprint(options.repoDir, options.dataDir, refNames);
  let run: LaneRun;
  try {
    run = await adapterFor(spec, options.adapters)(context);
  } catch (error) {
    // No working jail is not this lane's failure but the machine's: the review stops with that one error, no verdict.
    if (isProofgateError(error, 'JAIL_UNAVAILABLE')) throw error;
    run = { raw: transportFailure(context, `adapter error: ${errorMessage(error)}`) };
  }
  const answered = answeredOf(run.raw);
  run = storable(context, run);
  let validation = run.breach ?? (await validateLaneResult(run.raw, request, { laneId: spec.id, contextId }));
  if (!validation.valid && validation.code === 'EVIDENCE_MISSING') {
    // Missing evidence is the transport's failure, not a reviewer's verdict: the lane counts as failed, never as an answer.
    run = { raw: transportFailure(context, `missing evidence (the reviewer answered ${String(answered)}): ${validation.reason}`) };
    validation = await validateLaneResult(run.raw, request, { laneId: spec.id, contextId });
  }
  const after = await repositoryFingerprint(options.repoDir, options.dataDir, refNames);
  if (after !== before)
    validation = invalid(
      'REPOSITORY_MODIFIED',
      'the repository changed while the lane ran (HEAD, the reviewed refs, tracked files, or .git config, hooks or info)',
    );
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
    attempt,
    answered,
  };
}

/**
 * One attempt of a lane and what follows it: the dispatch, then
 * `decideRetry` on its result, the review's elapsed time and the lane's
 * timeout. The graph run calls this once per graph attempt; `runLane` loops.
 */
export async function runLaneAttempt(options: LaneAttemptOptions): Promise<LaneAttemptStep> {
  const { answered, ...dispatched } = await dispatchLane(options, options.attempt);
  const facts: AttemptFacts = {
    attempt: options.attempt,
    context_id: dispatched.context_id,
    result: dispatched.result,
    validation: dispatched.validation,
    answered,
  };
  const elapsedMs = (options.clock ?? systemClock).now().getTime() - options.startedAtMs;
  const decision = decideRetry(facts, options.policy, { elapsedMs, laneTimeoutMs: options.spec.timeoutMs });
  return { outcome: { ...dispatched, attempts: [...options.earlier, attemptRecord(facts, decision)] }, retry: decision.retry };
}

/**
 * Run one lane to its outcome: dispatch it, and after a transport failure
 * dispatch it again with a fresh context while the retry policy and the
 * review's budget allow (see attempts.ts). The outcome is the last attempt's,
 * with every attempt listed in `attempts`.
 */
export async function runLane(options: RunLaneOptions): Promise<LaneOutcome> {
  const policy = options.policy ?? laneRetryPolicy(options.review);
  const startedAtMs = options.startedAtMs ?? (options.clock ?? systemClock).now().getTime();
  let earlier: readonly LaneAttempt[] = [];
  for (let attempt = 1; ; attempt += 1) {
    const step = await runLaneAttempt({ ...options, attempt, earlier, policy, startedAtMs });
    if (!step.retry) return step.outcome;
    earlier = step.outcome.attempts;
  }
}
