import { ProofgateError, type Clock } from '../../core/index.js';
import type { MergeRequest, MergeResult } from '../port.js';
import type { TrustedConfig } from '../protection.js';
import { allowsMerge } from './mergeability.js';
import { branchStream, changeStream, foldChange } from './records.js';
import type { GitRepository } from './repository.js';
import { readLiveChange } from './snapshot.js';
import type { LocalForgeStore } from './store.js';

export interface MergeContext {
  readonly repo: GitRepository;
  readonly store: LocalForgeStore;
  readonly clock: Clock;
  readonly selfLogin: string;
  /** The trusted branch's config: a change that breaks the protected-branch rule is not mergeable. */
  readonly trusted: TrustedConfig;
  /** Test seam: runs after the merge commit is written and before the base ref is swapped. */
  readonly beforeBaseUpdate?: () => Promise<void>;
}

/**
 * Test seam for crash-safety tests (docs/forge.md): with the environment
 * variable `PROOFGATE_TEST_CRASH_AT=merge-base-updated` the process kills
 * itself with SIGKILL right after the base ref was swapped and before the
 * merge is recorded. Unset, it does nothing.
 */
function crashAfterBaseUpdate(): void {
  if (process.env.PROOFGATE_TEST_CRASH_AT === 'merge-base-updated') process.kill(process.pid, 'SIGKILL');
}

const FULL_SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

/** The merge commit message (squash or merge): title, body, then trailers naming the change and the exact reviewed head. */
export function squashMessage(title: string, body: string, changeId: string, reviewedHead: string, baseBefore: string): string {
  const parts = [title.trim()];
  if (body.trim() !== '') parts.push(body.trim());
  parts.push([`Proofgate-Change: ${changeId}`, `Proofgate-Reviewed-Head: ${reviewedHead}`, `Proofgate-Base: ${baseBefore}`].join('\n'));
  return `${parts.join('\n\n')}\n`;
}

/**
 * The merge methods the local forge performs: `squash` and `merge`. A
 * `rebase` is refused with `CONFIG` naming the setting (it would rewrite the
 * head's commits, which carry no trailer to find a landed merge by).
 */
function checkedMethod(request: MergeRequest): 'squash' | 'merge' {
  const method = request.method ?? 'squash';
  if (method === 'squash' || method === 'merge') return method;
  if (method === 'rebase') {
    throw new ProofgateError('CONFIG', 'automerge.mergeMethod: rebase is not supported by the local forge; use squash or merge', { method });
  }
  throw new ProofgateError('INVALID_INPUT', `unknown merge method ${JSON.stringify(method)} (squash, merge or rebase)`);
}

/**
 * Merge a change at exactly `request.expectedHeadSha` (by `request.method`:
 * `squash`, the default, or `merge`; `rebase` is `CONFIG`):
 *
 * 1. the head must still be the expected sha (else `HEAD_MOVED`);
 * 2. the change must be mergeable against the base as read now, under the
 *    trusted config of that base (else `NOT_MERGEABLE`, with the reason);
 * 3. the merged tree from `git merge-tree --write-tree` becomes one commit
 *    whose first parent is that base sha: its only parent for a squash, and
 *    the reviewed head its second for a merge commit;
 * 4. `git update-ref refs/heads/<base> <new> <base-read-in-2>` swaps the base
 *    (another writer in between: `BASE_MOVED`);
 * 5. the merge is recorded in the store.
 *
 * Failures in 1, 2 and 4 change no ref and record nothing (the unreferenced
 * commit object of 3 is left for git's garbage collection).
 *
 * A crash between 4 and 5 loses no merge and allows no second one: reading
 * the change (snapshot, or this function's own read in a retry) finds the
 * squash commit on the base by its trailers and records the change as merged
 * (see `readLiveChange`), so a retry is refused with NOT_MERGEABLE ("change is
 * merged") and the snapshot says merged with that commit.
 */
