/**
 * The merge step: merge at exactly the reviewed head by the trusted config's
 * method (`automerge.mergeMethod`, default squash; the forge refuses with
 * HEAD_MOVED when the head moved, and nothing changes), record the result,
 * delete the head branch when the config asks for it (never a protected
 * branch or a fork's; a deletion that fails is a step, never a failed
 * merge), and turn the status comment into the final comment: what merged,
 * the repair commits, the merge commit and the timeline.
 */
import { errorMessage, isProofgateError, newId } from '../../core/index.js';
import type { RepoConfig } from '../../contracts/repo-config.js';
import type { ChangeSnapshot } from '../../forge/port.js';
import { requireProtectedChange } from '../../forge/protection.js';
import { automergeActive, type AutomergeLedgerState } from '../ledger.js';
import { renderFinalComment } from '../status-comment.js';
import { crashPoint } from './crash-seam.js';
import { headBranchDeletion, mergeSettings, trustedConfig, type MergeSettings } from './policy.js';
import type { StatusWriter } from './status.js';
import type { AutomergeEnvironment } from './types.js';

/** Refusals a merge may meet that change nothing: the loop records them and decides again. */
const REFUSALS = new Set(['HEAD_MOVED', 'BASE_MOVED', 'NOT_MERGEABLE']);
/** How each refusal is told to `env.observe`. */
const REFUSAL_OUTCOMES: Readonly<Record<string, 'head-moved' | 'base-moved' | 'not-mergeable'>> = {
  HEAD_MOVED: 'head-moved',
  BASE_MOVED: 'base-moved',
  NOT_MERGEABLE: 'not-mergeable',
};

export type MergeStepResult =
  | { readonly kind: 'merged'; readonly mergeCommit: string; readonly state: AutomergeLedgerState }
  | { readonly kind: 'refused'; readonly code: string; readonly reason: string };

/** Where a merge commit can be seen, derived from the change's URL (GitHub: `<repo>/commit/<sha>`). */
export function mergeCommitUrl(changeUrl: string | null, sha: string): string | null {
  const match = changeUrl === null ? null : /^(https?:\/\/[^\s]+)\/pull\/\d+$/.exec(changeUrl);
  return match?.[1] === undefined ? null : `${match[1]}/commit/${sha}`;
}

/**
 * Merge `head` of the change. `config` is the trusted config the loop read
 * for this snapshot (its base's); without it the step reads it again.
 */
export async function runMergeStep(env: AutomergeEnvironment, snapshot: ChangeSnapshot, head: string, config?: RepoConfig): Promise<MergeStepResult> {
  const settings = mergeSettings(config ?? (await trustedConfig(env.forge, snapshot)));
  const id = newId('mrg');
  const changeId = snapshot.id;
  // The attempt is recorded only while automerge is still on and nothing merged, in one compare-and-swap:
  // a stop recorded since the decision (by the router here or in another process) wins over the merge.
  const refused = await env.store.stepUnless(changeId, 'merge-attempt', { attempt: id, head }, ({ state }) =>
    state.merged !== null ? 'the change is merged already' : automergeActive(state) ? null : 'automerge was stopped after the merge was decided',
  );
  if (refused !== null) {
    env.observe?.({ kind: 'merge', outcome: 'stopped' });
    return { kind: 'refused', code: 'ABORTED', reason: refused };
  }
  let merged: { readonly mergeCommit: string; readonly state: AutomergeLedgerState };
  try {
    const result = await env.forge.merge(changeId, {
      expectedHeadSha: head,
      title: `${snapshot.title} (#${snapshot.number})`,
      message: `Merged by proofgate automerge at the reviewed head ${head}.`,
      method: settings.method,
    });
    crashPoint('merge-returned');
    const state = await env.store.record(changeId, { type: 'merged', id, head, mergeCommit: result.sha, at: env.store.now() });
    merged = { mergeCommit: result.sha, state };
  } catch (error) {
    if (!isProofgateError(error) || !REFUSALS.has(error.code)) {
      env.observe?.({ kind: 'merge', outcome: 'error' });
      throw error;
    }
    await env.store.record(changeId, { type: 'merge-failed', id, head, code: error.code, at: env.store.now() });
    env.observe?.({ kind: 'merge', outcome: REFUSAL_OUTCOMES[error.code] ?? 'not-mergeable' });
    return { kind: 'refused', code: error.code, reason: error.message };
  }
  env.observe?.({ kind: 'merge', outcome: 'merged' });
  await deleteMergedHead(env, snapshot, head, settings);
  return { kind: 'merged', ...merged };
}

/**
 * After a merge: delete the change's head branch when `headBranchDeletion`
 * allows it, as a compare-and-swap on the merged head (a branch someone
 * pushed to since is kept). Every outcome the config asked about is a step
 * (`head-branch-deleted`, `head-branch-kept` with its reason,
 * `head-branch-delete-failed` with the error); nothing here fails the merge.
 */
export async function deleteMergedHead(env: AutomergeEnvironment, snapshot: ChangeSnapshot, head: string, settings: MergeSettings): Promise<void> {
  if (!settings.deleteHeadBranch) return;
  const changeId = snapshot.id;
  const branch = snapshot.head.ref;
  try {
    const trusted = await requireProtectedChange(env.forge, snapshot);
    const verdict = headBranchDeletion(snapshot, settings, trusted, env.forge.deleteBranch !== undefined);
    if (!verdict.delete) {
      await env.store.step(changeId, 'head-branch-kept', { branch, code: verdict.code, reason: verdict.reason });
      return;
    }
    await env.forge.deleteBranch?.({ branch, expectedSha: head });
    await env.store.step(changeId, 'head-branch-deleted', { branch, sha: head });
  } catch (error) {
    const code = isProofgateError(error) ? error.code : 'INTERNAL';
    await env.store.step(changeId, 'head-branch-delete-failed', { branch, code, reason: errorMessage(error) }).catch(() => undefined);
  }
}

/** Write the final comment into the status comment and clear the automerge labels. */
export async function finishMerged(env: AutomergeEnvironment, writer: StatusWriter, snapshot: ChangeSnapshot, state: AutomergeLedgerState): Promise<void> {
  const merged = state.merged;
  if (merged === null) return;
  const body = renderFinalComment(
    {
      changeId: snapshot.id,
      intent: writer.intent,
      title: snapshot.title,
      headRef: snapshot.head.ref,
      baseRef: snapshot.base.ref,
      mergedHead: merged.head,
      mergeCommit: merged.mergeCommit,
      mergeCommitUrl: mergeCommitUrl(snapshot.url, merged.mergeCommit),
      repairs: state.repairs,
      timeline: state.timeline,
    },
    env.secret,
  );
  await writer.writeComment(snapshot, body);
  await writer.applyLabels(snapshot, 'merged');
}
