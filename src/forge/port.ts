/**
 * The Forge port: what proofgate needs from a code host. Two adapters implement
 * it (`local/` on a git repository, `github/` on the GitHub API) and one
 * conformance suite (test/forge/conformance.ts) holds both to the same rules.
 */

export type ChangeState = 'open' | 'closed' | 'merged';
export type Mergeable = 'MERGEABLE' | 'CONFLICTING' | 'UNKNOWN';
export type MergeStateStatus = 'CLEAN' | 'BEHIND' | 'BLOCKED' | 'DIRTY' | 'HAS_HOOKS' | 'UNKNOWN' | 'UNSTABLE';
/** Repository permission of a user, strongest first. */
export type RepoPermission = 'admin' | 'maintain' | 'write' | 'triage' | 'read' | 'none';

/** Every permission, lowest first (`none`: no access at all). */
export const REPO_PERMISSIONS: readonly RepoPermission[] = ['none', 'read', 'triage', 'write', 'maintain', 'admin'];

/** Rank of a permission: `none` 0 ... `admin` 5. Pure. */
export function permissionRank(permission: RepoPermission): number {
  return REPO_PERMISSIONS.indexOf(permission);
}

/** The lower of two permissions. Pure. */
export function lowerPermission(a: RepoPermission, b: RepoPermission): RepoPermission {
  return permissionRank(a) <= permissionRank(b) ? a : b;
}

export type CheckStatus = 'queued' | 'in_progress' | 'completed' | 'waiting' | 'requested' | 'pending';
export type CheckConclusion =
  'success' | 'failure' | 'neutral' | 'cancelled' | 'skipped' | 'timed_out' | 'action_required' | 'startup_failure' | 'stale' | 'error';

/** One check run or commit status on the head commit. */
export interface ForgeCheck {
  /** 'check_run' for check runs, 'status' for commit statuses. */
  readonly kind: 'check_run' | 'status';
  readonly name: string;
  /** Workflow (or app / status context group) the check belongs to; null when unknown. */
  readonly workflow: string | null;
  readonly status: CheckStatus;
  /** Set once status is 'completed'. */
  readonly conclusion: CheckConclusion | null;
  readonly startedAt: string | null;
  readonly completedAt: string | null;
  readonly url: string | null;
  /** The commit the check ran on. */
  readonly headSha: string;
}

export type AuthorType = 'User' | 'Bot' | 'Organization';

