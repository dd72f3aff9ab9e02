import { ProofgateError } from '../../core/index.js';
import { isAncestor } from '../../host/git.js';
import { emptyRepoConfig, maintainerPermission, protectedBranchRefusal, type RepoConfig } from '../../contracts/repo-config.js';
import type { TrustedConfig } from '../protection.js';
import type { ChangeSnapshot, RepoPermission } from '../port.js';
import { judgeMergeability, type MergeabilityJudgment } from './mergeability.js';
import { changeStream, foldChange, type ChangeRecord } from './records.js';
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
  /** The config of the base (empty when the change is refused). */
  readonly config: RepoConfig;
  /** Why the open change breaks the protected-branch rule, or null (then `config` is its base's). */
  readonly refusal: string | null;
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
  if (base === null)
    throw new ProofgateError('NOT_FOUND', `base branch "${record.baseRef}" of change ${record.changeId} no longer exists`, { changeId: record.changeId });
  if (head === null)
    throw new ProofgateError('NOT_FOUND', `head branch "${record.headRef}" of change ${record.changeId} no longer exists`, { changeId: record.changeId });
  return { baseSha: base, headSha: head };
}

/** A merge commit (squash or merge) of a change found on its base. */
export interface LandedMerge {
  readonly mergeCommitSha: string;
  readonly reviewedHeadSha: string;
  readonly baseBefore: string;
  readonly at: string;
}

const FULL_SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

function trailer(message: string, name: string): string | null {
  const prefix = `${name}: `;
  const line = message
    .split('\n')
    .filter((entry) => entry.startsWith(prefix))
    .pop();
  return line === undefined ? null : line.slice(prefix.length).trim();
}

/**
 * The local forge's own merge commit of `changeId` on the first-parent
 * history of `baseSha` since the change was opened, or null. It counts only
 * when its trailers name this change, a full reviewed-head sha, and as
 * `Proofgate-Base` exactly its own first parent, with no other parent (a
 * squash) or the reviewed head as its second (a merge commit): the shapes
 * `mergeChange` writes.
 */
export async function findLandedMerge(repo: GitRepository, changeId: string, baseSha: string, openedBaseSha: string): Promise<LandedMerge | null> {
  if (!/^[0-9A-Za-z._-]+$/.test(changeId) || baseSha === openedBaseSha) return null;
  const pattern = `^Proofgate-Change: ${changeId.replace(/\./g, '\\.')}$`;
  const listing = await repo.text(['log', '--first-parent', '--format=%x01%H %P%x02%cI%x02%B', `--grep=${pattern}`, baseSha, `^${openedBaseSha}`]);
  for (const entry of listing.split('\x01')) {
    const [shas = '', committed = '', message = ''] = entry.split('\x02');
    const [sha = '', ...parents] = shas.trim().split(' ');
    if (!FULL_SHA.test(sha) || parents.length < 1 || parents.length > 2) continue;
    const head = trailer(message, 'Proofgate-Reviewed-Head');
    if (trailer(message, 'Proofgate-Change') !== changeId || head === null || !FULL_SHA.test(head) || trailer(message, 'Proofgate-Base') !== parents[0])
      continue;
    if (parents.length === 2 && parents[1] !== head) continue;
    const time = Date.parse(committed);
    return { mergeCommitSha: sha, reviewedHeadSha: head, baseBefore: parents[0] ?? '', at: new Date(Number.isNaN(time) ? 0 : time).toISOString() };
  }
  return null;
}

/**
 * Reconcile a merge that landed but was never recorded: the base ref was
 * swapped to the squash commit and the process died before `change-merged`
 * was appended. An open change whose squash commit is on its base is recorded
 * as merged, at the head that commit names. Returns the (possibly updated)
 * record.
 */
async function reconcileLandedMerge(repo: GitRepository, store: LocalForgeStore, record: ChangeRecord): Promise<ChangeRecord> {
  if (record.state !== 'open') return record;
  const base = await repo.branchSha(record.baseRef);
  if (base === null) return record;
  const landed = await findLandedMerge(repo, record.changeId, base, record.openedBaseSha);
  if (landed === null) return record;
  await store.appendWith(changeStream(record.changeId), (events) =>
    foldChange(events)?.state === 'open' ? [{ type: 'change-merged', data: { ...landed } }] : [],
  );
  return store.requireChange(record.changeId);
}

/**
 * Read a change in one call: the stored record, the live base and head, the
 * protected-branch rule under `trusted` (the trusted branch's config, which
 * also gives the author's permission), the config of the base, the check runs
 * of the current head only, and the mergeability judgment (see
 * mergeability.ts; a refused change is BLOCKED with the refusal as reason). An open change whose squash
 * commit is already on the base (a merge whose record a crash lost) is
 * recorded as merged first.
 */
export async function readLiveChange(repo: GitRepository, store: LocalForgeStore, changeId: string, trusted: TrustedConfig): Promise<LiveChange> {
  const record = await reconcileLandedMerge(repo, store, await store.requireChange(changeId));
  const { baseSha, headSha } = await liveShas(repo, record);
  // An open change whose base is not protected (or whose head is) gets no config from its base: it is refused, never run.
  const refusal =
    record.state === 'open'
      ? protectedBranchRefusal({ trustedBranch: trusted.branch, trustedConfig: trusted.config, base: record.baseRef, head: record.headRef })
      : null;
  const config = refusal === null ? await loadTrustedConfig(repo, record.baseRef, baseSha) : emptyRepoConfig();
  const checks = await store.checks(headSha);
  let mergeTree: MergeTreeResult | null = null;
  let upToDate = true;
  if (record.state === 'open') {
    mergeTree = await repo.mergeTree(baseSha, headSha);
    upToDate = await isAncestor(repo.root, baseSha, headSha);
  }
  const judgment: MergeabilityJudgment =
    refusal !== null
      ? { mergeable: 'MERGEABLE', mergeStateStatus: 'BLOCKED', reason: refusal }
      : judgeMergeability({
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
    author: { login: record.author },
    mergeable: judgment.mergeable,
    mergeStateStatus: judgment.mergeStateStatus,
    labels: [...record.labels],
    checks,
    comments: [...record.comments],
    // Set by the forge's `snapshot` from the approval records (review-decision.ts).
    reviewDecision: null,
    mergeCommitSha: record.merge?.mergeCommitSha ?? null,
    url: null,
  };
  return { record, baseSha, headSha, config, refusal, judgment, mergeTree, snapshot };
}
