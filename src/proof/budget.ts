import { canonicalJson, isSha256Digest, ProofgateError, type Sha256Digest } from '../core/index.js';
import { isSafeEvidencePath } from '../contracts/repo-config.js';
import type { ProofLease } from './admission.js';
import { isScenarioId } from './scenarios.js';

/**
 * A review's proof budget (pure state and transitions; the caller passes
 * the time, in ms since the epoch). The budget belongs to the review: every
 * lane and every transport retry of a lane spends the same one.
 *
 * - Each plan is bound to the review's owner lease, its head, a scenario the
 *   review was offered and the plan's digest. At most MAX_PROOF_PLANS distinct
 *   plans; asking for a plan again (same scenario and digest) never
 *   dispatches it again: it answers with the first one's result, or says it
 *   is still pending.
 * - One deadline for all plans, fixed at the first request: the ceiling from
 *   then, but never past the review's own budget less the reserve kept for
 *   its final decision. A later plan never restarts it; a plan's own
 *   deadline is the earlier of its scenario's timeout and the shared one.
 * - A result that is in is answered at once. Waiting stops at the deadline;
 *   a client's timeout or cancel answers inconclusive (the plan itself stays
 *   pending, and a repeated request still finds it).
 * - Incomplete work, a passed deadline, a lost owner or a result that cannot
 *   be verified is inconclusive, never verified; a completion that is refused
 *   is never acknowledged as a success.
 * - Time never goes back: a clock reading earlier than one already seen is
 *   taken as the one seen.
 */

/** The most distinct plans one review may run. */
export const MAX_PROOF_PLANS = 3;

/** One observation file of a verified evidence bundle. */
export interface ProofObservation {
  readonly path: string;
  readonly sha256: Sha256Digest;
  readonly bytes: number;
}

export type InconclusiveReason =
  /** The plan's deadline (its timeout, or the shared deadline) passed before a result. */
  | 'DEADLINE'
  /** The review's budget, less its reserve, leaves no time for proof. */
  | 'NO_TIME'
  /** The review already ran MAX_PROOF_PLANS distinct plans. */
  | 'PLAN_LIMIT'
  /** The request or the completion is bound to another owner lease than the review's. */
  | 'OWNER_LOST'
  /** The request is bound to another head than the review's. */
  | 'HEAD_MOVED'
  /** The review was not offered this scenario. */
  | 'NOT_OFFERED'
  /** The request is malformed (scenario id, plan digest) or names no known plan. */
  | 'INVALID_REQUEST'
  /** The producer's work did not finish, or the review ended first. */
  | 'INCOMPLETE'
  /** The result could not be verified. */
  | 'UNVERIFIABLE'
  /** The client cancelled its wait. */
  | 'CANCELLED'
  /** The client's own wait timed out. */
  | 'CLIENT_TIMEOUT';

/** What a plan came to. Only `verified` carries observations; `rejected` is evidence that failed verification. */
export type ProofOutcome =
  | { readonly status: 'verified'; readonly observations: readonly ProofObservation[]; readonly bundleDigest: Sha256Digest }
  | { readonly status: 'inconclusive'; readonly reason: InconclusiveReason; readonly message: string }
  | { readonly status: 'rejected'; readonly reason: string; readonly message: string; readonly bundleDigest: Sha256Digest | null };

/** What a producer reports when its plan ends. */
export type ProducerReport =
  /** The evidence bundle verified: its digest and observations. */
  | { readonly status: 'verified'; readonly observations: readonly ProofObservation[]; readonly bundleDigest: Sha256Digest }
  /** The evidence bundle failed verification (`reason`: the verifier's typed reason, e.g. UNSAFE_PATH). */
  | { readonly status: 'rejected'; readonly reason: string; readonly message: string; readonly bundleDigest: Sha256Digest | null }
  /** The work did not finish. */
  | { readonly status: 'incomplete'; readonly message: string }
  /** The result could not be checked (no artifact, another run, a pin that moved). */
  | { readonly status: 'unverifiable'; readonly message: string };

export interface ProofPlanEntry {
  readonly scenarioId: string;
  readonly planDigest: Sha256Digest;
  readonly lease: ProofLease;
  readonly headSha: string;
  readonly requestedAtMs: number;
  readonly deadlineMs: number;
  /** null while the plan is pending. */
  readonly outcome: ProofOutcome | null;
  readonly settledAtMs: number | null;
}

