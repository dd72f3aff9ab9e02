/**
 * The merge step: squash-merge at exactly the reviewed head (the forge
 * refuses with HEAD_MOVED when the head moved, and nothing changes), record
 * the result, and turn the status comment into the final comment: what
 * merged, the repair commits, the merge commit and the timeline.
 */
import { isProofgateError, newId } from '../../core/index.js';
import type { ChangeSnapshot } from '../../forge/port.js';
import type { AutomergeLedgerState } from '../ledger.js';
import { renderFinalComment } from '../status-comment.js';
import { crashPoint } from './crash-seam.js';
import type { StatusWriter } from './status.js';
import type { AutomergeEnvironment } from './types.js';

/** Refusals a merge may meet that change nothing: the loop records them and decides again. */
const REFUSALS = new Set(['HEAD_MOVED', 'BASE_MOVED', 'NOT_MERGEABLE']);

export type MergeStepResult =
  | { readonly kind: 'merged'; readonly mergeCommit: string; readonly state: AutomergeLedgerState }
  | { readonly kind: 'refused'; readonly code: string; readonly reason: string };

/** Where a merge commit can be seen, derived from the change's URL (GitHub: `<repo>/commit/<sha>`). */
export function mergeCommitUrl(changeUrl: string | null, sha: string): string | null {
  const match = changeUrl === null ? null : /^(https?:\/\/[^\s]+)\/pull\/\d+$/.exec(changeUrl);
  return match?.[1] === undefined ? null : `${match[1]}/commit/${sha}`;
}

export async function runMergeStep(env: AutomergeEnvironment, snapshot: ChangeSnapshot, head: string): Promise<MergeStepResult> {
  const id = newId('mrg');
  const changeId = snapshot.id;
  await env.store.step(changeId, 'merge-attempt', { attempt: id, head });
  try {
    const result = await env.forge.merge(changeId, {
      expectedHeadSha: head,
      title: `${snapshot.title} (#${snapshot.number})`,
      message: `Merged by proofgate automerge at the reviewed head ${head}.`,
    });
    crashPoint('merge-returned');
    const state = await env.store.record(changeId, { type: 'merged', id, head, mergeCommit: result.sha, at: env.store.now() });
    return { kind: 'merged', mergeCommit: result.sha, state };
  } catch (error) {
    if (!isProofgateError(error) || !REFUSALS.has(error.code)) throw error;
    await env.store.record(changeId, { type: 'merge-failed', id, head, code: error.code, at: env.store.now() });
    return { kind: 'refused', code: error.code, reason: error.message };
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
