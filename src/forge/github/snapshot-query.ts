/**
 * The one GraphQL query a pull request snapshot takes, and the shape of its
 * answer. The same query pages on (checks after a cursor, older comments
 * before a cursor) only when a pull request has more than a page of either.
 * It also reads the base's branch protection rule and the rules of the
 * rulesets active on the base (the required checks of both), whether the
 * head lives in a fork, and the repository's default branch (the trusted
 * branch), so none of them costs a request of its own. For GitHub's merge
 * queue it reads the base's MERGE_QUEUE rule, the pull request's queue entry
 * and the latest time the queue removed it (with GitHub's reason).
 */

export const SNAPSHOT_OPERATION = 'ProofgateChangeSnapshot';

/** Most ruleset rules read on the base in the one query; a base with more fails the read rather than miss a required check. */
export const MAX_BASE_RULES = 100;

/** What is read of each check run or commit status (the head's, and a merge group's). */
export const CHECK_CONTEXT_FIELDS = `                  __typename
                  ... on CheckRun {
                    databaseId
                    name
                    status
                    conclusion
                    startedAt
                    completedAt
                    detailsUrl
                    checkSuite { app { name } workflowRun { workflow { name } } }
                  }
                  ... on StatusContext {
                    context
                    state
                    targetUrl
                    createdAt
                  }`;

export const SNAPSHOT_QUERY = `query ${SNAPSHOT_OPERATION}($owner: String!, $repo: String!, $number: Int!, $checks: Int!, $checksAfter: String, $comments: Int!, $commentsBefore: String) {
  repository(owner: $owner, name: $repo) {
    defaultBranchRef { name }
    pullRequest(number: $number) {
      id
      number
      title
      url
      state
      isDraft
      merged
      mergeCommit { oid }
      baseRefName
      baseRefOid
      baseRef {
        branchProtectionRule {
          requiresStatusChecks
          requiredStatusCheckContexts
          requiredStatusChecks { context }
        }
        rules(first: ${MAX_BASE_RULES}) {
          pageInfo { hasNextPage }
          nodes {
            type
            parameters {
              ... on RequiredStatusChecksParameters { requiredStatusChecks { context } }
              ... on MergeQueueParameters { mergeMethod }
            }
          }
        }
      }
      headRefName
      headRefOid
      isCrossRepository
      locked
      author { __typename login }
      mergeable
      mergeStateStatus
      reviewDecision
      mergeQueueEntry { position state enqueuedAt }
      timelineItems(itemTypes: [REMOVED_FROM_MERGE_QUEUE_EVENT], last: 1) {
        nodes {
          __typename
          ... on RemovedFromMergeQueueEvent { reason createdAt beforeCommit { oid } }
        }
      }
      labels(first: 100) { nodes { name } }
      commits(last: 1) {
        nodes {
          commit {
            oid
            statusCheckRollup {
              contexts(first: $checks, after: $checksAfter) {
                pageInfo { hasNextPage endCursor }
                nodes {
${CHECK_CONTEXT_FIELDS}
                }
              }
            }
          }
        }
      }
      comments(last: $comments, before: $commentsBefore) {
        pageInfo { hasPreviousPage startCursor }
        nodes {
          databaseId
          author { __typename login }
          body
          createdAt
          updatedAt
        }
      }
    }
  }
}`;

export interface SnapshotVariables {
  readonly owner: string;
  readonly repo: string;
  readonly number: number;
  readonly checks: number;
  readonly checksAfter: string | null;
  readonly comments: number;
  readonly commentsBefore: string | null;
  readonly [key: string]: unknown;
}

export interface GqlActor {
  readonly __typename: string;
  readonly login: string;
}

export interface GqlCheckRun {
  readonly __typename: 'CheckRun';
  readonly databaseId: number | null;
  readonly name: string;
  readonly status: string;
  readonly conclusion: string | null;
  readonly startedAt: string | null;
  readonly completedAt: string | null;
  readonly detailsUrl: string | null;
  readonly checkSuite: {
    readonly app: { readonly name: string } | null;
    readonly workflowRun: { readonly workflow: { readonly name: string } } | null;
  } | null;
}

export interface GqlStatusContext {
  readonly __typename: 'StatusContext';
  readonly context: string;
  readonly state: string;
  readonly targetUrl: string | null;
  readonly createdAt: string;
}

export type GqlCheckContext = GqlCheckRun | GqlStatusContext;