export interface ProofBudget {
  readonly reviewId: string;
  readonly headSha: string;
  /** The review's owner lease now. */
  readonly lease: ProofLease;
  readonly reviewStartMs: number;
  readonly reviewBudgetMs: number;
  readonly ceilingMs: number;
  readonly reserveMs: number;
  /** The scenarios the review was offered, and each one's timeout. */
  readonly offered: readonly { readonly scenarioId: string; readonly timeoutMs: number }[];
  readonly firstRequestMs: number | null;
  /** The shared deadline, fixed at the first request; null before it. */
  readonly deadlineMs: number | null;
  /** The latest time seen. */
  readonly clockMs: number;
  readonly plans: readonly ProofPlanEntry[];
}

export interface ProofBudgetOptions {
  readonly reviewId: string;
  readonly headSha: string;
  readonly lease: ProofLease;
  readonly reviewStartMs: number;
  /** The review's whole time budget (see review's `laneRetryPolicy`). */
  readonly reviewBudgetMs: number;
  readonly ceilingSeconds: number;
  readonly reserveSeconds: number;
  /** The tools the review was offered (`offeredTools`): the only scenarios a request may name. */
  readonly offered: readonly { readonly scenarioId: string; readonly timeoutSeconds: number }[];
}

/** Which plan: a scenario and the digest of its plan. */
export interface ProofPlanKey {
  readonly scenarioId: string;
  readonly planDigest: Sha256Digest;
}

export interface ProofRequest extends ProofPlanKey {
  readonly lease: ProofLease;
  readonly headSha: string;
  readonly now: number;
}

export type ProofRequestAnswer =
  /** A new plan: the caller dispatches it, bound to the entry's lease, head, scenario, digest and deadline. */
  | { readonly kind: 'dispatch'; readonly plan: ProofPlanEntry }
  /** The same plan is already running: wait for it, do not dispatch again. */
  | { readonly kind: 'pending'; readonly plan: ProofPlanEntry }
  /** The same plan already has a result: here it is, at once. */
  | { readonly kind: 'settled'; readonly plan: ProofPlanEntry; readonly outcome: ProofOutcome }
  /** Not admitted: nothing is dispatched; the outcome says why. */
  | { readonly kind: 'refused'; readonly outcome: Extract<ProofOutcome, { status: 'inconclusive' }> };

export interface ProofCompletion extends ProofPlanKey {
  readonly lease: ProofLease;
  readonly headSha: string;
  readonly report: ProducerReport;
  readonly now: number;
}

export type CompletionRefusalReason = 'UNKNOWN_PLAN' | 'OWNER_LOST' | 'HEAD_MOVED' | 'LATE' | 'ALREADY_SETTLED';

/** The answer to a producer's completion. Only `recorded` with a verified outcome is a success. */
export type CompletionAck =
  | { readonly kind: 'recorded'; readonly outcome: ProofOutcome }
  | { readonly kind: 'refused'; readonly reason: CompletionRefusalReason; readonly message: string };

/** What a waiting client gets now: a result, or how long it may wait. */
export type ProofWaitAnswer = { readonly kind: 'result'; readonly outcome: ProofOutcome } | { readonly kind: 'wait'; readonly untilMs: number };

export type Transition<A> = { readonly budget: ProofBudget; readonly answer: A };

function inconclusive(reason: InconclusiveReason, message: string): Extract<ProofOutcome, { status: 'inconclusive' }> {
  return { status: 'inconclusive', reason, message };
}

function sameLease(a: ProofLease, b: ProofLease): boolean {
  return a.owner === b.owner && a.epoch === b.epoch;
}

function sameKey(plan: ProofPlanEntry, key: ProofPlanKey): boolean {
  return plan.scenarioId === key.scenarioId && plan.planDigest === key.planDigest;
}

function describeLease(lease: ProofLease): string {
  return `${lease.owner}#${lease.epoch}`;
}

function nonNegative(value: number, what: string): number {
  if (!Number.isFinite(value) || value < 0) throw new ProofgateError('INVALID_INPUT', `${what} must be a finite number >= 0, not ${String(value)}`);
  return value;
}

/** The clock as the budget reads it: never earlier than a time already seen. */
function tick(budget: ProofBudget, now: number): { readonly budget: ProofBudget; readonly now: number } {
  const at = Math.max(nonNegative(now, 'now'), budget.clockMs);
  return { budget: at === budget.clockMs ? budget : { ...budget, clockMs: at }, now: at };
}

function withPlan(budget: ProofBudget, plan: ProofPlanEntry): ProofBudget {
  return { ...budget, plans: budget.plans.map((entry) => (sameKey(entry, plan) ? plan : entry)) };
}

