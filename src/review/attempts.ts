import { DEFAULT_TRANSPORT_RETRIES, type ReviewConfig, type ReviewDisposition, type ReviewLaneResultV1 } from '../contracts/index.js';
import { DEFAULT_LANE_TIMEOUT_SECONDS } from './config.js';
import type { LaneValidation, LaneValidationCode } from './validate.js';

/**
 * Re-dispatching a lane that failed in transport (pure). A lane whose attempt
 * ended without a valid judgment (the lane reported a transport failure, or
 * its answer does not validate) is dispatched again with a fresh context (new
 * nonce, new evidence directory, new request), as long as the review's
 * retries and its time budget allow. A valid judgment ends the lane, and so
 * does any answer that says REFUTED, valid or not: asking again until a
 * reviewer says yes would be an attack. Breaches (the reviewer wrote where it
 * must not, or the bound inputs changed) are not transport: they end the lane
 * at once.
 */

export interface LaneRetryPolicy {
  /** Re-dispatches allowed per lane after its first attempt (`review.transportRetries`). */
  readonly retries: number;
  /** The review's overall budget: a re-dispatch starts only if it can end (its lane timeout) this many ms after the review's start. */
  readonly budgetMs: number;
}

/**
 * The retry policy of a review config: `transportRetries` (default
 * DEFAULT_TRANSPORT_RETRIES) and `budgetSeconds` (default: one first attempt
 * plus every retry of the slowest lane, `(1 + retries) x` its timeout).
 */
export function laneRetryPolicy(config: Pick<ReviewConfig, 'lanes' | 'transportRetries' | 'budgetSeconds'>): LaneRetryPolicy {
  const retries = config.transportRetries ?? DEFAULT_TRANSPORT_RETRIES;
  const longest = Math.max(0, ...config.lanes.map((lane) => lane.timeoutSeconds ?? DEFAULT_LANE_TIMEOUT_SECONDS));
  return { retries, budgetMs: (config.budgetSeconds ?? (1 + retries) * longest) * 1000 };
}

/** What one dispatch of a lane ended as, before the policy says what follows. */
export interface AttemptFacts {
  /** 1 for the first dispatch, then 2, 3, ... */
  readonly attempt: number;
  readonly context_id: string;
  readonly result: ReviewLaneResultV1 | null;
  readonly validation: LaneValidation;
  /** The disposition the reviewer's answer carried, whether or not it validated (null: none). */
  readonly answered: ReviewDisposition | null;
}

/** One dispatch of a lane as the review's records show it. */
export interface LaneAttempt {
  readonly attempt: number;
  readonly context_id: string;
  /** `valid`: a judgment that validated; `transport-failure`: no judgment (reported by the lane, or an answer that does not count). */
  readonly outcome: 'valid' | 'transport-failure';
  /**
   * valid: the disposition (CONFIRMED or REFUTED); transport-failure:
   * `REPORTED` (the lane's own failure: timeout, crash, output that is not a
   * lane result, missing evidence; `reason` says which) or the validation
   * code of an answer that does not count (`MALFORMED`, `NONCE_MISMATCH`, ...).
   */
  readonly kind: string;
  /** Why the attempt is a transport failure (null when valid). */
  readonly reason: string | null;
  /** What followed: `retried` (dispatched again with a fresh context) or `final` (this attempt is the lane's outcome). */
  readonly next: 'retried' | 'final';
  /** Why a transport failure was not retried (null when valid or retried). */
  readonly stopped: string | null;
}

/** Codes that are not transport but a breach of the lane's rules: a fresh context does not undo them, and they hold at once. */
const BREACHES: ReadonlySet<LaneValidationCode> = new Set<LaneValidationCode>(['READ_ONLY_VIOLATED', 'REPOSITORY_MODIFIED', 'SELF_REVIEW', 'MUTABLE_INPUT']);

export type RetryDecision = { readonly retry: true } | { readonly retry: false; readonly stopped: string | null };

/** How one attempt is classed: a valid judgment, or a transport failure with its kind and reason. */
export function classifyAttempt(facts: AttemptFacts): Pick<LaneAttempt, 'outcome' | 'kind' | 'reason'> {
  const { result, validation } = facts;
  if (!validation.valid) return { outcome: 'transport-failure', kind: validation.code, reason: validation.reason };
  if (result === null) return { outcome: 'transport-failure', kind: 'MALFORMED', reason: 'no lane result' };
  if ('failure' in result) return { outcome: 'transport-failure', kind: 'REPORTED', reason: result.failure.reason };
  return { outcome: 'valid', kind: result.disposition, reason: null };
}

/**
 * Whether a lane is dispatched again after `facts` (pure): only a transport
 * failure that is not a breach and did not answer REFUTED, while attempts
 * remain (`attempt <= retries`) and the review's budget has room for one more
 * attempt of the lane (`elapsedMs + laneTimeoutMs <= budgetMs`).
 */
export function decideRetry(facts: AttemptFacts, policy: LaneRetryPolicy, time: { readonly elapsedMs: number; readonly laneTimeoutMs: number }): RetryDecision {
  const classed = classifyAttempt(facts);
  if (classed.outcome === 'valid') return { retry: false, stopped: null };
  if (facts.answered === 'REFUTED') return { retry: false, stopped: 'the reviewer answered REFUTED: a refutation is never asked again' };
  if (BREACHES.has(classed.kind as LaneValidationCode)) return { retry: false, stopped: `${classed.kind} is a breach, not a transport failure` };
  if (facts.attempt > policy.retries) {
    return {
      retry: false,
      stopped: policy.retries === 0 ? 'retries are off (review.transportRetries: 0)' : `no retries left (review.transportRetries: ${policy.retries})`,
    };
  }
  if (time.elapsedMs + time.laneTimeoutMs > policy.budgetMs) {
    return {
      retry: false,
      stopped: `the review's budget (${Math.round(policy.budgetMs / 1000)}s) has no room for another attempt of ${Math.round(time.laneTimeoutMs / 1000)}s after ${Math.round(time.elapsedMs / 1000)}s`,
    };
  }
  return { retry: true };
}

/** The record of one attempt, with what the decision made of it. */
export function attemptRecord(facts: AttemptFacts, decision: RetryDecision): LaneAttempt {
  return {
    attempt: facts.attempt,
    context_id: facts.context_id,
    ...classifyAttempt(facts),
    next: decision.retry ? 'retried' : 'final',
    stopped: decision.retry ? null : decision.stopped,
  };
}

/** One line for a timeline: `attempt 1: transport failure REPORTED (timed out after 600s); dispatched again with a fresh context`. */
export function describeAttempt(attempt: LaneAttempt): string {
  const what = attempt.outcome === 'valid' ? `valid ${attempt.kind}` : `transport failure ${attempt.kind} (${attempt.reason ?? ''})`;
  const next = attempt.next === 'retried' ? '; dispatched again with a fresh context' : attempt.stopped === null ? '' : `; not retried: ${attempt.stopped}`;
  return `attempt ${attempt.attempt}: ${what}${next}`;
}
