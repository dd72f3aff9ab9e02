/**
 * GraphQL resolvers over the repository model: the part of GitHub's schema
 * proofgate's snapshot query reads (repository.pullRequest with commits,
 * statusCheckRollup contexts, labels, comments, isCrossRepository and the
 * base ref's branch protection rule and ruleset rules; the repository's default branch; the merge queue entry and the
 * latest removal from the queue), with GitHub's spelling (upper-case
 * enums, bot logins without `[bot]`) and connection rules (first/last from 1
 * to 100, opaque cursors); and the two mutations of GitHub's merge queue,
 * `enqueuePullRequest` and `dequeuePullRequest`, taking their `input` as a
 * variable.
 */
import { GraphqlError, type Args, type Resolved } from './graphql.js';
import { QueueRefusal } from './merge-queue-model.js';
import type { ModelBranchProtection, ModelCheckRun, ModelComment, ModelPullRequest, ModelStatus, RepositoryModel } from './model.js';

/** A pull request's node id (opaque on GitHub; here its number behind a fixed prefix). */
export function pullRequestNodeId(number: number): string {
  return `PR_kwDOproofgate${number}`;
}

function pullRequestOfNode(model: RepositoryModel, id: unknown, path: readonly string[]): ModelPullRequest {
  const match = typeof id === 'string' ? /^PR_kwDOproofgate([1-9][0-9]*)$/.exec(id) : null;
  const pr = match === null ? undefined : model.pulls.get(Number(match[1]));
  if (pr === undefined) throw new GraphqlError(`Could not resolve to a node with the global id of '${String(id)}'`, { type: 'NOT_FOUND', path });
  return pr;
}

/** The mutation root: GitHub's merge queue mutations (a refusal is an UNPROCESSABLE error, and nothing changes). */
export function graphqlMutations(model: RepositoryModel): Resolved {
  const input = (args: Args): Readonly<Record<string, unknown>> =>
    typeof args.input === 'object' && args.input !== null ? (args.input as Record<string, unknown>) : {};
  const refusing = <T>(path: readonly string[], act: () => T): T => {
    try {
      return act();
    } catch (error) {
      if (error instanceof QueueRefusal) throw new GraphqlError(error.message, { type: 'UNPROCESSABLE', path });
      throw error;
    }
  };
  return {
    __typename: 'Mutation',
    enqueuePullRequest: (args: Args, path: readonly string[]) => {
      const { pullRequestId, expectedHeadOid } = input(args);
      const pr = pullRequestOfNode(model, pullRequestId, path);
      if (expectedHeadOid !== undefined && expectedHeadOid !== null && typeof expectedHeadOid !== 'string') {
        throw new GraphqlError('expectedHeadOid must be a GitObjectID', { path });
      }
      refusing(path, () => model.mergeQueue.enqueue(pr.number, (expectedHeadOid as string | null | undefined) ?? null));
      return { __typename: 'EnqueuePullRequestPayload', clientMutationId: null, mergeQueueEntry: mergeQueueEntry(model, pr.number) };
    },
    dequeuePullRequest: (args: Args, path: readonly string[]) => {
      const pr = pullRequestOfNode(model, input(args).id, path);
      const entry = mergeQueueEntry(model, pr.number);
      if (entry === null) throw new GraphqlError('Pull request is not in the merge queue', { type: 'UNPROCESSABLE', path });
      model.mergeQueue.dequeue(pr.number, 'MANUAL');
      return { __typename: 'DequeuePullRequestPayload', clientMutationId: null, mergeQueueEntry: entry };
    },
  };
}

