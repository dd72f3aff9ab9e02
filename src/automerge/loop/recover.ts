/**
 * Crash recovery at the start of a job. The job holds the change's lease, so
 * whatever the ledger shows as still running (a review, a repair, a run of
 * the checks) belongs to an earlier job whose process ended without finishing
 * it: a SIGKILL, a power cut. Each is closed with what the forge shows now,
 * never by doing the effect again:
 *
 * - a review whose signed verdict comment exists (it names the dispatch id)
 *   is finished with that verdict; one without is finished with no verdict;
 * - a repair whose push intent (`repair-push` step) names the head the change
 *   has now is finished as pushed, with the commits of the intent; otherwise
 *   it is finished as failed (the push never happened, or someone else moved
 *   the branch);
 * - after a job that never released its lease, heads whose checks the loop
 *   started and never saw finish are returned, so the loop runs them once
 *   more (their old runs will never complete).
 */
import type { KnownStep, KnownStepOf } from '../../contracts/automerge-steps.js';
import { collectVerdicts } from '../markers.js';
import type { AutomergeEnvironment } from './types.js';

export interface Recovery {
  readonly reviews: number;
  readonly repairs: number;
  /** Heads whose checks must run again. */
  readonly rerunChecks: ReadonlySet<string>;
}

/** The latest push intent (`repair-push` step) of a repair, if any (pure). */
export function pushIntent(steps: readonly KnownStep[], repairId: string): KnownStepOf<'repair-push'> | undefined {
  let found: KnownStepOf<'repair-push'> | undefined;
  for (const step of steps) if (step.step === 'repair-push' && step.repair === repairId) found = step;
  return found;
}

/** Heads with a `checks-started` step and no later `checks-finished` or `checks-recovered` step (pure). */
export function interruptedCheckHeads(steps: readonly KnownStep[]): Set<string> {
  const open = new Set<string>();
  for (const step of steps) {
    if (step.step === 'checks-started') open.add(step.head);
    if (step.step === 'checks-finished' || step.step === 'checks-recovered') open.delete(step.head);
  }
  return open;
}

export interface RecoveryOptions {
  /**
   * Look for check runs cut short: only when the previous job never released
   * its lease (a job that ended cleanly may have left its checks running in
   * its process, and they will finish).
   */
  readonly checks: boolean;
}

/** Close what an earlier job left running (the forge is read only when something was left). */
export async function recoverInterrupted(env: AutomergeEnvironment, changeId: string, options: RecoveryOptions): Promise<Recovery> {
  const { store } = env;
  const loaded = await store.load(changeId);
  const rerunChecks = options.checks ? interruptedCheckHeads(loaded.typedSteps) : new Set<string>();
  const left = loaded.state.reviews.some((r) => r.status === 'dispatched') || loaded.state.repairs.some((r) => r.status === 'dispatched');
  if (!left && rerunChecks.size === 0) return { reviews: 0, repairs: 0, rerunChecks };
  const snapshot = await env.forge.snapshot(changeId);
  const { verdicts } = collectVerdicts(snapshot.comments, { selfLogin: env.forge.selfLogin, secret: env.secret, changeId });
  let reviews = 0;
  for (const review of loaded.state.reviews.filter((r) => r.status === 'dispatched')) {
    const marker = verdicts.filter((v) => v.fields.review === review.id && v.fields.head === review.head).pop();
    const verdict = marker?.fields.verdict ?? null;
    await store.step(changeId, 'review-recovered', { review: review.id, head: review.head, verdict, comment: marker?.commentId ?? null });
    await store.record(changeId, { type: 'review-finished', id: review.id, head: review.head, verdict, at: store.now() });
    reviews += 1;
  }
  let repairs = 0;
  for (const repair of loaded.state.repairs.filter((r) => r.status === 'dispatched')) {
    const intent = pushIntent(loaded.typedSteps, repair.id);
    const landed = intent !== undefined && intent.newSha === snapshot.head.sha;
    const commits = landed ? [...intent.commits] : [];
    await store.step(changeId, 'repair-recovered', { repair: repair.id, head: repair.head, pushed: landed, headNow: snapshot.head.sha });
    await store.record(changeId, {
      type: 'repair-finished',
      id: repair.id,
      result: landed ? 'pushed' : 'failed',
      newHead: landed ? snapshot.head.sha : null,
      commits,
      at: store.now(),
    });
    repairs += 1;
  }
  for (const head of rerunChecks) await store.step(changeId, 'checks-recovered', { head });
  return { reviews, repairs, rerunChecks };
}
