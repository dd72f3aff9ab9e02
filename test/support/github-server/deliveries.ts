/**
 * Payloads of the deliveries tests send most, built on the real examples of
 * @octokit/webhooks-examples: a check run completed for some pull requests,
 * and a comment on a pull request. Without `repository` and `installation`:
 * each harness adds its own.
 */
import type { ModelCheckRun, ModelComment } from './model.js';
import { fixture } from './webhooks.js';

/** `check_run.completed` for `run` (its name, head, times), naming `pulls`, with `conclusion`. */
export function checkRunCompletedPayload(
  serverUrl: string,
  repositoryId: number,
  run: Pick<ModelCheckRun, 'id' | 'name' | 'headSha' | 'startedAt' | 'completedAt'>,
  conclusion: string,
  pulls: readonly number[],
): Record<string, unknown> {
  const base = fixture('check_run', 'completed.payload.json');
  const checkRun = {
    ...(base.check_run as object),
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