function settle(plan: ProofPlanEntry, outcome: ProofOutcome, now: number): ProofPlanEntry {
  return { ...plan, outcome, settledAtMs: now };
}

function deadlinePassed(plan: ProofPlanEntry): ProofOutcome {
  return inconclusive('DEADLINE', `no result for ${plan.scenarioId} before its deadline (${new Date(plan.deadlineMs).toISOString()})`);
}

/** Pending plans whose deadline has come are settled as inconclusive. */
function expire(budget: ProofBudget, now: number): ProofBudget {
  if (!budget.plans.some((plan) => plan.outcome === null && now >= plan.deadlineMs)) return budget;
  return { ...budget, plans: budget.plans.map((plan) => (plan.outcome === null && now >= plan.deadlineMs ? settle(plan, deadlinePassed(plan), now) : plan)) };
}

/** The end of the time proof may spend: the review's start plus its budget, less the reserve. */
export function proofWindowEnd(budget: ProofBudget): number {
  return budget.reviewStartMs + budget.reviewBudgetMs - budget.reserveMs;
}

/** A new review's proof budget: nothing requested yet. */
export function openProofBudget(options: ProofBudgetOptions): ProofBudget {
  if (!(options.ceilingSeconds > 0)) throw new ProofgateError('INVALID_INPUT', `the proof ceiling must be > 0 s, not ${String(options.ceilingSeconds)}`);
  if (!Number.isInteger(options.lease.epoch)) throw new ProofgateError('INVALID_INPUT', 'a lease epoch is an integer');
  return {
    reviewId: options.reviewId,
    headSha: options.headSha,
    lease: { owner: options.lease.owner, epoch: options.lease.epoch },
    reviewStartMs: nonNegative(options.reviewStartMs, 'reviewStartMs'),
    reviewBudgetMs: nonNegative(options.reviewBudgetMs, 'reviewBudgetMs'),
    ceilingMs: nonNegative(options.ceilingSeconds, 'ceilingSeconds') * 1000,
    reserveMs: nonNegative(options.reserveSeconds, 'reserveSeconds') * 1000,
    offered: options.offered.map((tool) => ({ scenarioId: tool.scenarioId, timeoutMs: nonNegative(tool.timeoutSeconds, 'timeoutSeconds') * 1000 })),
    firstRequestMs: null,
    deadlineMs: null,
    clockMs: options.reviewStartMs,
    plans: [],
  };
}

/** The plan of a key, or null. */
export function findPlan(budget: ProofBudget, key: ProofPlanKey): ProofPlanEntry | null {
  return budget.plans.find((plan) => sameKey(plan, key)) ?? null;
}

/**
 * A reviewer asks for a plan. Checked in order: the request's form, its
 * lease, its head; then a plan asked for before (answered from the first
 * one, never dispatched again); then the scenario was offered, the plan
 * limit, and time left before the shared deadline. A new plan is recorded
 * pending with its own deadline, and the answer tells the caller to
 * dispatch it.
 */
export function requestProof(current: ProofBudget, request: ProofRequest): Transition<ProofRequestAnswer> {
  const ticked = tick(current, request.now);
  const now = ticked.now;
  let budget = ticked.budget;
  const refuse = (reason: InconclusiveReason, message: string): Transition<ProofRequestAnswer> => ({
    budget,
    answer: { kind: 'refused', outcome: inconclusive(reason, message) },
  });
  if (!isScenarioId(request.scenarioId) || !isSha256Digest(request.planDigest)) {
    return refuse('INVALID_REQUEST', 'a proof request names a scenario id and a sha256 plan digest');
  }
  if (!sameLease(request.lease, budget.lease)) {
    return refuse('OWNER_LOST', `the request is bound to lease ${describeLease(request.lease)}; the review's owner is ${describeLease(budget.lease)}`);
  }
  if (request.headSha !== budget.headSha) {
    return refuse('HEAD_MOVED', `the request is for ${request.headSha}; the review is of ${budget.headSha}`);
  }
  budget = expire(budget, now);
  const existing = findPlan(budget, request);
  if (existing !== null) {
    const answer: ProofRequestAnswer =
      existing.outcome === null ? { kind: 'pending', plan: existing } : { kind: 'settled', plan: existing, outcome: existing.outcome };
    return { budget, answer };
  }
  const tool = budget.offered.find((entry) => entry.scenarioId === request.scenarioId);
  if (tool === undefined) return refuse('NOT_OFFERED', `this review was not offered scenario "${request.scenarioId}"`);
  if (budget.plans.length >= MAX_PROOF_PLANS) {
    return refuse('PLAN_LIMIT', `this review already ran ${budget.plans.length} distinct plans; at most ${MAX_PROOF_PLANS}`);
  }
  const windowEnd = proofWindowEnd(budget);
  if (budget.firstRequestMs === null) {
    budget = { ...budget, firstRequestMs: now, deadlineMs: Math.min(now + budget.ceilingMs, windowEnd) };
  }
  const shared = Math.min(budget.deadlineMs ?? windowEnd, windowEnd);
  if (now >= windowEnd) {
    return refuse('NO_TIME', `the review's budget leaves no time for proof: ${budget.reserveMs / 1000} s are kept for its final decision`);
  }
  if (now >= shared) return refuse('DEADLINE', `the shared proof deadline (${new Date(shared).toISOString()}) has passed`);
  const plan: ProofPlanEntry = {
    scenarioId: request.scenarioId,
    planDigest: request.planDigest,
    lease: budget.lease,
    headSha: budget.headSha,
    requestedAtMs: now,
    deadlineMs: Math.min(now + tool.timeoutMs, shared),
    outcome: null,
    settledAtMs: null,
  };
  return { budget: { ...budget, plans: [...budget.plans, plan] }, answer: { kind: 'dispatch', plan } };
}

