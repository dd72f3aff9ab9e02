/**
 * The review step: run the review panel on the EXACT head of the change and
 * put the verdict into the change's one review comment, written as
 * proofgate's own identity: the first review creates it, every later one (a
 * new head, or a re-review) edits it in place. Its signed `review-verdict`
 * marker names that change, that head and this review dispatch; the verdict
 * it replaces moves into the comment's history (see review-comment.ts). The
 * ledger records the dispatch before the review runs and the result after the
 * comment is written; a crash in between leaves a marker that names the
 * dispatch, so the review counts as answered.
 */
import { join } from 'node:path';
import { ProofgateError, errorMessage, isProofgateError, newId } from '../../core/index.js';
import type { ReviewFinding } from '../../contracts/index.js';
import type { ChangeSnapshot, ForgeComment } from '../../forge/port.js';
import { localProducer, openProofSession, proofSettingsOf, type ProofAdmission, type ProofProducers } from '../../proof/index.js';
import { runReview, runReviewOnRuntime, type ReviewOptions, type ReviewToolContext, type ReviewToolsFactory } from '../../review/index.js';
import type { RunStorage } from '../../storage/policy-types.js';
import { composeMarkedBody, type OwnComment, type OwnCommentQuery, type ReviewVerdictFields } from '../markers.js';
import type { RepairFinding } from '../repair/index.js';
import { crashPoint } from './crash-seam.js';
import { writeOwnComment } from './own-comment.js';
import { findReviewComment, nextReviewHistory, renderReviewComment } from './review-comment.js';
import type { AutomergeEnvironment, Reviewer, ReviewResult } from './types.js';

function toRepairFinding(finding: ReviewFinding): RepairFinding {
  return {
    title: finding.title,
    evidence: finding.evidence,
    ...(finding.path === undefined ? {} : { path: finding.path }),
    ...(finding.line === undefined ? {} : { line: finding.line }),
  };
}

export interface PanelReviewerOptions extends Pick<ReviewOptions, 'dataDir' | 'adapters' | 'env' | 'clock'> {
  /**
   * Where review runs are kept: with a store, each review is a graph run whose
   * panel verdict is an accepted-result record bound to head, diff, contract and
   * reviewers (`runReviewOnRuntime`); without one, the lanes run in a plain loop.
   */
  readonly storage?: RunStorage;
  /** The proof producers a proof-focused review may use (default: the local producer, jailed as the trusted config says). */
  readonly proofProducers?: (review: ReviewToolContext) => ProofProducers;
}

/** The local producer of a review: scenario programs from its trusted tree, jailed as its trusted config says. */
export function defaultProofProducers(review: ReviewToolContext): ProofProducers {
  return {
    local: localProducer({
      repoDir: review.repoDir,
      sandbox: review.trusted.sandbox,
      ...(review.trusted.cacheDir === undefined ? {} : { cacheDir: review.trusted.cacheDir }),
      ...(review.config.limits === undefined ? {} : { limits: review.config.limits }),
    }),
  };
}

/**
 * The tools of a proof-focused review: a proof session for the admitted
 * decision, with the scenarios of the trusted config the review runs under
 * (its base, a protected branch), every bundle kept in the review directory.
 */
export function proofTools(admission: ProofAdmission, trustedBranch: string, producers: (review: ReviewToolContext) => ProofProducers): ReviewToolsFactory {
  return (review) =>
    openProofSession({
      admission,
      settings: proofSettingsOf(review.config, { branch: trustedBranch, config: review.config }),
      producers: producers(review),
      reviewId: review.reviewId,
      headSha: review.headSha,
      trustedSha: review.baseSha,
      lease: { owner: review.reviewId, epoch: 1 },
      reviewStartMs: review.startedAtMs,
      reviewBudgetMs: review.budgetMs,
      bundleDir: join(review.reviewDir, 'proof'),
    });
}

/**
 * The builtin reviewer: every configured lane, then the panel, on exactly
 * `base`..`head` of the workspace repository.
 */
export function panelReviewer(options: PanelReviewerOptions = {}): Reviewer {
  const { storage, proofProducers, ...reviewOptions } = options;
  return async ({ repoDir, snapshot, base, head, proof }) => {
    const tools = proof === undefined ? undefined : proofTools(proof, snapshot.base.ref, proofProducers ?? defaultProofProducers);
    const request = { ...reviewOptions, repoDir, base, head, subjectId: `change-${snapshot.id}`, ...(tools === undefined ? {} : { tools }) };
    const onRuntime = storage === undefined ? null : await runReviewOnRuntime({ ...request, storage });
    const outcome = onRuntime?.outcome ?? (await runReview(request));
    const findings: RepairFinding[] = [];
    for (const lane of outcome.lanes) {
      const result = lane.result;
      if (result !== null && lane.validation.valid && 'disposition' in result && result.disposition === 'REFUTED') {
        findings.push(...result.findings.map(toRepairFinding));
      }
    }
    if (outcome.config_digest === null) throw new ProofgateError('INTERNAL', `review ${outcome.review_id} is not bound to a config digest`);
    return {
      verdict: outcome.verdict,
      reasons: outcome.reasons,
      findings,
      reviewRef: outcome.review_id,
      bindings: { diff: outcome.diff.sha256, contract: outcome.acceptance_contract.sha256, config: outcome.config_digest },
      run: onRuntime?.runId ?? null,
    };
  };
}

