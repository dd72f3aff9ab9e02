/**
 * Payloads of the deliveries tests send most, built on the real examples of
 * @octokit/webhooks-examples: a check run completed for some pull requests,
 * a comment on a pull request, a pull request's `closed` / `enqueued` /
 * `dequeued`, and a merge group's `checks_requested` / `destroyed`. Without
 * `repository` and `installation`: each harness adds its own.
 */
import type { ModelQueueEntry } from './merge-queue-model.js';
import type { ModelCheckRun, ModelComment, RepositoryModel } from './model.js';
import { fixture } from './webhooks.js';

/** `check_run.completed` for `run` (its name, head, times), naming `pulls`, with `conclusion` (and its suite's `headBranch`, when given). */
export function checkRunCompletedPayload(
  serverUrl: string,
  repositoryId: number,
  run: Pick<ModelCheckRun, 'id' | 'name' | 'headSha' | 'startedAt' | 'completedAt'>,
  conclusion: string,
  pulls: readonly number[],
  headBranch?: string,
): Record<string, unknown> {
  const base = fixture('check_run', 'completed.payload.json');
  const example = base.check_run as Record<string, unknown>;
  const checkRun = {
    ...example,
    ...(headBranch === undefined
      ? {}
      : { check_suite: { ...(example.check_suite as object), head_branch: headBranch, head_sha: run.headSha, pull_requests: [] } }),
    id: run.id,
    name: run.name,
    head_sha: run.headSha,
    status: 'completed',
    conclusion,
    started_at: run.startedAt,
    completed_at: run.completedAt,
    pull_requests: pulls.map((number) => ({
      number,
      id: number,
      url: `${serverUrl}/pulls/${number}`,
      head: { sha: run.headSha, ref: 'x', repo: { id: repositoryId } },
      base: { sha: 'x', ref: 'main', repo: { id: repositoryId } },
    })),
  };
  return { ...base, action: 'completed', check_run: checkRun };
}

/** `issue_comment.<action>` for `comment` on pull request `pr` of `owner/repo`, its body as `body`. */
export function issueCommentPayload(
  serverUrl: string,
  fullName: string,
  pr: number,
  comment: Pick<ModelComment, 'id' | 'author' | 'createdAt' | 'updatedAt'>,
  body: string,
  action = 'created',
): Record<string, unknown> {
  const base = fixture('issue_comment', 'created.payload.json');
  return {
    ...base,
    action,
    issue: { ...(base.issue as object), number: pr, pull_request: { url: `${serverUrl}/repos/${fullName}/pulls/${pr}` } },
    comment: {
      ...(base.comment as object),
      id: comment.id,
      body,
      user: { login: comment.author, id: 7, type: 'User' },
      created_at: comment.createdAt,
      updated_at: comment.updatedAt,
    },
  };
}

/** The `repository` object of a payload for `owner/name` (the example's fields, this repository's names). */
export function repositoryPayload(owner: string, name: string, id?: number): Record<string, unknown> {
  const base = fixture('issue_comment', 'created.payload.json').repository as Record<string, unknown>;
  return { ...base, ...(id === undefined ? {} : { id }), name, full_name: `${owner}/${name}`, owner: { ...(base.owner as object), login: owner } };
}

/** `pull_request.<action>` for pull request `number` as the model has it (`reason` for `dequeued`). */
export function pullRequestPayload(
  model: RepositoryModel,
  number: number,
  action: 'closed' | 'enqueued' | 'dequeued',
  reason?: string,
): Record<string, unknown> {
  const base = fixture('pull_request', 'closed.payload.json');
  const example = base.pull_request as Record<string, Record<string, unknown>>;
  const pr = model.pull(number);
  return {
    ...base,
    action,
    number,
    ...(reason === undefined ? {} : { reason }),
    pull_request: {
      ...example,
      number,
      title: pr.title,
      state: pr.state,
      merged: pr.merged,
      merge_commit_sha: pr.mergeCommitSha,
      closed_at: pr.closedAt,
      merged_at: pr.merged ? pr.closedAt : null,
      head: { ...example.head, ref: pr.headRef, sha: model.headSha(number) },
      base: { ...example.base, ref: pr.baseRef, sha: model.baseSha(number) },
    },
  };
}

/** `merge_group.<action>` for a queue entry's merge group (`reason` for `destroyed`: `merged`, `dequeued` or `invalidated`). */
export function mergeGroupPayload(
  entry: ModelQueueEntry,
  baseSha: string,
  action: 'checks_requested' | 'destroyed',
  reason?: 'merged' | 'dequeued' | 'invalidated',
): Record<string, unknown> {
  const base = fixture('merge_group', 'checks_requested.payload.json');
  const group = base.merge_group as Record<string, unknown>;
  return {
    ...base,
    action,
    ...(reason === undefined ? {} : { reason }),
    merge_group: {
      ...group,
      head_sha: entry.groupSha,
      head_ref: `refs/heads/${entry.groupBranch}`,
      base_sha: baseSha,
      base_ref: `refs/heads/${entry.base}`,
      head_commit: { ...(group.head_commit as object), id: entry.groupSha },
    },
  };
}