export interface ForgeComment {
  readonly id: string;
  readonly author: string;
  readonly authorType: AuthorType;
  readonly body: string;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/**
 * The forge's review decision on a change: `APPROVED` (the approvals its base
 * requires are given), `CHANGES_REQUESTED` (a reviewer asked for changes),
 * `REVIEW_REQUIRED` (required approvals are missing).
 */
export type ReviewDecision = 'APPROVED' | 'CHANGES_REQUESTED' | 'REVIEW_REQUIRED';

/** Everything a decision needs about one change, read in one call. */
export interface ChangeSnapshot {
  /** Stable identifier: the PR number on GitHub, the change id locally. */
  readonly id: string;
  readonly number: number;
  readonly title: string;
  readonly state: ChangeState;
  readonly draft: boolean;
  readonly base: { readonly ref: string; readonly sha: string };
  readonly head: { readonly ref: string; readonly sha: string };
  /** Who opened the change (their permission is `Forge.permission`, asked when needed: a snapshot does not pay for it). */
  readonly author: { readonly login: string };
  readonly mergeable: Mergeable;
  readonly mergeStateStatus: MergeStateStatus;
  readonly labels: readonly string[];
  readonly checks: readonly ForgeCheck[];
  readonly comments: readonly ForgeComment[];
  /**
   * The review decision; null when the base requires no approving review.
   * Both adapters always set it (absent reads as null).
   */
  readonly reviewDecision: ReviewDecision | null;
  /** Set when state is 'merged'. */
  readonly mergeCommitSha: string | null;
  /** Where a person can look at the change (URL or path). */
  readonly url: string | null;
  /**
   * Check names the forge itself requires on the base before it merges
   * (GitHub: the required status checks of the base's branch protection
   * rule; empty when there is none, or when proofgate may not read it).
   * A required check that has not reported on the head is pending. Unset:
   * the forge has no such rule (the local forge, whose required checks are
   * the configured ones).
   */
  readonly requiredChecks?: readonly string[];
  /**
   * True when the head branch lives in another repository (a fork on
   * GitHub): proofgate never deletes or pushes to it there. Unset: the head
   * is a branch of this repository (the local forge).
   */
  readonly crossRepository?: boolean;
  /** True when the conversation is locked (GitHub); unset: not locked (the local forge). */
  readonly locked?: boolean;
  /**
   * The forge's own merge queue on the base (GitHub's), as far as it concerns
   * this change. Unset: the base has no such queue and the change was never
   * in one (the local forge's queue is proofgate's own: `Forge.mergeQueue`).
   */
  readonly forgeQueue?: ForgeQueueState;
}

/** A change and the forge's own merge queue (GitHub's merge queue). */
export interface ForgeQueueState {
  /** The base requires the queue: the change lands only through it (`Forge.enqueue`), never by `merge`. */
  readonly required: boolean;
  /**
   * The change's place in the queue, or null when it is not queued. `group`:
   * the merge group the forge made for it (the candidate: base plus the
   * changes ahead plus this one) and that commit's checks, which are never
   * the change's head checks; null while the forge has not made one.
   */
  readonly entry: {
    readonly position: number;
    readonly state: string;
    readonly enqueuedAt: string;
    readonly group: { readonly sha: string; readonly checks: readonly ForgeCheck[] } | null;
  } | null;
  /** The latest time the queue removed the change without merging it: the head it had then, the forge's reason, when. */
  readonly lastRemoval: { readonly headSha: string | null; readonly reason: string; readonly at: string } | null;
}

/**
 * How a change lands on its base: `squash` (one new commit with the base as
 * its only parent), `merge` (a merge commit whose parents are the base and
 * the reviewed head) or `rebase` (the head's commits replayed onto the base).
 */
export type MergeMethod = 'squash' | 'merge' | 'rebase';

export interface MergeRequest {
  /** The head sha that was reviewed; a moved head fails with HEAD_MOVED. Required. */
  readonly expectedHeadSha: string;
  readonly title: string;
  readonly message: string;
  /** Default `squash`. A method the forge (or the repository) does not allow is refused and nothing changes. */
  readonly method?: MergeMethod;
}

export interface DeleteBranchRequest {
  /** The branch name (without `refs/heads/`). */
  readonly branch: string;
  /** Compare-and-swap: the branch is deleted only while it still points here. */
  readonly expectedSha: string;
}

export interface MergeResult {
  readonly merged: true;
  readonly sha: string;
}

export interface PushRequest {
  readonly branch: string;
  readonly newSha: string;
  /** Compare-and-swap: the branch must still point here (null: the branch must not exist). */
  readonly expectedOldSha: string | null;
}

/**
 * Where proofgate works on a change's bytes, and the one way it publishes a
 * new head it made there (a repair). Each forge supplies its own: the local
 * forge works in the repository itself and moves the branch with
 * `git update-ref`; GitHub keeps a clone per change and pushes with
 * `git push --force-with-lease`.
 */
export interface ChangeWorkspace {
  /**
   * A local git repository holding the change's base and head commits (from
   * `snapshot`), fetched when they are missing; `NOT_FOUND` when the forge
   * has no such commit, `CONFIG` when the forge has no workspace set up.
   */
  prepare(snapshot: ChangeSnapshot): Promise<string>;
  /**
   * Make `request.newSha`, a commit in `dir` (a directory `prepare`
   * returned), the new head: one compare-and-swap of `request.branch`
   * against `request.expectedOldSha`. A branch that is elsewhere is
   * `HEAD_MOVED` and nothing changed; a protected branch is
   * `PROTECTED_BRANCH`. A branch already at `newSha` may count as done (a
   * retried publish).
   */
  publish(dir: string, request: PushRequest): Promise<void>;
}

export interface Forge {
  readonly kind: 'local' | 'github';
  /** The identity proofgate writes comments and markers as. */
  readonly selfLogin: string;
  snapshot(changeId: string): Promise<ChangeSnapshot>;
  createComment(changeId: string, body: string): Promise<ForgeComment>;
  editComment(changeId: string, commentId: string, body: string): Promise<ForgeComment>;
  addLabels(changeId: string, labels: readonly string[]): Promise<void>;
  removeLabel(changeId: string, label: string): Promise<void>;
  /**
   * Merge at exactly `expectedHeadSha` by `request.method` (default squash):
   * `HEAD_MOVED` / `NOT_MERGEABLE` change nothing; a method this forge
   * cannot perform is `CONFIG`.
   */
  merge(changeId: string, request: MergeRequest): Promise<MergeResult>;
  /**
   * Put the change in the forge's own merge queue (`snapshot.forgeQueue.required`)
   * at exactly `expectedHeadSha`: a moved head is `HEAD_MOVED`, a change the
   * queue refuses `NOT_MERGEABLE`, and nothing is queued. Resolves with when
   * the forge queued it (already queued: that entry). Absent: no such queue.
   */
  enqueue?(changeId: string, request: { readonly expectedHeadSha: string }): Promise<{ readonly enqueuedAt: string }>;
  /** Take the change out of the forge's own merge queue (not queued: nothing to do). */
  dequeue?(changeId: string): Promise<void>;
  /** Move a branch to a commit the forge already has, with compare-and-swap (`HEAD_MOVED` when it moved). */
  pushBranch(request: PushRequest): Promise<void>;
  /**
   * Delete a branch while it still points at `expectedSha` (`HEAD_MOVED`
   * when it moved; a branch already gone counts as done). A protected
   * branch is `PROTECTED_BRANCH`, a branch still in use (the head or base of
   * an open change, checked out in a work tree) `INVALID_INPUT`; nothing
   * changes on a refusal. Absent: this forge does not delete branches.
   */
  deleteBranch?(request: DeleteBranchRequest): Promise<void>;
  /** Where a change's bytes are worked on, and how a repair's new head is published. */
  readonly workspace: ChangeWorkspace;
  /** File content at a ref, or null when the file does not exist there. */
  readFile(ref: string, path: string): Promise<Uint8Array | null>;
  permission(login: string): Promise<RepoPermission>;
  /**
   * The trusted branch: its `.proofgate.yml` names the protected branches and
   * the maintainers (the local forge: a setting of the data dir, default
   * `main`, else `master`; GitHub: the repository's default branch).
   */
  trustedBranch(): Promise<string>;
  /**
   * The forge's side of proofgate's merge queue (src/automerge/queue/):
   * candidates built from the base tip and the queued changes' squashes,
   * checked on their exact tree, landed with one compare-and-swap of the
   * base. Absent: this forge has no queue of proofgate's own (a change merges
   * on its own). The local forge builds candidates as commits in its
   * repository; a forge whose checks run elsewhere (GitHub) can implement the
   * same port by pushing the candidate to a staging ref and reading that
   * ref's checks.
   */
  readonly mergeQueue?: MergeQueuePort;
}

/** One queued change as a candidate takes it: the reviewed head whose patch is applied, never another. */
export interface QueueCandidateEntry {
  readonly changeId: string;
  readonly headSha: string;
  /** The title of its squash commit. */
  readonly title: string;
}

/** One change's squash commit in a candidate. */
export interface CandidateCommit {
  readonly changeId: string;
  readonly headSha: string;
  /** Its squash commit: first (and only) parent the previous commit of the candidate, or the base tip. */
  readonly commit: string;
  readonly tree: string;
  /** The paths its squash changes on the candidate (what the trust rule reads). */
  readonly paths: readonly string[];
}

/** A candidate: the base tip plus one squash commit per change, in queue order; `tip` is the last. */
export interface MergeCandidate {
  readonly baseRef: string;
  readonly baseSha: string;
  readonly commits: readonly CandidateCommit[];
  readonly tip: string;
  readonly tree: string;
  /** What the checks' definition is bound to: the trusted config's blob at `baseSha` (`none` without one). */
  readonly configKey: string;
}

/** Why a queued change cannot go into a candidate (nothing was built). */
export type CandidateRefusalCode = 'HEAD_MOVED' | 'NOT_OPEN' | 'MERGED' | 'CONFLICT' | 'EMPTY' | 'PROTECTED_BRANCH';

export type CandidateBuild =
  | { readonly kind: 'built'; readonly candidate: MergeCandidate }
  | {
      readonly kind: 'refused';
      readonly changeId: string;
      readonly code: CandidateRefusalCode;
      readonly reason: string;
      /** For `MERGED`: the change's merge commit and the head it landed. */
      readonly merged?: { readonly mergeCommit: string; readonly head: string };
    };

export interface CandidateCheckResult {
  readonly passed: boolean;
  /** True when no check ran: the same tree passed the same checks before (`passedTrees`, or a head whose own tree it is). */
  readonly reused: boolean;
  /** `<configKey>|<tree>`: what a pass is remembered by. */
  readonly key: string;
  /** The first failing check: its name, conclusion and output reference. */
  readonly failure: { readonly check: string | null; readonly conclusion: string | null; readonly log: string | null } | null;
}

export interface MergeQueuePort {
  /** Build the candidate of `entries` on the base's tip (or say which entry cannot be built, and why). */
  buildCandidate(baseRef: string, entries: readonly QueueCandidateEntry[]): Promise<CandidateBuild>;
  /** Run the trusted checks of the candidate's base on exactly its tree (jailed), unless `passedTrees` or a head's own checks already answer for that tree. */
  checkCandidate(
    candidate: MergeCandidate,
    options: { readonly passedTrees: readonly string[]; readonly signal?: AbortSignal; readonly onProgress?: (text: string) => void },
  ): Promise<CandidateCheckResult>;
  /**
   * Land the candidate: the local forge moves the base to its tip with one
   * compare-and-swap against `baseSha`; GitHub merges each change in order,
   * pinned to its reviewed head, each only while the base is still what the
   * previous step left. Nothing landed yet: `BASE_MOVED` when the base moved,
   * `HEAD_MOVED` when a change's head moved, `NOT_MERGEABLE` (details
   * `changeId`) when the forge refuses to merge a change (nothing changes
   * then). Once one change landed, the answer says what landed and why the
   * rest did not.
   */
  landCandidate(candidate: MergeCandidate): Promise<CandidateLanding>;
}

/** One change of a candidate as it landed on the base. */
export interface LandedChange {
  readonly changeId: string;
  readonly headSha: string;
  /** Its commit on the base. */
  readonly mergeCommit: string;
}

/** What `landCandidate` did. */
export interface CandidateLanding {
  /** The changes that landed, in queue order (a prefix of the candidate's). */
  readonly landed: readonly LandedChange[];
  /**
   * Set when the base moved in the window between its last read and a merge
   * (someone else pushed): what landed is not the tree the checks passed on.
   * It concerns the last change of `landed` (landing stops right after it).
   * `tip`/`tree`: the base after the landing; `staged`: the staging commit
   * the forge pushed for that tip so its checks test it (null: none pushed).
   */
  readonly untested: {
    readonly tip: string;
    readonly tree: string;
    readonly testedTree: string;
    readonly reason: string;
    readonly staged: { readonly ref: string; readonly sha: string } | null;
  } | null;
  /**
   * Set when landing stopped after some changes landed (the rest stay queued
   * and are built again); `changeId`: with `NOT_MERGEABLE`, the change the
   * forge refused to merge.
   */
  readonly stopped: { readonly code: 'BASE_MOVED' | 'HEAD_MOVED' | 'NOT_MERGEABLE'; readonly reason: string; readonly changeId?: string } | null;
}

/** Typed events a forge delivers (webhooks on GitHub, local actions locally). */
export type ForgeEvent =
  | { readonly kind: 'change-opened'; readonly changeId: string; readonly headSha: string; readonly deliveryId: string }
  | { readonly kind: 'change-synchronized'; readonly changeId: string; readonly headSha: string; readonly deliveryId: string }
  | { readonly kind: 'change-closed'; readonly changeId: string; readonly merged: boolean; readonly deliveryId: string }
  | {
      readonly kind: 'comment-created' | 'comment-edited';
      readonly changeId: string;
      readonly comment: ForgeComment;
      readonly deliveryId: string;
    }
  | {
      readonly kind: 'check-completed';
      /** Changes whose head is `headSha`, when the forge says so (empty: look them up by sha). */
      readonly changeIds: readonly string[];
      readonly headSha: string;
      readonly check: ForgeCheck;
      readonly deliveryId: string;
    }
  | {
      readonly kind: 'review-submitted';
      readonly changeId: string;
      readonly reviewer: string;
      readonly state: string;
      readonly headSha: string;
      readonly deliveryId: string;
    }
  /** The forge's own merge queue took the change in or let it go (GitHub: `pull_request` `enqueued` / `dequeued`, with its reason). */
  | {
      readonly kind: 'change-enqueued' | 'change-dequeued';
      readonly changeId: string;
      readonly headSha: string;
      readonly reason: string | null;
      readonly deliveryId: string;
    }
  /**
   * A merge group of the forge's queue was asked for checks or went away
   * (GitHub: `merge_group`). `headSha` is the group's commit, never a change's
   * head; `changeIds` are the changes its ref names.
   */
  | {
      readonly kind: 'merge-group';
      readonly action: 'checks_requested' | 'destroyed';
      readonly changeIds: readonly string[];
      readonly headSha: string;
      readonly baseRef: string;
      readonly reason: string | null;
      readonly deliveryId: string;
    }
  | { readonly kind: 'base-pushed'; readonly ref: string; readonly before: string; readonly after: string; readonly deliveryId: string };