function observationsVerify(observations: readonly ProofObservation[]): boolean {
  return (
    observations.length > 0 &&
    observations.every((entry) => isSafeEvidencePath(entry.path) && isSha256Digest(entry.sha256) && Number.isSafeInteger(entry.bytes) && entry.bytes >= 0)
  );
}

/** The outcome a producer's report comes to: only a well-formed verified report is verified. */
export function outcomeOfReport(report: ProducerReport): ProofOutcome {
  switch (report.status) {
    case 'verified':
      if (!isSha256Digest(report.bundleDigest) || !observationsVerify(report.observations)) {
        return inconclusive('UNVERIFIABLE', 'the verified report carries no well-formed observations or bundle digest');
      }
      return {
        status: 'verified',
        observations: report.observations.map((entry) => ({ path: entry.path, sha256: entry.sha256, bytes: entry.bytes })),
        bundleDigest: report.bundleDigest,
      };
    case 'rejected':
      return { status: 'rejected', reason: report.reason, message: report.message, bundleDigest: report.bundleDigest };
    case 'incomplete':
      return inconclusive('INCOMPLETE', report.message);
    case 'unverifiable':
      return inconclusive('UNVERIFIABLE', report.message);
  }
}

/**
 * A producer reports how a plan ended. The completion must name a recorded
 * plan, the review's current lease (the one the plan was bound to) and its
 * head; one that comes at or after the plan's deadline settles the plan as
 * inconclusive and is refused. A second completion of a settled plan is
 * recorded again only when it says the same (a retried delivery); otherwise
 * it is refused and the first result stands.
 */
export function completeProof(current: ProofBudget, completion: ProofCompletion): Transition<CompletionAck> {
  const ticked = tick(current, completion.now);
  const now = ticked.now;
  const budget = ticked.budget;
  const refuse = (reason: CompletionRefusalReason, message: string, next: ProofBudget = budget): Transition<CompletionAck> => ({
    budget: next,
    answer: { kind: 'refused', reason, message },
  });
  const plan = findPlan(budget, completion);
  if (plan === null) return refuse('UNKNOWN_PLAN', `no plan ${completion.planDigest} of scenario "${completion.scenarioId}" was requested`);
  if (!sameLease(completion.lease, plan.lease) || !sameLease(completion.lease, budget.lease)) {
    return refuse('OWNER_LOST', `the completion is bound to lease ${describeLease(completion.lease)}; the review's owner is ${describeLease(budget.lease)}`);
  }
  if (completion.headSha !== plan.headSha) return refuse('HEAD_MOVED', `the completion is for ${completion.headSha}; the plan is for ${plan.headSha}`);
  const outcome = outcomeOfReport(completion.report);
  if (plan.outcome !== null) {
    if (canonicalJson(plan.outcome) === canonicalJson(outcome)) return { budget, answer: { kind: 'recorded', outcome: plan.outcome } };
    return refuse('ALREADY_SETTLED', `the plan already ended ${plan.outcome.status}; that result stands`);
  }
  if (now >= plan.deadlineMs) {
    return refuse(
      'LATE',
      `the completion came after the plan's deadline (${new Date(plan.deadlineMs).toISOString()})`,
      withPlan(budget, settle(plan, deadlinePassed(plan), now)),
    );
  }
  return { budget: withPlan(budget, settle(plan, outcome, now)), answer: { kind: 'recorded', outcome } };
}

