import { ProofgateError } from '../../core/index.js';
import { maintainerPermission, type RepoConfig } from '../../contracts/repo-config.js';
import type { ChangeSnapshot, RepoPermission } from '../port.js';
import { judgeMergeability, type MergeabilityJudgment } from './mergeability.js';
import type { ChangeRecord } from './records.js';
import type { GitRepository, MergeTreeResult } from './repository.js';
import type { LocalForgeStore } from './store.js';
import { loadTrustedConfig } from './trusted-config.js';

/** A login's permission under a trusted config: the maintainers entry, else `read` (anyone who can read the repository). */
export function permissionFromConfig(config: RepoConfig, login: string): RepoPermission {
  return maintainerPermission(config, login) ?? 'read';
}

/** The live state of a change: its record plus what git says now. */
export interface LiveChange {
  readonly record: ChangeRecord;
  readonly baseSha: string;
  readonly headSha: string;
  readonly config: RepoConfig;
  readonly judgment: MergeabilityJudgment;
  /** The `git merge-tree` result of base and head (null unless the change is open). */
  readonly mergeTree: MergeTreeResult | null;
  readonly snapshot: ChangeSnapshot;
}

async function liveShas(repo: GitRepository, record: ChangeRecord): Promise<{ baseSha: string; headSha: string }> {
  const base = await repo.branchSha(record.baseRef);
  if (record.state === 'merged' && record.merge !== null) {
    return { baseSha: base ?? record.merge.mergeCommitSha, headSha: record.merge.reviewedHeadSha };
  }
  const head = await repo.branchSha(record.headRef);
  if (record.state === 'closed') return { baseSha: base ?? record.openedBaseSha, headSha: head ?? record.openedHeadSha };
  if (base === null) throw new ProofgateError('NOT_FOUND', `base branch "${record.baseRef}" of change ${record.changeId} no longer exists`, { changeId: record.changeId });
  if (head === null) throw new ProofgateError('NOT_FOUND', `head branch "${record.headRef}" of change ${record.changeId} no longer exists`, { changeId: record.changeId });
  return { baseSha: base, headSha: head };
}

/**
 * Read a change in one call: the stored record, the live base and head, the
 * trusted config of the base, the check runs of the current head only, and the
 * mergeability judgment (see mergeability.ts).
 */
export async function readLiveChange(repo: GitRepository, store: LocalForgeStore, changeId: string): Promise<LiveChange> {
  const record = await store.requireChange(changeId);
  const { baseSha, headSha } = await liveShas(repo, record);
  const config = await loadTrustedConfig(repo, record.baseRef, baseSha);
  const checks = await store.checks(headSha);
  let mergeTree: MergeTreeResult | null = null;
  let upToDate = true;
  if (record.state === 'open') {
    mergeTree = await repo.mergeTree(baseSha, headSha);
    upToDate = await repo.isAncestor(baseSha, headSha);
  }
  const judgment = judgeMergeability({
    state: record.state,
    conflicts: mergeTree !== null && !mergeTree.clean,
    upToDate,
    requireUpToDate: config.requireUpToDate,
    configuredChecks: config.checks.map((check) => check.name),
    checks,
  });
  const snapshot: ChangeSnapshot = {
    id: record.changeId,
    number: record.number,
    title: record.title,
    state: record.state,
    draft: false,
    base: { ref: record.baseRef, sha: baseSha },
    head: { ref: record.headRef, sha: headSha },
    author: { login: record.author, permission: permissionFromConfig(config, record.author) },
    mergeable: judgment.mergeable,
    mergeStateStatus: judgment.mergeStateStatus,
    labels: [...record.labels],
    checks,
    comments: [...record.comments],
    mergeCommitSha: record.merge?.mergeCommitSha ?? null,
    url: null,
  };
  return { record, baseSha, headSha, config, judgment, mergeTree, snapshot };
}