export interface GqlComment {
  readonly databaseId: number | null;
  readonly author: GqlActor | null;
  readonly body: string;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/**
 * The branch protection rule of the base, as far as proofgate reads it.
 * GitHub answers null when no rule protects the base, and also when the
 * caller may not read it (a GitHub App without `administration: read`).
 */
export interface GqlBranchProtectionRule {
  readonly requiresStatusChecks: boolean;
  /** Names of the required checks (GitHub lists every required check here, whichever way it was set). */
  readonly requiredStatusCheckContexts: readonly (string | null)[] | null;
  /** The required checks with the App each must come from (newer GitHub); only the names are read. */
  readonly requiredStatusChecks?: readonly { readonly context: string }[] | null;
}

/**
 * One rule of a ruleset active on the base (`Ref.rules`: repository and
 * organization rulesets, readable with read access). Only the required
 * status checks rule's parameters are read.
 */
export interface GqlRepositoryRule {
  readonly type: string;
  readonly parameters?: { readonly requiredStatusChecks?: readonly { readonly context: string }[] | null; readonly mergeMethod?: string } | null;
}

/** The pull request's entry in its base's merge queue (GitHub's `MergeQueueEntry`). */
export interface GqlMergeQueueEntry {
  readonly position: number;
  readonly state: string;
  readonly enqueuedAt: string;
}

/** GitHub's record of the merge queue removing the pull request without merging it. */
export interface GqlRemovedFromMergeQueue {
  readonly __typename: string;
  readonly reason?: string | null;
  readonly createdAt?: string;
  readonly beforeCommit?: { readonly oid: string } | null;
}

export interface GqlBaseRef {
  readonly branchProtectionRule: GqlBranchProtectionRule | null;
  /** Absent in answers of older shapes (tests that predate rulesets): read as no rule. */
  readonly rules?: {
    readonly pageInfo: { readonly hasNextPage: boolean };
    readonly nodes: readonly (GqlRepositoryRule | null)[] | null;
  } | null;
}

export interface GqlPullRequest {
  /** The node id mutations name (absent in answers of older shapes). */
  readonly id?: string;
  readonly number: number;
  readonly title: string;
  readonly url: string;
  readonly state: string;
  readonly isDraft: boolean;
  readonly merged: boolean;
  readonly mergeCommit: { readonly oid: string } | null;
  readonly baseRefName: string;
  readonly baseRefOid: string;
  /** Null when the base branch no longer exists. */
  readonly baseRef?: GqlBaseRef | null;
  readonly headRefName: string;
  readonly headRefOid: string;
  /** True when the head branch lives in another repository (a fork). */
  readonly isCrossRepository?: boolean;
  readonly locked?: boolean;
  readonly author: GqlActor | null;
  readonly mergeable: string;
  readonly mergeStateStatus: string;
  /** APPROVED, CHANGES_REQUESTED, REVIEW_REQUIRED, or null when the base requires no approving review. */
  readonly reviewDecision: string | null;
  /** Null while the pull request is not queued; absent in answers of older shapes. */
  readonly mergeQueueEntry?: GqlMergeQueueEntry | null;
  /** The latest removal from the merge queue (absent in answers of older shapes). */
  readonly timelineItems?: { readonly nodes: readonly (GqlRemovedFromMergeQueue | null)[] | null } | null;
  readonly labels: { readonly nodes: readonly ({ readonly name: string } | null)[] } | null;
  readonly commits: {
    readonly nodes: readonly ({
      readonly commit: {
        readonly oid: string;
        readonly statusCheckRollup: {
          readonly contexts: {
            readonly pageInfo: { readonly hasNextPage: boolean; readonly endCursor: string | null };
            readonly nodes: readonly (GqlCheckContext | null)[];
          };
        } | null;
      };
    } | null)[];
  };
  readonly comments: {
    readonly pageInfo: { readonly hasPreviousPage: boolean; readonly startCursor: string | null };
    readonly nodes: readonly (GqlComment | null)[];
  };
}

export interface SnapshotResponse {
  readonly repository: { readonly defaultBranchRef?: { readonly name: string } | null; readonly pullRequest: GqlPullRequest | null } | null;
}

/** Put the pull request in its base's merge queue, pinned to the reviewed head (GitHub refuses a stale `expectedHeadOid`). */
export const ENQUEUE_MUTATION = `mutation ProofgateEnqueue($input: EnqueuePullRequestInput!) {
  enqueuePullRequest(input: $input) {
    mergeQueueEntry { position state enqueuedAt }
  }
}`;

/** Take the pull request out of its base's merge queue. */
export const DEQUEUE_MUTATION = `mutation ProofgateDequeue($input: DequeuePullRequestInput!) {
  dequeuePullRequest(input: $input) {
    mergeQueueEntry { position state }
  }
}`;

/**
 * The checks of the merge group GitHub's merge queue made for a queued pull
 * request: the commit its branch `gh-readonly-queue/<base>/pr-<n>-<head>`
 * points at (read only while the pull request is queued; one page).
 */
export const MERGE_GROUP_QUERY = `query ProofgateMergeGroup($owner: String!, $repo: String!, $ref: String!) {
  repository(owner: $owner, name: $repo) {
    ref(qualifiedName: $ref) {
      target {
        __typename
        ... on Commit {
          oid
          statusCheckRollup {
            contexts(first: 100) {
              nodes {
${CHECK_CONTEXT_FIELDS}
              }
            }
          }
        }
      }
    }
  }
}`;

export interface MergeGroupResponse {
  readonly repository: {
    readonly ref: {
      readonly target: {
        readonly __typename: string;
        readonly oid?: string;
        readonly statusCheckRollup?: { readonly contexts: { readonly nodes: readonly (GqlCheckContext | null)[] } } | null;
      } | null;
    } | null;
  } | null;
}

/** The node id a mutation names, when no snapshot has read it yet. */
export const PULL_REQUEST_ID_QUERY = `query ProofgatePullRequestId($owner: String!, $repo: String!, $number: Int!) {
  repository(owner: $owner, name: $repo) {
    pullRequest(number: $number) { id headRefOid }
  }
}`;