/** Whether an acknowledgement says the plan succeeded: recorded, and verified. Nothing else is. */
export function acknowledgesSuccess(ack: CompletionAck): boolean {
  return ack.kind === 'recorded' && ack.outcome.status === 'verified';
}

/**
 * What a client waiting for a plan gets now: its result at once when there
 * is one; inconclusive when the deadline has come (the plan is settled so),
 * or when the client's own wait was cancelled or timed out (the plan stays
 * pending: the producer is not stopped by a client leaving); otherwise how
 * long it may wait.
 */
export function proofAnswer(current: ProofBudget, key: ProofPlanKey, now: number, interrupt?: 'cancelled' | 'client-timeout'): Transition<ProofWaitAnswer> {
  const ticked = tick(current, now);
  const budget = expire(ticked.budget, ticked.now);
  const plan = findPlan(budget, key);
  if (plan === null) {
    return {
      budget,
      answer: { kind: 'result', outcome: inconclusive('INVALID_REQUEST', `no plan ${key.planDigest} of scenario "${key.scenarioId}" was requested`) },
    };
  }
  if (plan.outcome !== null) return { budget, answer: { kind: 'result', outcome: plan.outcome } };
  if (interrupt === 'cancelled') return { budget, answer: { kind: 'result', outcome: inconclusive('CANCELLED', 'the wait for the plan was cancelled') } };
  if (interrupt === 'client-timeout')
    return { budget, answer: { kind: 'result', outcome: inconclusive('CLIENT_TIMEOUT', "the client's wait for the plan timed out") } };
  return { budget, answer: { kind: 'wait', untilMs: plan.deadlineMs } };
}

/** Settle every pending plan whose deadline has come. */
export function expireProofs(current: ProofBudget, now: number): ProofBudget {
  const ticked = tick(current, now);
  return expire(ticked.budget, ticked.now);
}

/**
 * A new owner takes the review over (a later lease epoch): plans still
 * pending were bound to the lost owner and end inconclusive; results in,
 * the plan count and the shared deadline carry over unchanged. A lease
 * that is not later is refused.
 */
export function adoptProofBudget(
  current: ProofBudget,
  lease: ProofLease,
  now: number,
): { readonly kind: 'adopted'; readonly budget: ProofBudget } | { readonly kind: 'refused'; readonly message: string } {
  if (!Number.isInteger(lease.epoch) || lease.epoch <= current.lease.epoch) {
    return { kind: 'refused', message: `lease ${describeLease(lease)} is not later than the review's ${describeLease(current.lease)}` };
  }
  const ticked = tick(current, now);
  const lost = inconclusive('OWNER_LOST', `the review's owner ${describeLease(current.lease)} was replaced by ${describeLease(lease)} before a result`);
  const budget = expire(ticked.budget, ticked.now);
  return {
    kind: 'adopted',
    budget: {
      ...budget,
      lease: { owner: lease.owner, epoch: lease.epoch },
      plans: budget.plans.map((plan) => (plan.outcome === null ? settle(plan, lost, ticked.now) : plan)),
    },
  };
}

/** The review reached its final decision: plans still pending end inconclusive, and later completions are refused. */
export function closeProofBudget(current: ProofBudget, now: number): ProofBudget {
  const ticked = tick(current, now);
  const budget = expire(ticked.budget, ticked.now);
  const ended = inconclusive('INCOMPLETE', 'the review reached its decision before a result');
  return { ...budget, plans: budget.plans.map((plan) => (plan.outcome === null ? settle(plan, ended, ticked.now) : plan)) };
}

/** What the review record binds for its proof: each plan's scenario, digest, status and bundle digest. */
export function proofBindings(budget: ProofBudget): readonly {
  readonly scenarioId: string;
  readonly planDigest: Sha256Digest;
  readonly status: ProofOutcome['status'] | 'pending';
  readonly bundleDigest: Sha256Digest | null;
}[] {
  return budget.plans.map((plan) => ({
    scenarioId: plan.scenarioId,
    planDigest: plan.planDigest,
    status: plan.outcome?.status ?? 'pending',
    bundleDigest: plan.outcome !== null && plan.outcome.status !== 'inconclusive' ? plan.outcome.bundleDigest : null,
  }));
}
