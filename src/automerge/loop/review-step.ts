/**
 * The review step: run the review panel on the EXACT head of the change and
 * write the verdict comment as proofgate's own identity, with a signed
 * `review-verdict` marker naming that change, that head and this review
 * dispatch. The ledger records the dispatch before the review runs and the
 * result after the comment is written; a crash in between leaves a marker
 * that names the dispatch, so the review counts as answered.
 */
import { ProofgateError, errorMessage, isProofgateError, newId } from '../../core/index.js';
import type { ReviewFinding } from '../../contracts/index.js';
import type { ChangeSnapshot } from '../../forge/port.js';
import { runReview, runReviewOnRuntime, type ReviewOptions } from '../../review/index.js';
import type { RunStorage } from '../../storage/policy-types.js';
import { composeMarkedBody, type ReviewVerdictFields } from '../markers.js';
import { escapeText } from '../status-comment.js';
import type { RepairFinding } from '../repair/index.js';
import { crashPoint } from './crash-seam.js';
import type { AutomergeEnvironment, Reviewer, ReviewResult } from './types.js';

/** Findings shown in a verdict comment (the rest are counted). */
const FINDINGS_SHOWN = 20;

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
}

/**
 * The builtin reviewer: every configured lane, then the panel, on exactly
 * `base`..`head` of the workspace repository.
 */
export function panelReviewer(options: PanelReviewerOptions = {}): Reviewer {
  const { storage, ...reviewOptions } = options;
  return async ({ repoDir, snapshot, base, head }) => {
    const request = { ...reviewOptions, repoDir, base, head, subjectId: `change-${snapshot.id}` };
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

/** The visible text of a verdict comment (outside text escaped). */
export function renderVerdictText(snapshot: Pick<ChangeSnapshot, 'id'>, head: string, result: ReviewResult): string {
  const lines = [`### proofgate review: ${result.verdict}`, '', `Change ${escapeText(snapshot.id)}, head \`${head}\` (review ${escapeText(result.reviewRef)}).`, ''];
  for (const reason of result.reasons) lines.push(`- ${escapeText(reason)}`);
  if (result.findings.length > 0) {
    lines.push('', '**Findings**', '');
    for (const finding of result.findings.slice(0, FINDINGS_SHOWN)) {
      const where = finding.path === undefined ? '' : ` (${escapeText(finding.path)}${finding.line === undefined ? '' : `:${finding.line}`})`;
      lines.push(`- ${escapeText(finding.title)}${where}: ${escapeText(finding.evidence)}`);
    }
    if (result.findings.length > FINDINGS_SHOWN) lines.push(`- and ${result.findings.length - FINDINGS_SHOWN} more`);
  }
  return lines.join('\n');
}

export interface ReviewStepResult {
  readonly reviewId: string;
  readonly result: ReviewResult | null;
  /** Why the review ended without a verdict (transport failure), else null. */
  readonly failure: string | null;
}

/**
 * Review exactly `snapshot.head.sha`, write the signed verdict comment (its
 * marker binds the head and the review's diff, contract and config digests,
 * and names the review run holding the stored record), and record both ends
 * in the ledger.
 */
export async function runReviewStep(env: AutomergeEnvironment, snapshot: ChangeSnapshot, signal?: AbortSignal): Promise<ReviewStepResult> {
  const head = snapshot.head.sha;
  const reviewId = newId('rvw');
  const changeId = snapshot.id;
  await env.store.record(changeId, { type: 'review-dispatched', id: reviewId, head, at: env.store.now() });
  let result: ReviewResult;
  try {
    const repoDir = await env.workspace.prepare(snapshot);
    result = await env.reviewer({ repoDir, snapshot, base: snapshot.base.sha, head, ...(signal === undefined ? {} : { signal }) });
  } catch (error) {
    // No working jail: the lanes cannot run here at all; the loop ends with that error (no verdict, no retry).
    if (isProofgateError(error, 'JAIL_UNAVAILABLE')) throw error;
    const failure = errorMessage(error);
    await env.store.step(changeId, 'review-failed', { review: reviewId, head, reason: failure });
    await env.store.record(changeId, { type: 'review-finished', id: reviewId, head, verdict: null, at: env.store.now() });
    return { reviewId, result: null, failure };
  }
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
  const body = composeMarkedBody(renderVerdictText(snapshot, head, result), [fields], env.secret);
  const comment = await env.forge.createComment(changeId, body);
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
  return { reviewId, result, failure: null };
}