export async function mergeChange(context: MergeContext, changeId: string, request: MergeRequest): Promise<MergeResult> {
  const { repo, store } = context;
  if (typeof request.expectedHeadSha !== 'string' || !FULL_SHA.test(request.expectedHeadSha)) {
    throw new ProofgateError('INVALID_INPUT', 'merge needs expectedHeadSha: the full sha of the reviewed head');
  }
  const method = checkedMethod(request);
  const live = await readLiveChange(repo, store, changeId, context.trusted);
  const { record } = live;
  if (record.state !== 'open') {
    throw new ProofgateError('NOT_MERGEABLE', `change ${changeId} is ${record.state}`, { changeId, state: record.state });
  }
  if (live.headSha !== request.expectedHeadSha) {
    throw new ProofgateError('HEAD_MOVED', `change ${changeId}: head is ${live.headSha}, not the expected ${request.expectedHeadSha}`, {
      changeId,
      expected: request.expectedHeadSha,
      actual: live.headSha,
    });
  }
  if (!allowsMerge(live.judgment)) {
    throw new ProofgateError('NOT_MERGEABLE', `change ${changeId} is not mergeable (${live.judgment.mergeStateStatus}): ${live.judgment.reason}`, {
      changeId,
      mergeable: live.judgment.mergeable,
      mergeStateStatus: live.judgment.mergeStateStatus,
    });
  }
  const baseBefore = live.baseSha;
  const merged = live.mergeTree;
  if (merged === null || !merged.clean) throw new ProofgateError('NOT_MERGEABLE', `change ${changeId} conflicts with ${record.baseRef}`, { changeId });
  // Also what keeps a concurrent second merge of the same change from adding an empty commit.
  if (merged.tree === (await repo.treeOf(baseBefore))) {
    throw new ProofgateError('NOT_MERGEABLE', `change ${changeId} has nothing to merge into ${record.baseRef} (already merged?)`, { changeId });
  }
  const title = request.title.trim() === '' ? `${record.title} (change ${changeId})` : request.title;
  const message = squashMessage(title, request.message, changeId, live.headSha, baseBefore);
  const committer = { name: context.selfLogin, email: `${context.selfLogin}@proofgate.invalid` };
  // A squash keeps the head's author; a merge commit is proofgate's own act, as on GitHub.
  const author = method === 'squash' ? await repo.commitAuthor(live.headSha) : committer;
  const parents = method === 'squash' ? [baseBefore] : [baseBefore, live.headSha];
  const mergeSha = await repo.commitTree(merged.tree, parents, message, author, committer);

  await context.beforeBaseUpdate?.();
  const headNow = await repo.branchSha(record.headRef);
  if (headNow !== request.expectedHeadSha) {
    throw new ProofgateError('HEAD_MOVED', `change ${changeId}: head moved to ${headNow ?? '(deleted)'} during the merge`, {
      changeId,
      expected: request.expectedHeadSha,
      actual: headNow,
    });
  }
  // The base moves, and work trees that have it checked out follow it, in one guarded step (GitRepository.moveBranch).
  const moved = await repo.moveBranch(record.baseRef, mergeSha, baseBefore, `proofgate: merge change ${changeId}`);
  if (!moved.swapped) {
    throw new ProofgateError('BASE_MOVED', `change ${changeId}: ${record.baseRef} moved during the merge; nothing was changed`, {
      changeId,
      expectedBase: baseBefore,
    });
  }
  crashAfterBaseUpdate();
  const at = context.clock.now().toISOString();
  await store.appendWith(changeStream(changeId), (events) => {
    const current = foldChange(events);
    if (current === null || current.state !== 'open') return [];
    return [{ type: 'change-merged', data: { mergeCommitSha: mergeSha, reviewedHeadSha: live.headSha, baseBefore, at } }];
  });
  await store.append(branchStream(record.baseRef), [
    { type: 'branch-pushed', data: { ref: `refs/heads/${record.baseRef}`, before: baseBefore, after: mergeSha, at } },
  ]);
  return { merged: true, sha: mergeSha };
}
