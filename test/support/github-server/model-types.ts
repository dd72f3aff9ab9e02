/** Records of the test server's in-memory repository (see model.ts). */

export type UserType = 'User' | 'Bot' | 'Organization';
export type Role = 'admin' | 'maintain' | 'write' | 'triage' | 'read';
export type ModelMergeable = 'MERGEABLE' | 'CONFLICTING' | 'UNKNOWN';
export type ModelMergeState = 'CLEAN' | 'BEHIND' | 'BLOCKED' | 'DIRTY' | 'HAS_HOOKS' | 'UNKNOWN' | 'UNSTABLE';

export interface ModelUser {
  readonly login: string;
  readonly id: number;
  readonly type: UserType;
}

export type ModelMergeMethod = 'merge' | 'squash' | 'rebase';

export interface ModelPullRequest {
  readonly number: number;
  title: string;
  state: 'open' | 'closed';
  merged: boolean;
  mergeCommitSha: string | null;
  /** How it was merged (null until merged). */
  mergeMethod: ModelMergeMethod | null;
  /** GraphQL's `isCrossRepository`: the head branch lives in a fork (default false). */
  readonly crossRepository: boolean;
  /** The conversation is locked (GraphQL's `locked`): only collaborators may comment. */
  locked: boolean;
  draft: boolean;
  readonly baseRef: string;
  readonly headRef: string;
  readonly author: string;
  mergeable: ModelMergeable;
  mergeState: ModelMergeState;
  /** GraphQL's `reviewDecision`: null when the base requires no approving review (the default). */
  reviewDecision: ModelReviewDecision;
  labels: string[];
  readonly createdAt: string;
  /**
   * When the pull request itself last changed: opened, a comment added or
   * edited through the model, a label added or removed, the head moved, closed
   * or merged. `RepositoryModel.pullUpdatedAt` also counts comments whose
   * `updatedAt` a test set by hand.
   */
  updatedAt: string;
  /** When it was closed or merged; null while open. */
  closedAt: string | null;
}

export type ModelReviewDecision = 'APPROVED' | 'CHANGES_REQUESTED' | 'REVIEW_REQUIRED' | null;

export interface ModelComment {
  readonly id: number;
  readonly issueNumber: number;
  readonly author: string;
  body: string;
  readonly createdAt: string;
  updatedAt: string;
}

export interface ModelCheckRun {
  readonly id: number;
  readonly headSha: string;
  readonly name: string;
  status: 'queued' | 'in_progress' | 'completed' | 'waiting' | 'requested' | 'pending';
  conclusion: string | null;
  startedAt: string | null;
  completedAt: string | null;
  readonly detailsUrl: string | null;
  readonly app: string;
  readonly workflow: string | null;
}

export interface ModelStatus {
  readonly id: number;
  readonly sha: string;
  readonly context: string;
  readonly state: 'pending' | 'success' | 'failure' | 'error';
  readonly targetUrl: string | null;
  readonly createdAt: string;
}

export interface ModelLabel {
  readonly id: number;
  readonly name: string;
  readonly color: string;
  readonly description: string | null;
}

export type AppPermissionLevel = 'read' | 'write' | 'admin';

/** A GitHub App registered with the test server, with its one installation on the model's owner. */
export interface ModelApp {
  readonly appId: number;
  readonly slug: string;
  readonly name: string;
  readonly description: string | null;
  /** Login of the account that owns the App. */
  readonly owner: string;
  readonly permissions: Readonly<Record<string, AppPermissionLevel>>;
  readonly events: readonly string[];
  readonly installationId: number;
  readonly repositorySelection: 'all' | 'selected';
  readonly createdAt: string;
}

/** One required status check of a branch protection rule: its name, and the App it must come from (null: any). */
export interface ModelRequiredCheck {
  readonly context: string;
  readonly app: string | null;
}

/**
 * A ruleset active on one branch, as far as the test server models it: its
 * required status checks (rule type REQUIRED_STATUS_CHECKS), or none, and
 * whether it requires GitHub's merge queue (rule type MERGE_QUEUE, with the
 * queue's merge method), or not (null).
 */
export interface ModelRuleset {
  readonly name: string;
  readonly requiredChecks: readonly ModelRequiredCheck[];
  readonly mergeQueue: { readonly mergeMethod: ModelMergeMethod } | null;
}

/** A branch protection rule on one branch, as far as the test server models it. */
export interface ModelBranchProtection {
  /** GraphQL's `requiresStatusChecks`. */
  readonly requiresStatusChecks: boolean;
  readonly requiredChecks: readonly ModelRequiredCheck[];
  /**
   * False: the rule exists but the caller may not read it (a GitHub App
   * without `administration: read`); GraphQL answers the rule as null.
   */
  readonly readable: boolean;
}