/**
 * The review comment this process last wrote, per forge and change. A
 * snapshot read before that write (two reviews asked for in one batch of
 * commands) does not show it yet; the version whose signed verdict is newer
 * is the one edited.
 */
const lastWritten = new WeakMap<object, Map<string, ForgeComment>>();

function currentReviewComment(env: AutomergeEnvironment, snapshot: ChangeSnapshot): OwnComment<ReviewVerdictFields> | null {
  const query: OwnCommentQuery = { selfLogin: env.forge.selfLogin, secret: env.secret, changeId: snapshot.id };
  const seen = findReviewComment(snapshot.comments, query);
  const remembered = lastWritten.get(env.forge)?.get(snapshot.id);
  const mine = remembered === undefined ? null : findReviewComment([remembered], query);
  if (mine === null) return seen;
  if (seen === null) return mine;
  return Date.parse(mine.marker.fields.at) > Date.parse(seen.marker.fields.at) ? mine : seen;
}

function remember(env: AutomergeEnvironment, changeId: string, comment: ForgeComment): void {
  const byChange = lastWritten.get(env.forge) ?? new Map<string, ForgeComment>();
  byChange.set(changeId, comment);
  lastWritten.set(env.forge, byChange);
}

/**
 * The latest `@proofgate proof` decision admitted for this head of the change:
 * every review of that head is proof-focused (a later review by the loop
 * offers the same tools, within the same rules), and a new head has none.
 */
async function admittedProof(env: AutomergeEnvironment, changeId: string, head: string): Promise<ProofAdmission | null> {
  let found: ProofAdmission | null = null;
  for (const step of (await env.store.load(changeId)).typedSteps) {
    if (step.step === 'proof-admitted' && step.decision.headSha === head) found = step.decision;
  }
  return found;
}

export interface ReviewStepResult {
  readonly reviewId: string;
  readonly result: ReviewResult | null;
  /** Why the review ended without a verdict (transport failure), else null. */
  readonly failure: string | null;
  /** The review comment as the forge answered its write (null without a verdict). */
  readonly comment: ForgeComment | null;
}

/**
 * Review exactly `snapshot.head.sha`, put the signed verdict into the change's
 * review comment (created by the first review, edited in place by every later
 * one; its marker binds the head and the review's diff, contract and config
 * digests, and names the review run holding the stored record), and record
 * both ends in the ledger.
 */
export async function runReviewStep(
  env: AutomergeEnvironment,
  snapshot: ChangeSnapshot,
  signal?: AbortSignal,
  proof?: ProofAdmission,
): Promise<ReviewStepResult> {
  const head = snapshot.head.sha;
  const reviewId = newId('rvw');
  const changeId = snapshot.id;
  proof ??= (await admittedProof(env, changeId, head)) ?? undefined;
  await env.store.record(changeId, { type: 'review-dispatched', id: reviewId, head, at: env.store.now() });
  const started = performance.now();
  let result: ReviewResult;
  try {
    const repoDir = await env.forge.workspace.prepare(snapshot);
    result = await env.reviewer({
      repoDir,
      snapshot,
      base: snapshot.base.sha,
      head,
      ...(signal === undefined ? {} : { signal }),
      ...(proof === undefined ? {} : { proof }),
    });
  } catch (error) {
    // No working jail: the lanes cannot run here at all; the loop ends with that error (no verdict, no retry).
    if (isProofgateError(error, 'JAIL_UNAVAILABLE')) throw error;
    const failure = errorMessage(error);
    await env.store.step(changeId, 'review-failed', { review: reviewId, head, reason: failure });
    await env.store.record(changeId, { type: 'review-finished', id: reviewId, head, verdict: null, at: env.store.now() });
    env.observe?.({ kind: 'review', verdict: 'failed', seconds: (performance.now() - started) / 1000 });
    return { reviewId, result: null, failure, comment: null };
  }
  const seconds = (performance.now() - started) / 1000;
  const fields: ReviewVerdictFields = {
    kind: 'review-verdict',
    change: changeId,
    head,
    verdict: result.verdict,
    findings: result.verdict === 'REFUTED' ? result.findings.length : 0,
    review: reviewId,
    at: env.store.now(),
    diff: result.bindings.diff,
    contract: result.bindings.contract,
    config: result.bindings.config,
    run: result.run,
  };
  crashPoint('review-verdict-decided');
  const previous = currentReviewComment(env, snapshot);
  const visible = renderReviewComment({ changeId, head, review: reviewId, at: fields.at, result }, nextReviewHistory(previous));
  const { comment } = await writeOwnComment(env.forge, changeId, previous?.comment ?? null, composeMarkedBody(visible, [fields], env.secret));
  remember(env, changeId, comment);
  crashPoint('review-comment-written');
  await env.store.step(changeId, 'review-verdict', {
    review: reviewId,
    head,
    verdict: result.verdict,
    comment: comment.id,
    reviewRef: result.reviewRef,
    run: result.run,
    findings: result.findings.map((finding) => ({ ...finding })),
  });
  await env.store.record(changeId, { type: 'review-finished', id: reviewId, head, verdict: result.verdict, at: env.store.now() });
  env.observe?.({ kind: 'review', verdict: result.verdict, seconds });
  return { reviewId, result, failure: null, comment };
}