/** The pull request's entry in its base's merge queue, or null. */
function mergeQueueEntry(model: RepositoryModel, number: number): Resolved | null {
  const entry = model.mergeQueue.entry(number);
  if (entry === null) return null;
  const checks = model.checkRuns.filter((run) => run.headSha === entry.groupSha);
  const settled = checks.length > 0 && checks.every((run) => run.status === 'completed');
  return {
    __typename: 'MergeQueueEntry',
    id: `MQE_${number}`,
    position: model.mergeQueue.position(number),
    state: settled ? 'MERGEABLE' : 'AWAITING_CHECKS',
    enqueuedAt: entry.enqueuedAt,
    headCommit: { __typename: 'Commit', oid: entry.headSha },
  };
}

export function graphqlRoot(model: RepositoryModel, baseUrl: string): Resolved {
  return {
    __typename: 'Query',
    repository: (args: Args, path: readonly string[]) => {
      if (args.owner !== model.owner || args.name !== model.repo) {
        throw new GraphqlError(`Could not resolve to a Repository with the name '${String(args.owner)}/${String(args.name)}'.`, { type: 'NOT_FOUND', path });
      }
      return repository(model, baseUrl);
    },
  };
}

function repository(model: RepositoryModel, baseUrl: string): Resolved {
  return {
    __typename: 'Repository',
    name: model.repo,
    defaultBranchRef: model.branches.has(model.defaultBranch) ? { __typename: 'Ref', name: model.defaultBranch } : null,
    ref: (args: Args) => {
      const name = typeof args.qualifiedName === 'string' ? args.qualifiedName.replace(/^refs\/heads\//, '') : '';
      const sha = model.branches.get(name);
      return sha === undefined ? null : { __typename: 'Ref', name, prefix: 'refs/heads/', target: commit(model, sha) };
    },
    // A commit by its id (GitHub's `object(oid:)`), with its checks; null for an id the repository does not have.
    object: (args: Args) => (typeof args.oid === 'string' && model.hasCommit(args.oid) ? commit(model, args.oid) : null),
    pullRequest: (args: Args, path: readonly string[]) => {
      const pr = model.pulls.get(Number(args.number));
      if (pr === undefined) {
        throw new GraphqlError(`Could not resolve to a PullRequest with the number of ${String(args.number)}.`, { type: 'NOT_FOUND', path });
      }
      return pullRequest(model, pr, baseUrl);
    },
  };
}

function actor(model: RepositoryModel, login: string): Resolved {
  const user = model.user(login);
  return { __typename: user.type, login: user.type === 'Bot' ? login.replace(/\[bot\]$/, '') : login };
}

function pullRequest(model: RepositoryModel, pr: ModelPullRequest, baseUrl: string): Resolved {
  const headSha = model.headSha(pr.number);
  const state = pr.merged ? 'MERGED' : pr.state === 'open' ? 'OPEN' : 'CLOSED';
  return {
    __typename: 'PullRequest',
    number: pr.number,
    title: pr.title,
    url: `${baseUrl}/${model.owner}/${model.repo}/pull/${pr.number}`,
    state,
    isDraft: pr.draft,
    merged: pr.merged,
    mergeCommit: pr.mergeCommitSha === null ? null : { __typename: 'Commit', oid: pr.mergeCommitSha },
    baseRefName: pr.baseRef,
    baseRefOid: model.baseSha(pr.number),
    baseRef: model.branches.has(pr.baseRef) ? baseRef(model, pr.baseRef) : null,
    headRefName: pr.headRef,
    headRefOid: headSha,
    isCrossRepository: pr.crossRepository,
    locked: pr.locked,
    author: actor(model, pr.author),
    mergeable: pr.mergeable,
    mergeStateStatus: pr.draft && pr.state === 'open' ? 'DRAFT' : pr.mergeState,
    reviewDecision: pr.reviewDecision,
    id: pullRequestNodeId(pr.number),
    mergeQueueEntry: mergeQueueEntry(model, pr.number),
    timelineItems: (args: Args) => {
      const last = limit(args.last, 'last');
      const types = Array.isArray(args.itemTypes) ? args.itemTypes : [];
      const removals = types.includes('REMOVED_FROM_MERGE_QUEUE_EVENT') ? model.mergeQueue.removals.filter((r) => r.number === pr.number) : [];
      const others = types.filter((type) => type !== 'REMOVED_FROM_MERGE_QUEUE_EVENT');
      if (others.length > 0) throw new GraphqlError(`the test server models no timeline items of type ${String(others[0])}`);
      return {
        __typename: 'PullRequestTimelineItemsConnection',
        nodes: removals.slice(-last).map((removal) => ({
          __typename: 'RemovedFromMergeQueueEvent',
          reason: removal.reason,
          createdAt: removal.at,
          beforeCommit: { __typename: 'Commit', oid: removal.headSha },
        })),
      };
    },
    labels: (args: Args) => {
      const first = limit(args.first, 'first');
      return { __typename: 'LabelConnection', nodes: pr.labels.slice(0, first).map((name) => ({ __typename: 'Label', name })) };
    },
    commits: (args: Args) => {
      limit(args.last, 'last');
      return { __typename: 'PullRequestCommitConnection', nodes: [{ __typename: 'PullRequestCommit', commit: commit(model, headSha) }] };
    },
    comments: (args: Args) => commentConnection(model, model.commentsOf(pr.number), args),
  };
}

/** The base branch as a `Ref`: its branch protection rule is null when none protects it or the caller may not read it. */
function baseRef(model: RepositoryModel, name: string): Resolved {
  const rule = model.protections.get(name);
  return {
    __typename: 'Ref',
    name,
    prefix: 'refs/heads/',
    branchProtectionRule: rule === undefined || !rule.readable ? null : branchProtectionRule(name, rule),
    rules: (args: Args) => {
      const first = limit(args.first, 'first');
      const queueRule = (ruleset: { readonly mergeQueue: { readonly mergeMethod: string } | null }): Resolved[] =>
        ruleset.mergeQueue === null
          ? []
          : [
              {
                __typename: 'RepositoryRule',
                type: 'MERGE_QUEUE',
                parameters: { __typename: 'MergeQueueParameters', mergeMethod: ruleset.mergeQueue.mergeMethod.toUpperCase() },
              },
            ];
      const nodes = (model.rulesets.get(name) ?? []).flatMap((ruleset): Resolved[] =>
        ruleset.requiredChecks.length === 0
          ? ruleset.mergeQueue === null
            ? [{ __typename: 'RepositoryRule', type: 'DELETION', parameters: null }]
            : queueRule(ruleset)
          : [
              ...queueRule(ruleset),
              {
                __typename: 'RepositoryRule',
                type: 'REQUIRED_STATUS_CHECKS',
                parameters: {
                  __typename: 'RequiredStatusChecksParameters',
                  requiredStatusChecks: ruleset.requiredChecks.map((check) => ({
                    __typename: 'StatusCheckConfiguration',
                    context: check.context,
                    integrationId: check.app === null ? null : 1,
                  })),
                },
              },
            ],
      );
      return { __typename: 'RepositoryRuleConnection', pageInfo: { __typename: 'PageInfo', hasNextPage: nodes.length > first }, nodes: nodes.slice(0, first) };
    },
  };
}

function branchProtectionRule(pattern: string, rule: ModelBranchProtection): Resolved {
  return {
    __typename: 'BranchProtectionRule',
    pattern,
    requiresStatusChecks: rule.requiresStatusChecks,
    requiredStatusCheckContexts: rule.requiredChecks.map((check) => check.context),
    requiredStatusChecks: rule.requiredChecks.map((check) => ({
      __typename: 'RequiredStatusCheckDescription',
      context: check.context,
      app: check.app === null ? null : { __typename: 'App', name: check.app, slug: check.app.toLowerCase().replace(/[^a-z0-9]+/g, '-') },
    })),
  };
}

function commit(model: RepositoryModel, sha: string): Resolved {
  const runs = latestBy(
    model.checkRuns.filter((r) => r.headSha === sha),
    (r) => `${r.app}\u0000${r.name}`,
  );
  const statuses = latestBy(
    model.statuses.filter((s) => s.sha === sha),
    (s) => s.context,
  );
  const contexts: Resolved[] = [...runs.map(checkRun), ...statuses.map(statusContext)];
  return {
    __typename: 'Commit',
    oid: sha,
    statusCheckRollup:
      contexts.length === 0
        ? null
        : {
            __typename: 'StatusCheckRollup',
            state: 'PENDING',
            contexts: (args: Args) => {
              const first = limit(args.first, 'first');
              const start = args.after === null || args.after === undefined ? 0 : decodeCursor(args.after) + 1;
              const nodes = contexts.slice(start, start + first);
              return {
                __typename: 'StatusCheckRollupContextConnection',
                totalCount: contexts.length,
                pageInfo: {
                  __typename: 'PageInfo',
                  hasNextPage: start + first < contexts.length,
                  endCursor: nodes.length === 0 ? null : encodeCursor(start + nodes.length - 1),
                },
                nodes,
              };
            },
          },
  };
}

function checkRun(run: ModelCheckRun): Resolved {
  return {
    __typename: 'CheckRun',
    databaseId: run.id,
    name: run.name,
    status: run.status.toUpperCase(),
    conclusion: run.conclusion === null ? null : run.conclusion.toUpperCase(),
    startedAt: run.startedAt,
    completedAt: run.completedAt,
    detailsUrl: run.detailsUrl,
    checkSuite: {
      __typename: 'CheckSuite',
      app: { __typename: 'App', name: run.app },
      workflowRun: run.workflow === null ? null : { __typename: 'WorkflowRun', workflow: { __typename: 'Workflow', name: run.workflow } },
    },
  };
}

function statusContext(status: ModelStatus): Resolved {
  return {
    __typename: 'StatusContext',
    context: status.context,
    state: status.state.toUpperCase(),
    targetUrl: status.targetUrl,
    createdAt: status.createdAt,
  };
}

function commentConnection(model: RepositoryModel, all: readonly ModelComment[], args: Args): Resolved {
  const last = limit(args.last, 'last');
  const end = args.before === null || args.before === undefined ? all.length : decodeCursor(args.before);
  const start = Math.max(0, end - last);
  const nodes = all.slice(start, end).map((c) => ({
    __typename: 'IssueComment',
    databaseId: c.id,
    author: actor(model, c.author),
    body: c.body,
    createdAt: c.createdAt,
    updatedAt: c.updatedAt,
  }));
  return {
    __typename: 'IssueCommentConnection',
    totalCount: all.length,
    pageInfo: { __typename: 'PageInfo', hasPreviousPage: start > 0, startCursor: nodes.length === 0 ? null : encodeCursor(start) },
    nodes,
  };
}

/** Last entry per key, ordered by when that entry was added. */
function latestBy<T>(items: readonly T[], key: (item: T) => string): T[] {
  const byKey = new Map<string, T>();
  for (const item of items) {
    byKey.delete(key(item));
    byKey.set(key(item), item);
  }
  return [...byKey.values()];
}

function limit(value: unknown, name: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new GraphqlError(`You must provide a \`first\` or \`last\` value to properly paginate the connection (${name}).`);
  }
  if (value < 1 || value > 100) throw new GraphqlError(`Requesting ${value} records on the connection exceeds the \`${name}\` limit of 100 records.`);
  return value;
}

function encodeCursor(index: number): string {
  return Buffer.from(`cursor:${index}`).toString('base64');
}

function decodeCursor(cursor: unknown): number {
  const text = typeof cursor === 'string' ? Buffer.from(cursor, 'base64').toString('utf8') : '';
  const m = /^cursor:(\d+)$/.exec(text);
  if (m === null) throw new GraphqlError(`\`${String(cursor)}\` does not appear to be a valid cursor.`);
  return Number(m[1]);
}
